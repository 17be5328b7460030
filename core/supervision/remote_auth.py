"""Signing in to a remote server: OAuth 2.1 with PKCE through the SDK's own client auth.

``mcp.client.auth.OAuthClientProvider`` does the protocol (protected-resource
metadata from the 401's ``WWW-Authenticate``, authorization-server metadata,
dynamic registration, PKCE S256, the ``state`` and ``iss`` checks, refresh).
What is ours:

- **Where a sign-in lives**: the keyring entry ``oauth.NAME`` holds, as JSON,
  the tokens, when the access token expires, the registration and the
  authorization server's metadata. The SDK keeps none of the last three
  across a restart: a token reloaded with no known expiry would be sent
  until a 401, and the SDK answers a 401 with the whole browser sign-in
  again, not a refresh.
- **Who may ask a person**: the tray never does. Its provider
  (``tray_provider``) refreshes by itself, and where the SDK would open a
  browser it raises ``SignInRequired``: the server's state becomes
  ``needs-sign-in`` and the person is told. Only ``mcp-tray login``
  (core.cli.login) signs in, with the redirect received on a loopback port
  of its own (``LoopbackCallback``).
"""

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    OAuthToken,
)
from pydantic import AnyUrl

from core.base.errors import SecretStoreError, SignInRequired
from core.settings.config_model import OAuthClient
from core.supervision.sign_in_store import KeptSignIn

#: What a client registered by mcp-tray is called at the authorization server.
CLIENT_NAME: Final = "mcp-tray"
#: The redirect a tray's provider names when it has no registration of its own: it never
#: completes a sign-in, so no browser ever comes back to it.
NO_REDIRECT: Final = "http://127.0.0.1/callback"
CALLBACK_PATH: Final = "/callback"
#: Refresh this long before the access token would expire: a call on its way then
#: never carries a token that dies under it.
EXPIRY_MARGIN_SECONDS: Final = 30.0


