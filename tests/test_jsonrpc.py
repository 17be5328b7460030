"""core.protocol.jsonrpc spells a few SDK constants itself (to keep the SDK out of the
tray's memory); this keeps them equal to the SDK's, so they cannot drift."""

import subprocess
import sys

import mcp_types
from mcp_types import version

from core.protocol import jsonrpc


def test_the_error_codes_and_handshake_versions_match_the_sdk() -> None:
    for name in (
        "PARSE_ERROR",
        "INVALID_REQUEST",
        "METHOD_NOT_FOUND",
        "INTERNAL_ERROR",
        "REQUEST_TIMEOUT",
    ):
        assert getattr(jsonrpc, name) == getattr(mcp_types, name), name
    assert jsonrpc.HANDSHAKE_PROTOCOL_VERSIONS == version.HANDSHAKE_PROTOCOL_VERSIONS
    assert jsonrpc.LATEST_HANDSHAKE_VERSION == version.LATEST_HANDSHAKE_VERSION


def test_the_running_tray_does_not_load_the_mcp_sdk() -> None:
    code = (
        "import sys, core.serving.service, core.cli.main, core.bridge.main\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]"
