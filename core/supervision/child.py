"""One run of a server as an OS process group, and the stop contract.

Spawning: the child gets its own session (so its pid is its process-group id
and npx/uvx grandchildren share the group), its stdio as pipes, and
``MCP_TRAY_OWNER=<instance id>`` in its environment so a sweep after a crash
can find what a dead tray left behind.

Exit detection is event-driven: a pidfd registered with the event loop
becomes readable the instant the child exits (no pid polling, no reaping
race: the pidfd does not reap, ``Popen.poll`` does once it fired).

The stop contract, in order (each wait bounded by a named constant):
1. close the child's stdin (a well-behaved stdio server exits on EOF);
2. wait ``STDIN_CLOSE_GRACE_SECONDS`` for the leader to exit;
3. if anything of the group is left (the leader, or a grandchild that
   outlived it), SIGTERM the whole group and wait ``SIGTERM_GRACE_SECONDS``;
4. SIGKILL the group and wait ``SIGKILL_SETTLE_SECONDS``;
5. verify with psutil that no live process of the group survives, and log
   loudly with pids and command lines if one does.
"""

import asyncio
import contextlib
import os
import secrets
import shutil
import signal
import subprocess
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

import psutil

from core.base.clock import SYSTEM_CLOCK, Clock, wait_within
from core.base.envvars import ENV_PREFIX, OWNER_ENV, RUNTIME_VERSION_ENV, TAG_SEPARATOR
from core.base.errors import SpawnError

#: Grace period for the server to exit on its own after its stdin closes.
STDIN_CLOSE_GRACE_SECONDS: Final = 2.0
#: After SIGTERM to the whole group, how long before SIGKILL.
SIGTERM_GRACE_SECONDS: Final = 2.0
#: After SIGKILL, how long the kernel gets to tear the group down before we
#: report survivors (only an uninterruptible process runs this out).
SIGKILL_SETTLE_SECONDS: Final = 1.0
#: How often the stop contract re-checks whether the group is empty. This is
#: the stop path only; exit detection never polls.
GROUP_CHECK_INTERVAL_SECONDS: Final = 0.02
#: Largest single JSON-RPC line read from a child (big resources are legal).
MAX_LINE_BYTES: Final = 64 * 1024 * 1024


@dataclass(frozen=True)
class StopTiming:
    stdin_close_grace: float = STDIN_CLOSE_GRACE_SECONDS
    sigterm_grace: float = SIGTERM_GRACE_SECONDS
    sigkill_settle: float = SIGKILL_SETTLE_SECONDS


def describe_returncode(returncode: int | None) -> str:
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by {name}"
    return f"exit code {returncode}"


