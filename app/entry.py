"""The ``mcp-tray`` console script: core's command line, with the tray wired in.

core/ never imports app/, so the one place that knows both is here: with no
subcommand (or ``run`` without ``--headless``) and a display, core's CLI
asks ``_gui`` for the tray; every other command is core's alone.
"""

import sys
from collections.abc import Sequence

from core.cli.main import main as cli_main
from core.cli.tray import GuiLauncher


def _gui() -> GuiLauncher | None:
    try:
        from app.main import run_gui
    except ImportError as exc:
        print(f"mcp-tray: the tray cannot start ({exc}): running headless", file=sys.stderr)
        return None
    return run_gui


def main(argv: Sequence[str] | None = None) -> int:
    return cli_main(argv, gui=_gui)


if __name__ == "__main__":
    sys.exit(main())
