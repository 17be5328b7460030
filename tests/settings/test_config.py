"""Config loading: the mcpServers shape in, frozen dataclasses out, clear errors otherwise.

Strategy: write real files to tmp_path (and a real FIFO, /dev/zero, a
folder) and load them; each bad input, hostile ones included (NaN, NUL,
lone surrogates, deep nesting, huge files), must give one error on one line
naming the file, the line or key, and a fix. Generated input is in
tests/settings/test_fuzz_config.py.
"""

import json
import sys
from pathlib import Path

import pytest

from core.base.errors import ConfigError
from core.settings.config import (
    DEFAULT_GATEWAY_PORT,
    MAX_CONFIG_BYTES,
    MAX_KEEPALIVE_SECONDS,
    MAX_NESTING,
    ServerConfig,
    load_config,
    valid_server_name,
)
from tests.conftest import make_fifo


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


def test_per_workspace_sharing_is_accepted_and_a_misspelt_mode_names_all_three(
    tmp_path: Path,
) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"mcpServers": {"fs": {"command": "x", "sharing": "per-workspace"}}}')
    assert load_config(path).servers["fs"].sharing == "per-workspace"

    error = error_for(tmp_path, '{"mcpServers": {"a": {"command": "x", "sharing": "workspace"}}}')

    assert error.key == "mcpServers.a.sharing"
    assert "shared, per-session, per-workspace" in str(error)
    assert '"per-workspace" one per project' in error.fix


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


# ------------------------------------------------------- hostile input


def one_line(error: ConfigError) -> str:
    """The error's text, checked to be the single line a user reads."""
    text = str(error)
    assert "\n" not in text and "\r" not in text, text
    assert text.isprintable(), text
    assert "Fix:" in text
    return text


@pytest.mark.parametrize(
    ("entry", "key", "shown"),
    [
        ('"keepalive_seconds": NaN', "mcpServers.a.keepalive_seconds", "NaN"),
        ('"keepalive_seconds": Infinity', "mcpServers.a.keepalive_seconds", "Infinity"),
        ('"keepalive_seconds": 1e999', "mcpServers.a.keepalive_seconds", "Infinity"),
        ('"args": ["x", -Infinity]', "mcpServers.a.args[1]", "-Infinity"),
        ('"env": {"A": NaN}', "mcpServers.a.env.A", "NaN"),
    ],
)
def test_nan_and_infinity_are_refused_wherever_they_appear(
    tmp_path: Path, entry: str, key: str, shown: str
) -> None:
    error = error_for(tmp_path, '{"mcpServers": {\n"a": {"command": "x", ' + entry + "}}}")
    assert error.key == key
    assert error.line == 2
    assert f"{shown} is not a usable number" in one_line(error)
    assert "finite" in error.fix


def test_nan_in_the_gateway_section_is_refused_too(tmp_path: Path) -> None:
    error = error_for(tmp_path, '{"mcpServers": {}, "gateway": {"port": NaN}}')
    assert error.key == "gateway.port"


@pytest.mark.parametrize("value", ["1e9", "9" * 400, "4.9", "-30"])
def test_a_keepalive_outside_its_bounds_is_refused_with_both_bounds(
    tmp_path: Path, value: str
) -> None:
    error = error_for(
        tmp_path, '{"mcpServers": {"a": {"command": "x", "keepalive_seconds": ' + value + "}}}"
    )
    assert error.key == "mcpServers.a.keepalive_seconds"
    assert f"from 5 to {MAX_KEEPALIVE_SECONDS:g}" in one_line(error)


@pytest.mark.parametrize(
    ("entry", "key"),
    [
        ('"command": "py\\u0000thon"', "mcpServers.a.command"),
        ('"command": "x", "args": ["ok", "a\\u0000"]', "mcpServers.a.args[1]"),
        ('"command": "x", "env": {"A": "v\\u0000"}', "mcpServers.a.env.A"),
        ('"command": "x", "cwd": "/tmp\\u0000"', "mcpServers.a.cwd"),
    ],
)
def test_a_nul_in_any_string_is_refused_with_its_key_path(
    tmp_path: Path, entry: str, key: str
) -> None:
    error = error_for(tmp_path, '{"mcpServers": {"a": {' + entry + "}}}")
    assert error.key == key
    assert "NUL character" in one_line(error)


