"""Environment and runtime diagnostics (core/registry/envdiag.py).

Strategy: the allow-list checks run on plain dicts; the constants test reads
core/base/envvars.py itself so a new variable cannot be read without being
allowed. Process scanning runs against real child interpreters started with
a chosen environment (psutil reads it from the OS); access denied is
simulated because the suite may run as root. The doctor runs end to end: a
real registry file, a real worker process, our own environment as a dict.
What the doctor prints and its exit code are tests/cli/test_cli.py's and
tests/base/test_severity.py's.
"""

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

import core.base.envvars as envvars
from core import __version__
from core.registry.envdiag import (
    ENV_SCAN_FAILED,
    SECRET_LITERAL,
    STALE_RUNTIME,
    UNSUPPORTED_ENV,
    Diagnostic,
    doctor,
    scan_process_envs,
    secret_literals,
    stale_runtime,
    unsupported_env,
)
from core.registry.identity import worker_identity
from core.registry.records import WorkerRecord
from core.registry.store import WorkerRegistry
from tests.support import paths
from tests.support.fakes import FakeWallClock

REPO = paths.REPO


def env_constants() -> dict[str, str]:
    return {
        name: value
        for name, value in vars(envvars).items()
        if name.endswith("_ENV") and isinstance(value, str)
    }


