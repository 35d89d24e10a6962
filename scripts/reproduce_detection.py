#!/usr/bin/env python
"""The label-issue detector tables of docs/label_issues.md from committed rows: ``make reproduce-detection``
(reruns), ``make tables-detection`` (``--tables-only``: rebuilds from the committed rows, nothing rerun).

Two tables, each from its per-run rows in ``results/label_issues/``:

- the detection table (``scripts/label_issues_table.py``): ``detection_runs.csv`` -> ``detection_table.{md,csv}``;
- realistic noise, every point labelled (``python -m benchmarks detect_realistic``): ``detect_realistic_<part>.csv``
  (one file per invocation, rows as the benchmark writes them plus the ``cleanlab`` version it ran with) ->
  ``detect_realistic.md`` (the benchmark's own ``write_md`` over all parts), and each of its
  ``## <data set>, noise=<model>`` tables into docs/label_issues.md's block
  ``<!-- detection-table: <data set>, noise=<model> -->`` ... ``<!-- /detection-table -->``.

- the count and the flags at low noise rates, every point labelled (``python -m benchmarks low_rates``):
  ``low_rates_<part>.csv`` -> ``low_rates.md`` (the benchmark's ``write_md`` over all parts) and each of its
  ``## low rates, <data set> (<k> seeds)`` tables into the block ``<!-- detection-table: low rates, <data set> -->``.

``--quick`` reruns the digits parts only (about 30 min on 2 shared cores); the ISOLET and MNIST parts are the
commands of docs/label_issues.md (hours) and keep their committed rows until rerun.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "label_issues"
DOC = ROOT / "docs" / "label_issues.md"
DETECTORS = ["graph", "lgc+mlp", "knn+cleanlab", "lr+cleanlab"]
#: part -> the benchmark's arguments (docs/label_issues.md, "Realistic noise, every point labelled")
PARTS = {
    "digits": ["--datasets", "digits", "--seeds", "5"],
    "digits_vae": ["--datasets", "digits", "--seeds", "5", "--features", "vae"],
    "isolet": ["--datasets", "isolet", "--seeds", "5", "--lr-pca", "100"],
    "isolet_vae": ["--datasets", "isolet", "--seeds", "3", "--lr-pca", "100", "--features", "vae"],
    "mnist": ["--datasets", "--mnist", "--seeds", "5", "--lr-pca", "50"],
    "mnist_vae": ["--datasets", "--mnist", "--seeds", "2", "--lr-pca", "50", "--features", "vae"],
}
#: part -> ``python -m benchmarks low_rates`` arguments (docs/label_issues.md, "How many labels are wrong")
LOW_PARTS = {
    "low_rates_digits": ["--datasets", "digits", "--seeds", "5"],
    "low_rates_isolet": ["--datasets", "isolet", "--seeds", "5", "--rates", "0.01", "0.02", "0.05", "0.1", "0.2",
                         "0.4"],
    "low_rates_mnist": ["--datasets", "mnist_test", "--seeds", "5", "--rates", "0.005", "0.01", "0.02", "0.05",
                        "0.2"],
}
QUICK = ["digits", "digits_vae", "low_rates_digits"]
_WRITE_MD = ("import json, sys; from pathlib import Path; from benchmarks.detect_realistic import write_md; "
             "a = json.load(sys.stdin); write_md(a['rows'], Path(a['path']), a['clv'])")
_WRITE_LOW_MD = ("import json, sys; from pathlib import Path; from benchmarks.low_rates import write_md; "
                 "a = json.load(sys.stdin); write_md(a['rows'], Path(a['path']))")
_BLOCK = re.compile(r"(<!-- detection-table: (?P<name>[^>]+?) -->\n)(?P<body>.*?)(<!-- /detection-table -->)", re.S)


def realistic_rows(out: Path = OUT) -> tuple[list[dict], str]:
    """(rows, cleanlab version(s)) of every committed ``detect_realistic_<part>.csv``, parts in name order."""
    frames = [pd.read_csv(p) for p in sorted(out.glob("detect_realistic_*.csv"))]
    if not frames:
        return [], ""
    df = pd.concat(frames, ignore_index=True)
    clv = ", ".join(dict.fromkeys(df.pop("cleanlab").astype(str))) if "cleanlab" in df else "?"
    df["features"] = df["features"].fillna("raw")
    return df.to_dict("records"), clv


def _render(script: str, payload: dict, path: Path, heading: str, plain: tuple[str, ...] = ()) -> dict[str, str]:
    """Run a benchmark's own renderer (``script`` reads ``payload`` on stdin and writes ``path``; imported from
    the repository root: python -c puts the working directory first), then cut ``path`` into its
    ``## <name> (<k> seeds)`` sections whose name matches ``heading``, and its ``## <name>`` sections named in
    ``plain``: {name: doc block}."""
    subprocess.run([sys.executable, "-c", script], input=json.dumps(payload, default=lambda o: o.item()),
                   text=True, cwd=ROOT, check=True)
    blocks = {}
    for part in path.read_text().split("\n## ")[1:]:
        head, _, body = part.partition("\n")
        m = re.match(rf"(?P<name>{heading}) \((?P<seeds>[^)]*seeds?)\)$", head)
        if m or head in plain:
            blocks[m.group("name") if m else head] = f"**{head}**\n\n{body.strip()}\n"
    return blocks


def write_realistic(out: Path = OUT) -> dict[str, str]:
    """``detect_realistic.md`` from the committed rows; returns {"<data set>, noise=<model>": its doc block} and
    {"Means over cells": the means over every data set and the comparisons}."""
    rows, clv = realistic_rows(out)
    if not rows:
        return {}
    path = out / "detect_realistic.md"
    return _render(_WRITE_MD, {"rows": rows, "path": str(path), "clv": clv}, path, r".+?", ("Means over cells",))


def write_low_rates(out: Path = OUT) -> dict[str, str]:
    """``low_rates.md`` from the committed ``low_rates_<part>.csv``; returns {"low rates, <data set>": its block}."""
    frames = [pd.read_csv(p) for p in sorted(out.glob("low_rates_*.csv"))]
    if not frames:
        return {}
    path = out / "low_rates.md"
    rows = pd.concat(frames, ignore_index=True).to_dict("records")
    return _render(_WRITE_LOW_MD, {"rows": rows, "path": str(path)}, path, r"low rates, .+?")


def doc_blocks(doc: Path = DOC) -> dict[str, str]:
    return {m.group("name"): m.group("body") for m in _BLOCK.finditer(doc.read_text())}


def sync_docs(blocks: dict[str, str], doc: Path = DOC) -> list[str]:
    """Each marked block of ``doc`` replaced by its table; returns the names without a table (left as they are)."""
    missing: list[str] = []

    def sub(m: re.Match) -> str:
        if m.group("name") not in blocks:
            missing.append(m.group("name"))
            return m.group(0)
        return m.group(1) + blocks[m.group("name")] + m.group(4)

    text = doc.read_text()
    new = _BLOCK.sub(sub, text)
    if new != text:
        doc.write_text(new)
    return missing


def run_part(part: str) -> int:
    """One benchmark invocation (``low_rates_*``: :func:`run_low_part`)"""
    if part in LOW_PARTS:
        return run_low_part(part)
    return _run_realistic(part)


def run_low_part(part: str) -> int:
    """``python -m benchmarks low_rates`` into ``low_rates_<part>.csv`` (written through a scratch folder)."""
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "benchmarks", "low_rates", *LOW_PARTS[part], "--out", tmp]
        print("+", " ".join(cmd), flush=True)
        rc = subprocess.call(cmd, cwd=ROOT)
        csv = Path(tmp) / "low_rates.csv"
        if rc == 0 and csv.is_file():
            shutil.copyfile(csv, OUT / f"{part}.csv.part")
            (OUT / f"{part}.csv.part").replace(OUT / f"{part}.csv")  # never a half-written table
    return rc


def _run_realistic(part: str) -> int:
    """One benchmark invocation into ``detect_realistic_<part>.csv`` (the cleanlab version added to its rows)."""
    target = OUT / f"detect_realistic_{part}"
    cmd = [sys.executable, "-m", "benchmarks", "detect_realistic", *PARTS[part], "--detectors", *DETECTORS,
           "--out", str(target)]
    print("+", " ".join(cmd), flush=True)
    rc = subprocess.call(cmd, cwd=ROOT)
    csv = target.with_suffix(".csv")
    if csv.is_file():
        df = pd.read_csv(csv)
        df["cleanlab"] = version("cleanlab")
        df.to_csv(csv, index=False)
        target.with_suffix(".md").unlink(missing_ok=True)  # the merged table is detect_realistic.md
    return rc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables-only", action="store_true", help="rebuild the tables from the committed rows")
    ap.add_argument("--quick", action="store_true", help="rerun the digits parts only: " + ", ".join(QUICK))
    ap.add_argument("--parts", nargs="*", choices=list(PARTS) + list(LOW_PARTS), default=None)
    a = ap.parse_args()
    rc = 0
    if not a.tables_only:
        table_runs = [["--datasets", "isolet", "--noise", "uniform", "pairwise", "--seeds", "20"],
                      ["--datasets", "mnist", "--noise", "uniform", "pairwise", "--seeds", "10", "--other-seeds", "10",
                       "--siis-seeds", "2"]]
        for args in ([] if a.quick or a.parts else table_runs):
            rc |= subprocess.call([sys.executable, str(ROOT / "scripts" / "label_issues_table.py"), *args], cwd=ROOT)
        for part in a.parts or (QUICK if a.quick else list(PARTS) + list(LOW_PARTS)):
            rc |= run_part(part)
    rc |= subprocess.call([sys.executable, str(ROOT / "scripts" / "label_issues_table.py"), "--summary-only"],
                          cwd=ROOT, stdout=subprocess.DEVNULL)
    missing = sync_docs({**write_realistic(), **write_low_rates()})
    if missing:
        print(f"reproduce_detection: no committed rows for docs/label_issues.md's block(s) {', '.join(missing)}",
              file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
