"""The names and addresses that mean this machine: the one list of them.

The gateway's guard judges Host and Origin headers by it (core.serving.http.api),
and ``client-config --install`` tells mcp-tray's own HTTP entries from the
user's by it (core.cli.install). Written as a Host header writes them, an
IPv6 address in brackets.
"""

from typing import Final

LOOPBACK_HOSTS: Final = frozenset({"127.0.0.1", "localhost", "[::1]"})


def is_loopback_hostname(hostname: str | None) -> bool:
    """Whether a URL's host (``urlsplit(url).hostname``: lower case, IPv6 without its
    brackets) is one of ``LOOPBACK_HOSTS``."""
    if not hostname:
        return False
    return hostname in LOOPBACK_HOSTS or f"[{hostname}]" in LOOPBACK_HOSTS
