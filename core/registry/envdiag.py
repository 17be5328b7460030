"""Environment and runtime diagnostics (docs/design.md, "Diagnostics").

The families found here, each a prefix of the finding's text:

- ``unsupported-env:`` an ``MCP_TRAY_*`` key that is not one mcp-tray reads
  (the allow-list is ``core.base.envvars.RECOGNIZED_ENV_KEYS``; no prefix is ever
  admitted), with a did-you-mean;
- ``stale-runtime:`` a worker process running another mcp-tray version;
- ``secret-literal:`` a secret-looking literal in a server's config env
  (suggest the keyring);
- ``env-scan-failed:`` a worker's environment could not be read.

How much each weighs (``mcp-tray doctor``'s exit code, the tray's colour,
the Warnings tab's count) is ``core.base.severity``'s one rule, for every
surface alike: the first three are warnings, the last is advice.

``scan_process_envs`` and ``doctor`` block (psutil, sqlite): async code runs
them in a thread (the tray's timer: ``WorkerWatch.run_doctor``). Values of
env variables are never echoed: they may be secrets and do not help the fix.

Tested in tests/registry/test_envdiag.py with plain dicts and real child processes.
"""

import difflib
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Final

import psutil

from core.base import severity
from core.base.envvars import ENV_PREFIX, RECOGNIZED_ENV_KEYS, RUNTIME_VERSION_ENV
from core.platform.procs import read_environ
from core.registry.identity import client_display_name
from core.registry.records import PidProbe, WorkerRecord
from core.registry.store import WorkerRegistry

UNSUPPORTED_ENV: Final = "unsupported-env:"
STALE_RUNTIME: Final = "stale-runtime:"
SECRET_LITERAL: Final = "secret-literal:"
ENV_SCAN_FAILED: Final = f"{severity.ENV_SCAN_FAILED}:"

#: Similarity (difflib ratio, on the part after ``MCP_TRAY_``) a known key
#: needs to be offered as "did you mean". The shared prefix is left out or
#: every key would look alike; 0.75 catches one or two wrong letters.
DID_YOU_MEAN_CUTOFF: Final = 0.75

#: Env keys whose literal value is probably a credential.
SECRET_KEY_PATTERN: Final = re.compile(r"TOKEN|KEY|SECRET|PASSWORD", re.IGNORECASE)
#: A value that already points into the keyring (resolved at spawn).
KEYRING_REFERENCE: Final = "${keyring:"


@dataclass(frozen=True)
class Diagnostic:
    """One finding; ``str()`` is the single line a user reads."""

    family: str
    #: What it is about: an env key, a process, a server's env entry.
    subject: str
    message: str
    fix: str

    @property
    def hard(self) -> bool:
        """A warning by ``core.base.severity``'s rule (not advice, not information)."""
        return severity.is_warning(self.family)

    def __str__(self) -> str:
        return f"{self.family} {self.message} Fix: {self.fix}"


def _did_you_mean(key: str) -> str | None:
    suffixes = {known[len(ENV_PREFIX) :]: known for known in RECOGNIZED_ENV_KEYS}
    match = difflib.get_close_matches(
        key[len(ENV_PREFIX) :], sorted(suffixes), n=1, cutoff=DID_YOU_MEAN_CUTOFF
    )
    return suffixes[match[0]] if match else None


def unsupported_env(environ: Mapping[str, str], *, where: str | None = None) -> list[Diagnostic]:
    """Every ``MCP_TRAY_*`` key in ``environ`` that mcp-tray does not read.

    ``where`` names the process for a scanned environment (None: our own).
    """
    found: list[Diagnostic] = []
    for key in sorted(environ):
        if not key.startswith(ENV_PREFIX) or key in RECOGNIZED_ENV_KEYS:
            continue
        suggestion = _did_you_mean(key)
        place = f" (in the environment of {where})" if where else ""
        hint = f" (did you mean {suggestion}?)" if suggestion else ""
        found.append(
            Diagnostic(
                family=UNSUPPORTED_ENV,
                subject=key,
                message=f"{key}=…{place} is not a variable mcp-tray reads{hint}.",
                fix=f"rename it to {suggestion} or unset it." if suggestion else "unset it.",
            )
        )
    return found


