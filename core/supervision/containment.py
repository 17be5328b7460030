"""A sandboxed entry's grants, resolved at each spawn, and the command line that enforces them.

``Containment.prepare`` turns a ``SandboxConfig`` (paths as written) into
``Grants`` (absolute, existing paths) and wraps the child's command in
what this OS enforces them with (core.platform.sandboxing). ``${state}`` is
the server's own folder under mcp-tray's state; its ``tmp`` is the child's
``TMPDIR``; ``${roots}`` are the folders of the sessions the child serves,
asked of its roots source at spawn. Where nothing can enforce the sandbox
the start fails permanently (the server is parked with the reason) unless
the entry says ``"required": false``.

``"read": "system"``: the OS's folders (``SYSTEM_READ``), the interpreter's,
the command's folder (and its prefix when that folder is a ``bin``), the
folders of arguments that are existing paths, the cwd, and the home except
``SECRET_STORES``. Landlock only grants whole hierarchies, so the home is
opened child by child: every entry of the home except the secret ones (and
the same one level down for ``.config/gcloud`` and the like). The home and
those parents themselves may only be listed; a file created directly in
them after the spawn stays unreadable until the next spawn.
"""

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote, urlparse

from core.base.errors import SpawnError
from core.platform import sandboxing
from core.platform.grants import Grants
from core.platform.sandboxing import Support
from core.settings.config import ServerConfig
from core.settings.config_model import SandboxConfig

#: The state folder's subfolder that is the child's ``TMPDIR``.
TMP_FOLDER: Final = "tmp"


@dataclass(frozen=True)
class Prepared:
    command: str
    args: tuple[str, ...]
    env: Mapping[str, str]
    #: Set when the sandbox could not be enforced and the entry allows running without it.
    warning: str | None = None


def root_folders(roots: Iterable[Mapping[str, Any]]) -> list[str]:
    """The local folders of a ``roots/list`` answer (``file://`` URIs only)."""
    found = []
    for root in roots:
        parsed = urlparse(str(root.get("uri", "")))
        if parsed.scheme == "file" and parsed.path:
            found.append(unquote(parsed.path))
    return found


def home_reads(home: Path, denied: Iterable[Path]) -> tuple[list[str], list[str]]:
    """(folders and files to open, folders only to list): the home minus ``denied``."""
    denied_set = {p for p in denied}
    reads: list[str] = []
    listing: list[str] = []

    def walk(folder: Path) -> None:
        listing.append(str(folder))
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            path = Path(entry.path)
            if path in denied_set:
                continue
            if any(path in d.parents for d in denied_set) and entry.is_dir(follow_symlinks=False):
                walk(path)
            else:
                reads.append(str(path))

    if home.is_dir():
        walk(home)
    return reads, listing


def command_folders(executable: str) -> list[str]:
    """The folder of the program and, when that is a ``bin``, its prefix (a venv, node's)."""
    found = []
    for path in {Path(executable), Path(os.path.realpath(executable))}:
        folder = path.parent
        found.append(str(folder))
        if folder.name == "bin":
            found.append(str(folder.parent))
    return found


