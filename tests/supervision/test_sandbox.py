"""Sandboxes enforced for real: Landlock on this kernel, real children, real tool calls.

Strategy: a supervisor runs tests/servers/contained.py (an MCPServer whose
tools write, read, connect, start a grandchild and allocate) under a
``"sandbox"`` entry, with the home pointed at a folder the test builds
(``Containment(home=...)``), and asks it through real tool calls what the
kernel let it do; the test then looks at the disk itself. The real
``@modelcontextprotocol/server-filesystem`` is installed with npm into a
folder of the test session's own. The only thing simulated is the seam
that reports the kernel's Landlock ABI (an old or missing Landlock).
"""

import asyncio
import json
import shutil
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from core.base.snapshot import AlertKind, Event
from core.base.states import ServerState
from core.platform import landlock, sandboxing
from core.serving.calls.placement import Placement
from core.serving.calls.roots import roots_source
from core.settings.config import load_config
from core.settings.paths import Paths
from core.supervision.containment import Containment
from core.supervision.run import Timing
from core.supervision.server import ManagedServer
from core.supervision.supervisor import Supervisor
from tests.conftest import FAST_TIMING, SERVERS, wait_ready, wait_state, wait_until

CONTAINED = SERVERS / "contained.py"

pytestmark = pytest.mark.skipif(
    landlock.abi_version() < landlock.NETWORK_ABI,
    reason="needs a Linux kernel with Landlock ABI 4 or later (this suite enforces for real)",
)

