"""The tray colour rule and the tooltip that names the worst cause and what to do.

Strategy: build TraySnapshots by hand (the function is pure) and check the
worst state wins, with a tooltip that names the most severe cause in words
(not "1 warning") and what to do, in one line.
"""

import pytest

from app.status import (
    FIX_MAX,
    MENU_LINE_MAX,
    TOOLTIP_MAX,
    TrayColour,
    short_paths,
    shorten,
    state_colour,
    tray_status,
)
from core.base.snapshot import (
    TraySnapshot,
    WarningSnapshot,
)
from core.base.states import ServerState
from tests.app import builders
from tests.app.scenes import CONFIG, server, snapshot

PARK_REASON = (
    "it exited 6 times in a row before it was up 30 s or served a call (last: exit code 1)"
)
PORT_TAKEN = WarningSnapshot(
    "port-taken",
    "mcp-tray",
    "port 28729 is taken (by pid 4242, node); mcp-tray listens on 41234 instead — HTTP "
    "clients configured for 28729 will not reach it until port 28729 is free and mcp-tray "
    "restarts (bridges reach it anyway). Fix: stop what holds port 28729, or set "
    f"gateway.port in {CONFIG} to a free port and re-run mcp-tray client-config",
    "",
    "port-taken: port 28729 is taken …",
)
TOKEN_STORAGE = WarningSnapshot(
    "token-storage",
    "mcp-tray",
    "no usable OS keyring (NoKeyringError); the API token is in /home/u/.local/state/"
    "mcp-tray/token (mode 0600). Fix: run a Secret Service (GNOME Keyring, KWallet) so "
    "mcp-tray can keep it in the keyring.",
    "",
    "token-storage: no usable OS keyring …",
)
UNSUPPORTED_ENV = WarningSnapshot(
    "unsupported-env",
    "MCP_TRAY_CLIENT_SESION",
    "MCP_TRAY_CLIENT_SESION=… is not a variable mcp-tray reads "
    "(did you mean MCP_TRAY_CLIENT_SESSION?).",
    "rename it to MCP_TRAY_CLIENT_SESSION or unset it.",
    "unsupported-env: MCP_TRAY_CLIENT_SESION …",
)
STALE_RUNTIME = WarningSnapshot(
    "stale-runtime",
    "w1",
    "worker w1 (Cursor, session s1, pid 9) runs mcp-tray 0.0.9 (registered); "
    "this mcp-tray is 0.1.0.",
    "restart Cursor to reconnect.",
    "stale-runtime: worker w1 …",
)
SECRET_LITERAL = WarningSnapshot(
    "secret-literal",
    "github.env.GITHUB_TOKEN",
    "server 'github' has a literal value for GITHUB_TOKEN in config.json.",
    'store it in the OS keyring and write "${keyring:github.GITHUB_TOKEN}" as the value instead.',
    "secret-literal: server 'github' …",
)
CONFIG_ERROR = (
    f"{CONFIG}:4: mcpServers.notes.retry: must be one of safe, always, never, got 'sometimes'. "
    "Fix: write one of safe, always, never"
)


READY = server("a", ServerState.READY)


