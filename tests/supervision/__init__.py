"""Tests of core/supervision/: children, the call path, breakers, the stop contract."""
