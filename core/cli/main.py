"""The ``mcp-tray`` command.

Exit codes everywhere: 0 ok, 1 the operation failed, 2 usage or config
error, 3 mcp-tray is not running. Errors are one clear line on stderr,
never a traceback: even a bug in mcp-tray is one line, with its traceback
written to a file in the log folder.
"""

import argparse
import json
import math
import os
import re
import sqlite3
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NoReturn, Protocol

from core import __version__
from core.base.envvars import HEADLESS_ENV, HOME_ENV
from core.base.errors import (
    EXIT_FAILED,
    EXIT_USAGE,
    CommandError,
    ConfigError,
    McpTrayError,
    NotFinite,
    NotRunning,
    RegistryFileError,
)
from core.cli.integrations import importable_clients, snippet_targets
from core.platform.files import private_dirs
from core.settings.config import TrayConfig, valid_server_name
from core.settings.paths import Paths, default_paths

if TYPE_CHECKING:  # the CLI imports the registry only for the commands that use it
    from core.registry.envdiag import Diagnostic

EXIT_OK: Final = 0
EXIT_NOT_RUNNING: Final = 3
#: How long a command waits for the running tray's API to answer.
API_TIMEOUT_SECONDS: Final = 30.0
#: respawn/stop/start run the stop contract (up to ~5 s) and a fresh start.
ACTION_TIMEOUT_SECONDS: Final = 60.0
#: After respawn/start, how long the CLI waits by default for the server to
#: leave "starting", so it prints where the action ended, not where it began:
#: a server's start timeout (core.supervision.run.START_TIMEOUT_SECONDS, 60 s;
#: not imported, as that would load the MCP SDK into every CLI call; a test
#: pins the two together) plus a few seconds for the stop contract.
SETTLE_SECONDS: Final = 65.0
#: How often the CLI looks at the server's state while it waits.
SETTLE_POLL_SECONDS: Final = 0.1
#: ``mcp-tray doctor`` asks a running tray for its own warnings; it must not
#: hang on a tray that does not answer.
DOCTOR_API_TIMEOUT_SECONDS: Final = 5.0
#: The longest ``call --timeout`` and ``--wait``: the API's own ceiling for a
#: call (core.serving.api.MAX_CALL_TIMEOUT_SECONDS, not imported: it would
#: load starlette into every CLI call; a test pins the two together).
MAX_SECONDS: Final = 86400.0
#: The shortest call timeout (core.serving.api.MIN_CALL_TIMEOUT_SECONDS).
MIN_SECONDS: Final = 0.001
#: ``secret set`` reads at most this much: keyrings hold passwords and
#: tokens, and a bigger value is a file piped in by mistake.
MAX_SECRET_BYTES: Final = 64 * 1024
#: Where a bug's traceback goes (in the log folder), so the user sees one line.
CRASH_LOG: Final = "mcp-tray-cli-error.log"
#: Doctor families that are advice, not problems: listed, exit code unaffected.
ADVISORY_FAMILIES: Final = frozenset({"env-scan-failed"})


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


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error in one line (exit 2) instead of usage plus error."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="mcp-tray",
        description="Supervise local stdio MCP servers and share them with every AI client.",
    )
    parser.add_argument("--version", action="version", version=f"mcp-tray {__version__}")
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
    connect.add_argument("name", help="server name")

    commands.add_parser("token", help="print the local API bearer token")

    sessions = commands.add_parser("sessions", help="client sessions and their breakers")
    sessions.add_argument("--json", action="store_true", help="machine-readable output")

    reset = commands.add_parser("reset", help="reset a tripped client session")
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("session", nargs="?", help="session id (see mcp-tray sessions)")
    target.add_argument("--all", action="store_true", help="reset every tripped session")

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
    client_config.add_argument(
        "--server",
        action="append",
        help="only this server (repeatable); without a config, the servers to list",
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


def main(argv: Sequence[str] | None = None, *, gui: "GuiFactory | None" = None) -> int:
    """Run one command. ``gui`` supplies the tray for ``run`` without ``--headless``:
    core never imports app/, so the console script (app/entry.py) passes it in."""
    args = _parser().parse_args(argv)
    args.gui = gui
    paths = default_paths()
    handler = _HANDLERS.get(args.command or "run")
    assert handler is not None
    if args.command is None:
        args.headless = False
        args.config = None
        args.demo = False
        args.minimized = False
    try:
        return handler(args, paths)
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
        return 130
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
        private_dirs(where.parent)
        with where.open("a", encoding="utf-8") as log:
            log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} mcp-tray {__version__}\n")
            log.write("".join(traceback.format_exception(exc)))
    except OSError:
        return f"unexpected error ({what}); please report it"
    return f"unexpected error ({what}); please report it with the traceback in {where}"


