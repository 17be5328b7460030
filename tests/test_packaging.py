"""Packaging and first run: the wheel, the license metadata, the Makefile's installs, the demo state.

Strategy: copy the files a build reads (pyproject.toml, README.md, core/,
app/, resources/, packaging/) to a temporary folder and call setuptools'
build hooks there, in a subprocess, the way pip calls them (``build_wheel``
for ``pip install .``/pipx/``uv tool install .``, ``build_editable`` for
``make run``): the checkout gets no build/ or egg-info, and the hooks' whole
output is there to search for warnings. The backend is the one installed with
the dev extras, so the build needs no network; once per session. The
Makefile's stamps are checked with ``make -n`` against a temporary venv
folder. The demo notes server runs for real, over stdio.
"""

import configparser
import email
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import TextContent
from packaging.requirements import Requirement

from core.cli.launcher import GUI_SCRIPT
from core.settings.config import load_config
from core.settings.paths import default_paths
from tests.support import paths

ROOT = paths.REPO
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
DEMO = ROOT / "resources" / "demo"
NOTES_SERVER = DEMO / "notes_server.py"
#: The wheel's data package: the project's root, holding only what running needs.
DATA = "mcp_tray_data"
#: What a build reads: the wheel's packages and data, and the project's metadata.
BUILD_INPUTS = ("core", "app", "resources", "packaging")

#: setuptools' build hooks, as pip calls them; prints the wheel's file name.
BUILD = """
import sys
import setuptools.build_meta as backend

hook = {"wheel": backend.build_wheel, "editable": backend.build_editable}[sys.argv[1]]
print("built", hook(sys.argv[2]))
"""
DEFAULT_LICENSE_FILES = ("LICEN[CS]E*", "COPYING*", "NOTICE*", "AUTHORS*")
#: A warning from the build backend (the license one was printed three times per install).
BACKEND_WARNING = re.compile(
    r"(?i)deprecat|SetuptoolsWarning|BuildBackendWarning|absent from the .packages. configuration"
)


