"""``mcp-tray doctor`` and ``mcp-tray workers``: what is wrong, and who is attached.

The doctor needs no running tray: it checks this environment, the worker
registry's live workers (their environments and versions) and the config's
literal secrets. When a tray runs it adds what only the tray knows: its own
warnings (a taken port, a refused config edit...), its parked servers and
its tripped sessions. Every finding is weighed by core.base.severity's rule,
the tray's own: any warning makes the doctor exit 1; advice (a worker whose
environment could not be read) and information (the API token in a 0600
file, the platform backends) are listed and change nothing.
"""

import argparse
import json
import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from core import __version__
from core.base.errors import CommandError, McpTrayError, RegistryFileError
from core.base.exitcodes import EXIT_FAILED, EXIT_OK
from core.base.severity import PATH_ORIGIN, PLATFORM, TOKEN_STORAGE
from core.cli.control_client import ControlClient, running_status
from core.cli.findings import Row, by_severity, warnings_of
from core.settings.paths import Paths

if TYPE_CHECKING:  # the registry is imported only when a command reads it
    from core.registry.envdiag import Diagnostic

#: The family of a finding about a parked server (the tray shows it red).
PARKED: Final = "parked"
#: The family of a finding about a tripped client session (red too).
SESSION_TRIPPED: Final = "session-tripped"


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
    """Every finding, warnings first; exit 1 when there is any warning."""
    from core.registry.envdiag import doctor
    from core.registry.workers_view import warnings_json
    from core.settings.config import load_config
    from core.settings.secrets import token_storage_note

    servers_env: dict[str, dict[str, str]] = {}
    config_path = args.config or paths.config_file
    if args.config is not None or config_path.exists():
        config = load_config(config_path)
        servers_env = {name: dict(server.env) for name, server in config.servers.items()}
    found: list[Row] = []
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
    findings = by_severity([*found, *tray])
    reported = any(note.get("family") == TOKEN_STORAGE for note in findings.info)
    if not reported and paths.token_file.exists():  # no tray to ask, or it could not say
        text = token_storage_note(paths.token_file)
        findings.info.append({"family": TOKEN_STORAGE, "subject": "mcp-tray", "text": text})
    findings.warnings.sort(key=lambda item: str(item.get("family")))
    # Which OS backends this environment runs (MCP_TRAY_PLATFORM chooses the set).
    from core.platform.backends import backends

    platform = backends().describe()
    findings.info += [
        {"family": PLATFORM, "subject": job, "text": f"platform: {job}: {name}"}
        for job, name in platform
    ]
    findings.info.append(_sandbox_note())
    findings.info.append(_express_lane_note())
    findings.info.append(_path_note(paths))
    failed = bool(findings.warnings)
    if args.json:
        report = {
            "ok": not failed,
            "warnings": [{**item, "hard": True} for item in findings.warnings],
            "advice": findings.advice,
            "info": findings.info,
            "platform": dict(platform),
        }
        print(json.dumps(report, indent=2))
    else:
        for item in findings.warnings:
            suffix = "  (reported by the running mcp-tray)" if item.get("source") == "tray" else ""
            print(f"{item.get('text')}{suffix}")
        if not failed:
            print("no problems found")
        for line in findings.note_lines():
            print(line)
    return EXIT_FAILED if failed else EXIT_OK


def _sandbox_note() -> Row:
    """What this machine can enforce on a server's ``sandbox`` (limits work everywhere)."""
    from core.platform import landlock
    from core.platform.sandboxing import probe

    support = probe()
    if support.kind == "landlock":
        net = (
            "TCP bind/connect rules"
            if support.abi >= landlock.NETWORK_ABI
            else 'no TCP rules ("network": false cannot be enforced)'
        )
        text = f"sandbox: {support.label()}: file write and read rules, {net}"
    elif support.kind == "seatbelt":
        text = "sandbox: seatbelt (sandbox-exec): file and network rules (not yet tried on a Mac)"
    else:
        text = (
            f"sandbox: none: {support.missing}; a sandboxed server is parked unless its "
            '"sandbox" says "required": false'
        )
    text += "; limits (memory, CPU): enforced by mcp-tray on every OS"
    return {"family": PLATFORM, "subject": "sandbox", "text": text}


