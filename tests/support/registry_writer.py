"""One writer process for tests/registry/test_registry_multiprocess.py (not a test).

Usage: python tests/support/registry_writer.py DB SESSION BEATS

Opens the registry (racing the other writers to create and migrate it),
registers one worker, prints ``ready``, waits for ``go`` on stdin so all
writers start together, then heartbeats BEATS times. A "database is locked"
that outlives the busy timeout is counted and the same beat retried; any
other error escapes and fails the process. Prints one JSON line of counts.
"""

import json
import sqlite3
import sys

from core.base.clock import utc_now
from core.registry.identity import worker_identity
from core.registry.store import WorkerRegistry

#: Attempts per beat before giving up; reaching it means the registry is
#: wedged, which the parent reports as a lost beat.
MAX_ATTEMPTS_PER_BEAT = 50


def main(db: str, session: str, beats: int) -> dict[str, object]:
    with WorkerRegistry(db) as registry:
        registration = registry.register(
            worker_identity=worker_identity("codex", session, utc_now()),
            client_name="codex",
            session_id=session,
            role="bridge",
        )
        print("ready", flush=True)
        sys.stdin.readline()
        renewed = transient = refused = 0
        for _ in range(beats):
            for _attempt in range(MAX_ATTEMPTS_PER_BEAT):
                try:
                    outcome = registry.heartbeat(
                        registration.worker_identity, registration.fencing_epoch
                    )
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc):
                        raise
                    transient += 1
                    continue
                if outcome.renewed:
                    renewed += 1
                else:
                    refused += 1
                break
        return {
            "worker_identity": registration.worker_identity,
            "renewed": renewed,
            "transient": transient,
            "refused": refused,
        }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2], int(sys.argv[3]))), flush=True)
