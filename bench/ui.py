"""The GUI's own cost: CPU % of one core and peak RSS of the tray process.

The parent runs the real tray GUI in a subprocess (``--child``) under
``QT_QPA_PLATFORM=offscreen``, built exactly as app/main.py builds it
(TrayService on core's own thread and loop, CoreLink, MainWindow shown,
TrayActions and TrayController; offscreen has no system tray, so the icon is shown only when
one is available) from a private MCP_TRAY_HOME with 10 demo servers
(clock_server.py x4, notes_server.py x3, fragile_server.py x3). It measures
that one process from outside with psutil: CPU = (user + system) delta of
``cpu_times()`` over the wall time, x100 (% of one core); RSS sampled every
0.5 s (peak), USS every 5 s (peak). The demo servers are separate processes:
their summed RSS is reported for information only.

Phases, each after a 5 s settle, each ``--seconds`` long (start-up is
excluded: all 10 servers are READY per ``mcp-tray status --json`` first):

1. idle: 10 servers, window open on its first tab (Servers: state glyphs,
   sparklines, CPU/RSS sampled every 5 s, the details pane of the first
   server); then the same with the window hidden (the tray alone: no
   sampling, no tick), and the window shown again for what follows;
2. 1,000 synthetic worker rows in the tray's registry file (registered by
   this process, ages spread from fresh to 10 min, TTL 60 s; every 10th
   carries this process's pid), 100 of the first 500 renewed each second
   so ages keep changing and the tray's 1 Hz registry read sees changes;
   measured twice: (a) window still on the Servers tab, (b) the Workers
   tab current, so the 1,000 rows are on screen (the target applies to b,
   the worse case).

After each window the bench sends SIGUSR2 and times the child's answer (its
window's model row counts): that proves the rows reached the Workers model
and shows whether the GUI's event loop still responds. SIGUSR1 makes the
Workers tab current; SIGHUP hides the window, or shows it when hidden. The tray is stopped with SIGTERM (SIGKILL only after
30 s), and every demo server seen running is checked to be gone.

Targets (issue): < 0.5 % idle, < 150 MB peak RSS, < 5 % with 1,000 rows.
Figures are reported, not asserted: the exit code is 0 unless the bench
itself breaks (a tray that must be killed is reported on the ``stop:`` line). Run: .venv/bin/python bench/ui.py --seconds 60
"""

import argparse
import contextlib
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import IO, Any

# Run as a script from a checkout: make `core` and `app` importable without installing.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil
from results import Row, record

from core.base.clock import utc_now
from core.registry.identity import worker_identity
from core.registry.store import WorkerRegistry
from core.settings.paths import Paths, default_paths

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "resources" / "demo"
#: (script, how many servers run it).
DEMO_SERVERS = (("clock_server.py", 4), ("notes_server.py", 3), ("fragile_server.py", 3))
WORKER_ROWS = 1000
#: Rows 0..RENEWED_ROWS-1 are renewed round-robin, RENEW_PER_SECOND a second.
RENEWED_ROWS = 500
RENEW_PER_SECOND = 100
WORKER_TTL_SECONDS = 60.0
SETTLE_SECONDS = 5.0
RSS_EVERY_SECONDS = 0.5
USS_EVERY_SECONDS = 5.0
READY_SECONDS = 120.0
STOP_SECONDS = 30.0
REPLY_SECONDS = 15.0
TARGET_IDLE_CPU_PERCENT = 0.5
TARGET_RSS_MB = 150.0
TARGET_ROWS_CPU_PERCENT = 5.0
#: What this bench adds to docs/measured.md's table (bench/results.py).
ROWS = (
    Row(
        "idle CPU, 10 servers, window open",
        "< 0.5 %",
        "{idle_cpu_percent:.2f} % ({hidden_cpu_percent:.2f} % with the window hidden: "
        "nothing sampled)",
    ),
    Row("tray RSS", "< 150 MB", "{peak_rss_mb:.0f} MB peak"),
    Row("1,000 worker rows ticking at 1 Hz", "< 5 %", "{rows_cpu_percent:.1f} %"),
)
MB = 1_000_000

