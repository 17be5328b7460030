"""The official MCP conformance suite's server scenarios: direct vs through the tray's gateway.

Runs ``@modelcontextprotocol/conformance`` (npm; it needs Node >= 22, so npm's
``node@22`` package comes with it) against one test server twice and prints
the two tallies side by side, per scenario:

* direct:      the server over streamable HTTP, on its own
               (``tests/servers/conformance_server.py --http``);
* via gateway: the same server as the stdio child of a private headless tray
               (``mcp-tray run --headless`` from a temporary MCP_TRAY_HOME,
               "fail" keyring backend, gateway on a free port), ONE config
               entry with the default ``"protocol": "auto"`` for both eras,
               reached at ``/mcp/conformance`` through a small reverse proxy in this
               script that adds ``Authorization: Bearer <token>`` (the suite
               cannot send headers) and forwards everything else byte for byte,
               SSE streams and ``Mcp-Session-Id`` included. A Host or Origin
               naming the proxy itself is rewritten to the gateway's; any
               other (the DNS-rebinding probes) is passed on unchanged.

The suite's scenarios call fixed names (``test_simple_text``,
``test://static-text``, ...) that its own example "everything" server
implements; that server is not in the npm package and speaks HTTP only, so
tests/servers/conformance_server.py is an equivalent written with the Python
SDK, servable over stdio and HTTP alike (its docstring says more).

Eras (``--era``): ``2025-11-25`` runs every scenario the suite marks
applicable at that revision over the stateful handshake (``--suite all
--spec-version 2025-11-25``); ``2026-07-28`` runs the stateless "modern"
revision's scenarios (``server/discover``, per-request ``_meta``,
InputRequiredResult, header validation, caching hints) at that wire; ``all``
(the default) runs both. The 2026-07-28 scenarios exist only in the suite's
0.2.0 pre-releases, hence the pinned default ``--suite-version``; with
``--suite-version 0.1.16`` (the latest stable release) only the handshake era
can run.

The suite and Node are installed on first use into the gitignored cache
folder .conformance/ (``npm install`` with its cache there too); nothing else
is written outside a temporary directory unless ``--keep-results`` copies the
suite's checks.json files to .conformance/results/. Every process started
(the tray, the servers, the suite) runs in its own process group and is
stopped on exit, failure, Ctrl+C or SIGTERM. Results are reported, not
asserted: the exit code is 0 unless the bench itself breaks (``--strict``
also fails when a scenario passes direct but not via the gateway).

Run: make conformance, or .venv/bin/python bench/conformance.py [--era 2025-11-25]
[--scenario NAME ...] [--control] [--keep-results] [--strict]
(``--control`` adds a column: direct through the same proxy, which shows the
proxy itself changes nothing.)
"""

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, Final
from urllib.parse import urlsplit

ROOT: Final = Path(__file__).resolve().parents[1]
SERVER_SCRIPT: Final = ROOT / "tests" / "servers" / "conformance_server.py"
SERVER: Final = "conformance"
CACHE: Final = ROOT / ".conformance"
PACKAGE: Final = "@modelcontextprotocol/conformance"
#: 0.1.16 is the latest stable release, but only the 0.2.0 pre-releases have
#: the 2026-07-28 scenarios (and more checks for the handshake era).
DEFAULT_SUITE_VERSION: Final = "0.2.0-alpha.12"
#: The suite needs Node >= 22; this npm package ships one.
NODE_PACKAGE: Final = "node@^22"
ERAS: Final = ("2025-11-25", "2026-07-28")
#: Bound on npm install (Node itself is a ~30 MB download).
INSTALL_SECONDS: Final = 600.0
#: Bound on one suite invocation (it times out each scenario itself).
SUITE_SECONDS: Final = 1800.0
#: Bound on the tray's and the direct server's start-up.
READY_SECONDS: Final = 60.0
#: How long a process group gets after SIGTERM before SIGKILL.
STOP_SECONDS: Final = 15.0
_TIMESTAMP_RE: Final = re.compile(r"-\d{4}-\d{2}-\d{2}T[\dZ-]+$")

# Type-checked under every OS by `make lint`; it only runs where it measures.
assert sys.platform != "win32", "bench/ measures POSIX machines (signals, process groups)"


