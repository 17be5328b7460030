"""The instance lock and runtime file (core.settings.runtime)."""

import contextlib
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import pytest

from core.base.errors import AlreadyRunning, NotRunning
from core.platform.files import open_private, try_lock
from core.settings.paths import Paths, default_paths
from core.settings.runtime import Instance, instance_held, running_instance


def test_a_dead_trays_runtime_file_is_never_read_as_the_starting_trays(tmp_path: Path) -> None:
    paths = default_paths({"MCP_TRAY_HOME": str(tmp_path)})
    paths.ensure()
    # What a tray killed -9 leaves: its runtime file, naming a port someone else may hold now.
    stale = {"pid": 999999, "port": 1, "url": "", "version": "0", "owner": "x", "started_at": 0}
    paths.runtime_file.write_text(json.dumps(stale))

    instance = Instance.acquire(paths)
    try:
        # Starting: the lock is held, nothing is published yet.
        with pytest.raises(NotRunning):
            running_instance(paths)
        instance.publish(4321, "owner")
        assert running_instance(paths).port == 4321
    finally:
        instance.release()
    with pytest.raises(NotRunning):
        running_instance(paths)


def _hold(paths: Paths) -> IO[str]:
    handle = open_private(paths.lock_file, "a+")
    assert try_lock(handle)
    return handle


def test_a_starting_tray_is_not_turned_away_by_someone_asking_whether_one_runs(
    tmp_path: Path,
) -> None:
    paths = default_paths({"MCP_TRAY_HOME": str(tmp_path)})
    paths.ensure()
    # An asker (a bridge, `mcp-tray status`) holds the lock for the moment of its look.
    asker = _hold(paths)
    threading.Timer(0.05, asker.close).start()
    instance = Instance.acquire(paths)
    instance.release()


def test_a_lock_held_for_good_means_already_running(tmp_path: Path) -> None:
    paths = default_paths({"MCP_TRAY_HOME": str(tmp_path)})
    paths.ensure()
    with _hold(paths), pytest.raises(AlreadyRunning):
        Instance.acquire(paths, grace=0.05)


def test_an_asker_does_not_take_another_askers_look_for_a_tray(tmp_path: Path) -> None:
    paths = default_paths({"MCP_TRAY_HOME": str(tmp_path)})
    paths.ensure()
    asker = _hold(paths)
    threading.Timer(0.02, asker.close).start()
    assert not instance_held(paths, grace=10.0)


def test_a_published_tray_is_seen_without_waiting_out_the_grace(tmp_path: Path) -> None:
    paths = default_paths({"MCP_TRAY_HOME": str(tmp_path)})
    instance = Instance.acquire(paths)
    try:
        instance.publish(4321, "owner")
        began = time.monotonic()
        assert instance_held(paths, grace=30.0)
        assert time.monotonic() - began < 10.0
    finally:
        instance.release()
    assert not instance_held(paths)


ASKER = """
import sys
from core.settings.paths import default_paths
from core.settings.runtime import instance_held
paths = default_paths({"MCP_TRAY_HOME": sys.argv[1]})
print("asking", flush=True)
while True:
    instance_held(paths)
"""


@pytest.mark.timeout(60)
def test_trays_start_every_time_while_other_processes_keep_asking(tmp_path: Path) -> None:
    paths = default_paths({"MCP_TRAY_HOME": str(tmp_path)})
    paths.ensure()
    with contextlib.ExitStack() as stack:
        askers = [
            stack.enter_context(
                subprocess.Popen(
                    [sys.executable, "-c", ASKER, str(tmp_path)], stdout=subprocess.PIPE, text=True
                )
            )
            for _ in range(3)
        ]
        try:
            for asker in askers:
                assert asker.stdout is not None and asker.stdout.readline() == "asking\n"
            # Before the grace, about one start in sixteen was turned away here.
            for _ in range(2000):
                Instance.acquire(paths).release()
            assert all(asker.poll() is None for asker in askers)
        finally:
            for asker in askers:
                asker.kill()
