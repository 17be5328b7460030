"""Where a remote server's sign-in is kept: the keyring entry ``oauth.NAME`` (JSON: tokens,
expiry, registration, the authorization server's metadata), or a 0600 file where no OS keyring
works, as the API token is. Plain JSON here: the MCP SDK's models (core.supervision.remote_auth)
are loaded only for a server that has a sign-in, so a tray without one never imports the SDK."""

import json
from pathlib import Path
from typing import Any

from core.base.errors import SecretStoreError
from core.platform.files import write_private
from core.settings.secrets import delete_secret, get_secret, set_secret


def entry_of(server: str) -> str:
    return f"oauth.{server}"


class KeptSignIn:
    """One server's kept sign-in. Every method blocks (the keyring does): call it off the loop."""

    def __init__(self, server: str, fallback: Path | None = None) -> None:
        self.server = server
        #: Where it is kept when no OS keyring works (0600, as the API token's file).
        self.fallback = fallback

    def read(self) -> dict[str, Any]:
        text = self._text()
        if not text:
            return {}
        try:
            blob = json.loads(text)
        except ValueError:
            return {}  # unreadable: as if never signed in, and the next sign-in replaces it
        return blob if isinstance(blob, dict) else {}

    def _text(self) -> str | None:
        try:
            found = get_secret(entry_of(self.server))
        except SecretStoreError:
            if self.fallback is None:
                raise
            found = None
        if found is None and self.fallback is not None:
            # Kept in the file while no keyring worked (one may work now).
            try:
                return self.fallback.read_text()
            except FileNotFoundError:
                return None
        return found

    def write(self, blob: dict[str, Any]) -> None:
        text = json.dumps(blob)
        try:
            set_secret(entry_of(self.server), text)
        except SecretStoreError:
            if self.fallback is None:
                raise
            write_private(self.fallback, text)
            return
        if self.fallback is not None:
            # The keyring holds it now: a file copy would only leak it.
            self.fallback.unlink(missing_ok=True)

    def forget(self) -> bool:
        had = False
        if self.fallback is not None and self.fallback.exists():
            self.fallback.unlink()
            had = True
        try:
            return delete_secret(entry_of(self.server)) or had
        except SecretStoreError:
            if self.fallback is None:
                raise
            return had

    def signed_in(self) -> bool:
        """Whether tokens are kept (False too where no keyring nor file can be read)."""
        try:
            return bool(self.read().get("tokens"))
        except SecretStoreError:
            return False
