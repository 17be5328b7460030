"""The one registry of AI clients: each client's file on Linux, macOS and Windows.

Strategy: the OS is injected (``system=``), so the paths of all three are
checked here on Linux, under a tmp_path home (and a fake ``%APPDATA%``); a
client added to the registry for the test is then offered, without another
line of code, by ``client-config``'s snippets, its ``--install`` plan, the
command line's choices and the table of docs/clients.md. That table is
rendered from the registry: the committed page must hold what it renders,
and each path it shows must be the one the code resolves.
"""

import re
from pathlib import Path

import pytest

from core.base.errors import SnippetError
from core.cli.clients import client_snippet
from core.cli.install import plan_install, snippet_entries
from core.cli.integrations import (
    CLIENTS,
    PATHS_BEGIN,
    PATHS_END,
    SYSTEMS,
    Client,
    Place,
    client_config_path,
    importable_clients,
    installable_clients,
    main,
    page_table,
    paths_markdown,
    snippet_targets,
)
from core.cli.parser import build_parser
from tests.support import paths

HOME = Path("/home/ada")
CLIENTS_PAGE = paths.REPO / "docs" / "clients.md"
#: How the table writes each base folder, and where it is under HOME.
SHOWN_BASES = {
    "~/Library/Application Support": HOME / "Library/Application Support",
    "~/.config": HOME / ".config",
    "%APPDATA%": HOME / "AppData/Roaming",
    "%USERPROFILE%": HOME,
    "~": HOME,
}

WHERE = {
    "linux": {
        "claude": HOME / ".config/Claude/claude_desktop_config.json",
        "claude-code": HOME / ".claude.json",
        "cursor": HOME / ".cursor/mcp.json",
        "vscode": HOME / ".config/Code/User/mcp.json",
        "gemini": HOME / ".gemini/settings.json",
        "codex": HOME / ".codex/config.toml",
    },
    "darwin": {
        "claude": HOME / "Library/Application Support/Claude/claude_desktop_config.json",
        "claude-code": HOME / ".claude.json",
        "cursor": HOME / ".cursor/mcp.json",
        "vscode": HOME / "Library/Application Support/Code/User/mcp.json",
        "gemini": HOME / ".gemini/settings.json",
        "codex": HOME / ".codex/config.toml",
    },
    "win32": {
        "claude": HOME / "AppData/Roaming/Claude/claude_desktop_config.json",
        "claude-code": HOME / ".claude.json",
        "cursor": HOME / ".cursor/mcp.json",
        "vscode": HOME / "AppData/Roaming/Code/User/mcp.json",
        "gemini": HOME / ".gemini/settings.json",
        "codex": HOME / ".codex/config.toml",
    },
}


@pytest.mark.parametrize("system", sorted(WHERE))
def test_each_clients_file_is_where_that_client_reads_it_on_each_os(system: str) -> None:
    found = {c: client_config_path(c, home=HOME, system=system) for c in installable_clients()}
    assert found == WHERE[system]


def test_on_windows_the_roaming_appdata_folder_is_the_environments_own() -> None:
    appdata = Path("/mnt/c/Users/ada/AppData/Roaming")
    environ = {"APPDATA": str(appdata)}
    assert client_config_path("vscode", system="win32", environ=environ) == (
        appdata / "Code/User/mcp.json"
    )
    assert client_config_path("claude", system="win32", environ=environ) == (
        appdata / "Claude/claude_desktop_config.json"
    )


@pytest.mark.parametrize("system", sorted(WHERE))
def test_codex_home_moves_codexs_file_on_every_os_and_only_when_absolute(system: str) -> None:
    moved = {"CODEX_HOME": "/srv/codex"}
    assert client_config_path("codex", system=system, environ=moved) == Path(
        "/srv/codex/config.toml"
    )
    relative = {"CODEX_HOME": "codex"}
    assert client_config_path("codex", system=system, environ=relative) == (
        Path.home() / ".codex/config.toml"
    )


def test_only_the_xdg_clients_move_with_xdg_config_home_and_only_on_linux(tmp_path: Path) -> None:
    xdg = tmp_path / "xdg"
    assert client_config_path("vscode", home=HOME, xdg_config_home=xdg) == (
        xdg / "Code/User/mcp.json"
    )
    assert client_config_path("cursor", home=HOME, xdg_config_home=xdg) == (
        HOME / ".cursor/mcp.json"
    )
    assert (
        client_config_path("vscode", home=HOME, xdg_config_home=xdg, system="darwin")
        == (WHERE["darwin"]["vscode"])
    )


