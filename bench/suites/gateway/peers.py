"""The peer rows: other stdio -> HTTP gateways (supergateway, mcp-proxy) installed
into .bench-peers/ on first use and run in front of the same echo.py.
"""

import asyncio
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import psutil

from bench.harness.files import ECHO_SCRIPT, ROOT
from bench.harness.npm import npm_env, private_package
from bench.harness.processes import CHILD_STOP_SECONDS, kill_group
from bench.harness.tray import STOP_SECONDS
from bench.suites.gateway.constants import (
    INSTALL_ERROR_RE,
    INSTALL_SECONDS,
    MCP_PROXY_VERSION,
    NODE_MIN_MAJOR,
    NODE_PACKAGE,
    PEER_ENV_KEYS,
    PEER_READY_SECONDS,
    PEERS_CACHE,
    SUPERGATEWAY_VERSION,
)


class PeerUnavailable(Exception):
    """A peer cannot be installed or started: its row is skipped with a one-line note."""


@dataclass(frozen=True)
class PeerSpec:
    """How to run one peer gateway in front of echo.py (installed, not yet started)."""

    name: str
    #: Versions, for the report, e.g. "supergateway 4.0.0 (Node v20.20.2, ...)".
    describe: str
    #: Its transport as the bench's client sees it.
    transport: str
    command: tuple[str, ...]
    #: The MCP endpoint's path on the port the peer listens on.
    path: str


def _peer_env() -> dict[str, str]:
    return {key: os.environ[key] for key in PEER_ENV_KEYS if key in os.environ}


def _log_line(path: Path, prefer: re.Pattern[str] | None = None) -> str:
    """The most telling line of a log: the first matching ``prefer``, else the last."""
    with contextlib.suppress(OSError):
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines()]
        lines = [line for line in lines if line]
        if prefer is not None:
            for line in lines:
                if prefer.search(line):
                    return line
        if lines:
            return lines[-1]
    return "(no output)"