class Containment:
    """Sandboxes and their state folders, for every server of one supervisor."""

    def __init__(
        self,
        state_root: Path,
        *,
        probe: Callable[[], Support] = sandboxing.probe,
        home: Path | None = None,
        python: str = sys.executable,
    ) -> None:
        self.state_root = state_root
        self._probe = probe
        self._support: Support | None = None
        self.home = home if home is not None else Path.home()
        self.python = python

    @property
    def support(self) -> Support:
        if self._support is None:
            self._support = self._probe()
        return self._support

    def state_dir(self, name: str) -> Path:
        """A server's own folder (its per-session and per-workspace children share it)."""
        return self.state_root / name.partition("@")[0]

    def describe(self, config: ServerConfig) -> str:
        """One line for status and the Servers tab."""
        sandbox = config.sandbox
        if sandbox is None:
            return "none"
        missing = self.support.lacks(sandbox.network)
        if missing:
            return f"not enforced ({missing})"
        folders = 1 + len(sandbox.write)
        return (
            f"{self.support.label()} — write {folders} folder{'s' if folders != 1 else ''}, "
            f"network {'on' if sandbox.network else 'off'}"
        )

    async def prepare(
        self,
        config: ServerConfig,
        env: Mapping[str, str],
        executable: str,
        roots: Callable[[], Awaitable[Sequence[str]]],
    ) -> Prepared:
        """The command, args and environment a sandboxed child starts with (or SpawnError)."""
        sandbox = config.sandbox
        assert sandbox is not None
        state = self.state_dir(config.name)
        tmp = state / TMP_FOLDER
        tmp.mkdir(parents=True, exist_ok=True)
        child_env = {**env, "TMPDIR": str(tmp)}
        missing = self.support.lacks(sandbox.network)
        if missing:
            if sandbox.required:
                raise SpawnError(
                    f"its sandbox cannot be enforced here: {missing}. mcp-tray never runs a "
                    f'sandboxed server unconfined: set "required": false in its "sandbox" to '
                    f"run it without one",
                    permanent=True,
                )
            warning = f"running {config.name!r} WITHOUT its sandbox: {missing}"
            return Prepared(executable, config.args, child_env, warning)
        wanted_roots = (
            list(await roots()) if "${roots}" in (*sandbox.write, *(sandbox.read or ())) else []
        )
        # A few folder listings and stats: off the loop all the same.
        grants = await asyncio.to_thread(
            self.grants, config, sandbox, executable, state, wanted_roots
        )
        argv = sandboxing.launch_argv(self.support, grants, [executable, *config.args], self.python)
        return Prepared(argv[0], tuple(argv[1:]), child_env)

    def grants(
        self,
        config: ServerConfig,
        sandbox: SandboxConfig,
        executable: str,
        state: Path,
        roots: Sequence[str],
    ) -> Grants:
        def expand(paths: Iterable[str]) -> list[str]:
            out: list[str] = []
            for path in paths:
                if path == "${roots}":
                    out += roots
                    continue
                path = path.replace("${state}", str(state))
                if path == "~" or path.startswith("~/"):
                    path = str(self.home / path[2:])
                out.append(path)
            return out

        write = [str(state), *expand(sandbox.write), *sandboxing.DEVICE_WRITE]
        read = [
            *sandboxing.system_reads(),
            *command_folders(executable),
            *{sys.prefix, sys.base_prefix, sys.exec_prefix},
            *([config.cwd] if config.cwd else []),
        ]
        listing: list[str] = []
        if sandbox.read is None:
            read += [_argument_folder(a) for a in config.args if _is_path(a)]
            denied = [self.home / s for s in sandboxing.SECRET_STORES]
            denied.append(self.state_root.parent)
            home_read, listing = home_reads(self.home, denied)
            read += home_read
        else:
            read += [str(self.home / c) for c in sandboxing.PACKAGE_CACHES]
            read += expand(sandbox.read)
        return Grants(
            read=_existing(read),
            write=_existing(write),
            listing=_existing(listing),
            network=sandbox.network,
        )


#: A script inside one of these needs the whole tree beside it (its dependencies).
PACKAGE_TREES: Final = ("node_modules", "site-packages")


def _argument_folder(arg: str) -> str:
    """What an existing-path argument opens: a folder itself; a file's folder, or the
    package tree it sits in (``.../node_modules``, ``.../site-packages``)."""
    path = Path(arg)
    for index, part in enumerate(path.parts):
        if part in PACKAGE_TREES:
            return str(Path(*path.parts[: index + 1]))
    return arg if path.is_dir() else str(path.parent)


def _is_path(arg: str) -> bool:
    return os.path.isabs(arg) and os.path.exists(arg)


def _existing(paths: Iterable[str]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for path in paths:
        if path and os.path.exists(path):
            seen.setdefault(os.path.abspath(path), None)
    return tuple(seen)
