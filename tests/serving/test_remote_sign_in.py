"""Signing in to a remote server (issue 31): a real tray in-process, a remote protected by an
authorization server run in the test (tests/servers/remote_oauth.py: the SDK's MCP server
with the SDK's own OAuth routes), the real ``mcp-tray login`` in a process of its own, and a
scripted browser that follows the authorization redirect back to it."""

import asyncio
import json
import socket
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from core.base.states import ServerState
from core.serving.service import TrayService
from core.settings.paths import Paths
from core.supervision.server import ManagedServer
from core.supervision.sign_in_store import entry_of
from tests.conftest import wait_ready, wait_state
from tests.support.fake_keyring import FileKeyring
from tests.support.gateway_support import REPO, Services, bridge_env, http_client, text
from tests.support.remote_server import Remote

pytestmark = [
    pytest.mark.skipif(
        sys.platform == "win32", reason="the remote is handed its listening socket as an fd"
    ),
    pytest.mark.timeout(120),
]


@pytest.fixture
def guarded() -> Iterator[Remote]:
    server = Remote(oauth=True)
    server.start()
    yield server
    server.stop()


async def tray_on(services: Services, remote: Remote) -> TrayService:
    return await services.start({"far": {"url": remote.url}})


async def login(paths: Paths, *args: str) -> tuple[int, str, str]:
    """``mcp-tray login far --no-browser``, its first line opened by a scripted browser
    that follows the redirects (the authorization server's, then back to the login)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "core.cli.main",
        "login",
        "far",
        "--no-browser",
        "--config",
        str(paths.config_file),
        *args,
        env=bridge_env(paths),
        cwd=str(REPO),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode().strip()
    if first.startswith("http"):
        async with httpx.AsyncClient(follow_redirects=True, timeout=30) as browser:
            landed = await browser.get(first)
        assert landed.status_code == 200 and "Signed in to far" in landed.text, landed.text
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, first, err.decode()


async def signed_in(services: Services, remote: Remote) -> tuple[TrayService, ManagedServer]:
    """A tray on ``remote``, seen to need a sign-in, then signed in by ``mcp-tray login``."""
    service = await tray_on(services, remote)
    far = service.supervisor.server("far")
    await wait_state(far, ServerState.NEEDS_SIGN_IN)
    code, _, err = await login(service.paths)
    assert code == 0, err
    await wait_ready(far)
    return service, far


def kept(keyring: FileKeyring) -> dict[str, Any]:
    text_ = keyring.get_password("mcp-tray", entry_of("far"))
    return json.loads(text_) if text_ else {}


def keep(keyring: FileKeyring, blob: dict[str, Any]) -> None:
    keyring.set_password("mcp-tray", entry_of("far"), json.dumps(blob))


async def counts(remote: Remote) -> dict[str, int]:
    async with httpx.AsyncClient() as http:
        found: dict[str, int] = (await http.get(f"{remote.base}/test/counts")).json()
        return found


async def test_signing_in_from_the_command_line_lets_calls_through_and_outlives_a_restart(
    fake_keyring: FileKeyring, services: Services, guarded: Remote
) -> None:
    service = await tray_on(services, guarded)
    far = service.supervisor.server("far")
    await wait_state(far, ServerState.NEEDS_SIGN_IN)
    async with http_client(service, "far") as session:
        began = time.perf_counter()
        refused = await session.call_tool("echo", {"text": "before"})
        assert refused.is_error and "mcp-tray login far" in text(refused), text(refused)
        assert time.perf_counter() - began < 1

        code, first, err = await login(service.paths)

        assert code == 0, err
        assert first.startswith(f"{guarded.base}/authorize?"), first  # the URL is line one
        assert "code_challenge_method=S256" in first and "state=" in first
        await wait_ready(far)  # the login had the tray respawn it
        assert text(await session.call_tool("echo", {"text": "signed in"})) == "signed in"

    blob = kept(fake_keyring)
    token = blob["tokens"]["access_token"]
    assert blob["tokens"]["refresh_token"] and blob["expires_at"] > time.time()
    status = json.dumps([s.to_json() for s in service.supervisor.snapshot().servers])
    logs = "".join(p.read_text(errors="replace") for p in service.paths.log_dir.glob("*.log"))
    assert token not in status and token not in logs

    await service.aclose()
    again = await tray_on(services, guarded)
    await wait_ready(again.supervisor.server("far"))  # no person: the kept sign-in serves
    async with http_client(again, "far") as session:
        assert text(await session.call_tool("echo", {"text": "after a restart"})) == (
            "after a restart"
        )
    assert (await counts(guarded))["clients"] == 1  # registered once, not at every start


async def test_an_expired_token_is_refreshed_without_the_person(
    fake_keyring: FileKeyring, services: Services, guarded: Remote
) -> None:
    service, far = await signed_in(services, guarded)
    before = kept(fake_keyring)
    # As if its hour were over (the clock is the keyring's record, not a sleep).
    keep(fake_keyring, {**before, "expires_at": time.time() - 60})

    generation = far.generation
    await service.supervisor.respawn("far")
    await wait_ready(far, generation=generation + 1)
    async with http_client(service, "far") as session:
        assert text(await session.call_tool("echo", {"text": "fresh"})) == "fresh"

    after = kept(fake_keyring)
    assert (await counts(guarded))["refreshed"] == 1
    assert after["tokens"]["access_token"] != before["tokens"]["access_token"]
    assert after["expires_at"] > time.time()


async def test_a_revoked_sign_in_is_needs_sign_in_at_once_and_a_new_login_mends_it(
    fake_keyring: FileKeyring, services: Services, guarded: Remote
) -> None:
    service, far = await signed_in(services, guarded)
    alerts: list[str] = []
    service.supervisor.subscribe(
        lambda event: alerts.append(event.text or "") if event.alert is not None else None
    )
    async with httpx.AsyncClient() as http:
        await http.post(f"{guarded.base}/test/revoke-refresh")

    async with http_client(service, "far") as session:
        refused = await session.call_tool("echo", {"text": "revoked"})
        assert refused.is_error and "sign in" in text(refused).lower(), text(refused)
        await wait_state(far, ServerState.NEEDS_SIGN_IN)
        again = await session.call_tool("echo", {"text": "still revoked"})
        assert again.is_error and "mcp-tray login far" in text(again)
        assert any("needs sign-in" in alert for alert in alerts), alerts

        assert (await login(service.paths))[0] == 0
        await wait_ready(far)
        assert text(await session.call_tool("echo", {"text": "mended"})) == "mended"


async def test_logout_forgets_the_sign_in_and_the_server_needs_one_again(
    fake_keyring: FileKeyring, services: Services, guarded: Remote
) -> None:
    service, far = await signed_in(services, guarded)

    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "core.cli.main",
        "logout",
        "far",
        "--config",
        str(service.paths.config_file),
        env=bridge_env(service.paths),
        cwd=str(REPO),
    )
    assert await asyncio.wait_for(proc.wait(), 30) == 0

    assert kept(fake_keyring) == {}
    await wait_state(far, ServerState.NEEDS_SIGN_IN)


async def test_a_server_without_dynamic_registration_signs_in_with_the_client_it_gave(
    fake_keyring: FileKeyring, services: Services
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        redirect_port = probe.getsockname()[1]
    remote = Remote(oauth=True, given_client=f"given-id:given-secret:{redirect_port}")
    remote.start()
    try:
        fake_keyring.set_password("mcp-tray", "far-secret", "given-secret")
        oauth = {
            "client_id": "given-id",
            "client_secret": "${keyring:far-secret}",
            "scopes": ["read"],
            "redirect_port": redirect_port,
        }
        service = await services.start({"far": {"url": remote.url, "oauth": oauth}})
        far = service.supervisor.server("far")
        await wait_state(far, ServerState.NEEDS_SIGN_IN)

        code, first, err = await login(service.paths)

        assert code == 0, err
        assert "client_id=given-id" in first and "scope=read" in first, first
        await wait_ready(far)
        async with http_client(service, "far") as session:
            assert text(await session.call_tool("echo", {"text": "given"})) == "given"
        assert (await counts(remote))["clients"] == 1  # the one it was given: none registered
    finally:
        remote.stop()
