"""The ``mcp-tray`` command.

Exit codes everywhere: 0 ok, 1 the operation failed, 2 usage or config
error, 3 mcp-tray is not running. Errors are one clear line on stderr,
never a traceback.
"""

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from core import __version__
from core.base.envvars import HEADLESS_ENV, HOME_ENV
from core.base.errors import (
    EXIT_FAILED,
    EXIT_USAGE,
    CommandError,
    ConfigError,
    McpTrayError,
    NotRunning,
)
from core.settings.config import TrayConfig
from core.settings.paths import Paths, default_paths
from core.settings.runtime import PORT_TAKEN_FAMILY

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


#: Starts the tray on a config (with the config error to show, if any); its exit code.
GuiLauncher = Callable[[TrayConfig, Paths, str | None], int]
#: Imports the GUI on demand: the launcher, or None (printed why) when it cannot start.
GuiFactory = Callable[[], GuiLauncher | None]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcp-tray",
        description="Supervise local stdio MCP servers and share them with every AI client.",
    )
    parser.add_argument("--version", action="version", version=f"mcp-tray {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = commands.add_parser("run", help="run mcp-tray (the tray, or --headless)")
    run.add_argument(
        "--headless", action="store_true", help="no GUI: run in the foreground of this terminal"
    )
    run.add_argument("--config", type=Path, help="config file (default: the per-user config.json)")

    status = commands.add_parser("status", help="servers and their states")
    status.add_argument("--json", action="store_true", help="machine-readable output")

    call = commands.add_parser("call", help="call a tool of a server and print its result as JSON")
    call.add_argument("name", help="server name")
    call.add_argument("tool", help="tool name")
    call.add_argument(
        "--args", default="{}", help='tool arguments as a JSON object, e.g. \'{"text": "hi"}\''
    )
    call.add_argument(
        "--timeout", type=float, default=120.0, help="seconds to wait for the tool (default 120)"
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

    logs = commands.add_parser("logs", help="a server's log (its stderr and mcp-tray's notes)")
    logs.add_argument("name", help="server name")
    logs.add_argument("-n", type=int, default=50, help="how many lines (default 50)")

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
    client_config.add_argument(
        "client", choices=["claude", "claude-code", "cursor", "vscode", "inspector"]
    )
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

    importer = commands.add_parser(
        "import", help="merge a client's MCP servers into mcp-tray's config"
    )
    importer.add_argument("client", choices=["claude", "cursor", "vscode"])
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
    """An argparse type: a non-negative number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value >= 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"{text!r}: give 0 or more seconds")
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


# ------------------------------------------------------------------- run


def _config_path(args: argparse.Namespace, paths: Paths) -> Path:
    if args.config is not None:
        return Path(args.config).expanduser()
    path = paths.config_file
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
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
            try:
                return gui(load_config(path), paths, None)
            except ConfigError as exc:
                return gui(empty_config(path), paths, str(exc))
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
    reply = _client(paths).request("GET", "/api/v1/status")
    if not reply.ok:
        raise _server_error(reply)
    body = reply.body
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
        for key in ("gateway", "sessions", "workers"):
            if key in body:
                out[key] = body[key]
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
    try:
        arguments = json.loads(args.args)
    except ValueError as exc:
        raise CommandError(
            f'--args is not valid JSON ({exc.args[0]}): pass an object like \'{{"text": "hi"}}\'',
            EXIT_USAGE,
        ) from None
    if not isinstance(arguments, dict):
        raise CommandError('--args must be a JSON object, e.g. \'{"text": "hi"}\'', EXIT_USAGE)
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


def _action(verb: str) -> "Callable[[argparse.Namespace, Paths], int]":
    def run(args: argparse.Namespace, paths: Paths) -> int:
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


def cmd_logs(args: argparse.Namespace, paths: Paths) -> int:
    from core.supervision.logs import tail

    path = paths.server_log(args.name)
    if not path.exists():
        raise CommandError(f"no log for server {args.name!r} yet (looked for {path})")
    for line in tail(path, args.n):
        print(line)
    return EXIT_OK


# -------------------------------------------------- registry and doctor


def cmd_workers(args: argparse.Namespace, paths: Paths) -> int:
    from core.base.errors import RegistryFileError
    from core.registry.store import WorkerRegistry
    from core.registry.workers_view import format_workers_table, worker_rows

    rows: list[Any] = []
    if paths.registry_file.exists():
        try:
            with WorkerRegistry(paths.registry_file) as registry:
                rows = list(worker_rows(registry))
        except RegistryFileError as exc:
            raise CommandError(str(exc)) from None
    if args.json:
        print(json.dumps(rows, indent=2))
    elif rows:
        print(format_workers_table(rows))
    else:
        print(f"no workers registered (registry: {paths.registry_file})")
    return EXIT_OK


def cmd_doctor(args: argparse.Namespace, paths: Paths) -> int:
    from core.base.errors import RegistryFileError
    from core.registry.envdiag import doctor
    from core.registry.store import WorkerRegistry
    from core.registry.workers_view import doctor_exit_code, doctor_json, doctor_lines

    servers_env: dict[str, dict[str, str]] = {}
    config_path = args.config or paths.config_file
    if config_path.exists():
        from core.settings.config import load_config

        config = load_config(config_path)
        servers_env = {name: dict(server.env) for name, server in config.servers.items()}
    registry = None
    if paths.registry_file.exists():
        try:
            registry = WorkerRegistry(paths.registry_file)
        except RegistryFileError as exc:
            raise CommandError(str(exc)) from None
    try:
        diagnostics = doctor(os.environ, registry, __version__, servers_env=servers_env)
    finally:
        if registry is not None:
            registry.close()
    tray = _tray_warnings(paths)
    # A taken gateway port breaks every HTTP client configured for it: as hard as the doctor's own.
    tray_hard = any(w.get("family") == PORT_TAKEN_FAMILY for w in tray)
    if args.json:
        local = doctor_json(diagnostics)
        found = local["warnings"]
        assert isinstance(found, list)
        report = {
            "ok": bool(local["ok"]) and not tray_hard,
            "warnings": [
                *found,
                *(
                    {**w, "hard": w.get("family") == PORT_TAKEN_FAMILY, "source": "tray"}
                    for w in tray
                ),
            ],
        }
        print(json.dumps(report, indent=2))
    else:
        lines = doctor_lines(diagnostics) if diagnostics else []
        lines += [f"{w.get('text')}  (reported by the running mcp-tray)" for w in tray]
        print("\n".join(lines) if lines else "no problems found")
    return EXIT_FAILED if tray_hard else doctor_exit_code(diagnostics)


def _tray_warnings(paths: Paths) -> list[dict[str, Any]]:
    """The running tray's warnings that only it can know (a taken port, a token
    in a file, a refused server request); none when no tray runs."""
    from core.registry.envdiag import ENV_SCAN_FAILED, SECRET_LITERAL, WARNING_PREFIXES

    # The doctor just computed these families itself, from this environment.
    own = {family.rstrip(":") for family in (*WARNING_PREFIXES, SECRET_LITERAL, ENV_SCAN_FAILED)}
    try:
        reply = _client(paths, timeout=DOCTOR_API_TIMEOUT_SECONDS).request(
            "GET", "/api/v1/warnings"
        )
    except (McpTrayError, OSError):
        return []
    rows = reply.body.get("warnings", []) if reply.ok else []
    return [w for w in rows if isinstance(w, dict) and w.get("family") not in own]


def cmd_connect(args: argparse.Namespace, paths: Paths) -> int:
    from core.bridge.main import run

    return run(args.name, paths)


def cmd_token(args: argparse.Namespace, paths: Paths) -> int:
    from core.settings.secrets import read_token

    token = read_token(paths.token_file)
    if token is None:
        raise CommandError("no API token yet: start mcp-tray once to create it", EXIT_NOT_RUNNING)
    print(token)
    return EXIT_OK


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
    for row in rows:
        print(
            f"  {row['id']}  {row['client']:<16} {row['server']:<16} requests {row['requests']:<5} failures {row['consecutive_failures']}  {row['breaker']}"
        )
    return EXIT_OK


def cmd_reset(args: argparse.Namespace, paths: Paths) -> int:
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
    from core.settings.secrets import delete_secret, set_secret

    try:
        if args.secret_command == "set":
            if args.stdin:
                value = sys.stdin.readline().rstrip("\n")
            else:
                import getpass

                value = getpass.getpass(f"value for {args.name} (not echoed): ")
            if not value:
                raise CommandError("an empty secret was not stored", EXIT_USAGE)
            set_secret(args.name, value)
            print(
                f'stored {args.name!r} in the keyring; use it as "${{keyring:{args.name}}}" in a server\'s env'
            )
            return EXIT_OK
        if not delete_secret(args.name):
            raise CommandError(f"no secret named {args.name!r} in the keyring")
        print(f"removed {args.name!r} from the keyring")
        return EXIT_OK
    except SecretStoreError as exc:
        raise CommandError(str(exc)) from None


def cmd_client_config(args: argparse.Namespace, paths: Paths) -> int:
    """Print a client's snippet. Needs no running tray and, for the bridge, no
    config: with ``--server`` the names are taken as given."""
    from core.cli.clients import client_snippet
    from core.cli.desktop_entry import home_override
    from core.settings.config import DEFAULT_GATEWAY_PORT, load_config, valid_server_name

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
    print(json.dumps(snippet, indent=2))
    if args.http:
        notes.append("the snippet holds the API token; keep that file private")
    for note in notes:
        print(f"mcp-tray: {note}", file=sys.stderr)
    return EXIT_OK


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
    "workers": cmd_workers,
    "doctor": cmd_doctor,
    "install-desktop": cmd_install_desktop,
}


if __name__ == "__main__":
    sys.exit(main())
