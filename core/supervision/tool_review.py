"""Fingerprints of every server's tools, and the changed ones held for review.

docs/design.md §3.14. The first time mcp-tray sees a server's tools it keeps
a fingerprint of each: the SHA-256 of the canonical JSON (sorted keys, no
spaces) of its name, description, input schema and annotations, together
with the tool as it was, so the window can show old and new side by side.
A later listing (a respawn, an update, ``list_changed``) is screened here:

- a known tool, unchanged: offered;
- a new tool of a known server: offered and fingerprinted (an info line);
- a changed tool: with ``"on_tool_change": "hold"`` it is left out of what
  clients are offered (its new description never reaches a model) and waits
  for the person as a ``tool-change`` approval; with ``"warn"`` it is
  offered, fingerprinted anew and a warning logged.

The file (``tool-fingerprints.json`` in the state folder, 0600) is read
once before servers start and written on a worker thread after a listing
changed it. Screening itself is in memory, so the catalog calls it inline.
"""

import asyncio
import contextlib
import hashlib
import json
import logging
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

from core.base.clock import WallClock, utc_now
from core.platform.files import write_private

logger = logging.getLogger(__name__)

#: In the state folder.
FINGERPRINTS_FILE: Final = "tool-fingerprints.json"
#: What of a tool its fingerprint covers: what a model reads, and what decides replays.
FINGERPRINTED: Final = ("name", "description", "inputSchema", "annotations")
FILE_VERSION: Final = 1


