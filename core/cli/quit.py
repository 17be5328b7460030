"""``mcp-tray quit``: ask the running tray to stop, and wait until it has.

The one polite stop that exists on every OS: on Windows a tray has no
SIGTERM to hear (``TerminateProcess`` is a hard kill, and the windowed tray
has no console for Ctrl+Break), so scripts, the bundle's smoke test and a
person at a terminal ask through the control API. The tray answers, stops
every server by the stop contract and exits; the command returns once the
instance lock is free (the tray's process has ended), within a bound.
"""

import argparse
import time
from collections.abc import Callable
from typing import Final

from core.base.errors import CommandError
from core.base.exitcodes import EXIT_FAILED, EXIT_OK
from core.cli.control_client import ControlClient, server_error
from core.settings.paths import Paths
from core.settings.runtime import instance_held

#: How long ``quit`` waits for the tray to stop its servers and exit (the core's
#: own bound for that is 60 s, core.serving.core_thread.STOP_SECONDS).
QUIT_WAIT_SECONDS: Final = 90.0
#: How often it looks whether the tray's process has let go of the instance lock.
QUIT_POLL_SECONDS: Final = 0.05


def cmd_quit(
    args: argparse.Namespace,
    paths: Paths,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    client = ControlClient.connect(paths)
    reply = client.request("POST", "/api/v1/quit")
    if not reply.ok:
        raise server_error(reply)
    pid = client.info.pid
    deadline = clock() + QUIT_WAIT_SECONDS
    while instance_held(paths):
        if clock() >= deadline:
            raise CommandError(
                f"mcp-tray (pid {pid}) was asked to quit but still runs after "
                f"{QUIT_WAIT_SECONDS:g} s; `mcp-tray status` shows what it is stopping",
                EXIT_FAILED,
            )
        sleep(QUIT_POLL_SECONDS)
    print(f"mcp-tray (pid {pid}) stopped every server and exited")
    return EXIT_OK
