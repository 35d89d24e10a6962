"""How sure is each flag: ``issue_probability`` against the truth, with every point labelled. Not a test.

For each data set (digits, ISOLET), noise model (uniform, idn, confusion), rate (10 / 20 / 40 %) and seed,
every point is labelled and ``rate`` of the labels flipped; the default judgement of a fully labelled set
(LGC's graph leave-one-out, alpha 0.9, 10-NN graph, combined with the out-of-fold feature view, by default the
fully labelled one (``--feature-model``):
``lgcexp.issues.judge.judge``) gives each label a probability of being wrong
(``lgcexp.issues.cuts.issue_probability`` over the views that took part). Recorded per run:

- ``ece``: expected calibration error of that probability against the flips (10 equal-width bins);
- ``mean_p_flagged`` vs ``precision``: what the flags claim on average vs the share of them that are wrong;
- ``expected``: the sum of the probabilities, ``cl_estimate``: confident learning's count, ``n_wrong``: truth;
- the same for the graph's evidence alone (``graph_*``: no feature view).

Writes ``results/bench/issue_probability.csv`` and ``.md`` (means over seeds).

    nice python -m benchmarks issue_probability [--seeds 3] [--datasets digits isolet]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from benchmarks.common import OUT, load, write_rows


def ece(p: np.ndarray, truth: np.ndarray, bins: int = 10) -> float:
    """Expected calibration error: the bin-weighted gap between the mean probability and the share wrong."""
    idx = np.minimum((p * bins).astype(int), bins - 1)
    return float(sum((idx == b).mean() * abs(p[idx == b].mean() - truth[idx == b].mean())
                     for b in range(bins) if (idx == b).any()))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=["digits", "isolet"])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--noises", nargs="+", default=["uniform", "idn", "confusion"])
    ap.add_argument("--rates", nargs="+", type=float, default=[0.1, 0.2, 0.4])
    ap.add_argument("--feature-model", default=None,
                    help="the feature view's model (default: the fully labelled default, choose_feature_model)")
    ap.add_argument("--out", default=str(OUT / "issue_probability"))
    a = ap.parse_args(argv)

    from lgcexp.graph import build_graph
    from lgcexp.issues.cuts import issue_probability
    from lgcexp.issues.judge import judge
    from lgcexp.issues.judgement import LabelJudgement, normalize_rows, suggested_labels
    from lgcexp.issues.views import choose_feature_model
    from lgcexp.noise import make_noise
    from lgcexp.solvers.diagonal import lgc_loo_scores, propagation_diagonal

    rows = []
    for ds in a.datasets:
        X, y = load(ds)
        n, c = y.size, int(y.max()) + 1
        lab = np.arange(n)
        g, _ = build_graph(X, k=10, sigma="mean")
        diag, _ = propagation_diagonal(g.S, lab, 0.9, method="exact" if n <= 10_000 else "probe", distance=3,
                                       check=0, dtype="float32")
        model = a.feature_model or choose_feature_model(n, n)
        for seed in range(a.seeds):
            for noise in a.noises:
                for rate in a.rates:
                    t0 = time.perf_counter()
                    y_obs, flipped = make_noise(noise, rate=rate).corrupt(y, c, seed, X=X)
                    flipped = np.asarray(flipped, dtype=bool)
                    F, _ = lgc_loo_scores(g.S, lab, y_obs, c, 0.9, tol=1e-6, maxiter=10_000, dtype="float32",
                                          P_diag=diag)
                    evidence = normalize_rows(F)
                    j = judge(LabelJudgement(probs=evidence), y_obs, None, X=X, feature_model=model)
                    alone = issue_probability([evidence], y_obs)
                    own = suggested_labels(evidence, y_obs) != y_obs
                    p, flag = j.issue_probability, j.is_issue
                    rows.append({
                        "dataset": ds, "noise": noise, "rate": rate, "seed": seed, "view": model,
                        "n_wrong": int(flipped.sum()),
                        "features": j.features, "n_flagged": int(flag.sum()),
                        "precision": float(flipped[flag].mean()) if flag.any() else 0.0,
                        "mean_p_flagged": float(p[flag].mean()) if flag.any() else 0.0,
                        "ece": ece(p, flipped), "expected": float(p.sum()), "cl_estimate": j.estimated_issues,
                        "graph_precision": float(flipped[own].mean()) if own.any() else 0.0,
                        "graph_mean_p_flagged": float(alone[own].mean()) if own.any() else 0.0,
                        "graph_ece": ece(alone, flipped), "graph_expected": float(alone.sum()),
                    })
                    r = rows[-1]
                    print(f"{ds} {noise} {rate} seed {seed}: {time.perf_counter() - t0:.1f}s wrong {r['n_wrong']} "
                          f"expected {r['expected']:.0f} CL {r['cl_estimate']} ece {r['ece']:.3f} "
                          f"precision {r['precision']:.3f} mean p {r['mean_p_flagged']:.3f}", flush=True)
                    save(rows, Path(a.out))


def save(rows: list[dict], out: Path) -> None:
    write_rows(rows, out.with_suffix(".csv"))
    import pandas as pd

    df = pd.DataFrame(rows)
    keys = ["dataset", "view", "noise", "rate"]
    m = df.groupby(keys, sort=False).agg(
        seeds=("seed", "nunique"), n_wrong=("n_wrong", "mean"), expected=("expected", "mean"),
        cl_estimate=("cl_estimate", "mean"), precision=("precision", "mean"), mean_p=("mean_p_flagged", "mean"),
        ece=("ece", "mean"), graph_expected=("graph_expected", "mean"), graph_ece=("graph_ece", "mean"),
    ).reset_index()
    lines = ["| data | view | noise | rate | seeds | wrong | Σ p | CL count | flag precision | mean p of flags | ECE "
             "| graph alone: Σ p | graph alone: ECE |", "|" + "---|" * 13]
    for r in m.itertuples(index=False):
        lines.append(f"| {r.dataset} | {r.view} | {r.noise} | {r.rate:g} | {r.seeds} | {r.n_wrong:.0f} | "
                     f"{r.expected:.0f} | "
                     f"{r.cl_estimate:.0f} | {r.precision:.3f} | {r.mean_p:.3f} | {r.ece:.3f} | "
                     f"{r.graph_expected:.0f} | {r.graph_ece:.3f} |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
