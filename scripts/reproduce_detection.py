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
commands of docs/label_issues.md (hours) and keep their committed rows until rerun. ``--seeds S ...`` runs only
those seeds of the parts named and merges their rows into the committed ones (the rows of the same draw are
replaced, the others kept), so more seeds can be added a few at a time.
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

from lgcexp.cache import atomic_write_text
from lgcexp.records import replace_rows

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


#: the columns that name one draw and detector (realistic) or one draw and cut (low rates): a merged row replaces
#: the committed row with the same values
REALISTIC_KEYS = ["dataset", "features", "noise", "rate", "seed", "detector"]
LOW_KEYS = ["dataset", "noise", "rate", "seed", "cut"]


def merge_rows(old: pd.DataFrame, new: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """``old``'s rows with ``new``'s added (:func:`lgcexp.records.replace_rows`: a row of ``new`` replaces the row of
    ``old`` with the same ``keys``; a missing ``features`` is raw pixels), sorted stably by the draw columns."""
    old, new = old.copy(), new.copy()
    for df in (old, new):
        if "features" in keys and "features" in df:
            df["features"] = df["features"].fillna("raw")
    both = replace_rows(old, new, keys)
    order = [k for k in ("dataset", "features", "noise", "rate", "seed") if k in both]
    return both.sort_values(order, kind="mergesort").reset_index(drop=True)


def seed_args(args: list[str], seeds: list[int] | None, low: bool) -> list[list[str]]:
    """The benchmark invocations of a part's ``args`` restricted to ``seeds`` (None: the part as it stands): the
    realistic benchmark takes ``--seed-list``; the low-rate one runs ``range(--first-seed, --seeds)``, so one
    invocation per seed."""
    if seeds is None:
        return [list(args)]
    i = args.index("--seeds")
    rest = args[:i] + args[i + 2:]
    if low:
        return [rest + ["--first-seed", str(s), "--seeds", str(s + 1)] for s in seeds]
    return [rest + ["--seed-list", *map(str, seeds)]]


def run_part(part: str, seeds: list[int] | None = None) -> int:
    """One part's benchmark invocation(s) (``low_rates_*``: :func:`run_low_part`); ``seeds``: only those, merged."""
    if part in LOW_PARTS:
        return run_low_part(part, seeds)
    return _run_realistic(part, seeds)


def run_low_part(part: str, seeds: list[int] | None = None) -> int:
    """``python -m benchmarks low_rates`` into ``low_rates_<part>.csv`` (through a scratch folder; ``seeds``: only
    those, merged into the committed rows)."""
    import tempfile

    rc, frames = 0, []
    for args in seed_args(LOW_PARTS[part], seeds, low=True):
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [sys.executable, "-m", "benchmarks", "low_rates", *args, "--out", tmp]
            print("+", " ".join(cmd), flush=True)
            rc |= subprocess.call(cmd, cwd=ROOT)
            csv = Path(tmp) / "low_rates.csv"
            if rc == 0 and csv.is_file():
                frames.append(pd.read_csv(csv))
    target = OUT / f"{part}.csv"
    if rc == 0 and frames:
        new = pd.concat(frames, ignore_index=True)
        if seeds is not None and target.is_file():
            new = merge_rows(pd.read_csv(target), new, LOW_KEYS)
        atomic_write_text(target, new.to_csv(index=False))  # never a half-written table
    return rc


def _run_realistic(part: str, seeds: list[int] | None = None) -> int:
    """One benchmark invocation into ``detect_realistic_<part>.csv`` (the cleanlab version added to its rows;
    ``seeds``: only those, merged into the committed rows)."""
    import tempfile

    target = OUT / f"detect_realistic_{part}.csv"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "part"
        (args,) = seed_args(PARTS[part], seeds, low=False)
        cmd = [sys.executable, "-m", "benchmarks", "detect_realistic", *args, "--detectors", *DETECTORS,
               "--out", str(out)]
        print("+", " ".join(cmd), flush=True)
        rc = subprocess.call(cmd, cwd=ROOT)
        csv = out.with_suffix(".csv")
        if rc == 0 and csv.is_file():  # a failed run never replaces the committed rows
            df = pd.read_csv(csv)
            df["cleanlab"] = version("cleanlab")
            if seeds is not None and target.is_file():
                df = merge_rows(pd.read_csv(target), df, REALISTIC_KEYS)
            atomic_write_text(target, df.to_csv(index=False))
    return rc


#: the detection table's invocations of scripts/label_issues_table.py (docs/label_issues.md, "The detection table")
TABLE_RUNS = [["--datasets", "isolet", "--noise", "uniform", "pairwise", "--seeds", "20"],
              ["--datasets", "mnist", "--noise", "uniform", "pairwise", "--seeds", "10", "--other-seeds", "10",
               "--siis-seeds", "2"]]


def run_detection_table(table_runs: list[list[str]] | None = None) -> int:
    """Every run of the detection table redone: :data:`TABLE_RUNS` into a scratch folder (scripts/label_issues_table.py
    keeps and skips the runs its ``--out`` already holds, so run into the committed folder it would redo nothing),
    then the committed ``detection_runs.csv`` replaced by the new runs and the invocations' provenance lines appended
    to ``PROVENANCE.md``. A failed invocation replaces nothing."""
    import tempfile

    rc = 0
    with tempfile.TemporaryDirectory() as tmp:
        for args in TABLE_RUNS if table_runs is None else table_runs:
            cmd = [sys.executable, str(ROOT / "scripts" / "label_issues_table.py"), *args, "--out", tmp]
            print("+", " ".join(cmd), flush=True)
            rc |= subprocess.call(cmd, cwd=ROOT)
        runs, prov = Path(tmp) / "detection_runs.csv", Path(tmp) / "PROVENANCE.md"
        if rc == 0 and runs.is_file():
            atomic_write_text(OUT / "detection_runs.csv", runs.read_text())
            lines = [ln for ln in prov.read_text().splitlines() if ln.startswith("- ")] if prov.is_file() else []
            committed = OUT / "PROVENANCE.md"
            text = committed.read_text() if committed.is_file() else "# Provenance of results/label_issues\n\n"
            atomic_write_text(committed, text.rstrip("\n") + "\n" + "".join(f"{ln}\n" for ln in lines))
    return rc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables-only", action="store_true", help="rebuild the tables from the committed rows")
    ap.add_argument("--quick", action="store_true", help="rerun the digits parts only: " + ", ".join(QUICK))
    ap.add_argument("--parts", nargs="*", choices=list(PARTS) + list(LOW_PARTS), default=None)
    ap.add_argument("--seeds", nargs="+", type=int, default=None, metavar="S",
                    help="run only these seeds of the parts and merge their rows into the committed ones")
    a = ap.parse_args()
    if a.seeds is not None and not a.parts:
        print("reproduce_detection: --seeds is not allowed without --parts: name the parts to add seeds to",
              file=sys.stderr)
        return 2
    if a.seeds is not None and min(a.seeds) < 0:
        print(f"reproduce_detection: --seeds {min(a.seeds)} is not allowed: seeds are >= 0", file=sys.stderr)
        return 2
    rc = 0
    if not a.tables_only:
        if not (a.quick or a.parts):
            rc |= run_detection_table()
        for part in a.parts or (QUICK if a.quick else list(PARTS) + list(LOW_PARTS)):
            rc |= run_part(part, a.seeds)
    rc |= subprocess.call([sys.executable, str(ROOT / "scripts" / "label_issues_table.py"), "--summary-only"],
                          cwd=ROOT, stdout=subprocess.DEVNULL)
    missing = sync_docs({**write_realistic(), **write_low_rates()})
    if missing:
        print(f"reproduce_detection: no committed rows for docs/label_issues.md's block(s) {', '.join(missing)}",
              file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
