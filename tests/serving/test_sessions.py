"""SessionTable and ClientSession: the per-session breaker of docs/design.md §3.5.

Strategy: plain synchronous unit tests on a real SessionTable whose
``publish`` appends to a list, fed the real exceptions of
core.base.errors (the same objects the call path raises), so what counts,
what trips, what is refused and which events a subscriber sees are all
asserted directly. The tripped text is compared character for character
with docs/design.md §3.5. Nothing here waits or runs a loop.
"""

from pathlib import Path

import pytest

from core.base.errors import (
    BreakerOpen,
    CallError,
    CallTimedOut,
    ExitedAgain,
    ExitedMidCall,
    ProtocolError,
    ServerParked,
    ServerStopped,
    SessionTripped,
    SubprocessExited,
    UnknownSession,
    UpstreamError,
)
from core.base.snapshot import AlertKind, Event, EventKind
from core.serving.sessions.sessions import ClientSession, SessionTable
from core.supervision.breakers import SESSION_BREAKER_THRESHOLD

LOG = Path("/tmp/mcp-tray-test/echo.log")
#: docs/design.md §3.5, word for word, with <session> filled in.
TRIPPED_TEXT = (
    "⚠️ This session has failed 3 times in a row with a non-retryable error. "
    "Reset it from the mcp-tray window, or run: mcp-tray reset {session}"
)

COUNTED: dict[str, CallError] = {
    "exited": SubprocessExited("echo", 2, "killed by SIGKILL", 15.0, LOG),
    "exited-again": ExitedAgain("echo", 3, "exit code 1", LOG),
    "exited-mid-call": ExitedMidCall("echo", 2, "killed by SIGKILL", "not idempotent", LOG),
    "protocol": ProtocolError("echo", "stdout was not JSON-RPC"),
    "parked": ServerParked("echo", "it exited 6 times in a row right after starting"),
}
NOT_COUNTED: dict[str, CallError] = {
    "upstream": UpstreamError("echo", -32602, "unknown tool"),
    "timeout": CallTimedOut("echo", "tools/call", 30.0),
    "stopped": ServerStopped("echo"),
}


