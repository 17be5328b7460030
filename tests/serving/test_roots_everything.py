"""Roots by construction, on the real server that keeps them: no session sees another's.

Strategy: the official MCP server-everything (npm, a pinned version,
installed once per run under a test-owned folder with npm; skipped only
where npm is absent) keeps the roots it was last told and shows them with
its ``get-roots-list`` tool. A real tray (TrayService in-process) serves it
with nothing said about sharing, and real SDK clients with different roots
(``list_roots_callback``) use it at the same time and one after the other,
over the gateway (streamable HTTP, ``/mcp/NAME``) and through the real
``mcp-tray connect`` bridge as a subprocess. Each must see its own roots,
and only them. Then the same with an entry pinned ``"sharing": "shared"``:
each session's first call sees its own roots. And ``mcp-tray doctor`` against
a real headless tray whose shared servers asked for roots exits 0.
"""

import contextlib
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Final

import pytest
from mcp import ClientSession

from core.base.severity import ROOTS_PER_WORKSPACE, SHARED_ROOTS
from core.serving.service import TrayService
from tests.conftest import wait_ready, wait_until
from tests.support.cli_support import home_env, run_mcp_tray
from tests.support.gateway_support import Services, bridge_client, http_client, text
from tests.support.isolation_support import Seen, chatty

# Roots are deprecated at 2026-07-28 (the SDK warns); they are what is tested here.
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

#: The version the finding was reproduced on (pinned: its tool names and roots behaviour).
EVERYTHING: Final = "@modelcontextprotocol/server-everything@2026.8.31"
C, D = "file:///work/project-c", "file:///work/project-d"