# ------------------------------------------------------------------- run


def _config_path(args: argparse.Namespace, paths: Paths) -> Path:
    if args.demo:
        from core.base.resources import demo_config

        return demo_config()
    if args.config is not None:
        return Path(args.config).expanduser()
    path = paths.config_file
    if not path.exists():
        private_dirs(path.parent)
        path.write_text('{\n  "mcpServers": {}\n}\n', encoding="utf-8")
        print(
            f"mcp-tray: created an empty config at {path}; add your servers there", file=sys.stderr
        )
    return path


def cmd_run(args: argparse.Namespace, paths: Paths) -> int:
    from core.settings.config import empty_config, load_config

    path = _config_path(args, paths)
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


def _try_gui(args: argparse.Namespace) -> GuiLauncher | None:
    """The tray, when there is a display and a GUI was wired in; else None (headless)."""
    factory: GuiFactory | None = getattr(args, "gui", None)
    if factory is None:
        return None
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        print(
            "mcp-tray: no display (DISPLAY/WAYLAND_DISPLAY unset): running headless",
            file=sys.stderr,
        )
        return None
    return factory()


# ----------------------------------------------------------- API commands


def _client(paths: Paths, timeout: float = API_TIMEOUT_SECONDS) -> Any:
    from core.cli.control_client import ControlClient

    return ControlClient.connect(paths, timeout=timeout)


def _server_error(reply: Any) -> CommandError:
    return CommandError(reply.error, EXIT_FAILED)


def cmd_status(args: argparse.Namespace, paths: Paths) -> int:
    client = _client(paths)
    reply = client.request("GET", "/api/v1/status")
    if not reply.ok:
        raise _server_error(reply)
    body = reply.body
    warnings, notes = _split_info(_warnings_of(client))
    if args.json:
        servers = [
            {
                key: server.get(key)
                for key in (
                    "name",
                    "state",
                    "pid",
                    "generation",
                    "restarts",
                    "breaker",
                    "last_error",
                )
            }
            for server in body.get("servers", [])
        ]
        out: dict[str, Any] = {"version": body.get("version"), "servers": servers}
        for key in ("gateway", "sessions", "workers", "config_error"):
            if key in body:
                out[key] = body[key]
        out["warnings"] = warnings
        out["info"] = notes
        print(json.dumps(out, indent=2))
        return EXIT_OK
    print(f"mcp-tray {body.get('version')}  config: {body.get('config')}")
    gateway = body.get("gateway") or {}
    if gateway.get("url"):
        print(f"gateway: {gateway['url']}")
    if gateway.get("fallback"):
        print(f"PORT TAKEN: {gateway['fallback']}")
    if body.get("config_error"):
        print(f"CONFIG ERROR (still running the last good config): {body['config_error']}")
    if warnings:
        count = f"{len(warnings)} warning{'s' if len(warnings) > 1 else ''}"
        print(f"{count} (mcp-tray doctor lists them with their fixes)")
    for note in notes:
        print(f"info: {note.get('text')}")
    servers = body.get("servers", [])
    if not servers:
        print("no servers configured")
    for server in servers:
        pid = server.get("pid") or "-"
        line = f"  {server['name']:<20} {server['state']:<9} pid {pid!s:<8} gen {server['generation']:<4} restarts {server['restarts']:<4} breaker {server['breaker']}"
        print(line)
        if server.get("parked_reason"):
            print(f"      parked: {server['parked_reason']}")
        elif server.get("last_error") and server["state"] != "ready":
            print(f"      last error: {server['last_error']}")
    return EXIT_OK


