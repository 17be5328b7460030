"""``mcp-tray login NAME`` and ``mcp-tray logout NAME``: a remote server's sign-in.

login prints the authorization URL as its first line (and opens it in the
browser unless ``--no-browser``), waits for the browser's redirect on a
loopback port of its own, keeps the sign-in in the keyring
(core.supervision.remote_auth) and has a running tray respawn the server, so
its calls go through at once; it exits 0 once signed in. logout forgets the
sign-in and has the tray respawn the server (which then needs a sign-in).
"""

import argparse
import asyncio
import json
import sys
import webbrowser
from pathlib import Path
from typing import Final

import httpx2

from core import __version__
from core.base.errors import CommandError, SignInRequired, SpawnError
from core.base.exitcodes import EXIT_OK
from core.cli.control_client import running_status
from core.cli.parser import check_server_name
from core.settings.config import ServerConfig, load_config
from core.settings.paths import Paths
from core.settings.secrets import resolve_env, resolve_refs
from core.supervision.remote_auth import (
    KeyringSignIn,
    LoopbackCallback,
    login_provider,
)

#: The handshake era the sign-in request speaks: any remote answers it.
SIGN_IN_VERSION: Final = "2025-06-18"


def cmd_login(args: argparse.Namespace, paths: Paths) -> int:
    config = _remote(args, paths)
    try:
        asyncio.run(
            _sign_in(config, args.no_browser, args.timeout, paths.sign_in_file(config.name))
        )
    except SignInRequired as exc:
        raise CommandError(f"not signed in to {config.name}: {exc}") from None
    except (httpx2.HTTPError, OSError) as exc:
        raise CommandError(f"not signed in to {config.name}: {type(exc).__name__}: {exc}") from None
    print(f"signed in to {config.name}", file=sys.stderr)
    _respawn(paths, config.name)
    return EXIT_OK


def cmd_logout(args: argparse.Namespace, paths: Paths) -> int:
    config = _remote(args, paths)
    forgot = asyncio.run(KeyringSignIn(config.name, paths.sign_in_file(config.name)).forget())
    print(
        f"forgot the sign-in to {config.name}" if forgot else f"not signed in to {config.name}",
        file=sys.stderr,
    )
    if forgot:
        _respawn(paths, config.name)
    return EXIT_OK


def _remote(args: argparse.Namespace, paths: Paths) -> ServerConfig:
    check_server_name(args.name)
    path = args.config or paths.config_file
    servers = load_config(path).servers
    config = servers.get(args.name)
    if config is None:
        listed = ", ".join(sorted(servers)) or "none"
        raise CommandError(f"no such server {args.name!r} in {path} (servers: {listed})")
    if config.remote is None:
        raise CommandError(
            f"server {args.name!r} is a local command, not a remote server: there is nothing "
            "to sign in to (its secrets go in the keyring: mcp-tray secret set NAME)"
        )
    return config


async def _sign_in(config: ServerConfig, no_browser: bool, timeout: float, fallback: Path) -> None:
    assert config.remote is not None
    remote = config.remote
    try:
        headers = await asyncio.to_thread(resolve_env, config)
    except SpawnError as exc:
        raise CommandError(f"cannot sign in to {config.name}: {exc.reason}") from None

    async def show(url: str) -> None:
        print(url, flush=True)  # the first line: what a script (or a person) opens
        print(
            f"open that address to sign in to {config.name}; waiting for the browser "
            f"(at most {timeout:g} s)",
            file=sys.stderr,
            flush=True,
        )
        if not no_browser:
            await asyncio.to_thread(webbrowser.open, url)

    given = remote.oauth
    secret = None
    if given is not None and given.client_secret is not None:
        try:
            secret = await asyncio.to_thread(
                resolve_refs, given.client_secret, "oauth client_secret"
            )
        except SpawnError as exc:
            raise CommandError(f"cannot sign in to {config.name}: {exc.reason}") from None
    port = given.redirect_port if given is not None and given.redirect_port else 0
    async with LoopbackCallback(config.name, port) as callback:
        provider = await login_provider(
            config.name, remote.url, callback, show, timeout, given, secret, fallback
        )
        limits = httpx2.Timeout(30, connect=10)
        async with httpx2.AsyncClient(auth=provider, timeout=limits) as http:
            if remote.transport == "sse":
                async with http.stream(
                    "GET", remote.url, headers={**headers, "accept": "text/event-stream"}
                ) as response:
                    _check(config.name, response)
                return
            answer = await http.post(
                remote.url,
                content=json.dumps(_initialize()),
                headers={
                    **headers,
                    "accept": "application/json, text/event-stream",
                    "content-type": "application/json",
                },
            )
            _check(config.name, answer)
            session = answer.headers.get("mcp-session-id")
            if session:
                # The session opened to prove the sign-in is not one anybody will use.
                await http.delete(remote.url, headers={**headers, "mcp-session-id": session})


def _check(name: str, response: httpx2.Response) -> None:
    if response.status_code >= 400:
        raise SignInRequired(
            f"{name} still answers HTTP {response.status_code} "
            f"{httpx2.codes.get_reason_phrase(response.status_code)} after the sign-in"
        )


def _initialize() -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": SIGN_IN_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "mcp-tray login", "version": __version__},
        },
    }


def _respawn(paths: Paths, name: str) -> None:
    running = running_status(paths)
    if running is None:
        print("mcp-tray is not running: the sign-in is used when it starts", file=sys.stderr)
        return
    client, _ = running
    reply = client.request("POST", f"/api/v1/servers/{name}/respawn")
    if not reply.ok:
        print(f"the running mcp-tray did not respawn {name}: {reply.error}", file=sys.stderr)
