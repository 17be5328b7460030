"""Every AI client mcp-tray connects to, in one registry.

``client-config`` (its snippets and ``--install``), ``import``, the tray's
"Connect a client…" dialog and the CLI's choices all read ``CLIENTS``, so
adding a client is adding one ``Client`` here: its names, the shape of its
entries, and where it keeps its MCP servers on Linux, macOS and Windows.

Where each client keeps its servers, checked against each client's own
documentation on 2026-11-30 (the OS is injected, so tests check all three):

- Claude Desktop: ``claude_desktop_config.json`` under ``mcpServers``
  (modelcontextprotocol.io/quickstart/user): macOS in ``~/Library/Application
  Support/Claude``, Windows in ``%APPDATA%\\Claude``; read only at start
  ("quit it completely"). Its Windows installer is an MSIX package
  (``Claude_<publisher id>``) since early 2026, and Windows gives a packaged
  app's AppData a private copy (Microsoft's "how packaged desktop apps run"):
  it reads ``%LOCALAPPDATA%\\Packages\\Claude_*\\LocalCache\\Roaming\\Claude``,
  and a file in the real ``%APPDATA%`` is hidden from it (anthropics/
  claude-code#26073). When that package folder exists, that file is the one. There is no official Linux build; the community
  ones use ``~/.config/Claude`` (aaddrick/claude-desktop-debian#400). It
  launches stdio servers only.
- Claude Code: the user scope (``claude mcp add --scope user``) is the
  top-level ``mcpServers`` of ``~/.claude.json`` on every OS (Windows:
  ``%USERPROFILE%\\.claude.json``); ``projects.<path>.mcpServers`` is the
  per-project scope, left alone (code.claude.com/docs/en/mcp).
- Cursor: the global ``~/.cursor/mcp.json`` on every OS, under ``mcpServers``
  (cursor.com/docs/mcp); "save the file and restart Cursor".
- VS Code: the user profile's ``mcp.json`` (since 1.102; before that a
  ``mcp`` key of settings.json): ``~/.config/Code/User`` on Linux,
  ``~/Library/Application Support/Code/User`` on macOS, ``%APPDATA%\\Code\\User``
  on Windows; servers under top-level ``servers``, each with ``"type"``
  ``stdio`` or ``http`` (code.visualstudio.com/docs/copilot/reference/mcp-configuration).
- Gemini CLI: the user settings ``~/.gemini/settings.json`` on every OS
  (Windows: ``%USERPROFILE%\\.gemini``), servers under ``mcpServers`` with
  ``command``/``args``/``env``, or ``httpUrl`` and ``headers`` for streamable
  HTTP (geminicli.com/docs/tools/mcp-server); it starts them only in a folder
  the user trusts, and reads the file when a session starts.
- Codex: ``~/.codex/config.toml`` (``$CODEX_HOME/config.toml`` when set; on
  Windows ``%USERPROFILE%\\.codex``), one ``[mcp_servers.NAME]`` table per
  server: ``command``/``args``/``env``, or ``url`` and ``http_headers`` for
  streamable HTTP (developers.openai.com/codex/mcp); a ``headers`` key would
  be ignored.
- The MCP Inspector keeps no file: it gets a snippet to paste, and a URL it
  does not rewrite (it appends ``/mcp`` to any URL not ending so).
"""

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

from core.base.errors import SnippetError
from core.platform.osname import current_os

#: Where a client's file is relative to: the home folder, the XDG config
#: home (``$XDG_CONFIG_HOME`` if absolute, else ``~/.config``), macOS's
#: ``~/Library/Application Support``, or Windows' roaming ``%APPDATA%``.
Base = Literal["home", "xdg-config", "app-support", "appdata"]


@dataclass(frozen=True)
class Place:
    base: Base
    relative: str
    #: A variable naming the folder of the file instead (``CODEX_HOME``),
    #: honoured when it holds an absolute path.
    folder_env: str | None = None
    #: Windows: the MSIX package name (``Claude``) whose private copy of
    #: ``%APPDATA%`` the client reads when it is installed as that package.
    msix_package: str | None = None


