"""The conformance run's settings: the suite's package and version, the eras, and
the bounds on every wait.
"""

import sys

# Type-checked under every OS by `make lint`; it only runs where it measures,
# and what follows is skipped by mypy where it does not.
assert sys.platform != "win32", "bench/ measures POSIX machines (signals, process groups)"

import re
from typing import Final

from bench.harness.files import ROOT

SERVER_SCRIPT: Final = ROOT / "tests" / "servers" / "conformance_server.py"


SERVER: Final = "conformance"


CACHE: Final = ROOT / ".conformance"


PACKAGE: Final = "@modelcontextprotocol/conformance"


#: 0.1.16 is the latest stable release, but only the 0.2.0 pre-releases have
#: the 2026-07-28 scenarios (and more checks for the handshake era).
DEFAULT_SUITE_VERSION: Final = "0.2.0-alpha.12"


#: The suite needs Node >= 22; this npm package ships one.
NODE_PACKAGE: Final = "node@^22"


ERAS: Final = ("2025-11-25", "2026-07-28")


#: Bound on npm install (Node itself is a ~30 MB download).
INSTALL_SECONDS: Final = 600.0


#: Bound on one suite invocation (it times out each scenario itself).
SUITE_SECONDS: Final = 1800.0


#: Bound on the tray's and the direct server's start-up.
READY_SECONDS: Final = 60.0


#: How long a process group gets after SIGTERM before SIGKILL.
STOP_SECONDS: Final = 15.0


TIMESTAMP_RE: Final = re.compile(r"-\d{4}-\d{2}-\d{2}T[\dZ-]+$")
