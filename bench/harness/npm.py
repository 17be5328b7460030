"""npm packages a bench installs for itself, into a folder of the checkout (gitignored),
never globally: the folder made an npm project of its own, and npm's environment."""

import json
import os
from pathlib import Path


def private_package(folder: Path, name: str, description: str) -> None:
    """A package.json that makes ``folder`` an npm project, so ``npm install`` installs there."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "package.json").write_text(
        json.dumps({"name": name, "private": True, "description": description}, indent=2) + "\n"
    )


def npm_env(folder: Path, cache: Path, **settings: str) -> dict[str, str]:
    """This environment for npm in ``folder``: its cache in ``cache``, quiet, plus ``settings``
    (more ``npm_config_*``)."""
    env = dict(os.environ)
    env.update(
        npm_config_cache=str(cache),
        npm_config_update_notifier="false",
        npm_config_fund="false",
        npm_config_audit="false",
        npm_config_loglevel="warn",
        **settings,
    )
    # The node@22 package's bin comes first, so its install script runs on Node 22 too.
    env["PATH"] = f"{folder / 'node_modules' / '.bin'}{os.pathsep}{env.get('PATH', '')}"
    return env
