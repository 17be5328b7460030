"""Generated config documents, hostile ones among them, at start and on hot reload.

Strategy: hypothesis builds JSON text from strategies that mix valid server
entries with hostile values (NUL, lone surrogates, NaN and infinities, huge
and negative numbers, wrong types, unknown keys, names no URL can hold, '='
in env names), then sometimes breaks the document as a whole (a root that
is no object, nesting thousands deep, an integer of thousands of digits, a
duplicate key, a cut-off file, raw bytes, text that is not UTF-8).

``load_config`` on a real file must return a config or raise ConfigError
(one printable line), nothing else, and quickly. Hot reload runs on a real
Supervisor with a real echo child, on an event loop of a background thread
so hypothesis drives it synchronously (it cannot drive async tests): each
generated edit is written to the file and reloaded through
``ConfigWatcher.reload`` (the watchdog trigger is left out: it is timing,
and tests/serving/test_hot_reload.py covers it). Every edit must be applied exactly
when ``load_config`` accepts it and refused with that same error otherwise;
the echo child keeps its pid throughout and nothing is logged with a
traceback. Generated servers are always ``"disabled": true`` (or invalid),
so no generated command ever runs.
"""

import json
import logging
import time
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, Final, TypeVar

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from core.base.errors import ConfigError
from core.base.states import ServerState
from core.serving.config_watch import ConfigWatcher
from core.settings.config import TrayConfig, load_config
from core.settings.paths import Paths
from core.supervision.supervisor import Supervisor
from tests.conftest import (
    FAST_TIMING,
    LoopThread,
    logged_tracebacks,
    wait_ready,
)
from tests.support.fuzz_config import ECHO_ENTRY, documents

T = TypeVar("T")

#: Shared by both tests; each sets its own max_examples (the suite stays under ~30 s).
FUZZ: Final = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
#: A load of at most 1 MiB takes milliseconds; this only catches a stall.
LOAD_SECONDS: Final = 2.0


def check_outcome(path: Path) -> TrayConfig | ConfigError:
    """``load_config``'s verdict on ``path``: a config, or the ConfigError (one line)."""
    began = time.perf_counter()
    try:
        outcome: TrayConfig | ConfigError = load_config(path)
    except ConfigError as exc:
        text = str(exc)
        assert text.startswith(str(path)), text
        assert text.isprintable(), text  # one line: no newline, NUL or raw surrogate
        assert "Fix: " in text, text
        outcome = exc
    assert time.perf_counter() - began < LOAD_SECONDS
    return outcome


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-config") / "config.json"


@pytest.mark.slow
@pytest.mark.timeout(120)
@settings(FUZZ, max_examples=800)
@given(content=documents())
def test_a_generated_document_loads_or_is_refused_with_one_config_error_and_nothing_else(
    scratch: Path, content: bytes
) -> None:
    scratch.write_bytes(content)
    outcome = check_outcome(scratch)
    event("refused" if isinstance(outcome, ConfigError) else "loaded")
    if isinstance(outcome, TrayConfig):
        assert all(server.disabled for name, server in outcome.servers.items() if name != "echo")


class Tray(LoopThread):
    """A Supervisor running echo, and its ConfigWatcher, on an event loop of their own thread."""

    def __init__(self, paths: Paths) -> None:
        self.path = paths.config_file
        self.base = json.dumps({"mcpServers": {"echo": ECHO_ENTRY}}).encode()
        self.path.write_bytes(self.base)
        super().__init__()
        self.supervisor = Supervisor(load_config(self.path), paths, timing=FAST_TIMING)
        self.run(self.supervisor.start(sweep=False))
        self.run(wait_ready(self.supervisor.server("echo")))
        self.pid = self.supervisor.server("echo").pid
        self.watcher = ConfigWatcher(self.supervisor, self.path)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30) -> T:
        return super().run(coro, timeout)

    def edit(self, content: bytes) -> None:
        self.path.write_bytes(content)
        self.run(self.watcher.reload())

    def restore(self) -> None:
        """Back to the good config, echo ready; its pid is the one edits must keep."""
        self.edit(self.base)
        echo = self.supervisor.server("echo")
        self.run(wait_ready(echo))
        self.pid = echo.pid

    def error(self) -> str | None:
        """The config error the supervisor shows now."""
        return self.supervisor.config_error

    def close(self) -> None:
        self.run(self.watcher.aclose())
        self.run(self.supervisor.aclose())
        self.stop()


@pytest.fixture
def tray(tray_home: Paths) -> Iterator[Tray]:
    holder = Tray(tray_home)
    yield holder
    holder.close()


@pytest.mark.slow
@pytest.mark.timeout(120)
@settings(FUZZ, max_examples=150)
@given(edits=st.lists(documents(), min_size=1, max_size=4))
# Found by hypothesis: valid bytes without echo, then an edit it must refuse.
@example(edits=[b'{"mcpServers":{}}', b'{"mcpServers": null}'])
def test_generated_edits_are_applied_or_refused_and_never_touch_the_running_child(
    tray: Tray, caplog: pytest.LogCaptureFixture, edits: list[bytes]
) -> None:
    caplog.set_level(logging.WARNING)
    caplog.clear()
    tray.restore()  # each example starts from the same good config
    assert tray.error() is None
    echo_entry = tray.supervisor.config.servers["echo"]

    for content in edits:
        applied_before = tray.watcher.reloads
        tray.edit(content)
        outcome = check_outcome(tray.watcher.path)
        event("refused" if isinstance(outcome, ConfigError) else "applied")
        if isinstance(outcome, ConfigError):
            assert tray.error() == str(outcome)
            assert tray.watcher.reloads == applied_before
        else:
            assert tray.error() is None
            assert tray.watcher.reloads == applied_before + 1
            assert tray.supervisor.config == outcome
            if outcome.servers.get("echo") != echo_entry:
                # Generated bytes can make a valid config that drops or changes echo
                # (hypothesis found {"mcpServers":{}}): applied, so echo may go; the
                # next example starts again from the good config.
                if "echo" not in outcome.servers:
                    assert "echo" not in tray.supervisor.servers
                break
        echo = tray.supervisor.server("echo")
        assert echo.pid == tray.pid and echo.state is ServerState.READY
        assert logged_tracebacks(caplog) == []

    tray.edit(tray.base)  # a good edit after any of them still applies
    assert tray.error() is None
