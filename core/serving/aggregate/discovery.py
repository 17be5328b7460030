"""Progressive discovery: a profile with ``"discovery": "search"`` offers three tools, not its members'.

A client of such a profile lists ``search_tools``, ``describe_tools`` and
``call_tool`` instead of every member's tools, so its model reads three
short schemas, finds the tools it needs by a query, reads their full
schemas, and calls them by name. The other profiles of the same servers
are unchanged.

- ``search_tools`` ranks the profile's tools (the same names, filters and
  held-tool screening as its full list: a view's ``tools``) with BM25 over
  their names, descriptions and parameter names, through SQLite's FTS5 (in
  the standard library's ``sqlite3``; no new dependency). The index is an
  in-memory database made with the view, so when the lists change and the
  view is rebuilt (off the call path, core.serving.aggregate.aggregate) so is it.
- ``describe_tools`` gives the full definitions (schemas, annotations) of
  the names asked for.
- ``call_tool`` is the member's ``tools/call`` in every respect: the
  aggregate routes it through the one pipeline like a direct call
  (placement, the link's breaker, approvals and held tools, respawn and one
  retry when the tool is safe to repeat).

Members that are not running (parked, respawning, asleep) are searched in
the catalog they last listed, as the full list is.
"""

import json
import re
import sqlite3
from collections.abc import Iterable, Mapping
from typing import Any, Final

from core.base.errors import RpcError
from core.protocol.jsonrpc import INVALID_PARAMS

SEARCH_TOOL: Final = "search_tools"
DESCRIBE_TOOL: Final = "describe_tools"
CALL_TOOL: Final = "call_tool"
#: What ``search_tools`` gives without a ``limit``, and the most it gives.
DEFAULT_LIMIT: Final = 10
MAX_LIMIT: Final = 50
#: A description is cut to its first line, at most this long, in search results.
LINE_CHARS: Final = 160
#: BM25 weights of the indexed columns: a word of the name counts most.
WEIGHTS: Final = (5.0, 1.0, 2.0)

_READ_ONLY: Final = {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": False}

#: The only tools a discovery profile lists.
META_TOOLS: Final = (
    {
        "name": SEARCH_TOOL,
        "description": (
            "Find the tools of this mcp-tray profile that fit a task: ranked names with a "
            "one-line description. Then call describe_tools for their parameters, and "
            "call_tool to run one."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "words of the task or tool"},
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_LIMIT,
                    "description": f"how many tools at most (default {DEFAULT_LIMIT})",
                },
            },
            "required": ["query"],
        },
        "annotations": _READ_ONLY,
    },
    {
        "name": DESCRIBE_TOOL,
        "description": "The full definitions (input schema, annotations) of tools by name.",
        "inputSchema": {
            "type": "object",
            "properties": {"names": {"type": "array", "items": {"type": "string"}}},
            "required": ["names"],
        },
        "annotations": _READ_ONLY,
    },
    {
        "name": CALL_TOOL,
        "description": "Call a tool found with search_tools, with arguments as its schema says.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "the tool's name, as search gave it"},
                "arguments": {"type": "object"},
            },
            "required": ["name"],
        },
    },
)
META_NAMES: Final = frozenset({SEARCH_TOOL, DESCRIBE_TOOL, CALL_TOOL})

_WORD: Final = re.compile(r"\w+")


def one_line(text: object) -> str:
    """A description's first line, cut to ``LINE_CHARS``."""
    line = str(text or "").strip().split("\n", 1)[0].strip()
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1].rstrip() + "…"


def parameter_names(tool: Mapping[str, Any]) -> list[str]:
    schema = tool.get("inputSchema")
    properties = schema.get("properties") if isinstance(schema, dict) else None
    return [str(name) for name in properties] if isinstance(properties, dict) else []


def fts_query(text: str) -> str | None:
    """The words of ``text`` as an FTS5 query: any of them, each also as a prefix (quoted,
    so no word is read as FTS5 syntax); None when it has no word."""
    words = _WORD.findall(text.lower())
    return " OR ".join(f'"{word}"*' for word in dict.fromkeys(words)) or None


