"""Check that two renderings of the tables carry the same numbers: ``check_table_numbers.py OLD NEW``.

For every ``.md``, ``.csv`` and ``.tex`` file in either directory it extracts the numbers (and the ✓/✗ marks)
of each table cell (Markdown/LaTeX rows: the row label and every non-empty cell; CSV: every line) and compares them in
order. Layout, legends, captions and provenance lines (text outside table rows) are ignored, and so are
table rows with no non-empty cell besides their label (an empty block). Exit 0 when every file carries the
same numbers, 1 otherwise (the differing rows are printed).

``REPORT.md`` is not compared: it is prose about the tables (its numbers are checked against the runs by
tests/test_report.py), and the figures are not tables.

Used to show that a change to ``lgcexp/tables.py`` changes no number, e.g.::

    cp -r results/tables /tmp/old && lgcexp-tables --from-csv results/runs.csv --out results/tables
    python scripts/check_table_numbers.py /tmp/old results/tables
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

#: files beside the tables that are not tables
NOT_TABLES = {"REPORT.md"}

#: a number, or a within-tolerance mark (they must not change either)
NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?|[✓✗]")


def _cells(line: str, sep: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split(sep)]


def rows(path: Path) -> list[tuple[str, ...]]:
    """The numbers of each table row of ``path``, as tuples of the cells' number strings."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if path.suffix == ".csv":
            cells = line.split(",")
        elif path.suffix == ".md":
            if not line.startswith("|") or set(line) <= set("|-: ") or line.startswith("| Noise |"):
                continue
            cells = _cells(line, "|")
        elif path.suffix == ".tex":
            if "&" not in line or line.lstrip().startswith("Noise &"):
                continue
            cells = _cells(line.replace(r"\\", ""), "&")
        else:
            continue
        if path.suffix != ".csv" and not any(cells[1:]):
            continue  # only a row label: an empty row carries no value
        out.append(tuple(" ".join(NUMBER.findall(c)) for c in cells))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", type=Path, help="folder of the tables before (e.g. a copy of results/tables)")
    ap.add_argument("new", type=Path, help="folder of the tables after")
    a = ap.parse_args(argv)
    old, new = a.old, a.new
    names = sorted({p.name for d in (old, new) for p in d.iterdir()
                    if p.suffix in (".md", ".csv", ".tex") and p.name not in NOT_TABLES})
    bad = n_rows = n_numbers = 0
    for name in names:
        a = rows(old / name) if (old / name).exists() else None
        b = rows(new / name) if (new / name).exists() else None
        if a is None or b is None:
            print(f"{name}: only in {'new' if a is None else 'old'}")
            bad += 1
            continue
        n_rows += len(a)
        n_numbers += sum(len(" ".join(r).split()) for r in a)
        if a != b:
            bad += 1
            print(f"{name}: numbers differ")
            for i, (ra, rb) in enumerate(zip(a, b)):
                if ra != rb:
                    print(f"  row {i}: {ra} != {rb}")
            if len(a) != len(b):
                print(f"  {len(a)} rows in old, {len(b)} in new")
    print(f"{len(names)} files, {n_rows} table rows, {n_numbers} numbers and marks compared: "
          + ("all the same" if not bad else f"{bad} file(s) differ"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
