"""Entries spliced into a JSON file's own text, so the user's layout survives.

``merged_text`` adds or replaces members of one top-level object (a client's
``mcpServers``) by editing the text where they are: every other key and
every other server is kept byte for byte, and the diff shows only what
mcp-tray adds. Indentation follows the file's own; a one-line object stays
on one line. Should a splice ever not parse back to the intended document,
the whole document is written afresh instead: a mistake costs formatting,
never content.
"""

import json
import re
from dataclasses import dataclass, field
from typing import Any, Final

_DECODER: Final = json.JSONDecoder()
_WHITESPACE: Final = re.compile(r"[ \t\n\r]*")
_LEADING: Final = re.compile(r"[ \t]*")
_FIRST_INDENT: Final = re.compile(r"\n([ \t]+)\S")
_DEFAULT_INDENT: Final = "  "


@dataclass(frozen=True)
class _Member:
    key: str
    key_start: int
    value_start: int
    value_end: int


@dataclass(frozen=True)
class _Object:
    open: int
    close: int
    members: list[_Member] = field(default_factory=list)


def _skip(text: str, at: int) -> int:
    match = _WHITESPACE.match(text, at)
    assert match is not None  # the pattern matches the empty string
    return match.end()


def _object_at(text: str, start: int) -> _Object:
    """The members of the object whose ``{`` is at ``start``; ``text`` is valid JSON."""
    members: list[_Member] = []
    at = _skip(text, start + 1)
    if text[at] == "}":
        return _Object(start, at, members)
    while True:
        key, after_key = _DECODER.raw_decode(text, at)
        value_start = _skip(text, _skip(text, after_key) + 1)  # past the colon
        _, value_end = _DECODER.raw_decode(text, value_start)
        members.append(_Member(key, at, value_start, value_end))
        at = _skip(text, value_end)
        if text[at] == "}":
            return _Object(start, at, members)
        at = _skip(text, at + 1)  # past the comma


def _last(obj: _Object, key: str) -> _Member | None:
    # JSON keeps the last of duplicate keys, so that is the one to edit.
    return next((m for m in reversed(obj.members) if m.key == key), None)


def _indent_of_line(text: str, at: int) -> str:
    match = _LEADING.match(text, text.rfind("\n", 0, at) + 1)
    assert match is not None
    return match.group(0)


def _render(value: Any, unit: str | None, indent: str) -> str:
    if unit is None:
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, indent=unit, ensure_ascii=False).replace("\n", "\n" + indent)


def _insert(text: str, obj: _Object, key: str, value: Any, unit: str) -> str:
    def member_text(u: str | None, indent: str) -> str:
        return f"{json.dumps(key, ensure_ascii=False)}: {_render(value, u, indent)}"

    inside = text[obj.open : obj.close + 1]
    # A one-line object stays on one line; an empty one follows the file's layout.
    if "\n" not in inside and (obj.members or "\n" not in text.strip()):
        if obj.members:
            at = obj.members[-1].value_end
            return f"{text[:at]}, {member_text(None, '')}{text[at:]}"
        return f"{text[: obj.open + 1]}{member_text(None, '')}{text[obj.close :]}"
    if obj.members:
        at = obj.members[-1].value_end
        indent = _indent_of_line(text, obj.members[-1].key_start)
        return f"{text[:at]},\n{indent}{member_text(unit, indent)}{text[at:]}"
    outer = _indent_of_line(text, obj.open)
    indent = outer + unit
    return (
        f"{text[: obj.open + 1]}\n{indent}{member_text(unit, indent)}\n{outer}{text[obj.close :]}"
    )


def _replace(text: str, member: _Member, value: Any, unit: str) -> str:
    old = text[member.value_start : member.value_end]
    rendered = (
        _render(value, None, "")
        if "\n" not in old and "\n" not in text.strip()
        else _render(value, unit, _indent_of_line(text, member.key_start))
    )
    return f"{text[: member.value_start]}{rendered}{text[member.value_end :]}"


def merged_text(
    original: str | None, key: str, changed: dict[str, Any], document: dict[str, Any]
) -> str:
    """The file's text with ``changed`` spliced into its ``key`` object.

    Falls back to re-serialising the whole document when there is no text to
    keep, or when the splice does not parse back to ``document`` (it always
    should; the check makes a mistake cost formatting, never content).
    """
    # With nothing of the user's to keep, the document is written afresh.
    if original is None or not original.strip() or json.loads(original) == {}:
        return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    found = _FIRST_INDENT.search(original)
    unit = found.group(1) if found else _DEFAULT_INDENT
    text = original
    for name, entry in changed.items():
        top = _object_at(text, _skip(text, 0))
        holder = _last(top, key)
        if holder is None:
            text = _insert(text, top, key, {name: entry}, unit)
            continue
        servers = _object_at(text, holder.value_start)
        member = _last(servers, name)
        text = (
            _insert(text, servers, name, entry, unit)
            if member is None
            else _replace(text, member, entry, unit)
        )
    try:
        spliced_ok = json.loads(text) == document
    except ValueError:
        spliced_ok = False
    if spliced_ok:
        return text
    return json.dumps(document, indent=unit, ensure_ascii=False) + "\n"
