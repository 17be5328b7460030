"""The UI bench's settings: the demo servers it runs, the worker rows it writes,
sampling intervals, targets and its rows of docs/measured.md's table.
"""

import sys

# Type-checked under every OS by `make lint`; it only runs where it measures,
# and what follows is skipped by mypy where it does not.
assert sys.platform != "win32", "bench/ measures POSIX machines (signals, process groups)"

from bench.harness.files import ROOT
from bench.harness.records import Row

DEMO = ROOT / "resources" / "demo"


#: (script, how many servers run it).
DEMO_SERVERS = (("clock_server.py", 4), ("notes_server.py", 3), ("fragile_server.py", 3))


WORKER_ROWS = 1000


#: Rows 0..RENEWED_ROWS-1 are renewed round-robin, RENEW_PER_SECOND a second.
RENEWED_ROWS = 500


RENEW_PER_SECOND = 100


WORKER_TTL_SECONDS = 60.0


SETTLE_SECONDS = 5.0


RSS_EVERY_SECONDS = 0.5


USS_EVERY_SECONDS = 5.0


READY_SECONDS = 120.0


STOP_SECONDS = 30.0


REPLY_SECONDS = 15.0


TARGET_IDLE_CPU_PERCENT = 0.5


TARGET_RSS_MB = 150.0


TARGET_ROWS_CPU_PERCENT = 5.0


#: What this bench adds to docs/measured.md's table (bench/results.py).
ROWS = (
    Row(
        "idle CPU, 10 servers, window open",
        "< 0.5 %",
        "{idle_cpu_percent:.2f} % ({hidden_cpu_percent:.2f} % with the window hidden: "
        "nothing sampled)",
    ),
    Row("tray RSS", "< 150 MB", "{peak_rss_mb:.0f} MB peak"),
    Row("1,000 worker rows ticking at 1 Hz", "< 5 %", "{rows_cpu_percent:.1f} %"),
)


MB = 1_000_000
