"""The fixed cost of judging a fully labelled data set (issue 37, "Small data fast"). Not a test.

MNIST subsets of ``--sizes`` points (a seeded draw; 70,000: all of MNIST), every point labelled, ``--rates`` of
the labels flipped by uniform noise (``noise=uniform``, seeded), raw pixels. Routes, each in its own process
on the same labels, interleaved (their order alternating with the seed) so that a loaded machine slows both
alike:

- ``baseline``: ``find_label_issues(X, labels)`` with its defaults, the lgcexp package found in the directory
  ``--baseline`` (the code before, e.g. ``mkdir /tmp/base && git archive REV lgcexp | tar -x -C /tmp/base``);
- ``lgcexp``: the same call with this checkout's lgcexp;
- ``knn+cleanlab`` (``--knn``): out-of-fold 10-NN class frequencies (5 folds) and cleanlab's
  ``filter.find_label_issues`` ranked by self-confidence (needs the ``bench`` extra).

Per run: wall seconds of the call (data loading and noise excluded), F1 of the flags and AUPRC of
``label_quality`` (average precision of finding the flipped labels), the flag count. Writes
``results/bench/small_fast.csv`` (one row per run) and ``small_fast.md`` (each cell's figures and the time
ratio ``lgcexp / baseline`` measured in the same run).

    nice python -m benchmarks small_fast --baseline /tmp/base [--sizes 10000 70000] [--rates 0.1 0.02]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import OUT, ROOT, load


def draw(n: int, rate: float, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(X, noisy labels, flipped mask): ``n`` MNIST points (all of them at 70,000), ``rate`` uniform noise."""
    from lgcexp.noise import make_noise

    X, y = load("mnist")
    if n < X.shape[0]:
        pick = np.sort(np.random.default_rng(seed).choice(X.shape[0], n, replace=False))
        X, y = X[pick], y[pick]
    y_obs, flipped = make_noise("uniform", rate=rate).corrupt(y, int(y.max()) + 1, seed, X=X)
    return X, np.asarray(y_obs, dtype=np.int64), np.asarray(flipped, dtype=bool)


def worker(route: str, n: int, rate: float, seed: int) -> dict:
    """One run of ``route`` in this process (whose lgcexp is the one on its PYTHONPATH)."""
    from sklearn.metrics import average_precision_score

    X, y_obs, flipped = draw(n, rate, seed)
    t0 = time.perf_counter()
    if route == "knn+cleanlab":
        from cleanlab.filter import find_label_issues as cl_find
        from cleanlab.rank import get_label_quality_scores

        from lgcexp.issues.views import knn_oof_probs

        P = knn_oof_probs(X, y_obs, int(y_obs.max()) + 1, k=10, folds=5, seed=seed)
        flag = np.asarray(cl_find(y_obs, P), dtype=bool)
        quality = get_label_quality_scores(y_obs, P)
    else:
        from lgcexp import find_label_issues

        df = find_label_issues(X, y_obs).sort_values("index")
        flag = df["is_label_issue"].to_numpy(dtype=bool)
        quality = df["label_quality"].to_numpy()
    seconds = time.perf_counter() - t0
    tp = int((flag & flipped).sum())
    return {"seconds": seconds, "f1": 2 * tp / max(1, int(flag.sum()) + int(flipped.sum())),
            "auprc": float(average_precision_score(flipped, -quality)), "flagged": int(flag.sum()),
            "flipped": int(flipped.sum())}


def run(route: str, root: Path, n: int, rate: float, seed: int) -> dict:
    """One run of ``route`` in a fresh process whose lgcexp is the one in ``root`` (first on its path, the
    benchmarks package after it; started in an empty folder so that nothing else is found first)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys([str(root), str(ROOT)]))}
    cmd = [sys.executable, "-m", "benchmarks.small_fast", "--worker", route, "--n", str(n), "--rate", str(rate),
           "--seed", str(seed)]
    with tempfile.TemporaryDirectory() as empty:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=empty)
    if p.returncode != 0:
        raise SystemExit(f"{route} (n={n}, rate={rate}, seed={seed}) failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def table(rows: list[dict]) -> str:
    import pandas as pd

    df = pd.DataFrame(rows)
    lines = ["# Judging a fully labelled MNIST subset: time and quality (python -m benchmarks small_fast)", "",
             "Uniform noise, every point labelled, raw pixels; one process per run, routes interleaved. "
             "`ratio`: the route's seconds over the baseline's in the same cell (same labels, same run).", "",
             "| n | rate | seed | route | seconds | ratio | F1 | AUPRC | flagged | flipped |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for (n, rate, seed), g in df.groupby(["n", "rate", "seed"], sort=False):
        base = g.loc[g["route"] == "baseline", "seconds"]
        for r in g.itertuples():
            ratio = f"{r.seconds / float(base.iloc[0]):.3f}" if len(base) else "-"
            lines.append(f"| {n} | {rate:g} | {seed} | {r.route} | {r.seconds:.1f} | {ratio} | {r.f1:.4f} | "
                         f"{r.auprc:.4f} | {r.flagged} | {r.flipped} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default=None, help="root of the code to compare against (a checkout of main)")
    ap.add_argument("--sizes", nargs="+", type=int, default=[10_000])
    ap.add_argument("--rates", nargs="+", type=float, default=[0.1, 0.02])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--knn", action="store_true", help="also time out-of-fold 10-NN + cleanlab")
    ap.add_argument("--out", default=str(OUT / "small_fast"))
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--rate", type=float, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        print(json.dumps(worker(a.worker, a.n, a.rate, a.seed)), flush=True)
        return
    routes = [("lgcexp", ROOT)]
    if a.baseline:
        routes.insert(0, ("baseline", Path(a.baseline).resolve()))
    if a.knn:
        routes.append(("knn+cleanlab", ROOT))
    rows = []
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for n in a.sizes:
        for rate in a.rates:
            for seed in a.seeds:
                order = routes if seed % 2 == 0 else routes[::-1]
                for route, root in order:
                    r = {"n": n, "rate": rate, "seed": seed, "route": route, **run(route, root, n, rate, seed)}
                    rows.append(r)
                    print(r, flush=True)
                    import pandas as pd

                    pd.DataFrame(rows).to_csv(out.with_suffix(".csv"), index=False)
                    out.with_suffix(".md").write_text(table(rows))


if __name__ == "__main__":
    main()
