"""Installing mcp-tray's servers into each client's own config file.

Strategy: fixture files shaped like each client's real config
(tests/fixtures/clients/install: other servers, other keys, a broken one, a
VS Code file with comments, a same-name entry that is not ours; Codex's in
TOML, with comments) are copied
to where that client keeps its file under a tmp_path home; plan_install and
apply_install run on them for real, and the tests read back the files,
backups and modes on disk. Entries come from client_snippet, as in the
product. The last tests drive `mcp-tray client-config --install` as a
subprocess, with HOME pointed at tmp_path.
"""

import json
import os
import stat
import tomllib
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from core.base.errors import CommandError, ConfigError, SnippetError
from core.cli.install import (
    BACKUP_INFIX,
    apply_install,
    is_mcp_tray_entry,
    plan_install,
    run_install,
    snippet_entries,
)
from core.cli.integrations import client_config_path, installable_clients
from tests.conftest import make_fifo
from tests.support import paths
from tests.support.cli_support import run_mcp_tray

FIXTURES = paths.FIXTURES / "clients" / "install"
#: Each client's fixture: a file with other servers and other keys.
EXISTING = {
    "claude": FIXTURES / "claude_desktop_config.json",
    "claude-code": FIXTURES / "claude.json",
    "cursor": FIXTURES / "cursor_mcp.json",
    "vscode": FIXTURES / "vscode_mcp.json",
    "gemini": FIXTURES / "gemini_settings.json",
    "codex": FIXTURES / "codex_config.toml",
}
KEY = {
    "claude": "mcpServers",
    "claude-code": "mcpServers",
    "cursor": "mcpServers",
    "gemini": "mcpServers",
    "codex": "mcp_servers",
}
FIXED_NOW = datetime(2026, 11, 30, 12, 0, 0)


def servers_key(client: str) -> str:
    return KEY.get(client, "servers")


def load(client: str, path: Path) -> dict[str, Any]:
    """``client``'s file as the client reads it (Codex's is TOML)."""
    text = path.read_text()
    return tomllib.loads(text) if client == "codex" else dict(json.loads(text))


def place(client: str, fixture: Path, home: Path) -> Path:
    """Copy ``fixture`` to where ``client`` keeps its config under ``home``."""
    target = client_config_path(client, home=home)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(fixture.read_bytes())
    return target


def backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(f"{path.name}{BACKUP_INFIX}*"))


def removed_lines(diff: str) -> list[str]:
    return [
        line for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")
    ]


def test_each_client_file_lives_where_that_client_reads_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert client_config_path("claude", home=home) == (
        home / ".config/Claude/claude_desktop_config.json"
    )
    assert client_config_path("claude-code", home=home) == home / ".claude.json"
    assert client_config_path("cursor", home=home) == home / ".cursor/mcp.json"
    assert client_config_path("vscode", home=home) == home / ".config/Code/User/mcp.json"
    xdg = tmp_path / "xdg"
    assert client_config_path("vscode", home=home, xdg_config_home=xdg) == (
        xdg / "Code/User/mcp.json"
    )
    # Only the config-home clients move with XDG_CONFIG_HOME.
    assert client_config_path("cursor", home=home, xdg_config_home=xdg) == (
        home / ".cursor/mcp.json"
    )


@pytest.mark.parametrize("client", installable_clients())
def test_installing_keeps_the_other_servers_and_keys_of_the_file_untouched(
    client: str, tmp_path: Path
) -> None:
    path = place(client, EXISTING[client], tmp_path)
    before_text = path.read_text()
    before = load(client, path)

    plan = plan_install(client, snippet_entries(client, ["echo", "notes"]), home=tmp_path)
    result = apply_install(plan)

    after = load(client, path)
    key = servers_key(client)
    assert result.written and plan.added == ("echo", "notes")
    assert {k: v for k, v in after.items() if k != key} == {
        k: v for k, v in before.items() if k != key
    }
    assert {n: e for n, e in after[key].items() if n not in ("echo", "notes")} == before[key]
    # Spliced, not re-serialised: no line of the user's file changes, but for
    # the comma JSON needs after what was the last server (TOML needs none).
    added = plan.diff.splitlines()
    assert client != "codex" or removed_lines(plan.diff) == []
    assert all(f"+{line[1:]}," in added for line in removed_lines(plan.diff))
    assert len(removed_lines(plan.diff)) <= 1
    assert all(line in path.read_text() for line in before_text.splitlines())


