"""``mcp-tray client-config`` and ``mcp-tray import``: mcp-tray in other clients'
config files, and their servers in mcp-tray's."""

import argparse
import sys
from pathlib import Path

from core.base.envvars import HOME_ENV
from core.base.errors import CommandError, ConfigError, NotRunning
from core.base.exitcodes import EXIT_NOT_RUNNING, EXIT_OK, EXIT_USAGE
from core.cli.control_client import running_status
from core.settings.config import valid_server_name
from core.settings.paths import Paths


def cmd_client_config(args: argparse.Namespace, paths: Paths) -> int:
    """Print a client's snippet, or with ``--install`` write it into the client's
    own config file (``--dry-run``: print the diff instead, the token masked).

    The servers come from ``--config``, else from the config the running tray
    runs (said on stderr), else from the per-user config. Needs no running
    tray and, for the bridge, no config: with ``--server`` the names are taken
    as given."""
    from core.cli.clients import client_snippet
    from core.cli.launcher import home_override
    from core.settings.config import DEFAULT_GATEWAY_PORT, load_config

    if (args.dry_run or args.overwrite) and not args.install:
        raise CommandError("--dry-run and --overwrite go with --install", EXIT_USAGE)
    notes: list[str] = []
    explicit = args.config is not None
    config_path = Path(args.config).expanduser() if explicit else _trays_config(paths)
    if config_path is None:
        config_path = paths.config_file
    elif not explicit:
        explicit = True  # the tray runs on it, so it exists (or the error says why not)
        notes.append(f"the servers of the running mcp-tray's config, {config_path}")
    # An explicit --config must exist (load_config says how to fix it);
    # a missing default one just means nothing is configured yet.
    config = load_config(config_path) if explicit or config_path.exists() else None
    if args.profile is not None:
        from core.cli.profiles import profile_target

        names = [profile_target(args.profile, config)]
    elif config is not None:
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
                "digits, '.', '_' and '-' (at most 64), and neither hold '__' nor end in '_'",
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
    # Bridges of a tray on another config than the per-user one start theirs on it.
    resolved = config_path.expanduser().resolve()
    own = resolved if resolved != paths.config_file.expanduser().resolve() else None
    if own is not None and not args.http:
        notes.append(f"the bridge entries start a tray on {own} when none runs (--config)")
    snippet = client_snippet(args.client, names, http_url=url, token=token, home=home, config=own)
    code = EXIT_OK
    if args.install:
        from core.cli.install import entries_of, run_install

        code = run_install(
            args.client, entries_of(snippet), dry_run=args.dry_run, overwrite=args.overwrite
        )
    else:
        from core.cli.client_files import file_of
        from core.cli.integrations import client

        print(file_of(client(args.client)).render(snippet).rstrip())
    if args.http:
        notes.append("the snippet holds the API token; keep that file private")
    for note in notes:
        print(f"mcp-tray: {note}", file=sys.stderr)
    return code


def _trays_config(paths: Paths) -> Path | None:
    """The config file the running tray runs on; None when no tray answers."""
    running = running_status(paths)
    where = running[1].get("config") if running is not None else None
    return Path(where) if isinstance(where, str) and where else None


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
    """Merge a client's servers into mcp-tray's config, offering to move secrets."""
    from core.base.errors import SecretStoreError
    from core.cli import integrations
    from core.cli.importer import import_servers, read_client_servers
    from core.settings.secrets import set_secret

    source_path = args.path or integrations.client_config_path(args.client)
    source = read_client_servers(args.client, source_path)
    config_path = args.config or paths.config_file
    interactive = sys.stdin.isatty()

    def move_secret(name: str, value: str) -> bool:
        choice = args.move_secrets
        if choice == "ask":
            if not interactive:
                return False
            answer = (
                input(f"move the literal value of {name} into the OS keyring? [Y/n] ")
                .strip()
                .lower()
            )
            if answer not in ("", "y", "yes"):
                return False
        elif choice == "no":
            return False
        try:
            set_secret(name, value)
        except SecretStoreError as exc:
            print(f"mcp-tray: kept {name} as plain text: {exc}", file=sys.stderr)
            return False
        return True

    report = import_servers(args.client, source, config_path, move_secret=move_secret)
    print(f"importing {args.client} servers from {source_path} into {config_path}")
    for line in report.lines():
        print(f"  {line}")
    return EXIT_OK
