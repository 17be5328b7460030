"""The tray's side of the worker registry, and the periodic diagnostics.

- Registers a worker row for every direct HTTP client session (bridges
  register themselves) and heartbeats all of them from one task, in one
  transaction.
- Keeps a copy of every row (the Workers tab, /api/v1/workers, the
  snapshot) and publishes a ``workers`` event when it changed.
- Judges whether each open client session's worker row still holds it
  (docs/design.md §3.6): ``session_ownership``, for the Sessions tab; a ``sessions``
  event when a verdict changed.
- Runs the doctor (own env, live workers' envs, runtime versions, literal
  secrets) on a timer and on demand; publishes ``warnings``.

The copy is kept incrementally, so that opening a session costs the same
with a thousand open as with one. What the tray writes itself (its HTTP
sessions' rows: registered, renewed, removed) it applies to the copy as the
write commits, judging only the session concerned. Only what others wrote
(bridges, the CLI) is read back, all rows at once, and only when PRAGMA
data_version says they wrote (it moves for other connections' commits,
never for our own). Ages and pids move without a write, so every row and
claim is judged again, from the copy, every ``ROWS_REJUDGE_SECONDS``.

Registry calls run on one thread of the watch's own, in the order they were
asked for, so a result applied on the loop is never older than one applied
before it; rows are judged off the loop too. The doctor's psutil scans run
in other threads.
"""

import asyncio
import dataclasses
import functools
import logging
import math
import os
from collections.abc import Callable, Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Protocol

from core import __version__
from core.base.clock import SYSTEM_CLOCK, Clock
from core.base.errors import RegistryFileError
from core.base.snapshot import Event, EventKind
from core.registry.envdiag import Diagnostic, doctor
from core.registry.heartbeat import heartbeat_interval_for
from core.registry.identity import worker_identity
from core.registry.records import (
    DEFAULT_HEARTBEAT_TTL_SECONDS,
    ROLE_HTTP_SESSION,
    NewWorker,
    PidProbe,
    Registration,
    default_pid_probe,
)
from core.registry.registry_copy import Judged, RegistryCopy, judge
from core.registry.session_claims import SessionClaim, SessionOwnership
from core.registry.store import WorkerRegistry
from core.registry.workers_view import JsonRow, warnings_json

logger = logging.getLogger(__name__)

#: How often the registry is checked for others' writes (one cheap PRAGMA).
ROWS_REFRESH_SECONDS: Final = 1.0
#: Every row and claim is judged again, from the copy, this often, so the
#: live/stale verdicts of silent rows follow the clock and dead pids...
ROWS_REJUDGE_SECONDS: Final = 10.0
#: ...and others' rows are read back at most this often while they keep
#: changing: with a thousand bridges beating, a read every second would cost
#: ~2 % of a core.
ROWS_MIN_INTERVAL_SECONDS: Final = 3.0
#: How often rows long past their TTL are dropped.
EXPIRE_EVERY_SECONDS: Final = 60.0
#: How often the doctor runs on its own (it also runs on demand).
DIAGNOSTICS_INTERVAL_SECONDS: Final = 60.0
#: Rows silent this long past their TTL are dropped (a crashed bridge's row).
EXPIRED_ROW_GRACE_SECONDS: Final = 3600.0


