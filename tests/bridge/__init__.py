"""Tests of core/bridge/: the bridge process, its relay, its HTTP/1.1 client, its autostart."""
