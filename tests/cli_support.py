"""The mcp-tray command in a subprocess, for the CLI tests (not a test module)."""

import subprocess
import sys
from collections.abc import Mapping, Sequence


def run_python(
    args: Sequence[str], env: Mapping[str, str], *, stdin: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` with exactly ``env``: output captured as text, the exit code returned."""
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env=env,
        input=stdin,
        timeout=timeout,
        check=False,
    )


def run_mcp_tray(
    env: Mapping[str, str], *args: str, stdin: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``mcp-tray ARGS`` from this checkout (``python -m core.cli.main``)."""
    return run_python(["-m", "core.cli.main", *args], env, stdin=stdin, timeout=timeout)
