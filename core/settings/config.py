"""The user's config: the ``mcpServers`` JSON that Claude Desktop and Cursor use.

Users paste what they have, so the server entries keep that shape
(``command``, ``args``, ``env``, ``cwd``); mcp-tray's own keys sit beside them
(``disabled``, ``retry``, ``keepalive_seconds``, ``sharing``). Every error
names the file, the line and key, and the fix; nothing half-loads.

Values of ``command``, ``args`` and ``cwd`` may use ``${python}`` (the
interpreter running mcp-tray, so bundled Python servers work from any venv),
``${configDir}`` (the folder of the config file), ``${stateDir}`` (mcp-tray's
state folder, for files a server keeps: the demo notes server's notebook) and
``${env:NAME}``. An env
value may hold ``${keyring:NAME}``, resolved from the OS keyring at spawn.

In the frozen one-folder bundle (``make bundle``) no Python interpreter
exists: ``sys.executable``, and so ``${python}``, is the bundle's ``mcp-tray``
launcher. Given a ``*.py`` file as its first argument the launcher runs that
script with the bundle's own Python and packages (``mcp`` included; see
packaging/entry.py), so the demo servers run from the bundle. A server that
needs other packages must name its own interpreter in ``command``.
"""

from pathlib import Path
from typing import Final

from core.settings.config_check import MAX_NESTING, did_you_mean, key_path, parse_config
from core.settings.config_model import (
    DEFAULT_GATEWAY_PORT,
    DEFAULT_KEEPALIVE_SECONDS,
    DEFAULT_MAX_BODY_BYTES,
    GATEWAY_KEYS,
    KEYRING_REF_RE,
    MAX_BODY_BYTES_CEILING,
    MAX_KEEPALIVE_SECONDS,
    MIN_KEEPALIVE_SECONDS,
    PROTOCOL_MODES,
    RETRY_POLICIES,
    SERVER_KEYS,
    SHARING_MODES,
    TOP_LEVEL_KEYS,
    GatewaySettings,
    RetryPolicy,
    ServerConfig,
    Sharing,
    TrayConfig,
    empty_config,
    valid_server_name,
)
from core.settings.filereader import Role, read_text

#: Far above any hand-written config (a hundred servers take a few KiB); a
#: bigger file is the wrong file, and reading it would only stall reloads.
MAX_CONFIG_BYTES: Final = 1024 * 1024
#: The config, to the hostile-file reader: what it may be, and what to do.
CONFIG_FILE: Final = Role(
    limit=MAX_CONFIG_BYTES,
    noun="its config",
    expected="a JSON file",
    kind="a config",
    missing="the config file does not exist",
    missing_fix='create it with {"mcpServers": {}} or pass --config with an existing file',
    too_big_fix="point at the right file: a config with a hundred servers takes a few KiB",
)


def load_config(path: Path) -> TrayConfig:
    """Read and check ``path``; raise ``ConfigError`` naming the first problem.

    Never blocks on what is not a regular file: a FIFO or a device renamed
    onto the config is refused without a read that could wait forever.
    """
    text = read_text(path, CONFIG_FILE)
    assert text is not None  # CONFIG_FILE has a missing_fix: a missing file raised
    return parse_config(text, path)


#: The model and the checker, for those that import them from here.
__all__ = [
    "CONFIG_FILE",
    "DEFAULT_GATEWAY_PORT",
    "DEFAULT_KEEPALIVE_SECONDS",
    "DEFAULT_MAX_BODY_BYTES",
    "GATEWAY_KEYS",
    "KEYRING_REF_RE",
    "MAX_BODY_BYTES_CEILING",
    "MAX_CONFIG_BYTES",
    "MAX_KEEPALIVE_SECONDS",
    "MAX_NESTING",
    "MIN_KEEPALIVE_SECONDS",
    "PROTOCOL_MODES",
    "RETRY_POLICIES",
    "SERVER_KEYS",
    "SHARING_MODES",
    "TOP_LEVEL_KEYS",
    "GatewaySettings",
    "RetryPolicy",
    "ServerConfig",
    "Sharing",
    "TrayConfig",
    "did_you_mean",
    "empty_config",
    "key_path",
    "load_config",
    "parse_config",
    "valid_server_name",
]
