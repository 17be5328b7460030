"""Checking a server's ``sandbox`` and ``limits`` (docs/design.md §3.17).

Paths are kept as written: ``~``, ``${state}`` and ``${roots}`` mean
something only at spawn (the home, the server's state folder, the folders
of the sessions the child serves). Only those placeholders are known, and
``${roots}`` must stand alone (it is a list of folders) on an entry that
has roots to give, never a shared one.
"""

import re
from typing import Any, Final

from core.settings.config_model import LIMITS_KEYS, SANDBOX_KEYS, LimitsConfig, SandboxConfig
from core.settings.profiles import Problems

SANDBOX_PLACEHOLDERS: Final = ("state", "roots")
_PLACEHOLDER_RE: Final = re.compile(r"\$\{([^}]*)\}")
#: Below this a child cannot even start its interpreter.
MIN_MEMORY_MB: Final = 16
EXAMPLE: Final = '"sandbox": {"write": ["~/notes"], "read": "system", "network": false}'


def check_sandbox(
    raw: Any, keys: list[str | int], problems: Problems, *, sharing: str
) -> SandboxConfig:
    if not isinstance(raw, dict):
        raise problems.error(keys, f"must be an object, got {problems.describe(raw)}", fix=EXAMPLE)
    for key in raw:
        if key not in SANDBOX_KEYS:
            raise problems.error(
                [*keys, key],
                f"unknown key {key!r}{problems.hint(key, SANDBOX_KEYS)}",
                fix=f"a sandbox takes {', '.join(SANDBOX_KEYS)}",
            )
    write = _paths(raw.get("write", []), [*keys, "write"], problems, sharing)
    read_raw = raw.get("read", "system")
    read = None if read_raw == "system" else _paths(read_raw, [*keys, "read"], problems, sharing)
    flags = {}
    for flag in ("network", "required"):
        value = raw.get(flag, flag == "required")
        if not isinstance(value, bool):
            raise problems.error(
                [*keys, flag],
                f"must be true or false, got {problems.describe(value)}",
                fix=f'write "{flag}": false' if flag == "network" else f'write "{flag}": true',
            )
        flags[flag] = value
    return SandboxConfig(
        write=write, read=read, network=flags["network"], required=flags["required"]
    )


def _paths(raw: Any, keys: list[str | int], problems: Problems, sharing: str) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(p, str) and p for p in raw):
        what = 'a list of folder paths or "system"' if keys[-1] == "read" else "a list of paths"
        raise problems.error(
            keys,
            f"must be {what}, got {problems.describe(raw)}",
            fix='write ["~/notes", "${state}"] (paths take ~, ${state} and ${roots})',
        )
    for index, path in enumerate(raw):
        for match in _PLACEHOLDER_RE.finditer(path):
            inner = match.group(1)
            if inner not in SANDBOX_PLACEHOLDERS:
                raise problems.error(
                    [*keys, index],
                    f"unknown placeholder ${{{inner}}}{problems.hint(inner, SANDBOX_PLACEHOLDERS)}",
                    fix="sandbox paths take ~, ${state} (the server's state folder) and "
                    "${roots} (the folders of the client sessions it serves)",
                )
        if "${roots}" in path and path != "${roots}":
            raise problems.error(
                [*keys, index],
                "${roots} stands for a list of folders and must be the whole entry",
                fix='write "${roots}" as an entry of its own',
            )
        if path == "${roots}" and sharing == "shared":
            raise problems.error(
                [*keys, index],
                "a shared child serves every client at once, so it has no roots of its own "
                "to grant",
                fix='set "sharing": "per-workspace" (one child per project, sandboxed to it)',
            )
        if not (path.startswith(("/", "~", "${")) or re.match(r"[A-Za-z]:[\\/]", path)):
            raise problems.error(
                [*keys, index],
                f"{path!r} is not an absolute path",
                fix="start it with /, ~ or ${state}",
            )
    return tuple(raw)


def check_limits(raw: Any, keys: list[str | int], problems: Problems) -> LimitsConfig:
    fix = 'write "limits": {"memory_mb": 1024, "cpu_percent": 80}'
    if not isinstance(raw, dict):
        raise problems.error(keys, f"must be an object, got {problems.describe(raw)}", fix=fix)
    for key in raw:
        if key not in LIMITS_KEYS:
            raise problems.error(
                [*keys, key],
                f"unknown key {key!r}{problems.hint(key, LIMITS_KEYS)}",
                fix=f"limits take {' and '.join(LIMITS_KEYS)}",
            )
    memory = raw.get("memory_mb")
    if memory is not None and (
        isinstance(memory, bool) or not isinstance(memory, int) or memory < MIN_MEMORY_MB
    ):
        raise problems.error(
            [*keys, "memory_mb"],
            f"must be a whole number of MiB, at least {MIN_MEMORY_MB}, got "
            f"{problems.describe(memory)}",
            fix='write "memory_mb": 1024 (1 GiB) or remove it',
        )
    cpu = raw.get("cpu_percent")
    if cpu is not None and (
        isinstance(cpu, bool) or not isinstance(cpu, int | float) or not 0 < cpu <= 6400
    ):
        raise problems.error(
            [*keys, "cpu_percent"],
            f"must be a percentage of one core above 0 (200 is two cores), got "
            f"{problems.describe(cpu)}",
            fix='write "cpu_percent": 80 or remove it',
        )
    return LimitsConfig(memory_mb=memory, cpu_percent=float(cpu) if cpu is not None else None)
