"""core.protocol.jsonrpc spells a few SDK constants itself (to keep the SDK out of the
tray's memory); this keeps them equal to the SDK's, so they cannot drift. And its
quick look at a body's bytes (``plainly_usable``) is held to the full walk
(``unusable``): on hypothesis-generated values in every encoding ``json.loads``
reads, it never clears what the walk refuses."""

import json
import subprocess
import sys

import mcp_types
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
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


#: JSON values with any text, lone surrogates included (as a client may escape them).
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=40,
)


def deep(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


@settings(max_examples=400, deadline=None)
@given(
    value=json_values,
    ascii_only=st.booleans(),
    encoding=st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "utf-32"]),
)
def test_a_body_cleared_at_a_glance_is_one_the_full_walk_clears(
    value: object, ascii_only: bool, encoding: str
) -> None:
    body = json.dumps(value, ensure_ascii=ascii_only).encode(encoding, "surrogatepass")

    if jsonrpc.plainly_usable(body):
        assert jsonrpc.unusable(jsonrpc.loads(body)) is None


@pytest.mark.parametrize(
    "body",
    [
        deep(jsonrpc.MAX_NESTING + 1),
        b'{"text":"\\ud800"}',
        '{"text":"\ud800"}'.encode("utf-8", "surrogatepass"),
        '{"text":"\ud800"}'.encode("utf-16", "surrogatepass"),
    ],
    ids=["too-deep", "escaped-surrogate", "raw-surrogate", "utf-16-surrogate"],
)
def test_what_the_full_walk_refuses_is_never_cleared_at_a_glance(body: bytes) -> None:
    assert jsonrpc.unusable(jsonrpc.loads(body)) is not None
    assert not jsonrpc.plainly_usable(body)


def test_an_everyday_call_is_cleared_at_a_glance() -> None:
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "héllo, wörld"}},
    }

    assert jsonrpc.plainly_usable(json.dumps(call, ensure_ascii=False).encode())
    assert jsonrpc.plainly_usable(deep(jsonrpc.MAX_NESTING))
