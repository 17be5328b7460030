"""core.platform.memory: large freed blocks go back to the system at once.

Strategy: a fresh Python process (the setting is process-wide and cannot be
undone) frees one 16 MiB block, which makes glibc serve everything smaller
from its heap from then on, then allocates and frees 2 MiB blocks, each with
a small live neighbour so that none of them sits at the heap's top (where
glibc would trim it anyway). What the process still holds of them is read
from its RSS: with ``return_large_blocks`` nothing, without it all of it, so
the test shows the very drift it prevents.
"""

import os
import sys

import pytest

from tests.support.cli_support import run_python
from tests.support.gateway_support import REPO

PROBE = """
import sys
import psutil
from core.platform.memory import return_large_blocks

if sys.argv[1] == "fixed":
    assert return_large_blocks()
MIB = 1024 * 1024
block = bytearray(16 * MIB)
del block
before = psutil.Process().memory_info().rss
blocks, neighbours = [], []
for _ in range(16):
    blocks.append(bytearray(2 * MIB))
    neighbours.append(bytearray(1024))
del blocks
print((psutil.Process().memory_info().rss - before) / MIB)
"""


def _glibc() -> bool:
    return sys.platform == "linux" and (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")


@pytest.mark.skipif(not _glibc(), reason="the setting is glibc's; other allocators are left alone")
def test_freed_blocks_of_a_mebibyte_or_more_leave_the_process_after_a_larger_one_passed() -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    kept = {}
    for mode in ("plain", "fixed"):
        result = run_python(["-c", PROBE, mode], env)
        assert result.returncode == 0, result.stderr
        kept[mode] = float(result.stdout)

    assert kept["plain"] > 24  # MiB: glibc keeps the 32 MiB freed...
    assert kept["fixed"] < 4  # ...unless told to hand such blocks back
