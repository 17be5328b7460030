"""Calls held for the person's approval, and calls of held (changed) tools refused.

docs/design.md §3.14. The pipeline asks ``screen`` about every client's
``tools/call`` before it reaches the session breaker and the call path, on
every door (``/mcp/NAME``, ``/mcp``, a profile, the bridge, both eras):

- a tool the review holds (core.supervision.tool_review) is refused at once,
  naming ``mcp-tray approve ID``;
- a call an ``approve`` rule matches (the server entry's globs over its tool
  names, ``destructive``, ``any``; a profile's globs over ``SERVER__TOOL``)
  waits, unless an "Always allow" (kept in the state folder) or an "Allow
  for this session" covers it, until the person answers or
  ``approval_timeout_s`` of the injected clock runs out. Only the waiting
  request waits: the others of its session go on.

Besides the CLI and the API, a held call can ask someone itself: an
``asker`` (the tray's window sets one) is awaited with the call's snapshot
and answers a scope or None (deny). Core awaits it on its own loop while the
asker runs where it lives (the window: on the GUI thread's loop, reached
with ``run_coroutine_threadsafe`` and ``wrap_future``); whichever answer
comes first wins, and the asker is cancelled once the call is settled. An
asker that fails leaves the call waiting for the other answers.

A refusal is a ``Verdict`` (plain data the call journal can record:
``refused`` by ``tool-change``, ``denied`` or ``timeout`` by ``approval``)
and reaches the model as a tool error saying who refused and how to allow
it. It never passes the session breaker, so it never counts as a failure.
"""

import asyncio
import contextlib
import fnmatch
import functools
import json
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from core.base.clock import Clock, WallClock, utc_now, wait_within
from core.base.errors import ApprovalError
from core.base.snapshot import AlertKind, ApprovalSnapshot, Event, EventKind, GrantSnapshot
from core.base.verdict import Scope, Verdict
from core.platform.files import write_private
from core.registry.identity import client_display_name
from core.serving.calls.request import Request
from core.settings.config import ServerConfig
from core.settings.profiles import find_profile, profile_name
from core.supervision.server import ManagedServer
from core.supervision.supervisor import Supervisor

logger = logging.getLogger(__name__)

#: In the state folder: the "Always allow" answers.
GRANTS_FILE: Final = "approvals.json"


#: Asked by a held call (on core's loop): the person's answer, a scope or None for Deny.
Asker = Callable[[ApprovalSnapshot], Awaitable[Scope | None]]


def is_destructive(annotations: Mapping[str, Any]) -> bool:
    """MCP's reading of a tool's hints: destructive unless it says read-only or not destructive."""
    destructive = annotations.get("destructiveHint")
    return destructive is True or (
        annotations.get("readOnlyHint") is not True and destructive is not False
    )


def matching_rule(
    config: ServerConfig,
    profile_rules: tuple[str, ...],
    tool: str,
    annotations: Mapping[str, Any],
) -> str | None:
    """The first ``approve`` rule that holds this call, in the user's words; None: none does."""
    for rule in config.approve:
        if rule == "any":
            return f'"approve": ["any"] on {config.name!r}'
        if rule == "destructive":
            if is_destructive(annotations):
                return f'"approve": ["destructive"] on {config.name!r} (the tool may change things)'
        elif fnmatch.fnmatchcase(tool, rule):
            return f'"approve": [{json.dumps(rule)}] on {config.name!r}'
    qualified = f"{config.name}__{tool}"
    for rule in profile_rules:
        if fnmatch.fnmatchcase(qualified, rule):
            return f'the profile\'s "approve": [{json.dumps(rule)}]'
    return None


@dataclass
class PendingCall:
    id: str
    server: str
    tool: str
    client: str
    session: str
    arguments: Mapping[str, Any]
    since: str
    reason: str
    answer: "asyncio.Future[Scope | None]" = field(repr=False)

    def snapshot(self) -> ApprovalSnapshot:
        return ApprovalSnapshot(
            id=self.id,
            kind="call",
            server=self.server,
            tool=self.tool,
            client=self.client,
            arguments=self.arguments,
            since=self.since,
            reason=self.reason,
        )


