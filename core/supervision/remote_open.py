"""A remote server's session, opened for the run loop: the transport its entry names, and the
SDK's sign-in only where one is kept (a tray with no signed-in remote never imports the SDK,
nor, with no remote at all, any of this)."""

import asyncio
from collections.abc import Mapping
from pathlib import Path

from core.settings.config_model import RemoteConfig
from core.supervision.child import Child
from core.supervision.sign_in_store import KeptSignIn


async def open_remote(
    name: str, remote: RemoteConfig, headers: Mapping[str, str], sign_in_file: Path | None
) -> Child:
    from core.supervision.remote import RemoteChild
    from core.supervision.remote_sse import LegacySseChild

    auth = None
    if await asyncio.to_thread(KeptSignIn(name, sign_in_file).signed_in):
        from core.supervision.remote_auth import tray_provider

        auth = await tray_provider(name, remote.url, sign_in_file)
    kind = LegacySseChild if remote.transport == "sse" else RemoteChild
    return kind(remote.url, headers, auth=auth)
