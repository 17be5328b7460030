"""The CLI's side of the local API: find the running instance, send one request.

Standard library only (http.client), so ``mcp-tray status`` starts fast.
Every way the request can fail ends as one ``McpTrayError`` (``NotRunning``
when nothing listens, ``CommandError`` otherwise), never a traceback.
"""

import http.client
import json
from dataclasses import dataclass
from typing import Any

from core.base.errors import EXIT_FAILED, CommandError, NotRunning
from core.settings.paths import Paths
from core.settings.runtime import RuntimeInfo, running_instance


@dataclass(frozen=True)
class Reply:
    status: int
    body: dict[str, Any]

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def error(self) -> str:
        return str(self.body.get("error", f"HTTP {self.status}"))


class ControlClient:
    def __init__(self, paths: Paths, info: RuntimeInfo, token: str, timeout: float = 30.0) -> None:
        self.paths = paths
        self.info = info
        self._token = token
        self.timeout = timeout

    @classmethod
    def connect(cls, paths: Paths, timeout: float = 30.0) -> "ControlClient":
        from core.settings.secrets import read_token

        info = running_instance(paths)
        token = read_token(paths.token_file)
        if token is None:
            raise NotRunning(paths.state_dir, "no API token found in the keyring or the token file")
        return cls(paths, info, token, timeout)

    def request(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        timeout: float | None = None,
    ) -> Reply:
        connection = http.client.HTTPConnection(
            "127.0.0.1", self.info.port, timeout=timeout or self.timeout
        )
        headers = {"Authorization": f"Bearer {self._token}", "Host": f"127.0.0.1:{self.info.port}"}
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        waited = timeout or self.timeout
        try:
            connection.request(method, path, body=payload, headers=headers)
            response = connection.getresponse()
            raw = response.read()
        except ConnectionRefusedError:
            raise NotRunning(
                self.paths.state_dir, f"nothing answers on port {self.info.port}"
            ) from None
        except TimeoutError:
            raise CommandError(
                f"mcp-tray (pid {self.info.pid}, port {self.info.port}) did not answer within "
                f"{waited:g} s; `mcp-tray status` shows whether it is busy",
                EXIT_FAILED,
            ) from None
        except (OSError, http.client.HTTPException) as exc:
            detail = str(exc) or type(exc).__name__
            raise CommandError(
                f"the connection to mcp-tray (pid {self.info.pid}, port {self.info.port}) "
                f"failed: {detail}; if it keeps failing, restart mcp-tray",
                EXIT_FAILED,
            ) from None
        finally:
            connection.close()
        try:
            data = json.loads(raw) if raw else {}
        except ValueError:
            data = {"error": raw.decode("utf-8", errors="replace")}
        return Reply(response.status, data if isinstance(data, dict) else {"value": data})
