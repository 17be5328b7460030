"""Generated hostile input through the gateway and the control API of a real tray.

Strategy: one TrayService in-process (a real echo child behind it) per test;
hypothesis generates JSON-RPC-shaped bodies (and raw bytes, batches, deep
nesting) with generated headers, sent over real HTTP with the token (an
attacker without it is stopped at the door; these probe what is behind it).
Every answer must be prompt and not a 500, nothing may be logged with a
traceback, and the child must be the same process at the end.
"""

import json
import logging
from collections.abc import Iterator
from typing import Any, Final

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.serving.service import TrayService
from core.settings.config import load_config
from core.settings.paths import Paths
from tests.conftest import (
    ECHO,
    FAST_TIMING,
    LoopThread,
    logged_tracebacks,
    python_server,
    wait_ready,
)
from tests.support.fuzz_http import (
    HARMFUL_TOOLS,
    bodies,
    headers,
    json_scalars,
    json_values,
    path_segment,
)

#: Enough to find what a careless parser misses, few enough for make test.
EXAMPLES: Final = 150
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


class Tray(LoopThread):
    """A TrayService on an event loop of its own thread, so hypothesis drives it synchronously."""

    def __init__(self, paths: Paths) -> None:
        paths.config_file.write_text(json.dumps({"mcpServers": {"echo": python_server(ECHO)}}))
        super().__init__()
        self.service = TrayService(load_config(paths.config_file), paths, timing=FAST_TIMING)
        self.run(self.service.start())
        self.run(wait_ready(self.service.supervisor.server("echo")))
        self.pid = self.service.supervisor.server("echo").pid
        auth = {"authorization": f"Bearer {self.service.token}"}
        self.http = httpx.Client(base_url=self.service.url, headers=auth, timeout=10)
        opened = self.http.post(
            "/mcp/echo",
            headers={"accept": "application/json, text/event-stream"},
            json={
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "fuzz", "version": "0"},
                },
            },
        )
        self.session_id = opened.headers["mcp-session-id"]

    def close(self) -> None:
        self.http.close()
        self.run(self.service.aclose())
        self.stop()


@pytest.fixture
def tray(tray_home: Paths) -> Iterator[Tray]:
    holder = Tray(tray_home)
    yield holder
    holder.close()


@pytest.mark.slow
@pytest.mark.timeout(240)
@FUZZ
@given(data=st.data())
def test_generated_gateway_requests_get_no_500_no_traceback_and_leave_the_child_alone(
    tray: Tray, caplog: pytest.LogCaptureFixture, data: st.DataObject
) -> None:
    caplog.set_level(logging.WARNING)
    body = data.draw(bodies())
    sent = data.draw(headers(tray.session_id))
    path = data.draw(st.sampled_from(["/mcp/echo", "/echo/mcp", "/mcp/nosuch"]))
    verb = data.draw(st.sampled_from(["POST", "POST", "POST", "DELETE"]))
    if verb == "DELETE" and sent.get("mcp-session-id") == tray.session_id:
        sent.pop("mcp-session-id")

    reply = tray.http.request(verb, path, headers=sent, content=body)

    assert reply.status_code < 500, (verb, path, sent, body[:300], reply.text[:300])
    assert logged_tracebacks(caplog) == []
    assert tray.service.supervisor.server("echo").pid == tray.pid


@pytest.mark.slow
@pytest.mark.timeout(240)
@FUZZ
@given(data=st.data())
def test_generated_control_api_calls_get_no_500_no_traceback(
    tray: Tray, caplog: pytest.LogCaptureFixture, data: st.DataObject
) -> None:
    caplog.set_level(logging.WARNING)
    if data.draw(st.booleans()):
        body = data.draw(bodies())
    else:
        call: dict[str, Any] = {}
        if data.draw(st.integers(0, 9)) > 0:
            call["tool"] = data.draw(st.sampled_from(["echo", "whoami", "nosuch"]) | json_values)
        if str(call.get("tool")) in HARMFUL_TOOLS:
            call["tool"] = "echo"
        if data.draw(st.booleans()):
            call["arguments"] = data.draw(json_values)
        if data.draw(st.booleans()):
            call["timeout"] = data.draw(
                json_scalars | st.sampled_from([float("nan"), float("inf"), -1, 0, True])
            )
        body = json.dumps(call).encode()
    name = data.draw(st.sampled_from(["echo", "nosuch"]) | path_segment)

    reply = tray.http.post(f"/api/v1/servers/{name}/call", content=body)

    assert reply.status_code < 500, (name, body[:300], reply.text[:300])
    assert reply.headers["content-type"].startswith("application/json")
    assert logged_tracebacks(caplog) == []
    assert tray.service.supervisor.server("echo").pid == tray.pid
