"""The figures each bench printed last, kept in bench/results/, and README's table made of them.

``python bench/results.py`` prints the table rendered from the committed
records; ``--write`` puts it into README.md between the two markers;
``--check`` exits 1 when README's table is not what the records render
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
from bench.harness.records import BEGIN, END, README, load_records, readme_table, render


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="put the table into README.md")
    mode.add_argument("--check", action="store_true", help="exit 1 if README's table differs")
    args = parser.parse_args(argv)
    table = render(load_records())
    text = README.read_text(encoding="utf-8")
    if args.write:
        start = text.index(BEGIN) + len(BEGIN)
        end = text.index(END, start)
        README.write_text(f"{text[:start]}\n{table}\n{text[end:]}", encoding="utf-8")
        print(f"wrote the table into {README.relative_to(ROOT)}")
        return 0
    if args.check:
        same = readme_table(text) == table
        print("README's table is what the records render" if same else "README's table differs")
        return 0 if same else 1
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
