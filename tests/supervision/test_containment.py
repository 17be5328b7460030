"""What a sandbox and limits mean before any child runs: the config's checks, the grants,
the Seatbelt profile, the status line and the CPU rule.

Strategy: pure functions fed real files (a home the test builds, a config
file), compared with what they must say; the macOS profile against a golden
text (it has not run on a Mac); the CPU rule on a FakeClock with the tree's
usage injected (the only way to make a real tree burn CPU for "a minute"
without waiting one). The enforcement itself is tests/test_sandbox.py's.
"""

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from core.base.errors import ConfigError
from core.platform import sandboxing, seatbelt
from core.platform.grants import Grants
from core.platform.sandboxing import Support
from core.settings.config import ServerConfig, load_config
from core.settings.config_model import LimitsConfig, SandboxConfig
from core.supervision.containment import Containment, home_reads, root_folders
from core.supervision.limits import LimitWatch, Usage, over_limit_text, size_text
from tests.support.fakes import FakeClock


def config_error(tmp_path: Path, server: dict[str, Any]) -> ConfigError:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"mcpServers": {"boxed": {"command": "x", **server}}}))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    return caught.value


@pytest.mark.parametrize(
    ("server", "key", "problem", "fix"),
    [
        ({"sandbox": {"writes": []}}, "sandbox.writes", "did you mean 'write'", "write, read"),
        ({"sandbox": {"network": "no"}}, "sandbox.network", "true or false", '"network": false'),
        ({"sandbox": {"read": "all"}}, "sandbox.read", 'or "system"', "${state}"),
        ({"sandbox": {"write": ["notes"]}}, "sandbox.write[0]", "not an absolute", "start it"),
        ({"sandbox": {"write": ["${home}/x"]}}, "sandbox.write[0]", "${home}", "${roots}"),
        ({"sandbox": {"write": ["${roots}"]}}, "sandbox.write[0]", "shared child", "per-workspace"),
        ({"sandbox": {"write": ["${roots}/src"]}}, "sandbox.write[0]", "whole entry", "own"),
        ({"limits": {"memory_mb": 1.5}}, "limits.memory_mb", "whole number", "1024"),
        ({"limits": {"cpu_percent": 0}}, "limits.cpu_percent", "above 0", "80"),
        ({"limits": {"memory": 1}}, "limits.memory", "did you mean 'memory_mb'", "memory_mb"),
    ],
)
def test_a_bad_sandbox_or_limit_is_refused_naming_the_file_key_and_fix(
    tmp_path: Path, server: dict[str, Any], key: str, problem: str, fix: str
) -> None:
    error = config_error(tmp_path, server)
    assert error.key is not None and error.key.endswith(key), error.key
    assert problem in str(error) and fix in (error.fix or "")
    assert str(tmp_path / "config.json") in str(error)