# Type-checked under every OS by `make lint`; it only runs where it measures.
assert sys.platform != "win32", "bench/ measures POSIX machines (signals, process groups)"


class BenchError(Exception):
    pass


# ====================================================================== child


def child_main(args: argparse.Namespace) -> int:
    """The tray GUI as app/main.py composes it (core on its own thread, the Gui
    and Qt's loop on the main one), plus three bench signals.

    SIGUSR1 makes the Workers tab current; SIGUSR2 prints one ``MODEL`` line
    (the window's model row counts); SIGHUP hides or shows the window.
    SIGTERM/SIGINT quit as the app does. The Gui's own signal wake-up (a
    socket Qt watches) makes Qt run these Python handlers at once.
    """
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication, QSystemTrayIcon

    from app.main import Gui, launch, start_core
    from core.settings.config import load_config

    paths = default_paths().ensure()
    config = load_config(Path(args.config))
    app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)
    app.setApplicationName("mcp-tray")
    app.setQuitOnLastWindowClosed(False)
    core = start_core(config, paths)
    if isinstance(core, int):
        return core
    shown: list[Gui] = []
    asked = 0

    def model_line() -> None:
        nonlocal asked
        asked += 1
        window = shown[0].window
        print(
            f"MODEL#{asked} workers={window.workers.model.rowCount()} "
            f"servers={window.servers.model.rowCount()} tab={window.tabs.currentIndex()} "
            f"visible={int(window.isVisible())} samples={window.sampler.samples}",
            flush=True,
        )

    def bench_signals(gui: Gui) -> None:
        shown.append(gui)
        window = gui.window
        signal.signal(signal.SIGUSR1, lambda *_: window.tabs.setCurrentWidget(window.workers))
        signal.signal(
            signal.SIGHUP, lambda *_: window.hide() if window.isVisible() else window.bring_up()
        )
        signal.signal(signal.SIGUSR2, lambda *_: model_line())
        print(
            f"READY pid={os.getpid()} tray={QSystemTrayIcon.isSystemTrayAvailable()} "
            f"url={core.service.url}",
            flush=True,
        )

    try:
        # The window opens as for a person's launch (not --minimized).
        return launch(app, core, minimized=False, started=bench_signals)
    finally:
        if shown:
            model_line()
        core.stop()
        print("STOPPED", flush=True)


# ===================================================================== parent


@dataclass(frozen=True)
class Reply:
    """The child's answer to SIGUSR2: its window's model row counts."""

    counts: dict[str, int]
    latency: float


@dataclass
class Window:
    """One measured span of the tray process."""

    name: str
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    peak_rss: int = 0
    peak_uss: int = 0
    peak_children_rss: int = 0
    children: int = 0
    #: The child's answer right after the span (None: no answer in time).
    reply: Reply | None = None
    #: Its answer right before the span, when asked for (sample counts).
    before: Reply | None = None

    @property
    def cpu_percent(self) -> float:
        return 100.0 * self.cpu_seconds / self.seconds if self.seconds else 0.0


@dataclass(frozen=True)
class Stopped:
    code: int | None
    seconds: float
    forced: bool
    leftovers: list[int]


