"""Tests of core/base/: the exception tree, the collector, severity and exit codes."""
