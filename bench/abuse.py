"""Hostile input and local faults: fuzzed configs, a connection flood, fuzzed requests, invented methods.

Everything that is measured is a real process: a headless tray
(``mcp-tray run --headless``) from a private MCP_TRAY_HOME with one server,
``echo`` (tests/servers/echo.py), on ``gateway.port`` 0. Hostile input is
generated with the hypothesis strategies of tests/test_fuzz_config.py and
tests/test_fuzz_http.py (imported, not copied; a fixed ``--seed`` makes a
run repeatable). The four figures of the issue "Hostile input and local
faults":

1. Configs. CONFIGS generated documents (NUL, lone surrogates, NaN and
   Infinity, nesting thousands deep, '=' in env names, names with newlines,
   integers of thousands of digits, wrong types, cut-off files, bytes that
   are not UTF-8) and special files (a FIFO, /dev/zero and a symlink to it,
   a socket, a folder, a 2 MiB file, a symlink loop, ...). Each goes through
   ``core.settings.config.load_config`` in-process (on a thread, bounded by
   LOAD_SECONDS: past it, a hang); CLI of them (every special file, a few
   valid documents, the rest refused ones) also through the real
   ``python -m core.cli.main run --headless --config FILE``, CLI_JOBS at a
   time, each on a home of its own: a refused config must exit 2 within
   CLI_SECONDS; a valid one must come up (its runtime file names it) within
   CLI_SECONDS, and is then stopped with SIGTERM. Counted: exit codes,
   tracebacks (stderr containing "Traceback"), hangs, and whether the CLI
   agrees with load_config. Then hot reload: EDITS generated documents (and
   a FIFO, a /dev/zero symlink, a 2 MiB file and an empty file renamed or
   written over the config) are written onto the running tray's config.
   Before each edit a marker edit (a disabled server ``marker-N``) is applied
   and seen in ``/api/v1/status``, so every edit's reload is observed: a
   refused edit must show load_config's own error as ``config_error``, an
   accepted one must drop the marker. After each: the echo child's pid is
   unchanged, no traceback in the tray's output, status answers.
   Targets: 0 tracebacks, 0 hangs.

2. Flood. FLOOD raw connections WITHOUT the token (connect and send
   nothing; half a request head; a head trickled one byte a second; a head
   without the token and a body trickled one byte a second), opened in
   bursts, then kept up for HOLD seconds: each one the server closes is
   replaced (at most REOPEN_RATE a second: at the default, above the cap
   all along, so shedding closes them before the read deadline; below
   cap/10 a second, the deadline does). Meanwhile ``GET /api/v1/status``
   with the token, each on a new connection (the harder case: it is
   untrusted until its request is read), is timed every 0.25 s, and the real
   ``mcp-tray status --json`` every 2 s (its time includes the interpreter's
   start). Halfway through, the echo child is kill -9'd; the time until
   status shows it ready again at a higher generation is reported. Also:
   how many of the flood's connections the server closed and when (the tray
   sheds untrusted connections past its cap, 512 or the file limit minus
   256, and closes any that has not sent a whole request within 10 s), and
   the tray's open file count (psutil num_fds): before, peak, after.
   Target: every status answered within 1 s.

3. Requests. REQUESTS generated requests with the token (bodies and
   headers as tests/test_fuzz_http.py builds them: JSON-RPC-shaped
   messages, raw bytes, batches, nesting to 100,000, lone surrogates; POST
   and DELETE) on ``/mcp/echo`` (and ``/echo/mcp``, ``/mcp/nosuch``); half
   of the gateway ones instead carry the headers a real client sends in the
   bench's session (so their generated body reaches JSON-RPC rather than
   being turned away at the header check), and a CONTROL_SHARE of all are
   on ``/api/v1/servers/<name>/call``; CONCURRENCY at a time, each bounded
   by REQUEST_SECONDS (a stream still open then is counted apart from a
   request never answered). Tools that end or stall the child are never
   called. Counted: HTTP statuses, connection errors and resets, the rate,
   and whether the echo pid is unchanged at the end.
   Target: 0 HTTP 500, 0 connection errors.

4. /metrics. In one handshake-era session on ``/mcp/echo``, METHODS
   requests with invented method names (``x/invented-N``), then /metrics
   scraped SCRAPES times back to back (bytes, scrape time p50/max), each
   time with an ``echo`` tool call sent at the same moment (timed, against
   the same calls without scrapes). Method labels are bounded
   (core.serving.metrics): /metrics must stay small and name no invented
   method.

``--burst N`` runs only this instead: a tray started under a file limit
of ``--burst-file-limit`` (1,024, a desktop's usual) gets N idle connections
at once (plain connects, nothing sent); ``GET /api/v1/status`` on a new
connection is timed right after (the first answer is the figure: it waits
behind the burst), then the real ``mcp-tray status --json``; and the tray's
output is searched for accept() failures (EMFILE). Target: status under
0.5 s, no accept failure.

The request generation (tens of seconds of CPU) runs in a worker process
during the hot-reload part, which mostly waits. Figures are reported, not
asserted: the exit code is 0 unless the bench itself breaks (the tray does
not come up, or dies). The default run takes about 2 minutes on 2 idle
CPUs (the request generation and the flood's HOLD dominate).
Run: .venv/bin/python bench/abuse.py (the burst: --burst 1100)
"""

import argparse
import asyncio
import concurrent.futures
import contextlib
import itertools
import json
import math
import multiprocessing
import os
import platform
import re
import resource
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final, TypeVar

# Run as a script from a checkout: make `core` (and `tests`) importable without installing.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx2
import psutil
from harness import (
    KEYRING_BACKEND,
    BenchAborted,
    children_running,
    percentile,
    server_entry,
    shape,
    spawn_tray,
    tagged_by,
    tray_env,
    trouble_in,
)
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir
from results import Row, record

from core.base.errors import ConfigError, NotRunning
from core.serving.http_guard import MAX_CONNECTIONS, READ_SECONDS, connection_cap
from core.serving.metrics import KNOWN_METHODS, OTHER_METHOD
from core.settings.config import load_config
from core.settings.paths import Paths, default_paths
from core.settings.runtime import running_instance
from core.settings.secrets import read_token
from core.supervision.sweep import sweep_leftovers
from tests.test_fuzz_config import ECHO_ENTRY, NOWHERE, documents
from tests.test_fuzz_http import (
    HARMFUL_TOOLS,
    bodies,
    headers,
    json_scalars,
    json_values,
    path_segment,
)

T = TypeVar("T")

ROOT: Final = Path(__file__).resolve().parents[1]
ECHO_SCRIPT: Final = ROOT / "tests" / "servers" / "echo.py"
SERVER: Final = "echo"
DEFAULT_SEED: Final = 0
DEFAULT_CONFIGS: Final = 500
DEFAULT_CLI: Final = 50
DEFAULT_CLI_JOBS: Final = 2
DEFAULT_EDITS: Final = 30
DEFAULT_FLOOD: Final = 1200
DEFAULT_HOLD: Final = 35.0
DEFAULT_REOPEN_RATE: Final = 100
DEFAULT_REQUESTS: Final = 10_000
DEFAULT_CONTROL_SHARE: Final = 0.15
DEFAULT_METHODS: Final = 20_000
DEFAULT_SCRAPES: Final = 20
DEFAULT_CONCURRENCY: Final = 8
#: A config load takes milliseconds; past this it counts as a hang.
LOAD_SECONDS: Final = 10.0
#: A refused config must make the CLI exit within this; a valid one must be up within it.
CLI_SECONDS: Final = 10.0
#: Bound on a tray's exit after SIGTERM (past it: a hang, and its group is killed).
STOP_SECONDS: Final = 30.0
#: Bound on the main tray's start-up (echo ready).
READY_SECONDS: Final = 60.0
#: How long a hot reload may take to show in /api/v1/status (debounce 0.3 s).
RELOAD_SECONDS: Final = 10.0
#: Status probes during the flood: how often, the bound on one, the target.
PROBE_EVERY: Final = 0.25
PROBE_SECONDS: Final = 5.0
TARGET_PROBE_SECONDS: Final = 1.0
#: What this bench adds to docs/measured.md's table (bench/results.py).
ROWS: Final = (
    Row(
        "hostile input",
        "0 tracebacks, 0 hangs, 0 HTTP 500",
        "{configs:,} configs, {edits} live edits, {connections:,} connections without the "
        "token (status p95 {status_p95_ms:,.0f} ms, max {status_max_ms:,.0f} ms), "
        "{requests:,} fuzzed requests: {tracebacks} / {hangs} / {http_500}; /metrics "
        "{metrics_kb:.1f} kB after {methods:,} invented methods",
    ),
)
CLI_STATUS_EVERY: Final = 2.0
#: The burst (``--burst``): status probes right after it, and how far apart.
BURST_PROBES: Final = 10
BURST_PROBE_EVERY: Final = 0.05
DEFAULT_BURST_FILE_LIMIT: Final = 1024
#: Bound on opening one flood connection.
CONNECT_SECONDS: Final = 5.0
#: Bound on one fuzzed request (a stream still open then is counted apart).
REQUEST_SECONDS: Final = 15.0
#: Tool calls timed without scrapes, as the baseline of figure 4.
BASELINE_CALLS: Final = 50
#: What stands for the session id in generated headers (the session opens after generation).
SESSION_PLACEHOLDER: Final = "bench-session-placeholder"
PROTOCOL: Final = "2025-11-25"
ACCEPT: Final = "application/json, text/event-stream"
#: Paths of fuzzed gateway requests: mostly the echo server, as tests/test_fuzz_http.py.
GATEWAY_PATHS: Final = ("/mcp/echo",) * 6 + ("/echo/mcp", "/mcp/nosuch")
#: Kinds of flood connections, in the proportion they are opened.
FLOOD_KINDS: Final = ("idle", "idle", "half-head", "trickle-head", "trickle-body")
HALF_HEAD: Final = b"POST /api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\n"
TRICKLED_HEAD: Final = (
    b"POST /api/v1/servers/echo/call HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
)


