"""One run of a server as an OS process tree, and the stop contract.

Spawning: the child gets its stdio as pipes, ``MCP_TRAY_OWNER=<instance
id>/<child id>`` in its environment (so a stop finds descendants that left
its tree, and a sweep after a crash finds what a dead tray left behind),
and whatever the platform's process tree needs (core.platform.trees): its
own session on POSIX, so npx/uvx grandchildren share its process group; a
job object on Windows.

Exit detection is event-driven, by the platform's exit watch
(core.platform.exits: a pidfd on Linux, a kqueue on macOS, a thread blocked
in the wait on Windows and in the portable set); nothing polls the pid.

The stop contract, in order (each wait bounded by a named constant, on the
injected clock):
1. look at the child's descendants (a grandchild that left the tree is
   still below the child now), then close the child's stdin (a
   well-behaved stdio server exits on EOF);
2. wait ``STDIN_CLOSE_GRACE_SECONDS`` for the leader to exit;
3. if anything of the tree is left (the leader, or a grandchild that
   outlived it), take the polite step on the whole tree (SIGTERM to the
   group; CTRL_BREAK_EVENT on Windows) and wait ``SIGTERM_GRACE_SECONDS``;
4. take the hard step (SIGKILL to the group; terminating the job) and wait
   ``SIGKILL_SETTLE_SECONDS``;
5. end the descendants that left the tree (seen in step 1, or carrying
   this child's tag) the same way;
6. verify with psutil that nothing of the tree survives, and log loudly
   with pids and command lines if something does.
"""

import asyncio
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
from core.platform import procs
from core.platform.backends import Backends, backends
from core.platform.commands import popen_command

#: Grace period for the server to exit on its own after its stdin closes.
STDIN_CLOSE_GRACE_SECONDS: Final = 2.0
#: After the polite step (SIGTERM to the whole group), how long before the hard one.
SIGTERM_GRACE_SECONDS: Final = 2.0
#: After the hard step (SIGKILL), how long the OS gets to tear the tree down
#: before we report survivors (only an uninterruptible process runs this out).
SIGKILL_SETTLE_SECONDS: Final = 1.0
#: How often the stop contract re-checks whether the tree is empty. This is
#: the stop path only; exit detection never polls.
GROUP_CHECK_INTERVAL_SECONDS: Final = 0.02
#: Should an exit watch tell before ``poll`` can reap (none does), how soon to look again.
EARLY_EXIT_RECHECK_SECONDS: Final = 0.005
#: Largest single JSON-RPC line read from a child (big resources are legal).
MAX_LINE_BYTES: Final = 64 * 1024 * 1024

#: Pids of the children spawned here and not yet reaped: never the subreaper's to reap.
LIVE_PIDS: Final[set[int]] = set()


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


class Child(Protocol):
    """What the run loop, the upstream session and the standby use of a child: a
    ``ChildProcess``, or a remote server's session with its face
    (core.supervision.remote.RemoteChild, whose pid is None)."""

    @property
    def pid(self) -> int | None: ...

    argv: list[str]
    stdout: asyncio.StreamReader
    stderr: asyncio.StreamReader
    exited: "asyncio.Future[int]"
    #: How a remote's session ended (a process is never either).
    unreachable: bool
    needs_sign_in: bool

    @property
    def returncode(self) -> int | None: ...
    def is_alive(self) -> bool: ...
    def describe_end(self) -> str: ...
    async def write(self, data: bytes) -> None: ...
    def close_stdin(self) -> None: ...
    async def stop(
        self, timing: StopTiming, log: Callable[[str], None], clock: Clock = ...
    ) -> None: ...
    async def end_group(
        self, timing: StopTiming, log: Callable[[str], None], clock: Clock = ...
    ) -> None: ...


class Spawner(Protocol):
    """The spawn seam: ``ChildProcess.spawn`` by default; tests may wrap or replace it."""

    def __call__(
        self, command: str, args: Sequence[str], *, env: Mapping[str, str], cwd: str | None
    ) -> Awaitable["ChildProcess"]: ...


