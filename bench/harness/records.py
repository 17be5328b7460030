"""The figures each bench printed last, kept in bench/results/, and the pages that quote them.

A bench ends with ``record(name, command, figures, rows)``: it writes
``bench/results/NAME.json`` holding the command that reproduces the run,
the date, the machine (CPUs, load average), the figures as numbers, and the
rows it contributes to the "Measured" table of docs/measured.md, each row's measured cell a
template over those figures (``"{exit_seen_p50_ms:.1f} ms"``). The numbers
are the bench's own; only their wording lives in the template.

A figure quoted in prose (README.md, any page of docs/) is rendered too: it
stands between ``<!-- figure BENCH.NAME:SPEC -->`` and ``<!-- /figure -->``
(``<!-- figure autostart.on_p50_s:.2f -->2.05<!-- /figure --> s``), and is
the record's figure, formatted with SPEC.

bench/results.py is the command over these: it prints the table rendered from
the committed records, ``--write`` puts it into docs/measured.md between the two
markers and renders every quoted figure, ``--check`` exits 1 when a page is not
what the records render (tests/test_measured.py runs the same check in ``make test``).
"""

import datetime
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from bench.harness.files import ROOT

RESULTS: Final = ROOT / "bench" / "results"
#: The page that holds the table.
MEASURED: Final = ROOT / "docs" / "measured.md"
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
#: A figure quoted in prose, and what it shows now.
FIGURE: Final = re.compile(
    r"<!-- figure (?P<bench>[\w-]+)\.(?P<name>\w+)(?P<spec>:[^ >]*)? -->(?P<shown>.*?)<!-- /figure -->"
)
HEADER: Final = "| figure | target | measured | command | date |\n|---|---|---|---|---|"


@dataclass(frozen=True)
class Row:
    """One line of the Measured table: what is measured, its target, and how to say the figure."""

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
    """Every record, in the table's order."""
    found = [json.loads(path.read_text(encoding="utf-8")) for path in results.glob("*.json")]

    def rank(data: dict[str, Any]) -> tuple[int, str]:
        name = str(data["bench"])
        return (ORDER.index(name) if name in ORDER else len(ORDER), name)

    return sorted(found, key=rank)


def render(records: Sequence[Mapping[str, Any]]) -> str:
    """The Measured table: one line per row of each record, with its command, its date and
    the machine's load then (a figure taken on a busy machine says so)."""
    lines = [HEADER]
    for data in records:
        for row in data["rows"]:
            measured = row["measured"].format(**data["figures"])
            when = f"{data['date']} ({data['machine']})"
            cells = (row["figure"], row["target"], measured, f"`{data['command']}`", when)
            lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines)


def page_table(text: str) -> str:
    """What the page holds between the table's markers."""
    start = text.index(BEGIN) + len(BEGIN)
    return text[start : text.index(END, start)].strip("\n")


def pages(root: Path = ROOT) -> list[Path]:
    """Every page that may quote a figure: README.md and docs/*.md."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def render_figures(text: str, records: Sequence[Mapping[str, Any]], where: str = "") -> str:
    """``text`` with each quoted figure shown as its record says; a figure no record
    has is refused, naming the page and what to write."""
    figures = {str(data["bench"]): data["figures"] for data in records}

    def shown(match: "re.Match[str]") -> str:
        bench, name, spec = match["bench"], match["name"], match["spec"] or ""
        if name not in figures.get(bench, {}):
            known = ", ".join(sorted(figures.get(bench, figures)))
            raise KeyError(
                f"{where or 'a page'} quotes figure {bench}.{name}, which no record in "
                f"bench/results/ holds (there: {known}); name one of those, or run the bench"
            )
        value = format(figures[bench][name], spec[1:])
        return f"<!-- figure {bench}.{name}{spec} -->{value}<!-- /figure -->"

    return FIGURE.sub(shown, text)


def rendered_page(page: Path, records: Sequence[Mapping[str, Any]], root: Path = ROOT) -> str:
    """What ``page`` says once its quoted figures (and, for docs/measured.md, the table)
    are what ``records`` render."""
    text = page.read_text(encoding="utf-8")
    rendered = render_figures(text, records, str(page.relative_to(root)))
    if page == root / MEASURED.relative_to(ROOT):
        rendered = with_table(rendered, render(records))
    return rendered


def stale_pages(records: Sequence[Mapping[str, Any]], root: Path = ROOT) -> list[Path]:
    """The pages whose table or quoted figures are not what ``records`` render."""
    return [
        page
        for page in pages(root)
        if rendered_page(page, records, root) != page.read_text(encoding="utf-8")
    ]


def with_table(text: str, table: str) -> str:
    start = text.index(BEGIN) + len(BEGIN)
    end = text.index(END, start)
    return f"{text[:start]}\n{table}\n{text[end:]}"
