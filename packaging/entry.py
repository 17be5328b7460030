"""The bundle's entry point: what ``dist/mcp-tray/mcp-tray`` runs.

It is ``app.entry.main`` (core's CLI with the tray), plus one thing only a frozen bundle needs. There
``sys.executable`` is this launcher, not a Python interpreter, so a config's
``${python}`` resolves to it (see core/config.py). When the first argument is
an existing ``*.py`` file the launcher therefore runs that script with the
bundle's own Python and packages (``mcp`` among them), as ``python FILE ARGS``
would: the bundled demo servers run from the bundle.
"""

import runpy
import sys
from pathlib import Path


def _script(argv: list[str]) -> Path | None:
    if not getattr(sys, "frozen", False) or not argv or not argv[0].endswith(".py"):
        return None
    path = Path(argv[0])
    return path if path.is_file() else None


def main() -> int:
    script = _script(sys.argv[1:])
    if script is not None:
        sys.argv = sys.argv[1:]
        sys.path.insert(0, str(script.resolve().parent))
        runpy.run_path(str(script), run_name="__main__")
        return 0
    from app.entry import main as cli_main

    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