class ToolIndex:
    """A profile's tools, searchable (BM25 over FTS5, in memory)."""

    def __init__(self, tools: Iterable[Mapping[str, Any]]) -> None:
        self.tools: dict[str, Mapping[str, Any]] = {}
        # Made on a worker thread, searched on core's loop: never both at once.
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.execute(
            "CREATE VIRTUAL TABLE tools USING fts5(name, description, parameters, "
            "tokenize = 'unicode61')"
        )
        rows = []
        for tool in tools:
            name = str(tool.get("name"))
            self.tools[name] = tool
            # "fs__read_file" is found by "read" and "file": "_" separates words here.
            words = name.replace("_", " ")
            parameters = " ".join(parameter_names(tool)).replace("_", " ")
            rows.append((words, str(tool.get("description") or ""), parameters, name))
        self._db.execute("CREATE TABLE names (rowid INTEGER PRIMARY KEY, name TEXT)")
        for rowid, (words, description, parameters, name) in enumerate(rows, start=1):
            self._db.execute(
                "INSERT INTO tools (rowid, name, description, parameters) VALUES (?, ?, ?, ?)",
                (rowid, words, description, parameters),
            )
            self._db.execute("INSERT INTO names (rowid, name) VALUES (?, ?)", (rowid, name))

    def search(self, query: str, limit: int = DEFAULT_LIMIT) -> list[str]:
        """The names of the tools that fit ``query`` best, best first."""
        match = fts_query(query)
        if match is None:
            return []
        weights = ", ".join(map(str, WEIGHTS))
        rows = self._db.execute(
            f"SELECT names.name FROM tools JOIN names ON names.rowid = tools.rowid "
            f"WHERE tools MATCH ? ORDER BY bm25(tools, {weights}) LIMIT ?",
            (match, limit),
        ).fetchall()
        return [name for (name,) in rows]

    def close(self) -> None:
        self._db.close()


def _result(text: str, structured: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "structuredContent": structured}


def _error(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


def search_answer(index: ToolIndex, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``search_tools``: ranked names, each with its one-line description."""
    query = arguments.get("query")
    limit = arguments.get("limit", DEFAULT_LIMIT)
    if not isinstance(query, str) or not query.strip():
        return _error("search_tools needs 'query': some words of the task or of a tool's name")
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        return _error(f"search_tools' 'limit' must be a whole number from 1 to {MAX_LIMIT}")
    found = [
        {"name": name, "description": one_line(index.tools[name].get("description"))}
        for name in index.search(query, min(limit, MAX_LIMIT))
    ]
    if not found:
        return _result(
            f"No tool of this profile matches {query!r}: try other words "
            f"({len(index.tools)} tools are searched).",
            {"tools": []},
        )
    lines = [f"{tool['name']}: {tool['description']}".rstrip(": ") for tool in found]
    lines.append("describe_tools gives their parameters; call_tool runs one.")
    return _result("\n".join(lines), {"tools": found})


def describe_answer(index: ToolIndex, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``describe_tools``: the full definitions of the names asked for."""
    names = arguments.get("names")
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        return _error("describe_tools needs 'names': a list of tool names from search_tools")
    tools = [dict(index.tools[name]) for name in names if name in index.tools]
    unknown = [name for name in names if name not in index.tools]
    structured: dict[str, Any] = {"tools": tools}
    text = json.dumps(tools, ensure_ascii=False)
    if unknown:
        structured["unknown"] = unknown
        text += (
            f"\nNo tool of this profile is named {', '.join(map(repr, unknown))}: "
            "search_tools gives the names."
        )
    return _result(text, structured)


def call_params(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``call_tool``'s arguments as the ``tools/call`` params they stand for."""
    name = arguments.get("name")
    inner = arguments.get("arguments", {})
    if not isinstance(name, str) or not name:
        raise RpcError(INVALID_PARAMS, "call_tool needs 'name': a tool name from search_tools")
    if not isinstance(inner, dict):
        raise RpcError(INVALID_PARAMS, f"call_tool's 'arguments' for {name!r} must be an object")
    return {"name": name, "arguments": inner}