class Approvals:
    """The pending approvals, and the answers that outlast one call."""

    def __init__(
        self, supervisor: Supervisor, *, clock: Clock | None = None, wall: WallClock = utc_now
    ) -> None:
        self.supervisor = supervisor
        #: Measures ``approval_timeout_s`` (a seam: tests move it by hand).
        self.clock = clock or supervisor.clock
        self.wall = wall
        self.path: Path = supervisor.paths.state_dir / GRANTS_FILE
        self.pending: dict[str, PendingCall] = {}
        #: (session, server, tool): "Allow for this session".
        self._session_grants: set[tuple[str, str, str]] = set()
        #: (server, tool) -> since: "Always allow".
        self._always: dict[tuple[str, str], str] = {}
        self._loaded = False
        #: Who a held call asks besides the CLI and the API (the tray's window), if anyone.
        self.asker: Asker | None = None
        self._applying: set[asyncio.Task[str]] = set()

    # ----------------------------------------------------------------- file

    async def load(self) -> None:
        self._always = await asyncio.to_thread(self._read)
        self._loaded = True

    def _read(self) -> dict[tuple[str, str], str]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            rows = data["always"]
            return {(str(r["server"]), str(r["tool"])): str(r.get("since", "")) for r in rows}
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            logger.warning(
                "%s is unreadable (%s): no call is always allowed until you allow one again",
                self.path,
                exc,
            )
            return {}

    async def _save(self) -> None:
        rows = [
            {"server": server, "tool": tool, "since": since}
            for (server, tool), since in sorted(self._always.items())
        ]
        text = json.dumps({"always": rows}, indent=1)
        await asyncio.to_thread(write_private, self.path, text)

    # ------------------------------------------------------------ screening

    async def screen(self, request: Request, server: ManagedServer) -> Verdict | None:
        """None: the call goes on unasked. Else what was decided (allowed, or refused)."""
        tool = request.params.get("name")
        if request.method != "tools/call" or not isinstance(tool, str):
            return None
        entry = server.name.partition("@")[0]
        change = self.supervisor.review.held(entry, tool)
        if change is not None:
            return Verdict(
                "refused",
                "tool-change",
                change.id,
                f"mcp-tray refused this call: tool {tool!r} of server {entry!r} changed since "
                f"it was last approved ({change.reason}) and is held until the person at "
                f"mcp-tray reviews it, so nothing was sent. They can compare old and new in "
                f"the mcp-tray window (Approvals) and approve it there, or run: "
                f"mcp-tray approve {change.id}",
            )
        config = self.supervisor.config
        session = request.client.session
        profile = find_profile(config.profiles, profile_name(session.via)) if session.via else None
        rule = matching_rule(
            config.servers.get(entry, server.config),
            profile.approve if profile is not None else (),
            tool,
            server.catalog.tool_annotations(tool),
        )
        if rule is None:
            return None
        if not self._loaded:
            await self.load()
        if (entry, tool) in self._always:
            return Verdict("allowed", "approval", "", "always allowed", "always")
        if (session.id, entry, tool) in self._session_grants:
            return Verdict("allowed", "approval", "", "allowed for this session", "session")
        arguments = request.params.get("arguments")
        return await self._ask(
            PendingCall(
                id=f"c-{secrets.token_hex(3)}",
                server=entry,
                tool=tool,
                client=client_display_name(session.client_name),
                session=session.id,
                arguments=dict(arguments) if isinstance(arguments, dict) else {},
                since=self.wall().isoformat(timespec="seconds"),
                reason=rule,
                answer=asyncio.get_running_loop().create_future(),
            )
        )

    async def _ask(self, pending: PendingCall) -> Verdict:
        supervisor = self.supervisor
        timeout = supervisor.config.approval_timeout_s
        self.pending[pending.id] = pending
        supervisor.publish(
            Event(
                EventKind.APPROVALS,
                pending.server,
                text=f"{pending.client} wants to call {pending.tool!r} on {pending.server!r}: "
                f"allow or deny it in the window, or run: mcp-tray approve {pending.id}",
                alert=AlertKind.APPROVAL,
            )
        )
        prompt = self._prompt(pending)
        try:
            answered, scope = await wait_within(self.clock, pending.answer, timeout)
        finally:
            if prompt is not None:
                prompt.cancel()
            self.pending.pop(pending.id, None)
            supervisor.publish(Event(EventKind.APPROVALS, pending.server))
        where = f"call of {pending.tool!r} on server {pending.server!r}"
        if not answered:
            return Verdict(
                "timeout",
                "approval",
                pending.id,
                f"mcp-tray refused this {where}: it needs the person's approval "
                f"({pending.reason}) and nobody answered within {timeout:g} s, so nothing was "
                "sent. Tell the person what you want to do and call again while they are at "
                "the mcp-tray window (or they run: mcp-tray approvals).",
            )
        if scope is None:
            return Verdict(
                "denied",
                "approval",
                pending.id,
                f"The person at mcp-tray denied this {where}, so nothing was sent. Do not "
                "call it again unless they ask you to; to allow such calls they choose Allow "
                "or Always allow when it is asked, or change "
                f"{pending.reason} in {supervisor.config.path}.",
            )
        return Verdict("allowed", "approval", pending.id, f"allowed ({scope})", scope)

    def _prompt(self, pending: PendingCall) -> "asyncio.Future[Scope | None] | None":
        if self.asker is None:
            return None
        try:
            prompt = asyncio.ensure_future(self.asker(pending.snapshot()))
        except Exception as exc:
            logger.warning("could not ask the window about %s: %s", pending.id, exc)
            return None
        prompt.add_done_callback(functools.partial(self._heard, pending))
        return prompt

    def _heard(self, pending: PendingCall, prompt: "asyncio.Future[Scope | None]") -> None:
        """The asker answered: applied as the same answer from the CLI would be."""
        if prompt.cancelled():
            return
        error = prompt.exception()
        if pending.answer.done():
            return
        if error is not None:
            logger.warning(
                "the window's prompt for %s failed (%s): it still waits for mcp-tray approve %s",
                pending.id,
                error,
                pending.id,
            )
            return
        scope = prompt.result()
        if scope is None:
            self.deny(pending.id)
            return
        applying = asyncio.ensure_future(self.approve(pending.id, scope))
        self._applying.add(applying)
        applying.add_done_callback(functools.partial(self._applied, pending))

    def _applied(self, pending: PendingCall, applying: "asyncio.Task[str]") -> None:
        self._applying.discard(applying)
        if not applying.cancelled() and (error := applying.exception()) is not None:
            logger.warning(
                "allowing %s failed (%s): it still waits for mcp-tray approve %s",
                pending.id,
                error,
                pending.id,
            )

    # ------------------------------------------------------------- answers

    async def approve(self, approval_id: str, scope: Scope = "once") -> str:
        """Allow a held call (once, for its session, always) or accept a changed tool."""
        change = self.supervisor.review.get(approval_id)
        if change is not None:
            self.supervisor.accept_tool_change(approval_id)
            await self.supervisor.review.flush()
            return f"tool {change.tool!r} of {change.server!r}: the change is approved and offered"
        pending = self._pending(approval_id)
        if scope == "session":
            self._session_grants.add((pending.session, pending.server, pending.tool))
        elif scope == "always":
            self._always[(pending.server, pending.tool)] = self.wall().isoformat(timespec="seconds")
            await self._save()
            self.supervisor.publish(Event(EventKind.APPROVALS, pending.server))
        if not pending.answer.done():
            pending.answer.set_result(scope)
        return f"allowed {pending.tool!r} on {pending.server!r} ({scope})"

    def deny(self, approval_id: str) -> str:
        if self.supervisor.review.get(approval_id) is not None:
            raise ApprovalError(
                f"{approval_id} is a changed tool: it stays held (out of every client's list) "
                f"until you approve it with mcp-tray approve {approval_id}; nothing to deny"
            )
        pending = self._pending(approval_id)
        if not pending.answer.done():
            pending.answer.set_result(None)
        return f"denied {pending.tool!r} on {pending.server!r}"

    async def revoke(self, server: str, tool: str) -> bool:
        """Take back an "Always allow"; False when there was none."""
        if self._always.pop((server, tool), None) is None:
            return False
        await self._save()
        self.supervisor.publish(Event(EventKind.APPROVALS, server))
        return True

    def forget_session(self, session: str) -> None:
        """The session ended: its "Allow for this session" answers go with it."""
        self._session_grants = {grant for grant in self._session_grants if grant[0] != session}

    def _pending(self, approval_id: str) -> PendingCall:
        pending = self.pending.get(approval_id)
        if pending is None:
            waiting = [*self.pending, *(c.id for c in self.supervisor.review.pending())]
            raise ApprovalError(
                f"no approval {approval_id!r} is waiting (answered, timed out, or its client "
                f"went away); waiting now: {', '.join(waiting) or 'none'} (see mcp-tray approvals)"
            )
        return pending

    # ------------------------------------------------------------ snapshots

    def snapshots(self) -> tuple[ApprovalSnapshot, ...]:
        changes = [
            ApprovalSnapshot(
                id=c.id,
                kind="tool-change",
                server=c.server,
                tool=c.tool,
                client="",
                arguments={},
                since=c.since,
                reason=c.reason,
                old=c.old,
                new=c.new,
            )
            for c in self.supervisor.review.pending()
        ]
        calls = [pending.snapshot() for pending in self.pending.values()]
        return tuple(sorted([*changes, *calls], key=lambda item: item.since))

    def grants(self) -> tuple[GrantSnapshot, ...]:
        return tuple(
            GrantSnapshot(server, tool, since)
            for (server, tool), since in sorted(self._always.items())
        )

    def close(self) -> None:
        """The tray stops: every waiting call is refused as unanswered."""
        for pending in list(self.pending.values()):
            with contextlib.suppress(asyncio.InvalidStateError):
                pending.answer.cancel()
