"""Rows of a benchmark (dicts with the same keys) written as a CSV file; shared by the benchmark scripts."""
from __future__ import annotations

import csv
from pathlib import Path


def write_rows(rows: list[dict], path: Path | str) -> None:
    """``rows`` to ``path`` (CSV; the columns those of the first row), creating its folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
