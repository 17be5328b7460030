"""Which OS this is, for code that composes per-OS artefacts (client paths, login items).

Standard library only, so the lightest commands (``install-desktop`` in a
bare wheel) can ask without importing psutil.
"""

import sys


def current_os() -> str:
    """This OS as ``sys.platform`` names it: "linux", "darwin", "win32" (or another POSIX)."""
    return sys.platform
