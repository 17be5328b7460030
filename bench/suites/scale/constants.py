"""The scale bench's settings: default counts, pacing, the loops and children it
can run, and its targets.
"""

from typing import Final

from bench.harness.files import ECHO_SCRIPT, LEAN_ECHO

DEFAULT_OPENS: Final = (100, 500, 1000)


DEFAULT_SESSIONS: Final = (1, 8, 32, 64)


OPEN_CONCURRENCY: Final = 16


PROBE_INTERVAL_SECONDS: Final = 0.005


BASELINE_SECONDS: Final = 2.0


SAMPLE_SECONDS: Final = 0.1


QUIET_SECONDS: Final = 1.0


#: Share of a core above the probe's own cost that still counts as quiet.
QUIET_MARGIN: Final = 0.02


#: Past this the tray is reported as never quiet.
SETTLE_MAX_SECONDS: Final = 120.0


#: Longer than the heartbeat interval of HTTP sessions' rows (TTL 60 s / 3).
DEFAULT_IDLE_SECONDS: Final = 25.0


#: Bound on waiting for closed sessions' rows to leave the registry.
CLOSE_WAIT_SECONDS: Final = 10.0


DEFAULT_CALL_SECONDS: Final = 6.0


BLOCK_SECONDS: Final = 2.0


WARMUP_CALLS: Final = 50


#: What a tray's interpreter runs before the CLI, per event loop.
LOOP_SETUP: Final = {
    "asyncio": "",
    "uvloop": "import asyncio, uvloop; asyncio.set_event_loop_policy(uvloop.EventLoopPolicy()); ",
}


RUN_CLI: Final = "import runpy; runpy.run_module('core.cli.main', run_name='__main__')"


#: The echo server the tray serves, by name: the SDK's, or one written by hand
#: that costs so little that the tray is what is measured.
CHILDREN: Final = {
    "lean": LEAN_ECHO,
    "sdk": ECHO_SCRIPT,
}


TARGET_CPU_PER_OPEN_MS: Final = 2.0


TARGET_QUIET_SECONDS: Final = 1.0


TARGET_P99_RATIO: Final = 1.5


TARGET_IDLE_MIB_PER_1000: Final = 40.0


TARGET_UVLOOP_SAVING: Final = 0.15
#: Issue 26: the call journal may cost at most this much more tray CPU per call.
TARGET_JOURNAL_COST: Final = 0.10


MIB: Final = 1024 * 1024
