"""The figures each bench printed last, kept in bench/results/, and README's table made of them.

A bench ends with ``record(name, command, figures, rows)``: it writes
``bench/results/NAME.json`` holding the command that reproduces the run,
the date, the machine (CPUs, load average), the figures as numbers, and the
rows it contributes to README's "Measured" table, each row's measured cell a
template over those figures (``"{exit_seen_p50_ms:.1f} ms"``). The numbers
are the bench's own; only their wording lives in the template.

bench/results.py is the command over these: it prints the table rendered from
the committed records, ``--write`` puts it into README.md between the two
markers, ``--check`` exits 1 when README's table is not what the records
render (tests/test_measured.py runs the same check in ``make test``).
"""

import datetime
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from bench.harness.files import ROOT

RESULTS: Final = ROOT / "bench" / "results"
README: Final = ROOT / "README.md"
BEGIN: Final = "<!-- measured:begin (bench/results.py --write renders this table) -->"
END: Final = "<!-- measured:end -->"
#: The table's rows come in this order of records; others follow by name.
ORDER: Final = (
    "recovery",
    "recovery-portable",
    "gateway",
    "ui",
    "large_results",
    "registry",
    "restart",
    "autostart",
    "slow_start",
    "killstorm",
    "scale-opens",
    "scale-calls",
    "floor",
    "gui_latency",
    "abuse",
)
HEADER: Final = "| figure | target | measured | command | date |\n|---|---|---|---|---|"


@dataclass(frozen=True)
class Row:
    """One line of README's table: what is measured, its target, and how to say the figure."""

    figure: str
    target: str
    #: A ``str.format`` template over the record's figures.
    measured: str

    def filled(self, **words: str) -> "Row":
        """This row with words that are not figures (a pace, a state) put into its template
        now, where ``{name}`` stands; the figures stay for ``record`` to format."""
        measured = self.measured
        for name, word in words.items():
            measured = measured.replace("{" + name + "}", word)
        return Row(self.figure, self.target, measured)


def utc_today() -> datetime.date:
    """Today in UTC: a record's date must not depend on the machine's time zone."""
    return datetime.datetime.now(datetime.UTC).date()


def record(
    name: str,
    command: str,
    figures: Mapping[str, float | int],
    rows: Sequence[Row],
    *,
    results: Path = RESULTS,
) -> Path:
    """Keep this run's figures as ``results/NAME.json`` and say where."""
    for row in rows:
        row.measured.format(**figures)  # a template naming a missing figure fails here, not later
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    data = {
        "bench": name,
        "command": command,
        "date": utc_today().isoformat(),
        "machine": f"{os.cpu_count()} CPUs, load average {load[0]:.1f}",
        "figures": dict(figures),
        "rows": [row.__dict__ for row in rows],
    }
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"{name}.json"
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"recorded: {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return path


def load_records(results: Path = RESULTS) -> list[dict[str, Any]]:
    """Every record, in README's order."""
    found = [json.loads(path.read_text(encoding="utf-8")) for path in results.glob("*.json")]

    def rank(data: dict[str, Any]) -> tuple[int, str]:
        name = str(data["bench"])
        return (ORDER.index(name) if name in ORDER else len(ORDER), name)

    return sorted(found, key=rank)


def render(records: Sequence[Mapping[str, Any]]) -> str:
    """README's table: one line per row of each record, with its command, its date and
    the machine's load then (a figure taken on a busy machine says so)."""
    lines = [HEADER]
    for data in records:
        for row in data["rows"]:
            measured = row["measured"].format(**data["figures"])
            when = f"{data['date']} ({data['machine']})"
            cells = (row["figure"], row["target"], measured, f"`{data['command']}`", when)
            lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines)


def readme_table(text: str) -> str:
    """What README holds between the markers."""
    start = text.index(BEGIN) + len(BEGIN)
    return text[start : text.index(END, start)].strip("\n")
