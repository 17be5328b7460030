"""The commands about the running tray's servers: status, call, respawn, stop,
start, tools and logs. Each asks the tray's API (core.cli.control_client),
except ``logs``, which reads the server's log file.
"""

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any, Final

from core.base.errors import CommandError, ConfigError, NotFinite
from core.base.exitcodes import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from core.cli.control_client import (
    API_TIMEOUT_SECONDS,
    ControlClient,
    running_status,
    server_error,
)
from core.cli.findings import by_severity, warnings_of
from core.cli.parser import check_server_name
from core.settings.paths import Paths

#: respawn/stop/start run the stop contract (up to ~5 s) and a fresh start.
ACTION_TIMEOUT_SECONDS: Final = 60.0
#: How often the CLI looks at the server's state while it waits.
SETTLE_POLL_SECONDS: Final = 0.1


def cmd_status(args: argparse.Namespace, paths: Paths) -> int:
    """The running tray's servers; ``--json``: each exactly as the API's server object."""
    client = ControlClient.connect(paths)
    body = client.get("/api/v1/status")
    findings = by_severity(warnings_of(client))
    if args.json:
        out: dict[str, Any] = {"version": body.get("version"), "config": body.get("config")}
        out["servers"] = body.get("servers", [])
        for key in ("gateway", "sessions", "workers", "config_error"):
            if key in body:
                out[key] = body[key]
        out["warnings"] = findings.warnings
        out["advice"] = findings.advice
        out["info"] = findings.info
        print(json.dumps(out, indent=2))
        return EXIT_OK
    print(f"mcp-tray {body.get('version')}  config: {body.get('config')}")
    gateway = body.get("gateway") or {}
    if gateway.get("url"):
        print(f"gateway: {gateway['url']}")
    if gateway.get("fallback"):
        print(f"PORT TAKEN: {gateway['fallback']}")
    if body.get("config_error"):
        print(f"CONFIG ERROR (still running the last good config): {body['config_error']}")
    if findings.warnings:
        count = len(findings.warnings)
        print(
            f"{count} warning{'s' if count > 1 else ''} (mcp-tray doctor lists them with their fixes)"
        )
    for line in findings.note_lines():
        print(line)
    servers = body.get("servers", [])
    if not servers:
        print("no servers configured")
    for server in servers:
        print(server_line(server))
        if server.get("sandbox", "none") != "none":
            print(f"      sandbox: {server['sandbox']}")
        if server.get("parked_reason"):
            print(f"      parked: {server['parked_reason']}")
        elif server.get("last_error") and server["state"] != "ready":
            print(f"      last error: {server['last_error']}")
    return EXIT_OK


def server_line(server: dict[str, Any]) -> str:
    """One server of ``mcp-tray status``: its state, run, breaker and the era it speaks."""
    pid = server.get("pid") or "-"
    # The era is known once a run answered its probe (or handshake).
    era = server.get("protocol") or "-"
    return (
        f"  {server['name']:<20} {server['state']:<9} pid {pid!s:<8} "
        f"gen {server['generation']:<4} restarts {server['restarts']:<4} "
        f"breaker {server['breaker']:<9} era {era}"
    ).rstrip()


