"""The registry and diagnostics where users see them: CLI, API, tray snapshot.

Strategy: real registry files under a private MCP_TRAY_HOME, the real CLI
in a subprocess (its own environment is what the doctor checks), and a real
TrayService in-process for the API and the snapshot. Session ownership runs
a WorkerWatch on a real registry file with a ``FakeWallClock``, fed the
gateway's own ``ClientSession`` objects, so TTLs pass without waiting.
"""

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from core.base.snapshot import Event, EventKind
from core.registry.identity import worker_identity
from core.registry.records import ROLE_BRIDGE, Registration
from core.registry.session_claims import SessionOwnership
from core.registry.store import WorkerRegistry
from core.registry.worker_watch import WorkerWatch
from core.serving.sessions.sessions import ClientSession
from core.settings.paths import Paths
from tests.support.cli_support import run_mcp_tray
from tests.support.fakes import FakeWallClock
from tests.support.gateway_support import Services
from tests.support.registry_support import WORKER_FIELDS


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
    return run_mcp_tray(clean, *args)


def test_workers_json_lists_every_row_with_its_fields(tray_home: Paths) -> None:
    identity = register(tray_home)

    result = cli(tray_home, "workers", "--json")

    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [row["worker_identity"] for row in rows] == [identity]
    assert set(rows[0]) >= set(WORKER_FIELDS)
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
    # The copy of the registry is read back off the loop: the bridge's row is in it by now.
    await service.workers.refresh()

    families = {w.family for w in service.supervisor.snapshot().warnings}
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


def bridge_row(registry: WorkerRegistry, client: str, client_session: str) -> Registration:
    """What ``mcp-tray connect`` registers: keyed by its client's session, not the gateway's."""
    return registry.register(
        worker_identity=worker_identity(client, client_session, registry.wall_clock()),
        client_name=client,
        session_id=client_session,
        role=ROLE_BRIDGE,
        server="echo",
        pid=os.getpid(),
        heartbeat_ttl_seconds=60,
    )


async def test_the_watch_tells_each_client_session_whether_its_worker_row_holds_it(
    tmp_path: Path,
) -> None:
    clock = FakeWallClock()
    events: list[Event] = []
    with WorkerRegistry(tmp_path / "registry.sqlite", wall_clock=clock) as registry:
        watch = WorkerWatch(registry, events.append, servers_env=dict)
        rows = {
            "gw-live": bridge_row(registry, "cursor", "cursor-1"),
            "gw-taken": bridge_row(registry, "zed", "zed-1"),
            "gw-gone": bridge_row(registry, "codex", "codex-1"),
        }
        for session_id, row in rows.items():
            watch.session_opened(
                ClientSession(
                    id=session_id,
                    server="echo",
                    kind="bridge",
                    worker_identity=row.worker_identity,
                )
            )
        watch.session_opened(ClientSession(id="gw-unnamed", server="echo", kind="bridge"))
        await watch.refresh()
        assert {k: v.status for k, v in watch.session_ownership.items()} == {
            "gw-live": "owned",
            "gw-taken": "owned",
            "gw-gone": "owned",
        }

        # A newer bridge takes "zed-1" over and the old one is refused; the
        # newer one then goes silent too. "codex-1"'s bridge deregistered.
        taken = rows["gw-taken"]
        registry.claim_generation(taken.worker_identity)
        clock.advance(1)
        assert not registry.heartbeat(taken.worker_identity, taken.fencing_epoch).renewed
        registry.remove(rows["gw-gone"].worker_identity)
        clock.advance(60)
        live = rows["gw-live"]
        assert registry.heartbeat(live.worker_identity, live.fencing_epoch).renewed
        events.clear()
        await watch.refresh()

    ownership = dict(watch.session_ownership)
    assert {k: v.status for k, v in ownership.items()} == {
        "gw-live": "owned",
        "gw-taken": "fenced",
        "gw-gone": "missing",
    }
    assert ownership["gw-live"] == SessionOwnership(
        "owned", f"held by live worker {live.worker_identity}"
    )
    assert "refused" in ownership["gw-taken"].detail
    assert "no registration" in ownership["gw-gone"].detail
    assert [e.kind for e in events].count(EventKind.SESSIONS) == 1


async def test_a_closed_session_leaves_the_ownership_table(tmp_path: Path) -> None:
    with WorkerRegistry(tmp_path / "registry.sqlite", wall_clock=FakeWallClock()) as registry:
        watch = WorkerWatch(registry, lambda _event: None, servers_env=dict)
        row = bridge_row(registry, "cursor", "cursor-1")
        session = ClientSession(
            id="gw-1", server="echo", kind="bridge", worker_identity=row.worker_identity
        )
        watch.session_opened(session)
        await watch.refresh()
        assert set(watch.session_ownership) == {"gw-1"}
        session.closed = True
        watch.session_closed(session)
        assert dict(watch.session_ownership) == {}
        await watch.refresh()
        assert dict(watch.session_ownership) == {}
