"""Tests of core/cli/: the command line, client files and installs, the desktop entry."""
