"""Where core events become Qt signals.

The core calls subscribers synchronously on its event loop (the same loop Qt
runs under qasync). A burst of core events (a respawn emits several) is
folded into one ``changed`` signal per event-loop turn, so views rebuild
once; stderr lines pass through one by one (the Logs tab reads the server's
log file when one arrives). ``activity_for`` gives the window the history
behind its sparklines.
"""

from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from core.base.snapshot import AlertKind, Event, EventKind, TraySnapshot
from core.serving.activity import ActivityHistory, attach
from core.supervision.supervisor import Supervisor

#: How long events are gathered before views hear of them.
COALESCE_MS = 50


class CoreLink(QObject):
    #: The snapshot changed; the kinds of events folded into this one.
    changed = Signal(object, object)
    #: (server, line) as the child wrote it to stderr.
    stderr = Signal(str, str)
    #: (AlertKind, server, text) for notifications: a park, a trip, a refused reload.
    alert = Signal(object, str, str)

    def __init__(self, supervisor: Supervisor) -> None:
        super().__init__()
        self.supervisor = supervisor
        self._kinds: set[EventKind] = set()
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(COALESCE_MS)
        self._timer.timeout.connect(self._flush)
        self._unsubscribe = supervisor.subscribe(self._on_event)

    def close(self) -> None:
        self._unsubscribe()
        self._timer.stop()

    def snapshot(self) -> TraySnapshot:
        return self.supervisor.snapshot()

    def _on_event(self, event: Event) -> None:
        if event.kind is EventKind.STDERR:
            self.stderr.emit(event.server or "", event.text or "")
            return
        if event.alert is AlertKind.PARKED and event.snapshot is not None:
            self.alert.emit(event.alert, event.server or "", event.snapshot.parked_reason or "")
        elif event.alert is not None:
            self.alert.emit(event.alert, event.server or "", event.text or "")
        self._kinds.add(event.kind)
        if not self._timer.isActive():
            self._timer.start()

    def _flush(self) -> None:
        kinds, self._kinds = self._kinds, set()
        self.changed.emit(self.snapshot(), kinds)


def activity_for(service: Any) -> ActivityHistory:
    """The service's activity history: its own once TrayService keeps one
    (``service.activity``), else one attached to its supervisor now, once."""
    history = getattr(service, "activity", None)
    if not isinstance(history, ActivityHistory):
        history = attach(service.supervisor)
        service.activity = history
    return history
