"""The UI bench's run: idle, then with many worker rows, sampled for CPU and memory."""

import sys

# Type-checked under every OS by `make lint`; it only runs where it measures,
# and what follows is skipped by mypy where it does not.
assert sys.platform != "win32", "bench/ measures POSIX machines (signals, process groups)"

import contextlib
import os
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import psutil

from bench.harness.errors import BenchError
from bench.suites.ui.constants import (
    MB,
    RENEW_PER_SECOND,
    RENEWED_ROWS,
    REPLY_SECONDS,
    RSS_EVERY_SECONDS,
    USS_EVERY_SECONDS,
    WORKER_ROWS,
    WORKER_TTL_SECONDS,
)
from bench.suites.ui.tray import Tray, Window
from core.base.clock import utc_now
from core.registry.identity import worker_identity
from core.registry.store import WorkerRegistry


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
