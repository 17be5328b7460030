"""Landlock through three system calls, and the launcher that restricts itself, then execs.

Run as a script, never imported by the tray for its rules: ``python -I -S
landlock.py GRANTS... -- argv...`` restricts *its own* process (no new
privileges, the ruleset, ``RLIMIT_CORE=0``) and then ``execvpe``s the
server, so the tray is never restricted and everything the server starts
inherits the sandbox. The file is standard library only (it runs with
``-S``, without site-packages, to start fast: bench/sandbox_spawn.py).

GRANTS are words, one argument each (no parser to import: json costs its
``re``): ``abi=N`` (the ABI the tray planned for), ``network=0`` (deny TCP),
and ``read=PATH``, ``write=PATH``, ``list=PATH``. ``read`` grants reading
and executing beneath the path, ``write`` every right the ABI knows,
``list`` only listing a folder
(its files' contents stay closed: how the home is open except its secret
stores). Only the rights the kernel's ABI knows are asked for: refer from
ABI 2, truncate from 3, TCP bind/connect from 4 (denied when ``network`` is
false), ioctl on devices from 5. Scopes (ABI 6) are left unhandled: a
server may still signal and reach abstract sockets of its own user.
"""

import ctypes
import os
import sys
from collections.abc import Sequence
from typing import Any, Final

SYS_CREATE_RULESET: Final = 444
SYS_ADD_RULE: Final = 445
SYS_RESTRICT_SELF: Final = 446
CREATE_RULESET_VERSION: Final = 1
RULE_PATH_BENEATH: Final = 1
PR_SET_NO_NEW_PRIVS: Final = 38
#: Linux's O_PATH (os.O_PATH exists only there; this file is type-checked for every OS).
O_PATH: Final = 0o10000000
#: The exit status of a launcher that could not restrict itself (the server never ran).
LAUNCH_FAILED: Final = 126

FS_EXECUTE: Final = 1 << 0
FS_WRITE_FILE: Final = 1 << 1
FS_READ_FILE: Final = 1 << 2
FS_READ_DIR: Final = 1 << 3
#: remove dir/file, make char/dir/reg/sock/fifo/block/sym: ABI 1.
FS_CHANGE_TREE: Final = sum(1 << bit for bit in range(4, 13))
FS_REFER: Final = 1 << 13
FS_TRUNCATE: Final = 1 << 14
FS_IOCTL_DEV: Final = 1 << 15
NET_BIND_TCP: Final = 1 << 0
NET_CONNECT_TCP: Final = 1 << 1
#: The first ABI with TCP rules.
NETWORK_ABI: Final = 4

READ: Final = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR


def fs_rights(abi: int) -> int:
    """Every filesystem right ABI ``abi`` knows."""
    rights = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_READ_DIR | FS_CHANGE_TREE
    if abi >= 2:
        rights |= FS_REFER
    if abi >= 3:
        rights |= FS_TRUNCATE
    if abi >= 5:
        rights |= FS_IOCTL_DEV
    return rights


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """The Landlock ABI this kernel offers; 0 when it has none (or it is disabled)."""
    return _kernel_abi() if sys.platform == "linux" else 0


def _kernel_abi() -> int:
    try:
        syscall = _libc().syscall
    except (OSError, AttributeError):
        return 0
    syscall.restype = ctypes.c_long
    version = syscall(ctypes.c_long(SYS_CREATE_RULESET), None, ctypes.c_size_t(0),
                      ctypes.c_uint32(CREATE_RULESET_VERSION))  # fmt: skip
    return max(int(version), 0)


def _fail(what: str) -> OSError:
    errno = ctypes.get_errno()
    return OSError(errno, f"landlock {what}: {os.strerror(errno)}")


def restrict_self(
    abi: int, read: Sequence[str], write: Sequence[str], listing: Sequence[str], network: bool
) -> None:
    """Restrict this process (and all it execs) to the grants; OSError when the kernel refuses."""
    libc = _libc()
    syscall = libc.syscall
    syscall.restype = ctypes.c_long
    handled = fs_rights(abi)
    attr = _RulesetAttr(handled, 0, 0)
    size = 8
    if not network:
        attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP
        size = 16
    ruleset = syscall(ctypes.c_long(SYS_CREATE_RULESET), ctypes.byref(attr),
                      ctypes.c_size_t(size), ctypes.c_uint32(0))  # fmt: skip
    if ruleset < 0:
        raise _fail("create_ruleset")
    try:
        for paths, rights in ((read, READ), (listing, FS_READ_DIR), (write, handled)):
            for path in paths:
                _add_path(syscall, int(ruleset), path, rights & handled)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise _fail("prctl(PR_SET_NO_NEW_PRIVS)")
        if syscall(ctypes.c_long(SYS_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0)):
            raise _fail("restrict_self")
    finally:
        os.close(int(ruleset))


def _add_path(syscall: Any, ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, O_PATH)
    except OSError:
        return  # gone since the tray planned it: nothing to grant
    try:
        if not os.path.isdir(path):
            # A file takes only the rights that apply to files.
            rights &= FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV
        attr = _PathBeneathAttr(rights, fd)
        if syscall(ctypes.c_long(SYS_ADD_RULE), ctypes.c_int(ruleset),
                   ctypes.c_int(RULE_PATH_BENEATH), ctypes.byref(attr), ctypes.c_uint32(0)):  # fmt: skip
            raise _fail(f"add_rule {path!r}")
    finally:
        os.close(fd)


def main(argv: Sequence[str]) -> int:
    """``GRANTS -- command args...``: restrict, drop core dumps, exec. Returns only on failure."""
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        sys.stderr.write(
            "usage: landlock.py [abi=N] [network=0] [read=|write=|list=PATH]... -- command [args...]\n"
        )
        return LAUNCH_FAILED
    split = list(argv).index("--")
    grants: dict[str, list[str]] = {"read": [], "write": [], "list": [], "abi": [], "network": []}
    for word in argv[:split]:
        key, _, value = word.partition("=")
        grants[key].append(value)
    command = list(argv[split + 1 :])
    planned = int(grants["abi"][-1]) if grants["abi"] else 1
    network = grants["network"][-1:] != ["0"]
    try:
        if sys.platform == "linux":
            import resource

            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        abi = abi_version()
        if abi < planned:
            raise OSError(0, f"landlock ABI {abi} is below the {planned} planned")
        restrict_self(abi, grants["read"], grants["write"], grants["list"], network)
        os.execvpe(command[0], command, os.environ)
    except OSError as exc:
        sys.stderr.write(f"mcp-tray sandbox: cannot start {command[0]!r}: {exc.strerror or exc}\n")
        return LAUNCH_FAILED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
