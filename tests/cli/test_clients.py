"""Client integration: snippets in each client's format, and imports from each client.

Strategy: snippets are parsed back as the client would (JSON, with the
client's own top-level key); imports run against fixture files shaped like
each client's real config (tests/fixtures/clients) into a real config file,
twice, and the second run must change nothing. The keyring is the test one.
"""

import json
import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from core.cli import integrations
from core.cli.client_files import strip_jsonc
from core.cli.clients import client_snippet
from core.cli.importer import import_servers, read_client_servers
from core.settings.config import load_config
from core.settings.secrets import get_secret
from tests.conftest import make_fifo
from tests.support import paths
from tests.support.cli_support import run_mcp_tray
from tests.support.fake_keyring import FileKeyring

FIXTURES = paths.FIXTURES / "clients"
SOURCES = {
    "claude": FIXTURES / "claude_desktop_config.json",
    "cursor": FIXTURES / "cursor_mcp.json",
    "vscode": FIXTURES / "vscode_mcp.json",
    "gemini": FIXTURES / "gemini_settings.json",
    "codex": FIXTURES / "codex_config.toml",
}


@pytest.mark.parametrize("client", ["claude", "claude-code", "cursor", "vscode", "inspector"])
def test_a_bridge_snippet_is_in_the_clients_own_format(client: str) -> None:
    snippet = json.loads(json.dumps(client_snippet(client, ["echo", "notes"])))
    key = "servers" if client == "vscode" else "mcpServers"
    assert list(snippet) == [key]
    entry = snippet[key]["echo"]
    assert entry["args"] == ["connect", "echo"]
    assert Path(entry["command"]).name == "mcp-tray"
    assert entry["env"]["MCP_TRAY_CLIENT"]
    if client in ("vscode", "claude-code", "inspector"):
        assert entry["type"] == "stdio"


@pytest.mark.parametrize(
    ("client", "url", "headers"),
    [
        ("claude-code", "url", "headers"),
        ("cursor", "url", "headers"),
        ("vscode", "url", "headers"),
        ("gemini", "httpUrl", "headers"),
        ("codex", "url", "http_headers"),
    ],
)
def test_an_http_snippet_points_at_the_gateway_with_the_token_and_names_its_client(
    client: str, url: str, headers: str
) -> None:
    snippet = client_snippet(client, ["echo"], http_url="http://127.0.0.1:4321", token="t0k")
    entry = next(iter(snippet.values()))["echo"]
    assert entry[url] == "http://127.0.0.1:4321/mcp/echo"
    assert entry[headers] == {
        "Authorization": "Bearer t0k",
        "x-mcp-tray-identity": integrations.client(client).registered_as,
    }


def test_the_inspector_gets_the_url_shape_it_does_not_rewrite() -> None:
    snippet = client_snippet("inspector", ["echo"], http_url="http://127.0.0.1:4321", token="t0k")
    entry = snippet["mcpServers"]["echo"]
    assert entry["type"] == "streamable-http"
    assert entry["url"] == "http://127.0.0.1:4321/echo/mcp"


def test_a_profile_is_one_entry_whose_url_or_bridge_reaches_the_profile() -> None:
    from core.cli.install import is_mcp_tray_entry

    url = "http://127.0.0.1:4321"
    http = client_snippet("cursor", ["@all", "@coding"], http_url=url, token="t0k")
    inspector = client_snippet("inspector", ["@coding"], http_url=url, token="t0k")
    bridge = client_snippet("cursor", ["@coding"])

    entries = http["mcpServers"]
    assert entries["mcp-tray"]["url"] == f"{url}/mcp/@all"
    assert entries["mcp-tray-coding"]["url"] == f"{url}/mcp/@coding"
    assert inspector["mcpServers"]["mcp-tray-coding"]["url"] == f"{url}/@coding/mcp"
    assert bridge["mcpServers"]["mcp-tray-coding"]["args"][-2:] == ["connect", "@coding"]
    # Written by mcp-tray, so a later install may update them.
    assert all(is_mcp_tray_entry(name, entry) for name, entry in entries.items())
    assert not is_mcp_tray_entry("mine", {"url": "https://example.com/mcp"})
    # Another local server at /mcp is not mcp-tray's: only an entry named for its profile is.
    assert not is_mcp_tray_entry("figma", {"url": "http://127.0.0.1:3845/mcp"})
    assert not is_mcp_tray_entry("figma", {"url": f"{url}/mcp/@coding"})


