"""Reinstalling the macOS LaunchAgent over a loaded one, against a launchd that races.

Strategy: a real ``launchctl`` executable (a small Python script written to
a folder put first on PATH) run by the real ``run_command``, with its state
in files: ``bootout`` returns at once but the label stays in launchd for a
few hundred milliseconds (``print`` still finds it), and a ``bootstrap`` in
that window fails as launchd's does, "Bootstrap failed: 5: Input/output
error", exit 5. Optionally launchd keeps answering 5 for a few bootstraps
after the label is gone. Real time, millisecond windows, bounded waits.
"""

import json
import os
import sys
import time
from pathlib import Path

import pytest

from core.cli import desktop_macos

DOMAIN = "gui/501"
SERVICE = f"{DOMAIN}/{desktop_macos.LABEL}"

FAKE_LAUNCHCTL = r"""
import json, os, sys, time
state_file = os.environ["FAKE_LAUNCHD_STATE"]
with open(state_file) as f:
    state = json.load(f)
verb, *rest = sys.argv[1:]
state["calls"].append([verb, *rest])
code = 0
now = time.monotonic()
leaving = state["leaving_until"] is not None and now < state["leaving_until"]
if verb == "print":
    code = 0 if state["loaded"] or leaving else 113
    if code:
        sys.stderr.write("Could not find service in domain for user gui: 501\n")
elif verb == "bootout":
    if state["loaded"]:
        state["loaded"] = None
        state["leaving_until"] = now + state["teardown_seconds"]
    else:
        code = 3
elif verb == "bootstrap":
    if leaving or state["loaded"] or state["stubborn"] > 0:
        state["stubborn"] = max(0, state["stubborn"] - 1) if not leaving else state["stubborn"]
        sys.stderr.write("Bootstrap failed: 5: Input/output error\n")
        code = 5
    else:
        state["loaded"] = rest[1]
with open(state_file, "w") as f:
    json.dump(state, f)
sys.exit(code)
"""


@pytest.fixture
def launchd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake launchd with the old agent loaded; returns its state file."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "launchctl"
    script.write_text(f"#!{sys.executable}\n{FAKE_LAUNCHCTL}")
    script.chmod(0o755)
    state = tmp_path / "launchd.json"
    state.write_text(
        json.dumps(
            {
                "loaded": "old.plist",
                "leaving_until": None,
                "teardown_seconds": 0.3,
                "stubborn": 0,
                "calls": [],
            }
        )
    )
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_LAUNCHD_STATE", str(state))
    return state


def read(state: Path) -> dict[str, object]:
    loaded: dict[str, object] = json.loads(state.read_text())
    return loaded


def verbs(state: Path) -> list[str]:
    calls = read(state)["calls"]
    assert isinstance(calls, list)
    return [call[0] for call in calls]


@pytest.mark.skipif(sys.platform == "win32", reason="the fake launchctl is a script with a #!")
def test_a_reinstall_waits_for_the_old_agent_to_leave_before_bootstrapping(
    launchd: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    started = time.monotonic()
    result = desktop_macos.install(autostart=True, environ={}, home=home, domain=lambda: DOMAIN)
    took = time.monotonic() - started

    assert read(launchd)["loaded"] == str(desktop_macos.agent_path(home))
    assert any("starts at login" in note for note in result.notes), result.notes
    calls = verbs(launchd)
    assert calls[:2] == ["print", "bootout"]
    # It asked until the label was gone, then bootstrapped once, into a settled launchd.
    assert calls[-1] == "bootstrap" and calls.count("bootstrap") == 1
    assert calls.count("print") >= 2
    assert took < desktop_macos.BOOTOUT_SETTLE_SECONDS


@pytest.mark.skipif(sys.platform == "win32", reason="the fake launchctl is a script with a #!")
def test_a_bootstrap_that_still_fails_with_5_after_the_label_left_is_retried(
    launchd: Path, tmp_path: Path
) -> None:
    state = read(launchd)
    state["stubborn"] = 2
    launchd.write_text(json.dumps(state))
    home = tmp_path / "home"
    result = desktop_macos.install(autostart=True, environ={}, home=home, domain=lambda: DOMAIN)
    assert read(launchd)["loaded"] == str(desktop_macos.agent_path(home))
    assert verbs(launchd).count("bootstrap") == 3
    assert any("starts at login" in note for note in result.notes)


@pytest.mark.skipif(sys.platform == "win32", reason="the fake launchctl is a script with a #!")
def test_a_launchd_that_never_lets_go_is_reported_after_bounded_tries(
    launchd: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = read(launchd)
    state["teardown_seconds"] = 3600.0
    launchd.write_text(json.dumps(state))
    monkeypatch.setattr(desktop_macos, "BOOTOUT_SETTLE_SECONDS", 0.2)
    home = tmp_path / "home"
    result = desktop_macos.install(autostart=True, environ={}, home=home, domain=lambda: DOMAIN)
    assert verbs(launchd).count("bootstrap") == desktop_macos.BOOTSTRAP_ATTEMPTS
    note = result.notes[-1]
    assert "Bootstrap failed: 5: Input/output error" in note
    assert "still unloading 0.2 s after bootout" in note
    assert note.endswith("it loads at the next login")
