"""How much a finding weighs: one rule for the CLI, the tray and the API.

A finding (a doctor diagnostic, one of the running tray's warnings, a note
about mcp-tray itself) has a family: ``unsupported-env``, ``port-taken``,
``token-storage``... Its family alone decides its weight:

- **warning**: something to fix. ``mcp-tray doctor`` exits 1, the tray
  icon turns amber (or worse), the Warnings tab and ``mcp-tray status``
  count it, ``/api/v1/warnings`` marks it ``"severity": "warning"``.
- **advice**: worth knowing, but nothing of mcp-tray's is wrong (a worker
  process whose environment the OS would not show): listed, never counted,
  never amber, and the exit code stays 0.
- **info**: a fact for the record (the API token kept in a 0600 file for
  want of a keyring; the platform backends in use): listed as ``info:``,
  otherwise as advice.

A family not named below is a warning, so a new kind of problem cannot slip
through by being left off a list. Families are compared without the ``:``
that the doctor's texts put after them.
"""

import enum
from collections.abc import Iterable
from typing import Final


class Severity(enum.Enum):
    #: Something to fix: doctor exits 1, the tray turns amber, counted.
    WARNING = "warning"
    #: Worth knowing, nothing to fix in mcp-tray: listed, not counted.
    ADVICE = "advice"
    #: A fact for the record: listed, not counted.
    INFO = "info"


#: A worker's environment could not be read (another user's, a hardened process).
ENV_SCAN_FAILED: Final = "env-scan-failed"
#: The API token lives in a 0600 file because no OS keyring works here.
TOKEN_STORAGE: Final = "token-storage"
#: Which OS backends this environment runs (``doctor`` lists them).
PLATFORM: Final = "platform"
#: Where the tray's PATH came from: as started, or its login shell's (``doctor``).
PATH_ORIGIN: Final = "path"

#: A shared server asks for roots: it runs one child per workspace (handled).
ROOTS_PER_WORKSPACE: Final = "roots-per-workspace"
#: A server that asks for roots is pinned shared: each new session waits for its roots.
SHARED_ROOTS: Final = "shared-roots"

_WEIGHTS: Final = {
    ENV_SCAN_FAILED: Severity.ADVICE,
    SHARED_ROOTS: Severity.ADVICE,
    ROOTS_PER_WORKSPACE: Severity.INFO,
    TOKEN_STORAGE: Severity.INFO,
    PLATFORM: Severity.INFO,
    PATH_ORIGIN: Severity.INFO,
}


def severity(family: str) -> Severity:
    """The weight of a finding of ``family`` (``"stale-runtime:"`` or ``"stale-runtime"``)."""
    return _WEIGHTS.get(family.rstrip(":"), Severity.WARNING)


def is_warning(family: str) -> bool:
    return severity(family) is Severity.WARNING


def count_warnings(families: Iterable[str]) -> int:
    """How many of ``families`` are warnings: what every surface's count shows."""
    return sum(1 for family in families if is_warning(family))