@pytest.fixture(scope="session")
def everything_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``mcp-server-everything`` launcher, installed with npm under a test-owned folder."""
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip("npm and node are needed to install the real server-everything")
    folder = tmp_path_factory.mktemp("server-everything")
    subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--prefix", str(folder), EVERYTHING],
        check=True,
        capture_output=True,
        timeout=300,
    )
    launcher = folder / "node_modules" / ".bin" / "mcp-server-everything"
    assert launcher.exists(), f"npm installed no {launcher}"
    return launcher


def everything(launcher: Path, **entry: Any) -> dict[str, Any]:
    """Its config entry on stdio (``entry`` adds keys: sharing...)."""
    return {"command": str(launcher), "args": ["stdio"]} | entry


async def tray(services: Services, launcher: Path, **entry: Any) -> TrayService:
    """A tray serving it, once its own child has asked for roots at start (as it always does)."""
    service = await services.start({"everything": everything(launcher, **entry)})
    base = service.supervisor.server("everything")
    await wait_ready(base)
    await wait_until(lambda: base.asks_roots, what="server-everything's ask at start")
    return service


async def roots_seen(client: ClientSession) -> list[str]:
    """The root URIs server-everything holds for this client, by its own tool."""
    shown = text(await client.call_tool("get-roots-list", {}))
    return re.findall(r"URI: (\S+)", shown)


def gateway(service: TrayService, seen: Seen) -> contextlib.AbstractAsyncContextManager[Any]:
    return http_client(service, "everything", list_roots_callback=seen.list_roots)


def bridge(service: TrayService, seen: Seen) -> contextlib.AbstractAsyncContextManager[Any]:
    # Each its own client session, as two editor windows' bridges are.
    return bridge_client(
        service.paths,
        "everything",
        session_kwargs={"list_roots_callback": seen.list_roots},
        env={"MCP_TRAY_CLIENT_SESSION": f"window-{seen.name}"},
    )


OPENERS = {"gateway": gateway, "bridge": bridge}


@pytest.mark.parametrize("path", ["gateway", "bridge"])
async def test_two_clients_connected_together_each_see_only_their_own_roots(
    services: Services, everything_bin: Path, path: str
) -> None:
    service = await tray(services, everything_bin)
    c, d = Seen("C", roots=[C]), Seen("D", roots=[D])
    opened = OPENERS[path]
    async with opened(service, c) as client_c, opened(service, d) as client_d:
        seen_by_d = await roots_seen(client_d)
        seen_by_c = await roots_seen(client_c)
        # And again, in the other order: nothing either did moved the other's.
        again = (await roots_seen(client_c), await roots_seen(client_d))

    assert (seen_by_c, seen_by_d) == ([C], [D])
    assert again == ([C], [D])
    assert d.roots_asked >= 1 and c.roots_asked >= 1


@pytest.mark.parametrize("path", ["gateway", "bridge"])
async def test_two_clients_one_after_the_other_each_see_only_their_own_roots(
    services: Services, everything_bin: Path, path: str
) -> None:
    service = await tray(services, everything_bin)
    c, d = Seen("C", roots=[C]), Seen("D", roots=[D])
    opened = OPENERS[path]
    async with opened(service, c) as client_c:
        seen_by_c = await roots_seen(client_c)
    async with opened(service, d) as client_d:
        seen_by_d = await roots_seen(client_d)

    assert (seen_by_c, seen_by_d) == ([C], [D])
    # Handled, so not a warning: one child per roots set from the first ask on.
    (notice,) = [w for w in service.warnings_json() if w["subject"] == "everything"]
    assert notice["family"] == ROOTS_PER_WORKSPACE and notice["severity"] == "info"


@pytest.mark.parametrize("path", ["gateway", "bridge"])
async def test_a_pinned_shared_entry_gives_each_new_session_its_own_roots_on_its_first_call(
    services: Services, everything_bin: Path, path: str
) -> None:
    service = await tray(services, everything_bin, sharing="shared")
    c, d = Seen("C", roots=[C]), Seen("D", roots=[D])
    opened = OPENERS[path]
    async with opened(service, c) as client_c:
        first_of_c = await roots_seen(client_c)
        async with opened(service, d) as client_d:
            first_of_d = await roots_seen(client_d)
            # Still one child for everyone: that is what the pin asks for.
            assert len(service.supervisor.all_servers()) == 1
    async with opened(service, Seen("E", roots=[])) as client_e:
        first_of_e = await roots_seen(client_e)

    assert (first_of_c, first_of_d, first_of_e) == ([C], [D], [])
    (notice,) = [w for w in service.warnings_json() if w["subject"] == "everything"]
    assert notice["family"] == SHARED_ROOTS and notice["severity"] == "advice"


def test_doctor_exits_0_on_a_fresh_tray_whose_shared_servers_asked_for_roots(
    headless: Any, everything_bin: Path, tmp_path: Path
) -> None:
    # Like server-filesystem, it lists roots as soon as it is initialized.
    asks_at_start = chatty(tmp_path / "chatty.jsonl", CHATTY_ROOTS_AT_START="1")
    tray = headless(
        {
            "gateway": {"port": 0},
            "mcpServers": {"everything": everything(everything_bin), "chatty": asks_at_start},
        }
    )

    def asked() -> list[str]:
        info = tray.status().get("info", [])
        subjects = sorted(n["subject"] for n in info if n["family"] == ROOTS_PER_WORKSPACE)
        return subjects if subjects == ["chatty", "everything"] else []

    tray.wait_state("everything", "ready")
    tray.wait_for(asked, "both servers' ask for roots at start")
    env = {k: v for k, v in home_env(tray.home).items() if not k.startswith("MCP_TRAY_")}
    doctor = run_mcp_tray(env | {"MCP_TRAY_HOME": str(tray.home)}, "doctor")

    # What status and the window show is the mode in effect.
    sharing = {s["name"]: s["sharing"] for s in tray.status()["servers"]}
    assert sharing == {"everything": "per-workspace", "chatty": "per-workspace"}
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert doctor.stdout.splitlines()[0] == "no problems found"
    assert doctor.stdout.count(f"info: {ROOTS_PER_WORKSPACE}:") == 2