Make = Callable[..., Awaitable[Supervisor]]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home with a secret store and ordinary files."""
    home = tmp_path / "user"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY")
    (home / "notes").mkdir()
    (home / "notes" / "todo.txt").write_text("buy milk")
    (home / ".config" / "gcloud").mkdir(parents=True)
    (home / ".config" / "gcloud" / "credentials.db").write_text("TOKEN")
    (home / ".config" / "editor.toml").write_text("theme = 'dark'")
    return home


@pytest.fixture
async def make(tray_home: Paths, home: Path) -> AsyncIterator[Make]:
    made: list[Supervisor] = []

    async def start(
        servers: dict[str, dict[str, Any]],
        *,
        abi: Callable[[], int] = landlock.abi_version,
        timing: Timing = FAST_TIMING,
    ) -> Supervisor:
        path = tray_home.config_file
        path.write_text(json.dumps({"mcpServers": servers}))
        containment = Containment(
            tray_home.state_dir / "servers", probe=lambda: sandboxing.probe(abi=abi), home=home
        )
        supervisor = Supervisor(
            load_config(path), tray_home, timing=timing, containment=containment
        )
        made.append(supervisor)
        await supervisor.start(sweep=False)
        return supervisor

    yield start
    for supervisor in made:
        await supervisor.aclose()


def entry(sandbox: dict[str, Any] | None = None, **more: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"command": sys.executable, "args": [str(CONTAINED)], **more}
    if sandbox is not None:
        found["sandbox"] = sandbox
    return found


async def call(server: ManagedServer, tool: str, **arguments: Any) -> str:
    result = await server.call_tool(tool, arguments, timeout=30)
    return str(result["content"][0]["text"])


async def ready(supervisor: Supervisor, name: str) -> ManagedServer:
    server = supervisor.server(name)
    await wait_ready(server)
    return server


async def test_a_sandboxed_server_writes_only_inside_its_grant_and_its_neighbour_is_unaffected(
    make: Make, tmp_path: Path
) -> None:
    inside, outside = tmp_path / "granted", tmp_path / "elsewhere"
    inside.mkdir()
    outside.mkdir()
    supervisor = await make({"boxed": entry({"write": [str(inside)]}), "free": entry()})
    boxed, free = await ready(supervisor, "boxed"), await ready(supervisor, "free")

    assert await call(boxed, "write", path=str(inside / "a.txt"), text="in") == "written"
    refused = await call(boxed, "write", path=str(outside / "b.txt"), text="out")
    assert refused.startswith("PermissionError: [Errno 13] Permission denied")
    assert (inside / "a.txt").read_text() == "in"
    assert not (outside / "b.txt").exists()
    # Its own state folder and temp folder stay writable; the temp folder is its own.
    temp = Path(await call(boxed, "temp_file"))
    assert temp.parent == supervisor.containment.state_dir("boxed") / "tmp"
    assert await asyncio.to_thread(temp.exists)

    # The launcher dropped core dumps before it became the server (same pid: it exec'd).
    limits = await asyncio.to_thread(Path(f"/proc/{boxed.pid}/limits").read_text)
    [core_line] = [line for line in limits.splitlines() if line.startswith("Max core file size")]
    assert core_line.split()[4:6] == ["0", "0"]
    assert CONTAINED.name in " ".join(psutil.Process(boxed.pid).cmdline())

    assert await call(free, "write", path=str(outside / "c.txt"), text="free") == "written"
    assert (outside / "c.txt").read_text() == "free"
    assert (
        boxed.snapshot().to_json()["sandbox"].startswith(f"landlock ABI {landlock.abi_version()}")
    )
    assert free.snapshot().to_json()["sandbox"] == "none"


async def test_read_system_opens_the_home_but_never_its_secret_stores(
    make: Make, home: Path
) -> None:
    supervisor = await make({"boxed": entry({"read": "system"})})
    boxed = await ready(supervisor, "boxed")

    assert await call(boxed, "read", path=str(home / "notes" / "todo.txt")) == "read: buy milk"
    assert await call(boxed, "read", path=str(home / ".config" / "editor.toml")) == (
        "read: theme = 'dark'"
    )
    for secret in (home / ".ssh" / "id_ed25519", home / ".config" / "gcloud" / "credentials.db"):
        denied = await call(boxed, "read", path=str(secret))
        assert denied.startswith("PermissionError: [Errno 13]"), (secret, denied)
    # Nor may it write in the home it reads.
    assert (await call(boxed, "write", path=str(home / "notes" / "x"), text="x")).startswith(
        "PermissionError"
    )


@pytest.fixture
def listener() -> Any:
    with socket.create_server(("127.0.0.1", 0)) as sock:
        yield sock.getsockname()[1]


async def test_network_false_refuses_tcp_and_network_true_connects(
    make: Make, listener: int
) -> None:
    supervisor = await make(
        {"offline": entry({"network": False}), "online": entry({"network": True})}
    )
    offline, online = await ready(supervisor, "offline"), await ready(supervisor, "online")

    assert (await call(offline, "connect", port=listener)).startswith("PermissionError: [Errno 13]")
    assert await call(online, "connect", port=listener) == "connected"
    assert "network off" in offline.snapshot().sandbox
    assert "network on" in online.snapshot().sandbox


async def test_a_grandchild_of_the_server_inherits_its_sandbox(make: Make, tmp_path: Path) -> None:
    inside, outside = tmp_path / "granted", tmp_path / "elsewhere"
    inside.mkdir()
    outside.mkdir()
    supervisor = await make({"boxed": entry({"write": [str(inside)]})})
    boxed = await ready(supervisor, "boxed")

    assert await call(boxed, "grandchild_write", path=str(inside / "g")) == "written"
    refused = await call(boxed, "grandchild_write", path=str(outside / "g"))
    assert refused.startswith("PermissionError: [Errno 13]")
    assert not (outside / "g").exists()


async def test_roots_on_a_per_workspace_entry_sandbox_each_projects_child_to_its_project(
    make: Make, tmp_path: Path
) -> None:
    projects = [tmp_path / "project-a", tmp_path / "project-b"]
    for project in projects:
        project.mkdir()
    supervisor = await make({"fs": entry({"write": ["${roots}"]}, sharing="per-workspace")})
    base = await ready(supervisor, "fs")
    tasks: set[asyncio.Future[Any]] = set()
    placement = Placement(supervisor, lambda coro: tasks.add(asyncio.ensure_future(coro)))
    children = []
    for index, project in enumerate(projects):
        roots = ({"uri": project.as_uri(), "name": project.name},)
        child = await placement.child(
            base,
            session=f"session-{index}",
            modern=True,
            askable=False,
            roots=[project.as_uri()],
            roots_source=roots_source(roots),
        )
        await wait_ready(child)
        children.append(child)

    a, b = children
    assert a is not b
    assert await call(a, "write", path=str(projects[0] / "mine"), text="a") == "written"
    assert (await call(a, "write", path=str(projects[1] / "theirs"), text="a")).startswith(
        "PermissionError"
    )
    assert await call(b, "write", path=str(projects[1] / "mine"), text="b") == "written"
    assert (await call(b, "write", path=str(projects[0] / "theirs"), text="b")).startswith(
        "PermissionError"
    )
    assert sorted(p.name for p in projects[0].iterdir()) == ["mine"]
    assert sorted(p.name for p in projects[1].iterdir()) == ["mine"]
    await asyncio.gather(*tasks)


@pytest.fixture(scope="session")
def filesystem_server(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real @modelcontextprotocol/server-filesystem, installed by npm for this test run."""
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip("npm and node are not installed: the real filesystem server cannot be fetched")
    prefix = tmp_path_factory.mktemp("npm")
    done = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix),
         "@modelcontextprotocol/server-filesystem"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    script = prefix / "node_modules" / "@modelcontextprotocol" / "server-filesystem" / "dist"
    if done.returncode != 0 or not (script / "index.js").exists():
        pytest.skip(f"npm could not install the filesystem server: {done.stderr[-300:]}")
    return script / "index.js"


