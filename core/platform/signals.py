"""The signals that ask a foreground mcp-tray to stop, and how to hear them.

POSIX: SIGTERM (``kill``, logout, systemd) and SIGINT (Ctrl+C). Windows has
neither SIGTERM delivery nor ``loop.add_signal_handler``: Ctrl+C arrives as
SIGINT and Ctrl+Break as SIGBREAK, both through ``signal.signal``, whose
handlers run on the main thread.

``on_stop_signals`` calls ``callback`` on ``loop``'s thread, whichever way
the OS delivers; it must be called from the main thread (Python runs signal
handlers only there). It returns the function that undoes it.
"""

import asyncio
import contextlib
import signal
import socket
import sys
from collections.abc import Callable
from typing import Final

if sys.platform == "win32":
    STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGBREAK)
else:
    STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)


def on_stop_signals(
    loop: asyncio.AbstractEventLoop, callback: Callable[[], None]
) -> Callable[[], None]:
    """``callback`` on ``loop`` when a stop signal arrives; returns the undo."""
    if sys.platform != "win32":
        with contextlib.suppress(RuntimeError):
            # The loop's own handler wakes it through its self-pipe at once.
            for sig in STOP_SIGNALS:
                loop.add_signal_handler(sig, callback)

            def remove() -> None:
                for sig in STOP_SIGNALS:
                    loop.remove_signal_handler(sig)

            return remove

    def post() -> None:
        loop.call_soon_threadsafe(callback)

    return handle_stop_signals(post)


def handle_stop_signals(handler: Callable[[], None]) -> Callable[[], None]:
    """``handler()`` (on the main thread) for each stop signal; returns the undo.

    For a main thread that runs no asyncio loop (the GUI's Qt loop), or a
    loop that cannot watch signals itself (Windows).
    """
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    for sig in STOP_SIGNALS:
        signal.signal(sig, lambda _sig, _frame: handler())

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)

    return restore


def wake_on_signals() -> tuple[socket.socket, Callable[[], None]]:
    """A socket that becomes readable when any signal arrives; and the undo.

    For a main loop written in C (Qt's): Python notes a signal at once but
    runs its handler only when it next runs bytecode, so the loop watches
    this socket (``signal.set_wakeup_fd``) and calls back into Python,
    which then runs the handler. Read and discard what arrives.
    """
    read_end, write_end = socket.socketpair()
    read_end.setblocking(False)
    write_end.setblocking(False)
    previous = signal.set_wakeup_fd(write_end.fileno())

    def undo() -> None:
        signal.set_wakeup_fd(previous)
        read_end.close()
        write_end.close()

    return read_end, undo
