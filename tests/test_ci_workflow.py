"""What the CI workflow needs of the repository to be green on Windows, checked here.

Strategy: Git itself says which line endings each tracked file gets at
checkout (``git check-attr``; skipped outside a Git work tree), and the
bundle's real smoke test (packaging/smoke_test.sh) runs against a real
headless tray as if under Git Bash: a ``uname`` on PATH that answers as the
Windows runner's does and a ``tasklist`` that answers from the real process
table. It must stop the tray with ``mcp-tray quit`` (Git Bash's ``kill
-TERM`` is TerminateProcess there) and find no server left.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import paths

ROOT = paths.REPO
BINARY_SUFFIXES = {".png", ".ico", ".icns"}


def tracked() -> list[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a Git work tree")
    listing = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    return [name for name in listing.decode().split("\0") if name]


def test_every_tracked_text_file_is_checked_out_with_lf_and_binaries_untouched() -> None:
    files = tracked()
    answer = subprocess.run(
        ["git", "check-attr", "-z", "text", "eol", "--stdin"],
        cwd=ROOT,
        input="\0".join(files).encode(),
        capture_output=True,
        check=True,
    ).stdout.decode()
    fields = answer.split("\0")
    attrs: dict[str, dict[str, str]] = {}
    for path, attr, value in zip(fields[0::3], fields[1::3], fields[2::3], strict=False):
        attrs.setdefault(path, {})[attr] = value
    for name in files:
        if Path(name).suffix in BINARY_SUFFIXES:
            assert attrs[name]["text"] == "unset", name
        else:
            assert attrs[name]["eol"] == "lf", f"{name} would be checked out CRLF on Windows"


@pytest.mark.skipif(sys.platform == "win32", reason="this plays Git Bash on a POSIX shell")
def test_the_bundle_smoke_test_stops_a_windows_tray_with_quit_and_finds_no_server_left(
    tmp_path: Path,
) -> None:
    if shutil.which("sh") is None:
        pytest.skip("no POSIX sh")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fakes = {
        "uname": "#!/bin/sh\necho MINGW64_NT-10.0-20348\n",
        # tasklist //NH //FI "PID eq N": a row naming N while it runs.
        "tasklist": (
            "#!/bin/sh\n"
            "pid=$(echo \"$*\" | sed -n 's/.*PID eq \\([0-9]*\\).*/\\1/p')\n"
            'if kill -0 "$pid" 2>/dev/null; then echo "python.exe $pid Console 1 9 K"; '
            'else echo "INFO: No tasks are running which match the specified criteria."; fi\n'
        ),
        "mcp-tray": f'#!/bin/sh\nexec "{sys.executable}" -m core.cli.main "$@"\n',
    }
    for name, text in fakes.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    env["PYTHONPATH"] = str(ROOT)
    env.pop("MCP_TRAY_HOME", None)
    result = subprocess.run(
        ["sh", str(ROOT / "packaging" / "smoke_test.sh"), str(bin_dir / "mcp-tray")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "== mcp-tray quit" in result.stdout and "== SIGTERM" not in result.stdout
    assert "stopped with exit 0, no server process left" in result.stdout
