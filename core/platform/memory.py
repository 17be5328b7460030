"""Large freed blocks handed back to the system, where glibc would keep them.

glibc's malloc serves a block of 128 KiB or more with mmap and unmaps it when
it is freed, but it raises that threshold to the size of every such block
freed (up to 32 MiB): once a large tool result has passed, everything below
its size comes from the heap, which keeps what is freed. Measured with
bench/large_results.py (results of 1 KiB to 50 MiB, then 10 and 1 MiB
again): the tray's resting RSS went from 41 to 64 MiB and stayed there
(194 MiB before results were carried in slices). Fixing the threshold
(``mallopt(M_MMAP_THRESHOLD)``, which also ends the raising) brings it back
to 41 MiB after every result. ``MALLOC_ARENA_MAX`` changed nothing (the
large blocks are all the event loop's, on one arena); ``malloc_trim`` after
each large answer only returns what was already freed by then, so resting
RSS still rose by the last result's size until a later call.

Linux with glibc only: musl, macOS and Windows allocators are left alone
(here, in core/platform/, with the other OS-specific calls).
"""

import ctypes
import os
import sys
from typing import Final

#: Blocks of this size or more are mmapped, and unmapped as soon as they are freed.
MMAP_THRESHOLD_BYTES: Final = 1024 * 1024
#: ``M_MMAP_THRESHOLD`` in glibc's <malloc.h>.
_M_MMAP_THRESHOLD: Final = -3


if sys.platform == "linux":

    def return_large_blocks() -> bool:
        """Have glibc hand large blocks back when they are freed; False (and nothing done)
        where the C library is not glibc."""
        if not _is_glibc():
            return False
        try:
            mallopt = ctypes.CDLL(None).mallopt
        except (OSError, AttributeError):
            return False
        return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))

    def _is_glibc() -> bool:
        try:
            return (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")
        except (ValueError, OSError):
            return False

else:

    def return_large_blocks() -> bool:
        """Nothing to do: only glibc raises its mmap threshold this way."""
        return False