@pytest.mark.parametrize(
    ("entry", "key"),
    [
        ('"command": "\\ud800"', "mcpServers.a.command"),
        ('"command": "x", "args": ["\\udfff tail"]', "mcpServers.a.args[0]"),
        ('"command": "x", "env": {"A": "\\ud83d"}', "mcpServers.a.env.A"),
        ('"command": "x", "cwd": "\\ude00/dir"', "mcpServers.a.cwd"),
    ],
)
def test_a_lone_surrogate_escape_is_refused_with_its_key_path(
    tmp_path: Path, entry: str, key: str
) -> None:
    error = error_for(tmp_path, '{"mcpServers": {"a": {' + entry + "}}}")
    assert error.key == key
    assert "lone surrogate" in one_line(error)


def test_a_surrogate_pair_escape_is_one_character_and_loads(tmp_path: Path) -> None:
    config = load_config(
        write(tmp_path, '{"mcpServers": {"a": {"command": "x", "args": ["\\ud83d\\ude00"]}}}')
    )
    assert config.servers["a"].args == ("\N{GRINNING FACE}",)


def test_a_bad_key_is_shown_escaped_so_the_error_stays_on_one_line(tmp_path: Path) -> None:
    error = error_for(tmp_path, '{"mcpServers": {"a\\u0000\\n": {"command": "x"}}}')
    assert error.key == 'mcpServers."a\\u0000\\n"'
    one_line(error)


@pytest.mark.parametrize(
    ("env", "fix"),
    [
        ('{"A=B": "c"}', 'write it as "A": "B"'),
        ('{"": "c"}', "give the variable a name"),
        ('{"=x": "c"}', "give the variable a name"),
    ],
)
def test_an_env_name_that_is_empty_or_holds_an_equals_sign_is_refused(
    tmp_path: Path, env: str, fix: str
) -> None:
    error = error_for(tmp_path, '{"mcpServers": {"a": {"command": "x", "env": ' + env + "}}}")
    assert error.key is not None and error.key.startswith("mcpServers.a.env.")
    assert "no '='" in one_line(error)
    assert fix in error.fix


def test_a_nul_in_an_env_name_is_refused(tmp_path: Path) -> None:
    error = error_for(tmp_path, '{"mcpServers": {"a": {"command": "x", "env": {"A\\u0000": "v"}}}}')
    assert error.key == 'mcpServers.a.env."A\\u0000"'
    assert "NUL character" in one_line(error)


def test_a_server_name_ending_in_a_newline_is_refused(tmp_path: Path) -> None:
    # re.match with "$" accepts "a\n": the check must match the whole name.
    assert not valid_server_name("echo\n")
    assert valid_server_name("echo")
    error = error_for(tmp_path, '{"mcpServers": {"echo\\n": {"command": "x"}}}')
    assert error.key == 'mcpServers."echo\\n"'
    assert error.fix.endswith('"echo"')
    one_line(error)


@pytest.mark.parametrize(
    ("name", "fix"), [("fs__remote", '"fs_remote"'), ("fs_", '"fs"'), ("a___b_", '"a_b"')]
)
def test_a_server_name_holding_the_aggregates_separator_is_refused_with_a_rename(
    tmp_path: Path, name: str, fix: str
) -> None:
    assert not valid_server_name(name)
    error = error_for(tmp_path, json.dumps({"mcpServers": {name: {"command": "x"}}}))
    assert error.key == f"mcpServers.{name}"
    assert error.file == str(tmp_path / "config.json") and error.line == 1
    assert "may not hold '__' nor end in '_'" in one_line(error)
    assert error.fix.endswith(fix)


@pytest.mark.parametrize("value", ["0", "513", '"32"', "true", "1.5", "null"])
def test_a_max_children_that_is_no_whole_number_from_1_to_512_is_refused(
    tmp_path: Path, value: str
) -> None:
    error = error_for(
        tmp_path, '{"mcpServers": {"a": {"command": "x", "max_children": ' + value + "}}}"
    )
    assert error.key == "mcpServers.a.max_children"
    assert "must be a whole number from 1 to 512" in one_line(error)
    assert "32 (the default)" in error.fix