def test_claude_desktop_gets_no_http_snippet() -> None:
    from core.base.errors import SnippetError

    with pytest.raises(SnippetError, match="--bridge"):
        client_snippet("claude", ["echo"], http_url="http://127.0.0.1:1", token="t")


def test_client_config_codex_prints_toml_tables_codex_reads(tmp_path: Path) -> None:
    env = {**os.environ, "MCP_TRAY_HOME": str(tmp_path / "tray")}
    result = run_mcp_tray(env, "client-config", "codex", "--server", "echo", "--server", "a.b")

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("[mcp_servers.echo]\n")
    servers = tomllib.loads(result.stdout)["mcp_servers"]
    assert list(servers) == ["echo", "a.b"]
    assert servers["echo"]["args"][-2:] == ["connect", "echo"]
    assert servers["echo"]["env"]["MCP_TRAY_CLIENT"] == "codex"


def test_jsonc_comments_and_trailing_commas_are_understood() -> None:
    assert json.loads(strip_jsonc('{"a": "//not a comment", /* c */ "b": [1, 2,], // end\n}')) == {
        "a": "//not a comment",
        "b": [1, 2],
    }


@pytest.mark.parametrize("client", ["claude", "cursor", "vscode", "gemini", "codex"])
def test_importing_a_clients_servers_twice_changes_nothing_the_second_time(
    client: str, tmp_path: Path
) -> None:
    config = tmp_path / "config.json"
    config.write_text('{"mcpServers": {}}')
    source = read_client_servers(client, SOURCES[client])

    first = import_servers(client, source, config, move_secret=lambda name, value: False)
    after_first = config.read_text()
    second = import_servers(client, source, config, move_secret=lambda name, value: False)

    assert first.added
    assert second.added == [] and second.renamed == []
    assert sorted(second.duplicates) == sorted(first.added)
    assert config.read_text() == after_first
    loaded = load_config(config)
    assert set(loaded.servers) == set(first.added)
    skipped = dict(first.skipped)
    if client == "claude":
        assert "already goes through mcp-tray" in skipped["tray-echo"]
    remotes = {n: c.remote for n, c in loaded.servers.items() if c.remote is not None}
    if client == "cursor":
        remote = remotes["remote-docs"]
        assert (remote.url, remote.transport) == ("https://mcp.example.com/sse", "sse")
    if client == "vscode":
        assert "${workspaceFolder}" in skipped["workspace-files"]
        assert remotes["remote"].url == "https://example.com/mcp"
    if client == "gemini":
        assert first.added == ["git", "github"]
        assert remotes["github"].url == "https://api.githubcopilot.com/mcp/"
        assert remotes["github"].transport == "streamable-http"
        assert first.secrets_kept == ["github Authorization"]
    if client == "codex":
        assert first.added == ["time", "fetch", "figma"]
        assert remotes["figma"].url == "http://127.0.0.1:3845/mcp"
        assert loaded.servers["fetch"].disabled and not loaded.servers["time"].disabled


