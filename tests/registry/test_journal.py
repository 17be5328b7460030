"""The call journal's records and file: redaction, the 4 KiB cut, retention, damage, config.

Strategy: the store and the record-maker are driven directly on real sqlite files in the
test's folder, with time given by hand (``now``) so retention never waits for a day to
pass; redaction of a keyring secret and of a ``token`` argument and the hot-reloaded
``"arguments": false`` run through a real tray (TrayService in-process, the real echo
server, a real SDK client over HTTP, a file-backed test keyring).
"""

import json
import sqlite3
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from core.base.errors import CallError, ConfigError
from core.registry.journal import (
    JOURNAL_DAMAGED_FAMILY,
    JOURNAL_FILE,
    CallQuery,
    JournalStore,
    JournalWriter,
    calls_query,
    read_calls,
)
from core.registry.journal_rows import (
    ARGUMENTS_BYTES,
    REDACTED,
    REDACTED_SECRET,
    CallRecord,
    Seen,
    complete,
    parse_since,
    result_summary,
)
from core.serving.observe.call_journal import CallJournal, Watch, keyring_values, outcome_of
from core.serving.sessions.sessions import ClientSession
from core.settings.config import load_config
from core.settings.config_model import JournalSettings
from core.settings.secrets import KEYRING_SERVICE
from tests.conftest import ECHO, python_server, wait_ready, wait_until
from tests.support.fake_keyring import FileKeyring
from tests.support.gateway_support import Services, http_client, text

NOW = 1_790_000_000.0
DAY = 86400.0


def seen(started: float = NOW, arguments: object = None, **fields: Any) -> Seen:
    values: dict[str, Any] = {
        "started": started,
        "duration_ms": 1.5,
        "client": "Claude Code",
        "client_name": "claude-code",
        "pid": 42,
        "identified_by": "bridge worker, handshake",
        "session": "s1",
        "door": "bridge /mcp/echo",
        "server": "echo",
        "generation": 1,
        "method": "tools/call",
        "tool": "echo",
        "arguments": arguments if arguments is not None else {"text": "hi"},
        "outcome": "ok",
        "refused_by": "",
        "error_code": None,
        "detail": "",
        "result": {"content": [{"type": "text", "text": "hi"}]},
    }
    values.update(fields)
    # The loop takes the result's summary (core.serving.observe.call_journal): as it does.
    values["result_size"], values["result_head"] = result_summary(values.pop("result"))
    return Seen(**values)


def writer_at(tmp_path: Path, **options: Any) -> JournalWriter:
    """A writer on a new journal in ``tmp_path`` that keeps arguments, knows no secrets and
    tells nobody, but for what ``options`` say."""
    store, _ = JournalStore.open(tmp_path / JOURNAL_FILE, NOW)
    quiet: dict[str, Any] = {
        "retention": JournalSettings,
        "secrets": frozenset,
        "on_written": lambda records: None,
        "on_warning": lambda text: None,
    }
    return JournalWriter(store, **(quiet | options))


def record(started: float = NOW, arguments: object = None, **fields: Any) -> CallRecord:
    return complete(seen(started, arguments, **fields), (), keep_arguments=True)


# ------------------------------------------------------------ the records


def test_a_token_argument_and_secret_looking_keys_are_redacted_at_any_depth() -> None:
    kept = complete(
        seen(arguments={"query": "x", "token": "t0k", "auth": {"Authorization": "Bearer y"}}),
        (),
        keep_arguments=True,
    )
    assert json.loads(kept.arguments or "") == {
        "query": "x",
        "token": REDACTED,
        "auth": {"Authorization": REDACTED},
    }


def test_a_keyring_secret_is_redacted_wherever_it_appears_in_arguments_result_and_error() -> None:
    secret = "s3cr3t-value-from-the-keyring"
    kept = complete(
        seen(
            arguments={"text": f"use {secret} now", "list": [secret]},
            result={"content": [{"type": "text", "text": f"echo {secret}"}]},
            detail=f"failed with {secret}",
        ),
        {secret},
        keep_arguments=True,
    )
    assert secret not in (kept.arguments or "") + kept.result_head + kept.detail
    assert json.loads(kept.arguments or "") == {
        "text": f"use {REDACTED_SECRET} now",
        "list": [REDACTED_SECRET],
    }
    assert kept.result_head == f"echo {REDACTED_SECRET}"


