"""Importing a client's remote (URL) servers as mcp-tray's own remote entries.

Strategy: entries shaped like each client's (Claude Code's "type": "http",
Gemini CLI's "httpUrl", Windsurf's "serverUrl", an SSE one) are merged by
``import_servers`` into a real config file, which must then load with
``load_config``; ``move_secret`` is a recorder that answers as told, so what
it was offered is checked without a keyring. What mcp-tray cannot carry
(plain http:// to another machine, a client's own placeholder, OAuth) is
skipped with its reason and the config left untouched.
"""

import json
from pathlib import Path
from typing import Any

import pytest

from core.cli.importer import ImportReport, import_servers
from core.settings.config import load_config
from core.settings.config_model import RemoteConfig

SECRET = "sk-live-not-real-0123456789"


class Recorder:
    """A ``move_secret`` that records what it was offered and answers ``accept``."""

    def __init__(self, accept: bool) -> None:
        self.accept = accept
        self.offered: dict[str, str] = {}

    def __call__(self, name: str, value: str) -> bool:
        self.offered[name] = value
        return self.accept


def run_import(
    config: Path,
    source: dict[str, dict[str, Any]],
    *,
    client: str = "claude-code",
    accept: bool = True,
) -> tuple[ImportReport, Recorder]:
    recorder = Recorder(accept)
    report = import_servers(client, source, config, move_secret=recorder)
    return report, recorder


def written(config: Path) -> dict[str, Any]:
    servers: dict[str, Any] = json.loads(config.read_text())["mcpServers"]
    return servers


def remote_of(config: Path, name: str) -> RemoteConfig:
    remote = load_config(config).servers[name].remote
    assert remote is not None, f"{name} loaded as a local command"
    return remote


