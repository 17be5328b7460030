"""Hostile input and local faults: fuzzed configs, a connection flood, fuzzed requests, invented methods.

``.venv/bin/python bench/abuse.py --help`` says what it measures and its options;
the bench itself is bench/suites/abuse/ (its cli.py holds the description).
"""

import sys
from pathlib import Path

# Run as a script from a checkout: the checkout first on sys.path, for `bench`, `core` and `tests`.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# It only runs where it measures (mypy skips the rest elsewhere).
assert sys.platform == "linux", (
    "bench/abuse.py measures Linux (file limits through psutil.Process.rlimit)"
)

from bench.suites.abuse.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
