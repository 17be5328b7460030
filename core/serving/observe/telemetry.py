"""One OpenTelemetry span per call, exported over OTLP/HTTP (docs/journal.md#traces).

Optional: the ``otel`` extra brings the OpenTelemetry SDK and its OTLP/HTTP
exporter, and ``"telemetry": {"otlp_endpoint": ...}`` in the config turns it
on. Without either nothing here is imported and a call costs nothing more.

A client's W3C trace context (the ``traceparent`` HTTP header, or
``_meta.traceparent`` as 2026-07-28 carries it) is continued: the call's span
is its child, the journal keeps its trace id, and a 2026-07-28 child gets the
call's own span as its parent in the request's ``_meta``. With no exporter,
the client's context still goes on to the child as it came, and its trace id
still goes into the journal.

The tracer is a provider of its own, never the global one: the SDK mcp-tray
talks to its children with traces through the global provider, and would
then make a second span for every request and send its own ``traceparent``.
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from core import __version__
from core.base.errors import TelemetryUnavailable

#: ``version-traceid-parentid-flags`` (W3C Trace Context, level 1), lower-case hex.
_TRACEPARENT: Final = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_ZERO_TRACE: Final = "0" * 32
_ZERO_SPAN: Final = "0" * 16
#: Where OTLP/HTTP takes spans, under the endpoint the config names.
TRACES_PATH: Final = "/v1/traces"
#: The longest one export (and the last one, at quit) may take.
EXPORT_TIMEOUT_S: Final = 2
#: Outcomes that are not errors of the call.
_FINE: Final = frozenset({"ok", "retried"})


@dataclass(frozen=True, slots=True)
class TraceParent:
    """A W3C trace context: the trace, the span it comes from, its flags."""

    trace_id: str
    span_id: str
    flags: int = 1

    @property
    def header(self) -> str:
        return f"00-{self.trace_id}-{self.span_id}-{self.flags:02x}"


def parse_traceparent(value: object) -> TraceParent | None:
    """The context a ``traceparent`` value names; None for anything W3C says to ignore."""
    if not isinstance(value, str):
        return None
    match = _TRACEPARENT.fullmatch(value.strip())
    if match is None:
        # A later version may add fields after the four; version 00 may not.
        parts = value.strip().split("-")
        if len(parts) < 5 or parts[0] in ("00", "ff"):
            return None
        match = _TRACEPARENT.fullmatch("-".join(parts[:4]))
        if match is None:
            return None
    version, trace_id, span_id, flags = match.groups()
    if version == "ff" or trace_id == _ZERO_TRACE or span_id == _ZERO_SPAN:
        return None
    return TraceParent(trace_id, span_id, int(flags, 16))


def client_trace(
    headers: Mapping[str, str], params: Mapping[str, Any] | None
) -> TraceParent | None:
    """A request's trace context: its ``traceparent`` header, else its ``_meta``'s."""
    found = parse_traceparent(headers.get("traceparent"))
    if found is None and params:
        meta = params.get("_meta")
        if isinstance(meta, dict):
            found = parse_traceparent(meta.get("traceparent"))
    return found


def traces_url(endpoint: str) -> str:
    """The URL spans are posted to: the endpoint's ``/v1/traces`` unless it names a path."""
    path = urlsplit(endpoint).path
    if path in ("", "/"):
        return endpoint.rstrip("/") + TRACES_PATH
    return endpoint


class Span:
    """One call's span, begun when the call is sent (so a child can be told its id)."""

    __slots__ = ("_span", "parent")

    def __init__(self, span: Any, parent: TraceParent) -> None:
        self._span = span
        #: What a child is told: this span, in the call's trace.
        self.parent = parent

    def end(self, outcome: str, attributes: Mapping[str, Any], end_ns: int) -> None:
        from opentelemetry.trace import Status, StatusCode

        span = self._span
        span.set_attributes({**attributes, "mcp_tray.outcome": outcome})
        if outcome not in _FINE:
            span.set_attribute("error.type", outcome)
            span.set_status(Status(StatusCode.ERROR, outcome))
        span.end(end_time=end_ns)


class Telemetry:
    """A tracer of mcp-tray's own, its spans sent in batches from a thread of the SDK's."""

    def __init__(self, endpoint: str) -> None:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError as exc:
            raise TelemetryUnavailable(
                f"telemetry-unavailable: the config names an OTLP endpoint ({endpoint}) but "
                "OpenTelemetry is not installed; install it with: pip install 'mcp-tray[otel]'"
            ) from exc
        self.endpoint = endpoint
        resource = Resource.create({"service.name": "mcp-tray", "service.version": __version__})
        self._provider = TracerProvider(resource=resource)
        # A collector that is down must not hold a quit up: the exporter's own default
        # retries a refused connection for ~8 s at shutdown.
        exporter = OTLPSpanExporter(endpoint=traces_url(endpoint), timeout=EXPORT_TIMEOUT_S)
        self._provider.add_span_processor(
            BatchSpanProcessor(exporter, export_timeout_millis=EXPORT_TIMEOUT_S * 1000)
        )
        self._tracer = self._provider.get_tracer("mcp-tray", __version__)

    def begin(
        self, name: str, parent: TraceParent | None, start_ns: int, attributes: Mapping[str, Any]
    ) -> Span:
        from opentelemetry import trace

        context = None
        if parent is not None:
            remote = trace.SpanContext(
                int(parent.trace_id, 16),
                int(parent.span_id, 16),
                is_remote=True,
                trace_flags=trace.TraceFlags(parent.flags),
            )
            context = trace.set_span_in_context(trace.NonRecordingSpan(remote))
        span = self._tracer.start_span(
            name,
            context=context,
            kind=trace.SpanKind.SERVER,
            attributes=dict(attributes),
            start_time=start_ns,
        )
        own = span.get_span_context()
        return Span(
            span,
            TraceParent(
                trace.format_trace_id(own.trace_id),
                trace.format_span_id(own.span_id),
                int(own.trace_flags),
            ),
        )

    def close(self) -> None:
        """Send what is still queued, then stop (blocks: call it off the loop)."""
        self._provider.shutdown()