def test_the_registry_decides_what_each_command_offers() -> None:
    assert snippet_targets() == (
        "claude",
        "claude-code",
        "cursor",
        "vscode",
        "gemini",
        "codex",
        "inspector",
    )
    assert installable_clients() == ("claude", "claude-code", "cursor", "vscode", "gemini", "codex")
    assert importable_clients() == ("claude", "cursor", "vscode", "gemini", "codex")
    with pytest.raises(SnippetError, match="keeps no config file"):
        client_config_path("inspector")


def test_a_client_added_to_the_registry_is_offered_everywhere_without_more_code(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    newcomer = Client(
        "newcomer",
        "New Client",
        "new-client",
        key="mcp",
        entry_types=("local", "remote"),
        places={"linux": Place("home", ".newcomer/mcp.json")},
        restart="restart New Client",
    )
    monkeypatch.setitem(CLIENTS, "newcomer", newcomer)

    bridge = client_snippet("newcomer", ["echo"])["mcp"]["echo"]
    assert bridge["type"] == "local"
    assert bridge["env"] == {"MCP_TRAY_CLIENT": "new-client"}
    http = client_snippet("newcomer", ["echo"], http_url="http://127.0.0.1:1", token="t")
    assert http["mcp"]["echo"]["url"] == "http://127.0.0.1:1/mcp/echo"

    plan = plan_install("newcomer", snippet_entries("newcomer", ["echo"]), home=tmp_path)
    assert plan.path == tmp_path / ".newcomer/mcp.json"
    assert plan.added == ("echo",)
    assert plan.restart == "restart New Client"

    args = build_parser().parse_args(["client-config", "newcomer", "--install", "--dry-run"])
    assert args.client == "newcomer"


def test_the_clients_page_holds_the_table_the_registry_renders() -> None:
    table = page_table(CLIENTS_PAGE.read_text(encoding="utf-8"))

    assert table == paths_markdown(), (
        "docs/clients.md's table is stale: run "
        ".venv/bin/python -m core.cli.integrations --write docs/clients.md"
    )


def test_each_path_the_table_shows_is_the_one_the_code_resolves() -> None:
    rows = paths_markdown().splitlines()[2:]
    labels = {c.label: c.id for c in CLIENTS.values()}

    assert len(rows) == len(installable_clients())
    for row in rows:
        label, *cells = [cell.strip() for cell in row.strip("|").split(" | ")]
        for (system, _), cell in zip(SYSTEMS, cells, strict=True):
            shown = re.match(r"`([^`]+)`", cell)
            assert shown is not None, cell
            base = next(b for b in SHOWN_BASES if shown.group(1).startswith(b))
            rest = shown.group(1)[len(base) :].replace("\\", "/").lstrip("/")
            resolved = client_config_path(labels[label], home=HOME, system=system)
            assert SHOWN_BASES[base] / rest == resolved, (label, system)


def test_a_client_added_to_the_registry_gets_its_row_in_the_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    newcomer = Client(
        "newcomer",
        "New Client",
        "new-client",
        places={"linux": Place("home", ".newcomer/mcp.json")},
    )
    monkeypatch.setitem(CLIENTS, "newcomer", newcomer)

    row = paths_markdown().splitlines()[-1]

    assert row == (
        "| New Client | `~/.newcomer/mcp.json` | `~/.newcomer/mcp.json` "
        "| `%USERPROFILE%\\.newcomer\\mcp.json` |"
    )


def test_write_puts_the_table_between_the_markers_and_check_finds_it_stale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "clients.md"
    page.write_text(
        f"# Clients\n\n{PATHS_BEGIN}\n| old |\n{PATHS_END}\n\nafter\n", encoding="utf-8"
    )

    assert main(["--check", str(page)]) == 1
    assert main(["--write", str(page)]) == 0
    assert main(["--check", str(page)]) == 0

    text = page.read_text(encoding="utf-8")
    assert text == f"# Clients\n\n{PATHS_BEGIN}\n{paths_markdown()}\n{PATHS_END}\n\nafter\n"
    assert "stale" in capsys.readouterr().out


def test_a_page_without_the_markers_is_refused_and_left_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "clients.md"
    page.write_text("# Clients\n", encoding="utf-8")

    assert main(["--write", str(page)]) == 2

    assert page.read_text(encoding="utf-8") == "# Clients\n"
    assert "markers" in capsys.readouterr().err
