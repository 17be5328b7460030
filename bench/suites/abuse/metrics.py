"""Part 4, invented methods: /metrics stays small however many unknown methods are called."""

import sys

# Type-checked under every OS by `make lint`; it only runs where it measures,
# and what follows is skipped by mypy where it does not.
assert sys.platform == "linux", (
    "bench/abuse.py measures Linux (file limits through psutil.Process.rlimit)"
)

import argparse
import asyncio
import contextlib
import re
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx2

from bench.harness.tray import SERVER
from bench.suites.abuse.constants import BASELINE_CALLS, REQUEST_SECONDS
from bench.suites.abuse.requests import open_session, session_headers
from bench.suites.abuse.tray import Tray


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