# Type-checked under every OS by `make lint`; it only runs where it measures.
assert sys.platform == "linux", (
    "bench/abuse.py measures Linux (file limits through psutil.Process.rlimit)"
)
# ------------------------------------------------------------------ helpers


def row(label: str, values: list[float], scale: float = 1e3) -> str:
    if not values:
        return f"    {label:<46} {0:>6}         -         -         -"
    return (
        f"    {label:<46} {len(values):>6} {percentile(values, 0.50) * scale:>9.1f} "
        f"{percentile(values, 0.95) * scale:>9.1f} {max(values) * scale:>9.1f}"
    )


def header_row(unit: str = "ms") -> str:
    return f"    {'figure (' + unit + ')':<46} {'n':>6} {'p50':>9} {'p95':>9} {'max':>9}"


def generate(strategy: st.SearchStrategy[T], count: int, at_seed: int) -> list[T]:
    """``count`` examples of ``strategy`` (hypothesis' generate phase only; repeatable by seed)."""
    out: list[T] = []

    @seed(at_seed)
    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(value: T) -> None:
        out.append(value)

    collect()
    return out


class LogTail:
    """The tray's output file, read from where the last look stopped."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def new(self) -> str:
        try:
            with self.path.open("rb") as log:
                log.seek(self.offset)
                data = log.read()
        except OSError:
            return ""
        self.offset += len(data)
        return data.decode("utf-8", "replace")


# ------------------------------------------------------------------ the tray


class Tray:
    """The main headless tray on the private home; its output goes to a file."""

    def __init__(
        self, home: Path, config: Path, log: IO[bytes], file_limit: int | None = None
    ) -> None:
        self.home = home
        self.config = config
        #: Started under this RLIMIT_NOFILE (soft and hard), else under ours.
        self.file_limit = file_limit
        self.paths: Paths = default_paths({"MCP_TRAY_HOME": str(home)})
        self.log = log
        self.process: asyncio.subprocess.Process | None = None
        self.url = ""
        self.port = 0
        self.token = ""
        self.api: httpx2.AsyncClient | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def alive(self) -> None:
        if self.process is None or self.process.returncode is not None:
            code = None if self.process is None else self.process.returncode
            raise BenchAborted(f"the tray is gone (exit code {code})")

    async def start(self) -> None:
        limit = self.file_limit

        def limited() -> None:
            if limit is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

        self.process = await spawn_tray(self.config, self.home, self.log, limited)
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            if self.process.returncode is not None:
                raise BenchAborted(f"the tray exited with {self.process.returncode} at start-up")
            with contextlib.suppress(NotRunning):
                info = running_instance(self.paths)
                if info.pid == self.pid:
                    self.url, self.port = info.url, info.port
                    break
            await asyncio.sleep(0.05)
        else:
            raise BenchAborted(f"the tray was not up within {READY_SECONDS:g} s")
        self.token = read_token(self.paths.token_file) or ""
        if not self.token:
            raise BenchAborted(f"no API token in {self.paths.token_file}")
        self.api = httpx2.AsyncClient(
            base_url=self.url,
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=httpx2.Timeout(PROBE_SECONDS),
        )
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx2.HTTPError, ValueError):
                if server_entry(await self.status(), SERVER).get("state") == "ready":
                    return
            await asyncio.sleep(0.1)
        raise BenchAborted(f"{SERVER} not ready within {READY_SECONDS:g} s")

    async def status(self) -> dict[str, Any]:
        """``/api/v1/status`` over the bench's own kept-alive connection."""
        assert self.api is not None
        reply = await self.api.get("/api/v1/status")
        reply.raise_for_status()
        body = reply.json()
        return body if isinstance(body, dict) else {}

    async def stop(self) -> int | None:
        """SIGTERM and wait; SIGKILL its group as a last resort (then None)."""
        if self.api is not None:
            await self.api.aclose()
            self.api = None
        process = self.process
        if process is None or process.returncode is not None:
            return None if process is None else process.returncode
        process.send_signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(process.wait(), STOP_SECONDS)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
            return None


# ------------------------------------------------------- 1. hostile configs


@dataclass
class ConfigCase:
    label: str
    path: Path
    tags: list[str]
    #: load_config in-process: loaded, refused, exception or hang.
    outcome: str = ""
    detail: str = ""
    seconds: float = 0.0
    #: A refusal that is one printable line naming the file, with a "Fix: ".
    one_line: bool = True


@dataclass
class CliRun:
    case: ConfigCase
    code: int | None = None
    #: Seconds to the exit (refused) or to the runtime file (valid).
    seconds: float = 0.0
    up: bool = False
    #: What hung: "" or "no exit", "not up", "no stop".
    hung: str = ""
    stop_code: int | None = None
    traceback: bool = False
    crash_log: bool = False
    stderr: str = ""
    pid: int = 0


@dataclass
class Edit:
    label: str
    expected: str | None
    seen: str = ""
    #: How long until the reload showed in status.
    seconds: float = 0.0
    pid_kept: bool = True
    ready: bool = True
    status_failures: int = 0
    trouble: list[str] = field(default_factory=list)


@dataclass
class ConfigFigures:
    cases: list[ConfigCase] = field(default_factory=list)
    cli: list[CliRun] = field(default_factory=list)
    cli_seconds: float = 0.0
    edits: list[Edit] = field(default_factory=list)
    marker_misses: int = 0
    reload_seconds: float = 0.0
    echo_pid: int = 0


def tags_of(data: bytes) -> list[str]:
    """The hostile features a generated document shows (for the coverage line)."""
    found = []
    if b"\\u0000" in data or b"\x00" in data:
        found.append("NUL")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        found.append("not UTF-8")
    if re.search(rb"\\u[dD][89abAB][0-9a-fA-F]{2}", data):
        found.append("surrogate escape")
    if re.search(rb"NaN|Infinity", data):
        found.append("NaN/Infinity")
    if b"[" * 33 in data:
        found.append("nesting >= 33")
    if re.search(rb"\d{400}", data):
        found.append(">= 400 digits")
    if re.search(rb'"[^"\\]*=[^"\\]*"\s*:', data):
        found.append("'=' in a key")
    if re.search(rb'"[^"]*\\n[^"]*"\s*:', data):
        found.append("newline in a key")
    if re.search(rb"\d{19}", data) and "digits" not in " ".join(found):
        found.append("huge number")
    return found


def special_files(folder: Path) -> list[ConfigCase]:
    """Config paths that are no plain small JSON file."""
    folder.mkdir(parents=True, exist_ok=True)
    echo = {"mcpServers": {SERVER: ECHO_ENTRY}}
    cases: list[ConfigCase] = []

    def case(label: str, path: Path) -> None:
        cases.append(ConfigCase(label, path, ["special"]))

    fifo = folder / "config.fifo"
    os.mkfifo(fifo)
    case("a FIFO", fifo)
    case("/dev/zero", Path("/dev/zero"))
    big = folder / "two-mib.json"
    big.write_bytes(b'{"mcpServers": {}, "pad": "' + b"x" * (2 * 1024 * 1024) + b'"}')
    case("a 2 MiB file", big)
    zero_link = folder / "zero-link.json"
    zero_link.symlink_to("/dev/zero")
    case("a symlink to /dev/zero", zero_link)
    case("/dev/null", Path("/dev/null"))
    sock_path = folder / "config.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sock_path))
    listener.close()  # the socket file stays
    case("a unix socket", sock_path)
    case("a folder", folder)
    case("a missing file", folder / "missing.json")
    loop_a, loop_b = folder / "loop-a.json", folder / "loop-b.json"
    loop_a.symlink_to(loop_b)
    loop_b.symlink_to(loop_a)
    case("a symlink loop", loop_a)
    exact = folder / "one-mib.json"
    text = json.dumps(echo).encode()
    exact.write_bytes(text + b" " * (1024 * 1024 - len(text)))
    case("exactly 1 MiB, valid", exact)
    over = folder / "one-mib-plus-one.json"
    over.write_bytes(text + b" " * (1024 * 1024 + 1 - len(text)))
    case("1 MiB + 1 byte", over)
    empty = folder / "empty.json"
    empty.write_bytes(b"")
    case("an empty file", empty)
    bom = folder / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + text)
    case("UTF-8 with a BOM, valid", bom)
    utf16 = folder / "utf16.json"
    utf16.write_bytes(json.dumps(echo).encode("utf-16"))
    case("UTF-16", utf16)
    return cases


def load_bounded(case: ConfigCase) -> None:
    """load_config on a thread of its own, bounded by LOAD_SECONDS."""
    box: dict[str, Any] = {}

    def work() -> None:
        began = time.perf_counter()
        try:
            load_config(case.path)
            box["outcome"] = ("loaded", "")
        except ConfigError as exc:
            box["outcome"] = ("refused", str(exc))
        except BaseException as exc:
            box["outcome"] = ("exception", "".join(traceback.format_exception(exc)))
        box["seconds"] = time.perf_counter() - began

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(LOAD_SECONDS)
    if worker.is_alive():
        case.outcome, case.detail, case.seconds = "hang", f"no verdict in {LOAD_SECONDS:g} s", 0
        return
    (case.outcome, case.detail), case.seconds = box["outcome"], box["seconds"]
    if case.outcome == "refused":
        text = case.detail
        case.one_line = text.startswith(str(case.path)) and text.isprintable() and "Fix: " in text


def pick(items: list[T], count: int) -> list[T]:
    """``count`` items spread evenly over ``items``."""
    if count <= 0 or not items:
        return []
    if count >= len(items):
        return list(items)
    step = len(items) / count
    return [items[int(i * step)] for i in range(count)]


