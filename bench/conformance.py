"""The official MCP conformance suite's server scenarios: direct vs through the tray's gateway.

``.venv/bin/python bench/conformance.py --help`` says what it measures and its options;
the bench itself is bench/suites/conformance/ (its cli.py holds the description).
"""

import sys
from pathlib import Path

# Run as a script from a checkout: the checkout first on sys.path, for `bench` and `core`.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# It only runs where it measures (mypy skips the rest elsewhere).
assert sys.platform != "win32", "bench/ measures POSIX machines (signals, process groups)"

from bench.suites.conformance.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