class BenchError(Exception):
    pass


# ------------------------------------------------------------ process groups


class Processes:
    """Every process this bench starts, each the leader of its own group.

    ``stop`` ends one group: SIGTERM, a wait for the leader, SIGKILL if it
    lingers, then SIGKILL for anything still in the group (a child the leader
    left behind, which is reported). ``stop_all`` is the last-resort sweep.
    """

    def __init__(self) -> None:
        self._groups: dict[int, tuple[str, subprocess.Popen[bytes] | None]] = {}

    def track(self, pid: int, what: str, popen: subprocess.Popen[bytes] | None = None) -> None:
        self._groups[pid] = (what, popen)

    def forget(self, pid: int) -> None:
        self._groups.pop(pid, None)

    def stop(self, pid: int) -> None:
        """Safe to call twice; only Popen leaders are waited for (asyncio reaps its own)."""
        entry = self._groups.pop(pid, None)
        if entry is None:
            return
        what, popen = entry
        _killpg(pid, signal.SIGTERM)
        if popen is not None:
            try:
                popen.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                print(f"conformance: {what} ignored SIGTERM; killing it", file=sys.stderr)
                _killpg(pid, signal.SIGKILL)
                popen.wait(5)
            deadline = time.monotonic() + 1.0
            while _group_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
        if _group_alive(pid):
            if popen is not None:
                print(f"conformance: {what} left processes behind; killing them", file=sys.stderr)
            _killpg(pid, signal.SIGKILL)

    def stop_all(self) -> None:
        for pid in reversed(list(self._groups)):
            self.stop(pid)


def _killpg(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _tail(path: Path, lines: int = 30) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return f"(no output in {path})"


# ------------------------------------------------------------ the suite


@dataclass(frozen=True)
class Suite:
    version: str
    node: Path
    cli: Path

    def command(self, *args: str) -> list[str]:
        return [str(self.node), str(self.cli), *args]


def _npm_env(folder: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        npm_config_cache=str(CACHE / "npm-cache"),
        npm_config_update_notifier="false",
        npm_config_fund="false",
        npm_config_audit="false",
        npm_config_loglevel="warn",
    )
    # The node@22 package's bin comes first, so its install script runs on Node 22 too.
    env["PATH"] = f"{folder / 'node_modules' / '.bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def ensure_suite(version: str, processes: Processes, tmp: Path) -> Suite:
    """The suite at ``version`` and a Node 22, installed into .conformance/ once."""
    folder = CACHE / f"suite-{version}"
    suite = Suite(
        version,
        folder / "node_modules" / "node" / "bin" / "node",
        folder / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js",
    )
    stamp = folder / ".installed"
    if not (stamp.exists() and suite.node.exists() and suite.cli.exists()):
        npm = shutil.which("npm")
        if npm is None:
            raise BenchError("npm is not on PATH: install Node.js (any version) and npm first")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "package.json").write_text(
            json.dumps(
                {
                    "name": "mcp-tray-conformance-cache",
                    "private": True,
                    "description": "The MCP conformance suite for bench/conformance.py",
                },
                indent=2,
            )
            + "\n"
        )
        print(f"conformance: installing {PACKAGE}@{version} and {NODE_PACKAGE} into {folder}")
        log = tmp / f"npm-install-{version}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [npm, "install", "--save-exact", f"{PACKAGE}@{version}", NODE_PACKAGE],
                cwd=folder,
                env=_npm_env(folder),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            processes.track(process.pid, "npm install", process)
            try:
                code = process.wait(INSTALL_SECONDS)
            except subprocess.TimeoutExpired:
                code = None
            finally:
                processes.stop(process.pid)
        if code != 0 or not suite.node.exists() or not suite.cli.exists():
            raise BenchError(
                f"npm install of {PACKAGE}@{version} failed (exit {code}):\n{_tail(log)}"
            )
        stamp.write_text(f"{PACKAGE}@{version} {NODE_PACKAGE}\n")
    probe = subprocess.run(
        [str(suite.node), "--version"], capture_output=True, text=True, timeout=30, check=False
    )
    major = probe.stdout.strip().lstrip("v").split(".")[0]
    if probe.returncode != 0 or not major.isdigit() or int(major) < 22:
        raise BenchError(f"{suite.node} is not Node >= 22: {probe.stdout or probe.stderr}")
    return suite


