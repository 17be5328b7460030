"""``mcp-tray calls``: the call journal (docs/design.md §3.16), filtered, or followed.

While a tray runs, it is asked (``GET /api/v1/calls``); when none runs, the
journal's file is read directly, read-only, so the record of what happened
outlives the tray. ``--follow`` asks again every ``FOLLOW_SECONDS`` for what
was written since the last record it printed.
"""

import argparse
import json
import time
from datetime import datetime
from typing import Any, Final
from urllib.parse import urlencode

from core.base.errors import CommandError, NotRunning
from core.base.exitcodes import EXIT_OK, EXIT_USAGE
from core.cli.control_client import ControlClient, server_error
from core.registry.journal import JOURNAL_FILE, calls_query, read_calls
from core.settings.paths import Paths

#: How often ``--follow`` asks for new records.
FOLLOW_SECONDS: Final = 0.5
#: The glyph of each outcome in the table (the window uses the same).
GLYPHS: Final = {
    "ok": "✓",
    "retried": "↻",
    "tool-error": "!",
    "error": "✗",
    "exited": "✗",
    "timeout": "⏱",
    "cancelled": "–",
    "refused": "⊘",
    "denied": "⊘",
}


def cmd_calls(args: argparse.Namespace, paths: Paths) -> int:
    params = {
        key: str(value)
        for key, value in (
            ("server", args.server),
            ("client", args.client),
            ("tool", args.tool),
            ("outcome", args.outcome),
            ("since", args.since),
            ("limit", args.limit),
        )
        if value is not None
    }
    try:
        calls_query(params, time.time())  # checked here: the same message either way
    except ValueError as exc:
        raise CommandError(str(exc), EXIT_USAGE) from None
    fetch = _source(paths)
    records = fetch(params)
    _show(records, args.json, follow=args.follow)
    if not args.follow:
        return EXIT_OK
    last = records[-1]["seq"] if records else _newest(fetch, params)
    while True:
        time.sleep(FOLLOW_SECONDS)
        page = fetch({**{k: v for k, v in params.items() if k != "since"}, "after": str(last)})
        if page:
            _show(page, args.json, follow=True)
            last = page[-1]["seq"]


def _source(paths: Paths) -> Any:
    """Where records come from: the running tray, else the file."""
    try:
        client = ControlClient.connect(paths)
    except NotRunning:
        client = None

    def fetch(params: dict[str, str]) -> list[dict[str, Any]]:
        nonlocal client
        if client is not None:
            try:
                reply = client.request("GET", f"/api/v1/calls?{urlencode(params)}")
            except NotRunning:
                client = None  # the tray went away: the file still answers
            else:
                if not reply.ok:
                    raise server_error(reply)
                found: list[dict[str, Any]] = reply.body["calls"]
                return found
        query = calls_query(params, time.time())
        return [record.to_json() for record in read_calls(paths.state_dir / JOURNAL_FILE, query)]

    return fetch


def _newest(fetch: Any, params: dict[str, str]) -> int:
    """The last record's place, so a follower starts after it."""
    newest = fetch({"limit": "1"})
    return int(newest[-1]["seq"]) if newest else 0


def _show(records: list[dict[str, Any]], as_json: bool, *, follow: bool) -> None:
    if as_json:
        if follow:  # one record per line: a follower's reader takes them as they come
            for record in records:
                print(json.dumps(record), flush=True)
        else:
            print(json.dumps(records, indent=2))
        return
    if not records and not follow:
        print("no calls recorded (yet)")
        return
    for record in records:
        print(_line(record), flush=True)


def _line(record: dict[str, Any]) -> str:
    when = datetime.fromisoformat(record["time"]).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    outcome = record["outcome"]
    if record.get("refused_by"):
        outcome += f" by {record['refused_by']}"
    if record.get("error_code") is not None:
        outcome += f" {record['error_code']}"
    target = record["tool"] or record["method"]
    return (
        f"{when}  {record['client'][:18]:<18} {record['server'][:18]:<18} {target[:32]:<32} "
        f"{GLYPHS.get(record['outcome'], '?')} {outcome:<16} {record['duration_ms']:>9.1f} ms"
    ).rstrip()
