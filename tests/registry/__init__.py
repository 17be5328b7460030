"""Tests of core/registry/: the worker registry, heartbeats, diagnostics, the call journal's file."""
