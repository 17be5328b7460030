"""The ``mcp-tray`` command: parse, dispatch to the command's module, map errors.

The parser is core.cli.parser; each family of commands has a module of its
own (tray: run, connect, install-desktop; quit; servers: status, call, respawn,
stop, start, tools, logs; profiles; sessions; doctor: doctor, workers; secret: secret,
token; client_config: client-config, import). A module is imported only
when its command runs, so ``mcp-tray status`` loads no supervision code.

Exit codes (core.base.exitcodes, the one table): 0 ok, 1 the operation
failed, 2 usage or config error, 3 mcp-tray is not running. Errors are one
clear line on stderr, never a traceback: even a bug in mcp-tray is one line,
with its traceback written to a file in the log folder.
"""

import argparse
import importlib
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from core import __version__
from core.base.envvars import HOME_ENV
from core.base.errors import CommandError, ConfigError, McpTrayError, NotRunning
from core.base.exitcodes import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_NOT_RUNNING,
    EXIT_OK,
    EXIT_USAGE,
)
from core.cli.parser import build_parser
from core.platform.files import open_private
from core.settings.paths import Paths, default_paths

if TYPE_CHECKING:
    from core.cli.tray import GuiFactory

#: Where a bug's traceback goes (in the log folder), so the user sees one line.
CRASH_LOG: Final = "mcp-tray-cli-error.log"

Handler = Callable[[argparse.Namespace, Paths], int]

#: Each command: (its module under core.cli, the function that runs it).
COMMANDS: Final = {
    "run": ("tray", "cmd_run"),
    "connect": ("tray", "cmd_connect"),
    "install-desktop": ("tray", "cmd_install_desktop"),
    "status": ("servers", "cmd_status"),
    "call": ("servers", "cmd_call"),
    "respawn": ("servers", "cmd_respawn"),
    "stop": ("servers", "cmd_stop"),
    "start": ("servers", "cmd_start"),
    "tools": ("servers", "cmd_tools"),
    "profiles": ("profiles", "cmd_profiles"),
    "logs": ("servers", "cmd_logs"),
    "sessions": ("sessions", "cmd_sessions"),
    "calls": ("calls", "cmd_calls"),
    "reset": ("sessions", "cmd_reset"),
    "approvals": ("approvals", "cmd_approvals"),
    "approve": ("approvals", "cmd_approve"),
    "deny": ("approvals", "cmd_deny"),
    "doctor": ("doctor", "cmd_doctor"),
    "workers": ("doctor", "cmd_workers"),
    "secret": ("secret", "cmd_secret"),
    "token": ("secret", "cmd_token"),
    "quit": ("quit", "cmd_quit"),
    "client-config": ("client_config", "cmd_client_config"),
    "import": ("client_config", "cmd_import"),
    "login": ("login", "cmd_login"),
    "logout": ("login", "cmd_logout"),
}


def handler(command: str) -> Handler:
    """The function that runs ``command`` (its module imported now)."""
    module, name = COMMANDS[command]
    found: Handler = getattr(importlib.import_module(f"core.cli.{module}"), name)
    return found


def main(argv: Sequence[str] | None = None, *, gui: "GuiFactory | None" = None) -> int:
    """Run one command. ``gui`` supplies the tray for ``run`` without ``--headless``:
    core never imports app/, so the console script (app/entry.py) passes it in."""
    args = build_parser().parse_args(argv)
    args.gui = gui
    if args.home:
        # As if MCP_TRAY_HOME were set: what this process writes into client
        # snippets and starts (bridges, autostart) then names the same home.
        os.environ[HOME_ENV] = str(Path(args.home).expanduser().resolve())
    paths = default_paths()
    if args.command is None:
        args.headless = False
        args.config = None
        args.demo = False
        args.minimized = False
    try:
        return handler(args.command or "run")(args, paths)
    except CommandError as exc:
        print(f"mcp-tray: {exc}", file=sys.stderr)
        return exc.code
    except NotRunning as exc:
        print(f"mcp-tray: {exc}", file=sys.stderr)
        return EXIT_NOT_RUNNING
    except ConfigError as exc:
        print(f"mcp-tray: config error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except McpTrayError as exc:
        print(f"mcp-tray: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `mcp-tray logs x | head`: the reader left; nothing is wrong.
        _silence_stdout()
        return EXIT_OK
    except Exception as exc:
        print(f"mcp-tray: {_crash_line(exc, paths)}", file=sys.stderr)
        return EXIT_FAILED


def _silence_stdout() -> None:
    """After a broken pipe, keep Python's exit-time flush of stdout from raising again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _crash_line(exc: Exception, paths: Paths) -> str:
    """A bug (or an OS failure nothing expected) as one line; its traceback to a file."""
    what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    where = paths.log_dir / CRASH_LOG
    try:
        with open_private(where) as log:
            log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} mcp-tray {__version__}\n")
            log.write("".join(traceback.format_exception(exc)))
    except OSError:
        return f"unexpected error ({what}); please report it"
    return f"unexpected error ({what}); please report it with the traceback in {where}"


if __name__ == "__main__":
    sys.exit(main())
