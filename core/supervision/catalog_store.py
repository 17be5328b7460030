"""An on-demand server's catalog on disk: what its last run offered, kept while it sleeps.

One file per server under the state folder (``catalogs/NAME.json``), written
with ``write_private`` after every handshake and listing of an on-demand
server. It is keyed by a hash of what decides what the server offers (its
command, args, the NAMES of its env, its cwd and its pinned era; values of
the env stay out, so no secret lands in the file): an edited entry finds a
key that does not match, and starts its server to learn again.

The file is read as hostile input (core.settings.filereader: no link, no
FIFO, bounded) and checked field by field: anything else is no catalog, said
in the server's log, and the server starts to learn it afresh.
"""

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeGuard

from core.base.errors import ConfigError
from core.platform.files import write_private
from core.settings.config import ServerConfig
from core.settings.filereader import Role, nested_deeper, parse_json, read_text
from core.supervision.catalog import Catalog, KeptCatalog

#: The folder under the state folder.
CATALOGS_DIR: Final = "catalogs"
#: Bumped when the file's shape changes: an older one is no catalog.
CATALOG_FORMAT: Final = 1
#: A catalog of 500 tools with long schemas is well under this.
MAX_CATALOG_BYTES: Final = 16 * 1024 * 1024
#: Tool schemas nest, but not this deep.
MAX_CATALOG_NESTING: Final = 64
_FIX: Final = "delete it: mcp-tray learns the catalog again at the server's next start"
_ROLE: Final = Role(
    limit=MAX_CATALOG_BYTES,
    noun="a server's kept catalog",
    expected="the file mcp-tray writes",
    kind="a kept catalog",
    missing_fix=None,
    too_big_fix=_FIX,
    encoding_fix=_FIX,
    follow_symlinks=False,
    syntax_fix=_FIX,
)


def catalog_key(config: ServerConfig) -> str:
    """What the catalog depends on, hashed: a changed entry is a changed key."""
    what = [config.command, list(config.args), sorted(config.env), config.cwd, config.protocol]
    if config.remote is not None:
        what += [config.remote.url, config.remote.transport]
    return hashlib.sha256(json.dumps(what).encode()).hexdigest()


def catalog_file(folder: Path, name: str) -> Path:
    return folder / f"{name}.json"


def save_catalog(folder: Path, config: ServerConfig, catalog: Catalog) -> None:
    body = {"format": CATALOG_FORMAT, "key": catalog_key(config), "catalog": catalog.kept()}
    write_private(catalog_file(folder, config.name), json.dumps(body))


@dataclass(frozen=True)
class Loaded:
    """A kept catalog, or why there is none to use."""

    catalog: KeptCatalog | None
    why_not: str


def load_catalog(folder: Path, config: ServerConfig) -> Loaded:
    path = catalog_file(folder, config.name)
    try:
        text = read_text(path, _ROLE)
        if text is None:
            return Loaded(None, "no catalog kept yet")
        data = parse_json(text, path, _ROLE)
        if nested_deeper(data, MAX_CATALOG_NESTING):
            raise ConfigError(path, f"nested deeper than {MAX_CATALOG_NESTING} levels", fix=_FIX)
        if not isinstance(data, dict) or data.get("format") != CATALOG_FORMAT:
            raise ConfigError(path, f"not a catalog of format {CATALOG_FORMAT}", fix=_FIX)
        if data.get("key") != catalog_key(config):
            return Loaded(None, f"its entry changed since {path} was kept")
        return Loaded(_checked(path, data.get("catalog")), "")
    except ConfigError as exc:
        return Loaded(None, f"the kept catalog cannot be used: {exc}")


def _checked(path: Path, raw: object) -> KeptCatalog:
    def bad(what: str) -> ConfigError:
        return ConfigError(path, f"catalog.{what} is not what mcp-tray writes", fix=_FIX)

    if not isinstance(raw, dict):
        raise bad("(the whole)")
    version = raw.get("version")
    instructions = raw.get("instructions")
    if not isinstance(version, str | None):
        raise bad("version")
    if not isinstance(instructions, str | None):
        raise bad("instructions")
    if not isinstance(raw.get("modern"), bool):
        raise bad("modern")
    objects: dict[str, dict[str, Any]] = {}
    for key in ("discover", "capabilities", "server_info"):
        value = raw.get(key)
        if not isinstance(value, dict):
            raise bad(key)
        objects[key] = value
    tools = raw.get("listed_tools")
    if not _rows(tools):
        raise bad("listed_tools")
    lists = raw.get("lists")
    if not isinstance(lists, dict) or not all(_rows(rows) for rows in lists.values()):
        raise bad("lists")
    hints = raw.get("hints")
    if not isinstance(hints, dict) or not all(isinstance(h, dict) for h in hints.values()):
        raise bad("hints")
    return KeptCatalog(
        version=version,
        modern=raw["modern"],
        discover=objects["discover"],
        capabilities=objects["capabilities"],
        server_info=objects["server_info"],
        instructions=instructions,
        listed_tools=tools,
        lists=lists,
        hints=hints,
    )


def _rows(value: object) -> TypeGuard[list[dict[str, Any]]]:
    return isinstance(value, list) and all(isinstance(row, dict) for row in value)
