"""The tray's side of the worker registry, and the periodic diagnostics.

- Registers a worker row for every direct HTTP client session (bridges
  register themselves) and heartbeats all of them from one task.
- Keeps a fresh copy of every row (the Workers tab, /api/v1/workers, the
  snapshot) and publishes a ``workers`` event when it changed.
- Assesses, on the same refresh, whether each open client session's worker
  row still holds it (DESIGN §3.6): ``session_ownership``, for the Sessions
  tab; a ``sessions`` event when a verdict changed.
- Runs the doctor (own env, live workers' envs, runtime versions, literal
  secrets) on a timer and on demand; publishes ``warnings``.

Every registry and psutil call runs in a worker thread, never on the loop.
"""

import asyncio
import logging
import os
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Protocol

from core import __version__
from core.base.errors import RegistryFileError
from core.base.snapshot import Event, EventKind
from core.registry.envdiag import Diagnostic, doctor
from core.registry.heartbeat import heartbeat_interval_for
from core.registry.identity import worker_identity
from core.registry.records import DEFAULT_HEARTBEAT_TTL_SECONDS, ROLE_HTTP_SESSION
from core.registry.session_claims import SessionClaim, SessionOwnership, assess_sessions
from core.registry.store import WorkerRegistry
from core.registry.workers_view import JsonRow, warnings_json, worker_rows

logger = logging.getLogger(__name__)

