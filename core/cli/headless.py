"""``mcp-tray run --headless``: the whole service in the foreground, no Qt.

The stop signals (SIGTERM and SIGINT; Ctrl+C and Ctrl+Break on Windows)
and ``mcp-tray quit`` stop every child by the stop contract, then exit 0.
"""

import asyncio
import sys

from core.base.collector import settle_after_start
from core.base.errors import AlreadyRunning
from core.base.exitcodes import EXIT_FAILED, EXIT_OK
from core.platform.signals import on_stop_signals
from core.serving.service import TrayService
from core.settings.config import TrayConfig
from core.settings.paths import Paths


async def serve(config: TrayConfig, paths: Paths) -> int:
    service = TrayService(config, paths, subreaper=True)
    try:
        await service.start()
    except AlreadyRunning as exc:
        print(f"mcp-tray: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except OSError as exc:
        # Not even a fallback port could be bound (or a file could not be
        # written): one line, not a traceback. A taken configured port is
        # no error: the service falls back and warns.
        print(f"mcp-tray: cannot start: {exc}", file=sys.stderr)
        return EXIT_FAILED
    settle_after_start()
    stop = asyncio.Event()
    undo = on_stop_signals(asyncio.get_running_loop(), stop.set)
    # `mcp-tray quit` (the control API, on this loop): the same stop as a signal's.
    service.on_quit = stop.set
    enabled = len(config.enabled)
    print(
        f"mcp-tray {service.info.version if service.info else ''} running headless: "
        f"{enabled} server(s) from {config.path}; API {service.url}. Stop with Ctrl+C.",
        file=sys.stderr,
        flush=True,
    )
    try:
        await stop.wait()
    finally:
        print("mcp-tray: stopping every server...", file=sys.stderr, flush=True)
        await service.aclose()
        undo()
    return EXIT_OK


def run_headless(config: TrayConfig, paths: Paths) -> int:
    return asyncio.run(serve(config, paths))