@pytest.mark.parametrize("client", installable_clients())
def test_the_entries_written_are_the_clients_own_snippet(client: str, tmp_path: Path) -> None:
    entries = snippet_entries(client, ["echo"], tray_home="/srv/tray")
    apply_install(plan_install(client, entries, home=tmp_path))

    written = load(client, client_config_path(client, home=tmp_path))
    entry = written[servers_key(client)]["echo"]
    assert entry == entries["echo"]
    assert entry["args"][-2:] == ["connect", "echo"]
    assert entry["env"]["MCP_TRAY_HOME"] == "/srv/tray"
    if client in ("vscode", "claude-code"):
        assert entry["type"] == "stdio"


def test_codexs_toml_keeps_its_comments_and_tables_and_gets_one_table_per_server(
    tmp_path: Path,
) -> None:
    path = place("codex", EXISTING["codex"], tmp_path)
    before = path.read_text()
    entries = snippet_entries("codex", ["echo"], http_url="http://127.0.0.1:28729", token="t0k")

    apply_install(plan_install("codex", entries, home=tmp_path))

    text = path.read_text()
    assert text.startswith(before.split("[profiles.fast]")[0])  # every line of the user's kept
    assert text.endswith('\n\n[profiles.fast]\nmodel = "gpt-5-mini"\n')
    assert "# pinned by the team" in text and "# the model for new sessions" in text
    assert '[mcp_servers.echo]\nurl = "http://127.0.0.1:28729/mcp/echo"\n' in text
    assert 'http_headers = {Authorization = "Bearer t0k", x-mcp-tray-identity = "codex"}' in text
    assert tomllib.loads(text)["mcp_servers"]["echo"] == entries["echo"]


