"""Where the repository and the tests' own files are: the one place a test finds a path from.

A test file may move between the packages of tests/ without a ``Path(__file__)``
count of parents to get wrong.
"""

from pathlib import Path
from typing import Final

#: The repository's root (what a clone holds).
REPO: Final = Path(__file__).resolve().parents[2]
TESTS: Final = REPO / "tests"
#: The MCP servers tests start as real children.
SERVERS: Final = TESTS / "servers"
#: Files tests read as given (clients' config files).
FIXTURES: Final = TESTS / "fixtures"
#: What tests share, scripts run as processes among it.
SUPPORT: Final = TESTS / "support"
