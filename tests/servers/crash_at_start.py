"""Exits at once with an error on stderr: a server that can never start."""

import sys

print("crash_at_start: missing API key, giving up", file=sys.stderr, flush=True)
sys.exit(1)
