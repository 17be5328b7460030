"""Running mcp-tray: ``run`` (the tray, or headless), ``connect`` (the bridge a
client launches) and ``install-desktop`` (the menu and login entries that run it)."""

import argparse
import io
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final, Protocol

from core.base.envvars import HEADLESS_ENV, HOME_ENV
from core.base.errors import CommandError, ConfigError
from core.base.exitcodes import EXIT_OK
from core.cli.parser import check_server_name
from core.platform.display import gui_verdict
from core.platform.files import open_private, private_dirs
from core.platform.login_path import adopt_desktop_path
from core.settings.config import TrayConfig
from core.settings.paths import Paths
from core.settings.profiles import is_target, profile_name


class GuiLauncher(Protocol):
    """Starts the tray on a config (with the config error to show, if any); its exit code.

    ``minimized``: started by the login autostart entry, so it stays in the
    tray; a person's launch opens the window.
    """

    def __call__(
        self,
        config: TrayConfig,
        paths: Paths,
        config_error: str | None = None,
        *,
        minimized: bool = False,
    ) -> int: ...


#: Imports the GUI on demand: the launcher, or None (printed why) when it cannot start.
GuiFactory = Callable[[], GuiLauncher | None]

#: Where a tray with no console writes what it would print (in the log folder).
NO_CONSOLE_LOG: Final = "mcp-tray-no-console.log"


def _config_path(args: argparse.Namespace, paths: Paths) -> Path:
    if args.demo:
        from core.base.resources import demo_config

        return demo_config()
    if args.config is not None:
        return Path(args.config).expanduser()
    path = paths.config_file
    if not path.exists():
        private_dirs(path.parent)
        path.write_bytes(b'{\n  "mcpServers": {}\n}\n')
        print(
            f"mcp-tray: created an empty config at {path}; add your servers there", file=sys.stderr
        )
    return path


def cmd_run(args: argparse.Namespace, paths: Paths) -> int:
    from core.settings.config import empty_config, load_config

    _stderr_to_log_without_console(paths)
    # Before any server is resolved: a desktop-launched tray's PATH lacks the user's folders.
    origin = adopt_desktop_path()
    if origin.source != "inherited":
        print(f"mcp-tray: {origin}", file=sys.stderr)
    path = _config_path(args, paths)
    _say_if_empty(path)
    if not args.headless and not os.environ.get(HEADLESS_ENV):
        gui = _try_gui(args)
        if gui is not None:
            # A double-clicked tray has no terminal to print a config error
            # to: it starts empty, shows the error, and picks up the fix.
            minimized = bool(getattr(args, "minimized", False))
            try:
                return gui(load_config(path), paths, None, minimized=minimized)
            except ConfigError as exc:
                return gui(empty_config(path), paths, str(exc), minimized=minimized)
    from core.cli.headless import run_headless

    return run_headless(load_config(path), paths)


def _say_if_empty(path: Path) -> None:
    """A tray on a config with no servers says so where its output goes (for a tray a
    bridge started: logs/autostart.log); each client asking for a server hears it too."""
    from core.settings.config import load_config

    try:
        empty = not load_config(path).servers
    except ConfigError:
        return  # said where the tray starts (a window, or the headless error)
    if empty:
        print(
            f"mcp-tray: {path} configures no servers: clients asking for one are told so; "
            "add servers there, or run mcp-tray on the config that has them (--config FILE)",
            file=sys.stderr,
            flush=True,
        )


def _try_gui(
    args: argparse.Namespace,
    system: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> GuiLauncher | None:
    """The tray, when this OS can show it now and a GUI was wired in; else None (headless)."""
    factory: GuiFactory | None = getattr(args, "gui", None)
    if factory is None:
        return None
    verdict = gui_verdict(system, environ)
    if not verdict.possible:
        print(f"mcp-tray: {verdict.reason}: running headless", file=sys.stderr)
        return None
    return factory()


def _stderr_to_log_without_console(paths: Paths) -> None:
    """Give a tray with no console (``sys.stderr`` None: a windowed .exe, pythonw,
    the ``mcp-tray-gui`` script) a log file for what it prints: a headless
    fallback or a config error must leave a trace, not nothing. Errors the
    CLI reports after a command fails go there too."""
    if sys.stderr is not None:
        return
    log = open_private(paths.log_dir / NO_CONSOLE_LOG)
    if isinstance(log, io.TextIOWrapper):
        log.reconfigure(line_buffering=True)  # a line per print: a kill loses none
    sys.stderr = log
    if sys.stdout is None:
        sys.stdout = log


def cmd_connect(args: argparse.Namespace, paths: Paths) -> int:
    from core.bridge.main import refuse, run
    from core.cli.launcher import AUTOSTART_ARGS, launcher_argv

    # Before a worker row is registered under a name no server (or profile, @NAME) can have.
    try:
        check_server_name(profile_name(args.name) if is_target(args.name) else args.name)
    except CommandError as exc:
        # Its client waits for an answer to its initialize: it gets this one.
        print(f"mcp-tray: {exc}", file=sys.stderr, flush=True)
        return refuse(f"mcp-tray connect: {exc}", exc.code)

    # An absent tray is started as the login entry starts it (core.bridge.autostart),
    # on the config the client's entry names (the one the tray ran on when it was written).
    on = ["--config", str(Path(args.config).expanduser().resolve())] if args.config else []
    return run(args.name, paths, [*launcher_argv(console=False), *AUTOSTART_ARGS, *on])


def cmd_install_desktop(args: argparse.Namespace, paths: Paths) -> int:
    from core.cli.desktop_entry import install, uninstall
    from core.cli.launcher import home_override

    try:
        if args.uninstall:
            result = uninstall()
            for path in result.removed:
                print(f"removed {path}")
            if not result.removed:
                print("nothing to remove: no mcp-tray desktop entry was installed")
            return EXIT_OK
        result = install(autostart=args.autostart)
    except OSError as exc:
        raise CommandError(f"cannot write the desktop entry: {exc}") from None
    for path in result.written:
        print(f"wrote {path}")
    for note in result.notes:
        print(f"mcp-tray: {note}", file=sys.stderr)
    home = home_override()
    if home is not None:
        print(
            f"mcp-tray: the entry starts mcp-tray with {HOME_ENV}={home} (from this shell)",
            file=sys.stderr,
        )
    return EXIT_OK
