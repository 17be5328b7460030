"""Findings as the command line shows them, weighed by core.base.severity.

``status`` counts the warnings and lists the rest; ``doctor`` prints the
warnings, then advice and information, and exits 1 only on a warning. A row
is a ``/api/v1/warnings`` row (or one the doctor made itself): ``family``,
``subject``, ``text``; the rule that weighs it is the tray's and the API's.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from core.base.errors import McpTrayError
from core.base.severity import Severity, severity
from core.cli.control_client import ControlClient

Row = dict[str, Any]


@dataclass
class Findings:
    warnings: list[Row] = field(default_factory=list)
    advice: list[Row] = field(default_factory=list)
    info: list[Row] = field(default_factory=list)

    def note_lines(self) -> list[str]:
        """Advice, then information, one ``advice:`` or ``info:`` line each."""
        return [f"advice: {row.get('text')}" for row in self.advice] + [
            f"info: {row.get('text')}" for row in self.info
        ]


def by_severity(rows: Iterable[Row]) -> Findings:
    """``rows`` sorted by weight, each marked with its ``severity``."""
    found = Findings()
    for row in rows:
        weight = severity(str(row.get("family", "")))
        row["severity"] = weight.value
        if weight is Severity.WARNING:
            found.warnings.append(row)
        elif weight is Severity.ADVICE:
            found.advice.append(row)
        else:
            found.info.append(row)
    return found


def warnings_of(client: ControlClient) -> list[Row]:
    """The running tray's findings, or none when it cannot say."""
    try:
        reply = client.request("GET", "/api/v1/warnings")
    except McpTrayError:
        return []
    rows = reply.body.get("warnings", []) if reply.ok else []
    return [row for row in rows if isinstance(row, dict)]
