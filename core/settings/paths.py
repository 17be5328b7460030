"""Where mcp-tray keeps its files.

platformdirs picks the per-user folders; ``MCP_TRAY_HOME`` moves all of them
under one folder (config/, state/, logs/, run/), which is how tests and
parallel instances stay apart.
"""

import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from core.base.envvars import HOME_ENV
from core.platform.files import private_dirs

APP_NAME = "mcp-tray"


@dataclass(frozen=True)
class Paths:
    config_dir: Path
    state_dir: Path
    log_dir: Path
    runtime_dir: Path

    @property
    def config_file(self) -> Path:
        return self.config_dir / "config.json"

    @property
    def runtime_file(self) -> Path:
        """Port, pid and instance id of the running tray (written at start)."""
        return self.state_dir / "runtime.json"

    @property
    def token_file(self) -> Path:
        return self.state_dir / "token"

    @property
    def lock_file(self) -> Path:
        """Held with flock by the one running instance."""
        return self.state_dir / "instance.lock"

    @property
    def autostart_lock(self) -> Path:
        """Held by the one bridge that decides whether to start the tray (core.bridge.autostart)."""
        return self.state_dir / "autostart.lock"

    @property
    def autostart_log(self) -> Path:
        """What a tray started by a bridge printed, and which bridge started it."""
        return self.log_dir / "autostart.log"

    @property
    def registry_file(self) -> Path:
        return self.state_dir / "registry.sqlite"

    def sign_in_file(self, server: str) -> Path:
        """A remote's sign-in where no OS keyring works (0600, as the API token's file)."""
        return self.state_dir / "sign-ins" / f"{server}.json"

    def server_log(self, server: str) -> Path:
        return self.log_dir / f"{server}.log"

    def ensure(self) -> "Paths":
        """Make the folders, each missing level private whatever the umask."""
        for folder in (self.config_dir, self.state_dir, self.log_dir, self.runtime_dir):
            private_dirs(folder)
        return self


def default_paths(environ: "os._Environ[str] | dict[str, str] | None" = None) -> Paths:
    env = os.environ if environ is None else environ
    home = env.get(HOME_ENV)
    if home:
        root = Path(home).expanduser().resolve()
        return Paths(root / "config", root / "state", root / "logs", root / "run")
    xdg_runtime = env.get("XDG_RUNTIME_DIR")
    # user_runtime_dir warns when XDG_RUNTIME_DIR is unset; fall back quietly.
    runtime = (
        Path(xdg_runtime) / APP_NAME
        if xdg_runtime
        else Path(platformdirs.user_state_dir(APP_NAME)) / "run"
    )
    return Paths(
        Path(platformdirs.user_config_dir(APP_NAME)),
        Path(platformdirs.user_state_dir(APP_NAME)),
        Path(platformdirs.user_log_dir(APP_NAME)),
        runtime,
    )
