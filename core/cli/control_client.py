"""The CLI's side of the local API: find the running instance, send one request.

Standard library only (http.client), so ``mcp-tray status`` starts fast.
Every way the request can fail ends as one ``McpTrayError`` (``NotRunning``
when nothing listens, ``CommandError`` otherwise), never a traceback.
"""

import http.client
import json
from dataclasses import dataclass
from typing import Any, Final

from core.base.errors import CommandError, McpTrayError, NotRunning
from core.base.exitcodes import EXIT_FAILED
from core.protocol.headers import CLI_USER_AGENT
from core.settings.paths import Paths
from core.settings.runtime import RuntimeInfo, running_instance

#: How long a command waits for the running tray's API to answer.
API_TIMEOUT_SECONDS: Final = 30.0
#: For what a command only adds when a tray runs (doctor's view of the tray,
#: the config ``client-config`` takes): it must not hang on a tray that does
#: not answer.
QUICK_TIMEOUT_SECONDS: Final = 5.0


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
    def __init__(
        self, paths: Paths, info: RuntimeInfo, token: str, timeout: float = API_TIMEOUT_SECONDS
    ) -> None:
        self.paths = paths
        self.info = info
        self._token = token
        self.timeout = timeout

    @classmethod
    def connect(cls, paths: Paths, timeout: float = API_TIMEOUT_SECONDS) -> "ControlClient":
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
        headers = {
            "Authorization": f"Bearer {self._token}",
            "Host": f"127.0.0.1:{self.info.port}",
            # The call journal tells `mcp-tray call` from other users of the API by it.
            "User-Agent": CLI_USER_AGENT,
        }
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

    def get(self, path: str) -> dict[str, Any]:
        """GET ``path``'s body; a refusal is the command's failure, in the API's words."""
        reply = self.request("GET", path)
        if not reply.ok:
            raise server_error(reply)
        return reply.body


def server_error(reply: Reply) -> CommandError:
    return CommandError(reply.error, EXIT_FAILED)


def running_status(paths: Paths) -> tuple[ControlClient, dict[str, Any]] | None:
    """The running tray's API and its ``/api/v1/status``, when it answers within
    ``QUICK_TIMEOUT_SECONDS``; None when none runs or it cannot say."""
    try:
        client = ControlClient.connect(paths, timeout=QUICK_TIMEOUT_SECONDS)
        reply = client.request("GET", "/api/v1/status")
    except McpTrayError:
        return None
    return (client, reply.body) if reply.ok else None
