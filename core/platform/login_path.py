"""PATH for a tray started from the desktop: the user's login shell's, asked once.

An app started by Finder, the Dock or a LaunchAgent on macOS gets launchd's
``/usr/bin:/bin:/usr/sbin:/sbin``; one started from a Linux desktop entry
gets the session's, without what the shell's rc files add. Homebrew, nvm,
volta, ``~/.local/bin`` are then missing and ``npx``/``uvx`` servers are
"not found on PATH". So when the PATH the tray was given holds only system
folders, it asks the user's login shell, as editors do: ``$SHELL -ilc``
(login for ``.zprofile``/``.bash_profile``, interactive for the ``.zshrc``/
``.bashrc`` where nvm lives), printing PATH between two random markers so
what the rc files print is ignored, in a session of its own so a shell that
hangs is killed whole after ``LOGIN_SHELL_TIMEOUT_SECONDS``. If it cannot
say, the usual folders that exist are added instead (``FALLBACK_FOLDERS``).
The shell's PATH comes first, then what the tray had that it lacks.

Windows has no login shell to ask: the Run value, a shortcut and a
double-click all inherit Explorer's environment, built from the user's and
the system's registry PATH (where installers put node, Python and uv), so
the PATH is taken as it is. The OS, the environment, the home and the
timeout are injected.
"""

import os
import re
import secrets
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from core.platform.osname import current_os

#: How long the login shell may take (rc files that load nvm take ~1 s).
LOGIN_SHELL_TIMEOUT_SECONDS: Final = 5.0
#: Folders every system PATH has: a PATH of only these is a minimal one.
SYSTEM_FOLDERS: Final = frozenset(
    {
        "/usr/bin",
        "/bin",
        "/usr/sbin",
        "/sbin",
        "/usr/local/bin",
        "/usr/local/sbin",
        "/usr/games",
        "/usr/local/games",
        "/snap/bin",
    }
)
#: Where package managers put commands, tried when the shell cannot say
#: (``~`` is the user's home); only those that exist are added.
FALLBACK_FOLDERS: Final = (
    "/opt/homebrew/bin",
    "/opt/homebrew/sbin",
    "/usr/local/bin",
    "/home/linuxbrew/.linuxbrew/bin",
    "~/.local/bin",
    "~/.volta/bin",
    "~/.cargo/bin",
    "~/.bun/bin",
    "~/.deno/bin",
    "~/.asdf/shims",
    "~/.local/share/mise/shims",
)
#: The shell asked when neither SHELL nor the user's account names one.
DEFAULT_SHELL: Final = "/bin/sh"


@dataclass(frozen=True)
class PathOrigin:
    """Where the tray's PATH came from; ``str()`` is the user's line."""

    #: "inherited", "login-shell" or "fallback".
    source: str
    #: The shell asked, or why nothing was asked or what went wrong.
    detail: str
    #: The folders added to the PATH the tray was started with.
    added: tuple[str, ...] = ()

    def __str__(self) -> str:
        added = f", which added {', '.join(self.added)}" if self.added else ", which added nothing"
        if self.source == "login-shell":
            return f"PATH from the login shell ({self.detail}){added}"
        if self.source == "fallback":
            return f"PATH: {self.detail}; the usual folders that exist were added instead{added}"
        return f"PATH as mcp-tray was started ({self.detail})"

    def to_json(self) -> dict[str, object]:
        return {"source": self.source, "detail": self.detail, "added": list(self.added)}


def is_minimal(path: str) -> bool:
    """Whether ``path`` holds only system folders (what a desktop session gives)."""
    return all(part.rstrip("/") in SYSTEM_FOLDERS or not part for part in path.split(":"))


def _nvm_node(home: Path) -> list[Path]:
    """nvm's newest installed node (its default is an alias the shell resolves)."""
    versions = home / ".nvm" / "versions" / "node"
    try:
        found = [p for p in versions.iterdir() if re.fullmatch(r"v\d+\.\d+\.\d+", p.name)]
    except OSError:
        return []
    if not found:
        return []
    newest = max(found, key=lambda p: tuple(int(n) for n in p.name[1:].split(".")))
    return [newest / "bin"]