def _backend_problem() -> str | None:
    """Why the installed build backend cannot build this pyproject offline, if it cannot."""
    for text in PYPROJECT["build-system"]["requires"]:
        requirement = Requirement(text)
        try:
            version = importlib.metadata.version(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            return f"{requirement.name} is not installed"
        if not requirement.specifier.contains(version, prereleases=True):
            return f"{requirement.name} {version} is installed, the build needs {text}"
    return None


@dataclass(frozen=True)
class Build:
    source: Path
    wheel: Path
    #: Everything the hook printed, stdout and stderr.
    output: str

    def names(self) -> set[str]:
        with zipfile.ZipFile(self.wheel) as archive:
            return set(archive.namelist())

    def read(self, name: str) -> bytes:
        with zipfile.ZipFile(self.wheel) as archive:
            return archive.read(name)


def _source_copy(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for path in ROOT.iterdir():
        if path.is_file():
            shutil.copy2(path, folder / path.name)
    for name in BUILD_INPUTS:
        shutil.copytree(
            ROOT / name, folder / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )
    return folder


def _build(kind: str, source: Path, out: Path) -> Build:
    problem = _backend_problem()
    if problem is not None:
        pytest.skip(
            f"cannot build offline: {problem} (`make test` installs it with the dev extras)"
        )
    out.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-c", BUILD, kind, str(out)],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"the {kind} build failed:\n{output}"
    name = done.stdout.strip().splitlines()[-1].removeprefix("built ")
    return Build(source, out / name, output)


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Build:
    source = _source_copy(tmp_path_factory.mktemp("source"))
    return _build("wheel", source, tmp_path_factory.mktemp("wheel"))


def _tree_files(root: Path, folder: str, pattern: str) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in (root / folder).glob(pattern))


# ------------------------------------------------------------------ license


def test_the_license_is_an_spdx_expression() -> None:
    license = PYPROJECT["project"]["license"]
    # PEP 639: a string; the table form ({text = ...}) is deprecated.
    assert isinstance(license, str), f"project.license must be an SPDX string, got {license!r}"
    assert re.fullmatch(r"[A-Za-z0-9.+-]+( (AND|OR|WITH) [A-Za-z0-9.+-]+)*", license), license
    # Each license-files pattern must match a file: setuptools warns on one that does not.
    for pattern in PYPROJECT["project"].get("license-files", []):
        assert list(ROOT.glob(pattern)), f"license-files pattern {pattern!r} matches no file"


def test_the_build_backend_is_recent_enough_for_an_spdx_license() -> None:
    (requirement,) = (
        Requirement(r) for r in PYPROJECT["build-system"]["requires"] if r.startswith("setuptools")
    )
    # setuptools 77 is the first to read `license = "MIT"` and license-files (PEP 639).
    assert not requirement.specifier.contains("76.1.0"), requirement
    assert requirement.specifier.contains("77.0.3"), requirement


@pytest.mark.slow
def test_the_wheel_build_prints_no_backend_warning(wheel: Build) -> None:
    warnings = [line for line in wheel.output.splitlines() if BACKEND_WARNING.search(line)]
    assert not warnings, "the build printed:\n" + "\n".join(warnings)


@pytest.mark.slow
def test_the_editable_install_prints_no_backend_warning(tmp_path: Path) -> None:
    """What `make run` and `make test` install: no license warning, and the data package mapped."""
    source = _source_copy(tmp_path / "source")
    editable = _build("editable", source, tmp_path / "wheel")
    warnings = [line for line in editable.output.splitlines() if BACKEND_WARNING.search(line)]
    assert not warnings, "the editable build printed:\n" + "\n".join(warnings)
    finder = next(n for n in editable.names() if n.endswith("_finder.py"))
    mapping = editable.read(finder).decode()
    assert f"{DATA!r}: {str(source)!r}" in mapping, mapping


@pytest.mark.slow
def test_the_wheel_metadata_says_mit(wheel: Build) -> None:
    metadata_name = next(n for n in wheel.names() if n.endswith(".dist-info/METADATA"))
    metadata = email.message_from_bytes(wheel.read(metadata_name))
    assert metadata["License-Expression"] == PYPROJECT["project"]["license"]
    assert metadata["License"] is None  # the deprecated free-text field
    licenses = [n for n in wheel.names() if ".dist-info/licenses/" in n]
    # setuptools' default license-files patterns (PEP 639), while pyproject names none.
    patterns = PYPROJECT["project"].get("license-files", DEFAULT_LICENSE_FILES)
    expected = sorted({p.name for pattern in patterns for p in ROOT.glob(pattern)})
    assert sorted(Path(n).name for n in licenses) == expected


# ------------------------------------------------------------------ the wheel's files


def test_the_wheel_has_the_console_script_and_its_windowed_twin(wheel: Build) -> None:
    """pip makes a console launcher for console_scripts and a windowed one (no
    console window on Windows) for gui_scripts; the Windows desktop entries
    start the windowed one (core.cli.launcher.GUI_SCRIPT)."""
    name = next(n for n in wheel.names() if n.endswith(".dist-info/entry_points.txt"))
    entry_points = configparser.ConfigParser()
    entry_points.read_string(wheel.read(name).decode())
    assert dict(entry_points["console_scripts"]) == {"mcp-tray": "app.entry:main"}
    assert dict(entry_points["gui_scripts"]) == {GUI_SCRIPT: "app.entry:main"}


@pytest.mark.slow
def test_the_wheel_holds_the_icons_the_demo_and_the_desktop_template(wheel: Build) -> None:
    wanted = [
        *_tree_files(wheel.source, "resources/icons", "*.svg"),
        *_tree_files(wheel.source, "resources/demo", "*.py"),
        "resources/demo/config.json",
        "packaging/mcp-tray.desktop.in",
    ]
    assert "resources/icons/mcp-tray.svg" in wanted
    assert "resources/icons/tray-green.svg" in wanted
    assert "resources/demo/notes_server.py" in wanted
    names = wheel.names()
    missing = [f"{DATA}/{name}" for name in wanted if f"{DATA}/{name}" not in names]
    assert not missing, f"not in the wheel: {missing}"
    for name in wanted:
        assert wheel.read(f"{DATA}/{name}") == (wheel.source / name).read_bytes(), name
    # Only those: no screenshot, no PyInstaller spec or launcher, no tests, no root file.
    extra = sorted(
        n for n in names if n.startswith(f"{DATA}/") and n[len(DATA) + 1 :] not in wanted
    )
    assert not extra, f"the data package carries more than running needs: {extra}"


@pytest.mark.slow
def test_the_wheel_holds_every_module_of_core_and_app(wheel: Build) -> None:
    names = wheel.names()
    modules = [*_tree_files(wheel.source, "core", "**/*.py")]
    modules += _tree_files(wheel.source, "app", "**/*.py")
    missing = [m for m in modules if m not in names]
    assert not missing, (
        f"not in the wheel: {missing}; add their packages to [tool.setuptools] packages"
    )
    top_level = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert top_level == {"core", "app", DATA}


@pytest.mark.slow
@pytest.mark.xfail(
    not (ROOT / "core" / "base" / "resources.py").exists(),
    strict=True,
    raises=AssertionError,
    reason="the resource lookup still assumes a checkout (core/base/resources.py not added yet)",
)
def test_an_installed_wheel_finds_its_template_and_icon(wheel: Build, tmp_path: Path) -> None:
    """install-desktop from a wheel installed outside the checkout (the lookup is stdlib only)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet"]
    install = [*pip, "--no-deps", "--no-index", str(wheel.wheel)]
    subprocess.run(install, check=True, capture_output=True, timeout=120)
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    script = (
        "import json; from core.cli import desktop_entry, desktop_linux as d; "
        "desktop_entry.install(system='linux'); print(json.dumps([str(d.TEMPLATE), str(d.ICON)]))"
    )
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(tmp_path / "home"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    done = subprocess.run(
        [python, "-I", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    template, icon = json.loads(done.stdout)
    assert Path(template).is_relative_to(purelib) and Path(icon).is_relative_to(purelib)
    written = tmp_path / "data" / "icons" / "hicolor" / "scalable" / "apps" / "mcp-tray.svg"
    assert written.read_bytes() == (ROOT / "resources" / "icons" / "mcp-tray.svg").read_bytes()
    entry = (tmp_path / "data" / "applications" / "mcp-tray.desktop").read_text()
    assert f"Exec={venv / 'bin' / 'mcp-tray'}" in entry


# ------------------------------------------------------------------ make run / make test


def _make_dry_run(target: str, venv: Path) -> str:
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", "-C", str(ROOT), target, f"VENV={venv}"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _stamp(venv: Path, name: str, *, fresh: bool) -> None:
    path = venv / name
    path.touch()
    offset = 60 if fresh else -60
    mtime = (ROOT / "pyproject.toml").stat().st_mtime + offset
    os.utime(path, (mtime, mtime))


RUN_INSTALL = "pip install --quiet -e .\n"
DEV_INSTALL = "pip install --quiet -e '.[dev]'"


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_run_installs_the_runtime_only_and_make_test_adds_the_dev_extras(
    tmp_path: Path,
) -> None:
    venv = tmp_path / "venv"
    venv.mkdir()
    # A new checkout: run installs mcp-tray without the dev extras; test with them.
    run = _make_dry_run("run", venv)
    assert RUN_INSTALL in run and "[dev]" not in run
    assert DEV_INSTALL in _make_dry_run("lint", venv)
    # After `make run`: run installs nothing; test adds the dev extras.
    _stamp(venv, ".stamp-run", fresh=True)
    assert "pip install" not in _make_dry_run("run", venv)
    assert DEV_INSTALL in _make_dry_run("lint", venv)
    # After `make test` (it renews both stamps): neither installs.
    _stamp(venv, ".stamp-dev", fresh=True)
    assert "pip install" not in _make_dry_run("run", venv)
    assert "pip install" not in _make_dry_run("lint", venv)
    # pyproject.toml changed since: each reinstalls what it needs.
    _stamp(venv, ".stamp-run", fresh=False)
    _stamp(venv, ".stamp-dev", fresh=False)
    run = _make_dry_run("run", venv)
    assert RUN_INSTALL in run and "[dev]" not in run
    assert DEV_INSTALL in _make_dry_run("lint", venv)


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize("display", ["", ":0"])
def test_make_run_leaves_whether_to_open_the_window_to_mcp_tray(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, display: str
) -> None:
    """macOS and Windows have no DISPLAY: a shell check there would always go headless."""
    monkeypatch.setenv("DISPLAY", display)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    venv = tmp_path / "venv"
    venv.mkdir()
    _stamp(venv, ".stamp-run", fresh=True)
    [command] = _make_dry_run("run", venv).splitlines()
    assert command == f"{venv}/bin/mcp-tray run --config resources/demo/config.json"


# ------------------------------------------------------------------ the demo


def test_the_demo_config_loads_and_its_servers_exist() -> None:
    config = load_config(DEMO / "config.json")
    assert set(config.servers) == {"demo-notes", "demo-fragile", "demo-clock"}
    for server in config.servers.values():
        assert server.command == sys.executable
        assert Path(server.args[0]).is_file(), server.args


def test_the_demo_keeps_nothing_in_tmp() -> None:
    for path in (DEMO / "config.json", NOTES_SERVER):
        assert "/tmp" not in path.read_text(encoding="utf-8"), path


async def _add_and_list_notes(args: list[str], env: dict[str, str]) -> list[str]:
    params = StdioServerParameters(command=sys.executable, args=[str(NOTES_SERVER), *args], env=env)
    async with stdio_client(params, errlog=sys.stderr) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            added = await session.call_tool("add_note", {"text": "buy\nmilk"})
            assert not added.is_error, added
            listed = await session.call_tool("list_notes", {})
            assert not listed.is_error, listed
            return [c.text for c in listed.content if isinstance(c, TextContent)]


def _isolated_env(tmp_path: Path) -> dict[str, str]:
    """HOME, XDG_STATE_HOME and TMPDIR of the test's own, each empty."""
    env = {
        "HOME": str(tmp_path / "home"),
        "XDG_STATE_HOME": str(tmp_path / "xdg-state"),
        "TMPDIR": str(tmp_path / "tmp"),
    }
    for folder in env.values():
        Path(folder).mkdir()
    return env


def _files_under(folder: str) -> list[Path]:
    return sorted(p for p in Path(folder).rglob("*") if p.is_file())


#: Where the notes server wrote before it moved under the state folder.
OLD_SHARED_NOTES = Path("/tmp/mcp-tray-demo-notes.txt")


def _old_notes_stat() -> tuple[int, int] | None:
    try:
        stat = OLD_SHARED_NOTES.stat()
    except FileNotFoundError:
        return None
    return (stat.st_size, stat.st_mtime_ns)


async def test_the_demo_notes_server_writes_under_the_state_folder_it_is_given(
    tmp_path: Path,
) -> None:
    env = _isolated_env(tmp_path)
    state = tmp_path / "state"
    before = _old_notes_stat()
    notes = await _add_and_list_notes(["--state-dir", str(state)], env)
    assert notes and "buy milk" in notes[0]
    assert (state / "demo" / "notes.txt").read_text() == "buy milk\n"
    assert _files_under(str(state)) == [state / "demo" / "notes.txt"]
    for folder in env.values():
        assert _files_under(folder) == [], folder
    assert _old_notes_stat() == before, f"the server touched {OLD_SHARED_NOTES}"


async def test_the_demo_notes_server_defaults_to_mcp_trays_own_state_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --state-dir: the per-user state folder mcp-tray itself uses without MCP_TRAY_HOME."""
    env = _isolated_env(tmp_path)
    before = _old_notes_stat()
    await _add_and_list_notes([], env)
    monkeypatch.delenv("MCP_TRAY_HOME", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", env["XDG_STATE_HOME"])
    monkeypatch.setenv("HOME", env["HOME"])
    tray_state = default_paths().state_dir
    assert _files_under(env["XDG_STATE_HOME"]) == [tray_state / "demo" / "notes.txt"]
    assert _files_under(env["TMPDIR"]) == [] and _files_under(env["HOME"]) == []
    assert _old_notes_stat() == before, f"the server touched {OLD_SHARED_NOTES}"


# ------------------------------------------------ the bundle on each OS (packaging/bundle.py)


class Declared:
    """A stand-in for one of PyInstaller's classes: records how it was called."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args, self.kwargs = args, kwargs
        self.pure, self.scripts, self.binaries, self.datas = "pure", "scripts", "bins", "datas"


def declare(system: str) -> tuple[Any, dict[str, list[Declared]]]:
    sys.path.insert(0, str(ROOT / "packaging"))
    try:
        import bundle
    finally:
        sys.path.remove(str(ROOT / "packaging"))
    made: dict[str, list[Declared]] = {}

    def kind(name: str) -> type[Declared]:
        def record(*args: Any, **kwargs: Any) -> Declared:
            item = Declared(*args, **kwargs)
            made.setdefault(name, []).append(item)
            return item

        return record  # type: ignore[return-value]

    classes = {n: kind(n) for n in ("Analysis", "PYZ", "EXE", "COLLECT", "BUNDLE")}
    last = bundle.build(system, ROOT, {**classes, "hiddenimports": []}, "9.9.9")
    return last, made


def test_the_macos_bundle_is_a_menu_bar_app_with_the_icns_icon() -> None:
    last, made = declare("darwin")
    [app] = made["BUNDLE"]
    assert last is app
    assert app.kwargs["name"] == "mcp-tray.app"
    assert app.kwargs["icon"].endswith("mcp-tray.icns")
    assert app.kwargs["info_plist"]["LSUIElement"] is True
    assert app.kwargs["info_plist"]["CFBundleShortVersionString"] == "9.9.9"
    [exe] = made["EXE"]
    assert exe.kwargs["console"] is True  # also the CLI and the bridge


def test_the_macos_bundle_may_open_windows_although_its_executable_is_a_console_one() -> None:
    """PyInstaller's BUNDLE sets LSBackgroundOnly for a console EXE, then merges
    info_plist over its defaults: the plist PyInstaller would write is rebuilt
    here by that same rule."""
    _, made = declare("darwin")
    [exe], [app] = made["EXE"], made["BUNDLE"]
    written = {"LSBackgroundOnly": True} if exe.kwargs["console"] else {}
    written.update(app.kwargs["info_plist"])
    assert written["LSBackgroundOnly"] is False and written["LSUIElement"] is True


def test_the_windows_bundle_is_a_windowed_exe_with_a_console_twin_and_the_ico_icon() -> None:
    last, made = declare("win32")
    assert "BUNDLE" not in made
    windowed, twin = made["EXE"]
    assert (windowed.kwargs["name"], windowed.kwargs["console"]) == ("mcp-tray", False)
    assert (twin.kwargs["name"], twin.kwargs["console"]) == ("mcp-tray-cli", True)
    assert windowed.kwargs["icon"].endswith("mcp-tray.ico")
    [folder] = made["COLLECT"]
    assert last is folder and folder.kwargs["name"] == "mcp-tray"
    assert folder.args[:2] == (windowed, twin)


def test_the_linux_bundle_is_one_folder_with_a_console_launcher() -> None:
    last, made = declare("linux")
    [exe] = made["EXE"]
    assert exe.kwargs["console"] is True and exe.kwargs["icon"] is None
    assert "BUNDLE" not in made and last is made["COLLECT"][0]


@pytest.mark.parametrize("icon", ["mcp-tray.ico", "mcp-tray.icns"])
def test_the_bundle_icons_hold_pngs_at_every_size(icon: str) -> None:
    data = (ROOT / "resources" / "icons" / icon).read_bytes()
    png = b"\x89PNG\r\n\x1a\n"
    if icon.endswith(".ico"):
        assert data[:4] == b"\x00\x00\x01\x00"
        assert int.from_bytes(data[4:6], "little") == 7  # 16 to 256 px
    else:
        assert data[:4] == b"icns" and int.from_bytes(data[4:8], "big") == len(data)
    assert data.count(png) >= 7
