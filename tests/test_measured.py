"""README's "Measured" table is what the benches recorded, nothing typed by hand.

Strategy: bench/harness/records.py is imported (bench/ is a package; its
scripts put the checkout on sys.path). The committed records in
bench/results/ are rendered and compared with README's table, the way ``bench/results.py --check``
does; each row must carry the command that reproduces it, its date and
the load it ran under. ``record`` itself is run
into a temporary folder: its figures come back through the row templates,
and a template naming a figure the bench did not give is refused at once.
"""

import datetime
import json
import re
from pathlib import Path

import pytest

from bench.harness import records as results

REPO = Path(__file__).resolve().parents[1]


def test_readmes_measured_table_is_what_the_committed_records_render() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")

    table = results.readme_table(readme)

    assert table == results.render(results.load_records()), (
        "README's Measured table is stale: run .venv/bin/python bench/results.py --write"
    )


def test_every_row_of_the_table_names_its_command_its_date_and_the_load_then() -> None:
    rows = results.readme_table((REPO / "README.md").read_text(encoding="utf-8")).splitlines()[2:]

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
