"""Qt tests: offscreen platform, async tests on a qasync loop (the one the app runs on).

Never qtbot.wait* inside an async test: it nests a Qt loop and the asyncio
task never advances (STACK-NOTES); await futures instead.
"""

import os
from collections.abc import Callable, Mapping
from typing import Any

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], Any]]:
    import qasync
    from PySide6.QtWidgets import QApplication

    def factory() -> Any:
        app = QApplication.instance() or QApplication([])
        # As in the app: closing a window must not quit (and so stop the loop).
        app.setQuitOnLastWindowClosed(False)  # type: ignore[attr-defined]
        return qasync.QEventLoop(app)

    return {"qasync": factory}
