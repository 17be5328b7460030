"""The gateway bench's settings: default counts, its rows of docs/measured.md's table, the
clients it compares, the peers' versions, and the bounds on every wait.
"""

import re
from typing import Final

from bench.harness.files import ROOT
from bench.harness.records import Row
from bench.harness.tray import PROFILE

DEFAULT_CALLS: Final = 2000


DEFAULT_WARMUP: Final = 50


DEFAULT_BLOCK: Final = 100


TARGET_ADDED_P50_MS: Final = 1.0


#: What this bench adds to docs/measured.md's table (bench/results.py); the
#: floor rows (a plain HTTP client) are needed for the first figure.
ROWS: Final = (
    Row(
        "gateway overhead per call, p50",
        "< 1 ms",
        "+{raw_gateway_added_p50_ms:.2f} ms with a plain HTTP client; "
        "+{gateway_added_p50_ms:.1f} ms with the MCP SDK's HTTP client (the client itself "
        "costs +{sdk_client_added_p50_ms:.1f} ms); +{bridge_added_p50_ms:.1f} ms through the "
        "stdio bridge",
    ),
)


CLIENTS: Final = ("direct", "gateway", "bridge")


AGGREGATE_CLIENTS: Final = ("aggregate", "profile")


AGGREGATE_PATHS: Final = {"aggregate": "/mcp", "profile": f"/mcp/@{PROFILE}"}


RAW_AGGREGATE_CLIENTS: Final = ("raw-aggregate", "raw-profile")


#: Target (issue 19): what an aggregate endpoint's routing may add over ``/mcp/<server>``.
TARGET_ROUTING_P50_MS: Final = 0.1


#: The tools/list measure: this many servers of this many tools each, through ``/mcp``.
LIST_SERVERS: Final = 10


LIST_TOOLS: Final = 50


LIST_CALLS: Final = 200


MANY_TOOLS_SCRIPT: Final = ROOT / "tests" / "servers" / "many_tools.py"


#: The floor rows: raw clients, no SDK (see the module docstring).
FLOOR_CLIENTS: Final = ("raw-direct", "raw-hop", "raw-gateway")


FLOOR_LABELS: Final = {
    "raw-hop": "floor: one extra process hop",
    "raw-gateway": "tray gateway, raw client",
    "raw-aggregate": "/mcp, raw client",
    "raw-profile": f"/mcp/@{PROFILE}, raw client",
}


#: The 2026-07-28 rows (see the module docstring): ``mcp.Client``, no handshake.
MODERN_CLIENTS: Final = ("modern-direct", "modern-gateway", "modern-bridge")


#: The revision the modern rows must speak (checked on each client after it connects).
MODERN_VERSION: Final = "2026-07-28"


#: ``mcp.Client(mode=...)``: "auto" probes ``server/discover`` once, at connect (not
#: timed), and negotiates MODERN_VERSION against all three targets (checked).
MODERN_MODE: Final = "auto"


#: Bound on the relay child's start-up (it writes its port file when listening).
RELAY_READY_SECONDS: Final = 30.0


#: The peer rows (see the module docstring): other stdio -> HTTP gateways, same echo.py.
PEER_CLIENTS: Final = ("supergateway", "mcp-proxy")


#: Where the peers are installed on first use (gitignored); nothing is installed globally.
PEERS_CACHE: Final = ROOT / ".bench-peers"


SUPERGATEWAY_VERSION: Final = "4.0.0"


MCP_PROXY_VERSION: Final = "0.13.0"


#: supergateway's package.json: engines.node >= 20. Below that npm's node@22 comes with it.
NODE_MIN_MAJOR: Final = 20


NODE_PACKAGE: Final = "node@^22"


#: Bound on one install step (npm install, python -m venv, pip install).
INSTALL_SECONDS: Final = 600.0


#: Bound on a peer's start-up (listening on its port).
PEER_READY_SECONDS: Final = 60.0


#: The only variables a peer process inherits. supergateway listens on every
#: interface (it has no host option) and hands its environment to echo.py, whose
#: getenv tool would answer anyone who can reach the port: nothing of the user's
#: environment goes there.
PEER_ENV_KEYS: Final = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")


#: The telling line of a failed install: npm's first error line that is more than a
#: bare code, pip's first ERROR line.
INSTALL_ERROR_RE: Final = re.compile(r"^npm error (?!(code|syscall|errno) \S+$)\S|^ERROR: ")


#: The tray's call-path histogram for this server's tools/call.
METRIC_RE: Final = re.compile(
    r'^mcp_tray_call_seconds_(sum|count)\{(?=[^}]*method="tools/call")(?=[^}]*server="echo")[^}]*\}'
    r"\s+(\S+)$",
    re.MULTILINE,
)


#: The revision the tray speaks to its echo.py child (a gauge set to 1 per server).
UPSTREAM_RE: Final = re.compile(
    r'^mcp_tray_server_protocol\{(?=[^}]*server="echo")[^}]*version="([^"]+)"[^}]*\}\s+1(?:\.0)?$',
    re.MULTILINE,
)
