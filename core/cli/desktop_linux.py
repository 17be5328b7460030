"""Linux (freedesktop): the menu entry, its icon, and the login autostart entry.

Writes three per-user files, never anything system-wide:

- ``<data>/applications/mcp-tray.desktop``: the menu entry,
- ``<data>/icons/hicolor/scalable/apps/mcp-tray.svg``: its icon,
- ``<config>/autostart/mcp-tray.desktop``: only with ``--autostart``,

where ``<data>`` is ``$XDG_DATA_HOME`` (else ``~/.local/share``) and
``<config>`` is ``$XDG_CONFIG_HOME`` (else ``~/.config``); relative values are
ignored, as the XDG Base Directory spec says. Both entries come from the one
template ``packaging/mcp-tray.desktop.in``; the autostart one only adds
``X-GNOME-Autostart-enabled=true``.

``Exec`` is the launcher with no arguments (that starts the tray and opens
its window), quoted per the Desktop Entry spec when it needs it; the
autostart entry's adds ``run --minimized``. With ``MCP_TRAY_HOME`` set:
``Exec=/usr/bin/env MCP_TRAY_HOME=/abs/dir /…/mcp-tray``.
"""

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from core.base.envvars import HOME_ENV
from core.base.errors import DesktopEntryError
from core.base.resources import desktop_template, icons_dir
from core.cli.launcher import (
    APP_ID,
    AUTOSTART_ARGS,
    DesktopResult,
    home_override,
    launcher_argv,
)
from core.platform.files import private_dirs, set_mode

EXEC_PLACEHOLDER: Final = "@EXEC@"
AUTOSTART_LINE: Final = "X-GNOME-Autostart-enabled=true"

TEMPLATE: Final = desktop_template()
ICON: Final = icons_dir() / f"{APP_ID}.svg"

#: Characters that force an Exec argument into double quotes (Desktop Entry spec, "The Exec key").
_RESERVED: Final = frozenset(" \t\n\"'\\><~|&;$*?#()`")
#: Characters that must be backslash-escaped inside a quoted Exec argument.
_ESCAPED_IN_QUOTES: Final = frozenset('"`$\\')


@dataclass(frozen=True)
class DesktopFiles:
    """Where the entry, the icon and the autostart entry go."""

    entry: Path
    icon: Path
    autostart: Path

    @property
    def all(self) -> tuple[Path, Path, Path]:
        return (self.entry, self.icon, self.autostart)


def _xdg_dir(env: Mapping[str, str], name: str, fallback: str) -> Path:
    value = env.get(name, "")
    if value and Path(value).is_absolute():
        return Path(value)
    return Path.home() / fallback


def desktop_files(environ: Mapping[str, str] | None = None) -> DesktopFiles:
    env = os.environ if environ is None else environ
    data = _xdg_dir(env, "XDG_DATA_HOME", ".local/share")
    config = _xdg_dir(env, "XDG_CONFIG_HOME", ".config")
    return DesktopFiles(
        entry=data / "applications" / f"{APP_ID}.desktop",
        icon=data / "icons" / "hicolor" / "scalable" / "apps" / f"{APP_ID}.svg",
        autostart=config / "autostart" / f"{APP_ID}.desktop",
    )


def entry_argv(environ: Mapping[str, str] | None = None) -> list[str]:
    """The desktop entry's command: the launcher, behind ``env MCP_TRAY_HOME=…`` if set."""
    home = home_override(environ)
    if home is None:
        return launcher_argv()
    # Exec has no way to set a variable of its own; env(1) is the portable one.
    env_program = shutil.which("env") or "/usr/bin/env"
    return [os.path.abspath(env_program), f"{HOME_ENV}={home}", *launcher_argv()]


def quote_exec_arg(arg: str) -> str:
    """One Exec argument, quoted and escaped per the Desktop Entry spec.

    Returns the text as it appears in the file: the Exec quoting rules first,
    then ``%`` doubled (field codes), then the string-value escape of ``\\``.
    """
    if arg and not (_RESERVED & set(arg)):
        quoted = arg
    else:
        inner = "".join(f"\\{c}" if c in _ESCAPED_IN_QUOTES else c for c in arg)
        quoted = f'"{inner}"'
    return quoted.replace("%", "%%").replace("\\", "\\\\")


def exec_value(argv: Sequence[str]) -> str:
    return " ".join(quote_exec_arg(arg) for arg in argv)


def render_entry(exec_line: str, *, autostart: bool, template: str | None = None) -> str:
    """The desktop entry text: the template with Exec filled in (and the autostart key)."""
    text = _read_template() if template is None else template
    if text.count(EXEC_PLACEHOLDER) != 1:
        raise DesktopEntryError(
            f"the desktop entry template must hold {EXEC_PLACEHOLDER} exactly once"
        )
    text = text.replace(EXEC_PLACEHOLDER, exec_line)
    if autostart:
        text = text.rstrip("\n") + f"\n{AUTOSTART_LINE}\n"
    return text


def _read_template() -> str:
    try:
        return TEMPLATE.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DesktopEntryError(
            f"the desktop entry template is missing ({TEMPLATE}); reinstall mcp-tray"
        ) from None


def _write(path: Path, data: bytes) -> None:
    private_dirs(path.parent)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_bytes(data)
    set_mode(temporary, 0o644)
    temporary.replace(path)


def install(*, autostart: bool = False, environ: Mapping[str, str] | None = None) -> DesktopResult:
    """Write the menu entry and icon (and the autostart entry); returns what was written.

    Without ``autostart`` an autostart entry written earlier is left alone;
    ``uninstall`` removes it.
    """
    files = desktop_files(environ)
    exec_line = exec_value(entry_argv(environ))
    entry = render_entry(exec_line, autostart=False)
    try:
        icon = ICON.read_bytes()
    except FileNotFoundError:
        raise DesktopEntryError(f"the icon is missing ({ICON}); reinstall mcp-tray") from None
    result = DesktopResult()
    _write(files.entry, entry.encode("utf-8"))
    result.written.append(files.entry)
    _write(files.icon, icon)
    result.written.append(files.icon)
    if autostart:
        login_exec = exec_value([*entry_argv(environ), *AUTOSTART_ARGS])
        _write(files.autostart, render_entry(login_exec, autostart=True).encode("utf-8"))
        result.written.append(files.autostart)
    return result


def uninstall(environ: Mapping[str, str] | None = None) -> DesktopResult:
    """Remove the three files; missing ones are fine. Returns what was removed."""
    result = DesktopResult()
    for path in desktop_files(environ).all:
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        result.removed.append(path)
    return result
