"""Private folders and files, the one-instance lock, a file limit, a no-wait open.

- Private: every folder mcp-tray creates is 0700 and every file it keeps a
  secret or a pid in is 0600 on POSIX, whatever the umask: each missing
  level of a path is made by us and ``chmod``-ed (``mkdir(parents=True)``
  would give the parents the umask's mode). On Windows the mode bits mean
  nothing; the folders live in the user's profile, whose ACL already keeps
  other users out, and new files inherit it.
- Lock: an exclusive, non-blocking lock on ``state/instance.lock`` held for
  the tray's whole life, so a crash releases it: ``fcntl.flock`` on POSIX,
  ``msvcrt.locking`` of its first byte on Windows.
- File limit: POSIX raises the soft ``RLIMIT_NOFILE`` to the hard one
  (desktops default to 1,024 descriptors); Windows has no such per-process
  limit on sockets, so there is nothing to raise.
- No-wait open: ``O_NONBLOCK | O_NOCTTY`` on POSIX, so opening a FIFO or a
  terminal put where a config should be returns at once; Windows keeps its
  named pipes out of the file system, so a plain open cannot wait.
- Line endings: every file mcp-tray writes gets exactly the characters it
  was given (bytes, or text with ``newline=""``). Text mode's default
  turns each ``\n`` into ``\r\n`` on Windows, so text read with its
  ``\r\n`` kept and written back becomes ``\r\r\n``: a second install
  left Codex's config.toml unparseable. ``line_ending`` and
  ``with_line_ending`` keep a file's own ending for what is added to it.
"""

import contextlib
import os
import secrets
import shutil
import sys
from pathlib import Path
from typing import IO, Any, Final

#: What a folder or a file of mcp-tray's own gets on POSIX.
PRIVATE_DIR_MODE: Final = 0o700
PRIVATE_FILE_MODE: Final = 0o600
#: The file limit reported where the OS has none to raise (Windows).
NO_FILE_LIMIT: Final = 1 << 20
#: Not inherited by children (the default on Windows, where the flag does not exist).
_CLOSE_ON_EXEC: Final = getattr(os, "O_CLOEXEC", 0)


def private_dirs(folder: Path) -> Path:
    """Make ``folder`` and each missing parent, private (0700) whatever the umask."""
    missing: list[Path] = []
    current = folder
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for level in reversed(missing):
        try:
            os.mkdir(level, PRIVATE_DIR_MODE)
        except FileExistsError:
            continue  # made meanwhile by someone else: theirs to own
        _chmod(level, PRIVATE_DIR_MODE)
    if not folder.is_dir():
        # An existing file in the way: let mkdir say so in its own words.
        folder.mkdir()
    return folder


def open_private(path: Path, mode: str = "a", encoding: str = "utf-8") -> IO[Any]:
    """A file of mcp-tray's own (a log, a lock) opened to append (``"a"``, ``"ab"``) or to
    read and append (``"a+"``), 0600 whatever the umask, in a private folder; one made
    before (by an older mcp-tray, under another umask) is made 0600 too."""
    private_dirs(path.parent)
    access = os.O_RDWR if "+" in mode else os.O_WRONLY
    # O_BINARY (Windows): Python's own layer does any newline translation, not the C runtime.
    flags = access | os.O_CREAT | os.O_APPEND | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags, PRIVATE_FILE_MODE)
    # Not ours to change (another user's file, a read-only mount): still usable.
    with contextlib.suppress(OSError):
        _chmod(path, PRIVATE_FILE_MODE)
    if "b" in mode:
        return os.fdopen(fd, mode)
    return os.fdopen(fd, mode, encoding=encoding, newline="")


def write_private(path: Path, text: str) -> None:
    """Write ``text`` atomically, 0600 from the first byte, in a private folder.

    Never through a link: the text goes to a new temporary file (``O_EXCL``,
    so a link or file already at that name is refused, not written through),
    which then replaces ``path`` itself (``os.replace`` swaps a link there
    for the file; the link's target is left as it was)."""
    private_dirs(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    # O_BINARY (Windows): else the C runtime's text mode would still add \r before \n.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _CLOSE_ON_EXEC | getattr(os, "O_BINARY", 0)
    fd = os.open(tmp, flags, PRIVATE_FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as handle:
            _chmod(tmp, PRIVATE_FILE_MODE)
            handle.write(text.encode("utf-8"))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def line_ending(text: str | None) -> str:
    """The line ending of a file's text: ``"\r\n"`` when every line ends so, else ``"\n"``
    (a file with mixed endings keeps them; what is added to it gets ``"\n"``)."""
    if not text or "\r\n" not in text:
        return "\n"
    return "\r\n" if text.count("\r\n") == text.count("\n") else "\n"


def with_line_ending(text: str, ending: str) -> str:
    """``text``, whose lines end ``"\n"``, with each ending ``ending``."""
    return text if ending == "\n" else text.replace("\n", ending)


def copy_private(source: Path, dest: Path) -> None:
    """``source``'s bytes into ``dest`` (made, or emptied first), 0600 like every file of ours."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0)
    fd = os.open(dest, flags, PRIVATE_FILE_MODE)
    with contextlib.suppress(OSError):
        _chmod(dest, PRIVATE_FILE_MODE)
    with os.fdopen(fd, "wb") as out, source.open("rb") as into:
        shutil.copyfileobj(into, out)


def set_mode(path: Path | str, mode: int) -> None:
    """``chmod`` on POSIX; nothing on Windows, where files take the folder's ACL."""
    if sys.platform != "win32":
        os.chmod(path, mode)


_chmod = set_mode


if sys.platform == "win32":
    import msvcrt

    LOCK_NAME: Final = "msvcrt.locking"

    def try_lock(handle: IO[str]) -> bool:
        """Take the exclusive lock on ``handle``'s file; False when someone holds it."""
        handle.seek(0)
        try:
            msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

    def unlock(handle: IO[str]) -> None:
        handle.seek(0)
        with contextlib.suppress(OSError):
            msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)

    FILE_LIMIT_NAME: Final = "none (Windows has no per-process socket limit)"

    def raise_file_limit() -> int:
        return NO_FILE_LIMIT

    NO_WAIT_FLAGS: Final = os.O_RDONLY | os.O_BINARY | os.O_NOINHERIT

else:
    import fcntl
    import resource

    LOCK_NAME: Final = "fcntl.flock"

    def try_lock(handle: IO[str]) -> bool:
        """Take the exclusive lock on ``handle``'s file; False when someone holds it."""
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def unlock(handle: IO[str]) -> None:
        fcntl.flock(handle, fcntl.LOCK_UN)

    FILE_LIMIT_NAME: Final = "RLIMIT_NOFILE (soft raised to hard)"

    def raise_file_limit() -> int:
        """Raise the soft file limit to the hard one; the soft limit now."""
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        if target > soft:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
                return target
            except (ValueError, OSError):
                return soft
        return soft

    NO_WAIT_FLAGS: Final = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


PRIVATE_NAME: Final = (
    "the user profile's ACL (mode bits unused)"
    if sys.platform == "win32"
    else "mode 0700/0600, whatever the umask"
)
