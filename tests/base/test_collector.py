"""core.base.collector: the tray's process freezes what start-up built and collects less often.

Strategy: ``settle_after_start`` runs in a Python subprocess of its own, which
prints the collector's state before and after (tuning pytest's own process
would change every later test's memory behaviour).
"""

import subprocess
import sys

from core.base.collector import OLDER_THRESHOLD, YOUNG_THRESHOLD

DRIVER = """
import gc
from core.base.collector import settle_after_start
before = gc.get_freeze_count()
settle_after_start()
print(before, gc.get_freeze_count(), *gc.get_threshold())
"""


def test_settling_freezes_what_was_built_and_collects_the_young_less_often() -> None:
    done = subprocess.run(
        [sys.executable, "-c", DRIVER], capture_output=True, text=True, timeout=60, check=True
    )

    before, frozen, young, middle, oldest = map(int, done.stdout.split())
    assert before == 0 and frozen > 1000
    assert (young, middle, oldest) == (YOUNG_THRESHOLD, OLDER_THRESHOLD, OLDER_THRESHOLD)
