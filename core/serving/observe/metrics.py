"""``/metrics`` in the Prometheus text format.

Gauges and counters are read from the live snapshot at scrape time (a
collector, so nothing is double-booked); call latency is a histogram fed by
the call path's ``on_call_done`` hook.
"""

from collections.abc import Callable, Iterator
from typing import Any, Final

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from core.base.snapshot import ServerSnapshot, TraySnapshot
from core.base.states import BreakerState, ServerState

ServerStats = tuple[int, int, int]
#: Request methods a client may send (both eras): the only values the
#: ``method`` label takes. Anything else counts as ``other``, or one client
#: inventing method names would grow /metrics without bound.
KNOWN_METHODS: Final = frozenset(
    {
        "initialize",
        "ping",
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "resources/subscribe",
        "resources/unsubscribe",
        "prompts/list",
        "prompts/get",
        "completion/complete",
        "logging/setLevel",
        "server/discover",
        "subscriptions/listen",
        "tasks/get",
        "tasks/list",
        "tasks/result",
        "tasks/cancel",
    }
)
OTHER_METHOD: Final = "other"
#: Per-session children are named ``<server>@<session>``; the label keeps the server.
PRIVATE_SEPARATOR: Final = "@"
#: One family per server figure: name, type, help, and how to read it.
_PER_SERVER: Final[
    tuple[
        tuple[
            str,
            type[GaugeMetricFamily] | type[CounterMetricFamily],
            str,
            Callable[[ServerSnapshot, ServerStats], float],
        ],
        ...,
    ]
] = (
    (
        "mcp_tray_server_generation",
        GaugeMetricFamily,
        "spawn counter of each server",
        lambda server, _: server.generation,
    ),
    (
        "mcp_tray_server_restarts",
        CounterMetricFamily,
        "respawns of each server",
        lambda server, _: server.restarts,
    ),
    (
        "mcp_tray_server_breaker_open",
        GaugeMetricFamily,
        "1 when the server breaker is not closed",
        lambda server, _: 0.0 if server.breaker is BreakerState.CLOSED else 1.0,
    ),
    (
        "mcp_tray_calls",
        CounterMetricFamily,
        "requests forwarded to each server",
        lambda _, stats: stats[0],
    ),
    (
        "mcp_tray_call_failures",
        CounterMetricFamily,
        "forwarded requests that failed",
        lambda _, stats: stats[1],
    ),
    (
        "mcp_tray_respawns_requested",
        CounterMetricFamily,
        "respawns that calls finding the child dead asked for (at most one per call)",
        lambda _, stats: stats[2],
    ),
)


class SnapshotCollector(Collector):
    """Gauges and counters read from the live snapshot at scrape time."""

    def __init__(
        self,
        snapshot: Callable[[], TraySnapshot],
        stats: Callable[[], dict[str, ServerStats]],
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
        for server in snap.servers:
            for candidate in ServerState:
                state.add_metric(
                    [server.name, candidate.value], 1.0 if candidate is server.state else 0.0
                )
        yield state
        protocol = GaugeMetricFamily(
            "mcp_tray_server_protocol",
            "1 for the protocol revision each server speaks",
            labels=["server", "version"],
        )
        for server in snap.servers:
            if server.protocol is not None:
                protocol.add_metric([server.name, server.protocol], 1.0)
        yield protocol
        stats = self._stats()
        for name, kind, text, value in _PER_SERVER:
            family = kind(name, text, labels=["server"])
            for server in snap.servers:
                family.add_metric([server.name], value(server, stats.get(server.name, (0, 0, 0))))
            yield family

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
    def __init__(self, snapshot: "SnapshotCollector") -> None:
        self.registry = CollectorRegistry()
        self.registry.register(snapshot)
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

        #: The histogram of each label pair, found once (``labels`` checks and locks);
        #: as many as prometheus keeps itself: configured servers by known methods.
        self._latency_of: dict[tuple[str, str], Any] = {}

    def observe(self, server: str, method: str, seconds: float, ok: bool) -> None:
        key = (
            server.split(PRIVATE_SEPARATOR, 1)[0],
            method if method in KNOWN_METHODS else OTHER_METHOD,
        )
        latency = self._latency_of.get(key)
        if latency is None:
            latency = self._latency_of[key] = self.latency.labels(server=key[0], method=key[1])
        latency.observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
