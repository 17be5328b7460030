"""A stdio MCP server that speaks only 2024-11-05, written by hand (no SDK).

Whatever version the client asks for, ``initialize`` answers 2024-11-05, as
an old server would. One tool, ``hello``, answers with the protocol version
it agreed to.
"""

import json
import sys

VERSION = "2024-11-05"


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        request_id, method = message.get("id"), message.get("method")
        if request_id is None or method is None:
            continue  # notifications and answers: nothing to do
        if method == "initialize":
            result: dict[str, object] = {
                "protocolVersion": VERSION,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "legacy-2024", "version": "1.0"},
            }
        elif method == "ping":
            result = {}
        elif method == "tools/list":
            tool = {
                "name": "hello",
                "description": "Says hello.",
                "inputSchema": {"type": "object"},
            }
            result = {"tools": [tool]}
        elif method == "tools/call":
            result = {"content": [{"type": "text", "text": f"hello from {VERSION}"}]}
        else:
            send(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "error": {"code": -32601, "message": f"Method not found: {method}"},
                }
            )
            continue
        send({"jsonrpc": "2.0", "id": request_id, "result": result})


if __name__ == "__main__":
    main()
