"""What the PyInstaller spec builds on each OS (the spec hands it PyInstaller's classes).

- Linux: the one-folder bundle ``dist/mcp-tray/`` with a console launcher
  ``mcp-tray`` (the tray, the CLI and the bridge all start from it).
- macOS: ``dist/mcp-tray.app``, a menu-bar app: ``LSUIElement`` keeps it out
  of the Dock and the app switcher (its window opens from the menu-bar
  icon), with the .icns icon; its executable,
  ``mcp-tray.app/Contents/MacOS/mcp-tray``, is also the CLI and the bridge,
  so it stays a console program. PyInstaller's BUNDLE writes
  ``LSBackgroundOnly=True`` for a console executable (building/osx.py,
  6.x), which Apple documents as a faceless app; ``info_plist`` is merged
  over PyInstaller's defaults, so it sets the key False outright.
- Windows: the one-folder ``dist/mcp-tray/`` with a windowed
  ``mcp-tray.exe`` (no console window behind the tray; the .ico icon) and
  its console twin ``mcp-tray-cli.exe`` from the same analysis, which the
  command line and the stdio bridge need (a windowed program has no
  console to print to, and clients talk to the bridge over its stdio).

Kept out of the spec so a test can run it with stand-ins for PyInstaller's
classes and each OS injected (tests/test_packaging.py).
"""

from pathlib import Path
from typing import Any

BUNDLE_ID = "io.github.mcp-tray"
#: The Windows console twin of the windowed launcher (core.cli.desktop_entry knows it too).
CLI_TWIN = "mcp-tray-cli"


def build(system: str, root: Path, pyinstaller: dict[str, Any], version: str) -> Any:
    """Declare the bundle for ``system``; returns the last target (COLLECT or BUNDLE)."""
    analysis_class = pyinstaller["Analysis"]
    pyz_class = pyinstaller["PYZ"]
    exe_class = pyinstaller["EXE"]
    collect_class = pyinstaller["COLLECT"]
    icons = root / "resources" / "icons"
    a = analysis_class(
        [str(root / "packaging" / "entry.py")],
        pathex=[str(root)],
        datas=[
            (str(icons), "resources/icons"),
            (str(root / "resources" / "demo"), "resources/demo"),
            (str(root / "packaging" / "mcp-tray.desktop.in"), "packaging"),
        ],
        hiddenimports=pyinstaller["hiddenimports"],
        excludes=["tkinter", "pytest", "hypothesis", "mypy", "ruff", "IPython"],
        noarchive=False,
    )
    pyz = pyz_class(a.pure)
    common = {"exclude_binaries": True, "strip": False, "upx": False}
    icon = {"win32": icons / "mcp-tray.ico", "darwin": icons / "mcp-tray.icns"}.get(system)
    main = exe_class(
        pyz,
        a.scripts,
        [],
        name="mcp-tray",
        # Windowed on Windows; elsewhere the launcher is a console program.
        console=system != "win32",
        icon=str(icon) if icon else None,
        **common,
    )
    executables = [main]
    if system == "win32":
        executables.append(
            exe_class(pyz, a.scripts, [], name=CLI_TWIN, console=True, icon=str(icon), **common)
        )
    coll = collect_class(*executables, a.binaries, a.datas, strip=False, upx=False, name="mcp-tray")
    if system != "darwin":
        return coll
    return pyinstaller["BUNDLE"](
        coll,
        name="mcp-tray.app",
        icon=str(icon),
        bundle_identifier=BUNDLE_ID,
        info_plist={
            "CFBundleName": "mcp-tray",
            "CFBundleDisplayName": "mcp-tray",
            "CFBundleShortVersionString": version,
            # A menu-bar app: no Dock icon, no app-switcher entry.
            "LSUIElement": True,
            # An agent app may open windows; a background-only one may not.
            "LSBackgroundOnly": False,
            "NSHighResolutionCapable": True,
        },
    )
