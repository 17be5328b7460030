"""Tests of core/settings/: the config, loaded from hostile documents too."""
