"""The "Measured" table of docs/measured.md, and every figure a page quotes in prose,
are what the benches recorded, nothing typed by hand.

Strategy: bench/harness/records.py is imported (bench/ is a package; its
scripts put the checkout on sys.path). The committed records in
bench/results/ are rendered and compared with the table and with every
figure quoted in README.md and docs/*.md, the way ``bench/results.py --check``
does; each row must carry the command that reproduces it, its date and the
load it ran under. A page quoting a figure no record holds is refused, in a
temporary checkout. ``record`` itself is run
into a temporary folder: its figures come back through the row templates,
and a template naming a figure the bench did not give is refused at once.
"""

import datetime
import json
import re
from pathlib import Path

import pytest

from bench.harness import records as results
from tests.support import paths

REPO = paths.REPO


MEASURED = REPO / "docs" / "measured.md"


def test_the_measured_table_is_what_the_committed_records_render() -> None:
    table = results.page_table(MEASURED.read_text(encoding="utf-8"))

    assert table == results.render(results.load_records()), (
        "docs/measured.md's table is stale: run .venv/bin/python bench/results.py --write"
    )


def test_every_figure_a_page_quotes_is_what_the_committed_records_render() -> None:
    records = results.load_records()
    quoted = [
        match
        for page in results.pages()
        for match in results.FIGURE.finditer(page.read_text(encoding="utf-8"))
    ]

    assert len(quoted) >= 5  # the pages do quote figures: this check checks something
    assert [str(p.relative_to(REPO)) for p in results.stale_pages(records)] == [], (
        "a page's figures are stale: run .venv/bin/python bench/results.py --write"
    )


def test_a_quoted_figure_is_rendered_from_its_record_with_its_format(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "speed.md"
    page.write_text(
        "a call costs <!-- figure scale-calls.cpu_per_call_ms:.2f -->9.99<!-- /figure --> ms, "
        "<!-- figure scale-calls.calls_per_second:,.0f -->1<!-- /figure --> calls/s\n",
        encoding="utf-8",
    )
    (tmp_path / "README.md").write_text("no figures\n", encoding="utf-8")
    records = [
        {
            "bench": "scale-calls",
            "figures": {"cpu_per_call_ms": 0.2849, "calls_per_second": 3189.26},
        }
    ]

    assert results.stale_pages(records, tmp_path) == [page]
    assert results.rendered_page(page, records, tmp_path) == (
        "a call costs <!-- figure scale-calls.cpu_per_call_ms:.2f -->0.28<!-- /figure --> ms, "
        "<!-- figure scale-calls.calls_per_second:,.0f -->3,189<!-- /figure --> calls/s\n"
    )


def test_a_page_quoting_a_figure_no_record_holds_is_refused_naming_the_page(
    tmp_path: Path,
) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(
        "answered in <!-- figure autostart.p50_s:.1f -->7<!-- /figure --> s\n", encoding="utf-8"
    )
    records = [{"bench": "autostart", "figures": {"on_p50_s": 2.05}}]

    with pytest.raises(KeyError, match=r"README\.md quotes figure autostart\.p50_s.*on_p50_s"):
        results.stale_pages(records, tmp_path)


def test_every_row_of_the_table_names_its_command_its_date_and_the_load_then() -> None:
    rows = results.page_table(MEASURED.read_text(encoding="utf-8")).splitlines()[2:]

    assert rows
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split(" | ")]
        command, when = cells[-2], cells[-1]
        assert re.fullmatch(r"`(\S+=\S+ )?\.venv/bin/python bench/\w+\.py[^`]*`", command), row
        stamp = re.fullmatch(r"(\S+) \(\d+ CPUs, load average [\d.]+\)", when)
        assert stamp is not None, row
        assert datetime.date.fromisoformat(stamp.group(1)) <= results.utc_today(), row


def test_a_record_keeps_the_figures_and_the_table_says_them_in_its_words(tmp_path: Path) -> None:
    row = results.Row("exit seen, p50", "< 20 ms", "{p50_ms:.1f} ms of {kills} kills")
    command = ".venv/bin/python bench/recovery.py --kills 7"

    path = results.record(
        "recovery", command, {"p50_ms": 11.04, "kills": 7}, [row], results=tmp_path
    )

    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["figures"] == {"p50_ms": 11.04, "kills": 7}
    assert data["command"] == command and data["date"] == results.utc_today().isoformat()
    when = f"{data['date']} ({data['machine']})"
    [line] = results.render(results.load_records(tmp_path)).splitlines()[2:]
    assert line == f"| exit seen, p50 | < 20 ms | 11.0 ms of 7 kills | `{command}` | {when} |"


def test_a_row_naming_a_figure_the_bench_did_not_give_is_refused(tmp_path: Path) -> None:
    row = results.Row("f", "t", "{missing:.1f} ms")

    with pytest.raises(KeyError, match="missing"):
        results.record("x", "cmd", {"present": 1.0}, [row], results=tmp_path)

    assert not list(tmp_path.iterdir())
