"""One rule weighs every finding, and one table holds the exit codes.

Strategy: each family mcp-tray reports is put through every surface that
weighs findings, with no process and no Qt: ``core.base.severity`` itself,
the command line's split (what ``status`` counts and ``doctor`` exits 1 on),
the tray's colour (app/status.py, pure), and the API row's ``severity``. They
must agree family by family. The exit codes: docs/cli.md's sentence is rendered
from ``core.base.exitcodes``, and no other module of core/ or app/ defines an
exit code of its own.
"""

import re

import pytest

from app.status import TrayColour, tray_status
from core.base.exitcodes import MEANINGS
from core.base.severity import Severity, severity
from core.base.snapshot import TraySnapshot, WarningSnapshot
from core.base.states import ServerState
from core.cli.findings import by_severity
from tests.app.builders import server
from tests.support import paths

REPO = paths.REPO

#: Every family mcp-tray reports, and its weight.
FAMILIES = [
    ("unsupported-env:", Severity.WARNING),
    ("stale-runtime:", Severity.WARNING),
    ("secret-literal:", Severity.WARNING),
    ("port-taken", Severity.WARNING),
    ("registry", Severity.WARNING),
    ("config-error", Severity.WARNING),
    ("ambiguous-request", Severity.WARNING),
    ("parked", Severity.WARNING),
    ("session-tripped", Severity.WARNING),
    ("env-scan-failed:", Severity.ADVICE),
    ("token-storage", Severity.INFO),
    ("platform", Severity.INFO),
    # A family nobody listed is a warning: a new problem cannot slip through.
    ("something-new", Severity.WARNING),
]


@pytest.mark.parametrize(("family", "weight"), FAMILIES)
def test_the_cli_the_tray_and_the_api_weigh_a_family_alike(family: str, weight: Severity) -> None:
    finding = WarningSnapshot(family, "s", "it is so.", "do this.", f"{family} it is so.")
    split = by_severity([{"family": family, "subject": "s", "text": finding.text}])
    ready = server("a", ServerState.READY)
    colour = tray_status(TraySnapshot("0", "c.json", (ready,), None, warnings=(finding,))).colour

    assert severity(family) is weight
    assert finding.to_json()["severity"] == weight.value
    assert len(split.warnings) == (weight is Severity.WARNING)
    assert len(split.advice) == (weight is Severity.ADVICE)
    assert len(split.info) == (weight is Severity.INFO)
    assert (colour is TrayColour.AMBER) == (weight is Severity.WARNING)


def test_the_command_line_page_lists_the_exit_codes_of_the_one_table() -> None:
    sentence = ", ".join(f"{code} {meaning}" for code, meaning in MEANINGS)
    page = " ".join((REPO / "docs" / "cli.md").read_text(encoding="utf-8").split())
    assert f"Exit codes: {sentence}." in page


def test_no_module_but_exitcodes_defines_an_exit_code() -> None:
    defined = re.compile(r"^\s*(?:EXIT|DOCTOR)_\w+\s*(?::\s*Final\s*)?=\s*\d+\s*$", re.MULTILINE)
    found = [
        str(path.relative_to(REPO))
        for folder in ("core", "app")
        for path in sorted((REPO / folder).rglob("*.py"))
        if path.name != "exitcodes.py" and defined.search(path.read_text(encoding="utf-8"))
    ]
    assert found == []