# ------------------------------------------------------------ the test server, direct


class DirectServer:
    """conformance_server.py --http in its own process group."""

    def __init__(self, tmp: Path, processes: Processes) -> None:
        self.portfile = tmp / "direct.port"
        self.log = tmp / "direct-server.log"
        self.processes = processes
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self) -> None:
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, str(SERVER_SCRIPT), "--http", "--port-file", str(self.portfile)],
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.processes.track(self.process.pid, "the direct test server", self.process)

    def wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BenchError(
                    f"the direct server exited with {self.process.returncode}:\n{_tail(self.log)}"
                )
            if self.portfile.exists():
                self.url = f"http://127.0.0.1:{int(self.portfile.read_text())}/mcp"
                return
            time.sleep(0.05)
        raise BenchError(f"the direct server did not listen within {READY_SECONDS:g} s")

    def stop(self) -> None:
        if self.process is not None:
            self.processes.stop(self.process.pid)


# ------------------------------------------------------------ the tray


class Tray:
    """A headless tray from a private home, fronting the test server as its stdio child."""

    def __init__(self, home: Path, processes: Processes) -> None:
        self.home = home
        self.config = home / "conformance-config.json"
        self.log = home / "tray-output.log"
        self.processes = processes
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.token = ""

    @property
    def env(self) -> dict[str, str]:
        # Nothing of a real tray leaks in (MCP_TRAY_*), and the token lives in
        # the private home's file, never in the user's OS keyring.
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_TRAY_")}
        env["MCP_TRAY_HOME"] = str(self.home)
        env["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"
        env["PYTHONPATH"] = str(ROOT)
        return env

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "core.cli.main", *args],
            env=self.env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )

    def start(self) -> None:
        config = {
            # One entry, with the default "protocol": "auto", for both eras' scenarios.
            "mcpServers": {SERVER: {"command": sys.executable, "args": [str(SERVER_SCRIPT)]}},
            "gateway": {"port": 0},
        }
        self.config.write_text(json.dumps(config, indent=2))
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "core.cli.main",
                    "run",
                    "--headless",
                    "--config",
                    str(self.config),
                ],
                env=self.env,
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.processes.track(self.process.pid, "the tray", self.process)

    def wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + READY_SECONDS
        last = "no status yet"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BenchError(
                    f"the tray exited with {self.process.returncode} during start-up:\n"
                    f"{_tail(self.log)}"
                )
            status = self.cli("status", "--json")
            if status.returncode == 0:
                body = json.loads(status.stdout)
                servers = {s.get("name"): s for s in body.get("servers", [])}
                last = f"servers { {name: s.get('state') for name, s in servers.items()} }"
                if servers.get(SERVER, {}).get("state") == "ready":
                    self.url = str(body["gateway"]["url"]).rstrip("/")
                    break
            else:
                last = (status.stderr or status.stdout).strip()
            time.sleep(0.2)
        else:
            raise BenchError(
                f"{SERVER} not ready in the tray within {READY_SECONDS:g} s ({last}):\n"
                f"{_tail(self.log)}"
            )
        token = self.cli("token")
        if token.returncode != 0 or not token.stdout.strip():
            raise BenchError(f"mcp-tray token failed: {token.stderr.strip()}")
        self.token = token.stdout.strip()

    def stop(self) -> int | None:
        """SIGTERM the tray (it stops its children), SIGKILL its group as a last resort."""
        if self.process is None:
            return None
        self.processes.stop(self.process.pid)
        return self.process.poll()


# ------------------------------------------------------------ the header-adding proxy


_HEAD_END: Final = b"\r\n\r\n"
_MAX_HEAD: Final = 64 * 1024
_PIECE: Final = 64 * 1024


