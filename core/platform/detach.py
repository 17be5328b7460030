"""Start a process that belongs to nobody's process tree (a bridge starting the tray).

A bridge runs inside its client's process tree, and clients end their
tree when they quit (a process group, a job object, a walk over the
descendants). The tray a bridge starts must outlive all of that:

- POSIX: the classic double fork. The first child makes a new session
  (``setsid``), forks the tray and exits at once, so the tray is in a
  session and group of its own and its parent is no longer the bridge (it
  goes to init, or to a subreaper above). Its stdin is /dev/null, its
  stdout and stderr a log file, and no other descriptor of the bridge
  reaches it (the client's pipes above all: a tray holding them would keep
  the client from ever seeing the bridge's EOF). Between fork and exec only
  thin system calls run: the bridge has threads.
- Windows: ``DETACHED_PROCESS`` (no console of the client's) and
  ``CREATE_NEW_PROCESS_GROUP`` (no Ctrl+C or Ctrl+Break of the client's),
  plus ``CREATE_BREAKAWAY_FROM_JOB`` so a client's job object does not take
  the tray with it; a job that forbids breaking away gets the tray without
  that flag.
"""

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from core.platform.files import PRIVATE_FILE_MODE, open_private

#: The exit status of the first child when it could not start the tray.
START_FAILED: Final = 127


def _resolve(argv: Sequence[str]) -> str:
    """The executable's path, resolved before forking (PATH lookups allocate)."""
    found = shutil.which(argv[0])
    if found is None:
        raise FileNotFoundError(f"{argv[0]!r} is not an executable on PATH")
    return found


if sys.platform == "win32":
    _FLAGS: Final = subprocess.DETACHED_PROCESS | subprocess.CREATE_NEW_PROCESS_GROUP
    _BREAKAWAY: Final = subprocess.CREATE_BREAKAWAY_FROM_JOB

    def spawn_detached(argv: Sequence[str], env: Mapping[str, str], cwd: Path, log: Path) -> int:
        """Start ``argv`` outside the caller's tree; its pid."""
        executable = _resolve(argv)
        with open_private(log, "ab") as out:
            for flags in (_FLAGS | _BREAKAWAY, _FLAGS):
                try:
                    proc = subprocess.Popen(
                        [executable, *argv[1:]],
                        env=dict(env),
                        cwd=cwd,
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=out,
                        close_fds=True,
                        creationflags=flags,
                    )
                except PermissionError:
                    # ERROR_ACCESS_DENIED: the caller's job forbids breaking away.
                    continue
                return proc.pid
        raise PermissionError(f"Windows refused to start {executable!r}")

else:

    def spawn_detached(argv: Sequence[str], env: Mapping[str, str], cwd: Path, log: Path) -> int:
        """Start ``argv`` in a session of its own, reparented away from the caller; its pid."""
        executable = _resolve(argv)
        args = [os.fsencode(arg) for arg in argv]
        environment = {os.fsencode(k): os.fsencode(v) for k, v in env.items()}
        folder = os.fsencode(cwd)
        out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, PRIVATE_FILE_MODE)
        nothing = os.open(os.devnull, os.O_RDONLY)
        told, tell = os.pipe()
        try:
            first = os.fork()
            if first == 0:  # pragma: no cover - runs in the forked child
                _become_detached(executable, args, environment, folder, out, nothing, told, tell)
            os.close(tell)
            tell = -1
            _, status = os.waitpid(first, 0)
            pid_text = b""
            while chunk := os.read(told, 64):
                pid_text += chunk
        finally:
            for fd in (out, nothing, told, tell):
                if fd >= 0:
                    os.close(fd)
        if os.waitstatus_to_exitcode(status) != 0 or not pid_text:
            raise OSError(f"could not start {executable!r} detached (see {log})")
        return int(pid_text)

    def _become_detached(
        executable: str,
        args: list[bytes],
        env: dict[bytes, bytes],
        cwd: bytes,
        out: int,
        nothing: int,
        told: int,
        tell: int,
    ) -> None:  # pragma: no cover - runs in the forked children
        """The first child: a new session, the tray forked from it, and its own exit."""
        try:
            os.close(told)
            os.setsid()
            second = os.fork()
            if second != 0:
                os.write(tell, str(second).encode())
                os._exit(0)
            os.dup2(nothing, 0)
            os.dup2(out, 1)
            os.dup2(out, 2)
            os.closerange(3, os.sysconf("SC_OPEN_MAX"))
            os.chdir(cwd)
            os.execve(executable, args, env)
        except BaseException as exc:
            # fd 2: the bridge's stderr before the dup2, the log after it.
            os.write(2, f"mcp-tray: a detached start failed: {exc}\n".encode())
        os._exit(START_FAILED)