def fallback_folders(home: Path) -> list[str]:
    """The usual command folders that exist under ``home`` and on this machine."""
    candidates = [Path(f.replace("~", str(home), 1)) for f in FALLBACK_FOLDERS]
    candidates += _nvm_node(home)
    return [str(folder) for folder in candidates if folder.is_dir()]


def ask_login_shell(shell: str, timeout: float, environ: Mapping[str, str]) -> str:
    """``shell``'s PATH as a login, interactive shell; raises OSError (with why) when it
    cannot say: not started, timed out (killed with what it started), no PATH printed."""
    marker = secrets.token_hex(8)
    # Outside quotes the markers hold no character any shell treats specially (zsh, bash, fish).
    script = f"printf '%s' {marker}\"$PATH\"{marker}"
    try:
        child = subprocess.Popen(
            [shell, "-ilc", script],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=dict(environ),
            start_new_session=True,  # no terminal to take; one group to kill
        )
    except OSError as exc:
        raise OSError(f"the login shell {shell} could not start ({exc.strerror or exc})") from None
    try:
        out, _ = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_session(child)
        raise OSError(f"the login shell {shell} timed out after {timeout:g} s") from None
    found = re.search(f"{marker}(.*?){marker}", out.decode("utf-8", "replace"), re.DOTALL)
    if found is None or not found.group(1).strip():
        raise OSError(
            f"the login shell {shell} printed no PATH (exit code {child.returncode})"
        ) from None
    return found.group(1).strip()


if sys.platform == "win32":

    def _kill_session(child: "subprocess.Popen[bytes]") -> None:
        child.kill()
        child.communicate()

    def _account_shell() -> str | None:
        return None

else:
    import pwd

    def _kill_session(child: "subprocess.Popen[bytes]") -> None:
        """End the shell and what it started (they may hold its stdout), then reap it."""
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except OSError:
            child.kill()
        child.communicate()

    def _account_shell() -> str | None:
        """The login shell of this user's account (what a terminal would start)."""
        try:
            return pwd.getpwuid(os.getuid()).pw_shell or None
        except KeyError:
            return None


def merged(first: str, then: str) -> str:
    """``first``'s folders, then those of ``then`` it lacks, each once."""
    seen: dict[str, None] = {}
    for part in [*first.split(":"), *then.split(":")]:
        if part:
            seen.setdefault(part, None)
    return ":".join(seen)


def desktop_path(
    environ: Mapping[str, str] | None = None,
    *,
    system: str | None = None,
    home: Path | None = None,
    timeout: float = LOGIN_SHELL_TIMEOUT_SECONDS,
) -> tuple[str, PathOrigin]:
    """The PATH to resolve and spawn servers with, and where it came from."""
    env = os.environ if environ is None else environ
    system = system or current_os()
    path = env.get("PATH", "")
    if system == "win32":
        return path, PathOrigin("inherited", "Windows: the user's environment from Explorer")
    if not is_minimal(path):
        return path, PathOrigin("inherited", "it holds more than the system folders")
    shell = env.get("SHELL") or _account_shell() or DEFAULT_SHELL
    try:
        shell_path = ask_login_shell(shell, timeout, env)
    except OSError as exc:
        extra = ":".join(fallback_folders(home or Path.home()))
        result, origin_source, detail = merged(extra, path), "fallback", str(exc)
    else:
        result, origin_source, detail = merged(shell_path, path), "login-shell", f"{shell} -ilc"
    before = set(path.split(":"))
    added = tuple(part for part in result.split(":") if part not in before)
    return result, PathOrigin(origin_source, detail, added)


_ADOPTED: list[PathOrigin] = []


def adopt_desktop_path() -> PathOrigin:
    """Put ``desktop_path``'s PATH into this process's environment, once (the tray's
    servers are resolved and spawned with it); where it came from."""
    if not _ADOPTED:
        path, origin = desktop_path()
        if path:
            os.environ["PATH"] = path
        _ADOPTED.append(origin)
    return _ADOPTED[0]


def path_origin() -> PathOrigin:
    """Where this process's PATH came from (inherited, unless ``adopt_desktop_path`` ran)."""
    return _ADOPTED[0] if _ADOPTED else PathOrigin("inherited", "no login shell was asked")
