"""Several real processes writing one registry file at once.

Strategy: four writer processes (tests/support/registry_writer.py, each its own
interpreter) open the same not-yet-existing file, so they also race to
create it, switch it to WAL and migrate it. They register, report ready,
and start beating together on a "go"; each beats 2,000 times. The file
itself is the witness: each row's ``beats`` counter must equal what its
writer says it renewed, and every beat must be renewed (possibly after a
counted "database is locked" retry). A writer that hits an unhandled error
exits non-zero and fails the test. Bounded by the suite's 60 s timeout.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from core.registry.store import WorkerRegistry
from tests.support import paths

REPO = paths.REPO
WRITER = paths.SUPPORT / "registry_writer.py"
WRITERS = 4
BEATS = 2000


@pytest.mark.slow
def test_four_processes_beating_two_thousand_times_each_lose_nothing(tmp_path: Path) -> None:
    db = tmp_path / "state" / "registry.sqlite"
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    procs = [
        subprocess.Popen(
            [sys.executable, str(WRITER), str(db), f"sess-{n}", str(BEATS)],
            cwd=REPO,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(WRITERS)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            ready = proc.stdout.readline().strip()
            assert ready == "ready", proc.stderr.read() if proc.stderr else ready
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        results = []
        for proc in procs:
            out, err = proc.communicate(timeout=45)
            assert proc.returncode == 0, err
            assert "database is locked" not in err
            results.append(json.loads(out))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()

    with WorkerRegistry(db) as registry:
        rows = {w.worker_identity: w for w in registry.list_workers()}
    assert len(rows) == WRITERS
    for result in results:
        assert result["refused"] == 0
        assert result["renewed"] == BEATS, result
        assert rows[result["worker_identity"]].beats == BEATS
    # Retries are allowed, but each must have been caught and counted.
    assert all(isinstance(r["transient"], int) for r in results)
