"""The ``mcp-tray`` command line: its parser, and the checks of its arguments.

Only argparse and the registry of clients: building the parser loads no
command's code, so ``mcp-tray --help`` and every command start fast.
"""

import argparse
import math
from pathlib import Path
from typing import Final, NoReturn

from core import __version__
from core.base.errors import CommandError
from core.base.exitcodes import EXIT_USAGE
from core.cli.integrations import importable_clients, snippet_targets
from core.registry.journal_rows import OUTCOMES
from core.settings.config import valid_server_name

#: After respawn/start, how long the CLI waits by default for the server to
#: leave "starting", so it prints where the action ended, not where it began:
#: a server's start timeout (core.supervision.run.START_TIMEOUT_SECONDS, 60 s;
#: not imported, as that would load the MCP SDK into every CLI call; a test
#: pins the two together) plus a few seconds for the stop contract.
SETTLE_SECONDS: Final = 65.0
#: How long ``mcp-tray login`` waits for the browser to come back, by default.
LOGIN_WAIT_SECONDS: Final = 300.0
#: The longest ``call --timeout`` and ``--wait``: the API's own ceiling for a
#: call (core.serving.http.api.MAX_CALL_TIMEOUT_SECONDS, not imported: it would
#: load starlette into every CLI call; a test pins the two together).
MAX_SECONDS: Final = 86400.0
#: The shortest call timeout (core.serving.http.api.MIN_CALL_TIMEOUT_SECONDS).
MIN_SECONDS: Final = 0.001


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error in one line (exit 2) instead of usage plus error."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="mcp-tray",
        description="Supervise local stdio MCP servers and share them with every AI client.",
    )
    parser.add_argument("--version", action="version", version=f"mcp-tray {__version__}")
    parser.add_argument(
        "--home",
        metavar="DIR",
        help="mcp-tray's folder (config, state, logs), as MCP_TRAY_HOME sets it; for a "
        "shortcut or login entry, which cannot set a variable",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = commands.add_parser("run", help="run mcp-tray (the tray, or --headless)")
    run.add_argument(
        "--headless", action="store_true", help="no GUI: run in the foreground of this terminal"
    )
    source = run.add_mutually_exclusive_group()
    source.add_argument(
        "--config", type=Path, help="config file (default: the per-user config.json)"
    )
    source.add_argument(
        "--demo", action="store_true", help="run on the bundled demo servers (what `make run` runs)"
    )
    run.add_argument(
        "--minimized",
        action="store_true",
        help="stay in the tray without opening the window (the login autostart entry uses it)",
    )

    status = commands.add_parser("status", help="servers and their states")
    status.add_argument("--json", action="store_true", help="machine-readable output")

    call = commands.add_parser("call", help="call a tool of a server and print its result as JSON")
    call.add_argument("name", help="server name")
    call.add_argument("tool", help="tool name")
    call.add_argument(
        "--args", default="{}", help='tool arguments as a JSON object, e.g. \'{"text": "hi"}\''
    )
    call.add_argument(
        "--timeout",
        type=_call_timeout,
        default=120.0,
        metavar="SECONDS",
        help=f"seconds to wait for the tool (default 120, at most {MAX_SECONDS:g})",
    )

    for verb, text in (
        ("respawn", "replace a server's child now (wakes a parked server)"),
        ("stop", "stop a server's child and keep it stopped"),
        ("start", "start a stopped server"),
    ):
        sub = commands.add_parser(verb, help=text)
        sub.add_argument("name", help="server name")
        if verb != "stop":  # stop returns once the stop contract is done
            sub.add_argument(
                "--wait",
                type=_seconds,
                default=SETTLE_SECONDS,
                metavar="SECONDS",
                help="how long to wait for the server to come up or give up before "
                f"printing its state (default {SETTLE_SECONDS:g}: its start timeout)",
            )

    tools = commands.add_parser(
        "tools",
        help="a server's tools (and whether a call cut by a crash is retried), resources, prompts",
    )
    tools.add_argument("name", help="server name")
    tools.add_argument("--json", action="store_true", help="machine-readable output")

    logs = commands.add_parser("logs", help="a server's log (its stderr and mcp-tray's notes)")
    logs.add_argument("name", help="server name")
    logs.add_argument("-n", type=_line_count, default=50, help="how many lines (default 50)")

    workers = commands.add_parser("workers", help="rows of the worker registry")
    workers.add_argument("--json", action="store_true", help="machine-readable output")

    connect = commands.add_parser(
        "connect", help="stdio MCP server for a client: relays to the running tray"
    )
    connect.add_argument("name", help="a server name, @all (every server) or @PROFILE")
    connect.add_argument(
        "--config",
        type=Path,
        help="the config a tray this bridge starts runs on (default: the per-user config.json)",
    )

    profiles = commands.add_parser(
        "profiles",
        help="each profile (and all): servers, tools, estimated tokens, limits passed",
    )
    profiles.add_argument("--json", action="store_true", help="machine-readable output")

    calls = commands.add_parser(
        "calls", help="the call journal: every call through mcp-tray, who made it, how it ended"
    )
    calls.add_argument("--server", help="only this server's calls")
    calls.add_argument("--client", help="only this client's calls (e.g. 'Claude Code')")
    calls.add_argument("--tool", metavar="GLOB", help="only tools (or URIs, prompts) matching")
    calls.add_argument("--outcome", choices=OUTCOMES, help="only calls that ended so")
    calls.add_argument(
        "--since", metavar="WHEN", help="only calls since: 90 (s), 10m, 2h, 3d or an ISO time"
    )
    calls.add_argument(
        "--limit", type=_line_count, default=100, help="at most this many, newest (default 100)"
    )
    calls.add_argument("--follow", action="store_true", help="keep printing new calls")
    calls.add_argument("--json", action="store_true", help="machine-readable output")

    login = commands.add_parser(
        "login", help="sign in to a remote server (OAuth in the browser); the tray uses it at once"
    )
    login.add_argument("name", help="a remote server's name")
    login.add_argument(
        "--no-browser",
        action="store_true",
        help="only print the address to open (its first line); open no browser",
    )
    login.add_argument(
        "--timeout",
        type=_seconds,
        default=LOGIN_WAIT_SECONDS,
        metavar="SECONDS",
        help=f"how long to wait for the browser (default {LOGIN_WAIT_SECONDS:g})",
    )
    logout = commands.add_parser("logout", help="forget the sign-in to a remote server")
    logout.add_argument("name", help="a remote server's name")
    for sub in (login, logout):
        sub.add_argument(
            "--config", type=Path, help="the config file (default: the per-user config.json)"
        )

    commands.add_parser("token", help="print the local API bearer token")
    commands.add_parser(
        "quit", help="stop the running mcp-tray (every server first) and wait until it exits"
    )

    sessions = commands.add_parser("sessions", help="client sessions and their breakers")
    sessions.add_argument("--json", action="store_true", help="machine-readable output")

    reset = commands.add_parser("reset", help="reset a tripped client session")
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("session", nargs="?", help="session id (see mcp-tray sessions)")
    target.add_argument("--all", action="store_true", help="reset every tripped session")

    approvals = commands.add_parser(
        "approvals", help="calls and changed tools waiting for your approval"
    )
    approvals.add_argument("--json", action="store_true", help="machine-readable output")
    listed = approvals.add_mutually_exclusive_group()
    listed.add_argument("--always", action="store_true", help='list the "Always allow" answers')
    listed.add_argument(
        "--revoke", nargs=2, metavar=("SERVER", "TOOL"), help='take back an "Always allow"'
    )
    approve = commands.add_parser(
        "approve", help="allow a held call (once unless told), or accept a changed tool"
    )
    approve.add_argument("id", help="approval id (see mcp-tray approvals)")
    scope = approve.add_mutually_exclusive_group()
    scope.add_argument(
        "--session", action="store_true", help="allow it for the rest of the session"
    )
    scope.add_argument("--always", action="store_true", help="allow this tool's calls from now on")
    deny = commands.add_parser("deny", help="refuse a held call (the model is told who refused)")
    deny.add_argument("id", help="approval id (see mcp-tray approvals)")

    secret = commands.add_parser(
        "secret", help="manage secrets in the OS keyring (${keyring:NAME} in env)"
    )
    secret_commands = secret.add_subparsers(dest="secret_command", metavar="ACTION", required=True)
    secret_set = secret_commands.add_parser("set", help="store a secret (asked for without echo)")
    secret_set.add_argument("name")
    secret_set.add_argument(
        "--stdin", action="store_true", help="read the value from stdin instead of a prompt"
    )
    secret_rm = secret_commands.add_parser("rm", help="remove a secret")
    secret_rm.add_argument("name")

    client_config = commands.add_parser(
        "client-config", help="print the snippet that points a client at mcp-tray"
    )
    client_config.add_argument("client", choices=snippet_targets())
    mode = client_config.add_mutually_exclusive_group()
    mode.add_argument(
        "--bridge", action="store_true", help="launch mcp-tray connect (stdio; default)"
    )
    mode.add_argument("--http", action="store_true", help="connect to the local gateway over HTTP")
    chosen = client_config.add_mutually_exclusive_group()
    chosen.add_argument(
        "--server",
        action="append",
        help="only this server (repeatable); without a config, the servers to list",
    )
    chosen.add_argument(
        "--profile",
        metavar="NAME",
        help="one entry for this profile (all: every server) instead of one per server",
    )
    client_config.add_argument(
        "--config",
        type=Path,
        help="mcp-tray config whose servers and gateway.port to use "
        "(default: the per-user config.json; none is needed for --server)",
    )
    client_config.add_argument(
        "--install",
        action="store_true",
        help="write the entries into the client's own config file (merged, with a backup)",
    )
    client_config.add_argument(
        "--dry-run",
        action="store_true",
        help="with --install: print the diff it would apply, write nothing",
    )
    client_config.add_argument(
        "--overwrite",
        action="store_true",
        help="with --install: replace same-name entries that are not mcp-tray's",
    )

    importer = commands.add_parser(
        "import", help="merge a client's MCP servers into mcp-tray's config"
    )
    importer.add_argument("client", choices=importable_clients())
    importer.add_argument(
        "--path", type=Path, help="the client's config file (default: its usual place)"
    )
    importer.add_argument("--config", type=Path, help="mcp-tray config to merge into")
    importer.add_argument(
        "--move-secrets",
        choices=["ask", "yes", "no"],
        default="ask",
        help="move secret-looking env values into the keyring (default: ask when interactive)",
    )

    doctor = commands.add_parser("doctor", help="check the environment and the registry's workers")
    doctor.add_argument("--json", action="store_true", help="machine-readable output")
    doctor.add_argument("--config", type=Path, help="config file to check for literal secrets")

    desktop = commands.add_parser(
        "install-desktop", help="add mcp-tray to the desktop's application menu (per user)"
    )
    desktop_mode = desktop.add_mutually_exclusive_group()
    desktop_mode.add_argument(
        "--autostart", action="store_true", help="also start mcp-tray when you log in"
    )
    desktop_mode.add_argument(
        "--uninstall",
        action="store_true",
        help="remove the menu entry, its icon and the autostart entry",
    )
    return parser


def _seconds(text: str) -> float:
    """An argparse type: a number of seconds from 0 to ``MAX_SECONDS``."""
    value = _finite(text)
    if not 0 <= value <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"{text!r}: give 0 to {MAX_SECONDS:g} seconds")
    return value


def _call_timeout(text: str) -> float:
    """An argparse type: seconds from ``MIN_SECONDS`` to ``MAX_SECONDS`` (what the API takes)."""
    value = _finite(text)
    if not MIN_SECONDS <= value <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give a number of seconds from {MIN_SECONDS:g} to {MAX_SECONDS:g}"
        )
    return value


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number of seconds")
    return value


def _line_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of lines") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give 1 or more lines")
    return value


def check_server_name(name: str) -> None:
    """A name no config can hold is a usage error, and never reaches a URL or a file path."""
    if not valid_server_name(name):
        raise CommandError(
            f"{name!r} is not a server name: names hold only letters, digits, '.', '_' "
            "and '-' (at most 64), start with a letter or digit, and neither hold '__' nor "
            "end in '_'",
            EXIT_USAGE,
        )
