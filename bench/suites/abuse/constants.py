"""The abuse bench's settings: default counts, bounds on every wait, its row of
docs/measured.md's table, and the hostile requests it sends.
"""

import sys

# Type-checked under every OS by `make lint`; it only runs where it measures,
# and what follows is skipped by mypy where it does not.
assert sys.platform == "linux", (
    "bench/abuse.py measures Linux (file limits through psutil.Process.rlimit)"
)

from typing import Final

from bench.harness.records import Row

DEFAULT_SEED: Final = 0


DEFAULT_CONFIGS: Final = 500


DEFAULT_CLI: Final = 50


DEFAULT_CLI_JOBS: Final = 2


DEFAULT_EDITS: Final = 30


DEFAULT_FLOOD: Final = 1200


DEFAULT_HOLD: Final = 35.0


DEFAULT_REOPEN_RATE: Final = 100


DEFAULT_REQUESTS: Final = 10_000


DEFAULT_CONTROL_SHARE: Final = 0.15


DEFAULT_METHODS: Final = 20_000


DEFAULT_SCRAPES: Final = 20


DEFAULT_CONCURRENCY: Final = 8


#: A config load takes milliseconds; past this it counts as a hang.
LOAD_SECONDS: Final = 10.0


#: A refused config must make the CLI exit within this; a valid one must be up within it.
CLI_SECONDS: Final = 10.0


#: Bound on a tray's exit after SIGTERM (past it: a hang, and its group is killed).
STOP_SECONDS: Final = 30.0


#: Bound on the main tray's start-up (echo ready).
READY_SECONDS: Final = 60.0


#: How long a hot reload may take to show in /api/v1/status (debounce 0.3 s).
RELOAD_SECONDS: Final = 10.0


#: Status probes during the flood: how often, the bound on one, the target.
PROBE_EVERY: Final = 0.25


PROBE_SECONDS: Final = 5.0


TARGET_PROBE_SECONDS: Final = 1.0


#: What this bench adds to docs/measured.md's table (bench/results.py).
ROWS: Final = (
    Row(
        "hostile input",
        "0 tracebacks, 0 hangs, 0 HTTP 500",
        "{configs:,} configs, {edits} live edits, {connections:,} connections without the "
        "token (status p95 {status_p95_ms:,.0f} ms, max {status_max_ms:,.0f} ms), "
        "{requests:,} fuzzed requests: {tracebacks} / {hangs} / {http_500}; /metrics "
        "{metrics_kb:.1f} kB after {methods:,} invented methods",
    ),
)


CLI_STATUS_EVERY: Final = 2.0


#: The burst (``--burst``): status probes right after it, and how far apart.
BURST_PROBES: Final = 10


BURST_PROBE_EVERY: Final = 0.05


DEFAULT_BURST_FILE_LIMIT: Final = 1024


#: Bound on opening one flood connection.
CONNECT_SECONDS: Final = 5.0


#: Bound on one fuzzed request (a stream still open then is counted apart).
REQUEST_SECONDS: Final = 15.0


#: Tool calls timed without scrapes, as the baseline of figure 4.
BASELINE_CALLS: Final = 50


#: What stands for the session id in generated headers (the session opens after generation).
SESSION_PLACEHOLDER: Final = "bench-session-placeholder"


PROTOCOL: Final = "2025-11-25"


ACCEPT: Final = "application/json, text/event-stream"


#: Paths of fuzzed gateway requests: mostly the echo server, as tests/support/fuzz_http.py.
GATEWAY_PATHS: Final = ("/mcp/echo",) * 6 + ("/echo/mcp", "/mcp/nosuch")


#: Kinds of flood connections, in the proportion they are opened.
FLOOD_KINDS: Final = ("idle", "idle", "half-head", "trickle-head", "trickle-body")


HALF_HEAD: Final = b"POST /api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\n"


TRICKLED_HEAD: Final = (
    b"POST /api/v1/servers/echo/call HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
)
