"""The gateway's port: fixed by config, with a loud fallback when it is taken.

Strategy: a real TrayService in-process (no servers: only the binding
matters) whose configured port is held by a listening socket of the test;
it must start, listen on another port, publish that port in the runtime
file, say so in one log line and list a ``port-taken`` warning on every
surface that reads the service's warnings (snapshot, /api/v1/warnings).
The per-OS socket options are checked with the OS named, on a socket that
records them (Windows' exclusive use cannot be bound here).
"""

import errno
import json
import logging
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from core.platform.sockets import apply_listening_options
from core.serving import service as service_module
from core.serving.service import TrayService, bind_gateway
from core.settings.config import DEFAULT_GATEWAY_PORT, GatewaySettings, TrayConfig
from core.settings.paths import Paths
from core.settings.runtime import PORT_TAKEN_FAMILY, running_instance


@pytest.fixture
def occupied() -> Iterator[int]:
    """A loopback port some other program listens on (this test, here)."""
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    try:
        yield holder.getsockname()[1]
    finally:
        holder.close()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def service_on(paths: Paths, port: int) -> TrayService:
    config = TrayConfig(path=paths.config_file, servers={}, gateway=GatewaySettings(port=port))
    return TrayService(config, paths, watch_config=False)


def test_the_default_port_is_fixed_and_outside_the_ephemeral_range() -> None:
    assert GatewaySettings().port == DEFAULT_GATEWAY_PORT
    # Linux hands out 32768-60999 to outgoing connections; a default in there
    # could be taken by any client socket at random.
    assert 1024 < DEFAULT_GATEWAY_PORT < 32768


async def test_a_taken_port_falls_back_to_a_free_one_with_one_line_and_a_warning(
    tray_home: Paths, occupied: int, caplog: pytest.LogCaptureFixture
) -> None:
    service = service_on(tray_home, occupied)
    with caplog.at_level(logging.WARNING, logger="core.serving.service"):
        await service.start()
    try:
        assert service.info is not None
        port = service.info.port
        assert port not in (0, occupied)

        # The CLI and bridges find it on the fallback port.
        info = running_instance(tray_home)
        assert (info.port, info.configured_port, info.fell_back) == (port, occupied, True)

        # One line, no traceback, saying both ports, who holds it, and until when.
        lines = [r for r in caplog.records if "is taken" in r.getMessage()]
        assert len(lines) == 1
        line = lines[0].getMessage()
        assert "\n" not in line and lines[0].exc_info is None
        assert f"port {occupied} is taken (by pid {os.getpid()}" in line
        assert f"mcp-tray listens on {port} instead" in line
        assert f"clients configured for {occupied} will not reach it until" in line
        assert str(tray_home.config_file) in line  # where to change gateway.port

        # The Warnings tab (the snapshot) and /api/v1/warnings list it.
        families = {w.family for w in service.supervisor.snapshot().warnings}
        assert PORT_TAKEN_FAMILY in families
        headers = {"Authorization": f"Bearer {service.token}"}
        async with httpx.AsyncClient(base_url=service.url, headers=headers) as http:
            warnings = (await http.get("/api/v1/warnings")).json()["warnings"]
            status = (await http.get("/api/v1/status")).json()
        taken = [w for w in warnings if w["family"] == PORT_TAKEN_FAMILY]
        assert len(taken) == 1 and taken[0]["subject"] == "mcp-tray"
        assert taken[0]["text"] == f"{PORT_TAKEN_FAMILY}: {line.removeprefix('mcp-tray: ')}"
        assert status["gateway"]["port"] == port
        assert status["gateway"]["configured_port"] == occupied
        assert f"port {occupied} is taken" in status["gateway"]["fallback"]
    finally:
        await service.aclose()


async def test_a_free_configured_port_is_used_as_is_without_a_warning(tray_home: Paths) -> None:
    wanted = free_port()
    service = service_on(tray_home, wanted)
    await service.start()
    try:
        assert service.info is not None and service.info.port == wanted
        assert service.url == f"http://127.0.0.1:{wanted}"
        assert service.port_notice is None
        assert not any(w["family"] == PORT_TAKEN_FAMILY for w in service.warnings_json())
        published = json.loads(tray_home.runtime_file.read_text())
        assert (published["port"], published["configured_port"]) == (wanted, wanted)
    finally:
        await service.aclose()
    # Closed with the service: the next start may take it again.
    with socket.create_server(("127.0.0.1", wanted)):
        pass


def test_port_zero_means_any_free_port_and_is_never_a_fallback(tmp_path: Path) -> None:
    sock, notice = bind_gateway(0, tmp_path / "config.json")
    with sock:
        assert sock.getsockname()[0] == "127.0.0.1"
        assert sock.getsockname()[1] != 0
    assert notice is None


def test_a_port_that_needs_root_falls_back_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_bind = service_module._bind_loopback

    def bind(port: int) -> socket.socket:
        # What an unprivileged user gets for a port below 1024 (the tests may run as root).
        if port == 80:
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_bind(port)

    monkeypatch.setattr(service_module, "_bind_loopback", bind)
    sock, notice = bind_gateway(80, tmp_path / "config.json")
    with sock:
        assert notice is not None
        assert notice.startswith("port 80 cannot be used (ports below 1024 need root)")
        assert f"listens on {sock.getsockname()[1]} instead" in notice


class _RecordingSocket:
    """Only what the options touch: the setsockopt calls, in order."""

    def __init__(self) -> None:
        self.options: list[tuple[int, int, int]] = []

    def setsockopt(self, level: int, option: int, value: int) -> None:
        self.options.append((level, option, value))


def test_on_windows_the_gateway_asks_for_its_port_exclusively_and_never_for_reuse() -> None:
    # winsock2.h: SOL_SOCKET 0xffff, SO_REUSEADDR 4, SO_EXCLUSIVEADDRUSE ~SO_REUSEADDR.
    sock = _RecordingSocket()
    apply_listening_options(sock, "win32")
    assert sock.options == [(0xFFFF, ~4, 1)]
    assert not any(option == 4 for _, option, _ in sock.options)


@pytest.mark.parametrize("system", ["linux", "darwin"])
def test_on_posix_the_gateway_asks_for_reuse_which_never_beats_a_listener(system: str) -> None:
    sock = _RecordingSocket()
    apply_listening_options(sock, system)
    assert sock.options == [(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)]


def test_a_listener_that_itself_allows_reuse_still_makes_the_gateway_fall_back(
    tmp_path: Path,
) -> None:
    # The case SO_REUSEADDR must not open on POSIX: both sides ask for reuse.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        taken = holder.getsockname()[1]
        sock, notice = bind_gateway(taken, tmp_path / "config.json")
        with sock:
            assert sock.getsockname()[1] != taken
            assert notice is not None and notice.startswith(f"port {taken} is taken")
