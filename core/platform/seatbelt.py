"""A Seatbelt profile (SBPL) for ``sandbox-exec`` on macOS, from a sandbox's grants.

Generated and golden-tested on Linux only (tests/supervision/test_containment.py):
it has not run on a Mac yet. Unlike Landlock, Seatbelt denies by rule, so
the profile allows everything but file reads and writes and (with
``network`` false) network traffic, then allows the granted paths; a path
listed for listing only gets ``file-read-metadata`` and ``(literal)`` reads
of the folder itself.
"""

from core.platform.grants import Grants


def _quote(path: str) -> str:
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'


def profile(grants: Grants) -> str:
    lines = [
        "(version 1)",
        "(allow default)",
        "(deny file-read* file-write*)",
        '(allow file-read* (literal "/"))',
    ]
    lines += [f"(allow file-read* (subpath {_quote(p)}))" for p in grants.read]
    lines += [f"(allow file-read* file-write* (subpath {_quote(p)}))" for p in grants.write]
    lines += [
        f"(allow file-read-metadata file-read-data (literal {_quote(p)}))" for p in grants.listing
    ]
    if not grants.network:
        # IP only: local unix sockets (the system's own services) stay open.
        lines += ["(deny network-outbound (remote ip))", "(deny network-bind (local ip))"]
    return "\n".join(lines) + "\n"
