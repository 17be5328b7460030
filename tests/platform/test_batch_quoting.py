"""A Windows ``.cmd``/``.bat`` child's command line, checked against a model of cmd.exe.

Strategy: Windows is not here, so its two parsers are modelled from their
documented rules, the way cmd.exe is known to read ``/s /c "…"`` lines:
(1) ``/s`` strips the outer quotes; (2) ``%NAME%`` is expanded everywhere,
quotes or not (undefined names stay as they are, and scanning resumes at
their closing ``%``; ``%cd:~,%`` is the empty substring of %CD%); (3)
outside quotes ``^`` escapes, and ``& | < >`` end the command (an injection
when an argument brings one); then the shim passes its arguments on with
``%*`` to a program whose C runtime splits them (backslashes before a
quote, ``""`` inside quotes). Hostile arguments must come out of the model
exactly as they went in, as one command; what cannot is refused. A stub
Popen checks that the spawn hands the line and cmd.exe to ``subprocess``.
"""

import re
from collections.abc import Mapping

import pytest

from core.base.errors import SpawnError
from core.platform.commands import (
    CMD_SWITCHES,
    batch_command_line,
    cmd_exe,
    is_batch,
    popen_command,
)
from tests.support.windows_argv import crt_split

SCRIPT = "C:\\Program Files\\nodejs\\npx.cmd"
ENV = {"PATH": "C:\\Windows", "USERNAME": "ada", "CD": "C:\\Users\\ada"}


def expand_percent(line: str, env: Mapping[str, str]) -> str:
    """cmd.exe's percent phase on a command line (not in a batch file)."""
    out: list[str] = []
    i = 0
    while i < len(line):
        if line[i] != "%":
            out.append(line[i])
            i += 1
            continue
        end = line.find("%", i + 1)
        if end < 0:
            out.append(line[i:])
            break
        name = line[i + 1 : end]
        substring = re.fullmatch(r"([^:]+):~(-?\d*)(,(-?\d*))?", name)
        if name and name.upper() in {k.upper() for k in env}:
            out.append(next(v for k, v in env.items() if k.upper() == name.upper()))
            i = end + 1
        elif substring and substring.group(1).upper() in {k.upper() for k in env}:
            value = next(v for k, v in env.items() if k.upper() == substring.group(1).upper())
            start = int(substring.group(2) or 0)
            # "~start," with no length is a zero-length substring (what the rule relies on).
            if substring.group(3) is None:
                out.append(value[start:])
            else:
                out.append(value[start : start + int(substring.group(4) or 0)])
            i = end + 1
        else:
            # Not a variable: the '%' stays, and the closing one may open the next.
            out.append("%")
            i += 1
    return "".join(out)


def split_commands(line: str) -> list[str]:
    """cmd.exe's special-character phase: ``^`` escapes and separators outside quotes."""
    commands: list[str] = []
    current: list[str] = []
    quoted = False
    i = 0
    while i < len(line):
        c = line[i]
        if c == '"':
            quoted = not quoted
            current.append(c)
        elif not quoted and c == "^" and i + 1 < len(line):
            current.append(line[i + 1])
            i += 1
        elif not quoted and c in "&|<>":
            commands.append("".join(current))
            current = []
        else:
            current.append(c)
        i += 1
    commands.append("".join(current))
    return commands


def through_cmd(line: str, env: Mapping[str, str] = ENV) -> tuple[str, list[str]]:
    """(the script cmd.exe runs, the argv the program behind the shim gets via %*)."""
    prefix = f"cmd.exe {CMD_SWITCHES} "
    assert line.startswith(prefix)
    body = line[len(prefix) :]
    assert body.startswith('"') and body.endswith('"')
    body = body[1:-1]  # /s: exactly the outer quotes
    commands = split_commands(expand_percent(body, env))
    assert len(commands) == 1, f"an argument ended the command: {commands!r}"
    words = crt_split(commands[0])
    return words[0], words[1:]


HOSTILE = [
    "plain",
    "two words",
    "",
    "a&calc",
    "&calc",
    "a|b",
    "<in >out",
    "(x)",
    "^",
    "a^&b",
    '"',
    '""',
    'say "hi"',
    'a"&calc&"b',
    '\\"',
    "C:\\dir\\",
    "C:\\dir\\\\",
    'back\\\\"slash',
    "%PATH%",
    "%",
    "100%",
    "%%",
    "%USERNAME",
    "%cd:~,%",
    "!PATH!",
    "tab\there",
    "comma,semi;eq=",
    "@modelcontextprotocol/server-github",
    "--flag=value",
    "ünïcødé ✓",
    "-y",
]


