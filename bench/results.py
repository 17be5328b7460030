"""The figures each bench printed last, kept in bench/results/, and the pages that quote them.

``python bench/results.py`` prints the table rendered from the committed
records; ``--write`` puts it into docs/measured.md between the two markers and
renders every figure quoted in README.md and docs/; ``--check`` exits 1 when a
page is not what the records render
(tests/test_measured.py runs the same check in ``make test``). The records
themselves, and ``record`` that a bench ends with: bench/harness/records.py.
"""

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

# Run as a script from a checkout: the checkout first on sys.path, for `bench` and `core`.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness.files import ROOT
from bench.harness.records import load_records, render, rendered_page, stale_pages


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--write", action="store_true", help="render the table and every quoted figure"
    )
    mode.add_argument("--check", action="store_true", help="exit 1 if a page differs")
    args = parser.parse_args(argv)
    records = load_records()
    if args.write:
        for page in stale_pages(records):
            rendered = rendered_page(page, records)
            page.write_text(rendered, encoding="utf-8")
            print(f"rendered the figures of {page.relative_to(ROOT)}")
        return 0
    if args.check:
        stale = stale_pages(records)
        for page in stale:
            print(f"{page.relative_to(ROOT)} differs from what the records render")
        if not stale:
            print("every page says what the records render")
        return 1 if stale else 0
    print(render(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