def test_a_sandbox_entry_loads_with_its_paths_kept_for_the_spawn(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    entry = {
        "command": "x",
        "sharing": "per-workspace",
        "sandbox": {"write": ["${roots}", "~/notes"], "network": False},
        "limits": {"memory_mb": 1024, "cpu_percent": 80},
    }
    path.write_text(json.dumps({"mcpServers": {"fs": entry}}))
    server = load_config(path).servers["fs"]
    assert server.sandbox == SandboxConfig(write=("${roots}", "~/notes"), network=False)
    assert server.limits == LimitsConfig(memory_mb=1024, cpu_percent=80.0)


def test_the_home_is_granted_entry_by_entry_without_its_secret_stores(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for folder in (".ssh", "code", ".config/gcloud", ".config/nvim"):
        (home / folder).mkdir(parents=True)
    (home / ".netrc").write_text("machine x password y")
    (home / "todo.txt").write_text("")
    denied = [home / store for store in sandboxing.SECRET_STORES]

    reads, listing = home_reads(home, denied)

    assert sorted(reads) == sorted(str(home / p) for p in ("code", ".config/nvim", "todo.txt"))
    assert listing == [str(home), str(home / ".config")]


def test_roots_become_folders_and_only_file_uris_count() -> None:
    roots = [{"uri": "file:///work/my%20project"}, {"uri": "https://example.com/x"}, {}]
    assert root_folders(roots) == ["/work/my project"]


@pytest.mark.parametrize(
    ("support", "sandbox", "text"),
    [
        (Support("landlock", 7), SandboxConfig(write=("~/a",), network=False),
         "landlock ABI 7 — write 2 folders, network off"),
        (Support("landlock", 7), SandboxConfig(), "landlock ABI 7 — write 1 folder, network on"),
        (Support("landlock", 3), SandboxConfig(network=False),
         'not enforced (Landlock ABI 3 has no TCP rules ("network": false needs ABI 4'),
        (Support("none", missing="sandboxes are not enforced on win32 yet"), SandboxConfig(),
         "not enforced (sandboxes are not enforced on win32 yet)"),
        (Support("seatbelt"), SandboxConfig(), "seatbelt — write 1 folder, network on"),
    ],
)  # fmt: skip
def test_the_status_line_says_what_enforces_the_sandbox(
    tmp_path: Path, support: Support, sandbox: SandboxConfig, text: str
) -> None:
    containment = Containment(tmp_path, probe=lambda: support)
    described = containment.describe(ServerConfig("boxed", "x", sandbox=sandbox))
    assert described.startswith(text)
    assert containment.describe(ServerConfig("free", "x")) == "none"


def test_windows_reports_that_nothing_enforces_a_sandbox_there() -> None:
    support = sandboxing.probe("win32")
    assert support.kind == "none" and "win32" in support.missing


def test_an_old_kernel_is_reported_through_the_abi_seam() -> None:
    assert sandboxing.probe("linux", abi=lambda: 0).missing.startswith("this kernel offers no")
    assert sandboxing.probe("linux", abi=lambda: 7) == Support("landlock", 7)


GOLDEN_PROFILE = """(version 1)
(allow default)
(deny file-read* file-write*)
(allow file-read* (literal "/"))
(allow file-read* (subpath "/usr"))
(allow file-read* (subpath "/Users/me/My \\"Code\\""))
(allow file-read* file-write* (subpath "/Users/me/Library/mcp-tray/servers/fs"))
(allow file-read-metadata file-read-data (literal "/Users/me"))
(deny network-outbound (remote ip))
(deny network-bind (local ip))
"""


def test_the_seatbelt_profile_for_macos_matches_its_golden_text() -> None:
    grants = Grants(
        read=("/usr", '/Users/me/My "Code"'),
        write=("/Users/me/Library/mcp-tray/servers/fs",),
        listing=("/Users/me",),
        network=False,
    )
    assert seatbelt.profile(grants) == GOLDEN_PROFILE
    argv = sandboxing.launch_argv(Support("seatbelt"), grants, ["node", "x.js"])
    assert argv == ["/usr/bin/sandbox-exec", "-p", GOLDEN_PROFILE, "node", "x.js"]
    assert "network" not in seatbelt.profile(Grants((), (), (), network=True))


def test_sizes_read_as_a_person_would_say_them() -> None:
    assert size_text(1228.8) == "1.2 GiB"
    assert size_text(1024) == "1 GiB"
    assert size_text(300) == "300 MiB"


def test_a_use_just_over_its_limit_never_reads_as_the_limit() -> None:
    assert over_limit_text(1228.8, 1024) == "used 1.2 GiB, over its 1 GiB limit"
    assert over_limit_text(200.3, 200) == "used 200.3 MiB, over its 200 MiB limit"
    assert over_limit_text(1024.5, 1024) == "used 1024.5 MiB, over its 1 GiB limit"


async def test_a_tree_over_its_cpu_limit_for_a_minute_is_warned_once_and_keeps_running() -> None:
    clock = FakeClock()
    cpu = [0.0]
    warnings: list[str] = []

    def sample(pid: int) -> Usage:
        cpu[0] += 0.9 * 3  # 90 % of a core over each 3 s interval
        return Usage(rss_bytes=1, cpu_seconds=cpu[0])

    watch = LimitWatch(LimitsConfig(cpu_percent=50), clock, interval=3, sample=sample)
    task = asyncio.ensure_future(watch.watch(1, warnings.append))
    for _ in range(19):  # 57 s over the limit: not yet
        await asyncio.sleep(0.01)
        clock.advance(3)
        await asyncio.sleep(0.01)
    assert warnings == []
    for _ in range(10):
        clock.advance(3)
        await asyncio.sleep(0.01)
    assert len(warnings) == 1 and "90% CPU" in warnings[0] and "over its 50% limit" in warnings[0]
    assert not task.done()
    task.cancel()


def test_the_doctor_says_what_this_machine_can_enforce() -> None:
    from core.cli.doctor import _sandbox_note
    from core.platform import landlock

    note = _sandbox_note()
    abi = landlock.abi_version()
    expected = f"sandbox: landlock ABI {abi}: " if abi else "sandbox: none: this kernel offers no"
    assert note["family"] == "platform" and str(note["text"]).startswith(expected)
    assert "limits (memory, CPU): enforced by mcp-tray on every OS" in str(note["text"])