def cli_sample(cases: list[ConfigCase], count: int) -> list[ConfigCase]:
    """Every special file, about a fifth valid documents, the rest refused ones."""
    specials = [c for c in cases if "special" in c.tags]
    if count <= len(specials):
        return specials[:count]
    generated = [c for c in cases if "special" not in c.tags]
    valid = [c for c in generated if c.outcome == "loaded"]
    others = [c for c in generated if c.outcome != "loaded"]
    n_valid = min(len(valid), max(1, (count - len(specials)) // 5))
    return specials + pick(valid, n_valid) + pick(others, count - len(specials) - n_valid)


async def cli_run(run: CliRun, home: Path, trays: list[int]) -> None:
    """``mcp-tray run --headless --config FILE`` on a home of its own."""
    paths = default_paths({"MCP_TRAY_HOME": str(home)})
    err_path = home / "stderr.log"
    began = time.perf_counter()
    with err_path.open("wb") as err:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "core.cli.main",
            "run",
            "--headless",
            "--config",
            str(run.case.path),
            env=tray_env(home),
            cwd=ROOT,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=err,
            stderr=err,
            start_new_session=True,
        )
    run.pid = process.pid
    trays.append(process.pid)
    deadline = began + CLI_SECONDS
    while time.perf_counter() < deadline and process.returncode is None:
        with contextlib.suppress(NotRunning, OSError, ValueError):
            if running_instance(paths).pid == process.pid:
                run.up = True
                break
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), 0.02)
    run.seconds = time.perf_counter() - began
    if run.up:
        process.send_signal(signal.SIGTERM)
        try:
            run.stop_code = await asyncio.wait_for(process.wait(), STOP_SECONDS)
        except TimeoutError:
            run.hung = "no stop"
    elif process.returncode is None:
        run.hung = "not up" if run.case.outcome == "loaded" else "no exit"
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
    if not run.up and not run.hung:
        run.code = process.returncode
    run.stderr = err_path.read_text(errors="replace")
    run.traceback = "Traceback" in run.stderr
    run.crash_log = any(paths.log_dir.glob("mcp-tray-cli-error.log"))


def config_cases(docs: list[bytes], folder: Path) -> list[ConfigCase]:
    """The generated documents written to files, and the special files; none checked yet."""
    folder.mkdir(parents=True, exist_ok=True)
    cases = []
    for number, data in enumerate(docs):
        path = folder / f"generated-{number:03}.json"
        path.write_bytes(data)
        cases.append(ConfigCase(f"generated #{number}", path, tags_of(data)))
    return cases + special_files(folder / "special")


def cli_homes(folder: Path, count: int) -> list[Path]:
    homes = [folder / "homes" / f"cli-{number:03}" for number in range(count)]
    for home in homes:
        home.mkdir(parents=True, exist_ok=True)
    return homes


async def check_configs(
    docs: list[bytes],
    folder: Path,
    args: argparse.Namespace,
    figures: ConfigFigures,
    trays: list[int],
) -> None:
    figures.cases = config_cases(docs, folder)
    for case in figures.cases:
        load_bounded(case)

    runs = [CliRun(case) for case in cli_sample(figures.cases, args.cli)]
    began = time.perf_counter()
    queue = iter(zip(runs, cli_homes(folder, len(runs)), strict=True))

    async def job() -> None:
        for run, home in queue:
            await cli_run(run, home, trays)

    await asyncio.gather(*(job() for _ in range(args.cli_jobs)))
    figures.cli_seconds = time.perf_counter() - began
    figures.cli = runs


def marker_config(number: int) -> bytes:
    servers = {SERVER: ECHO_ENTRY, f"marker-{number}": {"command": NOWHERE, "disabled": True}}
    return json.dumps({"gateway": {"port": 0}, "mcpServers": servers}, indent=2).encode()


def replace_with(config: Path, make: Any) -> None:
    """Put something new at ``config`` by renaming it over, as editors save."""
    spare = config.with_name(config.name + ".bench-new")
    with contextlib.suppress(FileNotFoundError):
        spare.unlink()
    make(spare)
    os.replace(spare, config)


async def wait_reload(
    tray: Tray, marker: str, expected: str | None, edit: Edit | None = None
) -> str:
    """Until status shows the edit (refused: its error; applied: the marker gone)."""
    began = time.perf_counter()
    last = ""
    while time.perf_counter() - began < RELOAD_SECONDS:
        tray.alive()
        try:
            body = await tray.status()
        except (httpx2.HTTPError, ValueError) as exc:
            if edit is not None:
                edit.status_failures += 1
            last = f"status failed: {type(exc).__name__}"
            await asyncio.sleep(0.05)
            continue
        names = {s.get("name") for s in body.get("servers", [])}
        error = body.get("config_error")
        if expected is None and error is None and marker not in names:
            return "applied"
        if expected is not None and error == expected:
            return "refused"
        last = f"config_error {error!r}, marker {'present' if marker in names else 'gone'}"
        await asyncio.sleep(0.05)
    return f"not seen in {RELOAD_SECONDS:g} s ({last[:300]})"


async def wait_marker(tray: Tray, marker: str) -> bool:
    """Until status shows ``marker`` (a valid edit) applied and no config error."""
    began = time.perf_counter()
    while time.perf_counter() - began < RELOAD_SECONDS:
        tray.alive()
        with contextlib.suppress(httpx2.HTTPError, ValueError):
            body = await tray.status()
            names = {s.get("name") for s in body.get("servers", [])}
            if marker in names and body.get("config_error") is None:
                return True
        await asyncio.sleep(0.05)
    return False


