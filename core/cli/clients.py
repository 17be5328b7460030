"""Snippets that point other AI clients at mcp-tray.

``client_snippet`` makes, in each client's own shape, either a stdio entry
that launches ``mcp-tray connect NAME`` (works with every client) or an HTTP
entry for the local gateway; core.cli.client_files renders it in the
client's file format (JSON, or TOML for Codex). The opposite direction,
a client's servers into mcp-tray's config, is core.cli.importer.
"""

from pathlib import Path
from typing import Any

from core.base.envvars import CLIENT_NAME_ENV, HOME_ENV
from core.base.errors import SnippetError
from core.cli import integrations
from core.cli.launcher import launcher_argv
from core.protocol.headers import IDENTITY_HEADER
from core.settings.profiles import client_entry_name


def client_snippet(
    client: str,
    names: list[str],
    *,
    http_url: str | None = None,
    token: str | None = None,
    home: str | None = None,
    config: Path | None = None,
) -> dict[str, Any]:
    """``client``'s config for ``names``: bridge entries, or HTTP ones at ``http_url``.

    A name is a server's, or a profile's (``@coding``, ``@all``): one entry
    then serves all of its servers (core.settings.profiles names it).

    ``home`` (an absolute ``MCP_TRAY_HOME``) goes into each bridge entry's
    env: the client launches the bridge without the environment this command
    ran in, and a bridge under another home finds no tray (or another one).
    An HTTP entry needs nothing of the kind: the URL names the tray.

    ``config`` (a config file other than the per-user one, the one the tray
    runs on) goes into each bridge entry's args (``--config FILE``): a tray
    the bridge has to start runs on that file, not on the per-user config.
    """
    spec = integrations.client(client)
    entries: dict[str, Any] = {}
    on = ["--config", str(config)] if config is not None else []
    for name in names:
        if http_url is None:
            launcher = launcher_argv()
            env = {CLIENT_NAME_ENV: spec.registered_as}
            if home is not None:
                env[HOME_ENV] = home
            entry: dict[str, Any] = {
                "command": launcher[0],
                "args": [*launcher[1:], "connect", name, *on],
                "env": env,
            }
            if spec.entry_types is not None:
                entry = {"type": spec.entry_types[0], **entry}
        else:
            if not spec.http:
                raise SnippetError(
                    f"{spec.label}'s config launches stdio servers only: use --bridge (the default)"
                )
            path = spec.http_path.format(name=name)
            # The identity header names the client in the tray's Sessions (core.serving.eras.identity).
            headers = {"Authorization": f"Bearer {token}", IDENTITY_HEADER: spec.registered_as}
            entry = {spec.url_key: http_url + path, spec.headers_key: headers}
            if spec.entry_types is not None:
                entry = {"type": spec.entry_types[1], **entry}
        entries[client_entry_name(name)] = entry
    return {spec.key: entries}
