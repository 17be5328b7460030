"""core/ never imports Qt: import every core module in a fresh interpreter and look.

Strategy: a subprocess, so nothing this test process already imported (pytest-qt
loads PySide6) can hide a violation.
"""

import subprocess
import sys

from tests.support import paths

CORE = paths.REPO / "core"


def test_importing_every_core_module_loads_no_qt() -> None:
    modules = sorted(
        ".".join(path.relative_to(CORE.parent).with_suffix("").parts)
        for path in CORE.rglob("*.py")
        if path.stem != "__init__"
    )
    assert "core.supervision.supervisor" in modules
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('PySide6', 'qasync', 'shiboken6'))\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"core imported Qt: {result.stdout}"
