"""A stdio MCP server written by hand (no SDK), lean enough that a bench measures
the tray in front of it rather than itself: tens of µs of CPU per call where
tests/servers/echo.py, on the SDK, spends about 2 ms. bench/scale.py's child.

Handshake era only (``initialize`` grants the client's version when it knows
it, else 2025-11-25; ``server/discover`` is an unknown method, so the tray
settles on the handshake era). One tool, ``echo``, readOnly and idempotent,
answering its ``text`` argument; ``ping``.
"""

import json
import sys
from typing import Any

VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
TOOLS = [
    {
        "name": "echo",
        "description": "Echoes its text.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        "annotations": {"readOnlyHint": True, "idempotentHint": True},
    }
]


def answer(message: dict[str, Any]) -> dict[str, Any] | None:
    method, params = message.get("method"), message.get("params") or {}
    if "id" not in message or method is None:
        return None  # a notification, or a reply to nothing we asked
    if method == "tools/call" and params.get("name") == "echo":
        text = str((params.get("arguments") or {}).get("text", ""))
        result: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    elif method == "initialize":
        asked = params.get("protocolVersion")
        result = {
            "protocolVersion": asked if asked in VERSIONS else VERSIONS[-1],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "lean-echo", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "ping":
        result = {}
    else:
        error = {"code": -32601, "message": f"Method not found: {method}"}
        return {"jsonrpc": "2.0", "id": message["id"], "error": error}
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def main() -> None:
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        reply = answer(json.loads(line))
        if reply is not None:
            out.write(json.dumps(reply).encode() + b"\n")
            out.flush()


if __name__ == "__main__":
    main()