def _install(command: list[str], cwd: Path, env: dict[str, str], log: Path, what: str) -> None:
    """One install step in its own process group, bounded; on Ctrl+C or a timeout its whole
    group is stopped. Raises PeerUnavailable (one line) when it fails."""
    with log.open("wb") as out:
        try:
            process = subprocess.Popen(
                command,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            raise PeerUnavailable(f"{what}: {exc}") from None
        try:
            code: int | None = process.wait(INSTALL_SECONDS)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            if process.poll() is None:
                _stop_group(process, 5.0, group_term=True)
    if code != 0:
        outcome = f"exit {code}" if code is not None else f"no end within {INSTALL_SECONDS:g} s"
        detail = _log_line(log, prefer=INSTALL_ERROR_RE)
        raise PeerUnavailable(f"{what} failed ({outcome}): {detail} [log: {log}]")


def _stop_group(process: subprocess.Popen[Any], grace: float, *, group_term: bool) -> None:
    """SIGTERM the leader of a process group this bench started (or the whole group, with
    ``group_term``); SIGKILL the group if the leader lingers."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group_term:
            kill_group(process.pid, hard=False)
        else:
            process.send_signal(signal.SIGTERM)
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill_group(process.pid, hard=True)
        process.wait(5)


def _node_version(node: str) -> tuple[int, str] | None:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        probe = subprocess.run(
            [node, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
        text = probe.stdout.strip()
        major = text.lstrip("v").split(".")[0]
        if probe.returncode == 0 and major.isdigit():
            return int(major), text
    return None


def _npm_version(folder: Path, package: str) -> str:
    with contextlib.suppress(OSError, ValueError, KeyError):
        manifest = folder / "node_modules" / package / "package.json"
        return str(json.loads(manifest.read_text())["version"])
    return "?"


def ensure_supergateway() -> PeerSpec:
    """supergateway, installed into .bench-peers/node once (with a Node 22 if the
    machine's Node is older than supergateway's engines)."""
    folder = PEERS_CACHE / "node"
    entry = folder / "node_modules" / "supergateway" / "dist" / "index.js"
    bundled_node = folder / "node_modules" / "node" / "bin" / "node"
    system_node = shutil.which("node")
    system = _node_version(system_node) if system_node else None
    need_node = system is None or system[0] < NODE_MIN_MAJOR
    packages = [f"supergateway@{SUPERGATEWAY_VERSION}", *([NODE_PACKAGE] if need_node else [])]
    stamp = folder / ".installed"
    wanted = " ".join(packages)
    installed = stamp.exists() and stamp.read_text().strip() == wanted
    if not (installed and entry.exists() and (bundled_node.exists() or not need_node)):
        npm = shutil.which("npm")
        if npm is None:
            raise PeerUnavailable("npm is not on PATH (install Node.js and npm)")
        private_package(folder, "mcp-tray-bench-peers", "Peer gateways for bench/gateway.py")
        # An unreachable registry fails in seconds, not minutes.
        env = npm_env(folder, PEERS_CACHE / "npm-cache", npm_config_fetch_retries="1")
        print(f"bench: installing {wanted} into {folder} (first use)", file=sys.stderr)
        _install(
            [npm, "install", "--save-exact", *packages],
            folder,
            env,
            PEERS_CACHE / "npm-install.log",
            f"npm install {wanted}",
        )
        if not entry.exists() or (need_node and not bundled_node.exists()):
            raise PeerUnavailable(f"npm install {wanted} left no {entry.name} or node behind")
        stamp.write_text(wanted + "\n")
    node = str(bundled_node) if need_node else str(system_node)
    found = _node_version(node)
    if found is None or found[0] < NODE_MIN_MAJOR:
        raise PeerUnavailable(f"{node} is not Node >= {NODE_MIN_MAJOR}")
    sdk = _npm_version(folder, "@modelcontextprotocol/sdk")
    return PeerSpec(
        "supergateway",
        f"supergateway {_npm_version(folder, 'supergateway')} (Node {found[1]}, "
        f"@modelcontextprotocol/sdk {sdk})",
        # Stateless mode spawns a new echo.py for every POST; stateful keeps one per session.
        "streamable HTTP, --stateful, replies as SSE",
        (
            node,
            str(entry),
            "--stdio",
            shlex.join([sys.executable, str(ECHO_SCRIPT)]),
            "--outputTransport",
            "streamableHttp",
            "--stateful",
            "--port",
            "0",
            # Its default (info) logs every message both ways.
            "--logLevel",
            "none",
        ),
        "/mcp",
    )


def ensure_mcp_proxy() -> PeerSpec:
    """mcp-proxy (sparfenyuk), in its own venv .bench-peers/mcp-proxy-venv (it needs the 1.x
    MCP SDK); echo.py itself still runs on this bench's interpreter (the 2.x SDK)."""
    venv = PEERS_CACHE / "mcp-proxy-venv"
    python = venv / "bin" / "python"
    exe = venv / "bin" / "mcp-proxy"
    stamp = venv / ".installed"
    wanted = f"mcp-proxy=={MCP_PROXY_VERSION}"
    installed = stamp.exists() and stamp.read_text().strip() == wanted
    if not (installed and exe.exists()):
        PEERS_CACHE.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
        if not python.exists():
            print(f"bench: creating {venv} (first use)", file=sys.stderr)
            _install(
                [sys.executable, "-m", "venv", str(venv)],
                ROOT,
                env,
                PEERS_CACHE / "venv-create.log",
                f"python -m venv {venv}",
            )
        print(f"bench: installing {wanted} into {venv} (first use)", file=sys.stderr)
        _install(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--retries",
                "1",
                wanted,
            ],
            ROOT,
            env,
            PEERS_CACHE / "pip-install.log",
            f"pip install {wanted}",
        )
        if not exe.exists():
            raise PeerUnavailable(f"pip install {wanted} left no {exe} behind")
        stamp.write_text(wanted + "\n")
    probe = subprocess.run(
        [
            str(python),
            "-c",
            "import importlib.metadata as m, sys; "
            "print(m.version('mcp-proxy'), m.version('mcp'), sys.version.split()[0])",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=_peer_env(),
    )
    parts = probe.stdout.split()
    if probe.returncode != 0 or len(parts) != 3:
        raise PeerUnavailable(f"{python} cannot import mcp-proxy: {probe.stderr.strip()[-200:]}")
    return PeerSpec(
        "mcp-proxy",
        f"mcp-proxy {parts[0]} (mcp SDK {parts[1]}, Python {parts[2]}, own venv)",
        # One stdio session upstream, the SDK 1.x StreamableHTTPSessionManager (stateful,
        # JSON responses) in front.
        "streamable HTTP, stateful, JSON replies",
        (
            str(exe),
            "--port",
            "0",
            # Its default (INFO) also has uvicorn log every request.
            "--log-level",
            "WARNING",
            "--",
            sys.executable,
            str(ECHO_SCRIPT),
        ),
        "/mcp",
    )


def prepare_peers(notes: list[str]) -> list[PeerSpec]:
    """Every peer that is installed (or installs now); a one-line note for each that is not."""
    specs: list[PeerSpec] = []
    for name, ensure in (("supergateway", ensure_supergateway), ("mcp-proxy", ensure_mcp_proxy)):
        try:
            specs.append(ensure())
        except PeerUnavailable as exc:
            notes.append(f"{name} skipped: {exc}")
    return specs


class Peer:
    """A peer gateway process, in its own process group; always stopped by ``stop``."""

    def __init__(self, spec: PeerSpec) -> None:
        self.spec = spec
        self.log = PEERS_CACHE / "logs" / f"{spec.name}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._log_file = self.log.open("wb")
        self.process = subprocess.Popen(
            self.spec.command,
            cwd=ROOT,
            env=_peer_env(),
            # A pipe nobody writes to: supergateway stops when it closes, so even a
            # SIGKILLed bench does not leave it running.
            stdin=subprocess.PIPE,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    async def wait_url(self) -> str:
        """The peer's MCP URL, once its process listens (``--port 0``: the port it picked)."""
        assert self.process is not None
        leader = psutil.Process(self.process.pid)
        deadline = time.monotonic() + PEER_READY_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise PeerUnavailable(
                    f"it exited with {self.process.returncode} during start-up "
                    f"({_log_line(self.log)}) [log: {self.log}]"
                )
            with contextlib.suppress(psutil.Error):
                for conn in leader.net_connections(kind="tcp"):
                    if conn.status == psutil.CONN_LISTEN and conn.laddr:
                        return f"http://127.0.0.1:{conn.laddr.port}{self.spec.path}"
            await asyncio.sleep(0.05)
        raise PeerUnavailable(
            f"it did not listen within {PEER_READY_SECONDS:g} s [log: {self.log}]"
        )

    def echo_process(self) -> psutil.Process | None:
        """Its echo.py child (the innermost process running echo.py), if there is one."""
        assert self.process is not None
        with contextlib.suppress(psutil.Error):
            found = []
            for child in psutil.Process(self.process.pid).children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    if str(ECHO_SCRIPT) in child.cmdline():
                        found.append(child)
            if len(found) == 1:
                return found[0]
        return None

    def stop(self) -> None:
        """SIGTERM (it stops its echo.py), SIGKILL its group if it lingers, and then any of
        its descendants still alive (supergateway puts echo.py in a group of its own)."""
        process = self.process
        if process is None:
            return
        try:
            descendants: list[psutil.Process] = []
            with contextlib.suppress(psutil.Error):
                descendants = psutil.Process(process.pid).children(recursive=True)
            if process.stdin is not None:
                with contextlib.suppress(OSError):
                    process.stdin.close()
            if process.poll() is None:
                _stop_group(process, STOP_SECONDS, group_term=False)
            _, alive = psutil.wait_procs(descendants, timeout=CHILD_STOP_SECONDS)
            for leftover in alive:
                print(
                    f"bench: {self.spec.name} left pid {leftover.pid} behind; killing it",
                    file=sys.stderr,
                )
                with contextlib.suppress(psutil.Error):
                    leftover.kill()
        finally:
            if self._log_file is not None:
                self._log_file.close()
                self._log_file = None