class Tray:
    """The GUI child from a private home; always stopped by ``stop``."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.config = home / "bench-config.json"
        self.log = home / "tray-output.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.proc: psutil.Process | None = None
        self._log_file: IO[bytes] | None = None
        self.server_pids: set[int] = set()

    @property
    def env(self) -> dict[str, str]:
        # Nothing of a real tray leaks in (MCP_TRAY_*), and the token lives in
        # the private home's file, never in the user's OS keyring.
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_TRAY_")}
        env["MCP_TRAY_HOME"] = str(self.home)
        env["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"
        env["PYTHONPATH"] = str(ROOT)
        env["QT_QPA_PLATFORM"] = "offscreen"
        return env

    @property
    def paths(self) -> Paths:
        return default_paths({"MCP_TRAY_HOME": str(self.home)})

    def write_config(self) -> list[str]:
        servers: dict[str, dict[str, Any]] = {}
        for script, count in DEMO_SERVERS:
            stem = script.removesuffix("_server.py")
            for i in range(1, count + 1):
                name = f"demo-{stem}-{i}"
                entry: dict[str, Any] = {"command": sys.executable, "args": [str(DEMO / script)]}
                if stem == "notes":
                    entry["env"] = {"DEMO_NOTES_FILE": str(self.home / f"{name}.txt")}
                servers[name] = entry
        self.config.write_text(json.dumps({"mcpServers": servers}, indent=2))
        return list(servers)

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

    def status(self) -> dict[str, Any] | None:
        result = self.cli("status", "--json")
        if result.returncode != 0:
            return None
        body: dict[str, Any] = json.loads(result.stdout)
        return body

    def start(self) -> None:
        self._log_file = self.log.open("wb")
        self.process = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--child",
                "--config",
                str(self.config),
            ],
            env=self.env,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            # Its own process group: a last-resort kill reaches only what it started.
            start_new_session=True,
        )
        self.proc = psutil.Process(self.process.pid)

    def alive(self) -> None:
        assert self.process is not None
        if self.process.poll() is not None:
            raise BenchError(f"the tray exited with {self.process.returncode}:\n{self.output()}")

    def wait_ready(self, names: list[str]) -> None:
        deadline = time.monotonic() + READY_SECONDS
        last = "no status yet"
        while time.monotonic() < deadline:
            self.alive()
            if "READY" in self.output(200):
                body = self.status()
                if body is not None:
                    states = {s.get("name"): s.get("state") for s in body.get("servers", [])}
                    last = f"servers {states}"
                    if all(states.get(name) == "ready" for name in names):
                        self.server_pids = {int(s["pid"]) for s in body["servers"] if s.get("pid")}
                        return
            time.sleep(0.5)
        raise BenchError(f"servers not ready within {READY_SECONDS:g} s ({last}):\n{self.output()}")

    def wait_workers(self, count: int) -> None:
        """Until the tray's registry copy holds ``count`` rows (``status --json``)."""
        deadline = time.monotonic() + READY_SECONDS
        seen = -1
        while time.monotonic() < deadline:
            self.alive()
            body = self.status()
            if body is not None:
                seen = len(body.get("workers", []))
                if seen == count:
                    return
            time.sleep(0.5)
        raise BenchError(f"the tray shows {seen} worker rows, not {count}:\n{self.output()}")

    def _model_lines(self) -> list[str]:
        return [line for line in self.output(None).splitlines() if line.startswith("MODEL#")]

    def model(self, timeout: float = REPLY_SECONDS) -> Reply | None:
        """Ask the child (SIGUSR2) for its window's model row counts; None if no answer.

        The time to the answer is how long the GUI's event loop took to get
        to it: a measure of whether the window still responds.
        """
        assert self.process is not None
        before = len(self._model_lines())
        asked = time.monotonic()
        self.process.send_signal(signal.SIGUSR2)
        while time.monotonic() - asked < timeout:
            self.alive()
            lines = self._model_lines()
            if len(lines) > before:
                latency = time.monotonic() - asked
                counts = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", lines[before])}
                return Reply(counts, latency)
            time.sleep(0.02)
        return None

    def show_workers_tab(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGUSR1)

    def toggle_window(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGHUP)

    def output(self, lines: int | None = 30) -> str:
        with contextlib.suppress(OSError):
            text = self.log.read_text(errors="replace").splitlines()
            return "\n".join(text if lines is None else text[-lines:])
        return "(no tray output)"

    def descendants(self) -> list[psutil.Process]:
        if self.proc is None:
            return []
        with contextlib.suppress(psutil.Error):
            return self.proc.children(recursive=True)
        return []

    def stop(self) -> Stopped:
        """SIGTERM and wait (the app stops its servers); SIGKILL only as a last resort.

        Every demo server seen running is checked afterwards; survivors are
        killed and listed.
        """
        process = self.process
        if process is None:
            return Stopped(None, 0.0, False, [])
        known = self.server_pids | {p.pid for p in self.descendants()}
        forced = False
        asked = time.monotonic()
        try:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(STOP_SECONDS)
                except subprocess.TimeoutExpired:
                    forced = True
                    print(
                        f"bench: the tray did not stop within {STOP_SECONDS:g} s of SIGTERM; "
                        "killing it",
                        file=sys.stderr,
                    )
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(process.pid, signal.SIGKILL)
                    process.wait(5)
            seconds = time.monotonic() - asked
            leftovers = []
            for pid in sorted(known):
                with contextlib.suppress(psutil.Error):
                    proc = psutil.Process(pid)
                    if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                        leftovers.append(pid)
                        proc.kill()
            return Stopped(process.returncode, seconds, forced, leftovers)
        finally:
            if self._log_file is not None:
                self._log_file.close()


