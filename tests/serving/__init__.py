"""Tests of core/serving/: the gateway, sessions, the aggregate, the control API, the tray service."""