def cmd_call(args: argparse.Namespace, paths: Paths) -> int:
    from core.protocol.jsonrpc import loads

    example = 'pass an object like \'{"text": "hi"}\''
    detail = None
    try:
        arguments = loads(args.args)
    except RecursionError:
        detail = "it is nested too deeply"
    except NotFinite as exc:
        detail = str(exc)
    except json.JSONDecodeError as exc:
        detail = exc.args[0]
    except ValueError:  # an integer past Python's 4300-digit limit
        detail = "a number has thousands of digits"
    if detail is not None:
        raise CommandError(f"--args is not valid JSON ({detail}): {example}", EXIT_USAGE)
    if not isinstance(arguments, dict):
        raise CommandError(f"--args must be a JSON object: {example}", EXIT_USAGE)
    _check_server_name(args.name)
    client = _client(paths, timeout=args.timeout + API_TIMEOUT_SECONDS)
    reply = client.request(
        "POST",
        f"/api/v1/servers/{args.name}/call",
        {"tool": args.tool, "arguments": arguments, "timeout": args.timeout},
    )
    if not reply.ok:
        raise _server_error(reply)
    result = reply.body["result"]
    print(json.dumps(result, indent=2))
    if result.get("isError"):
        text = " ".join(
            block.get("text", "") for block in result.get("content", []) if isinstance(block, dict)
        )
        print(f"mcp-tray: tool {args.tool!r} reported an error: {text}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _check_server_name(name: str) -> None:
    """A name no config can hold is a usage error, and never reaches a URL or a file path."""
    if not valid_server_name(name):
        raise CommandError(
            f"{name!r} is not a server name: names hold only letters, digits, '.', '_' "
            "and '-' (at most 64) and start with a letter or digit",
            EXIT_USAGE,
        )


def _action(verb: str) -> "Callable[[argparse.Namespace, Paths], int]":
    def run(args: argparse.Namespace, paths: Paths) -> int:
        _check_server_name(args.name)
        client = _client(paths, timeout=ACTION_TIMEOUT_SECONDS)
        # The generation before the action tells a run this action began
        # from the one it replaced (the reply comes before the new run does).
        before = _server_row(client, args.name)
        reply = client.request("POST", f"/api/v1/servers/{args.name}/{verb}")
        if not reply.ok:
            raise _server_error(reply)
        server: dict[str, Any] = reply.body["server"]
        generation = int((before or server)["generation"])
        wait = float(getattr(args, "wait", 0.0))
        server, settled = _settle(client, verb, args.name, generation, server, wait)
        return _report_action(verb, server, settled, wait)

    return run


def _server_row(client: Any, name: str) -> dict[str, Any] | None:
    """The server's row of /api/v1/status, or None when there is none of that name."""
    reply = client.request("GET", "/api/v1/status")
    if not reply.ok:
        raise _server_error(reply)
    rows = reply.body.get("servers", [])
    return next((row for row in rows if row.get("name") == name), None)


def action_settled(verb: str, before_generation: int, server: dict[str, Any]) -> bool:
    """Whether ``server`` (a status row) shows where ``verb`` ended, not where it began.

    The API answers as soon as the action is under way: right after a start
    the row still says "stopped", after a respawn it still shows the old run.
    """
    state = server["state"]
    if state == "starting":
        return False
    if verb == "stop":
        return True
    if int(server["generation"]) > before_generation:
        return True  # a run this action began, past its start: ready, exited, parked…
    # No new run: a start on a server that is already up, or parked (its
    # self-probe keeps it "running"), changes nothing; its state is the answer.
    return verb == "start" and state in ("ready", "degraded", "parked")


def _settle(
    client: Any,
    verb: str,
    name: str,
    before_generation: int,
    server: dict[str, Any],
    wait: float,
) -> tuple[dict[str, Any], bool]:
    """Poll the server's row until the action settled or ``wait`` seconds passed."""
    deadline = time.monotonic() + wait
    while not action_settled(verb, before_generation, server):
        if time.monotonic() >= deadline:
            return server, False
        time.sleep(SETTLE_POLL_SECONDS)
        row = _server_row(client, name)
        if row is None:  # a config edit removed it meanwhile
            return server, True
        server = row
    return server, True


def _report_action(verb: str, server: dict[str, Any], settled: bool, wait: float) -> int:
    """Print where the action left the server; 0 only when it got there."""
    name, state = server["name"], server["state"]
    print(f"{name}: {state} (generation {server['generation']})")
    if not settled:
        print(
            f"mcp-tray: {name} is still {state} after {wait:g} s; `mcp-tray status` shows "
            f"where it goes, `mcp-tray logs {name}` what it does",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if state == "parked":
        reason = server.get("parked_reason") or server.get("last_error") or "no reason recorded"
        print(f"      parked: {reason}")
        print(
            f"mcp-tray: {name} did not start: it is parked. `mcp-tray logs {name}` shows "
            f"more; `mcp-tray respawn {name}` tries again",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if state in ("ready", "degraded") or (state == "stopped" and verb == "stop"):
        if state == "degraded" and server.get("last_error"):
            print(f"      last error: {server['last_error']}")
        return EXIT_OK
    # exited (died before it was ready; a respawn follows its backoff), or
    # stopped by someone else while this start was under way.
    if server.get("last_error"):
        print(f"      last error: {server['last_error']}")
    why = (
        "it died before it was ready; mcp-tray tries again after a backoff"
        if state == "exited"
        else "it was stopped meanwhile"
    )
    print(f"mcp-tray: {name} did not start: {why} (see mcp-tray logs {name})", file=sys.stderr)
    return EXIT_FAILED


def cmd_tools(args: argparse.Namespace, paths: Paths) -> int:
    """What a server offers, from the running tray (core.supervision.offer's rows)."""
    _check_server_name(args.name)
    reply = _client(paths).request("GET", f"/api/v1/servers/{args.name}/tools")
    if not reply.ok:
        raise _server_error(reply)
    body = reply.body
    if args.json:
        print(json.dumps(body, indent=2))
        return EXIT_OK
    tools = body.get("tools", [])
    if not body.get("known") and not tools:
        print(f"{args.name}: not listed yet (it has not completed a handshake)")
        return EXIT_OK
    width = max((len(tool["name"]) for tool in tools), default=4)
    for tool in tools:
        mark = "retried    " if tool["retried_after_crash"] else "not retried"
        title = f"{tool['title']}: " if tool.get("title") else ""
        text = " ".join(f"{title}{tool.get('description') or ''}".split())
        print(f"  {tool['name']:<{width}}  {mark}  {text}")
    print(
        f"{len(tools)} tool(s), {body['resources']} resource(s), "
        f"{body['resource_templates']} resource template(s), {body['prompts']} prompt(s); "
        f'"retry": "{body["retry"]}": a call cut by a crash is retried only where it says so'
    )
    return EXIT_OK


def cmd_logs(args: argparse.Namespace, paths: Paths) -> int:
    from core.supervision.logs import tail

    _check_server_name(args.name)
    path = paths.server_log(args.name)
    if not path.exists():
        known = _configured_names(paths)
        if known is not None and args.name not in known[0]:
            names, source = known
            listed = ", ".join(sorted(names)) or "none"
            raise CommandError(f"no such server {args.name!r} (configured in {source}: {listed})")
        if known is None:
            raise CommandError(
                f"no log for server {args.name!r} (looked for {path}), and no config could be "
                "read to tell whether it is configured"
            )
        raise CommandError(
            f"no log yet for server {args.name!r}: it has not started or written anything "
            f"(looked for {path})"
        )
    for line in tail(path, args.n):
        print(line)
    return EXIT_OK


def _configured_names(paths: Paths) -> tuple[list[str], str] | None:
    """The server names the running tray knows, else those of the default
    config; None when neither can be read."""
    try:
        reply = _client(paths, timeout=DOCTOR_API_TIMEOUT_SECONDS).request("GET", "/api/v1/status")
    except McpTrayError:
        reply = None
    if reply is not None and reply.ok:
        rows = reply.body.get("servers", [])
        names = [str(row.get("name")) for row in rows if isinstance(row, dict)]
        return names, f"the running mcp-tray's {reply.body.get('config') or 'config'}"
    from core.settings.config import load_config

    try:
        return list(load_config(paths.config_file).servers), str(paths.config_file)
    except ConfigError:
        return None


# -------------------------------------------------- registry and doctor


def _registry_problem(path: Path, exc: sqlite3.Error) -> RegistryFileError:
    """A registry that opened but fails when read, as one line with its fix."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
        return RegistryFileError(
            path,
            f"is damaged ({exc})",
            f"To fix: move it aside (mv '{path}' '{path}.bak'); mcp-tray creates a fresh one "
            "at its next start (the worker rows in it are lost; bridges register again)",
        )
    return RegistryFileError(
        path,
        f"cannot be read ({exc})",
        "Try again; if it keeps failing, stop mcp-tray and its bridges, or move the file "
        f"aside (mv '{path}' '{path}.bak') so mcp-tray creates a fresh one",
    )


def cmd_workers(args: argparse.Namespace, paths: Paths) -> int:
    from core.registry.store import WorkerRegistry
    from core.registry.workers_view import format_workers_table, worker_rows

    rows: list[Any] = []
    if paths.registry_file.exists():
        try:
            with WorkerRegistry(paths.registry_file) as registry:
                rows = list(worker_rows(registry))
        except RegistryFileError as exc:
            raise CommandError(str(exc)) from None
        except sqlite3.Error as exc:
            raise CommandError(str(_registry_problem(paths.registry_file, exc))) from None
    if args.json:
        print(json.dumps(rows, indent=2))
    elif rows:
        print(format_workers_table(rows))
    else:
        print(f"no workers registered (registry: {paths.registry_file})")
    return EXIT_OK


def cmd_doctor(args: argparse.Namespace, paths: Paths) -> int:
    """Every finding, hard ones first; exit 1 when any is a problem.

    Problems: the doctor's own hard families, a literal secret in the config,
    an unusable registry, and whatever the running tray warns about (a taken
    port, a refused config edit...). ``env-scan-failed`` is advice, and the
    ``token-storage`` note (the API token in a 0600 file) is information:
    neither changes the exit code.
    """
    from core.registry.envdiag import doctor
    from core.registry.workers_view import warnings_json
    from core.settings.config import load_config
    from core.settings.secrets import TOKEN_STORAGE_FAMILY, token_storage_note

    servers_env: dict[str, dict[str, str]] = {}
    config_path = args.config or paths.config_file
    if args.config is not None or config_path.exists():
        config = load_config(config_path)
        servers_env = {name: dict(server.env) for name, server in config.servers.items()}
    found: list[dict[str, Any]] = []
    diagnostics: list[Diagnostic] = []
    registry_error = None
    try:
        diagnostics = _diagnose(paths, servers_env)
    except RegistryFileError as exc:
        registry_error = exc
    except sqlite3.Error as exc:
        registry_error = _registry_problem(paths.registry_file, exc)
    if registry_error is not None:
        # Everything else is still worth knowing: check again without the registry.
        diagnostics = doctor(os.environ, None, __version__, servers_env=servers_env)
        text = f"registry: {registry_error}"
        found.append({"family": "registry", "subject": str(paths.registry_file), "text": text})
    found += warnings_json(diagnostics, ())
    own_texts = {item["text"] for item in found}
    # The tray's own line about a registry this doctor found unusable too says it again.
    seen = {"registry"} if registry_error is not None else set()
    tray = [
        {**w, "source": "tray"}
        for w in _tray_report(paths)
        if w.get("text") not in own_texts and w.get("family") not in seen
    ]
    problems, notes = _split_info([*found, *tray])
    reported = any(note.get("family") == TOKEN_STORAGE_FAMILY for note in notes)
    if not reported and paths.token_file.exists():  # no tray to ask, or it could not say
        text = token_storage_note(paths.token_file)
        notes.append({"family": TOKEN_STORAGE_FAMILY, "subject": "mcp-tray", "text": text})
    for item in problems:
        item["hard"] = item.get("family") not in ADVISORY_FAMILIES
    problems.sort(key=lambda item: (not item["hard"], str(item.get("family"))))
    failed = any(item["hard"] for item in problems)
    # Which OS backends this environment runs (MCP_TRAY_PLATFORM chooses the set).
    from core.platform.backends import backends

    platform = backends().describe()
    notes += [
        {"family": "platform", "subject": job, "text": f"platform: {job}: {name}"}
        for job, name in platform
    ]
    if args.json:
        report = {"ok": not failed, "warnings": problems, "info": notes, "platform": dict(platform)}
        print(json.dumps(report, indent=2))
    else:
        for item in problems:
            suffix = "  (reported by the running mcp-tray)" if item.get("source") == "tray" else ""
            print(f"{item.get('text')}{suffix}")
        if not problems:
            print("no problems found")
        for note in notes:
            print(f"info: {note.get('text')}")
    return EXIT_FAILED if failed else EXIT_OK


def _diagnose(paths: Paths, servers_env: dict[str, dict[str, str]]) -> "list[Diagnostic]":
    """The doctor's checks with the registry, when there is one."""
    from core.registry.envdiag import doctor
    from core.registry.store import WorkerRegistry

    if not paths.registry_file.exists():
        return doctor(os.environ, None, __version__, servers_env=servers_env)
    with WorkerRegistry(paths.registry_file) as registry:
        return doctor(os.environ, registry, __version__, servers_env=servers_env)


def _split_info(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(warnings, information): the ``token-storage`` note is not a warning."""
    from core.settings.secrets import INFO_FAMILIES

    warnings = [row for row in rows if row.get("family") not in INFO_FAMILIES]
    return warnings, [row for row in rows if row.get("family") in INFO_FAMILIES]


def _warnings_of(client: Any) -> list[dict[str, Any]]:
    """The running tray's warnings, or none when it cannot say."""
    try:
        reply = client.request("GET", "/api/v1/warnings")
    except McpTrayError:
        return []
    rows = reply.body.get("warnings", []) if reply.ok else []
    return [row for row in rows if isinstance(row, dict)]


def _tray_report(paths: Paths) -> list[dict[str, Any]]:
    """What only the running tray knows: its warnings (a taken port, a token
    in a file, a refused server request, its own environment) and a refused
    config edit; none when no tray runs or it does not answer in time."""
    try:
        client = _client(paths, timeout=DOCTOR_API_TIMEOUT_SECONDS)
        status = client.request("GET", "/api/v1/status")
    except McpTrayError:
        return []
    rows = _warnings_of(client)
    error = status.body.get("config_error") if status.ok else None
    if error:
        text = f"config-error: the running mcp-tray refused the last edit of its config: {error}"
        rows.append({"family": "config-error", "subject": "mcp-tray", "text": text})
    return rows


def cmd_connect(args: argparse.Namespace, paths: Paths) -> int:
    from core.bridge.main import run
    from core.cli.desktop_entry import AUTOSTART_ARGS, launcher_argv

    # Before a worker row is registered under a name no server can have.
    _check_server_name(args.name)

    # An absent tray is started as the login entry starts it (core.bridge.autostart).
    return run(args.name, paths, [*launcher_argv(console=False), *AUTOSTART_ARGS])


def cmd_token(args: argparse.Namespace, paths: Paths) -> int:
    from core.settings.secrets import read_token

    token = read_token(paths.token_file)
    if token is None:
        raise CommandError("no API token yet: start mcp-tray once to create it", EXIT_NOT_RUNNING)
    print(token)
    return EXIT_OK


_SESSION_COLUMNS: Final = (
    ("id", "SESSION"),
    ("client", "CLIENT"),
    ("server", "SERVER"),
    ("requests", "REQUESTS"),
    ("consecutive_failures", "FAILURES"),
    ("breaker", "BREAKER"),
)
#: What a client session id can hold (the gateway makes them as uuid hex).
_SESSION_ID_RE: Final = re.compile(r"[A-Za-z0-9._-]{1,128}")


def cmd_sessions(args: argparse.Namespace, paths: Paths) -> int:
    reply = _client(paths).request("GET", "/api/v1/sessions")
    if not reply.ok:
        raise _server_error(reply)
    rows = reply.body["sessions"]
    if args.json:
        keys = (
            "id",
            "client_name",
            "server",
            "opened_at",
            "requests",
            "consecutive_failures",
            "breaker",
        )
        print(json.dumps([{k: row.get(k) for k in keys} for row in rows], indent=2))
        return EXIT_OK
    if not rows:
        print("no client sessions")
        return EXIT_OK
    table = [[title for _, title in _SESSION_COLUMNS]]
    table += [[str(row.get(key, "-")) for key, _ in _SESSION_COLUMNS] for row in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(_SESSION_COLUMNS))]
    for line in table:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        )
    return EXIT_OK


def cmd_reset(args: argparse.Namespace, paths: Paths) -> int:
    if not args.all and _SESSION_ID_RE.fullmatch(args.session) is None:
        # Never sent: it cannot name a session, and would not fit in the URL.
        raise CommandError(f"no client session {args.session!r} (mcp-tray sessions lists them)")
    client = _client(paths)
    if args.all:
        reply = client.request("POST", "/api/v1/sessions/reset-all")
        if not reply.ok:
            raise _server_error(reply)
        reset = reply.body["reset"]
        print(f"reset {len(reset)} tripped session(s)" + (f": {', '.join(reset)}" if reset else ""))
        return EXIT_OK
    reply = client.request("POST", f"/api/v1/sessions/{args.session}/reset")
    if not reply.ok:
        raise _server_error(reply)
    print(f"session {args.session} reset: its next request goes to the server again")
    return EXIT_OK


def cmd_secret(args: argparse.Namespace, paths: Paths) -> int:
    from core.base.errors import SecretStoreError
    from core.settings.secrets import check_name, delete_secret, has_secret, set_secret

    try:
        check_name(args.name)
    except SecretStoreError as exc:
        raise CommandError(str(exc), EXIT_USAGE) from None
    try:
        if args.secret_command == "set":
            # Before the value is asked for: no one should type a secret
            # only to learn that it cannot be stored.
            replacing = has_secret(args.name)
            value = _secret_value(args)
            set_secret(args.name, value)
            verb = "replaced" if replacing else "stored"
            print(
                f'{verb} {args.name!r} in the keyring; use it as "${{keyring:{args.name}}}" in a server\'s env'
            )
            return EXIT_OK
        if not delete_secret(args.name):
            raise CommandError(f"no secret named {args.name!r} in the keyring")
        print(f"removed {args.name!r} from the keyring")
        return EXIT_OK
    except SecretStoreError as exc:
        raise CommandError(str(exc)) from None


def _secret_value(args: argparse.Namespace) -> str:
    """The value to store: asked for without echo on a terminal, else read from stdin."""
    stdin = sys.stdin
    piped = "pipe it in (printf '%s' VALUE | mcp-tray secret set NAME)"
    if stdin is None:
        raise CommandError(f"there is no stdin to read the value from: {piped}", EXIT_USAGE)
    if stdin.isatty() and not args.stdin:
        import getpass

        try:
            value = getpass.getpass(f"value for {args.name} (not echoed): ")
        except EOFError:
            value = ""
        source = "the prompt"
    elif stdin.isatty():
        value = stdin.readline().removesuffix("\n")
        source = "stdin"
    else:
        raw = stdin.buffer.read(MAX_SECRET_BYTES + 1)
        if len(raw) > MAX_SECRET_BYTES:
            raise CommandError(
                f"stdin holds more than {MAX_SECRET_BYTES} bytes, which is no password or "
                "token; pipe in only the secret",
                EXIT_USAGE,
            )
        try:
            value = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise CommandError(
                "stdin is not UTF-8 text; pipe in the secret as text", EXIT_USAGE
            ) from None
        # `echo VALUE |` adds a newline that is not part of the secret.
        value = value.removesuffix("\n").removesuffix("\r")
        source = "stdin"
    if not value:
        raise CommandError(
            f"{source} gave an empty value, so nothing was stored: type the secret, or {piped}",
            EXIT_USAGE,
        )
    if "\x00" in value:
        raise CommandError(
            "the value holds a NUL character, which no environment variable can carry",
            EXIT_USAGE,
        )
    return value


def cmd_client_config(args: argparse.Namespace, paths: Paths) -> int:
    """Print a client's snippet, or with ``--install`` write it into the client's
    own config file (``--dry-run``: print the diff instead). Needs no running
    tray and, for the bridge, no config: with ``--server`` the names are taken
    as given."""
    from core.cli.clients import client_snippet
    from core.cli.desktop_entry import home_override
    from core.settings.config import DEFAULT_GATEWAY_PORT, load_config

    if (args.dry_run or args.overwrite) and not args.install:
        raise CommandError("--dry-run and --overwrite go with --install", EXIT_USAGE)
    explicit = args.config is not None
    config_path = Path(args.config).expanduser() if explicit else paths.config_file
    # An explicit --config must exist (load_config says how to fix it);
    # a missing default one just means nothing is configured yet.
    config = load_config(config_path) if explicit or config_path.exists() else None
    if config is not None:
        names = args.server or [s.name for s in config.enabled]
        unknown = [n for n in names if n not in config.servers]
        if unknown:
            known = ", ".join(sorted(config.servers)) or "none"
            raise CommandError(
                f"not in {config_path}: {', '.join(unknown)} (configured: {known}); "
                "add it there, or pass --config with the file that has it",
                EXIT_USAGE,
            )
    else:
        names = list(args.server or [])
        bad = [n for n in names if not valid_server_name(n)]
        if bad:
            raise CommandError(
                f"not a server name: {', '.join(map(repr, bad))}; names hold only letters, "
                "digits, '.', '_' and '-' (at most 64)",
                EXIT_USAGE,
            )
        if not names:
            print(
                f"mcp-tray: there is no config at {config_path}, so no servers to list: "
                "pass --server NAME (repeatable) for each server the client should reach, "
                "or --config FILE",
                file=sys.stderr,
            )
    home = home_override()
    url = None
    token = None
    notes: list[str] = []
    if args.http:
        from core.settings.secrets import read_token

        port = config.gateway.port if config is not None else DEFAULT_GATEWAY_PORT
        url, note = _http_base(paths, port, config_path)
        notes += [note] if note else []
        token = read_token(paths.token_file)
        if token is None:
            raise CommandError(
                "no API token yet: start mcp-tray once to create it, then run this again",
                EXIT_NOT_RUNNING,
            )
    elif home is not None:
        notes.append(
            f"the snippet sets {HOME_ENV}={home} (from this shell), so the bridge finds "
            "the tray of that folder"
        )
    snippet = client_snippet(args.client, names, http_url=url, token=token, home=home)
    code = EXIT_OK
    if args.install:
        from core.cli.install import entries_of, run_install

        code = run_install(
            args.client, entries_of(snippet), dry_run=args.dry_run, overwrite=args.overwrite
        )
    else:
        print(json.dumps(snippet, indent=2))
    if args.http:
        notes.append("the snippet holds the API token; keep that file private")
    for note in notes:
        print(f"mcp-tray: {note}", file=sys.stderr)
    return code


def _http_base(paths: Paths, configured: int, config_path: Path) -> tuple[str, str | None]:
    """The gateway URL a client should keep, from the configured port, and a
    note when the running tray is not (yet) reachable there."""
    from core.settings.config import DEFAULT_GATEWAY_PORT
    from core.settings.runtime import loopback_url, running_instance

    try:
        info = running_instance(paths)
    except NotRunning:
        info = None
    if configured == 0:
        fix = (
            f"set gateway.port to a port number (or remove it for the default, "
            f"{DEFAULT_GATEWAY_PORT})"
        )
        if info is None:
            raise ConfigError(
                config_path,
                "is 0 (any free port): there is no lasting URL to give a client, "
                "and mcp-tray is not running to ask for today's",
                key="gateway.port",
                fix=f"{fix}, then run this again",
            )
        return info.url, (
            f"gateway.port is 0 in {config_path}: this URL (port {info.port}) holds only "
            f"until mcp-tray restarts; {fix} for one that lasts"
        )
    url = loopback_url(configured)
    if info is None or info.port == configured:
        return url, None
    if info.configured_port == configured:
        return url, (
            f"the running mcp-tray listens on port {info.port}, not {configured}: port "
            f"{configured} was taken when it started. This snippet reaches it once port "
            f"{configured} is free and mcp-tray restarts (mcp-tray doctor says what holds it)"
        )
    return url, (
        f"the running mcp-tray listens on port {info.port} (it started with gateway.port "
        f"{info.configured_port}); this snippet, for port {configured} of {config_path}, "
        "reaches it after mcp-tray restarts"
    )


def cmd_import(args: argparse.Namespace, paths: Paths) -> int:
    from core.cli.clients import run_import

    return run_import(args, paths)


def cmd_install_desktop(args: argparse.Namespace, paths: Paths) -> int:
    from core.cli.desktop_entry import home_override, install, uninstall

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


_HANDLERS: dict[str, "Callable[[argparse.Namespace, Paths], int]"] = {
    "connect": cmd_connect,
    "token": cmd_token,
    "sessions": cmd_sessions,
    "reset": cmd_reset,
    "secret": cmd_secret,
    "client-config": cmd_client_config,
    "import": cmd_import,
    "run": cmd_run,
    "status": cmd_status,
    "call": cmd_call,
    "respawn": _action("respawn"),
    "stop": _action("stop"),
    "start": _action("start"),
    "logs": cmd_logs,
    "tools": cmd_tools,
    "workers": cmd_workers,
    "doctor": cmd_doctor,
    "install-desktop": cmd_install_desktop,
}


if __name__ == "__main__":
    sys.exit(main())