def measure(tray: Tray, name: str, seconds: float, reply_timeout: float = REPLY_SECONDS) -> Window:
    """CPU (user + system) of the tray process over ``seconds``, peak RSS and USS.

    Then, outside the measured span, how long the window takes to answer.
    """
    assert tray.proc is not None
    proc = tray.proc
    window = Window(name)
    next_uss = 0.0
    start_times = proc.cpu_times()
    started = time.monotonic()
    end = started + seconds
    while True:
        tray.alive()
        now = time.monotonic()
        window.peak_rss = max(window.peak_rss, proc.memory_info().rss)
        if now >= next_uss:
            next_uss = now + USS_EVERY_SECONDS
            with contextlib.suppress(psutil.Error):
                window.peak_uss = max(window.peak_uss, proc.memory_full_info().uss)
            kids = tray.descendants()
            total = 0
            for kid in kids:
                with contextlib.suppress(psutil.Error):
                    total += kid.memory_info().rss
            window.children = len(kids)
            window.peak_children_rss = max(window.peak_children_rss, total)
        if now >= end:
            break
        time.sleep(min(RSS_EVERY_SECONDS, end - now))
    end_times = proc.cpu_times()
    window.seconds = time.monotonic() - started
    window.cpu_seconds = (end_times.user + end_times.system) - (
        start_times.user + start_times.system
    )
    window.reply = tray.model(reply_timeout)
    print(
        f"bench: {name}: CPU {window.cpu_percent:.2f} % of a core, "
        f"peak RSS {window.peak_rss / MB:.1f} MB, window answered "
        + (f"in {window.reply.latency:.2f} s" if window.reply else "NOT within the timeout"),
        file=sys.stderr,
    )
    return window


# ------------------------------------------------------------ worker rows


@dataclass(frozen=True)
class Synthetic:
    identity: str
    epoch: int


def register_workers(path: Path, servers: list[str]) -> list[Synthetic]:
    """WORKER_ROWS rows: the renewed ones fresh, the rest aged 0..10 min."""
    clients = ("claude-code", "cursor", "claude-desktop", "codex", "bench-agent")
    now = utc_now()
    rows = []
    with WorkerRegistry(path) as registry:
        for i in range(WORKER_ROWS):
            stale = max(0, i - RENEWED_ROWS)
            stamp = now - timedelta(seconds=stale * 600.0 / (WORKER_ROWS - RENEWED_ROWS))
            client = clients[i % len(clients)]
            session = f"bench-ui-session-{i:04d}"
            identity = worker_identity(client, session, stamp)
            registration = registry.register(
                worker_identity=identity,
                client_name=client,
                session_id=session,
                role="bridge",
                server=servers[i % len(servers)],
                pid=os.getpid() if i % 10 == 0 else None,
                heartbeat_ttl_seconds=WORKER_TTL_SECONDS,
                now=stamp,
            )
            rows.append(Synthetic(identity, registration.fencing_epoch))
    return rows


class Renewer(threading.Thread):
    """Renews RENEW_PER_SECOND of the first RENEWED_ROWS rows each second."""

    def __init__(self, path: Path, rows: list[Synthetic]) -> None:
        super().__init__(name="bench-ui-renewer", daemon=True)
        self.path = path
        self.rows = rows[:RENEWED_ROWS]
        self.halt = threading.Event()
        self.renewed = 0
        self.refused = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with WorkerRegistry(self.path) as registry:
                cursor = 0
                tick = time.monotonic()
                while not self.halt.is_set():
                    for _ in range(RENEW_PER_SECOND):
                        row = self.rows[cursor % len(self.rows)]
                        cursor += 1
                        if registry.heartbeat(row.identity, row.epoch).renewed:
                            self.renewed += 1
                        else:
                            self.refused += 1
                    tick += 1.0
                    self.halt.wait(max(0.0, tick - time.monotonic()))
        except BaseException as exc:
            self.error = exc

    def stop(self) -> None:
        self.halt.set()
        self.join(10)
        if self.error is not None:
            raise BenchError(f"renewing worker rows failed: {self.error!r}")