def test_a_codex_file_that_is_not_toml_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = client_config_path("codex", home=tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text("[mcp_servers.x\ncommand = 1\n")

    with pytest.raises(ConfigError, match="not valid TOML") as caught:
        plan_install("codex", snippet_entries("codex", ["echo"]), home=tmp_path)
    assert str(path) in str(caught.value) and "move it aside" in str(caught.value)


def test_a_dry_run_shows_the_token_masked_in_json_and_in_toml(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for client in ("gemini", "codex"):
        entries = snippet_entries(client, ["echo"], http_url="http://127.0.0.1:1", token="t0k")
        code = run_install(client, entries, dry_run=True, overwrite=False, home=tmp_path)
        out = capsys.readouterr().out
        assert code == 0
        assert "t0k" not in out and "Bearer ********" in out
        assert not client_config_path(client, home=tmp_path).exists()


def test_a_client_file_that_is_a_fifo_is_refused_without_waiting(tmp_path: Path) -> None:
    path = client_config_path("gemini", home=tmp_path)
    path.parent.mkdir(parents=True)
    make_fifo(path)

    with pytest.raises(ConfigError, match="named pipe"):
        plan_install("gemini", snippet_entries("gemini", ["echo"]), home=tmp_path)


def test_claude_codes_project_scoped_servers_are_left_alone(tmp_path: Path) -> None:
    path = place("claude-code", EXISTING["claude-code"], tmp_path)
    project = json.loads(path.read_text())["projects"]["/home/me/src/app"]

    apply_install(
        plan_install("claude-code", snippet_entries("claude-code", ["echo"]), home=tmp_path)
    )

    after = json.loads(path.read_text())
    assert after["projects"]["/home/me/src/app"] == project  # its own "echo" included
    assert is_mcp_tray_entry("echo", after["mcpServers"]["echo"])


def test_a_backup_of_the_previous_file_is_kept_beside_it_with_its_bytes_and_mode(
    tmp_path: Path,
) -> None:
    path = place("cursor", EXISTING["cursor"], tmp_path)
    path.chmod(0o640)
    original = path.read_bytes()

    result = apply_install(
        plan_install("cursor", snippet_entries("cursor", ["echo"]), home=tmp_path),
        now=lambda: FIXED_NOW,
    )

    assert result.backup == path.with_name("mcp.json.bak-mcp-tray-20261130-120000")
    assert backups(path) == [result.backup]
    assert result.backup.read_bytes() == original
    assert stat.S_IMODE(result.backup.stat().st_mode) == 0o640
    assert stat.S_IMODE(path.stat().st_mode) == 0o640  # the written file keeps its mode
    assert f"backup of the previous file: {result.backup}" in str(result)


@pytest.mark.parametrize("client", installable_clients())
def test_a_second_install_changes_nothing_and_makes_no_second_backup(
    client: str, tmp_path: Path
) -> None:
    path = place(client, EXISTING[client], tmp_path)
    entries = snippet_entries(client, ["echo", "notes"])
    apply_install(plan_install(client, entries, home=tmp_path))
    after_first = path.read_bytes()
    mtime = path.stat().st_mtime_ns

    again = plan_install(client, entries, home=tmp_path)
    result = apply_install(again)

    assert not again.changes and again.diff == ""
    assert again.unchanged == ("echo", "notes")
    assert not result.written
    assert path.read_bytes() == after_first and path.stat().st_mtime_ns == mtime
    assert len(backups(path)) == 1
    assert str(result).startswith("nothing to change:")


def test_a_missing_file_is_created_with_its_folders_private_and_without_a_backup(
    tmp_path: Path,
) -> None:
    path = client_config_path("vscode", home=tmp_path)
    assert not path.parent.exists()

    plan = plan_install("vscode", snippet_entries("vscode", ["echo"]), home=tmp_path)
    result = apply_install(plan)

    assert plan.original is None and plan.diff.startswith("--- /dev/null")
    assert json.loads(path.read_text()) == {"servers": snippet_entries("vscode", ["echo"])}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert result.backup is None and backups(path) == []
    assert "no backup: the file is new" in str(result)


def test_an_empty_file_counts_as_an_empty_config(tmp_path: Path) -> None:
    path = client_config_path("cursor", home=tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text("")

    apply_install(plan_install("cursor", snippet_entries("cursor", ["echo"]), home=tmp_path))

    assert list(json.loads(path.read_text())["mcpServers"]) == ["echo"]


def test_a_dry_run_writes_nothing_and_its_diff_names_the_added_servers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = place("claude", EXISTING["claude"], tmp_path)
    original = path.read_bytes()

    code = run_install(
        "claude",
        snippet_entries("claude", ["echo", "notes"]),
        dry_run=True,
        overwrite=False,
        home=tmp_path,
    )

    out, err = capsys.readouterr()
    assert code == 0
    assert path.read_bytes() == original and backups(path) == []
    assert out.startswith(f"--- {path}\n+++ {path}\n")
    assert '+    "echo": {' in out and '+    "notes": {' in out
    assert "dry run, nothing written" in err and "adds echo, notes" in err
    assert "restart Claude Desktop" in err


def test_an_install_says_what_it_wrote_where_the_backup_is_and_what_to_restart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = place("cursor", EXISTING["cursor"], tmp_path)

    code = run_install(
        "cursor", snippet_entries("cursor", ["echo"]), dry_run=False, overwrite=False, home=tmp_path
    )

    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    assert lines[0] == f"wrote {path}: added echo"
    assert lines[1] == f"backup of the previous file: {backups(path)[0]}"
    assert lines[-1].startswith("restart Cursor")


def test_a_file_that_is_not_json_is_refused_naming_the_file_and_the_fix(tmp_path: Path) -> None:
    path = place("claude", FIXTURES / "invalid.json", tmp_path)
    original = path.read_bytes()

    with pytest.raises(ConfigError) as caught:
        plan_install("claude", snippet_entries("claude", ["echo"]), home=tmp_path)

    message = str(caught.value)
    assert message.startswith(f"{path}:5: is not valid JSON (Expecting ',' delimiter")
    assert "fix it or move it aside" in message
    assert "\n" not in message
    assert path.read_bytes() == original and backups(path) == []


def test_a_vs_code_file_with_comments_is_refused_rather_than_stripped_of_them(
    tmp_path: Path,
) -> None:
    path = place("vscode", FIXTURES / "vscode_mcp_with_comments.json", tmp_path)
    original = path.read_bytes()

    with pytest.raises(ConfigError) as caught:
        plan_install("vscode", snippet_entries("vscode", ["echo"]), home=tmp_path)

    message = str(caught.value)
    assert message.startswith(f"{path}: holds comments or trailing commas")
    assert "would lose" in message and "mcp-tray client-config vscode" in message
    assert path.read_bytes() == original


def test_a_same_name_entry_that_is_not_mcp_trays_is_a_conflict_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = place("cursor", FIXTURES / "conflicting_mcp.json", tmp_path)
    original = path.read_bytes()
    entries = snippet_entries("cursor", ["echo", "notes"])

    plan = plan_install("cursor", entries, home=tmp_path)

    assert [c.name for c in plan.conflicts] == ["echo"]
    assert plan.added == ("notes",)
    text = plan.conflict_text()
    assert text.startswith(f"{path}: 'echo' is already there and is not mcp-tray's")
    assert "runs npx -y some-other-echo-server" in text and "--overwrite" in text
    with pytest.raises(CommandError, match="Nothing was written") as caught:
        apply_install(plan)
    assert caught.value.code == 1
    assert run_install("cursor", entries, dry_run=True, overwrite=False, home=tmp_path) == 1
    assert "'echo' is already there" in capsys.readouterr().err
    assert path.read_bytes() == original and backups(path) == []


def test_overwrite_replaces_a_conflicting_entry_and_nothing_else(tmp_path: Path) -> None:
    path = place("cursor", FIXTURES / "conflicting_mcp.json", tmp_path)
    sqlite = json.loads(path.read_text())["mcpServers"]["sqlite"]
    entries = snippet_entries("cursor", ["echo"])

    plan = plan_install("cursor", entries, home=tmp_path, overwrite=True)
    apply_install(plan)

    after = json.loads(path.read_text())["mcpServers"]
    assert plan.conflicts == () and plan.updated == ("echo",)
    assert after == {"echo": entries["echo"], "sqlite": sqlite}
    assert len(backups(path)) == 1


def test_a_codex_table_of_the_same_name_is_a_conflict_until_overwrite_replaces_it_alone(
    tmp_path: Path,
) -> None:
    # The user's own [mcp_servers.docs] table: mcp-tray's "docs" must not replace it silently.
    path = place("codex", EXISTING["codex"], tmp_path)
    original = path.read_bytes()
    entries = snippet_entries("codex", ["docs"])

    refused = plan_install("codex", entries, home=tmp_path)
    with pytest.raises(CommandError, match="Nothing was written"):
        apply_install(refused)
    assert [c.name for c in refused.conflicts] == ["docs"]
    assert path.read_bytes() == original and backups(path) == []

    result = apply_install(plan_install("codex", entries, home=tmp_path, overwrite=True))

    after = tomllib.loads(path.read_text())
    assert after["mcp_servers"]["docs"] == entries["docs"]
    assert (
        after["mcp_servers"]["remote"] == tomllib.loads(original.decode())["mcp_servers"]["remote"]
    )
    assert after["profiles"] == {"fast": {"model": "gpt-5-mini"}}
    assert "# Codex settings, kept by hand." in path.read_text()
    assert result.backup is not None and backups(path) == [result.backup]
    assert result.backup.read_bytes() == original


def test_an_older_mcp_tray_entry_of_the_same_name_is_updated_without_overwrite(
    tmp_path: Path,
) -> None:
    path = place("cursor", FIXTURES / "older_mcp_tray_mcp.json", tmp_path)

    plan = plan_install("cursor", snippet_entries("cursor", ["echo"]), home=tmp_path)
    apply_install(plan)

    assert plan.conflicts == () and plan.updated == ("echo",)
    assert json.loads(path.read_text())["mcpServers"]["echo"]["command"] != (
        "/opt/old-venv/bin/mcp-tray"
    )


def test_switching_to_http_updates_the_entries_and_keeps_the_first_backup(
    tmp_path: Path,
) -> None:
    path = place("claude-code", EXISTING["claude-code"], tmp_path)
    original = path.read_bytes()
    apply_install(
        plan_install("claude-code", snippet_entries("claude-code", ["echo"]), home=tmp_path),
        now=lambda: FIXED_NOW,
    )
    http = snippet_entries("claude-code", ["echo"], http_url="http://127.0.0.1:28729", token="t0k")

    plan = plan_install("claude-code", http, home=tmp_path)
    result = apply_install(plan, now=lambda: FIXED_NOW)  # the same second

    assert plan.updated == ("echo",)
    entry = json.loads(path.read_text())["mcpServers"]["echo"]
    assert entry["type"] == "http" and entry["url"] == "http://127.0.0.1:28729/mcp/echo"
    first, second = backups(path)
    assert first.read_bytes() == original  # not overwritten by the second install
    assert second == result.backup and second.name.endswith("-120000-2")


def test_a_file_others_can_read_gets_a_note_when_it_receives_the_api_token(
    tmp_path: Path,
) -> None:
    path = place("cursor", EXISTING["cursor"], tmp_path)
    path.chmod(0o644)
    http = snippet_entries("cursor", ["echo"], http_url="http://127.0.0.1:28729", token="t0k")

    result = apply_install(plan_install("cursor", http, home=tmp_path))

    assert f"chmod 600 {path}" in str(result)


def test_a_symlinked_config_is_written_through_the_link(tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles" / "cursor-mcp.json"
    dotfiles.parent.mkdir()
    dotfiles.write_bytes(EXISTING["cursor"].read_bytes())
    link = client_config_path("cursor", home=tmp_path)
    link.parent.mkdir(parents=True)
    link.symlink_to(dotfiles)

    result = apply_install(
        plan_install("cursor", snippet_entries("cursor", ["echo"]), home=tmp_path)
    )

    assert link.is_symlink()
    assert "echo" in json.loads(dotfiles.read_text())["mcpServers"]
    assert result.backup is not None and result.backup.parent == dotfiles.parent


def test_a_file_that_changed_after_the_plan_is_not_overwritten(tmp_path: Path) -> None:
    path = place("cursor", EXISTING["cursor"], tmp_path)
    plan = plan_install("cursor", snippet_entries("cursor", ["echo"]), home=tmp_path)
    path.write_text('{"mcpServers": {"added-meanwhile": {"command": "x"}}}\n')

    with pytest.raises(CommandError, match="changed since this install was planned"):
        apply_install(plan)

    assert "added-meanwhile" in path.read_text() and backups(path) == []


def test_one_line_and_tab_indented_files_keep_their_layout(tmp_path: Path) -> None:
    one_line = client_config_path("cursor", home=tmp_path)
    one_line.parent.mkdir(parents=True)
    one_line.write_text('{"mcpServers": {"a": {"command": "x"}}, "z": 1}')
    apply_install(plan_install("cursor", snippet_entries("cursor", ["echo"]), home=tmp_path))
    text = one_line.read_text()
    assert "\n" not in text and text.startswith('{"mcpServers": {"a": {"command": "x"}, "echo": {')

    tabbed = place("vscode", EXISTING["vscode"], tmp_path)
    apply_install(plan_install("vscode", snippet_entries("vscode", ["echo"]), home=tmp_path))
    assert '\n\t\t"echo": {\n\t\t\t"type": "stdio",' in tabbed.read_text()


def test_a_file_without_the_servers_key_gets_one(tmp_path: Path) -> None:
    path = client_config_path("claude", home=tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text('{\n  "globalShortcut": "Ctrl+Space"\n}\n')

    apply_install(plan_install("claude", snippet_entries("claude", ["echo"]), home=tmp_path))

    after = json.loads(path.read_text())
    assert after["globalShortcut"] == "Ctrl+Space" and list(after["mcpServers"]) == ["echo"]


def test_a_servers_key_that_is_not_an_object_is_refused(tmp_path: Path) -> None:
    path = client_config_path("cursor", home=tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text('{"mcpServers": []}\n')

    with pytest.raises(ConfigError, match=r"mcpServers: is not a JSON object"):
        plan_install("cursor", snippet_entries("cursor", ["echo"]), home=tmp_path)


def test_the_inspector_and_an_empty_server_list_are_refused_with_what_to_do(
    tmp_path: Path,
) -> None:
    with pytest.raises(SnippetError, match="client-config inspector") as inspector:
        plan_install("inspector", snippet_entries("inspector", ["echo"]), home=tmp_path)
    with pytest.raises(SnippetError, match="--server NAME") as empty:
        plan_install("cursor", {}, home=tmp_path)
    assert inspector.value.code == empty.value.code == 2


@pytest.mark.parametrize(
    ("client", "label"),
    [
        ("claude", "Claude Desktop"),
        ("claude-code", "Claude Code"),
        ("cursor", "Cursor"),
        ("vscode", "VS Code"),
        ("gemini", "Gemini CLI"),
        ("codex", "Codex"),
    ],
)
def test_the_last_line_says_which_client_to_restart(
    client: str, label: str, tmp_path: Path
) -> None:
    result = apply_install(plan_install(client, snippet_entries(client, ["echo"]), home=tmp_path))
    last = result.lines()[-1]
    assert last.startswith((f"restart {label}", f"start a new {label} session"))


def test_a_gemini_install_says_how_to_trust_the_folder_its_entries_need(tmp_path: Path) -> None:
    # Gemini CLI lists every entry as "Disabled" in a folder it was not told to trust.
    last = apply_install(plan_install("gemini", snippet_entries("gemini", ["echo"]), home=tmp_path))
    step = last.lines()[-1]
    assert "Disabled" in step and '"Trust folder"' in step
    assert "~/.gemini/trustedFolders.json" in step


# ---------------------------------------------------------- the command


def cli_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "XDG_CONFIG_HOME"}
    return dict(env, HOME=str(tmp_path / "home"), MCP_TRAY_HOME=str(tmp_path / "tray"))


def test_client_config_install_dry_run_prints_the_diff_and_writes_nothing(tmp_path: Path) -> None:
    path = place("cursor", EXISTING["cursor"], tmp_path / "home")
    original = path.read_bytes()

    result = run_mcp_tray(
        cli_env(tmp_path), "client-config", "cursor", "--server", "echo", "--install", "--dry-run"
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"--- {path}\n") and '+        "echo": {' in result.stdout
    assert path.read_bytes() == original and backups(path) == []


def test_client_config_install_writes_then_finds_nothing_to_change(tmp_path: Path) -> None:
    path = place("claude", EXISTING["claude"], tmp_path / "home")
    args = ("client-config", "claude", "--server", "echo", "--install")

    first = run_mcp_tray(cli_env(tmp_path), *args)
    second = run_mcp_tray(cli_env(tmp_path), *args)

    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[0] == f"wrote {path}: added echo"
    assert "backup of the previous file:" in first.stdout
    assert first.stdout.splitlines()[-1].startswith("restart Claude Desktop")
    entry = json.loads(path.read_text())["mcpServers"]["echo"]
    assert entry["env"]["MCP_TRAY_HOME"] == str((tmp_path / "tray").resolve())
    assert second.returncode == 0 and second.stdout.startswith("nothing to change:")
    assert len(backups(path)) == 1


def test_client_config_install_exit_codes_say_conflict_and_broken_file(tmp_path: Path) -> None:
    place("cursor", FIXTURES / "conflicting_mcp.json", tmp_path / "home")
    place("claude", FIXTURES / "invalid.json", tmp_path / "home")

    conflict = run_mcp_tray(
        cli_env(tmp_path), "client-config", "cursor", "--server", "echo", "--install"
    )
    overwritten = run_mcp_tray(
        cli_env(tmp_path),
        "client-config",
        "cursor",
        "--server",
        "echo",
        "--install",
        "--overwrite",
    )
    broken = run_mcp_tray(
        cli_env(tmp_path), "client-config", "claude", "--server", "echo", "--install"
    )
    stray = run_mcp_tray(cli_env(tmp_path), "client-config", "cursor", "--dry-run")

    assert conflict.returncode == 1 and "--overwrite" in conflict.stderr
    assert overwritten.returncode == 0, overwritten.stderr
    assert broken.returncode == 2 and "fix it or move it aside" in broken.stderr
    assert len(broken.stderr.strip().splitlines()) == 1
    assert stray.returncode == 2 and "--install" in stray.stderr


def test_client_config_profile_installs_one_entry_for_the_profile(tmp_path: Path) -> None:
    config = tmp_path / "tray" / "config" / "config.json"
    config.parent.mkdir(parents=True)
    servers = {"github": {"command": "gh"}, "fs": {"command": "fs"}}
    config.write_text(json.dumps({"mcpServers": servers, "profiles": {"coding": {}}}))
    path = place("cursor", EXISTING["cursor"], tmp_path / "home")
    env = cli_env(tmp_path)
    args = ("client-config", "cursor", "--config", str(config))

    installed = run_mcp_tray(env, *args, "--profile", "coding", "--install")
    everything = run_mcp_tray(env, *args, "--profile", "all", "--http")
    unknown = run_mcp_tray(env, *args, "--profile", "chat")
    again = run_mcp_tray(env, *args, "--profile", "coding", "--install")

    assert installed.returncode == 0, installed.stderr
    entries = json.loads(path.read_text())["mcpServers"]
    assert "mcp-tray-coding" in entries and not {"github", "fs"} & set(entries)
    assert entries["mcp-tray-coding"]["args"][-2:] == ["connect", "@coding"]
    # An HTTP entry for every server at once (needs the token a tray made: none here).
    assert everything.returncode != 0 and "no API token yet" in everything.stderr
    assert unknown.returncode == 2 and "there is no profile 'chat'" in unknown.stderr
    assert "profiles: all, coding" in unknown.stderr
    assert again.returncode == 0 and again.stdout.startswith("nothing to change:")


def test_an_http_entry_of_ours_is_recognised_on_every_loopback_name_the_guard_accepts() -> None:
    """One loopback list (core.base.loopback) for the guard and the installer: an entry
    the gateway would serve is mcp-tray's own, whichever loopback name it uses."""
    from core.base.loopback import LOOPBACK_HOSTS

    for host in sorted(LOOPBACK_HOSTS):
        assert is_mcp_tray_entry("echo", {"type": "http", "url": f"http://{host}:28729/mcp/echo"})
    for host in ("127.0.0.2", "example.com", "[::2]", "localhost.evil"):
        assert not is_mcp_tray_entry("echo", {"url": f"http://{host}:28729/mcp/echo"}), host