def test_the_keyring_values_of_a_servers_env_are_found_from_its_template() -> None:
    template = {"AUTH": "Bearer ${keyring:gh}", "PLAIN": "x", "TWO": "${keyring:a}:${keyring:b}"}
    resolved = {"AUTH": "Bearer ghp_123456", "PLAIN": "x", "TWO": "user:pass word"}
    assert keyring_values(template, resolved) == {"ghp_123456", "user", "pass word"}


def test_arguments_over_4_kib_are_cut_with_a_mark_saying_how_long_they_were() -> None:
    big = {"text": "é" * 5000}  # two bytes each: the cut never splits one
    kept = complete(seen(arguments=big), (), keep_arguments=True)
    assert kept.arguments is not None
    total = len(json.dumps(big, ensure_ascii=False).encode())
    assert kept.arguments.endswith(f"…[cut: {total} bytes in all]")
    body = kept.arguments[: kept.arguments.index("…[cut")]
    assert len(body.encode()) <= ARGUMENTS_BYTES
    assert len(body.encode()) >= ARGUMENTS_BYTES - 1
    assert kept.to_json()["arguments"] == kept.arguments  # not JSON any more: kept as text
    small = complete(seen(arguments={"text": "é" * 10}), (), keep_arguments=True)
    assert small.to_json()["arguments"] == {"text": "é" * 10}


def test_names_only_keeps_no_arguments_and_the_result_head_is_small() -> None:
    kept = complete(
        seen(result={"content": [{"type": "text", "text": "x" * 10_000}]}),
        (),
        keep_arguments=False,
    )
    assert kept.arguments is None
    assert kept.tool == "echo"
    assert kept.result_size == 10_000
    assert len(kept.result_head.encode()) < 1100


def test_since_takes_times_ago_and_iso_times_and_names_both_forms_when_wrong() -> None:
    assert parse_since("10m", NOW) == NOW - 600
    assert parse_since("90", NOW) == NOW - 90
    assert parse_since("2d", NOW) == NOW - 2 * DAY
    assert parse_since("2026-12-02T06:00:00Z", NOW) == 1796191200.0
    with pytest.raises(ValueError, match=r"neither a time ago \(90, 10m, 2h, 3d\)"):
        parse_since("yesterday", NOW)
    with pytest.raises(ValueError, match="unknown parameter 'colour'"):
        calls_query({"colour": "red"}, NOW)


# ------------------------------------------------------------ the file


def write(store: JournalStore, records: list[CallRecord]) -> list[CallRecord]:
    """Number the records as the writer does, and write them."""
    first = store.next_seq()
    return store.write([r._replace(seq=seq) for seq, r in enumerate(records, first)])


def test_the_journal_file_is_private_and_in_wal_mode(tmp_path: Path) -> None:
    store, warning = JournalStore.open(tmp_path / JOURNAL_FILE, NOW)
    write(store, [record()])
    store.close()
    assert warning is None
    assert stat.S_IMODE((tmp_path / JOURNAL_FILE).stat().st_mode) == 0o600
    conn = sqlite3.connect(tmp_path / JOURNAL_FILE)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_records_come_back_filtered_newest_last_and_pages_follow_by_seq(tmp_path: Path) -> None:
    path = tmp_path / JOURNAL_FILE
    store, _ = JournalStore.open(path, NOW)
    written = write(
        store,
        [
            record(NOW - 100, tool="echo"),
            record(NOW - 50, tool="fail", outcome="tool-error"),
            record(NOW - 10, tool="echo", server="other", client="Cursor", client_name="cursor"),
        ],
    )
    store.close()
    assert [r.seq for r in written] == [1, 2, 3]
    tools = [r.tool for r in read_calls(path, CallQuery())]
    assert tools == ["echo", "fail", "echo"]
    assert [r.seq for r in read_calls(path, CallQuery(tool="e*"))] == [1, 3]
    assert [r.seq for r in read_calls(path, CallQuery(outcome="tool-error"))] == [2]
    assert [r.seq for r in read_calls(path, CallQuery(server="other"))] == [3]
    assert [r.seq for r in read_calls(path, CallQuery(client="cursor"))] == [3]
    assert [r.seq for r in read_calls(path, CallQuery(client="CLAUDE CODE"))] == [1, 2]
    assert [r.seq for r in read_calls(path, CallQuery(since=NOW - 60))] == [2, 3]
    assert [r.seq for r in read_calls(path, CallQuery(limit=1))] == [3]
    assert [r.seq for r in read_calls(path, CallQuery(after=1, limit=1))] == [2]
    assert read_calls(tmp_path / "none.sqlite", CallQuery()) == []
    assert not (tmp_path / "none.sqlite").exists()


