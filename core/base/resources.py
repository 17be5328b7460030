"""Where mcp-tray's own files are: the tray icons, the demo config and servers, the desktop entry template.

They are ``resources/`` and ``packaging/mcp-tray.desktop.in`` of the source
tree, and every way of running mcp-tray keeps that layout under one folder,
the data root:

- an installed wheel (pip, pipx, ``uv tool``): the package ``mcp_tray_data``
  in site-packages, which pyproject.toml maps onto the project's root and
  fills with these files only;
- an editable install: the same package, which is then the checkout itself;
- a checkout run without installing, and the PyInstaller bundle (whose
  ``_internal/`` holds resources/ and packaging/, see packaging/mcp-tray.spec):
  the folder that holds ``core/``.
"""

import importlib.util
from pathlib import Path
from typing import Final

#: The wheel's data package (pyproject.toml, ``[tool.setuptools] package-dir``).
DATA_PACKAGE: Final = "mcp_tray_data"
#: The folder that holds core/: a checkout's root, or the bundle's _internal/.
_BESIDE_CORE: Final = Path(__file__).resolve().parents[2]


def data_root() -> Path:
    """The folder that holds ``resources/`` and ``packaging/``."""
    spec = importlib.util.find_spec(DATA_PACKAGE)
    locations = (spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        if (Path(location) / "resources").is_dir():
            return Path(location)
    return _BESIDE_CORE


def icons_dir() -> Path:
    return data_root() / "resources" / "icons"


def demo_config() -> Path:
    """The bundled demo config (``make run`` starts the tray on it)."""
    return data_root() / "resources" / "demo" / "config.json"


def desktop_template() -> Path:
    return data_root() / "packaging" / "mcp-tray.desktop.in"
