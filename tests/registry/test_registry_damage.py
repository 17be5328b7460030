"""A damaged, deleted or replaced registry file: one clear line, never a traceback loop.

Strategy: real sqlite files in tmp_path, damaged the way disks and people
damage them (garbage written over pages after the header, the file
deleted or moved aside while open); the registry and the tray's watch over
it must say what is wrong and the fix once, keep going, and pick up a
fresh file by themselves.
"""

import logging
import os
from pathlib import Path

import pytest

from core.base.errors import RegistryFileError
from core.registry.identity import worker_identity
from core.registry.records import ROLE_BRIDGE, Registration
from core.registry.store import WorkerRegistry
from core.registry.worker_watch import WorkerWatch
from tests.conftest import ECHO, python_server, wait_ready, wait_until
from tests.support.gateway_support import Services, bridge_client, worker_rows

PAGE = 4096


def register(registry: WorkerRegistry, client: str, session: str) -> Registration:
    return registry.register(
        worker_identity=worker_identity(client, session, registry.wall_clock()),
        client_name=client,
        session_id=session,
        role=ROLE_BRIDGE,
        server="echo",
        pid=os.getpid(),
        heartbeat_ttl_seconds=60,
    )


def with_garbage_pages(path: Path) -> None:
    """A registry of many rows, then garbage over its pages after the first."""
    with WorkerRegistry(path) as registry:
        for n in range(300):
            register(registry, f"client-{n}-{'x' * 40}", f"session-{n}")
    size = path.stat().st_size
    assert size > 4 * PAGE
    with path.open("r+b") as damaged:
        damaged.seek(2 * PAGE)
        damaged.write(os.urandom(size - 2 * PAGE))


def test_a_file_damaged_after_its_header_says_so_with_the_path_and_the_fix(
    tmp_path: Path,
) -> None:
    path = tmp_path / "registry.sqlite"
    with_garbage_pages(path)

    with pytest.raises(RegistryFileError) as caught:
        with WorkerRegistry(path) as registry:
            registry.list_workers()

    text = str(caught.value)
    assert str(path) in text
    assert "damaged" in text or "not a sqlite database" in text
    assert "move it aside" in text


async def test_the_watch_reports_damage_once_and_recovers_when_the_file_is_moved_aside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    path = tmp_path / "registry.sqlite"
    with_garbage_pages(path)
    watch = WorkerWatch.open(path, lambda _event: None, servers_env=dict)
    try:
        for _ in range(10):
            await watch.refresh()

        problems = [w for w in watch.own_warnings if w.startswith("registry:")]
        assert len(problems) == 1 and "move it aside" in problems[0]
        assert len([r for r in caplog.records if str(path) in r.getMessage()]) == 1
        assert [r for r in caplog.records if r.exc_info] == []

        # The person follows the fix; a bridge registers in the fresh file.
        path.rename(path.with_name("registry.sqlite.bak"))
        with WorkerRegistry(path) as bridge:
            row = register(bridge, "cursor", "cursor-1")
        await watch.refresh()

        assert [w for w in watch.own_warnings if w.startswith("registry:")] == []
        assert [r["worker_identity"] for r in watch.rows] == [row.worker_identity]
    finally:
        await watch.aclose()


async def test_a_registry_deleted_while_running_is_recreated_and_new_rows_are_seen(
    tmp_path: Path,
) -> None:
    path = tmp_path / "registry.sqlite"
    watch = WorkerWatch.open(path, lambda _event: None, servers_env=dict)
    try:
        with WorkerRegistry(path) as first:
            old = register(first, "cursor", "cursor-1")
        await watch.refresh()
        assert [r["worker_identity"] for r in watch.rows] == [old.worker_identity]

        path.unlink()
        for suffix in ("-wal", "-shm"):
            path.with_name(path.name + suffix).unlink(missing_ok=True)
        with WorkerRegistry(path) as second:
            new = register(second, "zed", "zed-1")
        await watch.refresh()

        assert [r["worker_identity"] for r in watch.rows] == [new.worker_identity]
    finally:
        await watch.aclose()


def test_a_heartbeat_into_a_deleted_file_is_refused_so_the_worker_registers_again(
    tmp_path: Path,
) -> None:
    path = tmp_path / "registry.sqlite"
    with WorkerRegistry(path) as registry:
        row = register(registry, "cursor", "cursor-1")
        assert registry.heartbeat(row.worker_identity, row.fencing_epoch).renewed

        path.unlink()
        outcome = registry.heartbeat(row.worker_identity, row.fencing_epoch)

    assert not outcome.renewed
    assert outcome.blocker_kind == "session_attachment_missing"


async def test_a_running_bridge_registers_again_when_the_registry_is_deleted(
    services: Services,
) -> None:
    service = await services.start({"echo": python_server(ECHO)})
    await wait_ready(service.supervisor.server("echo"))
    env = {
        "MCP_TRAY_CLIENT": "cursor",
        "MCP_TRAY_CLIENT_SESSION": "sess-deleted",
        "MCP_TRAY_HEARTBEAT_TTL": "3",
        "MCP_TRAY_HEARTBEAT_INTERVAL": "0.2",
    }
    path = service.paths.registry_file

    async def rows() -> list[str]:
        return [row["worker_identity"] for row in await worker_rows(service, "sess-deleted")]

    async with bridge_client(service.paths, "echo", env=env) as client:
        await client.call_tool("echo", {"text": "x"})
        (identity,) = await wait_until(rows, what="the bridge's row")

        for suffix in ("", "-wal", "-shm"):
            path.with_name(path.name + suffix).unlink(missing_ok=True)

        # The tray recreates the file; the bridge's next beat finds its row
        # gone and registers again, under the same identity.
        assert await wait_until(rows, what="the row again", timeout=15) == [identity]
        assert path.exists()
