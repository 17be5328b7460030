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
and tests/test_hot_reload.py covers it). Every edit must be applied exactly
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
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from core.base.errors import ConfigError
from core.base.states import ServerState
from core.serving.config_watch import ConfigWatcher
from core.settings.config import TrayConfig, load_config
from core.settings.paths import Paths
from core.supervision.supervisor import Supervisor
from tests.conftest import (
    ECHO,
    FAST_TIMING,
    LoopThread,
    logged_tracebacks,
    python_server,
    wait_ready,
)

T = TypeVar("T")

#: Shared by both tests; each sets its own max_examples (the suite stays under ~30 s).
FUZZ: Final = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
#: A load of at most 1 MiB takes milliseconds; this only catches a stall.
LOAD_SECONDS: Final = 2.0
#: A command that exists nowhere, for the generated servers that are valid.
NOWHERE: Final = "/nonexistent/mcp-tray-fuzz/server"
#: What the echo entry is, in every generated document that has servers.
ECHO_ENTRY: Final = python_server(ECHO)

hostile_strings = st.sampled_from(
    [
        "\0",
        "a\0b",
        "\ud800",
        "x\udfff",
        "\ud83d",
        "",
        " ",
        "\n",
        "a=b",
        "=",
        "\u202e",
        "é",
        "${env:MCP_TRAY_FUZZ_UNSET}",
        "${keyring:}",
        "${keyring:x}",
        "${python}",
        "${configDir}",
        "${nope}",
        "${",
        "x" * 300,
    ]
)
texts = st.text(max_size=12) | hostile_strings
hostile_numbers = st.sampled_from(
    [
        float("nan"),
        float("inf"),
        float("-inf"),
        -1,
        0,
        4.9,
        5,
        86400.5,
        1e308,
        10**30,
        -(10**30),
        2**63,
        65536,
        1023,
    ]
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | texts
    | hostile_numbers
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
#: Anything at all where a setting goes.
hostile = hostile_strings | hostile_numbers | json_values
#: Hostile, but no object: where an object could be a valid config without echo.
no_object = scalars | st.lists(json_values, max_size=3)
server_names = (
    st.sampled_from(["notes", "a.b", "x-1", "web_2", "a\n", "", "a b", "../x", "-x", "x" * 65])
    | st.text(max_size=10)
).filter(lambda name: name != "echo")
env_names = st.sampled_from(["API_KEY", "PATH", "X", "", "A=B", "=", "A\0", "\udc00"]) | st.text(
    max_size=8
)
own_keys = {
    "args": st.lists(st.just("--flag") | texts, max_size=3) | hostile,
    "env": st.dictionaries(env_names, st.text(max_size=8) | hostile, max_size=3) | hostile,
    "cwd": st.just("/tmp") | hostile,
    "retry": st.sampled_from(["safe", "always", "never"]) | hostile,
    "keepalive_seconds": st.floats(5, 86400) | hostile,
    "sharing": st.sampled_from(["shared", "per-session", "per-workspace"]) | hostile,
    "protocol": st.sampled_from(["auto", "handshake", "2026-07-28"]) | hostile,
    "max_children": st.integers(1, 512) | hostile,
    "type": st.just("stdio") | hostile,
    "url": texts,
    "bogus": hostile,
}


@st.composite
def server_entries(draw: st.DrawFn) -> Any:
    """A server entry: usually nearly valid, never one that would start."""
    if draw(st.integers(0, 19)) == 0:
        return draw(hostile)
    entry: dict[str, Any] = {}
    if draw(st.integers(0, 9)) > 0:
        entry["command"] = draw(st.just(NOWHERE) | hostile)
    for key in draw(st.lists(st.sampled_from(sorted(own_keys)), max_size=4, unique=True)):
        entry[key] = draw(own_keys[key])
    # true, or something that is no bool and so refused: never started.
    entry["disabled"] = draw(st.just(True) | hostile.filter(lambda v: not isinstance(v, bool)))
    return entry


@st.composite
def documents(draw: st.DrawFn) -> bytes:
    """The bytes of a config file: a generated document, sometimes broken as a whole."""
    servers: Any = {"echo": ECHO_ENTRY}
    servers |= draw(st.dictionaries(server_names, server_entries(), max_size=3))
    doc: Any = {"mcpServers": servers if draw(st.integers(0, 19)) else draw(no_object)}
    if draw(st.booleans()):
        gateway = {
            "port": draw(st.integers(0, 65535) | hostile),
            "max_body_bytes": draw(st.integers(1024, 256 * 1024 * 1024) | hostile),
        }
        kept = draw(st.lists(st.sampled_from(sorted(gateway)), unique=True))
        doc["gateway"] = {key: gateway[key] for key in kept}
    if draw(st.integers(0, 4)) == 0:
        doc[draw(st.sampled_from(["$schema", "mcpServer", "extra"]) | texts)] = draw(hostile)
    if draw(st.integers(0, 9)) == 0:
        doc = draw(no_object)  # a root that is not an object
    text = json.dumps(doc, allow_nan=True, indent=draw(st.sampled_from([None, 2])))
    breakage = draw(
        st.sampled_from(
            ["none"] * 6 + ["deep", "digits", "duplicate", "cut", "bytes", "raw-surrogate"]
        )
    )
    if breakage == "deep":
        depth = draw(st.sampled_from([33, 500, 1000, 50_000]))
        nested = "[" * depth + "]" * depth
        text = text[:-1] + f', "$schema": {nested}}}' if text.endswith("}") else nested
    elif breakage == "digits":
        text = text.replace(": ", ": " + "9" * draw(st.sampled_from([400, 4301, 10_000])), 1)
    elif breakage == "duplicate" and text.endswith("}"):
        text = text[:-1] + ', "mcpServers": {}}'
    elif breakage == "cut":
        text = text[: draw(st.integers(0, len(text)))]
    elif breakage == "bytes":
        return draw(st.binary(max_size=200))
    elif breakage == "raw-surrogate":
        # Written as bytes (CESU-8), not as a \u escape: not UTF-8 at all.
        return json.dumps(doc, allow_nan=True, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return text.encode("utf-8")


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
def test_generated_edits_are_applied_or_refused_and_never_touch_the_running_child(
    tray: Tray, caplog: pytest.LogCaptureFixture, edits: list[bytes]
) -> None:
    caplog.set_level(logging.WARNING)
    caplog.clear()
    tray.edit(tray.base)  # each example starts from the same good config
    assert tray.error() is None

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
        echo = tray.supervisor.server("echo")
        assert echo.pid == tray.pid and echo.state is ServerState.READY
        assert logged_tracebacks(caplog) == []

    tray.edit(tray.base)  # a good edit after any of them still applies
    assert tray.error() is None