def test_an_existing_server_of_the_same_name_but_another_launch_is_kept_and_the_import_renamed(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.json"
    config.write_text('{"mcpServers": {"filesystem": {"command": "node", "args": ["fs.js"]}}}')
    source = read_client_servers("cursor", SOURCES["cursor"])

    report = import_servers("cursor", source, config, move_secret=lambda n, v: False)

    assert ("filesystem", "filesystem-cursor") in report.renamed
    servers = load_config(config).servers
    assert servers["filesystem"].command == "node"
    assert servers["filesystem-cursor"].command == "npx"


def test_secret_looking_values_move_to_the_keyring_when_accepted(
    tmp_path: Path, fake_keyring: FileKeyring
) -> None:
    config = tmp_path / "config.json"
    source = read_client_servers("claude", SOURCES["claude"])

    def accept(name: str, value: str) -> bool:
        from core.settings.secrets import set_secret

        set_secret(name, value)
        return True

    report = import_servers("claude", source, config, move_secret=accept)

    assert report.secrets_moved == ["github GITHUB_PERSONAL_ACCESS_TOKEN"]
    env = load_config(config).servers["github"].env
    assert env["GITHUB_PERSONAL_ACCESS_TOKEN"] == "${keyring:github.GITHUB_PERSONAL_ACCESS_TOKEN}"
    assert get_secret("github.GITHUB_PERSONAL_ACCESS_TOKEN") == "ghp_example_not_real"
    assert "ghp_example" not in config.read_text()


def run_cli(
    home: Path, *args: str, stdin: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    from core.settings.paths import default_paths
    from tests.support.gateway_support import bridge_env

    env = bridge_env(default_paths({"MCP_TRAY_HOME": str(home)}))
    return run_mcp_tray(env, *args, stdin=stdin, timeout=timeout)


def test_the_import_command_merges_a_client_file_without_prompting_when_not_interactive(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    source = tmp_path / "vscode.json"
    shutil.copy(SOURCES["vscode"], source)

    first = run_cli(home, "import", "vscode", "--path", str(source))
    second = run_cli(home, "import", "vscode", "--path", str(source))

    assert first.returncode == 0, first.stderr
    assert "added memory" in first.stdout and "added weather" in first.stdout
    assert "left as plain text" in first.stdout
    assert second.returncode == 0 and "already there: memory" in second.stdout
    assert json.loads((home / "config" / "config.json").read_text())["mcpServers"]["weather"][
        "args"
    ] == ["/opt/weather/index.js"]


@pytest.mark.parametrize("client", ["gemini", "codex"])
def test_an_import_from_a_fifo_is_refused_at_once_naming_the_file(
    client: str, tmp_path: Path
) -> None:
    # read_text waited forever for a writer here: import uses the hostile-file reader now.
    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    source = tmp_path / SOURCES[client].name
    make_fifo(source)

    result = run_cli(home, "import", client, "--path", str(source), timeout=20)

    assert result.returncode == 2, result.stdout + result.stderr
    assert str(source) in result.stderr
    assert "a named pipe (FIFO), not a regular file" in result.stderr
    assert not (home / "config" / "config.json").exists()


def test_secret_set_and_rm_through_the_cli(tmp_path: Path, fake_keyring: FileKeyring) -> None:
    home = tmp_path / "home"
    stored = run_cli(home, "secret", "set", "github-token", "--stdin", stdin="ghp_123\n")
    assert stored.returncode == 0, stored.stderr
    assert "${keyring:github-token}" in stored.stdout
    assert get_secret("github-token") == "ghp_123"
    assert run_cli(home, "secret", "rm", "github-token").returncode == 0
    assert get_secret("github-token") is None
    missing = run_cli(home, "secret", "rm", "github-token")
    assert missing.returncode == 1 and "no secret named" in missing.stderr


def test_client_config_prints_a_snippet_for_the_configured_servers(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    (home / "config" / "config.json").write_text(
        '{"mcpServers": {"a": {"command": "x"}, "b": {"command": "y", "disabled": true}}}'
    )

    result = run_cli(home, "client-config", "cursor")

    assert result.returncode == 0, result.stderr
    assert list(json.loads(result.stdout)["mcpServers"]) == ["a"]
    assert run_cli(home, "client-config", "claude", "--server", "nope").returncode == 2


def test_a_bridge_snippet_carries_mcp_tray_home_when_given() -> None:
    entry = client_snippet("cursor", ["echo"], home="/srv/tray home")["mcpServers"]["echo"]
    assert entry["env"] == {"MCP_TRAY_CLIENT": "cursor", "MCP_TRAY_HOME": "/srv/tray home"}
    assert "MCP_TRAY_HOME" not in client_snippet("cursor", ["echo"])["mcpServers"]["echo"]["env"]
    # An HTTP entry names the tray by its URL: it needs no home.
    http = client_snippet("cursor", ["echo"], http_url="http://127.0.0.1:1", token="t", home="/x")
    assert "env" not in http["mcpServers"]["echo"]


def test_client_config_puts_the_callers_mcp_tray_home_into_the_bridge_env(tmp_path: Path) -> None:
    home = tmp_path / "home"
    result = run_cli(home, "client-config", "claude", "--server", "echo")

    assert result.returncode == 0, result.stderr
    env = json.loads(result.stdout)["mcpServers"]["echo"]["env"]
    # Absolute, as mcp-tray resolves it: the client starts the bridge elsewhere.
    assert env["MCP_TRAY_HOME"] == str(home.resolve())
    assert f"MCP_TRAY_HOME={home.resolve()}" in result.stderr


def test_client_config_leaves_mcp_tray_home_out_when_it_is_not_set(tmp_path: Path) -> None:
    from core.settings.paths import default_paths
    from tests.support.gateway_support import bridge_env

    env = bridge_env(default_paths({"MCP_TRAY_HOME": str(tmp_path / "home")}))
    del env["MCP_TRAY_HOME"]
    # The per-user folders, then, which must not be the real ones.
    env |= {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    config = tmp_path / "mine.json"
    config.write_text('{"mcpServers": {"a": {"command": "x"}}}')

    result = run_mcp_tray(env, "client-config", "vscode", "--config", str(config))

    assert result.returncode == 0, result.stderr
    entry = json.loads(result.stdout)["servers"]["a"]
    assert entry["env"] == {"MCP_TRAY_CLIENT": "vscode"}


def test_client_config_needs_no_config_file_for_a_bridge_snippet(tmp_path: Path) -> None:
    home = tmp_path / "home"

    listed = run_cli(home, "client-config", "cursor")
    named = run_cli(home, "client-config", "vscode", "--server", "echo", "--server", "notes")
    bad = run_cli(home, "client-config", "cursor", "--server", "not a name")

    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == {"mcpServers": {}}
    assert "no config at" in listed.stderr and "--server NAME" in listed.stderr
    assert named.returncode == 0, named.stderr
    servers = json.loads(named.stdout)["servers"]
    assert list(servers) == ["echo", "notes"]
    assert servers["notes"]["args"][-2:] == ["connect", "notes"]
    assert bad.returncode == 2 and "not a server name" in bad.stderr
    assert not (home / "config" / "config.json").exists()  # nothing written
    assert "Traceback" not in listed.stderr + named.stderr + bad.stderr


def test_client_config_reads_the_servers_and_the_port_of_config(
    tmp_path: Path, fake_keyring: FileKeyring
) -> None:
    from core.settings.secrets import KEYRING_SERVICE, TOKEN_ENTRY

    home = tmp_path / "home"
    config = tmp_path / "elsewhere.json"
    config.write_text(
        '{"mcpServers": {"a": {"command": "x"}, "b": {"command": "y"}}, "gateway": {"port": 31999}}'
    )
    fake_keyring.set_password(KEYRING_SERVICE, TOKEN_ENTRY, "t0k")

    bridge = run_cli(home, "client-config", "cursor", "--config", str(config))
    http = run_cli(home, "client-config", "cursor", "--http", "--config", str(config))
    unknown = run_cli(home, "client-config", "cursor", "--config", str(config), "--server", "c")
    missing = run_cli(home, "client-config", "cursor", "--config", str(tmp_path / "no.json"))

    assert bridge.returncode == 0, bridge.stderr
    assert list(json.loads(bridge.stdout)["mcpServers"]) == ["a", "b"]
    assert http.returncode == 0, http.stderr
    entries = json.loads(http.stdout)["mcpServers"]
    assert entries["b"]["url"] == "http://127.0.0.1:31999/mcp/b"
    assert entries["b"]["headers"]["Authorization"] == "Bearer t0k"
    assert unknown.returncode == 2 and "(configured: a, b)" in unknown.stderr
    assert missing.returncode == 2
    assert str(tmp_path / "no.json") in missing.stderr and "does not exist" in missing.stderr


def test_an_http_snippet_without_a_config_uses_the_default_port(
    tmp_path: Path, fake_keyring: FileKeyring
) -> None:
    from core.settings.config import DEFAULT_GATEWAY_PORT
    from core.settings.secrets import KEYRING_SERVICE, TOKEN_ENTRY

    home = tmp_path / "home"
    no_token = run_cli(home, "client-config", "cursor", "--http", "--server", "echo")
    fake_keyring.set_password(KEYRING_SERVICE, TOKEN_ENTRY, "t0k")
    result = run_cli(home, "client-config", "cursor", "--http", "--server", "echo")

    assert no_token.returncode == 3 and "start mcp-tray once" in no_token.stderr
    assert result.returncode == 0, result.stderr
    url = json.loads(result.stdout)["mcpServers"]["echo"]["url"]
    assert url == f"http://127.0.0.1:{DEFAULT_GATEWAY_PORT}/mcp/echo"


def test_an_http_snippet_for_port_0_is_refused_while_no_tray_runs(
    tmp_path: Path, fake_keyring: FileKeyring
) -> None:
    config = tmp_path / "config.json"
    config.write_text('{"mcpServers": {"a": {"command": "x"}}, "gateway": {"port": 0}}')

    result = run_cli(
        tmp_path / "home", "client-config", "cursor", "--http", "--config", str(config)
    )

    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert str(config) in result.stderr and "gateway.port" in result.stderr
    assert "Fix: set gateway.port to a port number" in result.stderr
