"""A stdio MCP server that speaks only 2024-11-05, written by hand (no SDK).

Whatever version the client asks for, ``initialize`` answers 2024-11-05, as
an old server would; ``server/discover`` is an unknown method to it. Tools:
``hello`` (answers with the version it agreed to), ``ask`` (asks the
client's model mid-call: sampling/createMessage), ``confirm`` (asks the user
mid-call: elicitation/create). One resource, ``note://old``, and one prompt,
``old_prompt``.
"""

import itertools
import json
import sys
from typing import Any

VERSION = "2024-11-05"
TOOLS = [
    {"name": "hello", "description": "Says hello.", "inputSchema": {"type": "object"}},
    {
        "name": "ask",
        "description": "Asks the client's model.",
        "inputSchema": {"type": "object", "properties": {"question": {"type": "string"}}},
    },
    {
        "name": "confirm",
        "description": "Asks the user.",
        "inputSchema": {"type": "object", "properties": {"question": {"type": "string"}}},
    },
]
_ids = itertools.count(1000)
#: Our own requests to the client, by id: the tools/call they belong to and how to finish it.
waiting: dict[int, tuple[Any, str]] = {}


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def result(request_id: Any, value: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "result": value})


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


def ask_client(call_id: Any, tool: str, method: str, params: dict[str, Any]) -> None:
    own = next(_ids)
    waiting[own] = (call_id, tool)
    send({"jsonrpc": "2.0", "id": own, "method": method, "params": params})


def finish(message: dict[str, Any]) -> None:
    call_id, tool = waiting.pop(message["id"])
    if "error" in message:
        result(
            call_id, {**text(f"the client refused: {message['error']['message']}"), "isError": True}
        )
    elif tool == "ask":
        result(call_id, text(f"sampled: {message['result']['content']['text']}"))
    else:
        reply = message["result"]
        result(call_id, text(f"{reply['action']}: {json.dumps(reply.get('content'))}"))


def call(request_id: Any, params: dict[str, Any]) -> None:
    name = params.get("name")
    question = (params.get("arguments") or {}).get("question", "?")
    if name == "hello":
        result(request_id, text(f"hello from {VERSION}"))
    elif name == "ask":
        message = {"role": "user", "content": {"type": "text", "text": question}}
        ask_client(
            request_id, "ask", "sampling/createMessage", {"messages": [message], "maxTokens": 20}
        )
    elif name == "confirm":
        schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
        ask_client(
            request_id,
            "confirm",
            "elicitation/create",
            {"message": question, "requestedSchema": schema},
        )
    else:
        result(request_id, {**text(f"no tool {name!r}"), "isError": True})


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        request_id, method = message.get("id"), message.get("method")
        if method is None and request_id in waiting:
            finish(message)
            continue
        if request_id is None or method is None:
            continue  # notifications: nothing to do
        params = message.get("params") or {}
        if method == "initialize":
            result(
                request_id,
                {
                    "protocolVersion": VERSION,
                    "capabilities": {"tools": {}, "resources": {}, "prompts": {}},
                    "serverInfo": {"name": "legacy-2024", "version": "1.0"},
                },
            )
        elif method == "ping":
            result(request_id, {})
        elif method == "tools/list":
            result(request_id, {"tools": TOOLS})
        elif method == "tools/call":
            call(request_id, params)
        elif method == "resources/list":
            result(request_id, {"resources": [{"uri": "note://old", "name": "old note"}]})
        elif method == "resources/read":
            contents = [{"uri": params.get("uri"), "mimeType": "text/plain", "text": "an old note"}]
            result(request_id, {"contents": contents})
        elif method == "prompts/list":
            result(
                request_id, {"prompts": [{"name": "old_prompt", "description": "An old prompt."}]}
            )
        elif method == "prompts/get":
            message = {"role": "user", "content": {"type": "text", "text": "Say it the old way."}}
            result(request_id, {"messages": [message]})
        else:
            send(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "error": {"code": -32601, "message": f"Method not found: {method}"},
                }
            )


if __name__ == "__main__":
    main()