# ----------------------------------------------------------------- report


def verdict(value: float, target: float) -> str:
    return "PASS" if value < target else "MISS"


def machine() -> list[str]:
    import PySide6
    from PySide6.QtCore import qVersion

    freq = psutil.cpu_freq()
    return [
        f"machine: {platform.system()} {platform.release()} {platform.machine()}, "
        f"{psutil.cpu_count()} logical / {psutil.cpu_count(logical=False)} physical CPUs"
        + (f" @ {freq.max or freq.current:.0f} MHz" if freq else "")
        + f", {psutil.virtual_memory().total / 2**30:.1f} GiB RAM",
        f"python {platform.python_version()} ({sys.executable}), "
        f"PySide6 {PySide6.__version__}, Qt {qVersion()}, QT_QPA_PLATFORM=offscreen",
    ]


def _samples(window: Window) -> str:
    """How many CPU/RSS samples the window took during the span (0 when hidden)."""
    if window.reply is None or window.before is None:
        return "samples unknown"
    taken = window.reply.counts.get("samples", 0) - window.before.counts.get("samples", 0)
    return f"{taken} CPU/RSS sample{'' if taken == 1 else 's'} taken meanwhile"


def _answer(window: Window) -> str:
    if window.reply is None:
        return f"none in {REPLY_SECONDS:g} s"
    return f"{window.reply.latency:.2f} s"


def report(windows: list[Window], startup: float, renewer: Renewer, seconds: float) -> None:
    idle, hidden, rows_servers, rows_workers = windows
    peak_rss = max(w.peak_rss for w in windows)
    peak_uss = max(w.peak_uss for w in windows)
    print()
    for line in machine():
        print(line)
    print(
        f"tray: 10 demo servers ({', '.join(f'{s} x{n}' for s, n in DEMO_SERVERS)}); "
        f"start-up to all READY {startup:.1f} s (excluded); settle {SETTLE_SECONDS:g} s "
        f"before each {seconds:g} s window"
    )
    print()
    print(
        f"{'window':<36} {'CPU % core':>10} {'peak RSS':>10} {'peak USS':>10} "
        f"{'window answers in':>18}  Workers model rows"
    )
    for w in windows:
        rows = "?" if w.reply is None else str(w.reply.counts.get("workers"))
        print(
            f"{w.name:<36} {w.cpu_percent:>9.2f}% {w.peak_rss / MB:>8.1f}MB "
            f"{w.peak_uss / MB:>8.1f}MB {_answer(w):>18}  {rows}"
        )
    print()
    print("targets:")
    print(
        f"  idle CPU        {idle.cpu_percent:7.2f} %   target < {TARGET_IDLE_CPU_PERCENT:g} %    "
        f"{verdict(idle.cpu_percent, TARGET_IDLE_CPU_PERCENT)}   (window hidden: "
        f"{hidden.cpu_percent:.2f} %, {_samples(hidden)})"
    )
    print(
        f"  peak RSS        {peak_rss / MB:7.1f} MB  target < {TARGET_RSS_MB:g} MB  "
        f"{verdict(peak_rss / MB, TARGET_RSS_MB)}   (idle window alone {idle.peak_rss / MB:.1f} MB; "
        f"peak USS {peak_uss / MB:.1f} MB)"
    )
    print(
        f"  1,000 rows CPU  {rows_workers.cpu_percent:7.2f} %   target < {TARGET_ROWS_CPU_PERCENT:g} %      "
        f"{verdict(rows_workers.cpu_percent, TARGET_ROWS_CPU_PERCENT)}   (Workers tab current; "
        f"Servers tab current: {rows_servers.cpu_percent:.2f} %, "
        f"{verdict(rows_servers.cpu_percent, TARGET_ROWS_CPU_PERCENT)})"
    )
    print()
    print(
        f"for information: the {idle.children} demo-server processes' summed RSS peaked at "
        f"{max(w.peak_children_rss for w in windows) / MB:.1f} MB (not counted above); "
        f"the bench renewed {renewer.renewed} worker heartbeats ({renewer.refused} refused)"
    )
    figures = {
        "idle_cpu_percent": idle.cpu_percent,
        "hidden_cpu_percent": hidden.cpu_percent,
        "peak_rss_mb": peak_rss / MB,
        "rows_cpu_percent": rows_workers.cpu_percent,
    }
    record("ui", f".venv/bin/python bench/ui.py --seconds {seconds:g}", figures, ROWS)