def child_environment(
    overrides: Mapping[str, str], owner: str, version: str, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The tray's environment minus mcp-tray's own variables, plus the entry's env and the tag.

    The tag is ``<owner>/<child>``: the owner part lets a later sweep find
    what a dead tray left; the child part lets the stop contract find this
    child's descendants even after they left its process group (setsid).
    """
    source = os.environ if base is None else base
    env = {k: v for k, v in source.items() if not k.startswith(ENV_PREFIX)}
    env.update(overrides)
    env[OWNER_ENV] = f"{owner}{TAG_SEPARATOR}{secrets.token_hex(6)}"
    env[RUNTIME_VERSION_ENV] = version
    return env


def resolve_command(command: str, env: Mapping[str, str], cwd: str | None) -> str:
    """Find ``command`` the way the child's exec would, to fail with a clear reason."""
    if os.sep in command:
        candidate = command if os.path.isabs(command) or cwd is None else os.path.join(cwd, command)
        if not os.path.exists(candidate):
            raise SpawnError(f"command {command!r} does not exist", permanent=True)
        if os.path.isdir(candidate):
            raise SpawnError(f"command {command!r} is a folder, not a program", permanent=True)
        if not os.access(candidate, os.X_OK):
            raise SpawnError(
                f"command {command!r} is not executable (chmod +x it, or run it through its interpreter)",
                permanent=True,
            )
        return command
    found = shutil.which(command, path=env.get("PATH", os.defpath))
    if found is None:
        raise SpawnError(
            f"command {command!r} was not found on PATH ({env.get('PATH', os.defpath)})",
            permanent=True,
        )
    return found


class Spawner(Protocol):
    """The spawn seam: ``ChildProcess.spawn`` by default; tests may wrap or replace it."""

    def __call__(
        self, command: str, args: Sequence[str], *, env: Mapping[str, str], cwd: str | None
    ) -> Awaitable["ChildProcess"]: ...


class ChildProcess:
    """A spawned child: its pipes, its process group, and its exit."""

    def __init__(
        self, popen: "subprocess.Popen[bytes]", argv: list[str], tag: str | None = None
    ) -> None:
        self.popen = popen
        #: This child's ``MCP_TRAY_OWNER`` value, inherited by its descendants.
        self.tag = tag
        self.pid = popen.pid
        #: start_new_session makes the child a group leader: pgid == pid.
        self.pgid = popen.pid
        self.argv = argv
        loop = asyncio.get_running_loop()
        self._loop = loop
        self.exited: asyncio.Future[int] = loop.create_future()
        self._pidfd: int | None = os.pidfd_open(self.pid)
        loop.add_reader(self._pidfd, self._on_pidfd)
        self.stdout = asyncio.StreamReader(limit=MAX_LINE_BYTES)
        self.stderr = asyncio.StreamReader(limit=MAX_LINE_BYTES)
        self._stdin: asyncio.WriteTransport | None = None
        self._stdin_protocol: _WriteProtocol | None = None
        self._read_transports: list[asyncio.BaseTransport] = []

    @classmethod
    async def spawn(
        cls,
        command: str,
        args: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str | None,
    ) -> "ChildProcess":
        # Checked here, not left to exec, so the reason names the folder.
        if cwd is not None and not os.path.isdir(cwd):  # noqa: ASYNC240 - one stat, fast
            raise SpawnError(f"working folder (cwd) {cwd!r} does not exist", permanent=True)
        executable = resolve_command(command, env, cwd)
        argv = [executable, *args]
        try:
            # Popen forks synchronously, as asyncio's own subprocess support does;
            # we keep the Popen so exit is watched by pidfd, not a watcher thread.
            popen = subprocess.Popen(  # noqa: ASYNC220
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=dict(env),
                cwd=cwd,
                start_new_session=True,
                close_fds=True,
            )
        except PermissionError as exc:
            raise SpawnError(
                f"cannot execute {command!r}: {exc.strerror}", permanent=True
            ) from None
        except FileNotFoundError as exc:
            raise SpawnError(
                f"cannot start {command!r}: {exc.strerror} ({exc.filename})", permanent=True
            ) from None
        except OSError as exc:
            # EAGAIN, ENOMEM: the machine is short of resources, not the config wrong.
            raise SpawnError(f"cannot start {command!r}: {exc.strerror}", permanent=False) from None
        except ValueError as exc:
            # A NUL byte, an '=' in an env key, a string that is not valid text.
            raise SpawnError(f"cannot start {command!r}: {exc}", permanent=True) from None
        child = cls(popen, argv, env.get(OWNER_ENV))
        try:
            await child._connect_pipes()
        except BaseException:
            # Cancelled (or failed) between fork and pipes: never leak the child.
            child._signal_group(signal.SIGKILL)
            popen.wait()
            child.close()
            raise
        return child

    async def _connect_pipes(self) -> None:
        loop = self._loop
        assert self.popen.stdin and self.popen.stdout and self.popen.stderr
        for reader, pipe in ((self.stdout, self.popen.stdout), (self.stderr, self.popen.stderr)):
            protocol_factory = _reader_protocol(reader)
            transport, _ = await loop.connect_read_pipe(protocol_factory, pipe)
            self._read_transports.append(transport)
        protocol = _WriteProtocol()
        stdin_transport, _ = await loop.connect_write_pipe(lambda: protocol, self.popen.stdin)
        self._stdin = stdin_transport
        self._stdin_protocol = protocol

    def _on_pidfd(self) -> None:
        assert self._pidfd is not None
        self._loop.remove_reader(self._pidfd)
        os.close(self._pidfd)
        self._pidfd = None
        # The pidfd fired, so the child has exited: poll() reaps without blocking.
        returncode = self.popen.poll()
        if returncode is None:  # pragma: no cover - the kernel said it exited
            returncode = self.popen.wait()
        if not self.exited.done():
            self.exited.set_result(returncode)

    @property
    def returncode(self) -> int | None:
        return self.exited.result() if self.exited.done() else None

    def is_alive(self) -> bool:
        """True until the leader has exited (checked with a syscall, not a cached flag)."""
        if self.exited.done():
            return False
        if self._pidfd is None:
            return False
        try:
            info = os.waitid(os.P_PIDFD, self._pidfd, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return False
        return info is None

    async def write(self, data: bytes) -> None:
        if self._stdin is None or self._stdin.is_closing():
            raise BrokenPipeError("the child's stdin is closed")
        self._stdin.write(data)
        assert self._stdin_protocol is not None
        await self._stdin_protocol.drain()

    def close_stdin(self) -> None:
        if self._stdin is not None and not self._stdin.is_closing():
            self._stdin.close()

    async def stop(
        self, timing: StopTiming, log: Callable[[str], None], clock: Clock = SYSTEM_CLOCK
    ) -> None:
        """Run the stop contract (module docstring): stdin EOF, TERM, KILL, verify."""
        self.close_stdin()
        if not self.exited.done():
            await wait_within(clock, asyncio.shield(self.exited), timing.stdin_close_grace)
        await self.end_group(timing, log, clock)

    async def end_group(
        self, timing: StopTiming, log: Callable[[str], None], clock: Clock = SYSTEM_CLOCK
    ) -> None:
        """Stop whatever of the group is left (the leader may already be gone)."""
        if await self._group_alive():
            self._signal_group(signal.SIGTERM)
            if not await self._wait_group_empty(timing.sigterm_grace, clock):
                log(
                    f"pgid {self.pgid} still alive {timing.sigterm_grace:g} s after SIGTERM; sending SIGKILL"
                )
                self._signal_group(signal.SIGKILL)
                await self._wait_group_empty(timing.sigkill_settle, clock)
        await self._end_escapees(timing, log, clock)
        survivors = await asyncio.to_thread(group_members, self.pgid)
        if survivors:
            listed = "; ".join(f"pid {p.pid} {_cmdline(p)}" for p in survivors)
            log(f"LEFTOVER: processes of pgid {self.pgid} survived SIGKILL: {listed}")
        if not self.exited.done():
            await wait_within(clock, asyncio.shield(self.exited), timing.sigkill_settle)
        self.close()

    async def _end_escapees(
        self, timing: StopTiming, log: Callable[[str], None], clock: Clock
    ) -> None:
        """Descendants that left the group (setsid) but carry this child's tag go too."""
        if not self.tag:
            return
        escaped = await asyncio.to_thread(tagged_outside_group, self.tag, self.pgid)
        if not escaped:
            return
        listed = "; ".join(f"pid {p.pid} {_cmdline(p)}" for p in escaped)
        log(f"ending processes that left pgid {self.pgid} but carry its tag: {listed}")
        for proc in escaped:
            with contextlib.suppress(psutil.Error):
                proc.terminate()
        alive = await _wait_gone(escaped, timing.sigterm_grace, clock)
        for proc in alive:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        if stubborn := await _wait_gone(alive, timing.sigkill_settle, clock):
            listed = "; ".join(f"pid {p.pid} {_cmdline(p)}" for p in stubborn)
            log(f"LEFTOVER: tagged processes outside pgid {self.pgid} survived SIGKILL: {listed}")

    def close(self) -> None:
        """Release the pipes and the pidfd (the process itself is not touched)."""
        if self._stdin is not None:
            self._stdin.close()
        for transport in self._read_transports:
            transport.close()
        self.stdout.feed_eof()
        self.stderr.feed_eof()
        if self._pidfd is not None and self.exited.done():
            self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None

    def _signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, sig)

    async def _group_alive(self) -> bool:
        try:
            os.killpg(self.pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        # killpg also sees zombies; only live members matter.
        return bool(await asyncio.to_thread(group_members, self.pgid))

    async def _wait_group_empty(self, seconds: float, clock: Clock) -> bool:
        # The deadline is on the injected clock; the re-check interval is real
        # time (it only paces the polling of a group that is on its way out).
        deadline = clock.monotonic() + seconds
        while await self._group_alive():
            if clock.monotonic() >= deadline:
                return False
            await asyncio.sleep(GROUP_CHECK_INTERVAL_SECONDS)
        return True


class _WriteProtocol(asyncio.Protocol):
    """Flow control for the child's stdin pipe."""

    def __init__(self) -> None:
        self._paused = False
        self._waiters: list[asyncio.Future[None]] = []
        self._lost: Exception | None = None

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = exc or BrokenPipeError("the child's stdin closed")
        self._wake()

    def _wake(self) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()

    async def drain(self) -> None:
        if self._lost is not None:
            raise BrokenPipeError(str(self._lost))
        if not self._paused:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        await waiter
        if self._lost is not None:
            raise BrokenPipeError(str(self._lost))


def group_members(pgid: int) -> list[psutil.Process]:
    """Live (non-zombie) processes whose process group is ``pgid``. Blocking: call in a thread."""
    members = []
    for proc in psutil.process_iter(["status"]):
        try:
            if os.getpgid(proc.pid) != pgid:
                continue
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
        except (ProcessLookupError, psutil.Error):
            continue
        members.append(proc)
    return members


def tagged_outside_group(tag: str, pgid: int) -> list[psutil.Process]:
    """Live processes carrying ``tag`` in their environment but outside ``pgid``. Blocking."""
    uid = os.getuid()
    found = []
    for proc in psutil.process_iter(["uids", "status"]):
        try:
            if proc.info["uids"] is None or proc.info["uids"].real != uid:
                continue
            if proc.info["status"] == psutil.STATUS_ZOMBIE or os.getpgid(proc.pid) == pgid:
                continue
            if proc.environ().get(OWNER_ENV) == tag:
                found.append(proc)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return found


async def _wait_gone(
    procs: list[psutil.Process], seconds: float, clock: Clock
) -> list[psutil.Process]:
    """Wait (on ``clock``) for ``procs`` to end; those still running after ``seconds``."""
    deadline = clock.monotonic() + seconds
    while alive := [proc for proc in procs if _running(proc)]:
        if clock.monotonic() >= deadline:
            return alive
        await asyncio.sleep(GROUP_CHECK_INTERVAL_SECONDS)
    return []


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _cmdline(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline())[:200]
    except psutil.Error:
        return "?"


def _reader_protocol(reader: asyncio.StreamReader) -> Callable[[], asyncio.StreamReaderProtocol]:
    return lambda: asyncio.StreamReaderProtocol(reader)