class Table:
    """A SessionTable whose events land in a list, and release calls counted."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.table = SessionTable(self.events.append)
        self.released: dict[str, int] = {}

    def open(self, session_id: str, server: str = "echo") -> ClientSession:
        self.released[session_id] = 0

        def release() -> None:
            self.released[session_id] += 1

        return self.table.open(ClientSession(session_id, server, "http", release=release))

    def fail(self, session: ClientSession, times: int, error: CallError | None = None) -> None:
        for _ in range(times):
            self.table.failed(session, error or COUNTED["exited"])


@pytest.fixture
def t() -> Table:
    return Table()


# ------------------------------------------------------------ counting


@pytest.mark.parametrize("kind", sorted(COUNTED))
def test_three_counted_failures_in_a_row_trip_the_session(t: Table, kind: str) -> None:
    session = t.open("s1")

    t.fail(session, SESSION_BREAKER_THRESHOLD - 1, COUNTED[kind])
    assert session.breaker.consecutive_failures == 2
    session.check()  # not tripped: still admitted

    t.fail(session, 1, COUNTED[kind])
    assert session.tripped
    assert session.last_error == str(COUNTED[kind])


def test_a_tripped_session_refuses_with_the_exact_reset_hint_of_the_design(t: Table) -> None:
    session = t.open("gw-7f3a")
    t.fail(session, 3)

    with pytest.raises(SessionTripped) as caught:
        session.check()

    assert str(caught.value) == TRIPPED_TEXT.format(session="gw-7f3a")
    assert caught.value.session_id == "gw-7f3a"
    assert caught.value.server == "echo"


@pytest.mark.parametrize("kind", sorted(NOT_COUNTED))
def test_failures_that_say_nothing_about_the_transport_never_count(t: Table, kind: str) -> None:
    session = t.open("s1")

    t.fail(session, 5, NOT_COUNTED[kind])

    assert session.breaker.consecutive_failures == 0
    assert not session.tripped
    # ...but they are requests, and the last error is remembered.
    assert session.requests == 5
    assert session.last_error == str(NOT_COUNTED[kind])


def test_fast_fails_of_an_open_server_breaker_do_not_count(t: Table) -> None:
    session = t.open("s1")
    fast_fail = BreakerOpen("echo", 3, "exited", retry_in=42.0)

    t.fail(session, 3, fast_fail)

    assert session.breaker.consecutive_failures == 0
    assert not session.tripped
    # Nor do they wipe a count a real failure started: they say nothing either way.
    t.fail(session, 2, COUNTED["exited"])
    t.fail(session, 4, fast_fail)
    assert session.breaker.consecutive_failures == 2
    t.fail(session, 1, COUNTED["exited"])
    assert session.tripped


def test_the_failure_that_opened_the_server_breaker_is_the_servers_not_the_sessions(
    t: Table,
) -> None:
    session = t.open("s1")
    t.fail(session, 2, COUNTED["exited"])
    opened = ExitedAgain("echo", 7, "killed by SIGKILL", LOG)
    opened.contained = True  # the call path sets it when the server breaker is not closed

    t.fail(session, 3, opened)

    assert session.breaker.consecutive_failures == 2
    assert not session.tripped
    assert session.last_error == str(opened)


def test_a_refused_request_of_a_tripped_session_is_a_request_but_not_another_failure(
    t: Table,
) -> None:
    session = t.open("s1")
    t.fail(session, 3)

    for _ in range(4):
        with pytest.raises(SessionTripped):
            session.check()
        t.table.refused(session)

    assert session.requests == 3 + 4
    assert session.breaker.consecutive_failures == 3
    with pytest.raises(SessionTripped, match="failed 3 times in a row"):
        session.check()


def test_a_success_resets_the_count_so_only_failures_in_a_row_trip(t: Table) -> None:
    session = t.open("s1")

    t.fail(session, 2)
    t.table.succeeded(session)
    assert session.breaker.consecutive_failures == 0
    t.fail(session, 2)

    assert not session.tripped
    assert session.requests == 5


def test_sessions_are_independent(t: Table) -> None:
    first = t.open("s1")
    second = t.open("s2")

    t.fail(first, 3)
    t.fail(second, 2)

    assert first.tripped
    assert not second.tripped
    second.check()
    assert t.released == {"s1": 1, "s2": 0}


# ------------------------------------------------------------ resetting


def test_reset_clears_a_tripped_session_and_its_last_error(t: Table) -> None:
    session = t.open("s1")
    t.fail(session, 3)

    assert t.table.reset("s1") is session

    assert not session.tripped
    assert session.breaker.consecutive_failures == 0
    assert session.last_error is None
    session.check()
    # A fresh count: it takes three new failures to trip again.
    t.fail(session, 2)
    assert not session.tripped


def test_reset_all_resets_the_tripped_sessions_only_and_names_them(t: Table) -> None:
    tripped_a, partial, tripped_b = t.open("a"), t.open("b"), t.open("c")
    t.fail(tripped_a, 3)
    t.fail(partial, 2)
    t.fail(tripped_b, 4)

    assert t.table.reset_all() == ["a", "c"]

    assert not tripped_a.tripped
    assert not tripped_b.tripped
    assert partial.breaker.consecutive_failures == 2
    assert t.table.reset_all() == []


# ------------------------------------------------------- release, close


def test_release_is_called_when_the_session_trips_and_again_when_it_closes(t: Table) -> None:
    session = t.open("s1")

    t.fail(session, 2)
    assert t.released["s1"] == 0
    t.fail(session, 1)
    assert t.released["s1"] == 1
    t.table.refused(session)
    assert t.released["s1"] == 1

    t.table.close("s1")

    assert t.released["s1"] == 2
    assert session.closed
    assert t.table.all() == []


def test_closing_a_session_that_never_failed_releases_it_and_closing_twice_is_harmless(
    t: Table,
) -> None:
    session = t.open("s1")

    t.table.close("s1")
    t.table.close("s1")
    t.table.close("never-opened")

    assert session.closed
    assert t.released == {"s1": 1}


def test_a_session_without_a_release_can_trip_and_close(t: Table) -> None:
    session = t.table.open(ClientSession("bare", "echo", "bridge"))

    t.fail(session, 3)
    t.table.close("bare")

    assert session.tripped
    assert session.closed


# --------------------------------------------------------------- events


def test_every_change_is_published_and_only_the_trip_carries_an_alert(t: Table) -> None:
    session = t.open("s1", server="files")
    t.table.identify(session, "Claude Desktop")
    t.fail(session, 1)
    t.table.succeeded(session)
    t.table.succeeded(session)  # nothing to recover from: no event
    t.fail(session, 3)
    t.table.refused(session)
    t.table.reset("s1")
    t.table.close("s1")

    sessions = EventKind.SESSIONS
    assert t.events == [
        Event(sessions, text="opened s1"),
        Event(sessions, text="identified s1"),
        Event(sessions, text="s1 failed"),
        Event(sessions, text="s1 recovered"),
        Event(sessions, text="s1 failed"),
        Event(sessions, text="s1 failed"),
        Event(sessions, "files", text="tripped s1", alert=AlertKind.TRIPPED),
        Event(sessions, text="s1 refused while tripped"),
        Event(sessions, "files", text="reset s1"),
        Event(sessions, text="closed s1"),
    ]


def test_identify_normalises_the_client_name(t: Table) -> None:
    session = t.open("s1")

    t.table.identify(session, "Claude Desktop")

    assert session.client_name == "claude-desktop"


def test_snapshots_and_json_show_the_breaker_as_it_is(t: Table) -> None:
    session = t.open("s1")
    t.fail(session, 3, COUNTED["protocol"])

    (snapshot,) = t.table.snapshots()
    (row,) = t.table.to_json()

    assert (snapshot.id, snapshot.server, snapshot.kind) == ("s1", "echo", "http")
    assert snapshot.tripped
    assert snapshot.consecutive_failures == 3
    assert snapshot.requests == 3
    assert snapshot.last_error == str(COUNTED["protocol"])
    assert row["breaker"] == "tripped"
    assert row["consecutive_failures"] == 3
    assert row["last_error"] == str(COUNTED["protocol"])


# ------------------------------------------------------ unknown sessions


def test_an_unknown_session_names_itself_and_the_sessions_that_are_open(t: Table) -> None:
    t.open("a")
    t.open("b")

    with pytest.raises(UnknownSession) as caught:
        t.table.get("nope")
    assert str(caught.value) == "no client session 'nope' (open: a, b)"
    assert caught.value.session_id == "nope"

    with pytest.raises(UnknownSession, match="no client session 'nope'"):
        t.table.reset("nope")


def test_an_unknown_session_with_nothing_open_says_so(t: Table) -> None:
    with pytest.raises(UnknownSession) as caught:
        t.table.get("nope")

    assert str(caught.value) == "no client session 'nope' (open: none are open)"
