"""A remote MCP server for tests (tests/servers/remote_http.py) in a process of its own, on a
loopback port that stays the test's across a stop and a start."""

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

SERVER = Path(__file__).parents[1] / "servers" / "remote_http.py"
#: The same tool behind OAuth, with its authorization server (tests/servers/remote_oauth.py).
OAUTH_SERVER = SERVER.with_name("remote_oauth.py")


class Remote:
    def __init__(
        self,
        api_key: str | None = None,
        *,
        sse: bool = False,
        oauth: bool = False,
        given_client: str | None = None,
    ) -> None:
        self.api_key = api_key
        #: ``ID:SECRET:REDIRECT_PORT``: a client registered beforehand (tests/servers/remote_oauth.py).
        self.given_client = given_client
        self.sse = sse
        self.oauth = oauth
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self.url = f"{self.base}/{'sse' if sse else 'mcp'}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        if self.sock.fileno() == -1:
            self.sock = socket.socket()
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.sock.bind(("127.0.0.1", self.port))
        # Bound before the server is up: a connection waits in the backlog meanwhile.
        self.sock.listen(16)
        self.sock.set_inheritable(True)
        fd = str(self.sock.fileno())
        if self.oauth:
            argv = [str(OAUTH_SERVER), fd, str(self.port)]
            argv += ["--client", self.given_client] if self.given_client else []
        else:
            argv = [str(SERVER), fd]
            argv += ["--key", self.api_key] if self.api_key is not None else []
            argv += ["--sse"] if self.sse else []
        self.proc = subprocess.Popen(
            [sys.executable, *argv],
            pass_fds=(self.sock.fileno(),),
        )

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
        self.sock.close()


@pytest.fixture
def remote() -> Iterator[Remote]:
    server = Remote()
    server.start()
    yield server
    server.stop()