#: How often the registry is checked for changes (one cheap PRAGMA).
ROWS_REFRESH_SECONDS: Final = 1.0
#: Rows are re-read at least this often even when nothing was written, so
#: the live/stale verdicts of silent rows follow the clock...
ROWS_REREAD_SECONDS: Final = 10.0
#: ...and at most this often while they keep changing: with a thousand
#: workers beating, a full read every second would cost ~2 % of a core.
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
        self.rows: list[JsonRow] = []
        self.diagnostics: list[Diagnostic] = []
        #: Problems of mcp-tray's own (registry unusable, token in a file).
        self.own_warnings: list[str] = [registry_problem] if registry_problem else []
        self._http: dict[str, _HttpWorker] = {}
        self._sessions: dict[str, ClientSessionView] = {}
        self._ownership: dict[str, SessionOwnership] = {}
        self._assessed: frozenset[SessionClaim] = frozenset()
        self._tasks: list[asyncio.Task[None]] = []
        #: One-off registry work started by sessions opening and closing.
        self._pending: set[asyncio.Task[Any]] = set()
        self._stamp: tuple[int, int] | None = None
        self._read_at = 0.0
        self._expired_at = 0.0

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
    def session_ownership(self) -> Mapping[str, SessionOwnership]:
        """Client session id -> ownership, as of the last refresh.

        Covers the open sessions that name a worker row; a session without
        one yet (an HTTP session still registering) is absent.
        """
        return MappingProxyType(self._ownership)

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._refresh_loop(), name="mcp-tray:workers"),
            asyncio.create_task(self._beat_loop(), name="mcp-tray:http-heartbeats"),
            asyncio.create_task(self._diagnostics_loop(), name="mcp-tray:doctor"),
        ]

    async def aclose(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        # Registrations and removals the closing sessions started finish
        # before the database closes under them.
        await asyncio.gather(*self._pending, return_exceptions=True)
        for identity in [w.identity for w in self._http.values()]:
            await self._to_thread(self._remove, identity)
        self._http.clear()
        if self.registry is not None:
            self.registry.close()

    # --------------------------------------------------- client sessions

    def session_opened(self, session: ClientSessionView) -> None:
        self._sessions[session.id] = session
        if session.kind != "http" or self.registry is None:
            return
        self._spawn(self._register(session))

    def session_closed(self, session: ClientSessionView) -> None:
        self._sessions.pop(session.id, None)
        self._ownership.pop(session.id, None)
        worker = self._http.pop(session.id, None)
        if worker is not None:
            self._spawn(self._to_thread(self._remove, worker.identity))

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _register(self, session: ClientSessionView) -> None:
        registry = self.registry
        assert registry is not None
        started = registry.wall_clock()
        identity = worker_identity(session.client_name, session.id, started)

        def register() -> int:
            return registry.register(
                worker_identity=identity,
                client_name=session.client_name,
                session_id=session.id,
                role=ROLE_HTTP_SESSION,
                server=session.server,
                pid=os.getpid(),
                heartbeat_ttl_seconds=self.ttl,
                runtime_version=__version__,
            ).fencing_epoch

        epoch = await self._to_thread(register)
        if epoch is None:
            return
        if session.closed:
            await self._to_thread(self._remove, identity)
            return
        session.worker_identity = identity
        self._http[session.id] = _HttpWorker(identity, epoch)
        await self.refresh()

    def _remove(self, identity: str) -> None:
        if self.registry is not None:
            self.registry.remove(identity)

    async def _beat_loop(self) -> None:
        interval = heartbeat_interval_for(self.ttl)
        while True:
            await asyncio.sleep(interval)
            workers = list(self._http.values())
            if workers and self.registry is not None:
                await self._to_thread(_beat_all, self.registry, workers)

    # ------------------------------------------------------------ views

    async def refresh(self, *, force: bool = True) -> None:
        """Re-read the rows (unless nothing changed and they are recent) and
        re-assess the sessions' ownership with them; publish what changed."""
        registry = await self._current_registry()
        if registry is None:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        expire = now - self._expired_at >= EXPIRE_EVERY_SECONDS
        since = now - self._read_at
        if not force and since < ROWS_MIN_INTERVAL_SECONDS:
            return
        recent = since < ROWS_REREAD_SECONDS
        claims = self._claims()
        assessed = self._assessed

        def read() -> tuple[tuple[int, int], list[JsonRow] | None, dict[str, SessionOwnership]]:
            if expire:
                registry.remove_expired(grace_seconds=EXPIRED_ROW_GRACE_SECONDS)
            stamp = registry.change_stamp()
            if not force and recent and stamp == self._stamp:
                if claims == assessed:
                    return stamp, None, self._ownership
                return stamp, None, assess_sessions(registry, claims)
            return stamp, list(worker_rows(registry)), assess_sessions(registry, claims)

        outcome = await self._to_thread(read)
        if outcome is None:
            return
        self._stamp, rows, ownership = outcome
        if expire:
            self._expired_at = now
        self._take_ownership(claims, ownership)
        if rows is None:
            return
        self._read_at = now
        # Ages move with the clock; only a real change is news.
        if _without_ages(rows) != _without_ages(self.rows):
            self.rows = rows
            self._publish(Event(EventKind.WORKERS))
        else:
            self.rows = rows

    def _claims(self) -> frozenset[SessionClaim]:
        claims = set()
        for session in self._sessions.values():
            if session.worker_identity is None or session.closed:
                continue
            ours = self._http.get(session.id)
            claims.add(
                SessionClaim(session.id, session.worker_identity)
                if ours is None
                else SessionClaim(session.id, ours.identity, session.id, ours.epoch)
            )
        return frozenset(claims)

    def _take_ownership(
        self, claims: frozenset[SessionClaim], ownership: dict[str, SessionOwnership]
    ) -> None:
        # Sessions closed while the thread ran are gone from _sessions.
        fresh = {k: v for k, v in ownership.items() if k in self._sessions}
        before = {k: v.status for k, v in self._ownership.items()}
        self._ownership, self._assessed = fresh, claims
        # Details carry ages that move with the clock; only a verdict is news.
        if {k: v.status for k, v in fresh.items()} != before:
            self._publish(Event(EventKind.SESSIONS, text="worker ownership changed"))

    async def _refresh_loop(self) -> None:
        while True:
            await self.refresh(force=False)
            await asyncio.sleep(ROWS_REFRESH_SECONDS)

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
            await asyncio.sleep(DIAGNOSTICS_INTERVAL_SECONDS)

    def warnings_json(self) -> list[dict[str, Any]]:
        return warnings_json(self.diagnostics, self.own_warnings)

    async def _to_thread(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run blocking registry work off the loop; a failure is reported, never raised.

        A damaged file is one warning (what is wrong, the fix), not a
        traceback per refresh; anything else unexpected is logged once.
        """
        try:
            return await asyncio.to_thread(fn, *args)
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
            registry.close()
        self.registry = fresh
        self._stamp = None
        logger.warning("worker registry %s was replaced: opened it again", self.path)
        self._set_problem(None)
        # Our own HTTP sessions' rows lived in the old file: write them again.
        for session_id, worker in list(self._http.items()):
            epoch = await self._to_thread(self._reregister, session_id, worker.identity)
            if epoch is not None:
                self._http[session_id] = _HttpWorker(worker.identity, epoch)
        return fresh

    def _reregister(self, session_id: str, identity: str) -> int:
        assert self.registry is not None
        session = self._sessions.get(session_id)
        return self.registry.register(
            worker_identity=identity,
            client_name=session.client_name if session else "unknown",
            session_id=session_id,
            role=ROLE_HTTP_SESSION,
            server=session.server if session else None,
            pid=os.getpid(),
            heartbeat_ttl_seconds=self.ttl,
            runtime_version=__version__,
        ).fencing_epoch

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


def _beat_all(registry: WorkerRegistry, workers: list[_HttpWorker]) -> None:
    for worker in workers:
        outcome = registry.heartbeat(worker.identity, worker.epoch)
        if not outcome.renewed and not outcome.transient:
            logger.warning("HTTP session worker not renewed: %s", outcome)


def _without_ages(rows: list[JsonRow]) -> list[JsonRow]:
    return [{k: v for k, v in row.items() if k != "heartbeat_age_seconds"} for row in rows]


def _file_stamp(path: Path) -> tuple[int, int, int, float] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime


def _changed_since(path: Path, stamp: tuple[int, int, int, float] | None) -> bool:
    return _file_stamp(path) != stamp
