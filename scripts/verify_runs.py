"""Rerun a sample of the runs recorded in results/runs.csv and compare their numbers with the record.

    python scripts/verify_runs.py --n 12 --datasets isolet          # 12 runs, stratified over methods
    python scripts/verify_runs.py --all --datasets isolet mnist     # every run (slow)

Each sampled row is rerun through the Python API with the table experiment's settings (dataset, method,
loss, noise rate, seed); the accuracies (and the detection figures, where recorded) must be equal. Prints
one line per run and writes ``results/bench/verify_runs.md``; exits 1 when a number differs.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pandas as pd  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
COMPARED = ("acc_unlabeled", "acc_labeled", "acc_labeled_lgc", "n_flipped", "n_dropped")
#: the settings beyond dataset/algo/loss/noise/seed of the methods rerun by their own commands (the commands
#: in results/tables/PROVENANCE.md), by (dataset, method as in runs.csv)
EXTRA_OVERRIDES = {
    ("isolet", "GFHF + CMN"): ["algo.params.cmn=true"],
    ("mnist", "GFHF + CMN"): ["algo.params.cmn=true"],
    ("isolet", "LSSC"): ["graph=anchor", "algo.params.lam=1.0", "algo.params.tol=1e-4", "algo.params.alpha=1.6",
                         "algo.params.adaptive=true", "algo.params.check_every=10", "algo.params.max_iter=30000"],
    ("mnist", "LSSC"): ["graph=anchor"],
    ("mnist", "LGC* (anchor graph)"): ["graph=anchor", "algo.params.alpha=0.99"],
    ("mnist", "Eigenfunction*"): ["graph=eigenfunction"],
}


def rerun(row: pd.Series, cache_dir: str, data_dir: str | None) -> dict:
    from hydra import compose, initialize_config_dir

    from lgcexp.pipeline import run

    overrides = [f"dataset={row.dataset}", f"algo={row.algo}", f"noise.rate={row.noise_rate}", f"seed={int(row.seed)}",
                 f"paths.cache_dir={cache_dir}"]
    if isinstance(row.loss, str):
        overrides.append(f"loss={row.loss}")
    if isinstance(row.get("noise"), str) and row["noise"] != "uniform":
        overrides.append(f"noise={row['noise']}")
    overrides += EXTRA_OVERRIDES.get((row.dataset, row.method), [])
    if data_dir:
        overrides.append(f"paths.data_dir={data_dir}")
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    r = run(cfg)
    # the record's config hash: equal when the rerun is the recorded config (rows older than a config key that
    # was added since differ here although their numbers are the same)
    r["same_config"] = r.get("config_hash") == row.get("config_hash")
    return r


def same(a, b) -> bool:
    if a is None or (isinstance(a, float) and math.isnan(a)):
        return b is None or (isinstance(b, float) and math.isnan(b))
    return b is not None and float(a) == float(b)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default=str(ROOT / "results" / "runs.csv"))
    ap.add_argument("--n", type=int, default=12, help="runs to sample (stratified over dataset/method/noise)")
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--datasets", nargs="+", default=["isolet"])
    ap.add_argument("--seed", type=int, default=0, help="sampling seed")
    ap.add_argument("--cache-dir", default=os.environ.get("LGCEXP_CACHE_DIR", "~/.cache/lgcexp/cache"))
    ap.add_argument("--data-dir", default=os.environ.get("LGCEXP_DATA_DIR"))
    ap.add_argument("--out", default=str(ROOT / "results" / "bench" / "verify_runs.md"))
    args = ap.parse_args()

    runs = pd.read_csv(args.runs)
    runs = runs[runs["dataset"].isin(args.datasets)]
    if not args.all:
        keys = ["dataset", "method", "noise_rate"] + (["noise"] if "noise" in runs else [])
        groups = list(runs.groupby(keys, sort=True))
        picks = [g.sample(1, random_state=args.seed + i) for i, (_, g) in enumerate(groups)]
        runs = pd.concat(picks).sample(frac=1.0, random_state=args.seed).head(args.n)
    lines = ["| dataset | method | noise | seed | field | recorded | rerun | equal |",
             "|---|---|---|---|---|---|---|---|"]
    bad = 0
    t0 = time.perf_counter()
    for _, row in runs.iterrows():
        r = rerun(row, args.cache_dir, args.data_dir)
        for f in COMPARED:
            if f not in row or (pd.isna(row[f]) and f not in r):
                continue
            ok = same(row[f], r.get(f))
            bad += not ok
            lines.append(f"| {row.dataset} | {row.method} | {row.noise_rate:g} | {int(row.seed)} | {f} | {row[f]} | "
                         f"{r.get(f)} | {'yes' if ok else '**no**'} |")
        print(f"{row.dataset} {row.method} noise={row.noise_rate:g} seed={int(row.seed)}: "
              f"acc_unlabeled {row.acc_unlabeled} vs {r['acc_unlabeled']}"
              f"{'' if r['same_config'] else ' (config hash differs from the record)'}", flush=True)
    summary = (f"{len(runs)} runs rerun in {time.perf_counter() - t0:.0f} s; "
               f"{'all numbers equal' if not bad else f'{bad} numbers differ'}")
    print(summary)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(f"# Rerun check of {Path(args.runs).name}\n\n{summary}\n\n" + "\n".join(lines) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
