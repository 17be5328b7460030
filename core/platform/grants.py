"""What a sandboxed child may touch, as every OS's sandbox takes it (core.platform.sandboxing
plans it; core.platform.landlock and core.platform.seatbelt enforce it)."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Grants:
    """What a sandboxed child may touch: absolute paths, each existing at planning."""

    read: tuple[str, ...]
    write: tuple[str, ...]
    #: Folders that may be listed without their files being readable (the home, say).
    listing: tuple[str, ...]
    network: bool
