"""``/metrics`` in the Prometheus text format.

Gauges and counters are read from the live snapshot at scrape time (a
collector, so nothing is double-booked); call latency is a histogram fed by
the call path's ``on_call_done`` hook.
"""

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from core.base.snapshot import TraySnapshot
from core.base.states import ServerState


class _SnapshotCollector(Collector):
    def __init__(
        self,
        snapshot: Callable[[], TraySnapshot],
        stats: Callable[[], dict[str, tuple[int, int, int]]],
        sessions: Callable[[], list[dict[str, Any]]],
        workers: Callable[[], list[dict[str, Any]]],
    ) -> None:
        self._snapshot = snapshot
        self._stats = stats
        self._sessions = sessions
        self._workers = workers

    def collect(self) -> Iterator[Any]:
        snap = self._snapshot()
        state = GaugeMetricFamily(
            "mcp_tray_server_state", "1 for the state each server is in", labels=["server", "state"]
        )
        generation = GaugeMetricFamily(
            "mcp_tray_server_generation", "spawn counter of each server", labels=["server"]
        )
        restarts = CounterMetricFamily(
            "mcp_tray_server_restarts", "respawns of each server", labels=["server"]
        )
        breaker = GaugeMetricFamily(
            "mcp_tray_server_breaker_open",
            "1 when the server breaker is not closed",
            labels=["server"],
        )
        calls = CounterMetricFamily(
            "mcp_tray_calls", "requests forwarded to each server", labels=["server"]
        )
        failures = CounterMetricFamily(
            "mcp_tray_call_failures", "forwarded requests that failed", labels=["server"]
        )
        respawns_asked = CounterMetricFamily(
            "mcp_tray_respawns_requested",
            "respawns that calls finding the child dead asked for (at most one per call)",
            labels=["server"],
        )
        stats = self._stats()
        for server in snap.servers:
            for candidate in ServerState:
                state.add_metric(
                    [server.name, candidate.value], 1.0 if candidate is server.state else 0.0
                )
            generation.add_metric([server.name], server.generation)
            restarts.add_metric([server.name], server.restarts)
            breaker.add_metric([server.name], 0.0 if server.breaker.value == "closed" else 1.0)
            made, failed, asked = stats.get(server.name, (0, 0, 0))
            calls.add_metric([server.name], made)
            failures.add_metric([server.name], failed)
            respawns_asked.add_metric([server.name], asked)
        yield from (state, generation, restarts, breaker, calls, failures, respawns_asked)

        tripped = GaugeMetricFamily(
            "mcp_tray_session_tripped",
            "1 when a client session's breaker is tripped",
            labels=["session", "server", "client"],
        )
        for session in self._sessions():
            tripped.add_metric(
                [session["id"], session["server"], session["client_name"]],
                1.0 if session["breaker"] == "tripped" else 0.0,
            )
        yield tripped

        workers = GaugeMetricFamily(
            "mcp_tray_workers", "registry workers by liveness", labels=["status"]
        )
        counts = {"live": 0, "stale": 0, "fenced": 0}
        for row in self._workers():
            status = str(row.get("status", "live" if row.get("live") else "stale"))
            counts[status] = counts.get(status, 0) + 1
        for status, count in counts.items():
            workers.add_metric([status], count)
        yield workers


class Metrics:
    def __init__(
        self,
        snapshot: Callable[[], TraySnapshot],
        stats: Callable[[], dict[str, tuple[int, int, int]]],
        sessions: Callable[[], list[dict[str, Any]]],
        workers: Callable[[], list[dict[str, Any]]],
    ) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(_SnapshotCollector(snapshot, stats, sessions, workers))
        self.latency = Histogram(
            "mcp_tray_call_seconds",
            "latency of requests forwarded to servers (call path included)",
            ["server", "method"],
            registry=self.registry,
            buckets=(
                0.001,
                0.0025,
                0.005,
                0.01,
                0.025,
                0.05,
                0.1,
                0.25,
                0.5,
                1,
                2.5,
                5,
                10,
                30,
                60,
            ),
        )

    def observe(self, server: str, method: str, seconds: float, ok: bool) -> None:
        self.latency.labels(server=server, method=method).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