def cmd_call(args: argparse.Namespace, paths: Paths) -> int:
    from core.protocol.jsonrpc import loads

    example = 'pass an object like \'{"text": "hi"}\''
    detail = None
    try:
        arguments = loads(args.args)
    except RecursionError:
        detail = "it is nested too deeply"
    except NotFinite as exc:
        detail = str(exc)
    except json.JSONDecodeError as exc:
        detail = exc.args[0]
    except ValueError:  # an integer past Python's 4300-digit limit
        detail = "a number has thousands of digits"
    if detail is not None:
        raise CommandError(f"--args is not valid JSON ({detail}): {example}", EXIT_USAGE)
    if not isinstance(arguments, dict):
        raise CommandError(f"--args must be a JSON object: {example}", EXIT_USAGE)
    check_server_name(args.name)
    client = ControlClient.connect(paths, timeout=args.timeout + API_TIMEOUT_SECONDS)
    reply = client.request(
        "POST",
        f"/api/v1/servers/{args.name}/call",
        {"tool": args.tool, "arguments": arguments, "timeout": args.timeout},
    )
    if not reply.ok:
        raise server_error(reply)
    result = reply.body["result"]
    print(json.dumps(result, indent=2))
    if result.get("isError"):
        text = " ".join(
            block.get("text", "") for block in result.get("content", []) if isinstance(block, dict)
        )
        print(f"mcp-tray: tool {args.tool!r} reported an error: {text}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def action(verb: str) -> "Callable[[argparse.Namespace, Paths], int]":
    def run(args: argparse.Namespace, paths: Paths) -> int:
        check_server_name(args.name)
        client = ControlClient.connect(paths, timeout=ACTION_TIMEOUT_SECONDS)
        # The generation before the action tells a run this action began
        # from the one it replaced (the reply comes before the new run does).
        before = _server_row(client, args.name)
        reply = client.request("POST", f"/api/v1/servers/{args.name}/{verb}")
        if not reply.ok:
            raise server_error(reply)
        server: dict[str, Any] = reply.body["server"]
        generation = int((before or server)["generation"])
        wait = float(getattr(args, "wait", 0.0))
        server, settled = _settle(client, verb, args.name, generation, server, wait)
        return _report_action(verb, server, settled, wait)

    return run


def _server_row(client: Any, name: str) -> dict[str, Any] | None:
    """The server's row of /api/v1/status, or None when there is none of that name."""
    rows = client.get("/api/v1/status").get("servers", [])
    return next((row for row in rows if row.get("name") == name), None)


def action_settled(verb: str, before_generation: int, server: dict[str, Any]) -> bool:
    """Whether ``server`` (a status row) shows where ``verb`` ended, not where it began.

    The API answers as soon as the action is under way: right after a start
    the row still says "stopped", after a respawn it still shows the old run.
    """
    state = server["state"]
    if state == "starting":
        return False
    if verb == "stop":
        return True
    if int(server["generation"]) > before_generation:
        return True  # a run this action began, past its start: ready, exited, parked…
    # No new run: a start on a server that is already up, or parked (its
    # self-probe keeps it "running"), changes nothing; its state is the answer.
    return verb == "start" and state in ("ready", "degraded", "parked", "sleeping")


def _settle(
    client: Any,
    verb: str,
    name: str,
    before_generation: int,
    server: dict[str, Any],
    wait: float,
) -> tuple[dict[str, Any], bool]:
    """Poll the server's row until the action settled or ``wait`` seconds passed."""
    deadline = time.monotonic() + wait
    while not action_settled(verb, before_generation, server):
        if time.monotonic() >= deadline:
            return server, False
        time.sleep(SETTLE_POLL_SECONDS)
        row = _server_row(client, name)
        if row is None:  # a config edit removed it meanwhile
            return server, True
        server = row
    return server, True


def _report_action(verb: str, server: dict[str, Any], settled: bool, wait: float) -> int:
    """Print where the action left the server; 0 only when it got there."""
    name, state = server["name"], server["state"]
    print(f"{name}: {state} (generation {server['generation']})")
    if not settled:
        print(
            f"mcp-tray: {name} is still {state} after {wait:g} s; `mcp-tray status` shows "
            f"where it goes, `mcp-tray logs {name}` what it does",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if state == "parked":
        reason = server.get("parked_reason") or server.get("last_error") or "no reason recorded"
        print(f"      parked: {reason}")
        print(
            f"mcp-tray: {name} did not start: it is parked. `mcp-tray logs {name}` shows "
            f"more; `mcp-tray respawn {name}` tries again",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if state == "sleeping":
        print("      sleeping: on demand, it starts at the first request that needs it")
        return EXIT_OK
    if state in ("ready", "degraded") or (state == "stopped" and verb == "stop"):
        if state == "degraded" and server.get("last_error"):
            print(f"      last error: {server['last_error']}")
        return EXIT_OK
    # exited (died before it was ready; a respawn follows its backoff), or
    # stopped by someone else while this start was under way.
    if server.get("last_error"):
        print(f"      last error: {server['last_error']}")
    why = (
        "it died before it was ready; mcp-tray tries again after a backoff"
        if state == "exited"
        else "it was stopped meanwhile"
    )
    print(f"mcp-tray: {name} did not start: {why} (see mcp-tray logs {name})", file=sys.stderr)
    return EXIT_FAILED


def cmd_tools(args: argparse.Namespace, paths: Paths) -> int:
    """What a server offers, from the running tray (core.supervision.offer's rows)."""
    check_server_name(args.name)
    body = ControlClient.connect(paths).get(f"/api/v1/servers/{args.name}/tools")
    if args.json:
        print(json.dumps(body, indent=2))
        return EXIT_OK
    tools = body.get("tools", [])
    if not body.get("known") and not tools:
        print(f"{args.name}: not listed yet (it has not completed a handshake)")
        return EXIT_OK
    width = max((len(tool["name"]) for tool in tools), default=4)
    for tool in tools:
        mark = "retried    " if tool["retried_after_crash"] else "not retried"
        title = f"{tool['title']}: " if tool.get("title") else ""
        text = " ".join(f"{title}{tool.get('description') or ''}".split())
        print(f"  {tool['name']:<{width}}  {mark}  {text}")
    print(
        f"{len(tools)} tool(s), {body['resources']} resource(s), "
        f"{body['resource_templates']} resource template(s), {body['prompts']} prompt(s); "
        f'"retry": "{body["retry"]}": a call cut by a crash is retried only where it says so'
    )
    return EXIT_OK


def cmd_logs(args: argparse.Namespace, paths: Paths) -> int:
    from core.supervision.logs import tail

    check_server_name(args.name)
    path = paths.server_log(args.name)
    if not path.exists():
        known = _configured_names(paths)
        if known is not None and args.name not in known[0]:
            names, source = known
            listed = ", ".join(sorted(names)) or "none"
            raise CommandError(f"no such server {args.name!r} (configured in {source}: {listed})")
        if known is None:
            raise CommandError(
                f"no log for server {args.name!r} (looked for {path}), and no config could be "
                "read to tell whether it is configured"
            )
        raise CommandError(
            f"no log yet for server {args.name!r}: it has not started or written anything "
            f"(looked for {path})"
        )
    for line in tail(path, args.n):
        print(line)
    return EXIT_OK


def _configured_names(paths: Paths) -> tuple[list[str], str] | None:
    """The server names the running tray knows, else those of the default
    config; None when neither can be read."""
    running = running_status(paths)
    if running is not None:
        _, status = running
        rows = status.get("servers", [])
        names = [str(row.get("name")) for row in rows if isinstance(row, dict)]
        return names, f"the running mcp-tray's {status.get('config') or 'config'}"
    from core.settings.config import load_config

    try:
        return list(load_config(paths.config_file).servers), str(paths.config_file)
    except ConfigError:
        return None


cmd_respawn: Final = action("respawn")
cmd_stop: Final = action("stop")
cmd_start: Final = action("start")
