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
}
QUICK = ["digits", "digits_vae"]
_WRITE_MD = ("import json, sys; from pathlib import Path; from benchmarks.detect_realistic import write_md; "
             "a = json.load(sys.stdin); write_md(a['rows'], Path(a['path']), a['clv'])")
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


def write_realistic(out: Path = OUT) -> dict[str, str]:
    """``detect_realistic.md`` from the committed rows; returns {"<data set>, noise=<model>": its doc block}."""
    rows, clv = realistic_rows(out)
    if not rows:
        return {}
    path = out / "detect_realistic.md"
    # the benchmark's own renderer, imported from the repository root (python -c puts the working directory first)
    subprocess.run([sys.executable, "-c", _WRITE_MD], input=json.dumps({"rows": rows, "path": str(path), "clv": clv},
                                                                        default=lambda o: o.item()),
                   text=True, cwd=ROOT, check=True)
    blocks = {}
    for part in path.read_text().split("\n## ")[1:]:
        head, _, body = part.partition("\n")
        m = re.match(r"(?P<name>.+?) \((?P<seeds>[^)]*seeds)\)$", head)
        if m:
            blocks[m.group("name")] = f"**{head}**\n\n{body.strip()}\n"
    return blocks


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
    ap.add_argument("--parts", nargs="*", choices=list(PARTS), default=None)
    a = ap.parse_args()
    rc = 0
    if not a.tables_only:
        table_runs = [["--datasets", "isolet", "--noise", "uniform", "pairwise", "--seeds", "20"],
                      ["--datasets", "mnist", "--noise", "uniform", "pairwise", "--seeds", "10", "--other-seeds", "10",
                       "--siis-seeds", "2"]]
        for args in ([] if a.quick or a.parts else table_runs):
            rc |= subprocess.call([sys.executable, str(ROOT / "scripts" / "label_issues_table.py"), *args], cwd=ROOT)
        for part in a.parts or (QUICK if a.quick else list(PARTS)):
            rc |= run_part(part)
    rc |= subprocess.call([sys.executable, str(ROOT / "scripts" / "label_issues_table.py"), "--summary-only"],
                          cwd=ROOT, stdout=subprocess.DEVNULL)
    missing = sync_docs(write_realistic())
    if missing:
        print(f"reproduce_detection: no committed rows for docs/label_issues.md's block(s) {', '.join(missing)}",
              file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