async def test_the_real_filesystem_server_sandboxed_to_one_folder_cannot_write_its_other_one(
    make: Make, tmp_path: Path, filesystem_server: Path
) -> None:
    granted, other = tmp_path / "granted", tmp_path / "other"
    granted.mkdir()
    other.mkdir()
    node = shutil.which("node")
    assert node is not None
    # The server itself allows both folders; only the sandbox keeps it out of one.
    supervisor = await make(
        {
            "filesystem": {
                "command": node,
                "args": [str(filesystem_server), str(granted), str(other)],
                "sandbox": {"write": [str(granted)], "network": False},
            }
        }
    )
    server = await ready(supervisor, "filesystem")

    await server.call_tool("write_file", {"path": str(granted / "ok.txt"), "content": "yes"})
    refused = await server.call_tool("write_file", {"path": str(other / "no.txt"), "content": "no"})
    assert (granted / "ok.txt").read_text() == "yes"
    assert refused.get("isError") is True
    assert "EACCES" in refused["content"][0]["text"] or "denied" in refused["content"][0]["text"]
    assert not (other / "no.txt").exists()


@pytest.mark.parametrize(
    ("abi", "sandbox", "missing"),
    [
        (0, {"write": []}, "this kernel offers no Landlock"),
        (3, {"network": False}, 'Landlock ABI 3 has no TCP rules ("network": false needs ABI 4'),
    ],
)
async def test_a_missing_or_too_old_landlock_parks_the_server_with_what_is_missing(
    make: Make, abi: int, sandbox: dict[str, Any], missing: str
) -> None:
    supervisor = await make({"boxed": entry(sandbox), "free": entry()}, abi=lambda: abi)
    boxed = supervisor.server("boxed")
    await wait_state(boxed, ServerState.PARKED)

    assert boxed.parked_reason is not None
    assert missing in boxed.parked_reason and '"required": false' in boxed.parked_reason
    assert boxed.pid is None and boxed.generation == 1
    assert boxed.snapshot().sandbox.startswith(f"not enforced ({missing}")
    await ready(supervisor, "free")


async def test_a_sandbox_that_is_not_required_runs_unconfined_with_a_warning(
    make: Make, tmp_path: Path
) -> None:
    supervisor = await make({"boxed": entry({"write": [], "required": False})}, abi=lambda: 0)
    boxed = supervisor.server("boxed")
    await wait_until(
        lambda: boxed.log_path.exists() and "WITHOUT its sandbox" in boxed.log_path.read_text(),
        what="the warning in its log",
    )
    await wait_ready(boxed)

    assert await call(boxed, "write", path=str(tmp_path / "anywhere"), text="x") == "written"
    assert "this kernel offers no Landlock" in boxed.log_path.read_text()


async def test_a_child_over_its_memory_limit_is_replaced_with_the_reason(make: Make) -> None:
    events: list[Event] = []
    timing = Timing(**{**FAST_TIMING.__dict__, "limits_interval": 0.02})
    supervisor = await make({"hungry": entry(limits={"memory_mb": 200})}, timing=timing)
    supervisor.subscribe(events.append)
    hungry = await ready(supervisor, "hungry")
    first = hungry.pid

    assert (await call(hungry, "allocate", mib=300)).startswith("holding 300 MiB")
    await wait_ready(hungry, generation=2)

    assert hungry.pid != first
    error = hungry.last_error or ""
    assert "replaced by mcp-tray: it used " in error and "over its 200 MiB limit" in error
    used = error.split("it used ")[1].split(",")[0]
    assert used.endswith(("MiB", "GiB")) and used != "200 MiB"
    assert "over its 200 MiB limit" in hungry.log_path.read_text()
    assert any(
        e.alert is AlertKind.LIMIT and "over its 200 MiB limit" in (e.text or "") for e in events
    )
    # Once is the limit doing its job: it is not a crash for the rapid-restart budget.
    assert hungry.budget.unproven == 0
    assert await call(hungry, "allocate", mib=1) == "holding 1 MiB, pid " + str(hungry.pid)
    # Twice in a row is no longer the limit doing its job: it counts like a crash.
    await call(hungry, "allocate", mib=300)
    await wait_ready(hungry, generation=3)
    assert hungry.budget.unproven == 1


async def test_a_call_in_flight_when_the_limit_is_crossed_is_answered_before_the_child_goes(
    make: Make,
) -> None:
    timing = Timing(**{**FAST_TIMING.__dict__, "limits_interval": 0.02})
    supervisor = await make({"hungry": entry(limits={"memory_mb": 200})}, timing=timing)
    hungry = await ready(supervisor, "hungry")

    answer = await call(hungry, "allocate_then_wait", mib=300, seconds=1.0)

    assert answer == "answered after holding 300 MiB"
    await wait_ready(hungry, generation=2)
    assert "over its 200 MiB limit" in (hungry.last_error or "")