class KeyringSignIn(TokenStorage):
    """One server's sign-in as the SDK stores it (core.supervision.sign_in_store keeps it)."""

    def __init__(
        self, server: str, fallback: Path | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        self.server = server
        self.kept = KeptSignIn(server, fallback)
        self.clock = clock
        #: The authorization server's metadata, once the provider knows it (kept with the
        #: tokens: a refresh after a restart must reach the same token endpoint).
        self.metadata: Callable[[], OAuthMetadata | None] = lambda: None

    async def load(self) -> dict[str, Any]:
        return await asyncio.to_thread(self.kept.read)

    async def save(self, blob: dict[str, Any]) -> None:
        await asyncio.to_thread(self.kept.write, blob)

    async def get_tokens(self) -> OAuthToken | None:
        tokens = (await self.load()).get("tokens")
        return OAuthToken.model_validate(tokens) if isinstance(tokens, dict) else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        blob = await self.load()
        blob["tokens"] = tokens.model_dump(mode="json", exclude_none=True)
        blob["expires_at"] = (
            self.clock() + tokens.expires_in if tokens.expires_in is not None else None
        )
        metadata = self.metadata()
        if metadata is not None:
            blob["metadata"] = metadata.model_dump(mode="json", exclude_none=True)
        await self.save(blob)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        info = (await self.load()).get("client")
        return OAuthClientInformationFull.model_validate(info) if isinstance(info, dict) else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        blob = await self.load()
        blob["client"] = client_info.model_dump(mode="json", exclude_none=True)
        await self.save(blob)

    async def forget(self) -> bool:
        return await asyncio.to_thread(self.kept.forget)


class KeptSignInProvider(OAuthClientProvider):
    """The SDK's provider, started from what ``KeyringSignIn`` kept: the expiry and the
    authorization server's metadata as well as the tokens."""

    def __init__(self, url: str, storage: KeyringSignIn, **kwargs: Any) -> None:
        super().__init__(url, storage=storage, **kwargs)
        self.store = storage
        storage.metadata = lambda: self.context.oauth_metadata

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        await super()._handle_token_response(response)
        self._renew_early()

    async def _handle_refresh_response(self, response: httpx2.Response) -> bool:
        renewed = await super()._handle_refresh_response(response)
        self._renew_early()
        return renewed

    async def _refresh_token(self) -> httpx2.Request:
        # Another session of this server may have renewed it meanwhile, and each renewal
        # retires the refresh token the others hold: renew from the newest one kept.
        newest = await self.store.get_tokens()
        if newest is not None and newest.refresh_token:
            self.context.current_tokens = newest
        return await super()._refresh_token()

    def _renew_early(self) -> None:
        if self.context.token_expiry_time is not None:
            self.context.token_expiry_time -= EXPIRY_MARGIN_SECONDS

    async def _initialize(self) -> None:
        await super()._initialize()
        blob = await self.store.load()
        expires_at = blob.get("expires_at")
        if isinstance(expires_at, int | float):
            self.context.token_expiry_time = expires_at - EXPIRY_MARGIN_SECONDS
        metadata = blob.get("metadata")
        if isinstance(metadata, dict) and self.context.oauth_metadata is None:
            self.context.oauth_metadata = OAuthMetadata.model_validate(metadata)


def client_metadata(redirect: str) -> OAuthClientMetadata:
    return OAuthClientMetadata.model_validate(
        {
            "client_name": CLIENT_NAME,
            "redirect_uris": [redirect],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }
    )


async def tray_provider(
    server: str, url: str, fallback: Path | None = None
) -> KeptSignInProvider | None:
    """The tray's provider for a remote that was signed in to (None: it never was, or no
    keyring can be read here, where a remote with an API key, or none, works all the same)."""
    storage = KeyringSignIn(server, fallback)
    try:
        blob = await storage.load()
    except SecretStoreError:
        return None
    if not blob.get("tokens"):
        return None
    client = blob.get("client") or {}
    redirects = client.get("redirect_uris") or [NO_REDIRECT]

    async def no_browser(authorization_url: str) -> None:
        raise SignInRequired(authorization_url)

    async def no_callback() -> AuthorizationCodeResult:
        raise SignInRequired("")

    return KeptSignInProvider(
        url,
        storage,
        client_metadata=client_metadata(str(redirects[0])),
        redirect_handler=no_browser,
        callback_handler=no_callback,
    )


class LoopbackCallback:
    """The redirect back from the browser, on a loopback port of our own: one GET with
    ``code`` and ``state`` (or ``error``), answered with a page the person can close."""

    def __init__(self, server: str, port: int = 0) -> None:
        self.server_name = server
        self.wanted_port = port
        self.result: asyncio.Future[AuthorizationCodeResult] = (
            asyncio.get_running_loop().create_future()
        )
        self._listener: asyncio.Server | None = None
        self.port = 0

    @property
    def redirect(self) -> str:
        return f"http://127.0.0.1:{self.port}{CALLBACK_PATH}"

    async def __aenter__(self) -> "LoopbackCallback":
        self._listener = await asyncio.start_server(self._answer, "127.0.0.1", self.wanted_port)
        self.port = self._listener.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._listener is not None:
            self._listener.close()
            await self._listener.wait_closed()

    async def wait(self, timeout: float) -> AuthorizationCodeResult:
        try:
            return await asyncio.wait_for(asyncio.shield(self.result), timeout)
        except TimeoutError:
            raise SignInRequired(
                f"the browser did not come back to {self.redirect} within {timeout:g} s"
            ) from None

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            writer.close()
            return
        method, _, rest = request.decode("latin-1").partition(" ")
        target = rest.partition(" ")[0]
        parts = urlsplit(target)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        if method != "GET" or parts.path != CALLBACK_PATH:
            self._reply(writer, 404, "Not the sign-in callback.")
        elif "error" in query:
            why = query.get("error_description") or query["error"]
            self._reply(writer, 400, f"The sign-in to {self.server_name} was refused: {why}")
            if not self.result.done():
                self.result.set_exception(SignInRequired(f"the sign-in was refused: {why}"))
        elif "code" not in query:
            self._reply(writer, 400, "No authorization code in this redirect.")
        else:
            self._reply(writer, 200, f"Signed in to {self.server_name}. You can close this tab.")
            if not self.result.done():
                self.result.set_result(
                    AuthorizationCodeResult(
                        code=query["code"], state=query.get("state"), iss=query.get("iss")
                    )
                )
        await writer.drain()
        writer.close()

    @staticmethod
    def _reply(writer: asyncio.StreamWriter, status: int, text: str) -> None:
        body = f"<!doctype html><title>mcp-tray</title><p>{_escape(text)}</p>".encode()
        head = (
            f"HTTP/1.1 {status} {'OK' if status == 200 else 'Error'}\r\n"
            "Content-Type: text/html; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n"
            "Cache-Control: no-store\r\n\r\n"
        )
        writer.write(head.encode() + body)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


async def login_provider(
    server: str,
    url: str,
    callback: LoopbackCallback,
    show: Callable[[str], Awaitable[None]],
    timeout: float,
    given: OAuthClient | None = None,
    secret: str | None = None,
    fallback: Path | None = None,
) -> KeptSignInProvider:
    """The provider ``mcp-tray login`` signs in with, the person shown the URL: the client
    ``given`` in the entry (``secret`` resolved), else a registration for this redirect (an
    older one that named another port is registered again)."""
    storage = KeyringSignIn(server, fallback)
    blob = await storage.load()
    client = blob.get("client") or {}
    if given is not None:
        blob["client"] = OAuthClientInformationFull(
            client_id=given.client_id,
            client_secret=secret,
            redirect_uris=[AnyUrl(callback.redirect)],
            token_endpoint_auth_method="client_secret_post" if secret else "none",
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
        ).model_dump(mode="json", exclude_none=True)
    elif callback.redirect not in (client.get("redirect_uris") or []):
        blob.pop("client", None)
    blob.pop("tokens", None)
    blob.pop("expires_at", None)
    await storage.save(blob)
    metadata = client_metadata(callback.redirect)
    if given is not None and given.scopes:
        metadata.scope = " ".join(given.scopes)
    return KeptSignInProvider(
        url,
        storage,
        client_metadata=metadata,
        redirect_handler=show,
        callback_handler=lambda: callback.wait(timeout),
    )
