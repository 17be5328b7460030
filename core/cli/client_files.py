"""AI clients' own config files: read safely, parsed, merged, in each one's format.

Most clients keep their MCP servers in a JSON file; Codex keeps them in TOML
(``~/.codex/config.toml``, ``[mcp_servers.NAME]`` tables). ``file_of``
gives the client's format, which knows three things:

- ``load``: the file's text as a plain document (dicts, lists, strings);
- ``merged``: the file's text with some servers added or replaced, the rest
  of the user's text kept as it was: JSON by splicing (core.cli.jsonsplice),
  TOML through tomlkit, which keeps comments, order and layout;
- ``render``: a snippet as that client's file would hold it.

Files are read by ``read``, through the hostile-file reader
(core.settings.filereader): no FIFO is waited on, no huge file read whole.
"""

import json
import re
import tomllib
from pathlib import Path
from typing import Any, Final, Protocol

import tomlkit
import tomlkit.exceptions
import tomlkit.items

from core.base.errors import ConfigError
from core.cli.integrations import Client
from core.cli.jsonsplice import merged_text
from core.settings.filereader import Role, read_text

#: Far above any client's file (Claude Code's ~/.claude.json keeps project
#: history and grows to a few MiB); a bigger one is the wrong file.
MAX_CLIENT_FILE_BYTES: Final = 64 * 1024 * 1024

#: A client's config file, to the hostile-file reader. A missing one is no
#: error here: ``install`` creates it, ``import`` says so itself.
CLIENT_FILE: Final = Role(
    limit=MAX_CLIENT_FILE_BYTES,
    noun="a client's config",
    expected="the client's config file",
    kind="a client's config",
    missing_fix=None,
    too_big_fix="point at the client's MCP config file",
    encoding_fix="fix it or move it aside, then try again",
)


def read(path: Path) -> str | None:
    """A client's file as text; None when there is none."""
    return read_text(path, CLIENT_FILE)


class ClientFile(Protocol):
    def load(self, text: str, shown: Path, client: str) -> dict[str, Any]: ...

    def merged(
        self, original: str | None, key: str, changed: dict[str, Any], document: dict[str, Any]
    ) -> str: ...

    def render(self, document: dict[str, Any]) -> str: ...


class JsonFile:
    """JSON, as Claude, Cursor, VS Code and Gemini CLI keep it."""

    def load(self, text: str, shown: Path, client: str) -> dict[str, Any]:
        # An empty file (made by `touch`, or a client that never wrote it) is an empty config.
        if not text.strip():
            return {}
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            if is_jsonc(text):
                raise ConfigError(
                    shown,
                    "holds comments or trailing commas, which mcp-tray would lose by rewriting "
                    "it, so it left the file alone",
                    fix=f"remove them and install again, or paste the entries from "
                    f"`mcp-tray client-config {client}` into it by hand",
                ) from None
            raise ConfigError(
                shown,
                f"is not valid JSON ({exc.msg}, column {exc.colno})",
                line=exc.lineno,
                fix="fix it or move it aside, then install again",
            ) from None
        if not isinstance(data, dict):
            raise ConfigError(
                shown,
                "its top level is not a JSON object",
                fix="fix it or move it aside, then install again",
            )
        return data

    def merged(
        self, original: str | None, key: str, changed: dict[str, Any], document: dict[str, Any]
    ) -> str:
        return merged_text(original, key, changed, document)

    def render(self, document: dict[str, Any]) -> str:
        return json.dumps(document, indent=2)


class TomlFile:
    """TOML, as Codex keeps it: each server a ``[KEY.NAME]`` table."""

    def load(self, text: str, shown: Path, client: str) -> dict[str, Any]:
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(
                shown,
                f"is not valid TOML ({exc})",
                fix="fix it or move it aside, then install again",
            ) from None

    def merged(
        self, original: str | None, key: str, changed: dict[str, Any], document: dict[str, Any]
    ) -> str:
        # tomlkit keeps what it parsed (comments, order, blank lines) as it was.
        doc = tomlkit.parse(original or "")
        servers = doc.get(key)
        if not isinstance(servers, tomlkit.items.Table):
            # [KEY.NAME] headers only, no bare [KEY] header above them.
            servers = tomlkit.table(is_super_table=True)
            doc[key] = servers
        for name, entry in changed.items():
            servers[name] = _table(entry)
        text = tomlkit.dumps(doc)
        if text.endswith("\n\n") and not (original or "").endswith("\n\n"):
            text = text.rstrip("\n") + "\n"  # our table came last: no blank line at the end
        # As for JSON: a mistake may cost formatting, never content.
        if tomllib.loads(text) != document:
            text = tomlkit.dumps(document)
        return text

    def render(self, document: dict[str, Any]) -> str:
        ((key, servers),) = document.items()
        return self.merged(None, key, servers, document).strip() + "\n"


def _table(entry: dict[str, Any]) -> tomlkit.items.Table:
    """A server's entry as a table; its maps (``env``, headers) inline, one line
    each; a blank line after it, as between the tables around it."""
    table = tomlkit.table()
    for name, value in entry.items():
        if isinstance(value, dict):
            inline = tomlkit.inline_table()
            inline.update(value)
            table[name] = inline
        else:
            table[name] = value
    table.add(tomlkit.nl())
    return table


def file_of(spec: Client) -> ClientFile:
    """The format of ``spec``'s config file."""
    return TomlFile() if spec.file_format == "toml" else JsonFile()


def strip_jsonc(text: str) -> str:
    """VS Code's files allow comments and trailing commas; JSON does not."""
    out: list[str] = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        ch = text[i]
        if in_string:
            out.append(ch)
            if ch == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
            out.append(ch)
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        else:
            out.append(ch)
        i += 1
    return re.sub(r",(\s*[}\]])", r"\1", "".join(out))


def is_jsonc(text: str) -> bool:
    """Whether ``text`` is JSON once its comments and trailing commas are gone."""
    try:
        json.loads(strip_jsonc(text))
    except ValueError:
        return False
    return True
