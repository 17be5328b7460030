"""A remote MCP server behind OAuth 2.1 for tests: the SDK's streamable-HTTP server with the
SDK's own authorization server routes (metadata, dynamic registration, authorize with PKCE,
token, revoke) in the same process, as hosted MCP services often are.

``remote_oauth.py FD PORT [--ttl SECONDS] [--client ID:SECRET:REDIRECT_PORT]``:
serve on the listening socket FD (bound by the test to 127.0.0.1:PORT). With
``--client``, that client is registered beforehand (its redirect URI on
REDIRECT_PORT) and dynamic registration is off, as on servers that hand out
client ids by hand. Authorization is granted at once (the
person in a browser, scripted away): /authorize redirects straight back with
a code. Access tokens live ``--ttl`` seconds (a test's expiry); POST
/test/revoke-refresh forgets every refresh token (a revoked sign-in), POST
/test/expire-access every access token.
"""

import argparse
import secrets
import socket
import time

import uvicorn
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    IdentityAssertionParams,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyHttpUrl, AnyUrl
from starlette.requests import Request
from starlette.responses import JSONResponse, Response


class Provider:
    """An in-memory authorization server that says yes to everyone."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.refreshed = 0

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        code = secrets.token_urlsafe(16)
        assert client.client_id is not None
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [],
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        return self._issue(authorization_code.client_id, authorization_code.scopes)

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.refresh.pop(refresh_token.token, None)
        self.refreshed += 1
        return self._issue(refresh_token.client_id, scopes or refresh_token.scopes)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def exchange_identity_assertion(
        self, client: OAuthClientInformationFull, params: IdentityAssertionParams
    ) -> OAuthToken:
        raise TokenError("unsupported_grant_type", "no identity assertions here")

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    def _issue(self, client_id: str, scopes: list[str]) -> OAuthToken:
        access, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        expires = int(time.time() + self.ttl)
        self.access[access] = AccessToken(
            token=access, client_id=client_id, scopes=scopes, expires_at=expires
        )
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes)
        return OAuthToken(
            access_token=access,
            token_type="Bearer",
            expires_in=int(self.ttl),
            refresh_token=refresh,
            scope=" ".join(scopes) or None,
        )


def build(port: int, ttl: float, given: str | None) -> MCPServer:
    base = f"http://127.0.0.1:{port}"
    provider = Provider(ttl)
    if given is not None:
        client_id, secret, redirect_port = given.split(":")
        provider.clients[client_id] = OAuthClientInformationFull(
            client_id=client_id,
            client_secret=secret or None,
            redirect_uris=[AnyUrl(f"http://127.0.0.1:{redirect_port}/callback")],
            token_endpoint_auth_method="client_secret_post" if secret else "none",
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            scope="read write",
        )
    server = MCPServer(
        "remote-echo-oauth",
        auth_server_provider=provider,
        auth=AuthSettings(
            issuer_url=AnyHttpUrl(base),
            resource_server_url=AnyHttpUrl(f"{base}/mcp"),
            client_registration_options=ClientRegistrationOptions(
                enabled=given is None, valid_scopes=["read", "write"]
            ),
            revocation_options=RevocationOptions(enabled=True),
            validate_token_resource=False,
        ),
    )

    @server.tool()
    def echo(text: str) -> str:
        """Say it back."""
        return text

    async def revoke_refresh(request: Request) -> Response:
        provider.refresh.clear()
        provider.access.clear()
        return JSONResponse({"revoked": True})

    async def expire_access(request: Request) -> Response:
        provider.access.clear()
        return JSONResponse({"expired": True})

    async def counts(request: Request) -> Response:
        return JSONResponse({"refreshed": provider.refreshed, "clients": len(provider.clients)})

    server.custom_route("/test/revoke-refresh", methods=["POST"])(revoke_refresh)
    server.custom_route("/test/expire-access", methods=["POST"])(expire_access)
    server.custom_route("/test/counts", methods=["GET"])(counts)
    return server


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("fd", type=int)
    parser.add_argument("port", type=int)
    parser.add_argument("--ttl", type=float, default=3600)
    parser.add_argument("--client")
    args = parser.parse_args()
    app = build(args.port, args.ttl, args.client).streamable_http_app()
    sock = socket.socket(fileno=args.fd)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
