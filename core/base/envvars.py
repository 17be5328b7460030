"""The environment variables mcp-tray reads, as named constants.

This set is also the allow-list of the environment diagnostics: a key that
starts with ``MCP_TRAY_`` and is not listed here is reported as an
unsupported override. No prefix is admitted, so a typo such as
``MCP_TRAY_CLIENT_SESION`` is caught instead of silently ignored.
"""

from typing import Final

#: Moves config, state, logs and runtime files under one folder (tests use it).
HOME_ENV: Final = "MCP_TRAY_HOME"
#: Set by mcp-tray in every child's environment: ``<tray instance id>/<child id>``,
#: so a sweep after a crash can find leftovers of a dead tray, and a stop can
#: find the descendants of one child that left its process group.
OWNER_ENV: Final = "MCP_TRAY_OWNER"
#: Between the tray instance id and the child id in ``OWNER_ENV``.
TAG_SEPARATOR: Final = "/"
#: Client identity a stdio bridge registers as (else: its parent process).
CLIENT_NAME_ENV: Final = "MCP_TRAY_CLIENT"
CLIENT_INSTANCE_ENV: Final = "MCP_TRAY_CLIENT_INSTANCE"
CLIENT_SESSION_ENV: Final = "MCP_TRAY_CLIENT_SESSION"
#: Overrides the worker heartbeat interval (seconds); capped below the TTL.
HEARTBEAT_INTERVAL_ENV: Final = "MCP_TRAY_HEARTBEAT_INTERVAL"
#: Overrides the worker heartbeat TTL (seconds).
HEARTBEAT_TTL_ENV: Final = "MCP_TRAY_HEARTBEAT_TTL"
#: The mcp-tray version a process runs, exported to children and bridges so a
#: stale runtime can be recognised from outside.
RUNTIME_VERSION_ENV: Final = "MCP_TRAY_RUNTIME_VERSION"
#: Forces headless mode even when a display is available.
HEADLESS_ENV: Final = "MCP_TRAY_HEADLESS"
#: How long a bridge's request waits for an absent tray (seconds).
RECONNECT_SECONDS_ENV: Final = "MCP_TRAY_RECONNECT_SECONDS"
#: ``0`` keeps a bridge that finds no tray from starting one (core.bridge.autostart).
AUTOSTART_ENV: Final = "MCP_TRAY_AUTOSTART"
#: Which set of OS backends runs: ``native`` (the default) or ``portable``
#: (core.platform.backends).
PLATFORM_ENV: Final = "MCP_TRAY_PLATFORM"
#: Set in the tray's own environment (never a child's) to its instance id, so
#: what the tray starts for the user is told apart from a server's escapee.
INSTANCE_ENV: Final = "MCP_TRAY_INSTANCE"

#: Every MCP_TRAY_* variable mcp-tray consumes; the diagnostics' allow-list.
RECOGNIZED_ENV_KEYS: Final = frozenset(
    {
        HOME_ENV,
        OWNER_ENV,
        CLIENT_NAME_ENV,
        CLIENT_INSTANCE_ENV,
        CLIENT_SESSION_ENV,
        HEARTBEAT_INTERVAL_ENV,
        HEARTBEAT_TTL_ENV,
        RUNTIME_VERSION_ENV,
        HEADLESS_ENV,
        RECONNECT_SECONDS_ENV,
        AUTOSTART_ENV,
        PLATFORM_ENV,
        INSTANCE_ENV,
    }
)

#: The namespace the diagnostics police.
ENV_PREFIX: Final = "MCP_TRAY_"
