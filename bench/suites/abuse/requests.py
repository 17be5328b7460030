"""Part 3, fuzzed requests: generated HTTP requests to the gateway and the control
API on a real session; none may answer 500 or hang.
"""

import sys

# Type-checked under every OS by `make lint`; it only runs where it measures,
# and what follows is skipped by mypy where it does not.
assert sys.platform == "linux", (
    "bench/abuse.py measures Linux (file limits through psutil.Process.rlimit)"
)

import argparse
import asyncio
import json
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

import httpx2
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

from bench.harness.tray import SERVER, server_entry
from bench.suites.abuse.common import generate
from bench.suites.abuse.constants import (
    ACCEPT,
    GATEWAY_PATHS,
    PROTOCOL,
    REQUEST_SECONDS,
    SESSION_PLACEHOLDER,
)
from bench.suites.abuse.tray import Tray
from tests.support.fuzz_http import (
    HARMFUL_TOOLS,
    bodies,
    headers,
    json_scalars,
    json_values,
    path_segment,
)

#: kind (gateway with generated or valid headers, or control), verb, path, headers,
#: body (zlib-compressed when large, for the trip from the worker), compressed or not.
Request = tuple[str, str, str, list[tuple[str, str]], bytes, bool]


@st.composite
def fuzz_requests(draw: st.DrawFn, control_share: float) -> Request:
    """One request as tests/support/fuzz_http.py builds them, gateway or control API."""
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
