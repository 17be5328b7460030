"""Tests of core/protocol/: JSON-RPC, streamable HTTP's server side, turns."""
