"""Socket matters that differ per OS: the gateway's listening options, and asking a socket
whether it has input without waiting (``has_input``).

Address reuse means opposite things on POSIX and Windows (Microsoft,
"Using SO_REUSEADDR and SO_EXCLUSIVEADDRUSE"):

- POSIX, ``SO_REUSEADDR``: a restarted tray takes its port back at once
  while the previous run's connections linger in TIME_WAIT; a socket that
  *listens* on the port still makes ``bind`` fail with EADDRINUSE, so the
  port-taken fallback fires.
- Windows, ``SO_EXCLUSIVEADDRUSE``: there ``SO_REUSEADDR`` lets a socket
  bind a port another program already listens on (which one gets a
  connection is then undefined), so the fallback would never fire and a
  client could reach the other program. The exclusive option makes such a
  bind fail with WSAEADDRINUSE and keeps others off the tray's port; Windows
  never blocks a bind over TIME_WAIT connections of a closed listener, so
  nothing is lost. asyncio's own ``create_server`` sets ``SO_REUSEADDR`` on
  POSIX only for the same reason.
"""

import select
import socket
import sys
from typing import Final, Protocol

#: ``SO_EXCLUSIVEADDRUSE`` is ``(int)(~SO_REUSEADDR)`` in winsock2.h, SO_REUSEADDR being 4
#: there: named here so the choice can be composed and checked on any OS.
WINDOWS_SO_EXCLUSIVEADDRUSE: Final = ~0x0004
WINDOWS_SOL_SOCKET: Final = 0xFFFF

#: (level, option, value) set before ``bind``.
SocketOption = tuple[int, int, int]


def listening_options(system: str = sys.platform) -> list[SocketOption]:
    """What to set on the gateway's socket before it binds, on ``system``."""
    if system == "win32":
        return [(WINDOWS_SOL_SOCKET, WINDOWS_SO_EXCLUSIVEADDRUSE, 1)]
    return [(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)]


class Settable(Protocol):
    def setsockopt(self, level: int, option: int, value: int, /) -> None: ...


def apply_listening_options(sock: Settable, system: str = sys.platform) -> None:
    for level, option, value in listening_options(system):
        sock.setsockopt(level, option, value)


def has_input(fd: int) -> bool:
    """Whether a socket has something to read now (data, or its peer's EOF), asked without
    waiting. ``select`` takes a socket on every system, Windows included; an fd it cannot
    look at (closed meanwhile) counts as having input, so its caller drops it."""
    try:
        readable, _, _ = select.select([fd], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)
