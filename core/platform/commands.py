"""The command line a child is started with, where the OS needs more than ``argv``.

On Windows, ``npx``, ``pnpm``, ``yarn`` and many ``uvx``-style launchers are
``.cmd``/``.bat`` shims, and ``CreateProcess`` runs a batch file through
cmd.exe, which parses the line again: ``%VAR%`` is expanded even inside
quotes, and outside quotes ``& | < > ( ) ^`` are its own syntax. The
quoting ``subprocess`` applies (``list2cmdline``, the C runtime's rules) is
not cmd.exe's, so an argument like ``a&calc`` would run ``calc`` (Python's
subprocess docs warn about it; Rust and Node fixed the same hole,
CVE-2024-24576 and CVE-2024-27980).

For a batch file the tray therefore builds the whole line itself and hands
it to cmd.exe as the program:

    cmd.exe /d /e:ON /v:OFF /s /c ""C:\\...\\npx.cmd" "arg 1" arg2"

- ``/d`` skips AutoRun commands, ``/v:OFF`` keeps ``!`` literal, ``/e:ON``
  is needed by the ``%`` rule below, ``/s`` strips exactly the outer quotes;
- every argument with anything but letters, digits and ``#$*+-./:?@\\_`` is
  quoted, so cmd.exe's quote state covers each special character; an inner
  ``"`` is doubled (cmd.exe toggles twice and stays in step; the C runtime
  of the program behind the shim reads ``""`` inside quotes as one ``"``)
  and the backslashes before it, or before the closing quote, are doubled;
- ``%`` becomes ``%%cd:~,%``: cmd.exe keeps a lone ``%`` and expands
  ``%cd:~,%`` to nothing, so no ``%NAME%`` can form (the rule Rust took from
  yt-dlp);
- a line break (or NUL) cannot get through cmd.exe unharmed: such an
  argument is refused with the reason, never passed.

Everything else runs as before: ``argv`` as a list, for ``subprocess`` to
quote.
"""

import os
import sys
from collections.abc import Mapping, Sequence
from typing import Final

from core.base.errors import SpawnError

#: The extensions CreateProcess hands to cmd.exe.
BATCH_SUFFIXES: Final = (".cmd", ".bat")
#: ASCII that needs no quotes on cmd.exe's line (Rust's list); all other ASCII gets them.
UNQUOTED: Final = frozenset("#$*+-./:?@\\_")
#: What ``%`` is written as: a lone ``%``, then ``%cd:~,%``, the empty substring of %CD%.
PERCENT: Final = "%%cd:~,%"
CMD_SWITCHES: Final = "/d /e:ON /v:OFF /s /c"


def is_batch(program: str) -> bool:
    return program.lower().endswith(BATCH_SUFFIXES)


def cmd_exe(environ: Mapping[str, str] = os.environ) -> str:
    """cmd.exe in the system folder (never one found on PATH)."""
    root = environ.get("SystemRoot") or environ.get("SYSTEMROOT") or "C:\\Windows"
    return f"{root}\\System32\\cmd.exe"


def _quote_batch_argument(arg: str, program: str) -> str:
    if any(c in arg for c in "\r\n\0"):
        raise SpawnError(
            f"argument {arg!r} of {program!r} holds a line break or NUL, which no batch file "
            f"(.cmd/.bat) receives intact through cmd.exe: remove it from the entry's args, or "
            f"run the program the shim starts (e.g. node and the .js it names) as the command",
            permanent=True,
        )
    quote = (
        not arg
        or arg.endswith("\\")
        or any(
            (c.isascii() and not (c.isalnum() or c in UNQUOTED)) or not c.isprintable() for c in arg
        )
    )
    out: list[str] = []
    backslashes = 0
    for c in arg:
        if c == "\\":
            backslashes += 1
            out.append(c)
            continue
        if c == '"':
            out.append("\\" * backslashes + '"')  # 2n backslashes, then the doubled quote
        elif c == "%":
            out.append(PERCENT[:-1])  # "%%cd:~," and the "%" itself below
        backslashes = 0
        out.append(c)
    body = "".join(out)
    if quote:
        return f'"{body}{chr(92) * backslashes}"'
    return body


def batch_command_line(script: str, args: Sequence[str]) -> str:
    """The cmd.exe line that runs ``script`` with ``args`` arriving as they are, or SpawnError."""
    if '"' in script or script.endswith("\\"):
        raise SpawnError(
            f"batch file path {script!r} cannot be quoted for cmd.exe (a '\"' or a final '\\')",
            permanent=True,
        )
    quoted_script = '"' + script.replace("%", PERCENT) + '"'
    parts = [quoted_script, *(_quote_batch_argument(arg, script) for arg in args)]
    return f'cmd.exe {CMD_SWITCHES} "{" ".join(parts)}"'


def popen_command(
    argv: Sequence[str], system: str = sys.platform, environ: Mapping[str, str] = os.environ
) -> tuple[str | list[str], str | None]:
    """``(args, executable)`` for ``subprocess.Popen``: a batch file's cmd.exe line on Windows."""
    if system == "win32" and argv and is_batch(argv[0]):
        return batch_command_line(argv[0], argv[1:]), cmd_exe(environ)
    return list(argv), None