def _express_lane_note() -> Row:
    """Whether plain calls can take the gateway's express lane with this uvicorn."""
    from core.serving.http.http_guard import lane_hook_missing

    missing = lane_hook_missing()
    text = (
        "express lane: on (plain calls skip the ASGI stack)"
        if missing is None
        else f"express lane: off: {missing}; every call takes the full path (same answers, more CPU)"
    )
    return {"family": PLATFORM, "subject": "express lane", "text": text}


def _path_note(paths: Paths) -> Row:
    """Where the running tray's PATH came from (its servers are found on it); without a
    tray, what one started with this command's PATH would do (core.platform.login_path)."""
    from core.platform.login_path import is_minimal

    running = running_status(paths)
    told = running[1].get("path") if running is not None else None
    if isinstance(told, dict):
        added = ", ".join(map(str, told.get("added") or ())) or "nothing"
        text = (
            f"path: the running mcp-tray's PATH is {told.get('source')} "
            f"({told.get('detail')}); added: {added}"
        )
    elif is_minimal(os.environ.get("PATH", "")):
        text = (
            "path: no mcp-tray runs; this PATH holds only system folders, so a tray "
            "started with it asks the login shell ($SHELL -ilc) for the user's"
        )
    else:
        text = "path: no mcp-tray runs; a tray started with this PATH keeps it as it is"
    return {"family": PATH_ORIGIN, "subject": "mcp-tray", "text": text}


def _diagnose(paths: Paths, servers_env: dict[str, dict[str, str]]) -> "list[Diagnostic]":
    """The doctor's checks with the registry, when there is one."""
    from core.registry.envdiag import doctor
    from core.registry.store import WorkerRegistry

    if not paths.registry_file.exists():
        return doctor(os.environ, None, __version__, servers_env=servers_env)
    with WorkerRegistry(paths.registry_file) as registry:
        return doctor(os.environ, registry, __version__, servers_env=servers_env)


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


def _tray_report(paths: Paths) -> list[Row]:
    """What only the running tray knows: its warnings (a taken port, a token
    in a file, a refused server request, its own environment), a refused
    config edit, its parked servers and its tripped sessions; none when no
    tray runs or it does not answer in time."""
    running = running_status(paths)
    if running is None:
        return []
    client, status = running
    rows = warnings_of(client)
    error = status.get("config_error")
    if error:
        text = f"config-error: the running mcp-tray refused the last edit of its config: {error}"
        rows.append({"family": "config-error", "subject": "mcp-tray", "text": text})
    rows += [_parked(server) for server in status.get("servers", []) if _is_parked(server)]
    rows += [
        _tripped(session) for session in _sessions(client) if session.get("breaker") == "tripped"
    ]
    return rows


def _is_parked(server: object) -> bool:
    return isinstance(server, dict) and server.get("state") == "parked"


def _parked(server: Row) -> Row:
    name = server.get("name")
    reason = server.get("parked_reason") or server.get("last_error") or "no reason recorded"
    text = (
        f"{PARKED}: server {name!r} is parked ({reason}); mcp-tray does not start it again "
        f"by itself. Fix: see why with mcp-tray logs {name}, then mcp-tray respawn {name}."
    )
    return {"family": PARKED, "subject": name, "text": text}


def _sessions(client: ControlClient) -> list[Row]:
    try:
        reply = client.request("GET", "/api/v1/sessions")
    except McpTrayError:
        return []
    rows = reply.body.get("sessions", []) if reply.ok else []
    return [row for row in rows if isinstance(row, dict)]


def _tripped(session: Row) -> Row:
    who = session.get("client") or session.get("client_name") or "a client"
    ident = session.get("id")
    text = (
        f"{SESSION_TRIPPED}: session {ident} ({who} on {session.get('server')}) failed "
        f"{session.get('consecutive_failures')} times in a row and is answered with a reset "
        f"hint. Fix: mcp-tray reset {ident} (or Reset in the window's Sessions tab)."
    )
    return {"family": SESSION_TRIPPED, "subject": ident, "text": text}