@pytest.mark.parametrize(
    ("snap", "colour", "words"),
    [
        (snapshot(), TrayColour.GREY, ["no servers configured", f"Add them to {CONFIG}"]),
        (
            snapshot(server("a", ServerState.STOPPED)),
            TrayColour.GREY,
            ["all 1 server stopped", "Start them from the window"],
        ),
        (snapshot(READY, server("b", ServerState.READY)), TrayColour.GREEN, ["2 servers ready"]),
        (
            snapshot(READY, server("b", ServerState.STOPPED)),
            TrayColour.GREEN,
            ["1 server ready, 1 stopped"],
        ),
        (snapshot(READY, server("b", ServerState.STARTING)), TrayColour.AMBER, ["b starting"]),
        (
            snapshot(READY, server("b", ServerState.EXITED, error="generation 3 exit code 1")),
            TrayColour.AMBER,
            ["b respawning: generation 3 exit code 1"],
        ),
        (
            snapshot(READY, server("b", ServerState.DEGRADED)),
            TrayColour.AMBER,
            ["b not answering pings", "mcp-tray respawn b"],
        ),
        (
            snapshot(READY, workers=[{"status": "stale"}]),
            TrayColour.AMBER,
            ["1 stale worker (Cursor on a)", "Restart that client"],
        ),
        (
            snapshot(READY, workers=[{"status": "fenced"}, {"status": "stale"}]),
            TrayColour.AMBER,
            ["2 stale workers"],
        ),
        (
            snapshot(READY, config_error=CONFIG_ERROR),
            TrayColour.AMBER,
            [
                "config edit refused: config.json:4: mcpServers.notes.retry: must be one of",
                "Write one of safe, always, never; the last good config keeps running",
            ],
        ),
        (
            snapshot(READY, server("fragile", ServerState.PARKED, PARK_REASON)),
            TrayColour.RED,
            [
                "fragile parked: it exited 6 times in a row",
                "Respawn it from the window, or mcp-tray respawn fragile",
            ],
        ),
        (
            snapshot(READY, sessions=[{"breaker": "tripped"}]),
            TrayColour.RED,
            [
                "1 session tripped: Claude Desktop on a failed 3 times in a row",
                "Reset it from the window, or mcp-tray reset s0",
            ],
        ),
        (
            snapshot(
                server("c", ServerState.STARTING),
                sessions=[{"breaker": "tripped"}, {"breaker": "tripped"}],
            ),
            TrayColour.RED,
            ["2 sessions tripped", "mcp-tray reset --all", "(+1 more)"],
        ),
    ],
)
def test_the_worst_state_wins_and_the_tooltip_names_the_cause_and_the_fix(
    snap: TraySnapshot, colour: TrayColour, words: list[str]
) -> None:
    status = tray_status(snap)
    assert status.colour is colour
    for word in words:
        assert word in status.tooltip
    assert "\n" not in status.tooltip
    assert status.tooltip.startswith("mcp-tray: ")
    assert len(status.tooltip) <= TOOLTIP_MAX


@pytest.mark.parametrize(
    ("warning", "cause", "fix"),
    [
        (
            PORT_TAKEN,
            "port 28729 is taken (by pid 4242, node)",
            "Stop what holds port 28729, or set gateway.port in config.json to a free port",
        ),
        (
            UNSUPPORTED_ENV,
            "MCP_TRAY_CLIENT_SESION=… is not a variable mcp-tray reads",
            "Rename it to MCP_TRAY_CLIENT_SESSION or unset it",
        ),
        (STALE_RUNTIME, "worker w1 (Cursor, session s1, pid 9)", "Restart Cursor to reconnect"),
        (
            SECRET_LITERAL,
            "server 'github' has a literal value for GITHUB_TOKEN",
            "Store it in the OS keyring",
        ),
    ],
)
def test_a_warning_is_named_by_its_own_message_and_fix_not_counted(
    warning: WarningSnapshot, cause: str, fix: str
) -> None:
    status = tray_status(snapshot(READY, warnings=(warning,)))
    assert status.colour is TrayColour.AMBER
    assert cause in status.tooltip and fix in status.tooltip
    assert "1 warning" not in status.tooltip
    assert len(status.tooltip) <= TOOLTIP_MAX


def test_a_taken_port_is_named_before_other_warnings() -> None:
    status = tray_status(snapshot(READY, warnings=(SECRET_LITERAL, PORT_TAKEN, UNSUPPORTED_ENV)))
    assert status.cause.startswith("port 28729 is taken")
    assert status.more == 2
    assert status.tooltip.endswith("(+2 more)")


def test_a_token_in_a_file_is_information_and_leaves_the_tray_green() -> None:
    status = tray_status(snapshot(READY, warnings=(TOKEN_STORAGE,)))
    assert status.colour is TrayColour.GREEN
    assert status.tooltip == "mcp-tray: 1 server ready"