class _Downstream:
    """The client side of one proxied connection; ``pending`` is a byte read early."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.pending = b""


def _split_head(head: bytes) -> tuple[str, list[tuple[str, str]]]:
    lines = head[: -len(_HEAD_END)].decode("latin-1").split("\r\n")
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.append((name, value.strip()))
    return lines[0], headers


def _header(headers: list[tuple[str, str]], name: str) -> str | None:
    name = name.lower()
    return next((value for key, value in headers if key.lower() == name), None)


def _is_chunked(headers: list[tuple[str, str]]) -> bool:
    return "chunked" in (_header(headers, "transfer-encoding") or "").lower()


async def _read_head(reader: asyncio.StreamReader, prefix: bytes = b"") -> bytes | None:
    """One HTTP head up to and including the blank line; None on a clean EOF."""
    try:
        return prefix + await reader.readuntil(_HEAD_END)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial and not prefix:
            return None
        raise
    except asyncio.LimitOverrunError as exc:
        raise BenchError("proxy: an HTTP head over 64 KiB") from exc


async def _copy_exactly(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
    while n > 0:
        piece = await reader.read(min(n, _PIECE))
        if not piece:
            raise ConnectionError("the peer closed mid-body")
        writer.write(piece)
        await writer.drain()
        n -= len(piece)


async def _copy_chunked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A chunked body, each chunk passed on as it arrives (SSE events stay live)."""
    while True:
        size_line = await reader.readuntil(b"\r\n")
        writer.write(size_line)
        size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
        if size == 0:
            while True:  # trailers, then the blank line
                line = await reader.readuntil(b"\r\n")
                writer.write(line)
                if line == b"\r\n":
                    break
            await writer.drain()
            return
        await _copy_exactly(reader, writer, size + 2)