def fingerprint(tool: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of the tool's fingerprinted fields."""
    picked = {key: tool.get(key) for key in FINGERPRINTED}
    text = json.dumps(picked, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def what_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """ "its description and input schema changed": the fields that differ, in words."""
    words = {"description": "description", "inputSchema": "input schema"}
    words["annotations"] = "annotations"
    differ = [words[key] for key in FINGERPRINTED[1:] if old.get(key) != new.get(key)]
    return f"its {' and '.join(differ) or 'definition'} changed"


@dataclass(frozen=True)
class ToolChange:
    """A server's tool that changed since the person last saw it, held for review."""

    id: str
    server: str
    tool: str
    old: Mapping[str, Any]
    new: Mapping[str, Any]
    #: ISO 8601 UTC.
    since: str

    @property
    def reason(self) -> str:
        return what_changed(self.old, self.new)


class ToolScreen(Protocol):
    """What a server's catalog asks about each listing of its tools."""

    def screen(self, tools: Sequence[dict[str, Any]]) -> list[dict[str, Any]]: ...

    async def flush(self) -> None: ...


class ToolReview:
    """Every server's fingerprints, and the changes waiting for the person."""

    def __init__(self, path: Path, *, wall: WallClock = utc_now) -> None:
        self.path = path
        self.wall = wall
        #: server -> tool -> {"sha256": ..., "tool": {...}}
        self._known: dict[str, dict[str, dict[str, Any]]] = {}
        self._held: dict[str, ToolChange] = {}
        self._dirty = False
        self._lock = asyncio.Lock()
        #: Told when what waits for review changed: a newly held change, or None.
        self.on_change: Callable[[ToolChange | None], None] = lambda change: None

    # ----------------------------------------------------------------- file

    def load(self) -> None:
        """Read the file (blocking: call it on a worker thread). A damaged file is
        set aside and a new one started: the tools are then seen for the first time."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            servers = data["servers"] if isinstance(data, dict) else None
            if not isinstance(servers, dict):
                raise ValueError("no 'servers' object")
            self._known = {
                str(name): dict(tools) for name, tools in servers.items() if isinstance(tools, dict)
            }
        except FileNotFoundError:
            self._known = {}
        except (OSError, ValueError) as exc:
            aside = self.path.with_suffix(".damaged.json")
            logger.warning(
                "%s is unreadable (%s): moved to %s; every server's tools are fingerprinted anew",
                self.path,
                exc,
                aside,
            )
            with contextlib.suppress(OSError):
                self.path.replace(aside)
            self._known = {}

    async def flush(self) -> None:
        """Write what a listing changed (on a worker thread)."""
        async with self._lock:
            if not self._dirty:
                return
            self._dirty = False
            text = json.dumps({"version": FILE_VERSION, "servers": self._known}, indent=1)
            await asyncio.to_thread(write_private, self.path, text)

    # ------------------------------------------------------------ screening

    def for_server(
        self, server: str, mode: Callable[[], str], note: Callable[[str], None]
    ) -> ToolScreen:
        return _ServerScreen(self, server, mode, note)

    def screen(
        self, server: str, mode: str, tools: Sequence[dict[str, Any]], note: Callable[[str], None]
    ) -> list[dict[str, Any]]:
        """The tools of ``server`` that may be offered; the changed ones are held."""
        known = self._known.get(server)
        if known is None:
            self._known[server] = {
                str(tool.get("name")): {"sha256": fingerprint(tool), "tool": dict(tool)}
                for tool in tools
            }
            self._dirty = True
            note(f"first listing of {len(tools)} tools: their fingerprints are kept")
            return list(tools)
        offered = []
        for tool in tools:
            name = str(tool.get("name"))
            seen = known.get(name)
            digest = fingerprint(tool)
            if seen is None:
                known[name] = {"sha256": digest, "tool": dict(tool)}
                self._dirty = True
                note(f"new tool {name!r}: offered, its fingerprint kept")
            elif seen.get("sha256") != digest:
                kept = seen.get("tool")
                old: Mapping[str, Any] = kept if isinstance(kept, dict) else {}
                if mode == "warn":
                    known[name] = {"sha256": digest, "tool": dict(tool)}
                    self._dirty = True
                    note(
                        f"warning: tool {name!r} changed ({what_changed(old, tool)}); offered, "
                        'as "on_tool_change": "warn" says'
                    )
                else:
                    self._hold(server, name, old, tool, note)
                    continue
            else:
                self._release(server, name)  # changed back to what was approved
            offered.append(tool)
        return offered

    def _hold(
        self,
        server: str,
        name: str,
        old: Mapping[str, Any],
        new: Mapping[str, Any],
        note: Callable[[str], None],
    ) -> None:
        found = self.held(server, name)
        if found is not None and found.new == new:
            return
        change = ToolChange(
            id=found.id if found is not None else f"t-{secrets.token_hex(3)}",
            server=server,
            tool=name,
            old=dict(old),
            new=dict(new),
            since=found.since if found is not None else self.wall().isoformat(timespec="seconds"),
        )
        self._held[change.id] = change
        note(
            f"tool {name!r} changed ({change.reason}): held from every client until you "
            f"approve it (mcp-tray approve {change.id})"
        )
        self.on_change(change)

    def _release(self, server: str, name: str) -> None:
        found = self.held(server, name)
        if found is not None:
            del self._held[found.id]
            self.on_change(None)

    # ------------------------------------------------------------- answers

    def held(self, server: str, tool: str) -> ToolChange | None:
        for change in self._held.values():
            if change.server == server and change.tool == tool:
                return change
        return None

    def pending(self) -> list[ToolChange]:
        return sorted(self._held.values(), key=lambda change: change.since)

    def get(self, change_id: str) -> ToolChange | None:
        return self._held.get(change_id)

    def accept(self, change_id: str) -> ToolChange:
        """The person approved the change: its new fingerprint is the known one."""
        change = self._held.pop(change_id)
        self._known.setdefault(change.server, {})[change.tool] = {
            "sha256": fingerprint(change.new),
            "tool": dict(change.new),
        }
        self._dirty = True
        self.on_change(None)
        return change


class _ServerScreen:
    """One server's view of the review (its name, its ``on_tool_change``, its log)."""

    def __init__(
        self,
        review: ToolReview,
        server: str,
        mode: Callable[[], str],
        note: Callable[[str], None],
    ) -> None:
        self.review = review
        self.server = server
        self.mode = mode
        self.note = note

    def screen(self, tools: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        return self.review.screen(self.server, self.mode(), tools, self.note)

    async def flush(self) -> None:
        await self.review.flush()
