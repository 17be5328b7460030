"""The registry and diagnostics where users see them: CLI, API, tray snapshot.

Strategy: real registry files under a private MCP_TRAY_HOME, the real CLI
in a subprocess (its own environment is what the doctor checks), and a real
TrayService in-process for the API and the snapshot.
"""

import json
import os
import subprocess
import sys
from typing import Any

import httpx
import pytest

from core.registry.identity import worker_identity
from core.registry.store import ROLE_BRIDGE, WorkerRegistry
from core.settings.paths import Paths
from tests.gateway_support import Services

WORKER_FIELDS = {
    "worker_identity",
    "client_name",
    "session_id",
    "generation_id",
    "server",
    "pid",
    "started_at",
    "last_heartbeat_at",
    "heartbeat_age_seconds",
    "ttl_seconds",
    "live",
    "fencing_epoch",
}


def register(
    paths: Paths,
    *,
    client: str = "cursor",
    session: str = "s1",
    version: str = "0.1.0",
    pid: int | None = None,
) -> str:
    with WorkerRegistry(paths.registry_file) as registry:
        identity = worker_identity(client, session, registry.wall_clock())
        registry.register(
            worker_identity=identity,
            client_name=client,
            session_id=session,
            role=ROLE_BRIDGE,
            server="echo",
            pid=pid if pid is not None else os.getpid(),
            heartbeat_ttl_seconds=600,
            runtime_version=version,
        )
    return identity


def cli(paths: Paths, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MCP_TRAY_")}
    clean.update(MCP_TRAY_HOME=str(paths.state_dir.parent), **env)
    return subprocess.run(
        [sys.executable, "-m", "core.cli.main", *args],
        capture_output=True,
        text=True,
        env=clean,
        timeout=60,
        check=False,
    )


def test_workers_json_lists_every_row_with_its_fields(tray_home: Paths) -> None:
    identity = register(tray_home)

    result = cli(tray_home, "workers", "--json")

    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [row["worker_identity"] for row in rows] == [identity]
    assert set(rows[0]) >= WORKER_FIELDS
    assert rows[0]["live"] is True and rows[0]["client_name"] == "cursor"
    table = cli(tray_home, "workers")
    assert identity in table.stdout


def test_doctor_is_clean_without_problems(tray_home: Paths) -> None:
    register(tray_home)
    result = cli(tray_home, "doctor")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no problems found" in result.stdout


def test_doctor_reports_an_unknown_variable_with_a_did_you_mean_and_exits_1(
    tray_home: Paths,
) -> None:
    result = cli(tray_home, "doctor", MCP_TRAY_CLIENT_SESION="x", MCP_TRAY_CLIENT_SESSION="ok")
    assert result.returncode == 1
    lines = [line for line in result.stdout.splitlines() if line.startswith("unsupported-env:")]
    assert len(lines) == 1
    assert "MCP_TRAY_CLIENT_SESION" in lines[0] and "MCP_TRAY_CLIENT_SESSION" in lines[0]
    assert "Fix:" in lines[0]


def test_doctor_reports_a_worker_on_another_version_as_stale_runtime(tray_home: Paths) -> None:
    register(tray_home, version="0.0.9")
    result = cli(tray_home, "doctor", "--json")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    texts = json.dumps(report)
    assert "stale-runtime:" in texts and "restart Cursor to reconnect" in texts


def test_a_registry_file_that_is_not_sqlite_is_refused_by_name_and_left_alone(
    tray_home: Paths,
) -> None:
    tray_home.registry_file.write_text("not a database")
    result = cli(tray_home, "workers")
    assert result.returncode == 1
    assert str(tray_home.registry_file) in result.stderr
    assert tray_home.registry_file.read_text() == "not a database"


@pytest.mark.usefixtures("tray_home")
async def test_both_warning_families_reach_the_snapshot_and_the_api(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_TRAY_BOGUS", "1")
    register(services.paths, version="0.0.9", session="old-bridge")
    service = await services.start({})
    assert service.workers is not None
    await service.workers.run_doctor()

    families = {w["family"] for w in service.supervisor.snapshot().extra["warnings"]}
    assert {"unsupported-env", "stale-runtime"} <= families
    async with httpx.AsyncClient() as http:
        headers = {"Authorization": f"Bearer {service.token}"}
        warnings: list[dict[str, Any]] = (
            await http.get(f"{service.url}/api/v1/warnings", headers=headers)
        ).json()["warnings"]
        workers = (await http.get(f"{service.url}/api/v1/workers", headers=headers)).json()[
            "workers"
        ]
    assert {"unsupported-env", "stale-runtime"} <= {w["family"] for w in warnings}
    assert any(w["text"].startswith("unsupported-env:") for w in warnings)
    assert [w["session_id"] for w in workers] == ["old-bridge"]
