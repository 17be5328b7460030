"""Gateway latency: one echo ``tools/call`` direct vs through ``/mcp/<server>`` vs the bridge.

``.venv/bin/python bench/gateway.py --help`` says what it measures and its options;
the bench itself is bench/suites/gateway/ (its cli.py holds the description).
"""

import sys
from pathlib import Path

# Run as a script from a checkout: the checkout first on sys.path, for `bench` and `core`.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.suites.gateway.cli import main

if __name__ == "__main__":
    sys.exit(main())