def test_records_older_than_the_days_kept_go_and_the_rest_stay(tmp_path: Path) -> None:
    store, _ = JournalStore.open(tmp_path / JOURNAL_FILE, NOW)
    write(store, [record(NOW - 20 * DAY), record(NOW - 15 * DAY), record(NOW - DAY), record(NOW)])
    gone = store.prune(NOW, JournalSettings(days=14))
    assert gone == 2
    assert [r.started for r in store.query(CallQuery())] == [NOW - DAY, NOW]
    # The one from a day ago is kept to the second of its 14 days, then goes.
    assert store.prune(NOW + 13 * DAY, JournalSettings(days=14)) == 0
    assert store.prune(NOW + 13 * DAY + 1, JournalSettings(days=14)) == 1
    store.close()


def test_a_journal_over_max_mb_drops_its_oldest_records_until_it_fits(tmp_path: Path) -> None:
    path = tmp_path / JOURNAL_FILE
    store, _ = JournalStore.open(path, NOW)
    # ~3 MB of records, each with arguments cut at 4 KiB.
    write(store, [record(NOW + i, {"text": f"{i:05d}" + "x" * 5000}) for i in range(700)])
    assert store.used_bytes() > 2.5 * 1024 * 1024
    gone = store.prune(NOW + 700, JournalSettings(max_mb=1))
    assert gone > 0
    assert store.used_bytes() <= 1024 * 1024
    kept = store.query(CallQuery(limit=10000))
    assert len(kept) == 700 - gone
    assert kept[-1].started == NOW + 699  # the newest stay
    assert kept[0].started == NOW + gone
    store.close()
    # The freed pages went back to the file system.
    assert path.stat().st_size < 1.5 * 1024 * 1024


def test_a_damaged_journal_is_moved_aside_with_a_warning_and_a_new_one_starts(
    tmp_path: Path,
) -> None:
    path = tmp_path / JOURNAL_FILE
    path.write_bytes(b"\x00garbage, not sqlite\xff" * 500)
    store, warning = JournalStore.open(path, NOW)
    assert warning is not None and warning.startswith(f"{JOURNAL_DAMAGED_FAMILY}: ")
    assert "was damaged" in warning and "a new one started" in warning
    aside = list(tmp_path.glob(f"{JOURNAL_FILE}.damaged-*"))
    assert len(aside) == 1 and aside[0].read_bytes().startswith(b"\x00garbage")
    assert aside[0].name in warning
    write(store, [record()])
    assert len(store.query(CallQuery())) == 1
    store.close()


def test_the_writer_writes_in_batches_off_the_callers_thread_and_flushes_on_stop(
    tmp_path: Path,
) -> None:
    batches: list[list[CallRecord]] = []
    writer = writer_at(
        tmp_path, secrets=lambda: {"hunter22"}, on_written=batches.append, batch_seconds=0.05
    )
    writer.start()
    for i in range(50):
        writer.put(seen(NOW + i, {"text": f"call {i} hunter22"}))
    writer.stop()
    records = read_calls(tmp_path / JOURNAL_FILE, CallQuery(limit=100))
    assert len(records) == 50
    assert sum(len(batch) for batch in batches) == 50
    assert len(batches) < 50  # gathered, not one transaction per call
    assert all("hunter22" not in (r.arguments or "") for r in records)