async def _copy_to_eof(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while piece := await reader.read(_PIECE):
        writer.write(piece)
        await writer.drain()


class HeaderProxy:
    """A loopback HTTP/1.1 reverse proxy that adds ``Authorization: Bearer <token>``.

    One upstream connection per client connection; requests on a connection
    are handled in turn (the suite's client does not pipeline). Heads are
    forwarded with their header order and case; bodies byte for byte, chunk
    by chunk, so streaming responses are not buffered. A client that hangs
    up during a response (an SSE stream it is done with) has its upstream
    connection closed too, as the gateway would see without the proxy.
    """

    def __init__(self, upstream: str, token: str) -> None:
        parts = urlsplit(upstream)
        if parts.scheme != "http" or parts.hostname is None or parts.port is None:
            raise BenchError(f"proxy: cannot proxy to {upstream!r}")
        self.host = parts.hostname
        self.port = parts.port
        self.token = token
        self.listen_port = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        self.listen_port = self._server.sockets[0].getsockname()[1]
        return self.listen_port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    def _rewrite(self, head: bytes) -> bytes:
        """The request head with the token added; every other line as it came.

        Authorization is replaced, and a Host or Origin naming this proxy is
        made to name the gateway; all other header lines keep their bytes
        (case, order, whitespace), so what the gateway parses is what the
        suite sent.
        """
        own = {f"127.0.0.1:{self.listen_port}", f"localhost:{self.listen_port}"}
        upstream = f"{self.host}:{self.port}"
        lines = head[: -len(_HEAD_END)].decode("latin-1").split("\r\n")
        out = [lines[0]]
        for line in lines[1:]:
            name, _, value = line.partition(":")
            key, value = name.strip().lower(), value.strip()
            if key == "authorization":
                continue
            if key == "host" and value.lower() in own:
                line = f"{name}: {upstream}"
            elif key == "origin" and value.lower().removeprefix("http://") in own:
                line = f"{name}: http://{upstream}"
            out.append(line)
        out.append(f"Authorization: Bearer {self.token}")
        return ("\r\n".join(out) + "\r\n\r\n").encode("latin-1")

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        client = _Downstream(reader, writer)
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            while True:
                head = await _read_head(reader, client.pending)
                client.pending = b""
                if head is None:
                    return
                start, headers = _split_head(head)
                method = start.split(" ", 1)[0].upper()
                if upstream is None:
                    upstream = await asyncio.open_connection(self.host, self.port)
                up_reader, up_writer = upstream
                up_writer.write(self._rewrite(head))
                if _is_chunked(headers):
                    await _copy_chunked(reader, up_writer)
                elif length := int(_header(headers, "content-length") or 0):
                    await _copy_exactly(reader, up_writer, length)
                await up_writer.drain()
                keep = await self._response(client, up_reader, method)
                wants_close = (_header(headers, "connection") or "").lower() == "close"
                if not keep or wants_close:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            return
        except asyncio.CancelledError:
            # close() or shutdown: a leaf task, so ending quietly is right (asyncio's
            # start_server callback would otherwise log the cancellation as an error).
            return
        finally:
            self._tasks.discard(task)
            for stream_writer in (writer, upstream[1] if upstream else None):
                if stream_writer is not None:
                    stream_writer.close()
                    with contextlib.suppress(Exception):
                        await stream_writer.wait_closed()

    async def _response(
        self, client: _Downstream, up_reader: asyncio.StreamReader, method: str
    ) -> bool:
        """Pass one response on; False when either connection must close after it."""
        while True:
            head = await _read_head(up_reader)
            if head is None:
                return False
            status_line, headers = _split_head(head)
            client.writer.write(head)
            await client.writer.drain()
            status = int(status_line.split(" ", 2)[1])
            if not (100 <= status < 200):
                break
        if method == "HEAD" or status in (204, 304):
            body = None
        elif _is_chunked(headers):
            body = _copy_chunked(up_reader, client.writer)
        elif (length := _header(headers, "content-length")) is not None:
            body = _copy_exactly(up_reader, client.writer, int(length))
        else:
            body = _copy_to_eof(up_reader, client.writer)
        if body is not None:
            copying = asyncio.ensure_future(body)
            hangup = asyncio.ensure_future(client.reader.read(1))
            try:
                done, _ = await asyncio.wait({copying, hangup}, return_when=asyncio.FIRST_COMPLETED)
                if copying not in done:
                    early = hangup.result()
                    if not early:  # the client hung up mid-response
                        return False
                    client.pending = early  # a pipelined request: keep its first byte
                    await copying
                copying.result()
            finally:
                for future in (copying, hangup):
                    future.cancel()
                await asyncio.gather(copying, hangup, return_exceptions=True)
            if hangup.done() and not hangup.cancelled() and hangup.exception() is None:
                client.pending = client.pending or hangup.result()
            if _header(headers, "content-length") is None and not _is_chunked(headers):
                return False
        return (_header(headers, "connection") or "").lower() != "close"


# ------------------------------------------------------------ running the suite


@dataclass
class Outcome:
    """One scenario's checks in one run."""

    passed: int = 0
    failed: int = 0
    warnings: int = 0
    skipped: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)
    warned: list[tuple[str, str]] = field(default_factory=list)
    succeeded: list[str] = field(default_factory=list)
    #: INFO checks that say something (not the request/response trace), and SKIPPED ones.
    notes: list[tuple[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.failed == 0

    def cell(self) -> str:
        if self.failed:
            return f"FAIL {self.passed}/{self.passed + self.failed}"
        if not self.passed:
            return "skip" if self.skipped or not self.warnings else f"warn ({self.warnings})"
        extra = f" +{self.warnings}w" if self.warnings else ""
        return f"pass {self.passed}/{self.passed}{extra}"


@dataclass
class Run:
    """One suite invocation's results, by scenario, in the order they ran."""

    label: str
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    #: Set when the suite produced no results at all (with its output's tail).
    error: str = ""


#: INFO checks that only trace the suite's own requests and responses.
_TRACE_IDS: Final = frozenset(
    {"outgoing-request", "incoming-response", "incoming-sse-event", "stream-closed"}
)


def _message(check: dict[str, object]) -> str:
    details = check.get("details")
    said = details.get("message") if isinstance(details, dict) else None
    text = str(check.get("errorMessage") or said or check.get("description") or "")
    return " ".join(text.split())


def collect(outdir: Path, label: str) -> Run:
    run = Run(label)
    folders = sorted(
        (p for p in outdir.iterdir() if (p / "checks.json").is_file()),
        key=lambda p: (p / "checks.json").stat().st_mtime,
    )
    for folder in folders:
        scenario = _TIMESTAMP_RE.sub("", folder.name).removeprefix("server-")
        outcome = Outcome()
        checks = json.loads((folder / "checks.json").read_text())
        for check in checks if isinstance(checks, list) else []:
            status = str(check.get("status", ""))
            ident = str(check.get("id", "?"))
            if status == "SUCCESS":
                outcome.passed += 1
                outcome.succeeded.append(ident)
            elif status == "FAILURE":
                outcome.failed += 1
                outcome.failures.append((ident, _message(check)))
            elif status == "WARNING":
                outcome.warnings += 1
                outcome.warned.append((ident, _message(check)))
            elif status == "SKIPPED":
                outcome.skipped += 1
                outcome.notes.append((ident, "SKIPPED: " + _message(check)))
            elif status == "INFO" and ident not in _TRACE_IDS:
                outcome.notes.append((ident, _message(check)))
        run.outcomes[scenario] = outcome
    return run


def _prepare(outdir: Path) -> IO[bytes]:
    """The results folder, and the suite's output log beside it (opened)."""
    outdir.mkdir(parents=True)
    return outdir.with_suffix(".log").open("wb")


async def _stop_async(process: asyncio.subprocess.Process) -> None:
    """SIGTERM the group, wait, SIGKILL; then SIGKILL any straggler in the group."""
    if process.returncode is None:
        _killpg(process.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), STOP_SECONDS)
        except TimeoutError:
            _killpg(process.pid, signal.SIGKILL)
            await process.wait()
    if _group_alive(process.pid):
        _killpg(process.pid, signal.SIGKILL)


async def run_suite(
    suite: Suite,
    url: str,
    era: str,
    scenarios: list[str],
    outdir: Path,
    label: str,
    processes: Processes,
) -> Run:
    """The suite's server scenarios of ``era`` against ``url``; one invocation per scenario asked."""
    log = _prepare(outdir)
    base = ["server", "--url", url, "--suite", "all", "--spec-version", era, "-o", str(outdir)]
    invocations = [[*base, "--scenario", name] for name in scenarios] or [base]
    with log:
        for args in invocations:
            process = await asyncio.create_subprocess_exec(
                *suite.command(*args),
                cwd=outdir,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
            # Only for the last-resort sweep; stopped below, where asyncio reaps it.
            processes.track(process.pid, f"the suite ({label})")
            try:
                await asyncio.wait_for(process.wait(), SUITE_SECONDS)
            except TimeoutError:
                print(f"conformance: the suite ({label}) ran over {SUITE_SECONDS:g} s; stopped")
            finally:
                await _stop_async(process)
                processes.forget(process.pid)
    run = collect(outdir, label)
    if not run.outcomes:
        run.error = _tail(Path(log.name), 15)
    return run


@dataclass
class EraResult:
    era: str
    runs: list[Run]


async def run_era(
    suite: Suite,
    era: str,
    targets: list[tuple[str, str]],
    scenarios: list[str],
    tmp: Path,
    processes: Processes,
) -> EraResult:
    runs = []
    for label, url in targets:
        print(f"conformance: {era}: running the suite {label} ({url})", flush=True)
        slug = re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")
        runs.append(
            await run_suite(suite, url, era, scenarios, tmp / f"{era}-{slug}", label, processes)
        )
    return EraResult(era, runs)


async def run_all(
    suite: Suite,
    eras: list[str],
    direct_url: str,
    tray: Tray,
    control: bool,
    scenarios: list[str],
    tmp: Path,
    processes: Processes,
) -> list[EraResult]:
    proxy = HeaderProxy(tray.url, tray.token)
    await proxy.start()
    control_proxy: HeaderProxy | None = None
    try:
        gateway = f"http://127.0.0.1:{proxy.listen_port}/mcp/"
        targets = [("direct", direct_url), ("via gateway", gateway)]
        if control:
            control_proxy = HeaderProxy(direct_url, "unused-by-the-direct-server")
            await control_proxy.start()
            targets.append(("direct+proxy", f"http://127.0.0.1:{control_proxy.listen_port}/mcp"))
        return [
            await run_era(
                suite,
                era,
                [(label, url + SERVER if url == gateway else url) for label, url in targets],
                scenarios,
                tmp,
                processes,
            )
            for era in eras
        ]
    finally:
        await proxy.close()
        if control_proxy is not None:
            await control_proxy.close()


# ------------------------------------------------------------ report


def _wrap(text: str, limit: int = 600) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _print_table(result: EraResult) -> None:
    runs = result.runs
    names: list[str] = []
    for run in runs:
        names.extend(name for name in run.outcomes if name not in names)
    print()
    print(f"era {result.era} (--suite all --spec-version {result.era})")
    if not names:
        errors = {run.error for run in runs}
        print("  the suite produced no results; its output ended:")
        for error in errors:
            print("    " + error.replace("\n", "\n    "))
        return
    width = max([len("total scenarios"), *(len(name) for name in names)])
    columns = [max(len(run.label), 15) for run in runs]

    def row(first: str, cells: list[str]) -> None:
        line = "  ".join(f"{cell:<{w}}" for cell, w in zip(cells, columns, strict=True))
        print(f"  {first:<{width}}  {line}".rstrip())

    row("scenario", [run.label for run in runs])
    rule = ["-" * w for w in columns]
    row("-" * width, rule)
    for name in names:
        row(
            name, [run.outcomes[name].cell() if name in run.outcomes else "not run" for run in runs]
        )
    row("-" * width, rule)
    scenarios: list[str] = []
    checks: list[str] = []
    for run in runs:
        outcomes = list(run.outcomes.values())
        scenarios.append(f"{sum(o.ok for o in outcomes)}/{len(names)} pass")
        passed = sum(o.passed for o in outcomes)
        checks.append(f"{passed}/{passed + sum(o.failed for o in outcomes)} pass")
    row("total scenarios", scenarios)
    row("total checks", checks)
    for run in runs:
        if run.error:
            print(f"\n  the suite produced no results {run.label}; its output ended:")
            print("    " + run.error.replace("\n", "\n    "))


def _print_differences(direct: Run, run: Run) -> int:
    """What ``run`` does worse than ``direct``; returns how many scenarios fail only there."""
    only_here = 0
    failing = [(name, outcome) for name, outcome in run.outcomes.items() if outcome.failures]
    if failing:
        print(f"\n  failed checks {run.label} (scenario: check id: the suite's message):")
        for name, outcome in failing:
            also = direct.outcomes.get(name)
            fails_direct = also is not None and bool(also.failures)
            only_here += not fails_direct
            print(f"    {name} ({'fails direct too' if fails_direct else 'passes direct'})")
            for ident, message in outcome.failures:
                print(f"      - {ident}: {_wrap(message)}")
    unexercised: list[tuple[str, Outcome, list[str]]] = []
    for name, outcome in run.outcomes.items():
        reference = direct.outcomes.get(name)
        if reference is None or outcome.failures:
            continue
        missing = [i for i in reference.succeeded if i not in outcome.succeeded]
        if missing:
            unexercised.append((name, outcome, missing))
    if unexercised:
        print(
            f"\n  checks that pass direct but did not run {run.label} (not failures: the "
            "suite found them not applicable; its notes say why):"
        )
        for name, outcome, missing in unexercised:
            print(f"    {name}: not run: {', '.join(missing)}")
            for ident, message in outcome.notes:
                print(f"      - {ident}: {_wrap(message, 300)}")
    warned: list[tuple[str, str, str]] = []
    for name, outcome in run.outcomes.items():
        reference = direct.outcomes.get(name)
        known = {i for i, _ in reference.warned} if reference is not None else set()
        warned.extend((name, i, m) for i, m in outcome.warned if i not in known)
    if warned:
        print(f"\n  warnings {run.label} that direct does not have:")
        for name, ident, message in warned:
            print(f"    {name}: {ident}: {_wrap(message, 300)}")
    return only_here


def report(results: list[EraResult], suite: Suite, reproduce: str, seconds: float) -> int:
    """Prints the tables and the failure reasons; returns the gateway-only failure count."""
    gateway_only = 0
    print()
    print(
        f"MCP conformance, server scenarios: {PACKAGE}@{suite.version}, "
        "test server tests/servers/conformance_server.py"
    )
    print(
        "  direct = the server over streamable HTTP; via gateway = the same server as the "
        "stdio child of a headless mcp-tray, one config entry with the default "
        f'"protocol": "auto", at /mcp/{SERVER} for both eras (bearer token added by a proxy)'
    )
    print(
        "  cells: pass/FAIL passed/scored checks (+Nw: warnings); skip: no scored check ran "
        "(the suite found the scenario not applicable)"
    )
    print(f"  run took {seconds:.1f} s")
    for result in results:
        _print_table(result)
        direct = result.runs[0]
        for run in result.runs[1:]:
            only_here = _print_differences(direct, run)
            if run.label == "via gateway":
                gateway_only += only_here
        failing_direct = [(n, o) for n, o in direct.outcomes.items() if o.failures]
        if failing_direct:
            print("\n  failed checks direct (the test server or its SDK, not the gateway):")
            for name, outcome in failing_direct:
                for ident, message in outcome.failures:
                    print(f"    {name}: {ident}: {_wrap(message)}")
    print()
    print(f"reproduce: {reproduce}")
    return gateway_only


# ------------------------------------------------------------ main


def _reproduce(args: argparse.Namespace) -> str:
    parts = [".venv/bin/python bench/conformance.py"]
    if args.era != "all":
        parts.append(f"--era {args.era}")
    if args.suite_version != DEFAULT_SUITE_VERSION:
        parts.append(f"--suite-version {args.suite_version}")
    parts.extend(f"--scenario {name}" for name in args.scenario)
    if args.control:
        parts.append("--control")
    command = " ".join(parts)
    return "make conformance" if command == parts[0] else command


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl+C, so every ``finally`` runs and children are stopped."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0] if __doc__ else None,
        epilog="See the module docstring (bench/conformance.py) for what runs where.",
    )
    parser.add_argument(
        "--era",
        choices=[*ERAS, "all"],
        default="all",
        help="protocol revision whose scenarios to run (default: all, i.e. both)",
    )
    parser.add_argument(
        "--modern",
        dest="era",
        action="store_const",
        const="2026-07-28",
        help="shorthand for --era 2026-07-28",
    )
    parser.add_argument(
        "--suite-version",
        default=DEFAULT_SUITE_VERSION,
        help=f"{PACKAGE} version (default {DEFAULT_SUITE_VERSION}; 0.1.16 has no 2026-07-28)",
    )
    parser.add_argument(
        "--scenario",
        action="append",
        default=[],
        metavar="NAME",
        help="run only this scenario (repeatable; names: `conformance list --server`)",
    )
    parser.add_argument(
        "--control",
        action="store_true",
        help="add a column: direct through the same header proxy (the proxy's own effect)",
    )
    parser.add_argument(
        "--keep-results",
        action="store_true",
        help="copy the suite's results (checks.json per scenario) to .conformance/results/",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when a scenario passes direct but fails via the gateway",
    )
    args = parser.parse_args(argv)
    eras = list(ERAS) if args.era == "all" else [args.era]

    processes = Processes()
    started = time.perf_counter()
    with _sigterm_as_interrupt(), tempfile.TemporaryDirectory(prefix="mcp-tray-conf-") as name:
        tmp = Path(name)
        direct = DirectServer(tmp, processes)
        tray = Tray(tmp / "home", processes)
        tray.home.mkdir()
        try:
            suite = ensure_suite(args.suite_version, processes, tmp)
            direct.start()
            tray.start()
            direct.wait_ready()
            tray.wait_ready()
            results = asyncio.run(
                run_all(suite, eras, direct.url, tray, args.control, args.scenario, tmp, processes)
            )
        except KeyboardInterrupt:
            print("\nconformance: interrupted; stopping everything it started", file=sys.stderr)
            return 130
        except BenchError as exc:
            print(f"conformance: FAILED: {exc}", file=sys.stderr)
            return 1
        finally:
            direct.stop()
            code = tray.stop()
            processes.stop_all()
        if args.keep_results:
            keep = CACHE / "results" / time.strftime("%Y%m%d-%H%M%S")
            shutil.copytree(tmp, keep, ignore=shutil.ignore_patterns("home", "*.port"))
            print(f"conformance: results kept in {keep}")
    gateway_only = report(results, suite, _reproduce(args), time.perf_counter() - started)
    if code not in (0, None):
        print(f"  note: the tray exited with {code} on SIGTERM (expected 0)")
    return 1 if args.strict and gateway_only else 0


if __name__ == "__main__":
    sys.exit(main())