def test_a_parked_server_outranks_everything_amber_and_says_how_many_more() -> None:
    status = tray_status(
        snapshot(
            server("b", ServerState.PARKED, "command 'nope' not found"),
            server("c", ServerState.STARTING),
            config_error=CONFIG_ERROR,
            warnings=(PORT_TAKEN,),
        )
    )
    assert status.colour is TrayColour.RED
    assert status.tooltip.startswith("mcp-tray: b parked: command 'nope' not found — Respawn it")
    assert status.tooltip.endswith("(+3 more)")


def test_the_menu_header_says_the_same_in_two_short_lines() -> None:
    status = tray_status(snapshot(READY, warnings=(PORT_TAKEN,)))
    cause, fix = status.menu_lines
    assert cause.startswith("port 28729 is taken")
    assert fix.startswith("→ Stop what holds port 28729")
    assert all(len(line) <= MENU_LINE_MAX for line in status.menu_lines)
    assert tray_status(snapshot(READY)).menu_lines == ("1 server ready",)


def test_the_tooltip_stays_one_short_line_and_keeps_the_fix() -> None:
    many = [
        server(f"server-with-a-long-name-{i}", ServerState.PARKED, PARK_REASON) for i in range(20)
    ]
    tooltip = tray_status(snapshot(*many)).tooltip
    assert len(tooltip) <= TOOLTIP_MAX
    assert "mcp-tray respawn server-with-a-long-name-0" in tooltip
    assert tooltip.endswith("(+19 more)")


def test_shortening_cuts_after_a_whole_clause_when_one_fits() -> None:
    assert shorten("short", 10) == "short"
    assert (
        shorten(PARK_REASON, 70)
        == "it exited 6 times in a row before it was up 30 s or served a call…"
    )
    assert shorten("x" * 50, 10) == "x" * 9 + "…"
    assert len(shorten(PORT_TAKEN.message, FIX_MAX)) <= FIX_MAX


def test_paths_in_fixes_shrink_to_their_last_part() -> None:
    assert short_paths(f"set gateway.port in {CONFIG} to a free port") == (
        "set gateway.port in config.json to a free port"
    )
    assert short_paths("see https://example.org/a/b") == "see https://example.org/a/b"


@pytest.mark.parametrize(
    ("state", "colour"),
    [
        (ServerState.READY, TrayColour.GREEN),
        (ServerState.STARTING, TrayColour.AMBER),
        (ServerState.EXITED, TrayColour.AMBER),
        (ServerState.DEGRADED, TrayColour.AMBER),
        (ServerState.PARKED, TrayColour.RED),
        (ServerState.STOPPED, TrayColour.GREY),
        (ServerState.UNREACHABLE, TrayColour.AMBER),
        (ServerState.NEEDS_SIGN_IN, TrayColour.WAITING),
    ],
)
def test_a_servers_own_colour_is_the_tray_colour_its_state_would_cause(
    state: ServerState, colour: TrayColour
) -> None:
    assert state_colour(state) is colour
    if state is not ServerState.STOPPED:
        assert tray_status(snapshot(server("a", state, reason="x"))).colour is colour


def test_a_sleeping_server_is_calm_the_tray_stays_green_and_says_it_sleeps() -> None:
    snap = TraySnapshot(
        version="0",
        config_path=CONFIG,
        servers=(
            builders.server("fs", ServerState.READY),
            builders.server("lazy", ServerState.SLEEPING),
        ),
    )

    status = tray_status(snap)

    assert state_colour(ServerState.SLEEPING) is TrayColour.GREEN
    assert status.colour is TrayColour.GREEN
    assert status.cause == "1 server ready, 1 sleeping"


def test_an_unreachable_remote_turns_the_tray_amber_naming_what_failed_and_the_next_try() -> None:
    snap = snapshot(
        builders.server("fs", ServerState.READY),
        builders.server(
            "tracker",
            ServerState.UNREACHABLE,
            remote=True,
            retry_in=8.2,
            last_error="generation 3 unreachable: could not connect: refused (https://t.example/mcp)",
        ),
    )

    status = tray_status(snap)

    assert status.colour is TrayColour.AMBER
    assert status.cause.startswith("tracker unreachable: could not connect"), status.cause
    assert "tried again in 8 s" in status.cause
    assert status.fix is not None and "mcp-tray respawn tracker" in status.fix