async def hot_reload(
    tray: Tray, docs: list[bytes], folder: Path, figures: ConfigFigures, tail: LogTail
) -> None:
    config = tray.config
    began = time.perf_counter()
    figures.echo_pid = server_entry(await tray.status(), SERVER).get("pid") or 0
    big = b'{"mcpServers": {}, "pad": "' + b"x" * (2 * 1024 * 1024) + b'"}'
    edits: list[tuple[str, Any]] = [
        (f"generated edit #{n}", lambda path, data=data: path.write_bytes(data))
        for n, data in enumerate(docs)
    ]
    specials: list[tuple[str, Any]] = [
        ("FIFO renamed over", lambda path: replace_with(path, os.mkfifo)),
        (
            "symlink to /dev/zero renamed over",
            lambda path: replace_with(path, lambda spare: spare.symlink_to("/dev/zero")),
        ),
        ("2 MiB file written", lambda path: path.write_bytes(big)),
        ("emptied (truncated)", lambda path: path.write_bytes(b"")),
    ]
    # The special ones spread among the generated ones.
    for offset, special in enumerate(specials):
        edits.insert(
            min(len(edits), (offset + 1) * max(1, len(edits) // (len(specials) + 1))), special
        )
    for number, (label, apply) in enumerate(edits):
        marker = f"marker-{number}"
        replace_with(config, lambda spare, number=number: spare.write_bytes(marker_config(number)))
        # The marker there and config_error clear: the edit's own reload will show.
        if not await wait_marker(tray, marker):
            figures.marker_misses += 1
        tail.new()
        apply(config)
        try:
            load_config(config)
            expected: str | None = None
        except ConfigError as exc:
            expected = str(exc)
        edit = Edit(label, expected)
        started = time.perf_counter()
        edit.seen = await wait_reload(tray, marker, expected, edit)
        edit.seconds = time.perf_counter() - started
        entry: dict[str, Any] = {}
        try:
            entry = server_entry(await tray.status(), SERVER)
        except (httpx2.HTTPError, ValueError):
            edit.status_failures += 1
        edit.pid_kept = entry.get("pid") == figures.echo_pid
        edit.ready = entry.get("state") == "ready"
        edit.trouble = trouble_in(tail.new(), f"tray output after {label}")
        figures.edits.append(edit)
    # Back to the first config, seen applied (after a marker, so that it shows).
    final = len(edits)
    replace_with(config, lambda spare: spare.write_bytes(marker_config(final)))
    if not await wait_marker(tray, f"marker-{final}"):
        figures.marker_misses += 1
    replace_with(
        config,
        lambda spare: spare.write_text(
            json.dumps({"gateway": {"port": 0}, "mcpServers": {SERVER: ECHO_ENTRY}}, indent=2)
        ),
    )
    if await wait_reload(tray, f"marker-{final}", None) != "applied":
        figures.marker_misses += 1
    figures.reload_seconds = time.perf_counter() - began


# ------------------------------------------------------------------ 2. flood


@dataclass
class Conn:
    kind: str
    #: Seconds from the flood's start.
    opened: float
    connected: bool = False
    #: Seconds after ``opened`` that the server closed it (None: it did not).
    closed_after: float | None = None
    #: eof, reset, connect failed: ..., held to the end.
    how: str = ""
    received: bytes = b""


@dataclass
class Probe:
    at: float
    seconds: float | None
    error: str = ""
    state: str = ""
    generation: int = 0


@dataclass
class FloodFigures:
    conns: list[Conn] = field(default_factory=list)
    probes: list[Probe] = field(default_factory=list)
    cli_probes: list[tuple[float, float, int]] = field(default_factory=list)
    fds: list[tuple[float, int]] = field(default_factory=list)
    fds_before: int = 0
    fds_after: int = 0
    cap: int = 0
    tray_nofile: int = 0
    hold: float = 0.0
    reopen_rate: int = 1
    #: Seconds from the probes' start to the flood's.
    start: float = 0.0
    burst_seconds: float = 0.0
    kill_at: float | None = None
    killed: list[int] = field(default_factory=list)
    generation_before: int = 0
    ready_after: float | None = None
    new_pid: int = 0
    states_seen: list[str] = field(default_factory=list)
    bench_nofile: int = 0


async def feed(kind: str, writer: asyncio.StreamWriter) -> None:
    """What a connection of ``kind`` sends (never the token)."""
    if kind == "idle":
        return
    if kind == "half-head":
        writer.write(HALF_HEAD)
        await writer.drain()
        return
    if kind == "trickle-head":
        for index in range(len(TRICKLED_HEAD)):
            writer.write(TRICKLED_HEAD[index : index + 1])
            await writer.drain()
            await asyncio.sleep(1.0)
        return
    writer.write(TRICKLED_HEAD)
    await writer.drain()
    while True:
        await asyncio.sleep(1.0)
        writer.write(b"x")
        await writer.drain()


async def read_until_closed(reader: asyncio.StreamReader) -> tuple[str, bytes]:
    received = b""
    try:
        while True:
            data = await reader.read(4096)
            if not data:
                return "eof", received
            received = (received + data)[:200]
    except (ConnectionResetError, BrokenPipeError):
        return "reset", received


async def attack(conn: Conn, port: int, zero: float, stop: asyncio.Event) -> None:
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", port), CONNECT_SECONDS
        )
    except (OSError, TimeoutError) as exc:
        conn.how = f"connect failed: {type(exc).__name__} {exc}"[:120]
        return
    conn.connected = True
    feeder = asyncio.create_task(feed(conn.kind, writer))
    reading = asyncio.create_task(read_until_closed(reader))
    stopping = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({reading, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if reading.done():
            conn.closed_after = time.perf_counter() - zero - conn.opened
            conn.how, conn.received = reading.result()
        else:
            conn.how = "held to the end"
    finally:
        for task in (feeder, reading, stopping):
            task.cancel()
        await asyncio.gather(feeder, reading, stopping, return_exceptions=True)
        writer.transport.abort()


async def probe_loop(
    tray: Tray, zero: float, stop: asyncio.Event, figures: FloodFigures, process: psutil.Process
) -> None:
    """GET /api/v1/status on a new connection every PROBE_EVERY, and the tray's fds."""
    limits = httpx2.Limits(max_keepalive_connections=0)
    async with httpx2.AsyncClient(
        base_url=tray.url,
        headers={"Authorization": f"Bearer {tray.token}"},
        timeout=httpx2.Timeout(PROBE_SECONDS),
        limits=limits,
    ) as fresh:
        while not stop.is_set():
            sent = time.perf_counter()
            probe = Probe(sent - zero, None)
            try:
                reply = await asyncio.wait_for(fresh.get("/api/v1/status"), PROBE_SECONDS)
                if reply.status_code == 200:
                    probe.seconds = time.perf_counter() - sent
                    entry = server_entry(reply.json(), SERVER)
                    probe.state = str(entry.get("state"))
                    probe.generation = int(entry.get("generation") or 0)
                else:
                    probe.error = f"HTTP {reply.status_code}"
            except (httpx2.HTTPError, TimeoutError, ValueError) as exc:
                probe.error = f"{type(exc).__name__} {exc}"[:120]
            figures.probes.append(probe)
            with contextlib.suppress(psutil.Error):
                figures.fds.append((time.perf_counter() - zero, process.num_fds()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    stop.wait(), max(0.0, PROBE_EVERY - (time.perf_counter() - sent))
                )


async def cli_status(home: Path) -> int:
    """One real ``mcp-tray status --json`` on ``home`` (bounded at 30 s); its exit code."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "core.cli.main",
        "status",
        "--json",
        env=tray_env(home),
        cwd=ROOT,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        return await asyncio.wait_for(process.wait(), 30)
    except TimeoutError:
        process.kill()
        return await process.wait()


async def cli_status_loop(
    tray: Tray, zero: float, stop: asyncio.Event, figures: FloodFigures
) -> None:
    """The real ``mcp-tray status --json`` every CLI_STATUS_EVERY (interpreter start included)."""
    while not stop.is_set():
        sent = time.perf_counter()
        code = await cli_status(tray.home)
        figures.cli_probes.append((sent - zero, time.perf_counter() - sent, code))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(
                stop.wait(), max(0.0, CLI_STATUS_EVERY - (time.perf_counter() - sent))
            )


async def kill_once(tray: Tray, zero: float, delay: float, figures: FloodFigures) -> None:
    """kill -9 the echo child after ``delay``; then until status shows it ready again."""
    await asyncio.sleep(delay)
    before = server_entry(await tray.status(), SERVER)
    figures.generation_before = int(before.get("generation") or 0)
    pids = await asyncio.to_thread(children_running, tray.pid, ECHO_SCRIPT)
    killed_at = time.perf_counter()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    figures.kill_at, figures.killed = killed_at - zero, pids
    while time.perf_counter() - killed_at < READY_SECONDS:
        with contextlib.suppress(httpx2.HTTPError, ValueError):
            entry = server_entry(await tray.status(), SERVER)
            state = str(entry.get("state"))
            if not figures.states_seen or figures.states_seen[-1] != state:
                figures.states_seen.append(state)
            if state == "ready" and int(entry.get("generation") or 0) > figures.generation_before:
                figures.ready_after = time.perf_counter() - killed_at
                figures.new_pid = int(entry.get("pid") or 0)
                return
        await asyncio.sleep(0.05)


async def flood(tray: Tray, args: argparse.Namespace, figures: FloodFigures) -> None:
    process = psutil.Process(tray.pid)
    figures.fds_before = process.num_fds()
    with contextlib.suppress(psutil.Error, AttributeError):
        figures.tray_nofile = process.rlimit(psutil.RLIMIT_NOFILE)[0]
    figures.cap = connection_cap(MAX_CONNECTIONS, figures.tray_nofile or 1024)
    figures.hold = args.hold
    figures.reopen_rate = args.reopen_rate
    zero = time.perf_counter()
    stop_probes, stop_flood = asyncio.Event(), asyncio.Event()
    probes = asyncio.create_task(probe_loop(tray, zero, stop_probes, figures, process))
    cli_probes = asyncio.create_task(cli_status_loop(tray, zero, stop_probes, figures))
    await asyncio.sleep(2.0)  # a baseline before the flood

    kinds = itertools.cycle(FLOOD_KINDS)
    tasks: set[asyncio.Task[None]] = set()

    def open_one() -> None:
        conn = Conn(next(kinds), time.perf_counter() - zero)
        figures.conns.append(conn)
        task = asyncio.create_task(attack(conn, tray.port, zero, stop_flood))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    flood_began = time.perf_counter()
    figures.start = flood_began - zero
    killer = asyncio.create_task(kill_once(tray, zero, args.hold / 2, figures))
    while len(figures.conns) < args.flood:
        for _ in range(min(50, args.flood - len(figures.conns))):
            open_one()
        await asyncio.sleep(0.05)
    figures.burst_seconds = time.perf_counter() - flood_began
    tick = 0.1
    while time.perf_counter() - flood_began < args.hold:
        missing = args.flood - len(tasks)
        for _ in range(min(missing, max(1, int(args.reopen_rate * tick)))):
            open_one()
        await asyncio.sleep(tick)
    stop_flood.set()
    await asyncio.gather(*list(tasks), return_exceptions=True)
    await killer
    await asyncio.sleep(2.0)  # after the flood
    stop_probes.set()
    await asyncio.gather(probes, cli_probes)
    with contextlib.suppress(psutil.Error):
        figures.fds_after = process.num_fds()


# -------------------------------------------------------- 3. fuzzed requests


#: kind (gateway with generated or valid headers, or control), verb, path, headers,
#: body (zlib-compressed when large, for the trip from the worker), compressed or not.
Request = tuple[str, str, str, list[tuple[str, str]], bytes, bool]


@st.composite
def fuzz_requests(draw: st.DrawFn, control_share: float) -> Request:
    """One request as tests/test_fuzz_http.py builds them, gateway or control API."""
    if draw(st.integers(0, 999)) < control_share * 1000:
        if draw(st.booleans()):
            body = draw(bodies())
        else:
            call: dict[str, Any] = {}
            if draw(st.integers(0, 9)) > 0:
                call["tool"] = draw(st.sampled_from(["echo", "whoami", "nosuch"]) | json_values)
            if str(call.get("tool")) in HARMFUL_TOOLS:
                call["tool"] = "echo"
            if draw(st.booleans()):
                call["arguments"] = draw(json_values)
            if draw(st.booleans()):
                call["timeout"] = draw(
                    json_scalars | st.sampled_from([float("nan"), float("inf"), -1, 0, True])
                )
            body = json.dumps(call).encode()
        name = draw(st.sampled_from(["echo", "nosuch"]) | path_segment)
        return ("control", "POST", f"/api/v1/servers/{name}/call", [], body, False)
    body = draw(bodies())
    if draw(st.booleans()):
        # Headers a real client sends in the bench's session: the body reaches JSON-RPC.
        valid = {
            "accept": ACCEPT,
            "content-type": "application/json",
            "mcp-session-id": SESSION_PLACEHOLDER,
            "mcp-protocol-version": PROTOCOL,
        }
        return ("gateway, valid headers", "POST", "/mcp/echo", list(valid.items()), body, False)
    sent = draw(headers(SESSION_PLACEHOLDER))
    path = draw(st.sampled_from(GATEWAY_PATHS))
    verb = draw(st.sampled_from(["POST", "POST", "POST", "DELETE"]))
    if verb == "DELETE" and sent.get("mcp-session-id") == SESSION_PLACEHOLDER:
        sent.pop("mcp-session-id")
    return ("gateway, generated headers", verb, path, list(sent.items()), body, False)


def generate_requests(
    count: int, control_share: float, at_seed: int, storage: str
) -> list[Request]:
    """In a worker process: ``count`` fuzzed requests, large bodies compressed for the trip."""
    set_hypothesis_home_dir(storage)
    out = []
    for kind, verb, path, sent, body, _ in generate(
        fuzz_requests(control_share), count, at_seed + 1
    ):
        big = len(body) > 4096
        out.append((kind, verb, path, sent, zlib.compress(body) if big else body, big))
    return out


@dataclass
class Sent:
    kind: str
    status: int | None
    seconds: float
    #: "" (answered), "held open", "no answer", or the connection error.
    problem: str = ""


@dataclass
class RequestFigures:
    generated: int = 0
    generation_seconds: float = 0.0
    sent: list[Sent] = field(default_factory=list)
    seconds: float = 0.0
    pid_before: int = 0
    pid_after: int = 0
    generation_before: int = 0
    generation_after: int = 0
    #: Samples of the requests answered 5xx.
    five_hundreds: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    sessions_after: int = 0


async def open_session(client: httpx2.AsyncClient, name: str) -> str:
    reply = await client.post(
        f"/mcp/{SERVER}",
        headers={"accept": ACCEPT},
        json={
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": name, "version": "0"},
            },
        },
    )
    reply.raise_for_status()
    session = reply.headers["mcp-session-id"]
    await client.post(
        f"/mcp/{SERVER}",
        headers=session_headers(session),
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
    )
    return session


def session_headers(session: str) -> dict[str, str]:
    return {"accept": ACCEPT, "mcp-session-id": session, "mcp-protocol-version": PROTOCOL}


async def send_fuzzed(
    client: httpx2.AsyncClient, request: Request, session: str, figures: RequestFigures
) -> None:
    kind, verb, path, sent, packed, compressed = request
    body = zlib.decompress(packed) if compressed else packed
    sent_headers = [(k, session if v == SESSION_PLACEHOLDER else v) for k, v in sent]
    began = time.perf_counter()
    status: int | None = None
    problem = ""
    try:
        async with asyncio.timeout(REQUEST_SECONDS):
            async with client.stream(verb, path, headers=sent_headers, content=body) as reply:
                status = reply.status_code
                text = await reply.aread()
        if status is not None and status >= 500 and len(figures.five_hundreds) < 10:
            figures.five_hundreds.append(
                f"{verb} {path} headers={dict(sent_headers)!r} body={body[:300]!r} "
                f"-> {text[:300]!r}"
            )
    except TimeoutError:
        problem = "held open" if status is not None else "no answer"
    except httpx2.LocalProtocolError as exc:
        problem = f"refused by the client library: {exc}"[:160]
    except httpx2.HTTPError as exc:
        problem = f"{type(exc).__name__}: {exc}"[:160]
        if len(figures.errors) < 10:
            figures.errors.append(
                f"{verb} {path} headers={dict(sent_headers)!r} body={body[:200]!r} -> {problem}"
            )
    figures.sent.append(Sent(kind, status, time.perf_counter() - began, problem))


async def fuzz_requests_phase(
    tray: Tray, requests: list[Request], args: argparse.Namespace, figures: RequestFigures
) -> None:
    before = server_entry(await tray.status(), SERVER)
    figures.pid_before = int(before.get("pid") or 0)
    figures.generation_before = int(before.get("generation") or 0)
    limits = httpx2.Limits(
        max_connections=args.concurrency, max_keepalive_connections=args.concurrency
    )
    async with httpx2.AsyncClient(
        base_url=tray.url,
        headers={"Authorization": f"Bearer {tray.token}"},
        timeout=httpx2.Timeout(REQUEST_SECONDS),
        limits=limits,
    ) as client:
        session = await open_session(client, "bench-abuse-fuzz")
        queue = iter(requests)
        began = time.perf_counter()

        async def worker() -> None:
            for request in queue:
                await send_fuzzed(client, request, session, figures)

        await asyncio.gather(*(worker() for _ in range(args.concurrency)))
        figures.seconds = time.perf_counter() - began
    tray.alive()
    after = await tray.status()
    entry = server_entry(after, SERVER)
    figures.pid_after = int(entry.get("pid") or 0)
    figures.generation_after = int(entry.get("generation") or 0)
    figures.sessions_after = len(after.get("sessions") or [])


# ---------------------------------------------------------------- 4. metrics


@dataclass
class MetricsFigures:
    requests: int = 0
    seconds: float = 0.0
    statuses: Counter[str] = field(default_factory=Counter)
    before_bytes: int = 0
    scrapes: list[tuple[float, int]] = field(default_factory=list)
    method_labels: set[str] = field(default_factory=set)
    session_labels: int = 0
    lines: int = 0
    invented_named: int = 0
    baseline_calls: list[float] = field(default_factory=list)
    calls_during: list[float] = field(default_factory=list)
    call_failures: int = 0


async def tool_call(client: httpx2.AsyncClient, session: str, number: int) -> bool:
    text = f"abuse-{number}"
    reply = await client.post(
        f"/mcp/{SERVER}",
        headers=session_headers(session),
        json={
            "jsonrpc": "2.0",
            "id": f"call-{number}",
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": text}},
        },
    )
    return reply.status_code == 200 and f'"text":"{text}"' in reply.text.replace(" ", "")


async def metrics_phase(tray: Tray, args: argparse.Namespace, figures: MetricsFigures) -> None:
    limits = httpx2.Limits(
        max_connections=args.concurrency + 2, max_keepalive_connections=args.concurrency + 2
    )
    async with httpx2.AsyncClient(
        base_url=tray.url,
        headers={"Authorization": f"Bearer {tray.token}"},
        timeout=httpx2.Timeout(REQUEST_SECONDS),
        limits=limits,
    ) as client:
        figures.before_bytes = len((await client.get("/metrics")).content)
        session = await open_session(client, "bench-abuse-methods")
        numbers = iter(range(args.methods))
        began = time.perf_counter()

        async def worker() -> None:
            for number in numbers:
                try:
                    reply = await client.post(
                        f"/mcp/{SERVER}",
                        headers=session_headers(session),
                        json={"jsonrpc": "2.0", "id": number, "method": f"x/invented-{number}"},
                    )
                    code = ""
                    with contextlib.suppress(ValueError, AttributeError):
                        code = str(reply.json()["error"]["code"])
                    figures.statuses[f"HTTP {reply.status_code} {code}".strip()] += 1
                except httpx2.HTTPError as exc:
                    figures.statuses[type(exc).__name__] += 1
                figures.requests += 1

        await asyncio.gather(*(worker() for _ in range(args.concurrency)))
        figures.seconds = time.perf_counter() - began

        for number in range(BASELINE_CALLS):
            started = time.perf_counter()
            if await tool_call(client, session, number):
                figures.baseline_calls.append(time.perf_counter() - started)
            else:
                figures.call_failures += 1

        async def scrape() -> str:
            started = time.perf_counter()
            reply = await client.get("/metrics")
            figures.scrapes.append((time.perf_counter() - started, len(reply.content)))
            return reply.text

        async def call(number: int) -> None:
            started = time.perf_counter()
            if await tool_call(client, session, number):
                figures.calls_during.append(time.perf_counter() - started)
            else:
                figures.call_failures += 1

        text = ""
        # Each scrape with a tool call sent at the same moment.
        for number in range(args.scrapes):
            text, _ = await asyncio.gather(scrape(), call(BASELINE_CALLS + number))
    figures.lines = len(text.splitlines())
    figures.method_labels = set(re.findall(r'method="([^"]*)"', text))
    figures.session_labels = len(set(re.findall(r'session="([^"]*)"', text)))
    figures.invented_named = text.count("invented")


# ------------------------------------------------------------------ the run


@dataclass
class Figures:
    configs: ConfigFigures = field(default_factory=ConfigFigures)
    flood: FloodFigures = field(default_factory=FloodFigures)
    requests: RequestFigures = field(default_factory=RequestFigures)
    metrics: MetricsFigures = field(default_factory=MetricsFigures)
    tray_pids: list[int] = field(default_factory=list)
    tray_trouble: dict[str, list[str]] = field(default_factory=dict)
    child_trouble: list[str] = field(default_factory=list)
    stop_code: int | None = None
    done: list[str] = field(default_factory=list)


async def bench(
    args: argparse.Namespace, home: Path, figures: Figures, log: IO[bytes], tail: LogTail
) -> None:
    loop = asyncio.get_running_loop()
    scratch = home / "bench"
    docs = generate(documents(), args.configs, args.seed)
    await check_configs(docs, scratch / "configs", args, figures.configs, figures.tray_pids)
    figures.done.append("configs")

    paths = default_paths({"MCP_TRAY_HOME": str(home)}).ensure()
    config = paths.config_file.resolve()
    config.write_text(
        json.dumps({"gateway": {"port": 0}, "mcpServers": {SERVER: ECHO_ENTRY}}, indent=2)
    )
    tray = Tray(home, config, log)
    pool = concurrent.futures.ProcessPoolExecutor(
        max_workers=1, mp_context=multiprocessing.get_context("spawn")
    )
    try:
        await tray.start()
        figures.tray_pids.append(tray.pid)
        figures.tray_trouble["start-up"] = trouble_in(tail.new(), "tray output at start-up")

        # The requests of part 3 are generated meanwhile (the reloads mostly wait).
        generation_began = time.perf_counter()
        requests = loop.run_in_executor(
            pool,
            generate_requests,
            args.requests,
            args.control_share,
            args.seed,
            str(scratch / "hypothesis"),
        )
        edit_docs = generate(documents(), args.edits * 4, args.seed + 2)
        loaded = []
        for data in edit_docs:
            probe = scratch / "edit-probe.json"
            probe.write_bytes(data)
            try:
                load_config(probe)
                loaded.append(data)
            except ConfigError:
                pass
        refused = [d for d in edit_docs if d not in loaded]
        n_valid = min(len(loaded), args.edits // 3)
        chosen = pick(loaded, n_valid) + pick(refused, args.edits - n_valid)
        # Interleave accepted and refused edits.
        chosen.sort(key=lambda data: edit_docs.index(data))
        await hot_reload(tray, chosen, scratch, figures.configs, tail)
        figures.tray_trouble["hot reload"] = [
            line for edit in figures.configs.edits for line in edit.trouble
        ]
        figures.done.append("hot reload")

        generated = await requests
        figures.requests.generated = len(generated)
        figures.requests.generation_seconds = time.perf_counter() - generation_began
        tray.alive()

        await flood(tray, args, figures.flood)
        tray.alive()
        figures.tray_trouble["flood"] = trouble_in(tail.new(), "tray output during the flood")
        figures.done.append("flood")

        await fuzz_requests_phase(tray, generated, args, figures.requests)
        del generated
        figures.tray_trouble["fuzzed requests"] = trouble_in(
            tail.new(), "tray output during the fuzzed requests"
        )
        figures.done.append("requests")

        await metrics_phase(tray, args, figures.metrics)
        tray.alive()
        figures.tray_trouble["invented methods"] = trouble_in(
            tail.new(), "tray output during the invented methods"
        )
        figures.done.append("metrics")
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        figures.stop_code = await tray.stop()
        figures.tray_trouble["stop"] = trouble_in(tail.new(), "tray output at stop")
        for path in sorted(paths.log_dir.glob("*.log")):
            with contextlib.suppress(OSError):
                figures.child_trouble += trouble_in(path.read_text(errors="replace"), path.name)


# ------------------------------------------------------------------ a burst


async def burst(count: int, file_limit: int, home: Path, log: IO[bytes], tail: LogTail) -> None:
    """``count`` idle connections opened at once on a tray under ``file_limit`` descriptors:
    how long ``status`` takes meanwhile, and whether accept() hit the limit."""
    paths = default_paths({"MCP_TRAY_HOME": str(home)}).ensure()
    config = paths.config_file.resolve()
    config.write_text(json.dumps({"gateway": {"port": 0}, "mcpServers": {SERVER: ECHO_ENTRY}}))
    tray = Tray(home, config, log, file_limit=file_limit)
    await tray.start()
    process = psutil.Process(tray.pid)
    tail.new()
    held: list[socket.socket] = []
    probes: list[float] = []
    failures: list[str] = []
    peak_fds = process.num_fds()
    try:
        began = time.perf_counter()
        for _ in range(count):
            # Plain connects: the kernel completes each into the listen backlog at once.
            conn = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            conn.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                conn.connect(("127.0.0.1", tray.port))
            held.append(conn)
        opened = time.perf_counter() - began
        async with httpx2.AsyncClient(
            base_url=tray.url,
            headers={"Authorization": f"Bearer {tray.token}"},
            timeout=httpx2.Timeout(PROBE_SECONDS),
            limits=httpx2.Limits(max_keepalive_connections=0),
        ) as fresh:
            for _ in range(BURST_PROBES):
                sent = time.perf_counter()
                try:
                    reply = await fresh.get("/api/v1/status")
                    reply.raise_for_status()
                    probes.append(time.perf_counter() - sent)
                except (httpx2.HTTPError, TimeoutError) as exc:
                    failures.append(f"{type(exc).__name__} {exc}"[:100])
                with contextlib.suppress(psutil.Error):
                    peak_fds = max(peak_fds, process.num_fds())
                await asyncio.sleep(BURST_PROBE_EVERY)
        cli_sent = time.perf_counter()
        cli_code = await cli_status(home)
        cli_seconds = time.perf_counter() - cli_sent
    finally:
        for conn in held:
            conn.close()
        await tray.stop()
    said = tail.new()
    accept_errors = said.count("cannot accept connections")
    print(
        f"mcp-tray burst: {count} idle connections opened at once ({opened * 1e3:.0f} ms) on a "
        f"headless tray whose file limit is {file_limit}; load avg "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print(
        f"  GET /api/v1/status on a new connection, {len(probes)} of {BURST_PROBES} answered "
        f"right after the burst: first {probes[0] * 1e3 if probes else float('nan'):.0f} ms, "
        f"p50 {percentile(probes, 0.5) * 1e3:.0f} ms, max {max(probes, default=0) * 1e3:.0f} ms"
    )
    for line in failures[:5]:
        print(f"     !! {line}")
    print(
        f"  mcp-tray status --json (a new interpreter): {cli_seconds:.2f} s, exit code {cli_code}"
    )
    print(
        f"  the tray's descriptors: peak {peak_fds} of {file_limit}; accept() failures logged: "
        f"{accept_errors}"
    )
    print(
        f"reproduce: .venv/bin/python bench/abuse.py --burst {count} --burst-file-limit {file_limit}"
    )


# ------------------------------------------------------------------ the report


def report_configs(figures: ConfigFigures) -> tuple[int, int]:
    """Part 1; returns (tracebacks, hangs)."""
    cases = figures.cases
    generated = [c for c in cases if "special" not in c.tags]
    outcomes = Counter(c.outcome for c in cases)
    print(
        f"  1. configs: {len(generated)} generated documents + "
        f"{len(cases) - len(generated)} special files"
    )
    tags = Counter(tag for c in generated for tag in c.tags)
    print(
        "     hostile features among the generated: "
        + ", ".join(f"{t} {n}" for t, n in tags.most_common())
    )
    print(
        "     load_config in-process: "
        + ", ".join(
            f"{name} {outcomes[name]}" for name in ("loaded", "refused", "exception", "hang")
        )
        + f"; refusals not one printable line with a Fix: {sum(not c.one_line for c in cases)}"
    )
    print(header_row())
    print(
        row(
            "load_config (generated and special)", [c.seconds for c in cases if c.outcome != "hang"]
        )
    )
    for case in cases:
        if case.outcome in ("exception", "hang"):
            print(
                f"     !! {case.label} ({case.path}): {case.outcome}: {case.detail.strip()[-400:]}"
            )
    for case in [c for c in cases if not c.one_line][:5]:
        print(f"     !! {case.label}: refusal not one line: {case.detail[:200]!r}")
    print("     special files:")
    for case in cases:
        if "special" in case.tags:
            verdict = case.detail.split(": ", 1)[-1] if case.outcome == "refused" else case.outcome
            print(
                f"       {case.label:<26} {case.outcome:<8} {case.seconds * 1e3:7.2f} ms  {verdict[:110]}"
            )

    runs = figures.cli
    codes = Counter(
        "hang"
        if r.hung
        else f"up, then exit {r.stop_code} after SIGTERM"
        if r.up
        else f"exit {r.code}"
        for r in runs
    )
    print(
        f"     CLI `run --headless --config FILE`: {len(runs)} runs in {figures.cli_seconds:.1f} s "
        f"({sum(r.case.outcome == 'loaded' for r in runs)} valid, stopped by SIGTERM once up): "
        + ", ".join(f"{code} x{n}" for code, n in codes.most_common())
    )
    refused = [r for r in runs if r.case.outcome != "loaded"]
    valid = [r for r in runs if r.case.outcome == "loaded"]
    print(header_row())
    print(row("refused config: start -> exit", [r.seconds for r in refused if not r.hung]))
    print(row("valid config: start -> runtime file", [r.seconds for r in valid if r.up]))
    disagree = [
        r
        for r in runs
        if not r.hung and ((r.case.outcome == "loaded") != r.up or (not r.up and r.code != 2))
    ]
    print(
        f"     CLI vs load_config disagreements: {len(disagree)}; tracebacks on stderr: "
        f"{sum(r.traceback for r in runs)}; crash logs: {sum(r.crash_log for r in runs)}; "
        f"valid runs' exit after SIGTERM: "
        + ", ".join(f"{c} x{n}" for c, n in Counter(r.stop_code for r in valid if r.up).items())
    )
    for run in [r for r in runs if r.hung or r.traceback or r in disagree][:8]:
        print(
            f"     !! {run.case.label} ({run.case.path.name}): exit {run.code} hung {run.hung!r} "
            f"load_config {run.case.outcome}: {run.stderr.strip()[-400:]!r}"
        )
    lines = Counter(
        shape(r.stderr.strip().splitlines()[-1], paths=True) for r in refused if r.stderr.strip()
    )
    print(f"     refused runs' last stderr line, {len(lines)} shapes, e.g.:")
    for text, number in lines.most_common(3):
        print(f"       {number:>3} x {text[:150]}")

    edits = figures.edits
    seen = Counter(e.seen if e.seen in ("applied", "refused") else "not seen" for e in edits)
    print(
        f"     hot reload: {len(edits)} edits onto the running tray's config in "
        f"{figures.reload_seconds:.1f} s: applied {seen['applied']}, refused {seen['refused']}, "
        f"not seen as load_config says {seen['not seen']}; marker edits not seen {figures.marker_misses}"
    )
    print(header_row())
    print(
        row(
            "edit written -> reload shown in status",
            [e.seconds for e in edits if e.seen in ("applied", "refused")],
        )
    )
    trouble = [line for e in edits for line in e.trouble]
    print(
        f"     echo pid changed after an edit: {sum(not e.pid_kept for e in edits)} "
        f"(of them refused edits: {sum(not e.pid_kept and e.expected is not None for e in edits)}); "
        f"echo not ready after an edit: {sum(not e.ready for e in edits)}; "
        f"status failures: {sum(e.status_failures for e in edits)}; tracebacks in the tray's output: {len(trouble)}"
    )
    for edit in edits:
        if edit.seen not in ("applied", "refused") or not edit.pid_kept or edit.trouble:
            print(
                f"     !! {edit.label}: {edit.seen}; pid kept {edit.pid_kept}; {edit.trouble[:2]}"
            )
    specials = [e for e in edits if not e.label.startswith("generated")]
    for edit in specials:
        said = (edit.expected or "").split(": ", 1)[-1]
        print(f"       {edit.label:<34} {edit.seen:<8} {said[:100]}")
    tracebacks = (
        sum(c.outcome == "exception" for c in cases) + sum(r.traceback for r in runs) + len(trouble)
    )
    hangs = outcomes["hang"] + sum(bool(r.hung) for r in runs) + seen["not seen"]
    return tracebacks, hangs


def report_flood(figures: FloodFigures) -> tuple[list[float], int]:
    conns = figures.conns
    connected = [c for c in conns if c.connected]
    closed = [c for c in conns if c.closed_after is not None]
    during = [p for p in figures.probes if figures.start <= p.at <= figures.start + figures.hold]
    answered = [p.seconds for p in during if p.seconds is not None]
    failed = [p for p in during if p.seconds is None]
    print(
        f"  2. flood: {len(conns)} connections without the token in {figures.hold:g} s "
        f"(the first burst of {sum(c.opened < figures.start + figures.burst_seconds for c in conns)} "
        f"in {figures.burst_seconds:.1f} s, then each one closed replaced, at most "
        f"{figures.reopen_rate}/s; the bench's file limit {figures.bench_nofile}); "
        f"tray file limit {figures.tray_nofile}, so its cap is {figures.cap}; read deadline {READ_SECONDS:g} s"
    )
    print(
        f"     connected {len(connected)}, connect failures {len(conns) - len(connected)}"
        + (
            " ("
            + ", ".join(
                f"{n} x {h}"
                for h, n in Counter(c.how for c in conns if not c.connected).most_common(3)
            )
            + ")"
            if len(conns) > len(connected)
            else ""
        )
        + f"; closed by the server {len(closed)}, still open when the bench closed them "
        f"{sum(c.how == 'held to the end' for c in conns)}"
    )
    print(
        "     by kind (opened / closed by the server: reset, eof after a reply, eof; lifetime s min / p50 / max):"
    )
    for kind in dict.fromkeys(FLOOD_KINDS):
        mine = [c for c in conns if c.kind == kind]
        shut = [c for c in mine if c.closed_after is not None]
        lives = [c.closed_after for c in shut if c.closed_after is not None]
        replies = Counter(
            c.received.split(b"\r\n", 1)[0].decode("latin-1") for c in shut if c.received
        )
        print(
            f"       {kind:<13} {len(mine):>5} / {len(shut):>5}: reset {sum(c.how == 'reset' for c in shut)}, "
            f"eof+reply {sum(c.how == 'eof' and bool(c.received) for c in shut)}, "
            f"eof {sum(c.how == 'eof' and not c.received for c in shut)}; "
            + (
                f"{min(lives):.2f} / {percentile(lives, 0.5):.2f} / {max(lives):.2f}"
                if lives
                else "-"
            )
            + (
                "; replies: " + ", ".join(f"{r!r} x{n}" for r, n in replies.most_common(2))
                if replies
                else ""
            )
        )
    edges = (
        (0.1, "< 0.1 s"),
        (1.0, "0.1-1 s"),
        (READ_SECONDS - 1, f"1-{READ_SECONDS - 1:g} s"),
        (READ_SECONDS + 1, f"{READ_SECONDS - 1:g}-{READ_SECONDS + 1:g} s (read deadline)"),
        (math.inf, f">= {READ_SECONDS + 1:g} s"),
    )
    for label, chosen in (
        ("first burst", [c for c in closed if c.opened < figures.start + figures.burst_seconds]),
        ("after it", [c for c in closed if c.opened >= figures.start + figures.burst_seconds]),
    ):
        lives = [c.closed_after for c in chosen if c.closed_after is not None]
        buckets = Counter(next(name for edge, name in edges if life < edge) for life in lives)
        print(
            f"     lifetime of those the server closed, {label}: "
            + ", ".join(f"{name} {buckets[name]}" for _, name in edges if buckets[name])
            + (
                f" (min {min(lives):.2f}, p50 {percentile(lives, 0.5):.2f}, max {max(lives):.2f} s)"
                if lives
                else "none"
            )
        )
    shed_life = figures.cap / figures.reopen_rate
    if shed_life < READ_SECONDS:
        print(
            f"     (past the cap each new connection sheds the oldest untrusted one: at "
            f"{figures.reopen_rate}/s a connection lives ~cap/rate = {shed_life:.1f} s, before "
            f"the {READ_SECONDS:g} s read deadline; --reopen-rate below "
            f"{figures.cap / READ_SECONDS:.0f} lets the deadline close them instead)"
        )
    print(
        "     timeline (s from the flood's start: opened, closed by the server, tray fds max, status max ms):"
    )
    end = figures.start + figures.hold + 2.0
    step = 5.0
    start = figures.start
    while start < end:
        stop = start + step
        opened = sum(start <= c.opened < stop for c in conns)
        closing = sum(
            c.closed_after is not None and start <= c.opened + c.closed_after < stop for c in conns
        )
        fds = [n for at, n in figures.fds if start <= at < stop]
        probes = [
            p.seconds for p in figures.probes if start <= p.at < stop and p.seconds is not None
        ]
        print(
            f"       {start - figures.start:5.0f}-{stop - figures.start:<4.0f} opened {opened:>5}, closed {closing:>5}, "
            f"fds {max(fds) if fds else '-':>5}, status max "
            f"{(max(probes) * 1e3 if probes else float('nan')):7.1f}"
        )
        start = stop
    peak = max((n for _, n in figures.fds), default=0)
    print(
        f"     tray open files (num_fds): before {figures.fds_before}, peak {peak}, "
        f"2 s after the flood {figures.fds_after}"
    )
    print(header_row())
    print(row(f"status (new connection) during the flood, every {PROBE_EVERY:g} s", answered))
    before = [p.seconds for p in figures.probes if p.at < figures.start and p.seconds is not None]
    print(row("  the same before the flood", before))
    cli = [
        seconds
        for at, seconds, code in figures.cli_probes
        if figures.start <= at <= figures.start + figures.hold and code == 0
    ]
    print(row("mcp-tray status --json (CLI, incl. start) during", cli))
    over = sum(s > TARGET_PROBE_SECONDS for s in answered)
    print(
        f"     status probes during the flood: {len(during)}, over {TARGET_PROBE_SECONDS:g} s {over}, "
        f"unanswered {len(failed)}"
        + (
            " ("
            + ", ".join(f"{n} x {e}" for e, n in Counter(p.error for p in failed).most_common(3))
            + ")"
            if failed
            else ""
        )
        + f"; CLI status runs {len(figures.cli_probes)}, failed {sum(code != 0 for _, _, code in figures.cli_probes)}"
    )
    if figures.kill_at is None:
        print("     kill -9 of echo: not done")
    else:
        ready = (
            f"ready again (generation {figures.generation_before} -> higher, pid {figures.new_pid}) "
            f"{figures.ready_after * 1e3:.0f} ms after the kill"
            if figures.ready_after is not None
            else f"NOT ready again within {READY_SECONDS:g} s"
        )
        print(
            f"     kill -9 of echo pid(s) {figures.killed} at {figures.kill_at - figures.start:.1f} s into the "
            f"flood: {ready}; states seen: {' -> '.join(figures.states_seen)}"
        )
    return answered, len(failed)


def report_requests(figures: RequestFigures) -> tuple[int, int]:
    sent = figures.sent
    print(
        f"  3. fuzzed requests: {len(sent)} sent ({sum(s.kind != 'control' for s in sent)} gateway, "
        f"{sum(s.kind == 'control' for s in sent)} control API) in {figures.seconds:.1f} s = "
        f"{len(sent) / figures.seconds if figures.seconds else 0:.0f}/s; generated "
        f"{figures.generated} in {figures.generation_seconds:.1f} s (worker process)"
    )
    for kind in dict.fromkeys(s.kind for s in sent):
        statuses = Counter(s.status for s in sent if s.kind == kind and s.status is not None)
        print(
            f"     {kind:<26} {sum(s.kind == kind for s in sent):>5}, HTTP status x count: "
            + ", ".join(f"{code} x{n}" for code, n in sorted(statuses.items()))
        )
    problems = Counter(s.problem for s in sent if s.problem)
    print(
        "     no status / other: "
        + (", ".join(f"{n} x {p}" for p, n in problems.most_common(6)) or "none")
    )
    print(header_row())
    print(row("request (send -> whole answer)", [s.seconds for s in sent if not s.problem]))
    errors = sum(
        1
        for s in sent
        if s.problem and s.problem not in ("held open",) and not s.problem.startswith("refused by")
    )
    fives = sum(s.status == 500 for s in sent)
    print(
        f"     echo pid {figures.pid_before} -> {figures.pid_after} "
        f"({'unchanged' if figures.pid_before == figures.pid_after else 'CHANGED'}), generation "
        f"{figures.generation_before} -> {figures.generation_after}; client sessions open at the end "
        f"{figures.sessions_after}"
    )
    for line in figures.five_hundreds + figures.errors:
        print(f"     !! {line[:600]}")
    return fives, errors


def report_metrics(figures: MetricsFigures) -> bool:
    statuses = ", ".join(f"{k} x{n}" for k, n in figures.statuses.most_common())
    rate = figures.requests / figures.seconds if figures.seconds else 0
    print(
        f"  4. /metrics: {figures.requests} requests with invented methods in "
        f"{figures.seconds:.1f} s ({rate:.0f}/s): {statuses}"
    )
    sizes = [size for _, size in figures.scrapes]
    print(
        f"     /metrics before them {figures.before_bytes} bytes; after: "
        f"{max(sizes) if sizes else 0} bytes, {figures.lines} lines; method labels "
        f"{len(figures.method_labels)} ({', '.join(sorted(figures.method_labels))}); "
        f"session labels {figures.session_labels}; 'invented' named {figures.invented_named} time(s)"
    )
    print(header_row())
    print(
        row(
            f"scrape of /metrics, {len(figures.scrapes)} back to back",
            [s for s, _ in figures.scrapes],
        )
    )
    print(row("echo tool call, no scrapes", figures.baseline_calls))
    print(row("echo tool call sent with each scrape", figures.calls_during))
    if figures.call_failures:
        print(f"     !! tool calls that failed: {figures.call_failures}")
    allowed = KNOWN_METHODS | {OTHER_METHOD}
    return figures.invented_named == 0 and figures.method_labels <= allowed


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help=f"hypothesis seed (default {DEFAULT_SEED})"
    )
    parser.add_argument(
        "--configs",
        type=int,
        default=DEFAULT_CONFIGS,
        help=f"generated config documents (default {DEFAULT_CONFIGS})",
    )
    parser.add_argument(
        "--cli",
        type=int,
        default=DEFAULT_CLI,
        help=f"of the configs, how many go through the real CLI (default {DEFAULT_CLI})",
    )
    parser.add_argument(
        "--cli-jobs",
        type=int,
        default=DEFAULT_CLI_JOBS,
        help=f"CLI runs at once (default {DEFAULT_CLI_JOBS})",
    )
    parser.add_argument(
        "--edits",
        type=int,
        default=DEFAULT_EDITS,
        help=f"generated hot-reload edits, 4 special ones besides (default {DEFAULT_EDITS})",
    )
    parser.add_argument(
        "--flood",
        type=int,
        default=DEFAULT_FLOOD,
        help=f"connections without the token kept open at once (default {DEFAULT_FLOOD})",
    )
    parser.add_argument(
        "--hold",
        type=float,
        default=DEFAULT_HOLD,
        help=f"seconds the flood is kept up (default {DEFAULT_HOLD:g})",
    )
    parser.add_argument(
        "--reopen-rate",
        type=int,
        default=DEFAULT_REOPEN_RATE,
        help=f"most flood connections reopened a second (default {DEFAULT_REOPEN_RATE})",
    )
    parser.add_argument(
        "--requests",
        type=int,
        default=DEFAULT_REQUESTS,
        help=f"fuzzed requests (default {DEFAULT_REQUESTS})",
    )
    parser.add_argument(
        "--control-share",
        type=float,
        default=DEFAULT_CONTROL_SHARE,
        help=f"share of them on the control API (default {DEFAULT_CONTROL_SHARE:g})",
    )
    parser.add_argument(
        "--methods",
        type=int,
        default=DEFAULT_METHODS,
        help=f"requests with invented method names (default {DEFAULT_METHODS})",
    )
    parser.add_argument(
        "--scrapes",
        type=int,
        default=DEFAULT_SCRAPES,
        help=f"scrapes of /metrics (default {DEFAULT_SCRAPES})",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=DEFAULT_CONCURRENCY,
        help=f"requests in flight at once in parts 3 and 4 (default {DEFAULT_CONCURRENCY})",
    )
    parser.add_argument(
        "--keep-logs",
        type=Path,
        default=None,
        help="copy the tray's output and the server log here",
    )
    parser.add_argument(
        "--burst",
        type=int,
        default=0,
        help="only this: N idle connections at once, status timed meanwhile (e.g. 1100)",
    )
    parser.add_argument(
        "--burst-file-limit",
        type=int,
        default=DEFAULT_BURST_FILE_LIMIT,
        help=f"the tray's file limit for --burst (default {DEFAULT_BURST_FILE_LIMIT})",
    )
    args = parser.parse_args()
    if args.burst > 0:
        os.environ["PYTHON_KEYRING_BACKEND"] = KEYRING_BACKEND
        with tempfile.TemporaryDirectory(prefix="mcp-tray-bench-") as tmp:
            home = Path(tmp).resolve()
            with (home / "tray.log").open("ab") as log:
                asyncio.run(
                    burst(args.burst, args.burst_file_limit, home, log, LogTail(home / "tray.log"))
                )
        return 0
    if min(args.configs, args.cli, args.edits, args.requests, args.methods, args.scrapes) < 0:
        parser.error("counts must be >= 0")
    if args.cli_jobs < 1 or args.concurrency < 1 or args.flood < 1 or args.reopen_rate < 1:
        parser.error("--cli-jobs, --concurrency, --flood and --reopen-rate must be >= 1")
    if args.hold < 1 or not 0 <= args.control_share <= 1:
        parser.error("--hold must be >= 1 and --control-share from 0 to 1")
    # This process reads the tray's token too (read_token: keyring first, then the file).
    os.environ["PYTHON_KEYRING_BACKEND"] = KEYRING_BACKEND
    # The flood needs a file descriptor per connection.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if args.flood + 512 > nofile:
        args.flood = max(1, nofile - 512)
        print(
            f"(the flood is cut to {args.flood} connections by this process's file limit {nofile})"
        )

    figures = Figures()
    figures.flood.bench_nofile = nofile
    failed: str | None = None
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mcp-tray-bench-") as tmp:
        home = Path(tmp).resolve()
        set_hypothesis_home_dir(str(home / "bench" / "hypothesis"))
        tray_log = home / "tray.log"
        with tray_log.open("ab") as log:
            try:
                asyncio.run(bench(args, home, figures, log, LogTail(tray_log)))
            except BenchAborted as exc:
                failed = str(exc)
            except KeyboardInterrupt:
                failed = "interrupted"
        elapsed = time.perf_counter() - began

        left = tagged_by(figures.tray_pids) + [
            f"tray pid {pid}" for pid in figures.tray_pids if psutil.pid_exists(pid)
        ]
        swept = sweep_leftovers()
        print()
        print(
            "mcp-tray abuse: hostile configs, a connection flood without the token, fuzzed "
            "requests, invented methods; one headless tray, one echo server"
        )
        print(
            f"  python {platform.python_version()}, {os.cpu_count()} CPU(s), {platform.platform()}, "
            f"load avg {' '.join(f'{x:.2f}' for x in os.getloadavg())}; seed {args.seed}; "
            f"run took {elapsed:.1f} s; parts done: {', '.join(figures.done) or 'none'}"
        )
        tracebacks = hangs = fives = errors = unanswered = 0
        answered: list[float] = []
        metrics_ok = False
        if "configs" in figures.done:
            tracebacks, hangs = report_configs(figures.configs)
        if "flood" in figures.done:
            answered, unanswered = report_flood(figures.flood)
        if "requests" in figures.done:
            fives, errors = report_requests(figures.requests)
        if "metrics" in figures.done:
            metrics_ok = report_metrics(figures.metrics)
        tray_trouble = [line for lines in figures.tray_trouble.values() for line in lines]
        print(
            f"  the tray's output: tracebacks {len(tray_trouble)} "
            + "("
            + ", ".join(f"{part} {len(lines)}" for part, lines in figures.tray_trouble.items())
            + f"); exit code after SIGTERM {figures.stop_code}"
        )
        for line in tray_trouble[:10]:
            print(f"     !! {line}")
        print(
            f"  the servers' own logs (the echo child's stderr): tracebacks {len(figures.child_trouble)}"
        )
        for line in figures.child_trouble[:5]:
            print(f"     {line}")
        print(
            f"  left behind after the trays' SIGTERM: {len(left)}; sweep_leftovers() ended "
            f"{len(swept)}; tagged by this run's trays afterwards: {len(tagged_by(figures.tray_pids))}"
        )
        for line in left[:10]:
            print(f"     {line}")
        if args.keep_logs is not None:
            args.keep_logs.mkdir(parents=True, exist_ok=True)
            for path in [tray_log, *sorted((home / "logs").glob("*.log"))]:
                with contextlib.suppress(OSError):
                    shutil.copy2(path, args.keep_logs / path.name)
            print(f"  logs kept in {args.keep_logs}")

    print("targets:")

    def verdict(ok: bool, done: str) -> str:
        return ("PASS" if ok else "MISS") if done in figures.done else "n/a (not run)"

    all_tracebacks = tracebacks + len(tray_trouble)
    print(f"  configs: 0 tracebacks: {all_tracebacks}  {verdict(all_tracebacks == 0, 'configs')}")
    print(f"  configs: 0 hangs: {hangs}  {verdict(hangs == 0, 'configs')}")
    over = sum(s > TARGET_PROBE_SECONDS for s in answered) + unanswered
    print(
        f"  flood: every status within {TARGET_PROBE_SECONDS:g} s: {over} over or unanswered, "
        f"max {max(answered, default=0) * 1e3:.0f} ms  {verdict(over == 0, 'flood')}"
    )
    respawned = figures.flood.ready_after is not None
    print(
        f"  flood: echo respawned after kill -9: {'yes' if respawned else 'no'}  {verdict(respawned, 'flood')}"
    )
    print(f"  requests: 0 HTTP 500: {fives}  {verdict(fives == 0, 'requests')}")
    print(
        f"  requests: 0 connection errors or resets: {errors}  {verdict(errors == 0, 'requests')}"
    )
    kept = figures.requests.pid_before == figures.requests.pid_after
    print(f"  requests: echo pid unchanged: {'yes' if kept else 'no'}  {verdict(kept, 'requests')}")
    print(
        f"  metrics: method labels bounded, no invented name: {'yes' if metrics_ok else 'no'}  {verdict(metrics_ok, 'metrics')}"
    )
    if failed:
        print(f"ABORTED: {failed}")
    command = ".venv/bin/python bench/abuse.py"
    for flag, value, default in (
        ("seed", args.seed, DEFAULT_SEED),
        ("configs", args.configs, DEFAULT_CONFIGS),
        ("cli", args.cli, DEFAULT_CLI),
        ("cli-jobs", args.cli_jobs, DEFAULT_CLI_JOBS),
        ("edits", args.edits, DEFAULT_EDITS),
        ("flood", args.flood, DEFAULT_FLOOD),
        ("hold", args.hold, DEFAULT_HOLD),
        ("reopen-rate", args.reopen_rate, DEFAULT_REOPEN_RATE),
        ("requests", args.requests, DEFAULT_REQUESTS),
        ("control-share", args.control_share, DEFAULT_CONTROL_SHARE),
        ("methods", args.methods, DEFAULT_METHODS),
        ("scrapes", args.scrapes, DEFAULT_SCRAPES),
        ("concurrency", args.concurrency, DEFAULT_CONCURRENCY),
    ):
        if value != default:
            command += f" --{flag} {value:g}" if isinstance(value, float) else f" --{flag} {value}"
    print(f"reproduce: {command}")
    if not failed and set(figures.done) >= {"configs", "flood", "requests", "metrics"}:
        sizes = [size for _, size in figures.metrics.scrapes]
        shown: dict[str, float | int] = {
            "configs": len(figures.configs.cases),
            "edits": len(figures.configs.edits),
            "connections": len(figures.flood.conns),
            "status_p95_ms": 1e3 * percentile(answered, 0.95) if answered else math.nan,
            "status_max_ms": 1e3 * max(answered, default=math.nan),
            "requests": len(figures.requests.sent),
            "tracebacks": all_tracebacks,
            "hangs": hangs,
            "http_500": fives,
            "metrics_kb": max(sizes, default=0) / 1000,
            "methods": figures.metrics.requests,
        }
        record("abuse", command, shown, ROWS)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