@pytest.fixture
def child_env_process() -> Iterator[subprocess.Popen[bytes]]:
    """A live process with typo'd and stale mcp-tray variables in its env."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "MCP_TRAY_CLIENT": "claude-code",
        "MCP_TRAY_CLIENT_SESION": "sess-typo",
        "MCP_TRAY_RUNTIME_VERSION": "0.0.1",
    }
    with subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE, env=env
    ) as proc:
        yield proc
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(10)


# --- the allow-list -------------------------------------------------------------


def test_the_allow_list_is_exactly_the_variables_mcp_tray_reads() -> None:
    assert set(envvars.RECOGNIZED_ENV_KEYS) == set(env_constants().values())


def test_every_variable_mcp_tray_reads_lives_in_its_own_namespace() -> None:
    assert all(v.startswith(envvars.ENV_PREFIX) for v in env_constants().values())


@pytest.mark.parametrize("key", sorted(envvars.RECOGNIZED_ENV_KEYS))
def test_each_recognised_key_is_accepted_on_its_own(key: str) -> None:
    assert unsupported_env({key: "1"}) == []


def test_the_client_identity_keys_together_raise_nothing() -> None:
    env = {
        envvars.CLIENT_NAME_ENV: "claude-code",
        envvars.CLIENT_INSTANCE_ENV: "inst-0001",
        envvars.CLIENT_SESSION_ENV: "sess-0001",
    }
    assert unsupported_env(env) == []


def test_an_unknown_key_is_still_refused_beside_recognised_ones() -> None:
    env = {envvars.CLIENT_NAME_ENV: "claude-code", "MCP_TRAY_TOTALLY_INVENTED": "1"}
    assert [d.subject for d in unsupported_env(env)] == ["MCP_TRAY_TOTALLY_INVENTED"]


def test_no_prefix_admits_a_longer_client_key() -> None:
    [found] = unsupported_env({"MCP_TRAY_CLIENT_SOMETHING_ELSE": "x"})
    assert found.subject == "MCP_TRAY_CLIENT_SOMETHING_ELSE"
    assert found.family == UNSUPPORTED_ENV


def test_a_typo_is_reported_on_one_line_with_a_did_you_mean_and_no_value() -> None:
    [found] = unsupported_env({"MCP_TRAY_CLIENT_SESION": "super-secret-value"})
    assert str(found) == (
        "unsupported-env: MCP_TRAY_CLIENT_SESION=… is not a variable mcp-tray reads "
        "(did you mean MCP_TRAY_CLIENT_SESSION?). "
        "Fix: rename it to MCP_TRAY_CLIENT_SESSION or unset it."
    )
    assert "super-secret-value" not in str(found)


def test_a_key_like_no_known_one_gets_no_suggestion() -> None:
    [found] = unsupported_env({"MCP_TRAY_TOTALLY_INVENTED": "1"})
    assert "did you mean" not in str(found)
    assert str(found).endswith("Fix: unset it.")


def test_keys_outside_the_namespace_are_not_policed() -> None:
    assert unsupported_env({"PATH": "/bin", "MCP_TRAYX": "1", "GITEA_MCP_CLIENT": "x"}) == []


def test_the_doctors_families_are_weighed_by_the_one_severity_rule() -> None:
    # Warnings: doctor exits 1 and the tray turns amber; a worker whose
    # environment could not be read is advice (nothing of mcp-tray's is wrong).
    assert Diagnostic(UNSUPPORTED_ENV, "k", "m.", "f.").hard
    assert Diagnostic(STALE_RUNTIME, "k", "m.", "f.").hard
    assert Diagnostic(SECRET_LITERAL, "k", "m.", "f.").hard
    assert not Diagnostic(ENV_SCAN_FAILED, "k", "m.", "f.").hard


# --- stale runtimes ------------------------------------------------------------------


def record(version: str | None, *, pid: int | None = 4242) -> WorkerRecord:
    now = FakeWallClock().now
    return WorkerRecord(
        worker_identity=worker_identity("claude-code", "sess-1", now),
        client_name="claude-code",
        client_instance=None,
        session_id="sess-1",
        generation_id=None,
        role="bridge",
        server="files",
        pid=pid,
        started_at=now,
        last_heartbeat_at=now,
        heartbeat_ttl_seconds=60.0,
        fencing_epoch=1,
        runtime_version=version,
        beats=0,
        fenced_at=None,
    )


def test_a_worker_registered_by_another_version_is_a_stale_runtime() -> None:
    [found] = stale_runtime([record("0.0.9")], "0.1.0")
    assert found.family == STALE_RUNTIME
    assert str(found).startswith("stale-runtime: worker claude-code:")
    assert "0.0.9 (registered)" in found.message
    assert found.fix == "restart Claude Code to reconnect."


def test_a_worker_whose_process_env_names_another_version_is_a_stale_runtime() -> None:
    [found] = stale_runtime(
        [record(None)], "0.1.0", process_envs={4242: {"MCP_TRAY_RUNTIME_VERSION": "0.0.7"}}
    )
    assert "0.0.7 (process environment)" in found.message


def test_a_worker_on_our_version_is_not_stale() -> None:
    envs = {4242: {"MCP_TRAY_RUNTIME_VERSION": "0.1.0"}}
    assert stale_runtime([record("0.1.0"), record(None)], "0.1.0", process_envs=envs) == []


# --- scanning processes --------------------------------------------------------------


def test_a_live_process_environment_is_read(child_env_process: subprocess.Popen[bytes]) -> None:
    scan = scan_process_envs([child_env_process.pid])
    assert scan.diagnostics == ()
    assert scan.envs[child_env_process.pid]["MCP_TRAY_CLIENT_SESION"] == "sess-typo"


def test_a_process_that_is_gone_is_reported_not_raised() -> None:
    with subprocess.Popen([sys.executable, "-c", "pass"]) as proc:
        proc.wait(10)
    scan = scan_process_envs([proc.pid])
    [found] = scan.diagnostics
    assert found.family == ENV_SCAN_FAILED
    assert found.subject == f"pid {proc.pid}"
    assert scan.envs == {}


def test_access_denied_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    class Guarded:
        def __init__(self, pid: int) -> None:
            self.pid = pid

        def environ(self) -> dict[str, str]:
            raise psutil.AccessDenied(self.pid)

    monkeypatch.setattr(psutil, "Process", Guarded)
    [found] = scan_process_envs([1, 1]).diagnostics
    assert "access denied" in found.message
    assert not found.hard


# --- secrets in server config ------------------------------------------------------------


def test_secret_looking_literals_suggest_the_keyring() -> None:
    servers = {
        "github": {
            "GITHUB_TOKEN": "ghp_literal",
            "API_KEY": "${keyring:github}",
            "LOG_LEVEL": "debug",
            "EMPTY_SECRET": "",
        },
        "db": {"db_password": "hunter2", "Client_Secret": "abc"},
    }
    found = secret_literals(servers)
    assert [d.subject for d in found] == [
        "db.env.Client_Secret",
        "db.env.db_password",
        "github.env.GITHUB_TOKEN",
    ]
    assert all(d.family == SECRET_LITERAL and d.hard for d in found)
    assert "${keyring:github.GITHUB_TOKEN}" in found[2].fix
    assert all("hunter2" not in str(d) for d in found)


# --- the doctor --------------------------------------------------------------------------


def register_bridge(
    registry: WorkerRegistry, identity: str, session: str, pid: int, **fields: Any
) -> None:
    """A bridge worker row; its client is the part of ``identity`` before the colon."""
    registry.register(
        worker_identity=identity,
        client_name=identity.split(":")[0],
        session_id=session,
        role="bridge",
        pid=pid,
        **fields,
    )


def test_both_warning_families_reach_the_doctor_on_one_line_each(
    tmp_path: Path, child_env_process: subprocess.Popen[bytes]
) -> None:
    own_env = {"PATH": "/bin", "MCP_TRAY_HOMME": "/tmp/x", envvars.HOME_ENV: "/tmp/y"}
    with WorkerRegistry(tmp_path / "registry.sqlite") as registry:
        register_bridge(registry, "claude-code:child", "sess-child", child_env_process.pid)
        found = doctor(own_env, registry, __version__)
    families = sorted({d.family for d in found})
    assert families == sorted((UNSUPPORTED_ENV, STALE_RUNTIME))
    subjects = {d.subject for d in found if d.family == UNSUPPORTED_ENV}
    assert subjects == {"MCP_TRAY_HOMME", "MCP_TRAY_CLIENT_SESION"}
    assert any(f"pid {child_env_process.pid}" in d.message for d in found)

    lines = [str(d) for d in found]
    assert len(lines) == 3
    assert all("\n" not in line and " Fix: " in line for line in lines)
    assert {line.split(" ", 1)[0] for line in lines} == {UNSUPPORTED_ENV, STALE_RUNTIME}
    assert all(d.hard for d in found)


def test_a_clean_environment_and_current_workers_make_the_doctor_exit_zero(
    tmp_path: Path,
) -> None:
    with WorkerRegistry(tmp_path / "registry.sqlite") as registry:
        register_bridge(registry, "zed:me", "s", os.getpid())
        found = doctor({envvars.HOME_ENV: "/tmp/y"}, registry, __version__)
    assert found == []


def test_an_expired_worker_is_neither_scanned_nor_reported_stale(tmp_path: Path) -> None:
    clock = FakeWallClock()
    with WorkerRegistry(tmp_path / "registry.sqlite", wall_clock=clock) as registry:
        register_bridge(
            registry,
            "codex:old",
            "s",
            os.getpid(),
            heartbeat_ttl_seconds=60,
            runtime_version="0.0.1",
        )
        assert [d.family for d in doctor({}, registry, __version__, clock.now)] == [STALE_RUNTIME]
        clock.advance(61)
        assert doctor({}, registry, __version__, clock.now) == []
