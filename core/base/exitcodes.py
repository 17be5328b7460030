"""The exit codes of every ``mcp-tray`` command, the bridge's included.

One table for all of them (docs/cli.md lists it): the CLI, the
bridge, the headless service and the tray each return one of these, and a
test keeps docs/cli.md's sentence equal to it.
"""

from typing import Final

#: It did what was asked (``doctor``: and found no warning).
EXIT_OK: Final = 0
#: The operation failed (``doctor``: it found a warning).
EXIT_FAILED: Final = 1
#: A usage or config error: nothing was tried.
EXIT_USAGE: Final = 2
#: mcp-tray is not running, and the command needs it.
EXIT_NOT_RUNNING: Final = 3
#: Stopped by Ctrl+C (128 + SIGINT, as shells report it).
EXIT_INTERRUPTED: Final = 130

#: What docs/cli.md says of each, in its order.
MEANINGS: Final = (
    (EXIT_OK, "ok"),
    (EXIT_FAILED, "the operation failed"),
    (EXIT_USAGE, "usage or config error"),
    (EXIT_NOT_RUNNING, "mcp-tray is not running"),
)
