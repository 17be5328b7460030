"""Secrets in the OS keyring: the API token and ``${keyring:NAME}`` env values.

Every keyring call blocks (D-Bus, a password prompt): callers on the event
loop go through ``asyncio.to_thread``. Where no usable keyring backend exists
(a headless box without a Secret Service), the API token falls back to a
0600 file, as many command-line tools keep theirs, and says so in a
``token-storage`` note: information, not a problem to fix. Env secrets
cannot fall back, so a server that needs one is parked with a reason that
names it.
"""

import contextlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import keyring
import keyring.errors

from core.base.errors import SecretStoreError, SpawnError
from core.base.severity import TOKEN_STORAGE
from core.settings.config import KEYRING_REF_RE, ServerConfig
from core.settings.runtime import load_or_create_file_token as _file_token
from core.settings.runtime import new_token

#: The keyring "service" every mcp-tray secret is filed under.
KEYRING_SERVICE: Final = "mcp-tray"
#: The keyring entry holding the local API bearer token.
TOKEN_ENTRY: Final = "api-token"
#: The family of the note that the API token is in a file: information
#: (core.base.severity), never a warning.
TOKEN_STORAGE_FAMILY: Final = TOKEN_STORAGE
_NAME_RE: Final = re.compile(r"[A-Za-z0-9._:@/-]{1,128}")


def check_name(name: str) -> str:
    # fullmatch: a pattern ending in $ would also take a trailing newline.
    if _NAME_RE.fullmatch(name) is None:
        raise SecretStoreError(
            f"{name!r} is not a usable secret name: use letters, digits and . _ : @ / - (at most 128)"
        )
    return name


def _backend_problem(exc: Exception) -> SecretStoreError:
    return SecretStoreError(
        f"the OS keyring is not usable ({type(exc).__name__}: {exc}); on Linux, run a Secret Service "
        "(GNOME Keyring or KWallet) in this session, or set PYTHON_KEYRING_BACKEND"
    )


def has_secret(name: str) -> bool:
    """Whether a secret ``name`` is stored; ``SecretStoreError`` when the
    keyring cannot be used (or the name cannot be), so a caller learns that
    before it asks the user for a value."""
    return get_secret(name) is not None


def get_secret(name: str) -> str | None:
    try:
        return keyring.get_password(KEYRING_SERVICE, check_name(name))
    except keyring.errors.KeyringError as exc:
        raise _backend_problem(exc) from None


def set_secret(name: str, value: str) -> None:
    try:
        keyring.set_password(KEYRING_SERVICE, check_name(name), value)
    except keyring.errors.KeyringError as exc:
        raise _backend_problem(exc) from None


def delete_secret(name: str) -> bool:
    """Remove a secret; False when there was none."""
    try:
        keyring.delete_password(KEYRING_SERVICE, check_name(name))
    except keyring.errors.PasswordDeleteError:
        return False
    except keyring.errors.KeyringError as exc:
        raise _backend_problem(exc) from None
    return True


def resolve_env(config: ServerConfig) -> dict[str, str]:
    """The server's env (a remote's headers) with every ``${keyring:NAME}`` replaced;
    never logged.

    A missing secret or an unusable keyring is a permanent start error: the
    server parks with a reason that names the secret and the fix.
    """
    resolved: dict[str, str] = {}
    what = "header" if config.remote is not None else "env"
    for key, value in config.secret_values.items():
        resolved[key] = resolve_refs(value, f"{what} {key}")
    return resolved


def resolve_refs(value: str, label: str) -> str:
    """``value`` with every ``${keyring:NAME}`` replaced; ``label`` names it in the error."""
    for name in KEYRING_REF_RE.findall(value):
        try:
            secret = get_secret(name)
        except SecretStoreError as exc:
            raise SpawnError(f"{label} needs secret {name!r}, but {exc}", permanent=True) from None
        if secret is None:
            raise SpawnError(
                f"{label} needs secret {name!r}, which is not in the keyring; "
                f"store it with: mcp-tray secret set {name}",
                permanent=True,
            )
        value = value.replace(f"${{keyring:{name}}}", secret)
    return value


@dataclass(frozen=True)
class Token:
    value: str
    #: Set when the keyring could not be used: the ``token-storage`` note
    #: (``"family: text"``), information rather than a problem.
    warning: str | None = None


def load_or_create_token(token_file: Path) -> Token:
    """The API token: from the keyring, else (with a warning) a 0600 file."""
    try:
        value = keyring.get_password(KEYRING_SERVICE, TOKEN_ENTRY)
        if not value:
            value = _existing_file_token(token_file) or new_token()
            keyring.set_password(KEYRING_SERVICE, TOKEN_ENTRY, value)
        # The keyring holds it now: a file copy would only leak it.
        with contextlib.suppress(FileNotFoundError):
            token_file.unlink()
        return Token(value)
    except keyring.errors.KeyringError as exc:
        value = _file_token(token_file)
        return Token(value, token_storage_note(token_file, type(exc).__name__))


def token_storage_note(token_file: Path, why: str | None = None) -> str:
    """The ``token-storage`` note: where the token is, and how to move it into a keyring."""
    reason = f" ({why})" if why else ""
    return (
        f"{TOKEN_STORAGE_FAMILY}: the API token is kept in {token_file} (mode 0600, readable "
        f"only by you) because no OS keyring is usable{reason}, as many command-line tools "
        "keep theirs. To keep it in a keyring instead, run a Secret Service (GNOME Keyring, "
        "KWallet) and restart mcp-tray."
    )


def read_token(token_file: Path) -> str | None:
    """The token for a client of the API (CLI, bridge): keyring first, then the file."""
    try:
        value = keyring.get_password(KEYRING_SERVICE, TOKEN_ENTRY)
        if value:
            return value
    except keyring.errors.KeyringError:
        pass
    return _existing_file_token(token_file)


def _existing_file_token(token_file: Path) -> str | None:
    try:
        return token_file.read_text().strip() or None
    except OSError:
        return None