def test_a_claude_code_http_entry_has_its_bearer_token_moved_and_the_scheme_kept(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.json"
    source = {
        "linear": {
            "type": "http",
            "url": "https://mcp.example.com/mcp",
            "headers": {"Authorization": f"Bearer {SECRET}", "X-Team": "core"},
        }
    }

    report, recorder = run_import(config, source)

    assert report.added == ["linear"]
    assert recorder.offered == {"linear.Authorization": SECRET}
    assert report.secrets_moved == ["linear Authorization"] and report.secrets_kept == []
    assert written(config)["linear"] == {
        "url": "https://mcp.example.com/mcp",
        "headers": {"Authorization": "Bearer ${keyring:linear.Authorization}", "X-Team": "core"},
    }
    remote = remote_of(config, "linear")
    assert remote.url == "https://mcp.example.com/mcp"
    assert remote.transport == "streamable-http"
    assert remote.headers["Authorization"] == "Bearer ${keyring:linear.Authorization}"
    assert SECRET not in config.read_text()


def test_a_secret_looking_header_without_a_scheme_moves_whole(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    source = {"api": {"url": "https://api.example.com/mcp", "headers": {"X-Api-Key": SECRET}}}

    report, recorder = run_import(config, source, client="cursor")

    assert recorder.offered == {"api.X-Api-Key": SECRET}
    assert report.secrets_moved == ["api X-Api-Key"]
    assert remote_of(config, "api").headers == {"X-Api-Key": "${keyring:api.X-Api-Key}"}


def test_gemini_s_http_url_is_imported_as_a_streamable_http_url(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    source = {"docs": {"httpUrl": "https://docs.example.com/mcp", "trust": False}}

    report, _ = run_import(config, source, client="gemini")

    assert report.added == ["docs"]
    assert written(config)["docs"] == {"url": "https://docs.example.com/mcp"}
    remote = remote_of(config, "docs")
    assert (remote.url, remote.transport) == ("https://docs.example.com/mcp", "streamable-http")


def test_gemini_s_bare_url_is_its_sse_endpoint(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    source = {"events": {"url": "https://events.example.com/stream"}}

    run_import(config, source, client="gemini")

    assert remote_of(config, "events").transport == "sse"


def test_windsurf_s_server_url_is_written_as_url(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    source = {"search": {"serverUrl": "https://search.example.com/mcp"}}

    report, _ = run_import(config, source, client="windsurf")

    assert report.added == ["search"]
    assert written(config)["search"] == {"url": "https://search.example.com/mcp"}
    assert remote_of(config, "search").url == "https://search.example.com/mcp"


@pytest.mark.parametrize(
    "entry",
    [
        {"type": "sse", "url": "https://legacy.example.com/events"},
        {"transport": "sse", "url": "https://legacy.example.com/events"},
    ],
)
def test_an_sse_entry_is_imported_with_transport_sse(tmp_path: Path, entry: dict[str, Any]) -> None:
    config = tmp_path / "config.json"

    report, _ = run_import(config, {"legacy": entry})

    assert report.added == ["legacy"]
    assert written(config)["legacy"] == {
        "url": "https://legacy.example.com/events",
        "transport": "sse",
    }
    assert remote_of(config, "legacy").transport == "sse"


def test_an_explicit_http_type_wins_over_a_url_that_ends_in_sse(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    source = {
        "said": {"type": "http", "url": "https://a.example.com/sse"},
        "guessed": {"url": "https://b.example.com/sse"},
    }

    run_import(config, source, client="cursor")

    assert remote_of(config, "said").transport == "streamable-http"
    assert remote_of(config, "guessed").transport == "sse"


def test_plain_http_to_another_machine_is_skipped_never_given_allow_insecure(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.json"
    source = {"nas": {"type": "http", "url": "http://lan-host:8080/mcp"}}

    report, _ = run_import(config, source)

    assert report.added == []
    reason = dict(report.skipped)["nas"]
    assert "plain http:// to lan-host:8080" in reason
    assert 'add it by hand with "allow_insecure": true' in reason
    assert "trust" in reason
    assert not config.exists()


def test_plain_http_to_this_machine_is_imported_as_is(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    source = {"figma": {"url": "http://127.0.0.1:3845/mcp"}}

    report, _ = run_import(config, source, client="cursor")

    assert report.added == ["figma"]
    assert "allow_insecure" not in written(config)["figma"]
    assert remote_of(config, "figma").url == "http://127.0.0.1:3845/mcp"


@pytest.mark.parametrize("placeholder", ["${env:API_TOKEN}", "${input:api-key}", "${API_TOKEN}"])
def test_a_header_holding_a_client_placeholder_is_skipped(tmp_path: Path, placeholder: str) -> None:
    config = tmp_path / "config.json"
    source = {"api": {"url": "https://api.example.com/mcp", "headers": {"X-Api-Key": placeholder}}}

    report, recorder = run_import(config, source, client="vscode")

    assert dict(report.skipped)["api"] == (
        f"uses {placeholder}, which only the client can fill in; add it by hand"
    )
    assert recorder.offered == {} and not config.exists()


def test_a_header_already_read_from_the_keyring_is_imported_and_not_offered(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.json"
    source = {
        "api": {
            "url": "https://api.example.com/mcp",
            "headers": {"Authorization": "Bearer ${keyring:api-token}"},
        }
    }

    report, recorder = run_import(config, source)

    assert report.added == ["api"] and recorder.offered == {}
    assert remote_of(config, "api").headers == {"Authorization": "Bearer ${keyring:api-token}"}


@pytest.mark.parametrize(
    "entry",
    [
        {"type": "http", "url": "https://oauth.example.com/mcp", "oauth": {"clientId": "abc"}},
        {"httpUrl": "https://run.example.com/mcp", "authProviderType": "google_credentials"},
    ],
)
def test_an_entry_that_signs_in_with_oauth_is_skipped(
    tmp_path: Path, entry: dict[str, Any]
) -> None:
    config = tmp_path / "config.json"

    report, _ = run_import(config, {"signed": entry})

    assert report.skipped == [
        (
            "signed",
            "names an OAuth client or provider of its own, which mcp-tray cannot use yet "
            "(it signs in with dynamic registration only); keep it in the client",
        )
    ]
    assert not config.exists()


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        (["Authorization", "Bearer x"], "headers are not an object"),
        ({"X-Retries": 3}, "X-Retries header is not text"),
    ],
)
def test_headers_that_are_not_text_are_skipped_with_the_reason(
    tmp_path: Path, headers: object, expected: str
) -> None:
    config = tmp_path / "config.json"
    source = {"api": {"url": "https://api.example.com/mcp", "headers": headers}}

    report, _ = run_import(config, source)

    assert expected in dict(report.skipped)["api"]
    assert not config.exists()


def test_a_header_mcp_tray_refuses_skips_the_entry_with_the_config_s_own_reason(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.json"
    source = {
        "api": {"url": "https://api.example.com/mcp", "headers": {"Content-Type": "text/plain"}}
    }

    report, _ = run_import(config, source, client="gemini")

    reason = dict(report.skipped)["api"]
    assert "headers.Content-Type" in reason and "set by the transport itself" in reason
    assert not config.exists()


@pytest.mark.parametrize("accept", [True, False])
def test_importing_the_same_remote_entry_again_reports_it_already_there(
    tmp_path: Path, accept: bool
) -> None:
    config = tmp_path / "config.json"
    source = {
        "linear": {
            "type": "http",
            "url": "https://mcp.example.com/mcp",
            "headers": {"Authorization": f"Bearer {SECRET}"},
        }
    }

    first, _ = run_import(config, source, accept=accept)
    after_first = config.read_text()
    second, recorder = run_import(config, source, accept=accept)

    assert first.added == ["linear"]
    assert second.duplicates == ["linear"]
    assert second.added == [] and second.renamed == []
    assert recorder.offered == {}  # nothing asked about an entry that is not imported
    assert config.read_text() == after_first


def test_a_remote_entry_configured_under_another_name_is_already_there_as_it(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"mcpServers": {"docs": {"url": "https://docs.example.com/mcp"}}}))

    report, _ = run_import(config, {"documentation": {"httpUrl": "https://docs.example.com/mcp"}})

    assert report.duplicates == ["documentation (as docs)"]
    assert list(written(config)) == ["docs"]


def test_the_same_name_with_another_url_is_imported_under_a_new_name(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"mcpServers": {"docs": {"url": "https://old.example.com/mcp"}}}))

    report, _ = run_import(config, {"docs": {"type": "http", "url": "https://new.example.com/mcp"}})

    assert report.renamed == [("docs", "docs-claude-code")]
    assert remote_of(config, "docs").url == "https://old.example.com/mcp"
    assert remote_of(config, "docs-claude-code").url == "https://new.example.com/mcp"


def test_the_same_url_with_other_headers_is_not_a_duplicate(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "api": {"url": "https://api.example.com/mcp", "headers": {"X-Team": "a"}}
                }
            }
        )
    )
    source = {"api": {"url": "https://api.example.com/mcp", "headers": {"X-Team": "b"}}}

    report, _ = run_import(config, source, client="cursor")

    assert report.renamed == [("api", "api-cursor")]
    assert remote_of(config, "api-cursor").headers == {"X-Team": "b"}


def test_a_literal_secret_the_user_keeps_stays_in_the_config_and_is_reported(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.json"
    source = {
        "api": {
            "type": "http",
            "url": "https://api.example.com/mcp",
            "headers": {"Authorization": f"Bearer {SECRET}"},
        }
    }

    report, recorder = run_import(config, source, accept=False)

    assert recorder.offered == {"api.Authorization": SECRET}
    assert report.secrets_kept == ["api Authorization"] and report.secrets_moved == []
    assert remote_of(config, "api").headers == {"Authorization": f"Bearer {SECRET}"}
    assert any(
        "left as plain text" in line and "api Authorization" in line for line in report.lines()
    )


def test_an_entry_whose_secrets_were_partly_moved_is_already_there_on_the_next_import(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.json"
    source = {
        "api": {
            "url": "https://api.example.com/mcp",
            "headers": {"Authorization": f"Bearer {SECRET}", "X-Api-Key": "k-123"},
        }
    }

    def only_the_authorization(name: str, value: str) -> bool:
        return name == "api.Authorization"

    first = import_servers("cursor", source, config, move_secret=only_the_authorization)
    second = import_servers("cursor", source, config, move_secret=only_the_authorization)

    assert first.secrets_moved == ["api Authorization"]
    assert first.secrets_kept == ["api X-Api-Key"]
    assert remote_of(config, "api").headers == {
        "Authorization": "Bearer ${keyring:api.Authorization}",
        "X-Api-Key": "k-123",
    }
    assert second.duplicates == ["api"] and second.renamed == []


def test_a_local_entry_whose_env_secret_was_moved_is_already_there_on_the_next_import(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.json"
    source = {"gh": {"command": "npx", "args": ["server-github"], "env": {"GH_TOKEN": SECRET}}}

    first, recorder = run_import(config, source, client="claude")
    second, _ = run_import(config, source, client="claude")

    assert recorder.offered == {"gh.GH_TOKEN": SECRET}
    assert first.secrets_moved == ["gh GH_TOKEN"]
    assert second.duplicates == ["gh"] and second.renamed == []


def test_a_type_that_is_not_text_does_not_make_an_entry_remote_nor_crash(tmp_path: Path) -> None:
    config = tmp_path / "config.json"

    report, _ = run_import(config, {"odd": {"type": [], "command": "npx"}})

    # A client's file is anyone's input: an unhashable "type" was a TypeError.
    assert report.added == ["odd"]
    assert written(config) == {"odd": {"command": "npx"}}
