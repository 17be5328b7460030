"""Line endings: a CRLF file stays CRLF through installs, imports and mcp-tray's own writers,
and no writer adds a ``\\r`` of its own.

Strategy: Windows' text mode is reproduced here. On Windows,
``open(..., newline=None)`` writes each ``\\n`` as ``\\r\\n`` (CPython's
docs: "translated to the system default line separator, os.linesep");
the ``windows_text_mode`` fixture makes ``open``, ``io.open`` and
``os.fdopen`` do exactly that for every text-mode file opened with
``newline=None`` (the default), as they do there. The real writers then
run on real files in tmp_path (the client fixtures of test_install.py
turned CRLF), twice, and the bytes on disk are read back and parsed.
"""

import builtins
import io
import json
import os
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from core.cli.importer import import_servers
from core.cli.install import apply_install, plan_install, snippet_entries
from core.cli.integrations import client_config_path
from core.platform.files import line_ending, open_private, with_line_ending, write_private
from tests.support import paths

FIXTURES = paths.FIXTURES / "clients" / "install"


def _as_on_windows(real: Callable[..., Any], mode_at: int) -> Callable[..., Any]:
    def opened(*args: Any, **kwargs: Any) -> Any:
        mode = kwargs.get("mode", args[mode_at] if len(args) > mode_at else "r")
        at = mode_at + 4  # newline's place: mode, buffering, encoding, errors, newline
        newline = kwargs.get("newline", args[at] if len(args) > at else None)
        if "b" not in mode and newline is None:
            args, kwargs = args[:at], {**kwargs, "newline": "\r\n"}  # newline=None on Windows
        return real(*args, **kwargs)

    return opened


@pytest.fixture
def windows_text_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    opener = _as_on_windows(io.open, 1)
    monkeypatch.setattr(builtins, "open", opener)
    monkeypatch.setattr(io, "open", opener)
    monkeypatch.setattr(os, "fdopen", _as_on_windows(os.fdopen, 1))


def test_the_windows_text_mode_stand_in_turns_crlf_into_cr_cr_lf(
    tmp_path: Path, windows_text_mode: None
) -> None:
    """The stand-in shows the bug it is here to catch."""
    path = tmp_path / "f.txt"
    path.write_text("a\r\nb\r\n", encoding="utf-8")
    assert path.read_bytes() == b"a\r\r\nb\r\r\n"


def crlf_copy(fixture: Path, target: Path) -> bytes:
    data = fixture.read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return data


def assert_all_crlf(data: bytes) -> None:
    assert b"\r\r" not in data
    assert data.count(b"\n") == data.count(b"\r\n") > 0


@pytest.mark.parametrize(
    ("client", "fixture"), [("codex", "codex_config.toml"), ("cursor", "cursor_mcp.json")]
)
def test_a_crlf_client_file_installed_into_twice_stays_crlf_and_parses(
    tmp_path: Path, windows_text_mode: None, client: str, fixture: str
) -> None:
    path = client_config_path(client, home=tmp_path)
    before = crlf_copy(FIXTURES / fixture, path)
    for names in (["echo"], ["echo", "notes"]):
        apply_install(plan_install(client, snippet_entries(client, names), home=tmp_path))
    data = path.read_bytes()
    assert_all_crlf(data)
    text = data.decode("utf-8")
    loaded = tomllib.loads(text) if client == "codex" else json.loads(text)
    key = "mcp_servers" if client == "codex" else "mcpServers"
    assert {"echo", "notes"} <= set(loaded[key])
    # Every line of the user's is still there, with its ending.
    kept = [line for line in before.split(b"\r\n") if line.strip() and b"mcp" not in line]
    assert all(line in data for line in kept)


def test_an_lf_client_file_gets_no_carriage_return(tmp_path: Path, windows_text_mode: None) -> None:
    path = client_config_path("codex", home=tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes((FIXTURES / "codex_config.toml").read_bytes())
    apply_install(plan_install("codex", snippet_entries("codex", ["echo"]), home=tmp_path))
    assert b"\r" not in path.read_bytes()


def test_a_new_client_file_is_written_with_lf_on_every_os(
    tmp_path: Path, windows_text_mode: None
) -> None:
    apply_install(plan_install("gemini", snippet_entries("gemini", ["echo"]), home=tmp_path))
    assert b"\r" not in client_config_path("gemini", home=tmp_path).read_bytes()


def test_the_diff_of_a_crlf_file_shows_no_carriage_returns(tmp_path: Path) -> None:
    crlf_copy(FIXTURES / "cursor_mcp.json", client_config_path("cursor", home=tmp_path))
    plan = plan_install("cursor", snippet_entries("cursor", ["echo"]), home=tmp_path)
    assert plan.diff and "\r" not in plan.diff
    assert any(line.startswith("+") and '"echo": {' in line for line in plan.diff.splitlines())


def test_an_import_into_a_crlf_config_keeps_it_crlf(
    tmp_path: Path, windows_text_mode: None
) -> None:
    config = tmp_path / "config.json"
    config.write_bytes(b'{\r\n  "mcpServers": {}\r\n}\r\n')
    source = {"fs": {"command": "npx", "args": ["-y", "server-fs"]}}
    for _ in range(2):
        import_servers("cursor", source, config, move_secret=lambda name, value: False)
    data = config.read_bytes()
    assert_all_crlf(data)
    assert json.loads(data)["mcpServers"]["fs"]["command"] == "npx"


def test_mcp_tray_s_own_files_hold_exactly_what_was_written(
    tmp_path: Path, windows_text_mode: None
) -> None:
    write_private(tmp_path / "state" / "runtime.json", '{\n  "port": 1\n}\n')
    assert (tmp_path / "state" / "runtime.json").read_bytes() == b'{\n  "port": 1\n}\n'
    with open_private(tmp_path / "logs" / "x.log") as log:
        log.write("one\ntwo\n")
    assert (tmp_path / "logs" / "x.log").read_bytes() == b"one\ntwo\n"


@pytest.mark.parametrize(
    ("text", "ending"),
    [("a\r\nb\r\n", "\r\n"), ("a\nb\n", "\n"), ("a\r\nb\n", "\n"), ("", "\n"), (None, "\n")],
)
def test_a_file_s_line_ending_is_crlf_only_when_every_line_ends_so(
    text: str | None, ending: str
) -> None:
    assert line_ending(text) == ending


def test_lines_get_the_ending_asked_for() -> None:
    assert with_line_ending("a\nb\n", "\r\n") == "a\r\nb\r\n"
    assert with_line_ending("a\nb\n", "\n") == "a\nb\n"
