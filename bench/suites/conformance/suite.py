"""The conformance suite itself: installed into .conformance/ on first use, with a
Node of its own when the machine's is too old.
"""

import sys

# Type-checked under every OS by `make lint`; it only runs where it measures,
# and what follows is skipped by mypy where it does not.
assert sys.platform != "win32", "bench/ measures POSIX machines (signals, process groups)"

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bench.harness.errors import BenchError
from bench.harness.npm import npm_env, private_package
from bench.suites.conformance.constants import CACHE, INSTALL_SECONDS, NODE_PACKAGE, PACKAGE
from bench.suites.conformance.processes import Processes, log_tail


@dataclass(frozen=True)
class Suite:
    version: str
    node: Path
    cli: Path

    def command(self, *args: str) -> list[str]:
        return [str(self.node), str(self.cli), *args]


def ensure_suite(version: str, processes: Processes, tmp: Path) -> Suite:
    """The suite at ``version`` and a Node 22, installed into .conformance/ once."""
    folder = CACHE / f"suite-{version}"
    suite = Suite(
        version,
        folder / "node_modules" / "node" / "bin" / "node",
        folder / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js",
    )
    stamp = folder / ".installed"
    if not (stamp.exists() and suite.node.exists() and suite.cli.exists()):
        npm = shutil.which("npm")
        if npm is None:
            raise BenchError("npm is not on PATH: install Node.js (any version) and npm first")
        private_package(
            folder,
            "mcp-tray-conformance-cache",
            "The MCP conformance suite for bench/conformance.py",
        )
        print(f"conformance: installing {PACKAGE}@{version} and {NODE_PACKAGE} into {folder}")
        log = tmp / f"npm-install-{version}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [npm, "install", "--save-exact", f"{PACKAGE}@{version}", NODE_PACKAGE],
                cwd=folder,
                env=npm_env(folder, CACHE / "npm-cache"),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            processes.track(process.pid, "npm install", process)
            try:
                code = process.wait(INSTALL_SECONDS)
            except subprocess.TimeoutExpired:
                code = None
            finally:
                processes.stop(process.pid)
        if code != 0 or not suite.node.exists() or not suite.cli.exists():
            raise BenchError(
                f"npm install of {PACKAGE}@{version} failed (exit {code}):\n{log_tail(log)}"
            )
        stamp.write_text(f"{PACKAGE}@{version} {NODE_PACKAGE}\n")
    probe = subprocess.run(
        [str(suite.node), "--version"], capture_output=True, text=True, timeout=30, check=False
    )
    major = probe.stdout.strip().lstrip("v").split(".")[0]
    if probe.returncode != 0 or not major.isdigit() or int(major) < 22:
        raise BenchError(f"{suite.node} is not Node >= 22: {probe.stdout or probe.stderr}")
    return suite
