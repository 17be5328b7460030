"""The one running instance per user: its lock, its runtime file, its token.

The instance holds an exclusive lock on ``state/instance.lock`` for its
whole life (core.platform.files: flock, or msvcrt on Windows), so a crash
releases it; ``state/runtime.json`` tells the CLI
where the local API listens. A runtime file whose lock nobody holds is stale
(the tray died) and is treated as "not running".

Neither flock nor msvcrt can test a lock without taking it, so whoever asks
"is a tray running?" holds the lock for a moment. A tray starting in that
moment, or a second asker, finds it taken by nobody that stays. Both sides
therefore look again for a short while before believing a lock is held
(five bridges polling at once made a starting tray give up as "already
running", and a second tray was started).
"""

import contextlib
import json
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any, Final

import psutil

from core import __version__
from core.base.errors import AlreadyRunning, NotRunning
from core.platform.files import open_private, try_lock, unlock, write_private
from core.settings.paths import Paths

#: The warning family of a gateway that could not listen on its configured
#: port and fell back to another (the Warnings tab, /api/v1/warnings, doctor).
PORT_TAKEN_FAMILY: Final = "port-taken"
#: How long a starting instance keeps trying a taken lock: an asker holds it
#: for microseconds, a running instance for ever.
ACQUIRE_GRACE_SECONDS: Final = 1.0
#: How long an asker keeps trying a lock held with nothing published (another
#: asker, or a tray between taking it and publishing).
PROBE_GRACE_SECONDS: Final = 0.1
#: The pause between two tries.
RETRY_SECONDS: Final = 0.002


@dataclass(frozen=True)
class RuntimeInfo:
    pid: int
    #: Where the gateway listens now.
    port: int
    url: str
    version: str
    owner: str
    started_at: float
    #: The ``gateway.port`` it was started with (0: any free port). Differs
    #: from ``port`` when that port was taken at start, so the CLI can tell a
    #: fallback from a config edit not yet applied.
    configured_port: int = 0

    @property
    def fell_back(self) -> bool:
        """Listening elsewhere than the fixed port it was configured for."""
        return self.configured_port not in (0, self.port)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "RuntimeInfo":
        port = int(data["port"])
        # The URL is rebuilt from the port, never read: whatever the file says,
        # the CLI and bridges send the token to loopback only.
        owner, started = str(data.get("owner", "")), float(data.get("started_at", 0.0))
        return cls(
            int(data["pid"]),
            port,
            loopback_url(port),
            str(data["version"]),
            owner,
            started,
            # A file written before this field existed: no fallback known.
            configured_port=int(data.get("configured_port", port)),
        )


class Instance:
    """Held by the running tray (or headless run). Use ``Instance.acquire``."""

    def __init__(self, paths: Paths, lock_handle: IO[str]) -> None:
        self.paths = paths
        self._lock_handle: IO[str] | None = lock_handle

    @classmethod
    def acquire(cls, paths: Paths, grace: float = ACQUIRE_GRACE_SECONDS) -> "Instance":
        paths.ensure()
        handle = open_private(paths.lock_file, "a+")
        if not _retry(lambda: try_lock(handle), grace):
            handle.close()
            info = _read_info(paths)
            raise AlreadyRunning(
                info.pid if info else None, info.url if info else None, paths.lock_file
            ) from None
        # A runtime file left now is a dead tray's: gone before this one publishes,
        # or a CLI asking meanwhile would send the token to its port, which by then
        # may be anyone's.
        with contextlib.suppress(FileNotFoundError):
            paths.runtime_file.unlink()
        return cls(paths, handle)

    def publish(self, port: int, owner: str, configured_port: int | None = None) -> RuntimeInfo:
        """Write the runtime file: where the CLI and bridges find this instance."""
        info = RuntimeInfo(
            pid=os.getpid(),
            port=port,
            url=loopback_url(port),
            version=__version__,
            owner=owner,
            started_at=time.time(),
            configured_port=port if configured_port is None else configured_port,
        )
        write_private(self.paths.runtime_file, json.dumps(asdict(info), indent=2))
        return info

    def release(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.paths.runtime_file.unlink()
        if self._lock_handle is not None:
            unlock(self._lock_handle)
            self._lock_handle.close()
            self._lock_handle = None


def _read_info(paths: Paths) -> RuntimeInfo | None:
    try:
        return RuntimeInfo.from_json(json.loads(paths.runtime_file.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def running_instance(paths: Paths) -> RuntimeInfo:
    """Where the running instance listens; ``NotRunning`` when there is none."""
    info = _read_info(paths)
    if info is None:
        raise NotRunning(paths.state_dir)
    if not _lock_held(paths):
        raise NotRunning(paths.state_dir, f"stale runtime file from pid {info.pid}")
    return info


def instance_held(paths: Paths, grace: float = PROBE_GRACE_SECONDS) -> bool:
    """Some process holds the instance lock: a tray runs, or is starting."""
    return _lock_held(paths, grace)


def _lock_held(paths: Paths, grace: float = PROBE_GRACE_SECONDS) -> bool:
    try:
        handle = open_private(paths.lock_file, "a+")
    except OSError:
        return False
    with handle:
        deadline = time.monotonic() + grace
        while True:
            if try_lock(handle):
                unlock(handle)
                return False
            # A live tray's published file: held for sure, answered at once.
            if _published_by_a_live_process(paths) or time.monotonic() >= deadline:
                return True
            time.sleep(RETRY_SECONDS)


def _published_by_a_live_process(paths: Paths) -> bool:
    info = _read_info(paths)
    return info is not None and psutil.pid_exists(info.pid)


def _retry(attempt: Callable[[], bool], grace: float) -> bool:
    """``attempt`` until it holds, for up to ``grace`` seconds; whether it did."""
    deadline = time.monotonic() + grace
    while not attempt():
        if time.monotonic() >= deadline:
            return False
        time.sleep(RETRY_SECONDS)
    return True


def loopback_url(port: int) -> str:
    return f"http://127.0.0.1:{port}"


def new_token() -> str:
    return secrets.token_urlsafe(32)


def load_or_create_file_token(path: Path) -> str:
    """The API bearer token, in a 0600 file (the gateway moves it to the keyring)."""
    try:
        token = path.read_text().strip()
        if token:
            return token
    except FileNotFoundError:
        pass
    token = new_token()
    write_private(path, token + "\n")
    return token
