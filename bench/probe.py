"""A probe session in a process of its own: one session calling ``echo`` at a steady pace.

bench/scale.py's opens section watches call latency while a burst of sessions
opens. Run in the bench's own process, the probe's answers waited behind the
openers' work in the same event loop (the bench takes most of a core during an
unpaced burst), so its latencies were partly the bench's. Here it has its own
process and loop, and measures the tray.

Driven over stdin, one command per line; it answers on stdout:

- ``phase NAME``: later calls count under NAME;
- ``run``: calls every ``--interval`` seconds until ``pause`` (answers ``paused``
  once the call in flight is in);
- ``report``: prints the latencies by phase as one JSON line and exits.

It prints ``ready`` once its session is open and warmed up.
Run by bench/scale.py: python bench/probe.py URL TOKEN [--interval S] [--warmup N]
"""

import argparse
import asyncio
import contextlib
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness.clients import RawHttpClient, timed_call


async def probe(url: str, token: str, interval: float, warmup: int) -> None:
    loop = asyncio.get_running_loop()
    commands = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(commands), sys.stdin)
    client = RawHttpClient(url, token)
    await client.connect()
    await client.initialize()
    for _ in range(warmup):
        await timed_call(client)
    latencies: dict[str, list[float]] = defaultdict(list)
    phase = "before"
    running = asyncio.Event()
    paused = asyncio.Event()

    async def calls() -> None:
        due = time.perf_counter()
        while True:
            if not running.is_set():
                paused.set()
                await running.wait()
                due = time.perf_counter()
            reader = client.reader
            if reader is not None and reader.at_eof():
                await client.connect()  # idle past the tray's keep-alive: the session lives on
            latencies[phase].append(await timed_call(client))
            due = max(due + interval, time.perf_counter())
            await asyncio.sleep(max(0.0, due - time.perf_counter()))

    caller = asyncio.create_task(calls())
    print("ready", flush=True)
    try:
        while line := (await commands.readline()).decode().strip():
            verb, _, argument = line.partition(" ")
            if verb == "phase":
                phase = argument
            elif verb == "run":
                paused.clear()
                running.set()
            elif verb == "pause":
                running.clear()
                await paused.wait()
                print("paused", flush=True)
            elif verb == "report":
                break
    finally:
        caller.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await caller
        await client.aclose()
    print(json.dumps(latencies), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("url")
    parser.add_argument("token")
    parser.add_argument("--interval", type=float, default=0.005)
    parser.add_argument("--warmup", type=int, default=50)
    args = parser.parse_args()
    asyncio.run(probe(args.url, args.token, args.interval, args.warmup))


if __name__ == "__main__":
    main()
