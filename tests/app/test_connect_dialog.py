"""The "Connect a client…" dialog, offscreen, writing real files under tmp_path.

Strategy: the dialog gets its inputs as arguments (server names, the real
snippet builder, a tmp_path home), so it runs without a tray; its widgets
are driven as a user would (combo, check boxes, radios, the Install button)
with plain sync pytest-qt tests, and the files it writes are read back from
disk. Fixture files are the ones tests/cli/test_install.py uses.
"""

import json
import tomllib
from collections.abc import Sequence
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QFontDatabase
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot

from app.connect_dialog import ConnectDialog, for_service
from core.cli.install import BACKUP_INFIX, Entries, snippet_entries
from core.cli.integrations import client_config_path
from tests.support import paths

FIXTURES = paths.FIXTURES / "clients" / "install"


def make_entries(client: str, names: Sequence[str], http: bool) -> Entries:
    if http:
        return snippet_entries(client, names, http_url="http://127.0.0.1:28729", token="t0k")
    return snippet_entries(client, names)


def dialog(qtbot: QtBot, home: Path, names: Sequence[str] = ("echo", "notes")) -> ConnectDialog:
    shown = ConnectDialog(list(names), make_entries, home=home)
    qtbot.addWidget(shown)
    return shown


def install(qtbot: QtBot, shown: ConnectDialog) -> None:
    """Click Install and wait for the write (a flow on the GUI loop) to end."""
    QTest.mouseClick(shown.install_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: shown.writing is None, timeout=5000)


def choose(shown: ConnectDialog, client: str) -> None:
    shown.client_box.setCurrentIndex(shown.client_box.findData(client))


def place(client: str, fixture: Path, home: Path) -> Path:
    target = client_config_path(client, home=home)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(fixture.read_bytes())
    return target


def test_the_dialog_lists_the_servers_all_checked_and_previews_the_diff(
    qtbot: QtBot, tmp_path: Path
) -> None:
    path = place("cursor", FIXTURES / "cursor_mcp.json", tmp_path)
    shown = dialog(qtbot, tmp_path)
    choose(shown, "cursor")

    assert [shown.server_list.item(i).text() for i in range(shown.server_list.count())] == [
        "echo",
        "notes",
    ]
    assert shown.checked_servers() == ["echo", "notes"]
    assert shown.target_label.text() == str(path)
    diff = shown.preview.toPlainText()
    assert diff.startswith(f"--- {path}\n+++ {path}\n")
    assert '+        "echo": {' in diff and '+        "notes": {' in diff
    assert shown.preview.isReadOnly()
    # The font asked for, not the one a machine's installed fonts resolve it to.
    assert shown.preview.font() == QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
    assert shown.install_button.isEnabled()
    assert "restart Cursor" in shown.status.text()


def test_the_preview_follows_the_servers_the_transport_and_the_client(
    qtbot: QtBot, tmp_path: Path
) -> None:
    shown = dialog(qtbot, tmp_path)
    choose(shown, "vscode")
    assert '"servers": {' in shown.preview.toPlainText()

    shown.server_list.item(1).setCheckState(Qt.CheckState.Unchecked)
    assert '"notes"' not in shown.preview.toPlainText()

    shown.http_button.setChecked(True)
    assert "http://127.0.0.1:28729/mcp/echo" in shown.preview.toPlainText()

    choose(shown, "claude")  # stdio only: back to the bridge
    assert shown.bridge_button.isChecked() and not shown.http_button.isEnabled()
    assert '"mcpServers": {' in shown.preview.toPlainText()

    shown.server_list.item(0).setCheckState(Qt.CheckState.Unchecked)
    assert shown.preview.toPlainText() == ""
    assert not shown.install_button.isEnabled()
    assert shown.status.text() == "Choose at least one server."