@dataclass(frozen=True)
class Client:
    """One AI client: what mcp-tray writes for it, and where."""

    #: The name on the command line: ``client-config ID``.
    id: str
    #: The client's name as its users know it.
    label: str
    #: What the bridge registers as (``MCP_TRAY_CLIENT``).
    registered_as: str
    #: The top-level key of its servers.
    key: str = "mcpServers"
    #: The "type" of a (stdio, HTTP) entry, for clients that want one.
    entry_types: tuple[str, str] | None = None
    #: Whether it can reach a server by URL (else only the bridge will do).
    http: bool = True
    #: The gateway path of server ``{name}`` in its HTTP entries.
    http_path: str = "/mcp/{name}"
    #: The keys of an HTTP entry's URL and headers.
    url_key: str = "url"
    headers_key: str = "headers"
    #: How its file is written: "json", or "toml" (Codex).
    file_format: Literal["json", "toml"] = "json"
    #: Its config file on each OS (``sys.platform`` names); empty: it keeps none.
    places: Mapping[str, Place] = field(default_factory=dict)
    #: Which client to restart, and how: it sees new servers only then.
    restart: str = ""
    #: Whether ``mcp-tray import ID`` reads its servers.
    importable: bool = False

    @property
    def installable(self) -> bool:
        return bool(self.places)


def _everywhere(base: Base, relative: str, folder_env: str | None = None) -> dict[str, Place]:
    return {system: Place(base, relative, folder_env) for system in ("linux", "darwin", "win32")}


CLIENTS: Final = {
    client.id: client
    for client in (
        Client(
            "claude",
            "Claude Desktop",
            "claude-desktop",
            http=False,
            places={
                "linux": Place("xdg-config", "Claude/claude_desktop_config.json"),
                "darwin": Place("app-support", "Claude/claude_desktop_config.json"),
                "win32": Place(
                    "appdata", "Claude/claude_desktop_config.json", msix_package="Claude"
                ),
            },
            restart="restart Claude Desktop: quit it completely (from its tray icon too, not "
            "only the window) and start it again; it reads this file only when it starts",
            importable=True,
        ),
        Client(
            "claude-code",
            "Claude Code",
            "claude-code",
            entry_types=("stdio", "http"),
            places=_everywhere("home", ".claude.json"),
            restart="restart Claude Code: running `claude` sessions read ~/.claude.json only "
            "when they start, so start a new one",
        ),
        Client(
            "cursor",
            "Cursor",
            "cursor",
            places=_everywhere("home", ".cursor/mcp.json"),
            restart="restart Cursor so it loads the new servers",
            importable=True,
        ),
        Client(
            "vscode",
            "VS Code",
            "vscode",
            key="servers",
            entry_types=("stdio", "http"),
            places={
                "linux": Place("xdg-config", "Code/User/mcp.json"),
                "darwin": Place("app-support", "Code/User/mcp.json"),
                "win32": Place("appdata", "Code/User/mcp.json"),
            },
            restart="restart VS Code, or run 'Developer: Reload Window' in each of its windows",
            importable=True,
        ),
        Client(
            "gemini",
            "Gemini CLI",
            "gemini-cli",
            url_key="httpUrl",
            places=_everywhere("home", ".gemini/settings.json"),
            restart="start a new Gemini CLI session: `gemini` reads ~/.gemini/settings.json when "
            "it starts, and starts MCP servers only in a folder you trust (until then `gemini mcp "
            "list` shows each entry as Disabled): run `gemini` in your project's folder once and "
            'choose "Trust folder" (or "Trust parent folder") in the dialog it shows; the choice '
            "is kept in ~/.gemini/trustedFolders.json",
            importable=True,
        ),
        Client(
            "codex",
            "Codex",
            "codex",
            key="mcp_servers",
            headers_key="http_headers",
            file_format="toml",
            places=_everywhere("home", ".codex/config.toml", folder_env="CODEX_HOME"),
            restart="start a new Codex session: `codex` reads ~/.codex/config.toml when it starts",
            importable=True,
        ),
        Client(
            "inspector",
            "MCP Inspector",
            "mcp-inspector",
            entry_types=("stdio", "streamable-http"),
            http_path="/{name}/mcp",
        ),
    )
}