class ClientSessionView(Protocol):
    """What the watch reads of a client session (core.serving's ``ClientSession``);
    a protocol, so the registry layer never imports the serving layer."""

    @property
    def id(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def client_name(self) -> str: ...
    @property
    def server(self) -> str: ...
    @property
    def closed(self) -> bool: ...

    #: The session's worker row: a bridge's comes with its first request;
    #: the watch sets an HTTP session's once it registered the row.
    worker_identity: str | None


@dataclass(frozen=True)
class _HttpWorker:
    identity: str
    epoch: int


class WorkerWatch:
    """The registry as the tray sees it: rows, session ownership, warnings.

    The gateway reports every client session through ``session_opened`` /
    ``session_closed``; ``refresh`` (on a timer from ``start``) reads.
    """

    def __init__(
        self,
        registry: WorkerRegistry | None,
        publish: Callable[[Event], None],
        *,
        servers_env: Callable[[], Mapping[str, Mapping[str, str]]],
        registry_problem: str | None = None,
        ttl: float = DEFAULT_HEARTBEAT_TTL_SECONDS,
        path: Path | None = None,
        pid_probe: PidProbe | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.registry = registry
        #: Where the registry lives, to open it again when it is replaced or repaired.
        self.path = path if path is not None else (registry.path if registry else None)
        #: The one line that says why the registry cannot be used now, if it cannot.
        self.registry_problem = registry_problem
        #: The last unexpected failure logged (the same one is not logged again).
        self._last_failure: str | None = None
        self._problem_file: tuple[int, int, int, float] | None = None
        self._publish = publish
        self._servers_env = servers_env
        self.ttl = ttl
        self.diagnostics: list[Diagnostic] = []
        #: Problems of mcp-tray's own (registry unusable, token in a file).
        self.own_warnings: list[str] = [registry_problem] if registry_problem else []
        self._clock = clock
        own_pid = os.getpid()
        self._copy = RegistryCopy(publish, pid_probe or _probe_knowing_self(own_pid), own_pid)
        self._http: dict[str, _HttpWorker] = {}
        self._sessions: dict[str, ClientSessionView] = {}
        #: HTTP sessions waiting for their row (registered in batches).
        self._queued: list[ClientSessionView] = []
        self._registrar: asyncio.Task[Any] | None = None
        #: Sessions opened with a worker row named, not judged yet.
        self._unjudged: set[str] = set()
        self._tasks: list[asyncio.Task[None]] = []
        #: One-off registry work started by sessions opening and closing.
        self._pending: set[asyncio.Task[Any]] = set()
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="mcp-tray-registry")
        self._closed = False
        #: PRAGMA data_version at the last read of every row (None: read them again).
        self._others: int | None = None
        self._read_at = self._judged_at = self._expired_at = -math.inf

    @classmethod
    def open(cls, path: Any, publish: Callable[[Event], None], **kwargs: Any) -> "WorkerWatch":
        try:
            registry: WorkerRegistry | None = WorkerRegistry(path)
            problem = None
        except RegistryFileError as exc:
            registry, problem = None, f"registry: {exc}"
        return cls(registry, publish, registry_problem=problem, path=Path(path), **kwargs)

    @property
    def http_sessions(self) -> int:
        """Rows this process heartbeats (direct HTTP client sessions)."""
        return len(self._http)

    @property
    def rows(self) -> list[JsonRow]:
        """Every row as ``mcp-tray workers --json`` shows it, oldest first: its age
        as of now, its status as last judged (at most ``ROWS_REJUDGE_SECONDS`` ago)."""
        return self._copy.rows_at(self._now()) if self.registry is not None else []

    @property
    def session_ownership(self) -> Mapping[str, SessionOwnership]:
        """Client session id -> ownership, as last judged.

        Covers the open sessions that name a worker row; a session without
        one yet (an HTTP session still registering) is absent.
        """
        return self._copy.ownership

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._refresh_loop(), name="mcp-tray:workers"),
            asyncio.create_task(self._beat_loop(), name="mcp-tray:http-heartbeats"),
            asyncio.create_task(self._diagnostics_loop(), name="mcp-tray:doctor"),
        ]

    async def settled(self) -> None:
        """Wait for the registrations and removals sessions started so far."""
        await asyncio.gather(*self._pending, return_exceptions=True)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        # Registrations and removals the closing sessions started finish
        # before the database closes under them.
        await self.settled()
        if self._http and self.registry is not None:
            ours = [w.identity for w in self._http.values()]
            await self._registry_call(self.registry.remove_many, ours)
        self._http.clear()
        if self.registry is not None:
            await self._registry_call(self.registry.close)
        self._thread.shutdown(wait=False)

    # --------------------------------------------------- client sessions

    def session_opened(self, session: ClientSessionView) -> None:
        self._sessions[session.id] = session
        if session.kind == "http" and self.registry is not None:
            self._queued.append(session)
            if self._registrar is None or self._registrar.done():
                self._registrar = self._spawn(self._register_queued())
        elif session.worker_identity is not None:
            self._unjudged.add(session.id)

    def session_closed(self, session: ClientSessionView) -> None:
        self._sessions.pop(session.id, None)
        self._copy.drop_session(session.id)
        self._unjudged.discard(session.id)
        worker = self._http.pop(session.id, None)
        if worker is not None:
            self._spawn(self._unregister(worker.identity))

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> "asyncio.Task[Any]":
        task = asyncio.get_running_loop().create_task(coro)
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        return task

    async def _register_queued(self) -> None:
        """Rows for the HTTP sessions queued so far, in one transaction: a burst
        of opens costs one commit and one thread hop per batch, not per session."""
        registry = self.registry
        assert registry is not None
        # Sessions that open meanwhile queue for the next batch (this task's job too).
        await asyncio.sleep(0)
        while self._queued:
            batch, self._queued = self._queued, []
            started = registry.wall_clock()
            workers = [
                self._new_worker(s, worker_identity(s.client_name, s.id, started)) for s in batch
            ]
            registered: list[Registration] | None = await self._registry_call(
                registry.register_many, workers
            )
            if registered is None:
                continue
            now = self._now()
            records, claims, gone = [], [], []
            for session, registration in zip(batch, registered, strict=True):
                identity, epoch = registration.worker_identity, registration.fencing_epoch
                if session.closed:
                    gone.append(identity)
                    continue
                session.worker_identity = identity
                self._http[session.id] = _HttpWorker(identity, epoch)
                records.append(registration.record)
                claims.append(SessionClaim(session.id, identity, session.id, epoch))
            # Their own rows and their own verdicts; nothing else changed.
            self._copy.learn(records, now)
            self._copy.judge_claims(claims, now)
            if gone:
                await self._registry_call(registry.remove_many, gone)

    def _new_worker(self, session: ClientSessionView, identity: str) -> NewWorker:
        return NewWorker(
            worker_identity=identity,
            client_name=session.client_name,
            session_id=session.id,
            role=ROLE_HTTP_SESSION,
            server=session.server,
            pid=os.getpid(),
            heartbeat_ttl_seconds=self.ttl,
            runtime_version=__version__,
        )

    async def _unregister(self, identity: str) -> None:
        if await self._registry_call(self._remove, identity) is not None:
            self._copy.forget(identity)

    def _remove(self, identity: str) -> bool:
        return self.registry is not None and self.registry.remove(identity)

    async def _beat_loop(self) -> None:
        interval = heartbeat_interval_for(self.ttl)
        while True:
            await self._clock.sleep(interval)
            await self.beat()

    async def beat(self) -> None:
        """Renew every HTTP session's row, in one transaction (the timer's work)."""
        registry = self.registry
        if not self._http or registry is None:
            return
        workers = [(w.identity, w.epoch) for w in self._http.values()]
        outcomes = await self._registry_call(registry.heartbeat_many, workers)
        renewed = []
        for outcome in outcomes or ():
            if outcome.renewed:
                # None: its session closed meanwhile, and its row went.
                record = self._copy.records.get(outcome.worker_identity)
                if record is not None and outcome.last_heartbeat_at is not None:
                    beat = outcome.last_heartbeat_at
                    renewed.append(
                        dataclasses.replace(record, last_heartbeat_at=beat, beats=record.beats + 1)
                    )
            elif not outcome.transient:
                logger.warning("HTTP session worker not renewed: %s", outcome)
                # Someone else changed the row: read them all again.
                self._others = None
        self._copy.learn(renewed, self._now())

    # ------------------------------------------------------------ views

    async def refresh(self, *, force: bool = True) -> None:
        """Bring the copy and the sessions' ownership up to date; publish what changed.

        Forced (on demand, tests), every row is read and judged now. On the
        timer, every row is read only when someone else wrote since the last
        read, and at most every ``ROWS_MIN_INTERVAL_SECONDS``; else every row
        and claim is judged again from the copy every ``ROWS_REJUDGE_SECONDS``;
        else only the sessions opened since are judged.
        """
        registry = await self._current_registry()
        if registry is None:
            return
        now = self._clock.monotonic()
        if now - self._expired_at >= EXPIRE_EVERY_SECONDS:
            self._expired_at = now
            expired = await self._registry_call(
                functools.partial(registry.remove_expired, grace_seconds=EXPIRED_ROW_GRACE_SECONDS)
            )
            if expired:
                self._others = None
        others = await self._registry_call(registry.others_version)
        if others is None:
            return
        if force or others != self._others:
            if force or now - self._read_at >= ROWS_MIN_INTERVAL_SECONDS:
                self._read_at = self._judged_at = now
                await self._judge_all(registry, read=True)
            # else: judging new sessions against a copy known to be behind would
            # only flip their verdicts once it is read; they wait for that read.
            return
        if now - self._judged_at >= ROWS_REJUDGE_SECONDS:
            self._judged_at = now
            await self._judge_all(registry, read=False)
            return
        claims = [
            claim
            for session_id in self._unjudged
            if (session := self._sessions.get(session_id)) is not None
            and (claim := self._claim(session)) is not None
        ]
        self._unjudged.clear()
        if claims:
            self._copy.judge_claims(claims, self._now())

    async def _judge_all(self, registry: WorkerRegistry, *, read: bool) -> None:
        """Every row and every claim judged off the loop, from the file (``read``);
        or from the copy, the rows ``due`` and the claims on them."""
        copy = {} if read else self._copy.due(self._now())
        if read:
            self._unjudged.clear()
        elif not copy:
            return
        claims = {
            session.id: claim
            for session in self._sessions.values()
            if (claim := self._claim(session)) is not None
            and (read or claim.worker_identity in copy)
        }
        probe = self._copy.pid_probe

        def judged() -> tuple[int | None, Judged]:
            if not read:
                return None, judge(copy, claims, registry.wall_clock(), probe)
            others = registry.others_version()
            records = {r.worker_identity: r for r in registry.list_workers()}
            return others, judge(records, claims, registry.wall_clock(), probe)

        outcome = await self._registry_call(judged)
        if outcome is None:
            return
        others, verdicts = outcome
        if read:
            self._others = others
        self._copy.apply(verdicts, read=read, claim_of=self._claim_of)

    def _claim_of(self, session_id: str) -> SessionClaim | None:
        session = self._sessions.get(session_id)
        return None if session is None else self._claim(session)

    def _claim(self, session: ClientSessionView) -> SessionClaim | None:
        if session.worker_identity is None or session.closed:
            return None
        ours = self._http.get(session.id)
        if ours is None:
            return SessionClaim(session.id, session.worker_identity)
        return SessionClaim(session.id, ours.identity, session.id, ours.epoch)

    def _now(self) -> datetime:
        assert self.registry is not None
        return self.registry.wall_clock()

    async def _refresh_loop(self) -> None:
        while True:
            await self.refresh(force=False)
            await self._clock.sleep(ROWS_REFRESH_SECONDS)

    async def run_doctor(self) -> list[Diagnostic]:
        servers_env = {name: dict(env) for name, env in self._servers_env().items()}
        registry = self.registry
        found = await self._to_thread(
            lambda: doctor(os.environ, registry, __version__, servers_env=servers_env)
        )
        if found is not None and found != self.diagnostics:
            self.diagnostics = found
            self._publish(Event(EventKind.WARNINGS))
        return self.diagnostics

    async def _diagnostics_loop(self) -> None:
        while True:
            await self.run_doctor()
            await self._clock.sleep(DIAGNOSTICS_INTERVAL_SECONDS)

    def warnings_json(self) -> list[dict[str, Any]]:
        return warnings_json(self.diagnostics, self.own_warnings)

    async def _registry_call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn`` on the watch's registry thread, after everything asked before it."""
        return await self._off_loop(self._thread, fn, *args)

    async def _to_thread(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn`` on asyncio's default threads (the doctor's psutil scans)."""
        return await self._off_loop(None, fn, *args)

    async def _off_loop(
        self, executor: ThreadPoolExecutor | None, fn: Callable[..., Any], *args: Any
    ) -> Any:
        """Run blocking registry work off the loop; a failure is reported, never raised.

        A damaged file is one warning (what is wrong, the fix), not a
        traceback per refresh; anything else unexpected is logged once.
        """
        try:
            call = functools.partial(fn, *args)
            return await asyncio.get_running_loop().run_in_executor(executor, call)
        except RegistryFileError as exc:
            self._set_problem(f"registry: {exc}")
        except Exception as exc:
            if str(exc) != self._last_failure:
                self._last_failure = str(exc)
                logger.exception("worker registry operation failed")
        return None

    async def _current_registry(self) -> WorkerRegistry | None:
        """The registry at ``path`` now: opened again when the file was deleted or moved
        aside (a new one is created) or was unusable and may be repaired."""
        registry = self.registry
        if self.path is None:
            return registry
        stale = registry is None or await asyncio.to_thread(registry.replaced)
        if not stale:
            return registry
        # Unusable at the last look: try again only once the file changed.
        if (
            registry is None
            and self.registry_problem is not None
            and not await asyncio.to_thread(_changed_since, self.path, self._problem_file)
        ):
            return None
        try:
            fresh = await asyncio.to_thread(WorkerRegistry, self.path)
        except RegistryFileError as exc:
            self._set_problem(f"registry: {exc}")
            self._problem_file = await asyncio.to_thread(_file_stamp, self.path)
            return None
        if registry is not None:
            await self._registry_call(registry.close)
        self.registry = fresh
        self._others = None
        logger.warning("worker registry %s was replaced: opened it again", self.path)
        self._set_problem(None)
        # Our own HTTP sessions' rows lived in the old file: write them again.
        ours = [(i, w) for i, w in self._http.items() if i in self._sessions]
        workers = [self._new_worker(self._sessions[i], w.identity) for i, w in ours]
        registered = await self._registry_call(fresh.register_many, workers)
        for (session_id, _), registration in zip(ours, registered or (), strict=False):
            self._http[session_id] = _HttpWorker(
                registration.worker_identity, registration.fencing_epoch
            )
        return fresh

    def _set_problem(self, problem: str | None) -> None:
        if problem == self.registry_problem:
            return
        if self.registry_problem in self.own_warnings:
            self.own_warnings.remove(self.registry_problem)
        self.registry_problem = problem
        if problem is not None:
            logger.warning("%s", problem)
            self.own_warnings.append(problem)
        self._publish(Event(EventKind.WARNINGS))


def _probe_knowing_self(own_pid: int) -> PidProbe:
    """The default pid probe, minus the syscall for our own pid (every HTTP session's row)."""
    return lambda pid: pid == own_pid or default_pid_probe(pid)


def _file_stamp(path: Path) -> tuple[int, int, int, float] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime


def _changed_since(path: Path, stamp: tuple[int, int, int, float] | None) -> bool:
    return _file_stamp(path) != stamp
