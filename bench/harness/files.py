"""Where the benches find the checkout and the scripts they run as children."""

from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[2]


ECHO_SCRIPT: Final = ROOT / "tests" / "servers" / "echo.py"
BENCH: Final = ROOT / "bench"
#: bench/scale.py's child: a stdio server lean enough to measure the tray in front of it.
LEAN_ECHO: Final = BENCH / "lean_echo.py"
#: bench/scale.py's probe session, in a process of its own.
PROBE_SCRIPT: Final = BENCH / "probe.py"