class ChildProcess:
    """A spawned child: its pipes, its process tree, and its exit."""

    #: Only a remote's session ends so (core.supervision.remote).
    unreachable = False
    needs_sign_in = False

    def __init__(
        self,
        popen: "subprocess.Popen[bytes]",
        argv: list[str],
        tag: str | None = None,
        platform: Backends | None = None,
    ) -> None:
        self.popen = popen
        #: This child's ``MCP_TRAY_OWNER`` value, inherited by its descendants.
        self.tag = tag
        self.pid = popen.pid
        self.argv = argv
        self.platform = platform or backends()
        loop = asyncio.get_running_loop()
        self._loop = loop
        self.exited: asyncio.Future[int] = loop.create_future()
        LIVE_PIDS.add(self.pid)
        self.tree = self.platform.trees.adopt(popen)
        self._watching = self.platform.exits.watch(popen, loop, self._on_exit)
        self.stdout = asyncio.StreamReader(limit=MAX_LINE_BYTES)
        self.stderr = asyncio.StreamReader(limit=MAX_LINE_BYTES)
        self._stdin: asyncio.WriteTransport | None = None
        self._stdin_protocol: _WriteProtocol | None = None
        #: Written this turn of the loop, to leave together at its end (``write``).
        self._outgoing: list[bytes] = []
        self._read_transports: list[asyncio.BaseTransport] = []
        #: Descendants seen below the child by the stop contract's first look.
        self._seen: dict[int, psutil.Process] = {}

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
        platform = backends()
        # A .cmd/.bat on Windows goes through cmd.exe, quoted for it (or refused).
        popen_args, program = popen_command(argv)
        try:
            # Popen forks synchronously, as asyncio's own subprocess support does;
            # we keep the Popen so the platform's exit watch, not asyncio's, sees the exit.
            popen = subprocess.Popen(  # noqa: ASYNC220
                popen_args,
                executable=program,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=dict(env),
                cwd=cwd,
                close_fds=True,
                **platform.trees.popen_options(),
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
        try:
            child = cls(popen, argv, env.get(OWNER_ENV), platform)
        except OSError as exc:
            # No descriptor for the exit watch, no job object: end it, try again later.
            popen.kill()
            popen.wait()
            LIVE_PIDS.discard(popen.pid)
            raise SpawnError(
                f"cannot watch {command!r} (pid {popen.pid}): {exc.strerror or exc}",
                permanent=False,
            ) from None
        try:
            await child._connect_pipes()
        except BaseException:
            # Cancelled (or failed) between fork and pipes: never leak the child.
            child.tree.kill()
            popen.kill()
            popen.wait()
            child.close()
            raise
        return child

    async def _connect_pipes(self) -> None:
        loop = self._loop
        pipes = self.platform.pipes
        assert self.popen.stdin and self.popen.stdout and self.popen.stderr
        for reader, pipe in ((self.stdout, self.popen.stdout), (self.stderr, self.popen.stderr)):
            transport = await pipes.read_pipe(loop, _reader_protocol(reader), pipe)
            self._read_transports.append(transport)
        protocol = _WriteProtocol()
        self._stdin = await pipes.write_pipe(loop, lambda: protocol, self.popen.stdin)
        self._stdin_protocol = protocol

    def _on_exit(self) -> None:
        # Every watch tells once poll() can reap (WNOHANG); should one ever be
        # early, look again soon: a blocking wait here would freeze core's loop.
        if not self._take_exit():
            self._loop.call_later(EARLY_EXIT_RECHECK_SECONDS, self._on_exit)

    def _take_exit(self) -> bool:
        """Reap the leader if it has exited (never blocks); whether its code is known."""
        if self.exited.done():
            return True
        returncode = self.popen.poll()
        if returncode is None:
            return False
        LIVE_PIDS.discard(self.pid)
        self.exited.set_result(returncode)
        return True

    @property
    def returncode(self) -> int | None:
        return self.exited.result() if self.exited.done() else None

    def describe_end(self) -> str:
        """How it ended, in words ("exit code 1", "killed by SIGKILL")."""
        return describe_returncode(self.returncode)

    def is_alive(self) -> bool:
        """True until the leader has exited (asked of the OS, not a cached flag)."""
        if self.exited.done():
            return False
        if self._watching.alive():
            return True
        # Gone before its watch's callback ran: take the code now, so nobody
        # told "not alive" reads a returncode of None ("still running").
        self._take_exit()
        return False

    async def write(self, data: bytes) -> None:
        """``data`` to the child's stdin, in order. What is written in one turn of the
        loop leaves in one write at its end: a busy gateway's concurrent calls then cost
        one system call and one wake-up of the child, not one each."""
        if self._stdin is None or self._stdin.is_closing():
            raise BrokenPipeError("the child's stdin is closed")
        if not self._outgoing:
            asyncio.get_running_loop().call_soon(self._flush)
        self._outgoing.append(data)
        assert self._stdin_protocol is not None
        await self._stdin_protocol.drain()

    def _flush(self) -> None:
        outgoing = self._outgoing
        if not outgoing:
            return
        data = outgoing[0] if len(outgoing) == 1 else b"".join(outgoing)
        outgoing.clear()
        if self._stdin is not None and not self._stdin.is_closing():
            self._stdin.write(data)

    def close_stdin(self) -> None:
        if self._stdin is not None and not self._stdin.is_closing():
            self._flush()  # what was written before goes first (EOF after it)
            self._stdin.close()

    async def stop(
        self, timing: StopTiming, log: Callable[[str], None], clock: Clock = SYSTEM_CLOCK
    ) -> None:
        """Run the stop contract (module docstring): look, stdin EOF, polite, hard, verify."""
        # Before stdin closes: a descendant that left the tree (setsid, env -i)
        # is below the child only while its parent lives.
        if not self.exited.done():
            self._seen.update((p.pid, p) for p in await asyncio.to_thread(self.tree.snapshot))
        self.close_stdin()
        if not self.exited.done():
            await wait_within(clock, asyncio.shield(self.exited), timing.stdin_close_grace)
        await self.end_group(timing, log, clock)

    async def end_group(
        self, timing: StopTiming, log: Callable[[str], None], clock: Clock = SYSTEM_CLOCK
    ) -> None:
        """Stop whatever of the tree is left (the leader may already be gone)."""
        tree = self.tree
        if await asyncio.to_thread(tree.alive):
            await asyncio.to_thread(tree.terminate)
            if not await self._wait_tree_empty(timing.sigterm_grace, clock):
                log(
                    f"{tree.label} still alive {timing.sigterm_grace:g} s after {tree.polite}; "
                    f"sending {tree.hard}"
                )
                await asyncio.to_thread(tree.kill)
                await self._wait_tree_empty(timing.sigkill_settle, clock)
        await self._end_escapees(timing, log, clock)
        survivors = await asyncio.to_thread(tree.members)
        if survivors:
            log(
                f"LEFTOVER: processes of {tree.label} survived {tree.hard}: {procs.listed(survivors)}"
            )
        if not self.exited.done():
            await wait_within(clock, asyncio.shield(self.exited), timing.sigkill_settle)
        self.close()
        reaper = self.platform.reaper
        if reaper.active:
            await asyncio.to_thread(reaper.reap, set(LIVE_PIDS))

    def _escapees(self) -> list[psutil.Process]:
        """Descendants outside the tree: seen below the child, or carrying its tag. Blocking."""
        found = {
            pid: proc
            for pid, proc in self._seen.items()
            if procs.running(proc) and not self.tree.contains(proc)
        }
        if self.tag:
            tag = self.tag
            for proc, _ in procs.tagged(lambda t: t == tag):
                if proc.pid not in found and not self.tree.contains(proc):
                    found[proc.pid] = proc
        return list(found.values())

    async def _end_escapees(
        self, timing: StopTiming, log: Callable[[str], None], clock: Clock
    ) -> None:
        escaped = await asyncio.to_thread(self._escapees)
        if not escaped:
            return
        log(f"ending processes that left {self.tree.label}: {procs.listed(escaped)}")
        await asyncio.to_thread(procs.terminate_each, escaped)
        alive = await _wait_gone(escaped, timing.sigterm_grace, clock)
        await asyncio.to_thread(procs.kill_each, alive)
        if stubborn := await _wait_gone(alive, timing.sigkill_settle, clock):
            log(
                f"LEFTOVER: processes that left {self.tree.label} survived the kill: "
                f"{procs.listed(stubborn)}"
            )

    def close(self) -> None:
        """Release the pipes and the exit watch (and the tree's hold once the leader is gone)."""
        if self._stdin is not None:
            self._flush()
            self._stdin.close()
        for transport in self._read_transports:
            transport.close()
        self.stdout.feed_eof()
        self.stderr.feed_eof()
        if self.exited.done():
            self._watching.close()
            self.tree.release()

    async def _wait_tree_empty(self, seconds: float, clock: Clock) -> bool:
        # The deadline is on the injected clock; the re-check interval is real
        # time (it only paces the polling of a tree that is on its way out).
        deadline = clock.monotonic() + seconds
        while await asyncio.to_thread(self.tree.alive):
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


async def _wait_gone(
    waiting: list[psutil.Process], seconds: float, clock: Clock
) -> list[psutil.Process]:
    """Wait (on ``clock``) for ``waiting`` to end; those still running after ``seconds``."""
    deadline = clock.monotonic() + seconds
    while alive := [proc for proc in waiting if procs.running(proc)]:
        if clock.monotonic() >= deadline:
            return alive
        await asyncio.sleep(GROUP_CHECK_INTERVAL_SECONDS)
    return []


def _reader_protocol(reader: asyncio.StreamReader) -> Callable[[], asyncio.StreamReaderProtocol]:
    return lambda: asyncio.StreamReaderProtocol(reader)