def test_the_writer_keeps_numbering_after_the_oldest_records_are_pruned(tmp_path: Path) -> None:
    """The writer numbers records itself: a follower paging by ``seq`` never sees a number
    again, even once retention has emptied the file (sqlite would restart at max + 1)."""
    writer = writer_at(tmp_path, retention=lambda: JournalSettings(days=1), clock=lambda: NOW)
    writer._write([seen(NOW - 2 * DAY), seen(NOW - 2 * DAY)])
    writer._prune()
    assert read_calls(tmp_path / JOURNAL_FILE, CallQuery()) == []
    writer._write([seen(NOW)])
    (only,) = read_calls(tmp_path / JOURNAL_FILE, CallQuery())
    assert only.seq == 3 and only.id.endswith("-3")
    writer.store.close()


def test_missing_values_are_written_as_sql_null(tmp_path: Path) -> None:
    """None goes through sqlite3's adapter for it (core.registry.journal): still a NULL."""
    store, _ = JournalStore.open(tmp_path / JOURNAL_FILE, NOW)
    store.write([record(pid=None, generation=None, error_code=None)._replace(seq=1)])
    store.close()
    conn = sqlite3.connect(tmp_path / JOURNAL_FILE)
    row = conn.execute("SELECT typeof(pid), typeof(generation), typeof(error_code) FROM calls")
    assert row.fetchone() == ("null", "null", "null")
    conn.close()


@pytest.mark.parametrize(
    ("result", "replayed"),
    [
        ({"content": [{"type": "text", "text": "hi"}]}, False),
        ({"content": [{"type": "text", "text": "é" * 300}]}, False),
        ({"content": [{"type": "text", "text": "x" * 5000}], "isError": True}, False),
        ({"content": [{"type": "text", "text": "again"}]}, True),
        ({"content": [{"type": "image", "data": "AAAA", "mimeType": "image/png"}]}, False),
        ({"content": [], "structuredContent": {"n": 1}}, False),
    ],
)
def test_a_plain_answers_short_way_to_the_writer_sees_what_the_general_one_does(
    tmp_path: Path, result: dict[str, Any], replayed: bool
) -> None:
    """Watch.done takes most answers in one frame (core.serving.observe.call_journal): what it
    hands the writer is what Watch._end would have, field for field."""
    writer = writer_at(tmp_path)
    taken: list[Seen] = []
    writer.put = taken.append  # what the loop hands the writer, kept in order
    journal = CallJournal()
    journal.writer = writer
    who = ("Claude Code", "claude-code", None, "clientInfo, handshake", "s1", "/mcp/echo")
    params = {"name": "echo", "arguments": {"text": "hi"}}
    short, general = (Watch(journal, who, "echo", "tools/call", params) for _ in range(2))
    for watch in (short, general):
        watch.attempt(3, False)
        if replayed:
            watch.attempt(4, True)
    short.done(result)
    outcome = "tool-error" if result.get("isError") else "retried" if replayed else "ok"
    general._end(outcome, "", None, "", result)
    assert len(taken) == 2
    assert [seen._replace(duration_ms=0, started=0) for seen in taken] == [
        taken[1]._replace(duration_ms=0, started=0)
    ] * 2
    assert taken[0].outcome == outcome and taken[0].generation == (4 if replayed else 3)
    writer.store.close()


# ------------------------------------------------------------ config


@pytest.mark.parametrize(
    ("journal", "expected"),
    [
        ({"days": 0}, "journal.days: must be a number of days from 1 to 3650, got"),
        ({"max_mb": "big"}, "journal.max_mb: must be a number of megabytes from 1 to 100000"),
        ({"arguments": "no"}, "journal.arguments: must be true or false"),
        ({"dayz": 3}, "journal.dayz: unknown key (did you mean 'days'?)"),
        ([], "journal: must be an object, got"),
    ],
)
def test_a_bad_journal_setting_is_refused_naming_the_file_key_and_fix(
    tmp_path: Path, journal: object, expected: str
) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"mcpServers": {}, "journal": journal}))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert expected in str(caught.value)
    assert str(path) in str(caught.value)
    assert "Fix:" in str(caught.value) or "fix" in str(caught.value).lower()