def stale_runtime(
    workers: Iterable[WorkerRecord],
    own_version: str,
    *,
    process_envs: Mapping[int, Mapping[str, str]] | None = None,
) -> list[Diagnostic]:
    """Workers that run another mcp-tray version than ``own_version``.

    The version comes from the row (what the worker's code reported when it
    registered) and from the process's ``MCP_TRAY_RUNTIME_VERSION`` when its
    environment was scanned; either differing is enough.
    """
    envs = process_envs or {}
    found: list[Diagnostic] = []
    for worker in workers:
        seen = {worker.runtime_version: "registered"}
        if worker.pid is not None and worker.pid in envs:
            seen.setdefault(envs[worker.pid].get(RUNTIME_VERSION_ENV), "process environment")
        stale = [(v, source) for v, source in seen.items() if v is not None and v != own_version]
        if not stale:
            continue
        versions = ", ".join(f"{v} ({source})" for v, source in stale)
        client = client_display_name(worker.client_name)
        pid = f"pid {worker.pid}" if worker.pid is not None else "pid unknown"
        found.append(
            Diagnostic(
                family=STALE_RUNTIME,
                subject=worker.worker_identity,
                message=(
                    f"worker {worker.worker_identity} ({client}, session {worker.session_id}, "
                    f"{pid}) runs mcp-tray {versions}; this mcp-tray is {own_version}."
                ),
                fix=f"restart {client} to reconnect.",
            )
        )
    return found


@dataclass(frozen=True)
class ProcessEnvScan:
    """Environments read, by pid, and what could not be read."""

    envs: Mapping[int, Mapping[str, str]]
    diagnostics: tuple[Diagnostic, ...]


def scan_process_envs(pids: Iterable[int]) -> ProcessEnvScan:
    """Read each process's environment (core.platform.procs: psutil, where the OS
    lets it). Blocking; never raises."""
    envs: dict[int, Mapping[str, str]] = {}
    problems: list[Diagnostic] = []
    for pid in sorted(set(pids)):
        try:
            envs[pid] = read_environ(pid)
        except psutil.AccessDenied:
            problems.append(
                Diagnostic(
                    ENV_SCAN_FAILED,
                    f"pid {pid}",
                    f"could not read the environment of pid {pid}: access denied (another "
                    "user's process; on macOS a hardened one, on Windows an elevated one).",
                    "run mcp-tray doctor as the user who started that process.",
                )
            )
        except psutil.NoSuchProcess:
            # ZombieProcess included: gone or going, nothing left to read.
            problems.append(
                Diagnostic(
                    ENV_SCAN_FAILED,
                    f"pid {pid}",
                    f"pid {pid} exited before its environment could be read.",
                    "nothing to do: its worker row expires after its TTL.",
                )
            )
        except (psutil.Error, OSError) as exc:
            problems.append(
                Diagnostic(
                    ENV_SCAN_FAILED,
                    f"pid {pid}",
                    f"could not read the environment of pid {pid}: {exc!r}.",
                    "run mcp-tray doctor again; report it if it persists.",
                )
            )
    return ProcessEnvScan(envs, tuple(problems))


def secret_literals(servers_env: Mapping[str, Mapping[str, str]]) -> list[Diagnostic]:
    """Secret-looking literal values in servers' config env (server -> env)."""
    found: list[Diagnostic] = []
    for server in sorted(servers_env):
        for key, value in sorted(servers_env[server].items()):
            if not SECRET_KEY_PATTERN.search(key) or not value or KEYRING_REFERENCE in value:
                continue
            found.append(
                Diagnostic(
                    family=SECRET_LITERAL,
                    subject=f"{server}.env.{key}",
                    message=f"server {server!r} has a literal value for {key} in config.json.",
                    fix=(
                        "store it in the OS keyring and write "
                        f'"${{keyring:{server}.{key}}}" as the value instead.'
                    ),
                )
            )
    return found


def doctor(
    environ: Mapping[str, str],
    registry: WorkerRegistry | None,
    own_version: str,
    now: datetime | None = None,
    *,
    servers_env: Mapping[str, Mapping[str, str]] | None = None,
    pid_probe: PidProbe | None = None,
    own_pid: int | None = None,
) -> list[Diagnostic]:
    """Everything ``mcp-tray doctor`` reports; needs no running tray.

    Checks ``environ`` (our own), then every live worker in ``registry``:
    its process environment (read through psutil) and its runtime version.
    ``own_pid`` (default: this process) is skipped in the scan because
    ``environ`` already covers it. Blocking.
    """
    found = unsupported_env(environ)
    if registry is not None:
        moment = registry.wall_clock() if now is None else now
        live = [
            worker
            for worker in registry.list_workers()
            if registry.is_live(worker, now=moment, pid_probe=pid_probe).live
        ]
        me = os.getpid() if own_pid is None else own_pid
        scan = scan_process_envs(w.pid for w in live if w.pid is not None and w.pid != me)
        found.extend(scan.diagnostics)
        for pid, env in scan.envs.items():
            found.extend(unsupported_env(env, where=f"pid {pid}"))
        found.extend(stale_runtime(live, own_version, process_envs=scan.envs))
    if servers_env:
        found.extend(secret_literals(servers_env))
    return found
