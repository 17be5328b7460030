"""``mcp-tray approvals``, ``approve`` and ``deny``: what waits for the person, headless.

docs/design.md §3.14. The same answers the window gives, through the
control API: a held call is allowed once, for its session or always, or
denied; a changed tool is approved (offered again). ``approvals --always``
lists the "Always allow" answers and ``--revoke SERVER TOOL`` takes one back.
"""

import argparse
import json
import re
from typing import Any, Final

from core.base.errors import CommandError
from core.base.exitcodes import EXIT_OK
from core.cli.control_client import ControlClient, server_error
from core.settings.paths import Paths

#: What an approval id can hold (``c-`` or ``t-`` and hex): anything else is never sent.
_APPROVAL_ID_RE: Final = re.compile(r"[ct]-[0-9a-f]{1,32}")
#: The longest an argument value is shown in the table.
_SHOWN_ARGUMENTS: Final = 60


def _fetch(paths: Paths) -> dict[str, Any]:
    reply = ControlClient.connect(paths).request("GET", "/api/v1/approvals")
    if not reply.ok:
        raise server_error(reply)
    body: dict[str, Any] = reply.body
    return body


def cmd_approvals(args: argparse.Namespace, paths: Paths) -> int:
    if args.revoke:
        server, tool = args.revoke
        reply = ControlClient.connect(paths).request(
            "POST", "/api/v1/approvals/revoke", {"server": server, "tool": tool}
        )
        if not reply.ok:
            raise server_error(reply)
        print(f"{tool!r} of {server!r} is no longer always allowed: its calls are asked again")
        return EXIT_OK
    body = _fetch(paths)
    if args.always:
        grants = body["always"]
        if args.json:
            print(json.dumps(grants, indent=2))
        elif not grants:
            print("no call is always allowed")
        for grant in [] if args.json else grants:
            print(f"{grant['server']}  {grant['tool']}  since {grant['since']}")
        return EXIT_OK
    pending = body["pending"]
    if args.json:
        print(json.dumps(pending, indent=2))
        return EXIT_OK
    if not pending:
        print("nothing waits for your approval")
        return EXIT_OK
    for item in pending:
        if item["kind"] == "tool-change":
            print(
                f"{item['id']}  tool-change  {item['server']}  {item['tool']}  "
                f"({item['reason']})  since {item['since']}"
            )
        else:
            shown = json.dumps(item["arguments"], ensure_ascii=False)
            if len(shown) > _SHOWN_ARGUMENTS:
                shown = shown[: _SHOWN_ARGUMENTS - 1] + "…"
            print(
                f"{item['id']}  call  {item['server']}  {item['tool']}  {shown}  "
                f"from {item['client']}  since {item['since']}"
            )
    print("answer with: mcp-tray approve ID [--session|--always], mcp-tray deny ID")
    return EXIT_OK


def _checked(approval_id: str) -> str:
    if _APPROVAL_ID_RE.fullmatch(approval_id) is None:
        raise CommandError(
            f"{approval_id!r} is not an approval id (they look like c-1a2b3c or t-1a2b3c; "
            "mcp-tray approvals lists them)"
        )
    return approval_id


def cmd_approve(args: argparse.Namespace, paths: Paths) -> int:
    scope = "session" if args.session else "always" if args.always else "once"
    reply = ControlClient.connect(paths).request(
        "POST", f"/api/v1/approvals/{_checked(args.id)}/approve", {"scope": scope}
    )
    if not reply.ok:
        raise server_error(reply)
    print(reply.body["text"])
    return EXIT_OK


def cmd_deny(args: argparse.Namespace, paths: Paths) -> int:
    reply = ControlClient.connect(paths).request(
        "POST", f"/api/v1/approvals/{_checked(args.id)}/deny"
    )
    if not reply.ok:
        raise server_error(reply)
    print(reply.body["text"])
    return EXIT_OK