def test_the_journal_settings_default_to_14_days_200_mb_with_arguments(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"mcpServers": {}}))
    assert load_config(path).journal == JournalSettings(days=14, max_mb=200, arguments=True)
    path.write_text(json.dumps({"mcpServers": {}, "journal": {"days": 3, "arguments": False}}))
    assert load_config(path).journal == JournalSettings(days=3, max_mb=200, arguments=False)


# ------------------------------------------------------------ a real tray


async def test_a_keyring_secret_and_a_token_argument_never_reach_the_journal(
    services: Services, fake_keyring: FileKeyring
) -> None:
    secret = "kr-9f8e7d6c5b4a"
    fake_keyring.set_password(KEYRING_SERVICE, "echo-key", secret)
    entry = python_server(ECHO)
    entry["env"] = {**entry.get("env", {}), "ECHO_KEY": "${keyring:echo-key}"}
    service = await services.start({"echo": entry})
    await wait_ready(service.supervisor.server("echo"))
    async with http_client(service, "echo") as session:
        result = await session.call_tool("getenv", {"name": "ECHO_KEY", "token": "t-123456"})
        assert text(result) == secret  # the child has it; the journal must not
    records = await wait_until(
        lambda: service.calls_json(CallQuery(tool="getenv")), what="the getenv record"
    )
    kept = json.dumps(records)
    assert secret not in kept and "t-123456" not in kept
    assert records[-1]["arguments"] == {"name": "ECHO_KEY", "token": REDACTED}
    assert records[-1]["result_head"] == REDACTED_SECRET


async def test_arguments_false_is_hot_reloaded_and_keeps_tool_names_only(
    services: Services,
) -> None:
    servers = {"echo": python_server(ECHO)}
    service = await services.start(servers)
    await wait_ready(service.supervisor.server("echo"))
    service.paths.config_file.write_text(
        json.dumps({"mcpServers": servers, "journal": {"arguments": False}})
    )
    await wait_until(
        lambda: not service.supervisor.config.journal.arguments, what="the edit applied"
    )
    async with http_client(service, "echo") as session:
        await session.call_tool("echo", {"text": "not kept"})
    records = await wait_until(
        lambda: service.calls_json(CallQuery(tool="echo")), what="the echo record"
    )
    assert records[-1]["arguments"] is None
    assert records[-1]["tool"] == "echo"
    assert time.time() - 60 < parse_since(records[-1]["time"], 0) <= time.time()


def test_outcomes_that_approvals_and_held_tools_give_are_recorded_as_given(
    tmp_path: Path,
) -> None:
    class Denied(CallError):
        journal_outcome = ("denied", "approval")

    assert outcome_of(Denied("echo", "the person said no")) == ("denied", "approval", None)
    writer = writer_at(tmp_path, batch_seconds=0.01)
    journal = CallJournal()
    journal.writer = writer
    writer.start()
    session = ClientSession(id="s1", server="echo", kind="http", client_name="cursor-vscode")
    held = journal.watch(session, False, "echo", "tools/call", {"name": "rm", "arguments": {}})
    assert held is not None
    held.settle("refused", "tool-change")
    held.done({"content": [{"type": "text", "text": "held for review"}], "isError": True})
    timed_out = journal.watch(session, True, "echo", "tools/call", {"name": "rm"})
    assert timed_out is not None
    timed_out.failed(
        type("Late", (CallError,), {"journal_outcome": ("timeout", "approval")})(
            "echo", "nobody answered"
        )
    )
    writer.stop()
    records = read_calls(tmp_path / JOURNAL_FILE, CallQuery())
    assert [(r.outcome, r.refused_by) for r in records] == [
        ("refused", "tool-change"),
        ("timeout", "approval"),
    ]
    assert records[0].client == "Cursor" and "handshake" in records[0].identified_by
    assert "2026-07-28" in records[1].identified_by