def snippet_targets() -> tuple[str, ...]:
    """``client-config`` targets, in the order the help lists them."""
    return tuple(CLIENTS)


def installable_clients() -> tuple[str, ...]:
    """The clients ``--install`` (and the dialog, in this order) can write to."""
    return tuple(c.id for c in CLIENTS.values() if c.installable)


def importable_clients() -> tuple[str, ...]:
    """The clients ``import`` reads."""
    return tuple(c.id for c in CLIENTS.values() if c.importable)


def client(client_id: str) -> Client:
    found = CLIENTS.get(client_id)
    if found is None:
        raise SnippetError(
            f"no client named {client_id!r}: choose one of {', '.join(snippet_targets())}"
        )
    return found


def installable(client_id: str) -> Client:
    """``client_id``'s entry, refused when it keeps no file to install into."""
    found = client(client_id)
    if not found.installable:
        raise SnippetError(
            f"the {found.label} keeps no config file to install into: print the snippet "
            f"with `mcp-tray client-config {found.id}` and fill its form from it"
        )
    return found


def config_home(
    home: Path | None = None,
    xdg_config_home: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> Path:
    """``$XDG_CONFIG_HOME`` (absolute only, as the XDG spec says), else ``home/.config``.

    An injected ``home`` is a whole world of its own: the environment's
    ``XDG_CONFIG_HOME`` is read only when neither argument is given, so a
    test's tmp_path never leaks into the real config folder.
    """
    if xdg_config_home is not None:
        return xdg_config_home
    if home is not None:
        return home / ".config"
    value = (os.environ if environ is None else environ).get("XDG_CONFIG_HOME", "")
    if value and Path(value).is_absolute():
        return Path(value)
    return Path.home() / ".config"


def client_config_path(
    client_id: str,
    *,
    home: Path | None = None,
    xdg_config_home: Path | None = None,
    system: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Path:
    """Where ``client_id`` keeps its MCP servers on ``system`` (this OS by default).

    ``home`` (and ``xdg_config_home``) place it under a folder of the
    caller's (tests give tmp_path); as with ``config_home``, an injected
    ``home`` ignores the environment, ``%APPDATA%`` included.
    """
    spec = installable(client_id)
    system = system or current_os()
    place = spec.places.get(system) or spec.places["linux"]
    root = home if home is not None else Path.home()
    env = os.environ if environ is None else environ
    folder = env.get(place.folder_env, "") if place.folder_env and home is None else ""
    if folder and Path(folder).is_absolute():
        return Path(folder) / place.relative.rsplit("/", 1)[-1]
    if place.base == "xdg-config":
        base = config_home(home, xdg_config_home, environ)
    elif place.base == "app-support":
        base = root / "Library" / "Application Support"
    elif place.base == "appdata":
        packaged = _msix_roaming(place, root, env if home is None else {})
        appdata = env.get("APPDATA", "") if home is None else ""
        base = packaged or (Path(appdata) if appdata else root / "AppData" / "Roaming")
    else:
        base = root
    return base.joinpath(*place.relative.split("/"))


def _msix_roaming(place: Place, root: Path, env: Mapping[str, str]) -> Path | None:
    """The packaged client's own roaming folder,
    ``%LOCALAPPDATA%\\Packages\\<name>_<publisher id>\\LocalCache\\Roaming``; None when
    it is not installed so. Of several packages, the one holding the file."""
    if place.msix_package is None:
        return None
    local = env.get("LOCALAPPDATA", "")
    packages = (Path(local) if local else root / "AppData" / "Local") / "Packages"
    try:
        found = sorted(
            folder / "LocalCache" / "Roaming"
            for folder in packages.glob(f"{place.msix_package}_*")
            if folder.is_dir()
        )
    except OSError:
        return None
    holding = [f for f in found if f.joinpath(*place.relative.split("/")).is_file()]
    chosen = holding or found
    return chosen[0] if chosen else None


#: The markers around the generated table of the clients' files in a page of docs/.
PATHS_BEGIN: Final = (
    "<!-- client-paths:begin (python -m core.cli.integrations --write FILE renders this table) -->"
)
PATHS_END: Final = "<!-- client-paths:end -->"
#: The columns of that table: ``sys.platform`` names and what readers call them.
SYSTEMS: Final = (("linux", "Linux"), ("darwin", "macOS"), ("win32", "Windows"))
#: How a reader writes each base folder (Windows' spelled as its variables).
_POSIX_BASES: Final[Mapping[str, str]] = {
    "home": "~",
    "xdg-config": "~/.config",
    "app-support": "~/Library/Application Support",
    "appdata": "%APPDATA%",
}
_WINDOWS_BASES: Final[Mapping[str, str]] = {**_POSIX_BASES, "home": "%USERPROFILE%"}


def shown_place(place: Place, system: str) -> str:
    """Where ``place`` is, as a person reads it (``~/.cursor/mcp.json``,
    ``%APPDATA%\\Code\\User\\mcp.json``), with what moves it."""
    windows = system == "win32"
    sep = "\\" if windows else "/"
    base = (_WINDOWS_BASES if windows else _POSIX_BASES)[place.base]
    text = f"`{base}{sep}{place.relative.replace('/', sep)}`"
    if place.base == "xdg-config":
        text += " (under `$XDG_CONFIG_HOME` when it is set)"
    name = place.relative.rsplit("/", 1)[-1]
    if place.folder_env:
        moved = f"%{place.folder_env}%\\{name}" if windows else f"${place.folder_env}/{name}"
        text += f" (`{moved}` when `{place.folder_env}` is set)"
    if place.msix_package:
        packaged = f"%LOCALAPPDATA%\\Packages\\{place.msix_package}_*\\LocalCache\\Roaming"
        text += (
            f"; installed from its MSIX package, `{packaged}{sep}{place.relative.replace('/', sep)}`"
            " once that folder exists"
        )
    return text


def paths_markdown() -> str:
    """The table of every installable client's file on each OS, from ``CLIENTS``."""
    lines = [
        "| client | " + " | ".join(label for _, label in SYSTEMS) + " |",
        "|---|" + "---|" * len(SYSTEMS),
    ]
    for spec in CLIENTS.values():
        if spec.installable:
            # A client without a place of its own on an OS is read where Linux has it
            # there (as ``client_config_path`` does).
            cells = [
                shown_place(spec.places.get(system) or spec.places["linux"], system)
                for system, _ in SYSTEMS
            ]
            lines.append(f"| {spec.label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def page_table(text: str) -> str:
    """What a page holds between the client-paths markers."""
    start = text.index(PATHS_BEGIN) + len(PATHS_BEGIN)
    return text[start : text.index(PATHS_END, start)].strip("\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Print the table; ``--write FILE`` puts it between FILE's markers; ``--check FILE``
    exits 1 when FILE's table is not what the registry renders."""
    parser = argparse.ArgumentParser(
        prog="python -m core.cli.integrations", description=(main.__doc__ or "").split(";")[0]
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", metavar="FILE", type=Path, help="put the table into FILE")
    mode.add_argument("--check", metavar="FILE", type=Path, help="exit 1 if FILE's table differs")
    args = parser.parse_args(argv)
    table = paths_markdown()
    page: Path | None = args.write or args.check
    if page is None:
        print(table)
        return 0
    text = page.read_text(encoding="utf-8")
    if PATHS_BEGIN not in text or PATHS_END not in text:
        print(
            f"{page}: no {PATHS_BEGIN!r} ... {PATHS_END!r} markers to put the table between; "
            "add the two lines where the table belongs",
            file=sys.stderr,
        )
        return 2
    if args.check:
        same = page_table(text) == table
        print(f"{page}: the table is {'what the registry renders' if same else 'stale'}")
        return 0 if same else 1
    start = text.index(PATHS_BEGIN) + len(PATHS_BEGIN)
    end = text.index(PATHS_END, start)
    page.write_bytes(f"{text[:start]}\n{table}\n{text[end:]}".encode())
    print(f"wrote the clients' files into {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
