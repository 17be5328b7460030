"""Config loading: the mcpServers shape in, frozen dataclasses out, clear errors otherwise.

Strategy: write real files to tmp_path and load them; each bad input must
give one error naming the file, the line or key, and a fix.
"""

import json
import sys
from pathlib import Path

import pytest

from core.base.errors import ConfigError
from core.settings.config import DEFAULT_GATEWAY_PORT, ServerConfig, load_config


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.json"
    path.write_text(text)
    return path


def error_for(tmp_path: Path, text: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text))
    return caught.value


def test_a_claude_desktop_config_loads_as_is(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path,
            json.dumps(
                {
                    "mcpServers": {
                        "github": {
                            "command": "npx",
                            "args": ["-y", "@modelcontextprotocol/server-github"],
                            "env": {"GITHUB_TOKEN": "${keyring:github}"},
                        }
                    }
                }
            ),
        )
    )
    server = config.servers["github"]
    assert server == ServerConfig(
        name="github",
        command="npx",
        args=("-y", "@modelcontextprotocol/server-github"),
        env={"GITHUB_TOKEN": "${keyring:github}"},
    )
    assert server.retry == "safe"
    assert server.sharing == "shared"
    assert server.keepalive_seconds == 30.0


def test_placeholders_expand_in_command_args_and_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_FOLDER", "/srv/tools")
    config = load_config(
        write(
            tmp_path,
            '{"mcpServers": {"a": {"command": "${python}", "args": ["${configDir}/s.py", "${env:MY_FOLDER}"], "cwd": "${configDir}"}}}',
        )
    )
    server = config.servers["a"]
    assert server.command == sys.executable
    assert server.args == (f"{tmp_path.resolve()}/s.py", "/srv/tools")
    assert server.cwd == str(tmp_path.resolve())


def test_invalid_json_names_the_line(tmp_path: Path) -> None:
    error = error_for(tmp_path, '{\n  "mcpServers": {\n    "a": {"command": "x",}\n  }\n}')
    assert error.line == 3
    assert str(error).startswith(f"{tmp_path / 'config.json'}:3: invalid JSON")
    assert "Fix:" in str(error)


def test_an_empty_file_is_refused_with_what_to_write(tmp_path: Path) -> None:
    error = error_for(tmp_path, "   \n")
    assert "empty" in str(error)
    assert '{"mcpServers": {}}' in error.fix


def test_a_missing_command_names_the_server_and_its_line(tmp_path: Path) -> None:
    error = error_for(tmp_path, '{\n "mcpServers": {\n  "notes": {"args": []}\n }\n}')
    assert error.key == "mcpServers.notes"
    assert error.line == 3
    assert "command" in str(error)


def test_wrong_types_say_what_was_expected_and_how_to_write_it(tmp_path: Path) -> None:
    error = error_for(
        tmp_path, '{"mcpServers": {"a": {"command": "x", "args": "--stdio --verbose"}}}'
    )
    assert error.key == "mcpServers.a.args"
    assert "must be a list of strings" in str(error)
    assert '["--stdio", "--verbose"]' in error.fix

    error = error_for(tmp_path, '{"mcpServers": {"a": {"command": "x", "env": {"PORT": 8080}}}}')
    assert error.key == "mcpServers.a.env.PORT"
    assert '"8080"' in error.fix


def test_an_unknown_key_is_refused_with_a_did_you_mean(tmp_path: Path) -> None:
    error = error_for(tmp_path, '{"mcpServers": {"a": {"command": "x", "arg": ["y"]}}}')
    assert error.key == "mcpServers.a.arg"
    assert "did you mean 'args'?" in str(error)

    error = error_for(tmp_path, '{"mcpServer": {}}')
    assert "did you mean 'mcpServers'?" in str(error)


def test_bad_values_for_our_own_keys_are_refused(tmp_path: Path) -> None:
    for entry, key in (
        ('"retry": "sometimes"', "retry"),
        ('"keepalive_seconds": 1', "keepalive_seconds"),
        ('"sharing": "private"', "sharing"),
        ('"disabled": "yes"', "disabled"),
    ):
        error = error_for(tmp_path, '{"mcpServers": {"a": {"command": "x", ' + entry + "}}}")
        assert error.key == f"mcpServers.a.{key}"


def test_a_remote_url_entry_is_explained(tmp_path: Path) -> None:
    error = error_for(tmp_path, '{"mcpServers": {"a": {"url": "https://example.com/mcp"}}}')
    assert "remote" in str(error)


def test_duplicate_keys_are_refused_instead_of_silently_dropped(tmp_path: Path) -> None:
    error = error_for(tmp_path, '{"mcpServers": {\n"a": {"command": "x"},\n"a": {"command": "y"}}}')
    assert "appears twice" in str(error)
    assert error.line == 3


def test_a_server_name_unusable_in_a_url_is_refused(tmp_path: Path) -> None:
    error = error_for(tmp_path, '{"mcpServers": {"my server/1": {"command": "x"}}}')
    assert '"my-server-1"' in error.fix


def test_a_missing_file_says_how_to_create_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "absent.json")
    assert "does not exist" in str(caught.value)


def test_launch_key_changes_only_when_the_launch_changes(tmp_path: Path) -> None:
    base = ServerConfig(name="a", command="x", args=("1",))
    assert (
        base.launch_key()
        == ServerConfig(name="a", command="x", args=("1",), retry="always").launch_key()
    )
    assert base.launch_key() != ServerConfig(name="a", command="x", args=("2",)).launch_key()


def test_the_gateway_port_defaults_to_a_fixed_one_and_0_still_means_any_free_port(
    tmp_path: Path,
) -> None:
    assert load_config(write(tmp_path, '{"mcpServers": {}}')).gateway.port == DEFAULT_GATEWAY_PORT
    text = '{"mcpServers": {}, "gateway": {"port": 0}}'
    assert load_config(write(tmp_path, text)).gateway.port == 0
    text = '{"mcpServers": {}, "gateway": {"port": 31234}}'
    assert load_config(write(tmp_path, text)).gateway.port == 31234


def test_a_bad_gateway_port_names_the_key_and_the_default(tmp_path: Path) -> None:
    for bad in ('"8080"', "70000", "-1", "true"):
        error = error_for(tmp_path, '{"mcpServers": {},\n"gateway": {"port": ' + bad + "}}")
        assert error.key == "gateway.port"
        assert error.line == 2
        assert f"default ({DEFAULT_GATEWAY_PORT})" in error.fix
        assert "0 for any free port" in error.fix