def test_install_writes_the_file_and_says_where_the_backup_is_and_what_to_restart(
    qtbot: QtBot, tmp_path: Path
) -> None:
    path = place("claude", FIXTURES / "claude_desktop_config.json", tmp_path)
    shown = dialog(qtbot, tmp_path)
    choose(shown, "claude")

    with qtbot.waitSignal(shown.installed, timeout=5000):
        QTest.mouseClick(shown.install_button, Qt.MouseButton.LeftButton)

    written = json.loads(path.read_text())
    assert set(written["mcpServers"]) == {"filesystem", "echo", "notes"}
    assert written["globalShortcut"] == "Ctrl+Space"
    (backup,) = path.parent.glob(f"{path.name}{BACKUP_INFIX}*")
    status = shown.status.text()
    assert f"wrote {path}: added echo, notes" in status
    assert f"backup of the previous file: {backup}" in status
    assert "restart Claude Desktop" in status
    # Installed: nothing is left to do, so nothing more can be installed.
    assert shown.preview.toPlainText() == "" and not shown.install_button.isEnabled()


def test_codex_is_offered_and_gets_toml_tables_with_the_token_masked_in_the_preview(
    qtbot: QtBot, tmp_path: Path
) -> None:
    path = place("codex", FIXTURES / "codex_config.toml", tmp_path)
    shown = dialog(qtbot, tmp_path)
    choose(shown, "codex")
    shown.http_button.setChecked(True)

    preview = shown.preview.toPlainText()
    assert '+[mcp_servers.echo]\n+url = "http://127.0.0.1:28729/mcp/echo"' in preview
    assert "t0k" not in preview and '{Authorization = "Bearer ********", ' in preview
    with qtbot.waitSignal(shown.installed, timeout=5000):
        QTest.mouseClick(shown.install_button, Qt.MouseButton.LeftButton)

    written = tomllib.loads(path.read_text())
    assert written["mcp_servers"]["echo"]["http_headers"]["Authorization"] == "Bearer t0k"
    assert written["model"] == "gpt-5-codex" and "docs" in written["mcp_servers"]
    assert "start a new Codex session" in shown.status.text()


def test_an_invalid_target_file_shows_the_error_in_the_dialog(qtbot: QtBot, tmp_path: Path) -> None:
    path = place("claude-code", FIXTURES / "invalid.json", tmp_path)
    shown = dialog(qtbot, tmp_path)
    choose(shown, "claude-code")

    assert shown.status.text().startswith(f"{path}:5: is not valid JSON")
    assert "fix it or move it aside" in shown.status.text()
    assert shown.status.property("error") is True
    assert shown.preview.toPlainText() == "" and not shown.install_button.isEnabled()


def test_a_file_with_comments_is_left_alone_and_the_dialog_says_why(
    qtbot: QtBot, tmp_path: Path
) -> None:
    path = place("vscode", FIXTURES / "vscode_mcp_with_comments.json", tmp_path)
    original = path.read_bytes()
    shown = dialog(qtbot, tmp_path)
    choose(shown, "vscode")

    assert "holds comments or trailing commas" in shown.status.text()
    assert not shown.install_button.isEnabled()
    assert path.read_bytes() == original


def test_a_conflict_blocks_install_until_replace_is_ticked(qtbot: QtBot, tmp_path: Path) -> None:
    path = place("cursor", FIXTURES / "conflicting_mcp.json", tmp_path)
    shown = dialog(qtbot, tmp_path, names=["echo"])
    choose(shown, "cursor")
    assert "'echo' is already there and is not mcp-tray's" in shown.status.text()
    assert "tick 'Replace entries…'" in shown.status.text()
    assert not shown.install_button.isEnabled()

    shown.overwrite_box.setChecked(True)
    install(qtbot, shown)

    assert json.loads(path.read_text())["mcpServers"]["echo"]["args"][-2:] == ["connect", "echo"]
    assert shown.outcome is not None and shown.outcome.plan.updated == ("echo",)


def test_a_file_changed_behind_the_preview_is_not_overwritten_and_the_preview_catches_up(
    qtbot: QtBot, tmp_path: Path
) -> None:
    path = place("cursor", FIXTURES / "cursor_mcp.json", tmp_path)
    shown = dialog(qtbot, tmp_path)
    choose(shown, "cursor")
    path.write_text('{"mcpServers": {"added-meanwhile": {"command": "x"}}}\n')

    install(qtbot, shown)

    assert "changed since this install was planned" in shown.status.text()
    assert "added-meanwhile" in path.read_text() and '"echo"' not in path.read_text()
    assert "added-meanwhile" in shown.preview.toPlainText()  # the new diff, ready to install