@pytest.mark.parametrize("arg", HOSTILE)
def test_a_hostile_argument_reaches_the_program_behind_the_shim_unchanged(arg: str) -> None:
    script, argv = through_cmd(batch_command_line(SCRIPT, ["-y", arg, "after"]))
    assert script == SCRIPT
    assert argv == ["-y", arg, "after"]


def test_every_hostile_argument_at_once_arrives_in_order_as_one_command() -> None:
    script, argv = through_cmd(batch_command_line(SCRIPT, HOSTILE))
    assert (script, argv) == (SCRIPT, HOSTILE)


def test_the_model_catches_what_list2cmdline_would_let_through() -> None:
    # The check bites: subprocess's own quoting leaves '&' outside cmd.exe's quotes.
    import subprocess

    naive = f'cmd.exe {CMD_SWITCHES} "{subprocess.list2cmdline([SCRIPT, "a"])} a&calc"'
    with pytest.raises(AssertionError, match="ended the command"):
        through_cmd(naive)
    percent = f'cmd.exe {CMD_SWITCHES} "{subprocess.list2cmdline([SCRIPT, "%PATH%"])}"'
    assert through_cmd(percent)[1] == ["C:\\Windows"]


@pytest.mark.parametrize("arg", ["line\nbreak", "carriage\rreturn", "nul\0byte"])
def test_an_argument_no_batch_file_can_receive_is_refused_with_the_reason(arg: str) -> None:
    with pytest.raises(SpawnError) as caught:
        batch_command_line(SCRIPT, [arg])
    assert caught.value.permanent
    assert "line break or NUL" in caught.value.reason and "npx.cmd" in caught.value.reason


def test_a_script_path_that_cannot_be_quoted_is_refused() -> None:
    with pytest.raises(SpawnError, match="cannot be quoted"):
        batch_command_line('C:\\odd"name.cmd', [])


def test_a_percent_in_the_script_path_is_kept_literal() -> None:
    script = "C:\\Users\\100%USERNAME%\\npx.cmd"
    assert through_cmd(batch_command_line(script, ["x"])) == (script, ["x"])


def test_only_windows_batch_files_go_through_cmd_exe() -> None:
    env = {"SystemRoot": "C:\\Windows"}
    args, program = popen_command([SCRIPT.upper(), "a&b"], "win32", env)
    assert program == "C:\\Windows\\System32\\cmd.exe" == cmd_exe(env)
    assert isinstance(args, str) and through_cmd(args)[1] == ["a&b"]
    # An .exe, or any program elsewhere, keeps its argv for subprocess to quote.
    assert popen_command(["C:\\bin\\uv.exe", "a&b"], "win32", env) == (
        ["C:\\bin\\uv.exe", "a&b"],
        None,
    )
    assert popen_command(["/usr/bin/npx.cmd", "a&b"], "linux", env) == (
        ["/usr/bin/npx.cmd", "a&b"],
        None,
    )
    assert is_batch("x.BAT") and is_batch("x.Cmd") and not is_batch("x.cmd.exe")


async def test_the_spawn_hands_subprocess_the_line_and_cmd_exe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Windows' side of the spawn, up to subprocess.Popen, with the OS injected.
    import subprocess

    from core.platform import commands
    from core.supervision import child as child_module

    seen: dict[str, object] = {}

    def popen(args: object, **kwargs: object) -> object:
        seen["args"], seen["executable"] = args, kwargs["executable"]
        raise FileNotFoundError(2, "stop here", "cmd.exe")

    real = commands.popen_command
    monkeypatch.setattr(
        child_module, "popen_command", lambda argv: real(argv, "win32", {"SystemRoot": "C:\\W"})
    )
    monkeypatch.setattr(child_module, "resolve_command", lambda command, env, cwd: SCRIPT)
    monkeypatch.setattr(subprocess, "Popen", popen)
    with pytest.raises(SpawnError):
        await child_module.ChildProcess.spawn("npx", ["-y", "a&calc"], env={}, cwd=None)
    assert seen["executable"] == "C:\\W\\System32\\cmd.exe"
    assert isinstance(seen["args"], str)
    assert through_cmd(seen["args"]) == (SCRIPT, ["-y", "a&calc"])
