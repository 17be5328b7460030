"""What this OS can enforce on a sandboxed server, and the command line that enforces it.

The one place that says which folders ``"read": "system"`` opens
(``SYSTEM_READ``, ``PACKAGE_CACHES``) and which stores of the home stay shut
(``SECRET_STORES``); docs/containment.md and docs/design.md §3.17 repeat the lists.

- Linux: Landlock, by our launcher (core/platform/landlock.py run with
  ``-I -S``): it restricts itself between fork and exec of the server.
- macOS: a Seatbelt profile (core.platform.seatbelt) through ``sandbox-exec``.
- Windows: nothing yet (``kind`` "none"), so a sandboxed entry is parked
  unless it says ``"required": false``.
"""

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from core.platform import landlock, seatbelt
from core.platform.grants import Grants

#: System folders a server may read (and run programs from), by OS.
SYSTEM_READ: Final[dict[str, tuple[str, ...]]] = {
    "linux": (
        "/usr",
        "/lib",
        "/lib32",
        "/lib64",
        "/bin",
        "/sbin",
        "/etc",
        "/opt",
        "/srv",
        "/proc",
        "/sys",
        "/dev",
        "/run",
        "/var/lib",
        "/var/cache",
        "/nix",
        "/snap",
    ),
    "darwin": (
        "/System",
        "/Library",
        "/usr",
        "/bin",
        "/sbin",
        "/etc",
        "/private/etc",
        "/opt",
        "/dev",
        "/Applications",
        "/private/var/db",
        "/var/db",
    ),
}
#: Device files every program writes to (stdio redirections, terminals, shared memory).
DEVICE_WRITE: Final = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/pts", "/dev/shm")
#: Below the home: where interpreters and package managers keep what they download.
PACKAGE_CACHES: Final = (
    ".cache", ".npm", ".local", ".nvm", ".volta", ".bun", ".deno", ".pyenv", ".cargo",
    ".rustup", ".gem", ".m2", ".gradle", "go", "Library/Caches",
)  # fmt: skip
#: Below the home: never readable under ``"read": "system"`` (keys, tokens,
#: cloud credentials, keyrings, and mcp-tray's own state with its token).
SECRET_STORES: Final = (
    ".ssh", ".gnupg", ".pki", ".password-store", ".local/share/keyrings", ".aws",
    ".azure", ".kube", ".docker/config.json", ".config/gcloud", ".config/gh", ".netrc",
    ".git-credentials", ".pgpass", ".npmrc", ".pypirc", ".config/mcp-tray",
    ".local/state/mcp-tray", ".local/share/mcp-tray", "Library/Keychains",
    "Library/Application Support/mcp-tray",
)  # fmt: skip


@dataclass(frozen=True)
class Support:
    """What this machine can enforce: ``kind`` is "landlock", "seatbelt" or "none"."""

    kind: str
    abi: int = 0
    #: Why nothing (or less) is enforced here, for a parked reason and the doctor.
    missing: str = ""

    def lacks(self, network: bool) -> str:
        """What is missing to enforce a sandbox (with ``network`` false: its TCP rules too)."""
        if self.kind == "landlock" and not network and self.abi < landlock.NETWORK_ABI:
            return (
                f'Landlock ABI {self.abi} has no TCP rules ("network": false needs ABI '
                f"{landlock.NETWORK_ABI}, Linux 6.7 or later)"
            )
        return self.missing

    def label(self) -> str:
        if self.kind == "landlock":
            return f"landlock ABI {self.abi}"
        return self.kind


def system_name(system: str = sys.platform) -> str:
    return "linux" if system.startswith("linux") else system


def probe(system: str = sys.platform, abi: Callable[[], int] = landlock.abi_version) -> Support:
    """What this OS offers (``abi`` is the seam tests replace to simulate an old kernel)."""
    name = system_name(system)
    if name == "linux":
        version = abi()
        if version <= 0:
            return Support(
                "none",
                missing="this kernel offers no Landlock (Linux 5.13 or later, with landlock "
                "in its lsm= list)",
            )
        return Support("landlock", version)
    if name == "darwin":
        return Support("seatbelt")
    return Support("none", missing=f"sandboxes are not enforced on {name} yet")


def launch_argv(
    support: Support, grants: Grants, argv: Sequence[str], python: str = sys.executable
) -> list[str]:
    """The command line that runs ``argv`` under ``grants`` as ``support`` enforces them."""
    if support.kind == "landlock":
        words = [f"abi={support.abi}", f"network={int(grants.network)}"]
        words += [f"read={p}" for p in grants.read]
        words += [f"write={p}" for p in grants.write]
        words += [f"list={p}" for p in grants.listing]
        return [python, "-I", "-S", str(Path(landlock.__file__)), *words, "--", *argv]
    if support.kind == "seatbelt":
        return ["/usr/bin/sandbox-exec", "-p", seatbelt.profile(grants), *argv]
    raise ValueError(f"nothing to enforce a sandbox with: {support.missing}")


def system_reads(system: str = sys.platform) -> tuple[str, ...]:
    return SYSTEM_READ.get(system_name(system), ())
