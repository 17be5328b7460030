"""Only core/platform/ makes OS-specific calls: a static check over core/ and app/.

Strategy: parse every module of core/ and app/ outside core/platform/ and
look for what differs between Linux, macOS and Windows: POSIX- or
Windows-only modules, ``os`` functions that exist on one OS only, process
groups and sessions on ``Popen``, signal numbers and handlers, the event
loop's pipe and signal hooks, ``/proc`` paths, and the OS checks
themselves (``sys.platform``, ``os.name``). mypy then checks
core/platform/ under each OS (``make lint`` runs it with ``--platform
darwin`` and ``--platform win32``). The second test proves the check bites.
"""

import ast

from tests.support import paths

ROOT = paths.REPO
PLATFORM = ROOT / "core" / "platform"

#: Modules that exist, or behave, on some of the three OSes only.
BANNED_MODULES = frozenset(
    {"fcntl", "msvcrt", "resource", "winreg", "termios", "pwd", "grp", "ctypes", "_winapi"}
    | {"select", "pty", "tty", "posix", "nt", "platform"}
)
#: ``os`` names that are missing, or mean something else, on one of them.
BANNED_OS = frozenset(
    {"killpg", "getpgid", "getpgrp", "setsid", "setpgid", "getsid", "getuid", "geteuid"}
    | {"getgid", "getegid", "pidfd_open", "waitid", "waitpid", "wait", "wait3", "wait4"}
    | {"fork", "kill", "mkfifo", "chmod", "fchmod", "chown", "umask", "startfile", "name"}
    | {"O_NONBLOCK", "O_NOCTTY", "O_CLOEXEC", "O_BINARY", "O_NOINHERIT", "P_PIDFD"}
    | {"WNOHANG", "WNOWAIT", "WEXITED", "sched_getaffinity", "getloadavg"}
)
#: ``signal`` names that are OS-specific (``signal.Signals`` is not).
BANNED_SIGNAL = frozenset(
    {"signal", "pause", "set_wakeup_fd", "alarm", "setitimer", "pthread_kill", "getsignal"}
    | {"SIGKILL", "SIGTERM", "SIGINT", "SIGHUP", "SIGSTOP", "SIGCONT", "SIGCHLD"}
    | {"SIGUSR1", "SIGUSR2", "SIGBREAK", "CTRL_BREAK_EVENT", "CTRL_C_EVENT"}
)
#: Attributes of anything (a loop, a Path, a psutil.Process) that are OS-specific.
BANNED_ATTRIBUTES = frozenset(
    {"add_signal_handler", "remove_signal_handler", "connect_read_pipe", "connect_write_pipe"}
    | {"create_subprocess_exec", "create_subprocess_shell", "chmod", "lchmod", "uids", "rlimit"}
)
#: Popen keywords that mean a process group, a session or Windows flags.
BANNED_KEYWORDS = frozenset(
    {"start_new_session", "process_group", "preexec_fn", "creationflags", "startupinfo"}
)


def violations(source: str) -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        where = f"line {getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import):
            found += [f"{where}: import {a.name}" for a in node.names if _banned_module(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if _banned_module(node.module):
                found.append(f"{where}: from {node.module} import …")
            elif node.module in ("os", "signal", "sys"):
                names = {a.name for a in node.names}
                banned = {"os": BANNED_OS, "signal": BANNED_SIGNAL, "sys": {"platform"}}
                found += [
                    f"{where}: from {node.module} import {n}" for n in names & banned[node.module]
                ]
        elif isinstance(node, ast.Attribute):
            owner = node.value.id if isinstance(node.value, ast.Name) else None
            if owner == "os" and node.attr in BANNED_OS:
                found.append(f"{where}: os.{node.attr}")
            elif owner == "signal" and node.attr in BANNED_SIGNAL:
                found.append(f"{where}: signal.{node.attr}")
            elif owner == "sys" and node.attr in ("platform", "getwindowsversion"):
                found.append(f"{where}: sys.{node.attr}")
            elif node.attr in BANNED_ATTRIBUTES:
                found.append(f"{where}: .{node.attr}")
        elif isinstance(node, ast.keyword) and node.arg in BANNED_KEYWORDS:
            found.append(f"{where}: {node.arg}=")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.startswith("/proc/")
        ):
            found.append(f"{where}: {node.value!r}")
    return found


def _banned_module(name: str) -> bool:
    return name.split(".")[0] in BANNED_MODULES


def test_nothing_outside_core_platform_makes_os_specific_calls() -> None:
    checked = 0
    report: list[str] = []
    for folder in (ROOT / "core", ROOT / "app"):
        for path in sorted(folder.rglob("*.py")):
            if PLATFORM in path.parents:
                continue
            checked += 1
            report += [f"{path.relative_to(ROOT)} {v}" for v in violations(path.read_text("utf-8"))]
    assert checked > 50
    assert report == [], "OS-specific calls belong in core/platform/:\n" + "\n".join(report)


def test_the_check_finds_each_kind_of_os_specific_call() -> None:
    source = """
import fcntl
from os import killpg
import os, signal, subprocess, sys
os.getpgid(1)
signal.SIGKILL
sys.platform == "win32"
loop.add_signal_handler(signal.SIGTERM, f)
subprocess.Popen(["x"], start_new_session=True)
open("/proc/self/status")
path.chmod(0o600)
"""
    found = violations(source)
    for expected in (
        "import fcntl",
        "from os import killpg",
        "os.getpgid",
        "signal.SIGKILL",
        "sys.platform",
        ".add_signal_handler",
        "start_new_session=",
        "'/proc/self/status'",
        ".chmod",
    ):
        assert any(expected in line for line in found), expected
    assert violations("import signal\nsignal.Signals(9).name\nos.getpid()\n") == []
