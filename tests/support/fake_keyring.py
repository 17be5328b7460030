"""A keyring backend for tests: a JSON file, so several processes share it.

Selected in-process with ``keyring.set_keyring(FileKeyring(path))`` and in
subprocesses with ``PYTHON_KEYRING_BACKEND=tests.support.fake_keyring.FileKeyring``
plus ``MCP_TRAY_TEST_KEYRING=<file>``. The OS keyring is outside the machine
boundary of these tests, so this is the one thing they replace.
"""

import json
import os
from pathlib import Path

from keyring.backend import KeyringBackend
from keyring.compat import properties
from keyring.errors import PasswordDeleteError

PATH_ENV = "MCP_TRAY_TEST_KEYRING"


class FileKeyring(KeyringBackend):
    @properties.classproperty
    def priority(cls) -> float:
        # keyring probes every backend class it knows: only offer this one
        # where a test asked for it.
        if PATH_ENV not in os.environ:
            raise RuntimeError("the test keyring is not configured")
        return 1.0

    def __init__(self, path: Path | None = None) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.path = path or Path(os.environ.get(PATH_ENV, os.devnull))

    def _load(self) -> dict[str, str]:
        try:
            data: dict[str, str] = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        return data

    def get_password(self, service: str, username: str) -> str | None:
        return self._load().get(f"{service}/{username}")

    def set_password(self, service: str, username: str, password: str) -> None:
        data = self._load()
        data[f"{service}/{username}"] = password
        self.path.write_text(json.dumps(data))

    def delete_password(self, service: str, username: str) -> None:
        data = self._load()
        if data.pop(f"{service}/{username}", None) is None:
            raise PasswordDeleteError(username)
        self.path.write_text(json.dumps(data))
