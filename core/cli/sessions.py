"""``mcp-tray sessions`` and ``mcp-tray reset``: client sessions and their breakers."""

import argparse
import json
import re
from typing import Final

from core.base.errors import CommandError
from core.base.exitcodes import EXIT_OK
from core.cli.control_client import ControlClient, server_error
from core.settings.paths import Paths

_SESSION_COLUMNS: Final = (
    ("id", "SESSION"),
    ("client", "CLIENT"),
    ("server", "SERVER"),
    # The aggregate (@all: /mcp) or profile a member session belongs to ("-": its own endpoint).
    ("via", "VIA"),
    ("requests", "REQUESTS"),
    ("consecutive_failures", "FAILURES"),
    ("breaker", "BREAKER"),
)
#: What a client session id can hold (the gateway makes them as uuid hex).
_SESSION_ID_RE: Final = re.compile(r"[A-Za-z0-9._-]{1,128}")


def cmd_sessions(args: argparse.Namespace, paths: Paths) -> int:
    reply = ControlClient.connect(paths).request("GET", "/api/v1/sessions")
    if not reply.ok:
        raise server_error(reply)
    rows = reply.body["sessions"]
    if args.json:
        keys = (
            "id",
            "client_name",
            "server",
            "via",
            "opened_at",
            "requests",
            "consecutive_failures",
            "breaker",
        )
        print(json.dumps([{k: row.get(k) for k in keys} for row in rows], indent=2))
        return EXIT_OK
    if not rows:
        print("no client sessions")
        return EXIT_OK
    table = [[title for _, title in _SESSION_COLUMNS]]
    table += [[_cell(row.get(key)) for key, _ in _SESSION_COLUMNS] for row in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(_SESSION_COLUMNS))]
    for line in table:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        )
    return EXIT_OK


def _cell(value: object) -> str:
    return "-" if value is None or value == "" else str(value)


def cmd_reset(args: argparse.Namespace, paths: Paths) -> int:
    if not args.all and _SESSION_ID_RE.fullmatch(args.session) is None:
        # Never sent: it cannot name a session, and would not fit in the URL.
        raise CommandError(f"no client session {args.session!r} (mcp-tray sessions lists them)")
    client = ControlClient.connect(paths)
    if args.all:
        reply = client.request("POST", "/api/v1/sessions/reset-all")
        if not reply.ok:
            raise server_error(reply)
        reset = reply.body["reset"]
        print(f"reset {len(reset)} tripped session(s)" + (f": {', '.join(reset)}" if reset else ""))
        return EXIT_OK
    reply = client.request("POST", f"/api/v1/sessions/{args.session}/reset")
    if not reply.ok:
        raise server_error(reply)
    print(f"session {args.session} reset: its next request goes to the server again")
    return EXIT_OK
