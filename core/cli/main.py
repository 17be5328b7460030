"""The ``mcp-tray`` command.

Exit codes everywhere: 0 ok, 1 the operation failed, 2 usage or config
error, 3 mcp-tray is not running. Errors are one clear line on stderr,
never a traceback.
"""

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from core import __version__
from core.base.envvars import HEADLESS_ENV
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

EXIT_OK: Final = 0
EXIT_NOT_RUNNING: Final = 3
#: How long a command waits for the running tray's API to answer.
API_TIMEOUT_SECONDS: Final = 30.0
#: respawn/stop/start run the stop contract (up to ~5 s) and a fresh start.
ACTION_TIMEOUT_SECONDS: Final = 60.0


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
    client_config.add_argument("--server", action="append", help="only this server (repeatable)")

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
        reply = _client(paths, timeout=ACTION_TIMEOUT_SECONDS).request(
            "POST", f"/api/v1/servers/{args.name}/{verb}"
        )
        if not reply.ok:
            raise _server_error(reply)
        server = reply.body["server"]
        print(f"{server['name']}: {server['state']} (generation {server['generation']})")
        return EXIT_OK

    return run


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
    if args.json:
        print(json.dumps(doctor_json(diagnostics), indent=2))
    else:
        lines = doctor_lines(diagnostics)
        print("\n".join(lines) if lines else "no problems found")
    return doctor_exit_code(diagnostics)


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
    from core.cli.clients import client_snippet

    config_path = paths.config_file
    from core.settings.config import load_config

    config = load_config(config_path)
    names = args.server or [s.name for s in config.enabled]
    unknown = [n for n in names if n not in config.servers]
    if unknown:
        raise CommandError(f"not in {config_path}: {', '.join(unknown)}", EXIT_USAGE)
    url = None
    token = None
    if args.http:
        from core.settings.runtime import running_instance
        from core.settings.secrets import read_token

        url = running_instance(paths).url
        token = read_token(paths.token_file)
    snippet = client_snippet(args.client, names, http_url=url, token=token)
    print(json.dumps(snippet, indent=2))
    if args.http:
        print("mcp-tray: the snippet holds the API token; keep that file private", file=sys.stderr)
    return EXIT_OK


def cmd_import(args: argparse.Namespace, paths: Paths) -> int:
    from core.cli.clients import run_import

    return run_import(args, paths)


def cmd_install_desktop(args: argparse.Namespace, paths: Paths) -> int:
    from core.cli.desktop_entry import install, uninstall

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