def run(seconds: float, home: Path | None) -> None:
    with contextlib.ExitStack() as stack:
        if home is None:
            home = Path(
                stack.enter_context(tempfile.TemporaryDirectory(prefix="mcp-tray-bench-ui-"))
            )
        home.mkdir(parents=True, exist_ok=True)
        tray = Tray(home)
        tray.paths.ensure()
        names = tray.write_config()
        renewer: Renewer | None = None
        stopped: Stopped | None = None
        try:
            began = time.monotonic()
            tray.start()
            tray.wait_ready(names)
            startup = time.monotonic() - began
            print(f"bench: {len(names)} servers READY after {startup:.1f} s", file=sys.stderr)

            time.sleep(SETTLE_SECONDS)
            print(f"bench: idle, {seconds:g} s...", file=sys.stderr)
            idle = measure(tray, "1 idle, Servers tab", seconds)

            tray.toggle_window()
            time.sleep(SETTLE_SECONDS)
            before = tray.model()
            print(f"bench: idle, window hidden, {seconds:g} s...", file=sys.stderr)
            hidden = measure(tray, "1h idle, window hidden", seconds)
            hidden.before = before
            if hidden.reply is not None and hidden.reply.counts.get("visible") != 0:
                raise BenchError("the window did not hide on SIGHUP")
            tray.toggle_window()

            rows = register_workers(tray.paths.registry_file, names)
            renewer = Renewer(tray.paths.registry_file, rows)
            renewer.start()
            tray.wait_workers(WORKER_ROWS)
            time.sleep(SETTLE_SECONDS)
            print(f"bench: 1,000 rows, Servers tab, {seconds:g} s...", file=sys.stderr)
            rows_servers = measure(tray, "2a 1,000 worker rows, Servers tab", seconds)
            got = rows_servers.reply.counts.get("workers") if rows_servers.reply else None
            if got != WORKER_ROWS:
                raise BenchError(f"the window's Workers model holds {got} rows, not {WORKER_ROWS}")

            tray.show_workers_tab()
            time.sleep(SETTLE_SECONDS)
            print(f"bench: 1,000 rows, Workers tab, {seconds:g} s...", file=sys.stderr)
            rows_workers = measure(tray, "2b 1,000 worker rows, Workers tab", seconds)
            renewer.stop()
            report([idle, hidden, rows_servers, rows_workers], startup, renewer, seconds)
        finally:
            if renewer is not None and renewer.is_alive():
                renewer.halt.set()
                renewer.join(10)
            stopped = tray.stop()
            how = (
                f"did NOT stop within {STOP_SECONDS:g} s of SIGTERM: killed"
                if stopped.forced
                else f"stopped on SIGTERM in {stopped.seconds:.1f} s, exit code {stopped.code}"
            )
            left = (
                f"{len(stopped.leftovers)} demo server(s) outlived it and were killed by the bench"
                if stopped.leftovers
                else "no demo server left running"
            )
            print(f"stop: the tray {how}; {left}")
        print(f"reproduce: .venv/bin/python bench/ui.py --seconds {seconds:g}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=60.0, help="length of each window")
    parser.add_argument(
        "--home", type=Path, help="MCP_TRAY_HOME to use and keep (default: a temporary one)"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child_main(args)
    try:
        run(args.seconds, args.home)
    except BenchError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
