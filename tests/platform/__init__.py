"""Tests of core/platform/: the OS-specific parts, with the OS's pieces injected where needed."""