def test_max_children_defaults_to_32_and_takes_a_whole_number(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '{"mcpServers": {"a": {"command": "x"}, "b": {"command": "x", '
        '"sharing": "per-session", "max_children": 5}}}',
    )
    config = load_config(path)
    assert (config.servers["a"].max_children, config.servers["b"].max_children) == (32, 5)


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 1000, 100_000])
def test_json_nested_too_deeply_is_a_config_error_naming_its_line(
    tmp_path: Path, depth: int
) -> None:
    text = '{"mcpServers": {},\n"$schema": ' + "[" * depth + "]" * depth + "}"
    error = error_for(tmp_path, text)
    assert f"nested deeper than {MAX_NESTING} levels" in one_line(error)
    assert error.line == 2


def test_an_integer_with_thousands_of_digits_is_a_config_error(tmp_path: Path) -> None:
    error = error_for(tmp_path, '{"mcpServers": {},\n"gateway": {"port": ' + "9" * 5000 + "}}")
    assert "thousands of digits" in one_line(error)
    assert error.line == 2


def test_a_fifo_is_refused_at_once_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "config.json"
    make_fifo(fifo)
    with pytest.raises(ConfigError) as caught:
        load_config(fifo)  # blocked forever before: open() waited for a writer
    assert "named pipe (FIFO), not a regular file" in one_line(caught.value)
    assert str(fifo) in str(caught.value)


@pytest.mark.parametrize(("path", "kind"), [("/dev/zero", "character device"), ("/", "folder")])
def test_a_device_or_a_folder_is_refused_by_kind(path: str, kind: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(Path(path))
    assert kind in one_line(caught.value)


def test_a_file_over_the_size_cap_is_refused_naming_its_size_and_the_cap(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(b'{"mcpServers": {}}' + b" " * MAX_CONFIG_BYTES)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    text = one_line(caught.value)
    assert f"{path.stat().st_size} bytes" in text
    assert f"{MAX_CONFIG_BYTES} bytes, 1 MiB" in text


def test_a_file_that_is_not_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(b'{"mcpServers": {\n"a": {"command": "\xff"}}}')
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.line == 2
    assert "not UTF-8" in one_line(caught.value)


def test_a_byte_order_mark_from_a_windows_editor_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(b'\xef\xbb\xbf{"mcpServers": {"a": {"command": "x"}}}')
    assert list(load_config(path).servers) == ["a"]


@pytest.mark.parametrize(
    ("entry", "key", "said"),
    [
        ('"start": "lazy"', "mcpServers.a.start", "must be one of always, on-demand"),
        ('"start": "on-demand", "idle_stop_s": 0', "mcpServers.a.idle_stop_s", "from 1 to"),
        ('"idle_stop_s": 60', "mcpServers.a.idle_stop_s", "only an on-demand server"),
        ('"standby": "yes"', "mcpServers.a.standby", "must be true or false"),
        (
            '"standby": true, "sharing": "per-session"',
            "mcpServers.a.standby",
            'a "per-session" entry takes no standby',
        ),
        (
            '"standby": true, "sharing": "per-workspace"',
            "mcpServers.a.standby",
            'a "per-workspace" entry takes no standby',
        ),
    ],
)
def test_lean_keys_are_refused_with_the_key_and_the_reason(
    tmp_path: Path, entry: str, key: str, said: str
) -> None:
    error = error_for(tmp_path, '{"mcpServers": {"a": {"command": "x", ' + entry + "}}}")
    assert key in str(error) and said in str(error)
    assert "Fix:" in str(error)


def test_an_on_demand_entry_loads_with_its_idle_time(tmp_path: Path) -> None:
    text = '{"mcpServers": {"a": {"command": "x", "start": "on-demand", "idle_stop_s": 90}}}'
    server = load_config(write(tmp_path, text)).servers["a"]
    assert (server.start, server.idle_stop_s) == ("on-demand", 90.0)
