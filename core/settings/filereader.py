"""Reading a file someone else may have put there: never a hang, never a flood.

mcp-tray reads files it does not own: its config (which anything the user
runs may rename a FIFO onto), other clients' config files (``import``,
``client-config --install``), and its saved sessions (which any local
process of the user may have put anything in). ``read_text`` reads one as
UTF-8 text with these guards, and says what is wrong in a ``ConfigError``
naming the file:

- what is not a regular file (a folder, a FIFO, a device, a socket) is
  refused after a ``stat``, without opening it: opening some devices has
  effects of its own, and reading a FIFO waits for a writer forever;
- it is opened without waiting (``O_NONBLOCK`` on POSIX) and checked again
  with ``fstat``: the path may have been swapped since the ``stat``;
- at most ``role.limit`` bytes are read, however much the file grows;
- where ``role.follow_symlinks`` is False (a file of mcp-tray's own, which
  no one should have made a link), a symbolic link is refused too, and the
  open does not follow one put there since (``O_NOFOLLOW`` on POSIX).

``parse_json`` parses what was read, a document nested past the parser's
recursion refused like any other error; ``nested_deeper`` is the bound a
caller puts on what it keeps (a deep value is a ``RecursionError`` in
whatever walks it later).

A ``Role`` says what the file is to mcp-tray, so each refusal says what to do.
"""

import json
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from core.base.errors import ConfigError
from core.platform.files import NO_WAIT_FLAGS

#: Bytes read from the file at once.
CHUNK: Final = 64 * 1024

_FILE_KINDS: Final = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link"),
)
#: Not following a link put where the file should be (POSIX; Windows has no such flag).
_NO_FOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)


@dataclass(frozen=True)
class Role:
    """What a file is to mcp-tray: its limit, and the words of each refusal."""

    #: The most bytes it may hold.
    limit: int
    #: What mcp-tray reads from it ("its config"): "reads ... only from a file".
    noun: str
    #: What the user should point at instead ("a JSON file").
    expected: str
    #: A file of that kind ("a config"): "more than ... may be".
    kind: str
    #: What to do when it does not exist (None: a missing file is no error).
    missing_fix: str | None
    #: What to do when it is too big.
    too_big_fix: str
    #: What to do when it is not UTF-8.
    encoding_fix: str = "save it as UTF-8"
    #: The complaint when it does not exist.
    missing: str = "the file does not exist"
    #: False: a symbolic link is refused, not read through (a file of mcp-tray's own).
    follow_symlinks: bool = True
    #: What to do when it is not JSON.
    syntax_fix: str = "correct the JSON syntax there"


def parse_json(text: str, path: Path, role: Role, *, line: int | None = None) -> Any:
    """``text`` (all of ``path``, or its line ``line``) as JSON; else ``ConfigError``
    saying why not."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            path,
            f"invalid JSON: {exc.msg} (column {exc.colno})",
            fix=role.syntax_fix,
            line=line or exc.lineno,
        ) from None
    except RecursionError:
        raise ConfigError(
            path,
            f"the JSON is nested deeper than the parser goes (about {sys.getrecursionlimit()} "
            "levels)",
            fix=role.syntax_fix,
            line=line,
        ) from None
    except ValueError:  # an integer past Python's int_max_str_digits
        raise ConfigError(path, "a number has thousands of digits", fix=role.syntax_fix) from None
    return value


def nested_deeper(value: Any, limit: int) -> bool:
    """Whether ``value`` nests arrays/objects deeper than ``limit`` (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth >= limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def read_text(path: Path, role: Role) -> str | None:
    """``path``'s text (a leading byte-order mark dropped), or None when it does
    not exist and ``role`` allows that; else ``ConfigError`` saying why not."""
    data = read_bytes(path, role)
    if data is None:
        return None
    try:
        # utf-8-sig: Windows editors start the file with a byte-order mark.
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            path,
            f"the file is not UTF-8 text ({exc.reason} at byte {exc.start})",
            fix=role.encoding_fix,
            line=data.count(b"\n", 0, exc.start) + 1,
        ) from None


def read_bytes(path: Path, role: Role) -> bytes | None:
    """The file's bytes, at most ``role.limit``; never waits on a pipe or device."""

    def unreadable(exc: OSError) -> ConfigError:
        return ConfigError(path, f"cannot read it ({exc.strerror})", fix="check its permissions")

    def missing() -> bytes | None:
        if role.missing_fix is None:
            return None
        raise ConfigError(path, role.missing, fix=role.missing_fix)

    # stat first, so a FIFO or device is refused without even opening it
    # (opening some devices has effects of its own).
    try:
        _check(path, os.stat(path) if role.follow_symlinks else os.lstat(path), role)
    except FileNotFoundError:
        return missing()
    except OSError as exc:
        raise unreadable(exc) from None
    try:
        # Opened without waiting (O_NONBLOCK on POSIX): should a FIFO be renamed
        # in between, open and read return at once instead of waiting for a writer.
        fd = os.open(path, NO_WAIT_FLAGS | (0 if role.follow_symlinks else _NO_FOLLOW))
    except FileNotFoundError:
        return missing()
    except OSError as exc:
        raise unreadable(exc) from None
    try:
        # What was opened is what counts: the path may have changed since stat.
        _check(path, os.fstat(fd), role)
        chunks: list[bytes] = []
        left = role.limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, CHUNK))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise unreadable(exc) from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > role.limit:  # it grew while we read
        _too_big(path, len(data), role)
    return data


def _check(path: Path, status: os.stat_result, role: Role) -> None:
    """Refuse what is not a regular file of at most ``role.limit`` bytes."""
    mode = status.st_mode
    if stat.S_ISDIR(mode):
        raise ConfigError(path, "this is a folder, not a file", fix=f"point at {role.expected}")
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _FILE_KINDS if test(mode)), "a special file")
        raise ConfigError(
            path,
            f"this is {kind}, not a regular file; mcp-tray reads {role.noun} only from a file",
            fix=f"point at {role.expected} (or save it to one)",
        )
    if status.st_size > role.limit:
        _too_big(path, status.st_size, role)


def _too_big(path: Path, size: int, role: Role) -> None:
    raise ConfigError(
        path,
        f"the file is {size} bytes, more than {role.kind} may be "
        f"({role.limit} bytes, {role.limit // 1024 // 1024} MiB)",
        fix=role.too_big_fix,
    )
