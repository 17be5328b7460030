"""A remote's kept sign-in (core.supervision.remote_auth): what a restart reads back, and the
loopback callback's answers to what a browser (or anything else on this machine) sends it."""

import asyncio
import json
import stat
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import httpx2
import keyring
import keyring.backends.fail
import pytest

from core.base.errors import SecretStoreError, SignInRequired
from core.supervision.remote_auth import (
    EXPIRY_MARGIN_SECONDS,
    KeyringSignIn,
    LoopbackCallback,
    tray_provider,
)
from core.supervision.sign_in_store import entry_of
from tests.support.fake_keyring import FileKeyring

URL = "https://remote.example/mcp"


def keep(keyring: FileKeyring, expires_in: float) -> None:
    blob = {
        "tokens": {"access_token": "a", "token_type": "Bearer", "refresh_token": "r"},
        "expires_at": time.time() + expires_in,
        "client": {"client_id": "c", "redirect_uris": ["http://127.0.0.1:5/callback"]},
    }
    keyring.set_password("mcp-tray", entry_of("far"), json.dumps(blob))


@pytest.mark.parametrize(
    ("expires_in", "valid"), [(3600, True), (EXPIRY_MARGIN_SECONDS / 2, False)]
)
async def test_a_reloaded_token_knows_its_expiry_and_is_renewed_before_it(
    fake_keyring: FileKeyring, expires_in: float, valid: bool
) -> None:
    keep(fake_keyring, expires_in)
    provider = await tray_provider("far", URL)
    assert provider is not None

    await provider._initialize()

    # The SDK alone would take any reloaded token as valid until a 401.
    assert provider.context.is_token_valid() is valid
    assert provider.context.can_refresh_token()


async def test_no_sign_in_kept_means_no_provider_and_forget_removes_it(
    fake_keyring: FileKeyring,
) -> None:
    assert await tray_provider("far", URL) is None
    keep(fake_keyring, 3600)
    assert await KeyringSignIn("far").forget()
    assert await tray_provider("far", URL) is None


async def test_the_callback_takes_the_code_and_state_and_answers_anything_else_plainly() -> None:
    async with LoopbackCallback("far") as callback:
        async with httpx.AsyncClient() as browser:
            stray = await browser.get(f"http://127.0.0.1:{callback.port}/favicon.ico")
            empty = await browser.get(callback.redirect)
            came = await browser.get(callback.redirect, params={"code": "c1", "state": "s1"})
        result = await callback.wait(5)

    assert stray.status_code == 404 and empty.status_code == 400
    assert came.status_code == 200 and "Signed in to far" in came.text
    assert (result.code, result.state, result.iss) == ("c1", "s1", None)


async def test_a_refused_sign_in_and_a_browser_that_never_comes_back_are_said() -> None:
    async with LoopbackCallback("far") as callback:
        async with httpx.AsyncClient() as browser:
            await browser.get(
                callback.redirect,
                params={"error": "access_denied", "error_description": "<b>no</b>"},
            )
        with pytest.raises(SignInRequired, match="refused: <b>no</b>"):
            await callback.wait(5)
    async with LoopbackCallback("far") as callback:
        with pytest.raises(SignInRequired, match="did not come back"):
            await callback.wait(0.05)


async def test_a_client_that_sends_nothing_does_not_hold_the_callback() -> None:
    async with LoopbackCallback("far") as callback:
        _, writer = await asyncio.open_connection("127.0.0.1", callback.port)
        async with httpx.AsyncClient() as browser:
            came = await browser.get(callback.redirect, params={"code": "c", "state": "s"})
        writer.close()
        assert came.status_code == 200
        assert (await callback.wait(5)).code == "c"


@pytest.fixture
def no_keyring() -> Iterator[None]:
    previous = keyring.get_keyring()
    keyring.set_keyring(keyring.backends.fail.Keyring())  # type: ignore[no-untyped-call]
    try:
        yield
    finally:
        keyring.set_keyring(previous)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")
async def test_without_a_keyring_the_sign_in_is_kept_in_a_private_file(
    no_keyring: None, tmp_path: Path
) -> None:
    fallback = tmp_path / "sign-ins" / "far.json"
    storage = KeyringSignIn("far", fallback)
    await storage.save({"tokens": {"access_token": "a", "token_type": "Bearer"}})

    assert stat.S_IMODE(fallback.stat().st_mode) == 0o600
    assert (await storage.get_tokens()) is not None
    assert await tray_provider("far", URL, fallback) is not None
    assert await storage.forget() and not fallback.exists()
    # With no file to fall back on, an unusable keyring is said, not taken for "signed out".
    with pytest.raises(SecretStoreError):
        await KeyringSignIn("far").save({})


async def test_two_sessions_of_one_server_each_renew_from_the_newest_refresh_token(
    fake_keyring: FileKeyring,
) -> None:
    live = {"r"}  # what keep() stores
    issued = iter(range(1, 100))

    def handler(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/token":
            form = dict(x.split("=") for x in request.content.decode().split("&"))
            if form.get("refresh_token") not in live:
                return httpx2.Response(400, json={"error": "invalid_grant"})
            live.discard(form["refresh_token"])  # rotated: the old one is retired
            n = next(issued)
            live.add(f"r{n}")
            body = {"access_token": f"a{n}", "token_type": "Bearer", "refresh_token": f"r{n}"}
            return httpx2.Response(200, json={**body, "expires_in": 3600})
        if request.headers.get("authorization", "").startswith("Bearer a"):
            return httpx2.Response(200, json={"jsonrpc": "2.0", "id": 1, "result": {}})
        return httpx2.Response(401, headers={"www-authenticate": "Bearer"})

    keep(fake_keyring, -60)  # expired: the first request of each renews it
    first, second = await tray_provider("far", URL), await tray_provider("far", URL)
    assert first is not None and second is not None
    await first._initialize()
    await second._initialize()  # both hold r now
    transport = httpx2.MockTransport(handler)
    async with (
        httpx2.AsyncClient(auth=first, transport=transport) as one,
        httpx2.AsyncClient(auth=second, transport=transport) as two,
    ):
        assert (await one.post(URL, json={})).status_code == 200  # r -> r1
        assert (await two.post(URL, json={})).status_code == 200  # r1 -> r2, not r refused

    assert (
        json.loads(fake_keyring.get_password("mcp-tray", entry_of("far")) or "")["tokens"][
            "refresh_token"
        ]
        == "r2"
    )