def test_without_servers_the_dialog_says_to_configure_some(qtbot: QtBot, tmp_path: Path) -> None:
    shown = dialog(qtbot, tmp_path, names=[])
    assert "no servers configured" in shown.status.text()
    assert not shown.install_button.isEnabled()


class FakeService:
    """What for_service reads of a TrayService: its live config, paths, URL and token."""

    def __init__(self, port: int) -> None:
        from core.settings.config import parse_config

        config = parse_config(
            json.dumps(
                {
                    "mcpServers": {
                        "echo": {"command": "x"},
                        "off": {"command": "x", "disabled": True},
                    },
                    "gateway": {"port": port},
                }
            ),
            Path("config.json"),
        )
        self.supervisor = type("Supervisor", (), {"config": config})()
        # The per-user config is the one it runs on: its entries carry no --config.
        self.paths = type("Paths", (), {"config_file": Path("config.json")})()
        self.url = "http://127.0.0.1:41234"
        self.token = "t0k"


@pytest.mark.parametrize(
    ("port", "url"), [(28729, "http://127.0.0.1:28729"), (0, "http://127.0.0.1:41234")]
)
def test_the_tray_dialog_offers_the_enabled_servers_and_the_lasting_gateway_url(
    qtbot: QtBot, port: int, url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # for_service plans against the user's own home: make that tmp_path.
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    shown = for_service(FakeService(port))
    qtbot.addWidget(shown)

    assert shown.checked_servers() == ["echo"]
    entries = shown._make_entries("cursor", ["echo"], True)
    assert entries["echo"]["url"] == f"{url}/mcp/echo"
    assert entries["echo"]["headers"]["Authorization"] == "Bearer t0k"


# ------------------------------------------ the tray menu's entry (app/tray.py)


def test_the_tray_menu_has_connect_a_client_before_open_window(qtbot: QtBot) -> None:
    from PySide6.QtWidgets import QMenu

    from app.tray import build_menu
    from tests.app.scenes import Recording, snapshot, titles

    menu = QMenu()
    actions = Recording()
    build_menu(menu, snapshot(), actions)  # type: ignore[arg-type]

    assert titles(menu)[-3:] == ["Connect a client…", "Open window", "Quit"]
    next(a for a in menu.actions() if a.text() == "Connect a client…").trigger()
    assert actions.calls == [("connect_client", ())]


def test_connect_client_opens_one_dialog_and_brings_it_forward_when_clicked_again(
    qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.tray import TrayActions

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    link = type("Link", (), {"service": FakeService(28729)})()
    actions = TrayActions(link, lambda: None, lambda: None)

    actions.connect_client()
    first = actions._connect_dialog
    assert first is not None
    qtbot.addWidget(first)
    assert first.isVisible() and first.checked_servers() == ["echo"]
    actions.connect_client()
    assert actions._connect_dialog is first

    first.close()
    actions.connect_client()
    second = actions._connect_dialog
    assert second is not None and second is not first
    qtbot.addWidget(second)


def test_a_profile_is_offered_as_one_entry_instead_of_one_per_server(
    qtbot: QtBot, tmp_path: Path
) -> None:
    shown = ConnectDialog(["echo", "notes"], make_entries, profiles=["coding"], home=tmp_path)
    qtbot.addWidget(shown)
    choose(shown, "cursor")
    offered = [shown.what_box.itemData(i) for i in range(shown.what_box.count())]
    assert offered == [None, "@all", "@coding"]

    shown.what_box.setCurrentIndex(offered.index("@coding"))
    diff = shown.preview.toPlainText()
    assert '"mcp-tray-coding": {' in diff and '"echo"' not in diff
    assert '"connect",' in diff and '"@coding"' in diff
    assert not shown.server_list.isEnabled()
    install(qtbot, shown)
    written = json.loads(client_config_path("cursor", home=tmp_path).read_text())
    assert list(written["mcpServers"]) == ["mcp-tray-coding"]

    shown.what_box.setCurrentIndex(0)  # back to one entry per server
    assert shown.server_list.isEnabled()
    assert '"echo": {' in shown.preview.toPlainText()
