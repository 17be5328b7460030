"""A remote server's sign-in, started from the tray menu or the Servers tab: ``mcp-tray login
NAME`` in a process of its own (it opens the browser, waits for the redirect, keeps the sign-in
in the keyring and respawns the server), so the window never waits on a browser."""

import subprocess

from core.cli.launcher import launcher_argv


def start_sign_in(name: str, config: str) -> str | None:
    """Start it; the reason when it could not be started (None: it runs)."""
    try:
        subprocess.Popen(
            [*launcher_argv(console=False), "login", name, "--config", config],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except OSError as exc:
        return f"Sign in to {name} could not start: {exc}"
    return None
