"""The nine real servers of the zoo, as config entries (bench/on_demand.py ``--zoo``).

Installed once into a folder of the bench's choosing, never by the project:
``DIR/npm`` holds the npm ones (``npm install`` of the packages in ``NPM``),
``DIR/py`` a virtualenv with the PyPI ones and ``fastmcp`` (``pip install``
of ``PYPI``). ``install_hint`` says the two commands.
"""

from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parents[2]
#: name -> (npm package, its binary, its arguments; ``{dir}`` is a scratch folder).
NPM: Final = {
    "everything": ("@modelcontextprotocol/server-everything", "mcp-server-everything", ["stdio"]),
    "memory": ("@modelcontextprotocol/server-memory", "mcp-server-memory", []),
    "filesystem": ("@modelcontextprotocol/server-filesystem", "mcp-server-filesystem", ["{dir}"]),
    "sequential-thinking": (
        "@modelcontextprotocol/server-sequential-thinking",
        "mcp-server-sequential-thinking",
        [],
    ),
    "playwright": ("@playwright/mcp", "playwright-mcp", ["--headless"]),
}
#: name -> (the virtualenv's binary, its arguments).
PYPI: Final = {
    "time": ("mcp-server-time", []),
    "fetch": ("mcp-server-fetch", []),
    "git": ("mcp-server-git", ["--repository", str(ROOT)]),
}
PIP_PACKAGES: Final = ("mcp-server-time", "mcp-server-fetch", "mcp-server-git", "fastmcp")
FASTMCP_SCRIPT: Final = ROOT / "bench" / "zoo_fastmcp.py"


def install_hint(folder: Path) -> str:
    packages = " ".join(package for package, _, _ in NPM.values())
    return (
        f"mkdir -p {folder}/npm && npm install --prefix {folder}/npm {packages}; "
        f"python3 -m venv {folder}/py && {folder}/py/bin/pip install {' '.join(PIP_PACKAGES)}"
    )


def zoo_entries(folder: Path, scratch: Path) -> dict[str, dict[str, Any]]:
    """The nine servers' entries, from what ``folder`` holds (``SystemExit`` naming the install
    when a part is missing)."""
    npm_bin = folder / "npm" / "node_modules" / ".bin"
    py_bin = folder / "py" / "bin"
    entries: dict[str, dict[str, Any]] = {}
    for name, (_, binary, args) in NPM.items():
        entries[name] = {
            "command": str(npm_bin / binary),
            "args": [a.replace("{dir}", str(scratch)) for a in args],
        }
    for name, (binary, args) in PYPI.items():
        entries[name] = {"command": str(py_bin / binary), "args": list(args)}
    entries["fastmcp"] = {"command": str(py_bin / "python"), "args": [str(FASTMCP_SCRIPT)]}
    missing = [e["command"] for e in entries.values() if not Path(e["command"]).exists()]
    if missing:
        raise SystemExit(
            f"the zoo is not installed in {folder} ({missing[0]}): {install_hint(folder)}"
        )
    return entries
