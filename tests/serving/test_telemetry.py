"""Spans of the calls, sent to a real OTLP/HTTP receiver (docs/journal.md#traces).

Each tray runs in-process (TrayService) with the OpenTelemetry SDK and its
OTLP/HTTP exporter as the ``otel`` extra brings them; the receiver is an HTTP
server on loopback that decodes what arrives with opentelemetry-proto, as a
collector would. The child is a real SDK server that says which trace context
reached it (tests/servers/traced.py)."""

import asyncio
import gzip
import json
import secrets
import socket
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from core.base.errors import ConfigError, TelemetryUnavailable
from core.registry.journal import CallQuery
from core.serving.observe.call_journal import CallJournal
from core.serving.observe.telemetry import (
    EXPORT_TIMEOUT_S,
    Telemetry,
    parse_traceparent,
    traces_url,
)
from core.serving.service import TrayService
from core.settings.config import load_config
from tests.conftest import ECHO, SERVERS, kill_hard, pid_of, python_server, wait_ready, wait_until
from tests.support.gateway_support import Raw, Services, call, http_client, modern_request, text

TRACED = SERVERS / "traced.py"


class Receiver:
    """An OTLP/HTTP endpoint: every span posted to ``/v1/traces``, decoded."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.services: set[str] = set()
        self.paths: list[str] = []
        self._lock = threading.Lock()

    def take(self, path: str, body: bytes) -> None:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        with self._lock:
            self.paths.append(path)
            for resource_spans in request.resource_spans:
                resource = _attributes(resource_spans.resource.attributes)
                self.services.add(str(resource.get("service.name")))
                for scope in resource_spans.scope_spans:
                    for span in scope.spans:
                        self.spans.append(
                            {
                                "name": span.name,
                                "trace_id": span.trace_id.hex(),
                                "span_id": span.span_id.hex(),
                                "parent_span_id": span.parent_span_id.hex(),
                                "attributes": _attributes(span.attributes),
                                "status": span.status.code,
                                "duration_ns": span.end_time_unix_nano - span.start_time_unix_nano,
                            }
                        )

    def named(self, name: str) -> list[dict[str, Any]]:
        with self._lock:
            return [span for span in self.spans if span["name"] == name]


def _attributes(pairs: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for pair in pairs:
        kind = pair.value.WhichOneof("value")
        found[pair.key] = getattr(pair.value, kind) if kind else None
    return found


@pytest.fixture
def otlp(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Receiver, str]]:
    """A receiver on a free loopback port, and the endpoint a config names for it."""
    receiver = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            if self.headers.get("content-encoding") == "gzip":
                body = gzip.decompress(body)
            receiver.take(self.path, body)
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    # The SDK's batch processor sends every 5 s unless told otherwise (its own setting).
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    try:
        yield receiver, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def a_trace() -> tuple[str, str]:
    return secrets.token_hex(16), secrets.token_hex(8)


async def traced_tray(services: Services, endpoint: str, **servers: Any) -> TrayService:
    entries = {"traced": python_server(TRACED), **servers}
    service = await services.start(entries, telemetry={"otlp_endpoint": endpoint})
    for name in entries:
        await wait_ready(service.supervisor.server(name))
    return service


async def span_of(receiver: Receiver, name: str, trace_id: str | None = None) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        spans = [s for s in receiver.named(name) if trace_id in (None, s["trace_id"])]
        return spans[-1] if spans else None

    span: dict[str, Any] = await wait_until(found, timeout=15, what=f"a span {name!r}")
    return span


async def record_of(service: TrayService, **wanted: Any) -> dict[str, Any]:
    async def found() -> dict[str, Any] | None:
        records = await service.calls_json(CallQuery(**wanted))
        return records[-1] if records else None

    record: dict[str, Any] = await wait_until(found, timeout=10, what=f"a record for {wanted}")
    return record


async def test_a_handshake_era_callers_traceparent_header_is_continued_into_the_span_and_the_child(
    services: Services, otlp: tuple[Receiver, str]
) -> None:
    receiver, endpoint = otlp
    service = await traced_tray(services, endpoint)
    assert service.supervisor.server("traced").catalog.modern  # a child _meta can carry it
    trace_id, parent = a_trace()
    async with httpx.AsyncClient(timeout=30) as http:
        raw = Raw(http, service, "/mcp/traced")
        await raw.open()
        reply = await raw.post(call(2, "traceparent", {}), traceparent=f"00-{trace_id}-{parent}-01")
    assert reply.status_code == 200, reply.text
    seen_by_child = parse_traceparent(reply.json()["result"]["content"][0]["text"])
    span = await span_of(receiver, "tools/call traceparent", trace_id)
    assert span["parent_span_id"] == parent  # the client's span is its parent
    assert seen_by_child is not None
    # The child is told the call's own span, in the client's trace.
    assert (seen_by_child.trace_id, seen_by_child.span_id) == (trace_id, span["span_id"])
    attributes = span["attributes"]
    assert attributes["mcp.method.name"] == "tools/call"
    assert attributes["gen_ai.tool.name"] == "traceparent"
    assert attributes["mcp_tray.server"] == "traced"
    assert attributes["mcp_tray.outcome"] == "ok"
    assert attributes["mcp_tray.door"] == "/mcp/traced"
    assert (attributes["mcp_tray.retries"], attributes["mcp_tray.respawns"]) == (0, 0)
    assert span["status"] != 2  # STATUS_CODE_ERROR
    assert receiver.services == {"mcp-tray"}
    assert set(receiver.paths) == {"/v1/traces"}
    record = await record_of(service, tool="traceparent")
    assert record["trace_id"] == trace_id


async def test_a_2026_client_s_meta_traceparent_is_continued_and_the_child_gets_the_new_span(
    services: Services, otlp: tuple[Receiver, str]
) -> None:
    receiver, endpoint = otlp
    service = await traced_tray(services, endpoint)
    trace_id, parent = a_trace()
    body, headers = modern_request("tools/call", {"name": "traceparent", "arguments": {}})
    body["params"]["_meta"]["traceparent"] = f"00-{trace_id}-{parent}-01"
    headers["authorization"] = f"Bearer {service.token}"
    async with httpx.AsyncClient(timeout=30) as http:
        reply = await http.post(f"{service.url}/mcp/traced", json=body, headers=headers)
    answer = reply.json()
    seen_by_child = parse_traceparent(answer["result"]["content"][0]["text"])
    span = await span_of(receiver, "tools/call traceparent", trace_id)
    assert span["parent_span_id"] == parent
    assert seen_by_child is not None
    assert (seen_by_child.trace_id, seen_by_child.span_id) == (trace_id, span["span_id"])
    assert (await record_of(service, tool="traceparent"))["trace_id"] == trace_id


async def test_through_the_aggregate_the_callers_trace_reaches_the_members_span_and_child(
    services: Services, otlp: tuple[Receiver, str]
) -> None:
    receiver, endpoint = otlp
    service = await traced_tray(services, endpoint)
    trace_id, parent = a_trace()
    async with httpx.AsyncClient(timeout=30) as http:
        raw = Raw(http, service, "/mcp")
        await raw.open()
        reply = await raw.post(
            call(2, "traced__traceparent", {}), traceparent=f"00-{trace_id}-{parent}-01"
        )
    assert reply.status_code == 200, reply.text
    seen_by_child = parse_traceparent(reply.json()["result"]["content"][0]["text"])
    span = await span_of(receiver, "tools/call traceparent", trace_id)
    assert span["parent_span_id"] == parent
    assert span["attributes"]["mcp_tray.door"] == "/mcp"
    assert seen_by_child is not None
    assert (seen_by_child.trace_id, seen_by_child.span_id) == (trace_id, span["span_id"])


async def test_a_call_with_no_trace_starts_one_and_the_journal_keeps_its_id(
    services: Services, otlp: tuple[Receiver, str]
) -> None:
    receiver, endpoint = otlp
    service = await traced_tray(services, endpoint)
    async with http_client(service, "traced") as session:
        told = text(await session.call_tool("traceparent", {}))
    span = await span_of(receiver, "tools/call traceparent")
    assert span["parent_span_id"] == ""  # a root span
    seen_by_child = parse_traceparent(told)
    assert seen_by_child is not None and seen_by_child.span_id == span["span_id"]
    assert (await record_of(service, tool="traceparent"))["trace_id"] == span["trace_id"]


async def test_a_call_replayed_after_its_child_died_is_one_span_with_its_retry_and_respawn(
    services: Services, otlp: tuple[Receiver, str], tmp_path: Path
) -> None:
    receiver, endpoint = otlp
    markers = tmp_path / "markers"
    markers.mkdir()
    service = await traced_tray(
        services, endpoint, echo=python_server(ECHO, ECHO_MARKER_DIR=str(markers))
    )
    server = service.supervisor.server("echo")
    async with http_client(service, "echo") as session:
        pending = asyncio.ensure_future(session.call_tool("slow_read", {"seconds": 0.5}))
        await wait_until((markers / "slow_read.started").exists, what="slow_read to start")
        await kill_hard(pid_of(server))
        assert text(await asyncio.wait_for(pending, 30)) == "read after 0.5"
        failed = await session.call_tool("fail", {"message": "no"})
    assert failed.is_error
    span = await span_of(receiver, "tools/call slow_read")
    attributes = span["attributes"]
    assert attributes["mcp_tray.outcome"] == "retried"
    assert (attributes["mcp_tray.retries"], attributes["mcp_tray.respawns"]) == (1, 1)
    assert attributes["mcp_tray.child.generation"] == 2
    assert len(receiver.named("tools/call slow_read")) == 1  # one call, one span
    tool_error = await span_of(receiver, "tools/call fail")
    assert tool_error["attributes"]["mcp_tray.outcome"] == "tool-error"
    assert tool_error["attributes"]["error.type"] == "tool-error"
    assert tool_error["status"] == 2  # STATUS_CODE_ERROR


async def test_spans_start_when_an_edit_names_an_endpoint_and_stop_when_it_is_gone(
    services: Services, otlp: tuple[Receiver, str]
) -> None:
    receiver, endpoint = otlp
    service = await services.start({"traced": python_server(TRACED)})
    await wait_ready(service.supervisor.server("traced"))
    journal = service.journal
    assert journal.telemetry is None
    document = json.loads(service.config.path.read_text())
    document["telemetry"] = {"otlp_endpoint": endpoint}
    service.config.path.write_text(json.dumps(document))
    await service.watcher.reload()
    assert telemetry_of(journal) is not None
    async with http_client(service, "traced") as session:
        await session.call_tool("traceparent", {})
    await span_of(receiver, "tools/call traceparent")
    del document["telemetry"]
    service.config.path.write_text(json.dumps(document))
    await service.watcher.reload()
    assert telemetry_of(journal) is None


def telemetry_of(journal: CallJournal) -> Telemetry | None:
    """Read anew (mypy would keep the narrowing of an attribute across the reload)."""
    return journal.telemetry


async def test_without_the_otel_extra_the_tray_warns_how_to_install_it_and_still_journals(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What an install without the extra sees: the exporter's module cannot be imported.
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    with pytest.raises(TelemetryUnavailable, match=r"pip install 'mcp-tray\[otel\]'"):
        Telemetry("http://127.0.0.1:4318")
    service = await services.start(
        {"traced": python_server(TRACED)}, telemetry={"otlp_endpoint": "http://127.0.0.1:9"}
    )
    await wait_ready(service.supervisor.server("traced"))
    assert service.workers is not None
    assert any("telemetry-unavailable" in w for w in service.workers.own_warnings)
    trace_id, parent = a_trace()
    async with httpx.AsyncClient(timeout=30) as http:
        raw = Raw(http, service, "/mcp/traced")
        await raw.open()
        reply = await raw.post(call(2, "traceparent", {}), traceparent=f"00-{trace_id}-{parent}-01")
    # No span of its own: the client's context goes on to the child as it came.
    assert reply.json()["result"]["content"][0]["text"] == f"00-{trace_id}-{parent}-01"
    assert (await record_of(service, tool="traceparent"))["trace_id"] == trace_id


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("http://", "no host"),
        ("ftp://collector:4318", "not http"),
        ("127.0.0.1:4318", "no scheme"),
        (4318, "not a string"),
        ("http://[::1:4318", "a broken IPv6 literal"),
    ],
)
def test_a_bad_endpoint_is_refused_naming_the_file_key_and_fix(
    tmp_path: Path, value: object, why: str
) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"mcpServers": {}, "telemetry": {"otlp_endpoint": value}}))
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    message = str(refused.value)
    assert str(path) in message, why
    assert "telemetry.otlp_endpoint" in message or "otlp_endpoint" in message
    assert "http://127.0.0.1:4318" in message  # the fix shows one that works


def test_an_unknown_telemetry_key_is_refused_with_the_one_it_takes(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"mcpServers": {}, "telemetry": {"otlp_endpiont": "x"}}))
    with pytest.raises(ConfigError, match="otlp_endpoint"):
        load_config(path)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", True),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", True),
        ("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-later", True),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-later", False),
        ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", False),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", False),
        ("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", False),
        ("00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01", False),
        ("00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", False),
        ("", False),
        (None, False),
    ],
)
def test_only_a_well_formed_traceparent_is_continued(value: object, expected: bool) -> None:
    assert (parse_traceparent(value) is not None) is expected


def test_the_endpoint_gets_the_traces_path_unless_it_names_one() -> None:
    assert traces_url("http://127.0.0.1:4318") == "http://127.0.0.1:4318/v1/traces"
    assert traces_url("http://127.0.0.1:4318/") == "http://127.0.0.1:4318/v1/traces"
    assert traces_url("https://c.example/otlp/v1/traces") == "https://c.example/otlp/v1/traces"


def test_a_collector_that_is_down_holds_a_quit_up_for_at_most_the_export_timeout() -> None:
    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    telemetry = Telemetry(f"http://127.0.0.1:{port}")
    span = telemetry.begin("tools/call x", None, time.time_ns(), {})
    span.end("ok", {}, time.time_ns())
    began = time.monotonic()
    telemetry.close()
    assert time.monotonic() - began < EXPORT_TIMEOUT_S + 1.0
