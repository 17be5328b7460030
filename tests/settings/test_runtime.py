"""The instance lock and runtime file (core.settings.runtime)."""

import json
from pathlib import Path

import pytest

from core.base.errors import NotRunning
from core.settings.paths import default_paths
from core.settings.runtime import Instance, running_instance


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
