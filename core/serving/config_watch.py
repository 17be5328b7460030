"""Hot reload: watch the config file and apply valid edits (docs/design.md §3.9).

watchdog watches the *folder*, because editors save by writing a temp file
and renaming it over the config (the file's own inode goes away). Events
arrive on watchdog's thread and are handed to the loop; a short debounce
folds the burst of events one save makes into one reload. A valid edit
restarts only the servers whose entry changed (and starts/stops added and
removed ones); an invalid edit keeps everything running and is reported
with file, line and key. A save caught half-written (the truncate before
the write) is retried once the burst settles.

The file is read on a daemon thread of its own, within ``READ_TIMEOUT_SECONDS``
of the supervisor's clock: a read that hangs (a network share that stopped
answering) refuses the edit instead of stalling reloads, and shutdown never
waits for it. Whatever goes wrong in a reload, the watcher survives it: an
unexpected error is logged once and shown like any refused edit, and the
next good edit applies.
"""

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

from core.base.clock import Clock, wait_within
from core.base.errors import ConfigError
from core.settings.config import TrayConfig, load_config
from core.supervision.supervisor import ReloadResult, Supervisor

logger = logging.getLogger(__name__)

#: Quiet time after the last file event before the config is read.
DEBOUNCE_SECONDS: Final = 0.3
#: At shutdown, how long watchdog's observer thread gets to stop.
OBSERVER_JOIN_SECONDS: Final = 5.0
#: A config read (at most 1 MiB of a local file) takes milliseconds; one
#: that takes this long hangs in the file system and is given up.
READ_TIMEOUT_SECONDS: Final = 10.0

#: Reads and checks the config file (blocking; run on a thread of its own).
Loader = Callable[[Path], TrayConfig]


class _Handler(FileSystemEventHandler):
    def __init__(
        self, target: Path, loop: asyncio.AbstractEventLoop, poke: "ConfigWatcher"
    ) -> None:
        self._target = target
        self._loop = loop
        self._poke = poke

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in ("opened", "closed_no_write"):
            return
        paths = {str(event.src_path), str(getattr(event, "dest_path", "") or "")}
        if str(self._target) in paths:
            self._loop.call_soon_threadsafe(self._poke.changed)


class ConfigWatcher:
    def __init__(
        self,
        supervisor: Supervisor,
        path: Path,
        *,
        debounce: float = DEBOUNCE_SECONDS,
        read_timeout: float = READ_TIMEOUT_SECONDS,
        loader: Loader = load_config,
        clock: Clock | None = None,
    ) -> None:
        self.supervisor = supervisor
        self.path = path.resolve()
        self.debounce = debounce
        self.read_timeout = read_timeout
        self._loader = loader
        self._clock = clock or supervisor.clock
        self._observer: BaseObserver | None = None
        self._pending: asyncio.TimerHandle | None = None
        self._reloading: asyncio.Task[None] | None = None
        #: The read in flight, which shutdown cancels rather than waits for.
        self._read: asyncio.Future[TrayConfig] | None = None
        self._again = False
        self._closing = False
        #: The last unexpected failure's text: its traceback is logged once.
        self._last_unexpected: str | None = None
        #: The last reload's outcome, for tests and the UI.
        self.last_result: ReloadResult | None = None
        self.reloads = 0
        #: Told each config the supervisor took (what is not the supervisor's: telemetry).
        self.on_applied: Callable[[TrayConfig], Awaitable[None]] | None = None

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        observer = Observer()
        observer.schedule(_Handler(self.path, loop, self), str(self.path.parent), recursive=False)
        observer.daemon = True
        observer.start()
        self._observer = observer

    async def aclose(self) -> None:
        self._closing = True
        if self._pending is not None:
            self._pending.cancel()
        if self._read is not None:
            self._read.cancel()
        observer = self._observer
        if observer is not None:
            observer.stop()
            await asyncio.to_thread(observer.join, OBSERVER_JOIN_SECONDS)
            self._observer = None
        if self._reloading is not None:
            await asyncio.gather(self._reloading, return_exceptions=True)

    def changed(self) -> None:
        """A file event for the config: (re)start the debounce."""
        if self._closing:
            return
        if self._pending is not None:
            self._pending.cancel()
        self._pending = asyncio.get_running_loop().call_later(self.debounce, self._fire)

    def _fire(self) -> None:
        self._pending = None
        if self._reloading is not None and not self._reloading.done():
            self._again = True
            return
        self._reloading = asyncio.get_running_loop().create_task(self.reload())

    async def reload(self) -> None:
        while not self._closing:
            self._again = False
            await self._reload_once()
            if not self._again:
                return

    async def _reload_once(self) -> None:
        try:
            config = await self._load()
        except ConfigError as exc:
            self._refuse(str(exc))
            return
        except asyncio.CancelledError:
            if self._closing:
                return  # shutdown gave up the read
            raise
        except Exception as exc:
            self._unexpected("read", exc)
            return
        try:
            self.last_result = await self.supervisor.apply_config(config)
        except Exception as exc:
            self._unexpected("apply", exc)
            return
        self._last_unexpected = None
        self.reloads += 1
        logger.info("config reloaded: %s", self.last_result)
        if self.on_applied is not None:
            await self.on_applied(config)

    async def _load(self) -> TrayConfig:
        """``loader(path)`` on a daemon thread, given up after ``read_timeout``."""
        loop = asyncio.get_running_loop()
        read: asyncio.Future[TrayConfig] = loop.create_future()

        def settle(outcome: TrayConfig | Exception) -> None:
            if read.done():  # given up (timeout or shutdown) meanwhile
                return
            if isinstance(outcome, Exception):
                read.set_exception(outcome)
            else:
                read.set_result(outcome)

        def work() -> None:
            outcome: TrayConfig | Exception
            try:
                outcome = self._loader(self.path)
            except Exception as exc:
                outcome = exc
            # RuntimeError: the loop closed while this read hung; nobody waits for it.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(settle, outcome)

        # Not asyncio.to_thread: a hung read would hold an executor thread
        # that asyncio.run joins at exit, so shutdown would hang with it.
        threading.Thread(target=work, name="mcp-tray:config-read", daemon=True).start()
        self._read = read
        try:
            finished, config = await wait_within(self._clock, read, self.read_timeout)
        finally:
            self._read = None
        if self._closing:
            raise asyncio.CancelledError
        if not finished or config is None:
            raise ConfigError(
                self.path,
                f"reading it took longer than {self.read_timeout:g} s, so the edit was not applied",
                fix="check the file system it is on (a network share that stopped "
                "answering?); mcp-tray reads it again at its next change",
            )
        return config

    def _refuse(self, message: str) -> None:
        logger.warning("config reload refused: %s", message)
        self.supervisor.report_config_error(message)

    def _unexpected(self, step: str, exc: Exception) -> None:
        """A bug, not a bad edit: say so where config errors show, keep running."""
        message = str(
            ConfigError(
                self.path,
                f"mcp-tray failed to {step} this edit ({type(exc).__name__}: {exc}); "
                "the servers keep running on the last good config",
                fix="save the file again to retry; if it persists, report it with mcp-tray's log",
            )
        )
        if message != self._last_unexpected:
            logger.error("config reload failed: %s", message, exc_info=exc)
        else:
            logger.warning("config reload failed again: %s", message)
        self._last_unexpected = message
        self.supervisor.report_config_error(message)
