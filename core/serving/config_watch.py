"""Hot reload: watch the config file and apply valid edits (DESIGN 3.9).

watchdog watches the *folder*, because editors save by writing a temp file
and renaming it over the config (the file's own inode goes away). Events
arrive on watchdog's thread and are handed to the loop; a short debounce
folds the burst of events one save makes into one reload. A valid edit
restarts only the servers whose entry changed (and starts/stops added and
removed ones); an invalid edit keeps everything running and is reported
with file, line and key. A save caught half-written (the truncate before
the write) is retried once the burst settles.
"""

import asyncio
import logging
from pathlib import Path
from typing import Final

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

from core.base.errors import ConfigError
from core.settings.config import TrayConfig, load_config
from core.supervision.supervisor import ReloadResult, Supervisor

logger = logging.getLogger(__name__)

#: Quiet time after the last file event before the config is read.
DEBOUNCE_SECONDS: Final = 0.3
#: At shutdown, how long watchdog's observer thread gets to stop.
OBSERVER_JOIN_SECONDS: Final = 5.0


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
        self, supervisor: Supervisor, path: Path, *, debounce: float = DEBOUNCE_SECONDS
    ) -> None:
        self.supervisor = supervisor
        self.path = path.resolve()
        self.debounce = debounce
        self._observer: BaseObserver | None = None
        self._pending: asyncio.TimerHandle | None = None
        self._reloading: asyncio.Task[None] | None = None
        self._again = False
        #: The last reload's outcome, for tests and the UI.
        self.last_result: ReloadResult | None = None
        self.reloads = 0

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        observer = Observer()
        observer.schedule(_Handler(self.path, loop, self), str(self.path.parent), recursive=False)
        observer.daemon = True
        observer.start()
        self._observer = observer

    async def aclose(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
        observer = self._observer
        if observer is not None:
            observer.stop()
            await asyncio.to_thread(observer.join, OBSERVER_JOIN_SECONDS)
            self._observer = None
        if self._reloading is not None:
            await asyncio.gather(self._reloading, return_exceptions=True)

    def changed(self) -> None:
        """A file event for the config: (re)start the debounce."""
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
        while True:
            self._again = False
            try:
                config: TrayConfig = await asyncio.to_thread(load_config, self.path)
            except ConfigError as exc:
                logger.warning("config reload refused: %s", exc)
                self.supervisor.report_config_error(str(exc))
            else:
                self.last_result = await self.supervisor.apply_config(config)
                self.reloads += 1
                logger.info("config reloaded: %s", self.last_result)
            if not self._again:
                return
