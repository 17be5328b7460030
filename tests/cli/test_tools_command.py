"""``mcp-tray tools NAME [--json]`` and ``GET /api/v1/servers/{name}/tools``; ``run --minimized``.

Strategy: a real headless tray in a subprocess (the ``headless``
fixture) running tests/servers/echo.py, asked through the real CLI; the
rows are the window's own (core.supervision.offer). ``--minimized`` is
checked at the seam core's CLI hands the GUI: a recording launcher.
"""

import json
from pathlib import Path
from typing import Any

import pytest

from core.cli.main import main as cli_main
from core.settings.config import TrayConfig
from core.settings.paths import Paths
from tests.conftest import ECHO, python_server
from tests.support.cli_support import cli


def test_tools_lists_the_real_servers_tools_with_the_retry_mark(headless: Any) -> None:
    tray = headless({"mcpServers": {"echo": python_server(ECHO)}})
    tray.wait_state("echo", "ready")

    result = cli(tray.home, "tools", "echo", "--json")
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    marks = {tool["name"]: tool["retried_after_crash"] for tool in body["tools"]}
    assert marks["echo"] and marks["slow_read"]
    assert not marks["slow_write"] and not marks["write_note"]
    assert (body["resources"], body["prompts"], body["retry"]) == (1, 1, "safe")

    result = cli(tray.home, "tools", "echo")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any(line.split()[:2] == ["echo", "retried"] for line in lines)
    assert any(line.split()[:3] == ["write_note", "not", "retried"] for line in lines)
    assert "1 resource(s)" in lines[-1] and "1 prompt(s)" in lines[-1]

    result = cli(tray.home, "tools", "ghost")
    assert result.returncode == 1
    assert "no server named 'ghost'" in result.stderr


@pytest.mark.parametrize(("argv", "minimized"), [([], False), (["run", "--minimized"], True)])
def test_only_the_autostarts_minimized_run_asks_the_gui_to_stay_in_the_tray(
    argv: list[str],
    minimized: bool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MCP_TRAY_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DISPLAY", ":0")
    monkeypatch.delenv("MCP_TRAY_HEADLESS", raising=False)
    calls: list[dict[str, Any]] = []

    def launcher(
        config: TrayConfig,
        paths: Paths,
        config_error: str | None = None,
        *,
        minimized: bool = False,
    ) -> int:
        calls.append({"minimized": minimized, "error": config_error})
        return 0

    assert cli_main(argv, gui=lambda: launcher) == 0
    assert calls == [{"minimized": minimized, "error": None}]
