"""Trays in the test's own process, one after another, on one home and its config file
(a restart as the user makes one: the same state folder, the same sessions file)."""

from core.serving.service import TrayService
from core.settings.config import load_config
from core.settings.paths import Paths
from tests.conftest import FAST_TIMING, wait_ready


class Trays:
    """Trays in this process, one after another, on one home and config."""

    def __init__(self, paths: Paths) -> None:
        self.paths = paths
        self.current: TrayService | None = None

    async def start(self) -> TrayService:
        assert self.current is None
        service = TrayService(load_config(self.paths.config_file), self.paths, timing=FAST_TIMING)
        await service.start()
        self.current = service
        for server in service.supervisor.servers.values():
            await wait_ready(server)
        return service

    async def stop(self) -> None:
        if self.current is not None:
            service, self.current = self.current, None
            await service.aclose()
