#!/usr/bin/env python
"""Which label-issue detector holds on realistic (instance-dependent) noise, with every point labelled. Not a test.

For each data set (digits, ISOLET; MNIST with ``--mnist``), noise model (``idn``, ``confusion``), rate
(10 / 20 / 40 %) and seed (0-4), every point is labelled and ``rate`` of the labels are flipped; every
detector judges the same noisy labels on the same features and graph (10-NN, Gaussian weights, sigma
"mean"). Detectors (``label_quality``: the probability of the given label, lower = more suspicious; the
flags as stated):

- ``graph``: (a) LGC's graph leave-one-out (alpha 0.9, no learning; :mod:`lgcexp.loo`), flagged where
  another class has more evidence;
- ``lgc+lda``: today's judgement of LGC's evidence (``lgcexp.label_issues.judge`` with its defaults: the
  shrinkage-LDA feature view behind an agreement gate, cut ``consensus``);
- ``knn+cleanlab``: (b) out-of-fold 10-NN class frequencies (5 stratified folds) + cleanlab's
  ``filter.find_label_issues`` (its default, ``prune_by_noise_rate``), ranked by cleanlab's
  ``rank.get_label_quality_scores`` (self-confidence);
- ``lr+cleanlab``: (c) the same on out-of-fold probabilities of a multinomial logistic regression
  (scikit-learn, C = 1, standardised features);
- ``graph*lr`` + cut: the geometric mean of the graph's leave-one-out and the logistic regression's
  out-of-fold probabilities (``combine_views``), cut by ``consensus`` (graph and combination both prefer
  another class), ``suggested`` or confident learning (lgcexp's ``prune_by_noise_rate``).

Also recorded: confident learning's estimate of the number of wrong labels (the off-diagonal of the
calibrated confident joint) on each detector's probabilities, against the true count.

Needs the ``bench`` extra (cleanlab). Writes ``results/bench/detect_realistic.csv`` (one row per run and
detector) and ``detect_realistic.md`` (means over seeds).

    nice python scripts/bench_detect_realistic.py [--seeds 5] [--datasets digits isolet] [--mnist]
"""
from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "bench"


def load(name: str):
    if name == "digits":
        from sklearn.datasets import load_digits

        X, y = load_digits(return_X_y=True)
        return X.astype(np.float64), y.astype(np.int64)
    from lgcexp.locations import default_dir

    z = np.load(Path(default_dir("data")).expanduser() / f"{name}.npz")
    return z["X"].astype(np.float64), z["y"].astype(np.int64)


def metrics(quality, flag, flipped) -> dict:
    from sklearn.metrics import roc_auc_score

    tp = int((flag & flipped).sum())
    fp = int((flag & ~flipped).sum())
    fn = int((~flag & flipped).sum())
    return {"f1": 2 * tp / max(1, 2 * tp + fp + fn), "auc": float(roc_auc_score(flipped, -quality)),
            "precision": tp / max(1, tp + fp), "recall": tp / max(1, tp + fn), "flagged": int(flag.sum())}


def cl_estimate(probs, y, c) -> int:
    from lgcexp.label_issues import calibrated_counts, confident_joint

    C, _ = confident_joint(probs, y, c)
    N = calibrated_counts(C, y)
    return int(N.sum() - np.trace(N))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", nargs="+", default=["digits", "isolet"])
    ap.add_argument("--mnist", action="store_true")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--rates", nargs="+", type=float, default=[0.1, 0.2, 0.4])
    ap.add_argument("--noises", nargs="+", default=["idn", "confusion"])
    ap.add_argument("--out", default=str(OUT / "detect_realistic"))
    ap.add_argument("--detectors", nargs="+", default=None, help="compute only these (default: all)")
    ap.add_argument("--lr-pca", type=int, default=0, help="principal axes for the logistic regression of (c) "
                    "and graph*lr (0: the standardised features as they are)")
    ap.add_argument("--merge", nargs="*", default=[], help="earlier CSVs whose rows join the table")
    a = ap.parse_args()
    def want(name):
        return a.detectors is None or name in a.detectors

    import cleanlab
    from cleanlab.filter import find_label_issues as cl_find
    from cleanlab.rank import get_label_quality_scores

    from lgcexp.graph import build_graph
    from lgcexp.label_issues import (
        LabelJudgement,
        combine_views,
        confident_learning,
        judge,
        knn_oof_probs,
        label_quality,
        normalize_rows,
        suggested_labels,
    )
    from lgcexp.loo import _prepare, _solve, propagation_diagonal
    from lgcexp.noise import make_noise
    from lgcexp.noise.confusion import oof_logistic_probs

    datasets = list(a.datasets) + (["mnist"] if a.mnist else [])
    rows = []
    for ds in datasets:
        X, y = load(ds)
        n, c = y.size, int(y.max()) + 1
        lab = np.arange(n)
        t0 = time.perf_counter()
        g, _ = build_graph(X, k=10, sigma="mean")
        prep = _prepare(g.S, lab, "float32")
        how = "exact" if n <= 10_000 else "probe"
        diag, _ = propagation_diagonal(g.S, lab, 0.9, method=how, distance=3, check=0, _prepared=prep)
        print(f"{ds}: n={n} graph+diagonal ({how}) {time.perf_counter() - t0:.1f}s", flush=True)
        Sd, rws, _ = prep
        # seeds outermost, the files rewritten after every run: an interrupted benchmark keeps what it did
        for seed in range(a.seeds):
            for noise in a.noises:
                for rate in a.rates:
                    t0 = time.perf_counter()
                    y_obs, flipped = make_noise(noise, rate=rate).corrupt(y, c, seed, X=X)
                    Y = np.zeros((n, c), dtype=np.float32)
                    Y[rws, y_obs] = 1.0
                    F = _solve(Sd, Y, 0.9, 1e-6, 10_000)[0][rws].astype(np.float64)
                    F[lab, y_obs] -= diag
                    graph = normalize_rows(np.maximum(F, 0.0))
                    det = {}
                    if want("graph"):
                        det["graph"] = (label_quality(graph, y_obs), suggested_labels(graph, y_obs) != y_obs, graph)
                    if want("lgc+lda"):
                        j = judge(LabelJudgement(probs=graph), y_obs, None, X=X, feature_model="lda")
                        det["lgc+lda"] = (j.quality, j.is_issue, j.probs)
                    if want("lgc+lr"):  # the feature view by a logistic regression on the kept labels
                        j = judge(LabelJudgement(probs=graph), y_obs, None, X=X, feature_model="logistic")
                        det["lgc+lr"] = (j.quality, j.is_issue, j.probs)
                    if want("knn+cleanlab"):
                        knn = knn_oof_probs(X, y_obs, c, k=10, folds=5, seed=seed)
                        det["knn+cleanlab"] = (get_label_quality_scores(y_obs, knn), cl_find(y_obs, knn), knn)
                    if any(want(k) for k in ("lr+cleanlab", "graph*lr consensus", "graph*lr suggested", "graph*lr CL")):
                        lr = oof_logistic_probs(X, y_obs, c, folds=5, pca=a.lr_pca, C=1.0, seed=seed)
                        gl = combine_views(graph, lr)
                        own_g = suggested_labels(graph, y_obs) != y_obs
                        own_gl = suggested_labels(gl, y_obs) != y_obs
                        q = label_quality(gl, y_obs)
                        if want("lr+cleanlab"):
                            det["lr+cleanlab"] = (get_label_quality_scores(y_obs, lr), cl_find(y_obs, lr), lr)
                        if want("graph*lr consensus"):
                            det["graph*lr consensus"] = (q, own_g & own_gl, gl)
                        if want("graph*lr suggested"):
                            det["graph*lr suggested"] = (q, own_gl, gl)
                        if want("graph*lr CL"):
                            det["graph*lr CL"] = (q, confident_learning(gl, y_obs, c), gl)
                    for name, (qq, flag, P) in det.items():
                        m = metrics(np.asarray(qq), np.asarray(flag, bool), flipped)
                        rows.append({"dataset": ds, "noise": noise, "rate": rate, "seed": seed, "detector": name,
                                     **m, "n_wrong": int(flipped.sum()), "cl_estimate": cl_estimate(P, y_obs, c),
                                     "lr_pca": a.lr_pca})
                    print(f"{ds} {noise} {rate} seed {seed}: {time.perf_counter() - t0:.1f}s  " + "  ".join(
                        f"{r['detector']} {r['f1']:.3f}/{r['auc']:.3f}" for r in rows[-len(det):]), flush=True)
                    save(rows, Path(a.out), a.merge, cleanlab.__version__)


def save(rows, out: Path, merge, clv: str) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.with_suffix(".csv"), "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    rows = list(rows)
    for path in merge:
        with open(path) as fh:
            rows += [{k: (v if k in ("dataset", "noise", "detector") else float(v)) for k, v in r.items()}
                     for r in csv.DictReader(fh)]
    write_md(rows, out.with_suffix(".md"), clv)


def write_md(rows, path: Path, clv: str) -> None:
    import pandas as pd

    df = pd.DataFrame(rows)
    g = df.groupby(["dataset", "noise", "rate", "detector"], sort=False)
    agg = g.agg(f1=("f1", "mean"), auc=("auc", "mean"), precision=("precision", "mean"), recall=("recall", "mean"),
                n_wrong=("n_wrong", "mean"), cl_estimate=("cl_estimate", "mean"), seeds=("seed", "nunique"))
    lines = [f"# Detectors on instance-dependent noise, every point labelled (cleanlab {clv})", "",
             ("F1 / ROC AUC, mean over seeds; `est.`: confident learning's estimate of the number of wrong "
              "labels (true: `wrong`)."), ""]
    for (ds, noise), sub in agg.groupby(level=[0, 1], sort=False):
        rates = sorted(sub.index.get_level_values(2).unique())
        ns = sub["seeds"]
        seeds = f"{int(ns.min())} seeds" if ns.min() == ns.max() else f"{int(ns.min())}-{int(ns.max())} seeds"
        lines += [f"## {ds}, noise={noise} ({seeds})", "",
                  "| detector | " + " | ".join(f"{int(100 * r)} % F1 / AUC / est. (wrong)" for r in rates) + " |",
                  "|---|" + "---|" * len(rates)]
        for det in sub.index.get_level_values(3).unique():
            cells = []
            for r in rates:
                x = sub.loc[(ds, noise, r, det)]
                cells.append(f"{x.f1:.3f} / {x.auc:.3f} / {x.cl_estimate:.0f} ({x.n_wrong:.0f})")
            lines.append(f"| {det} | " + " | ".join(cells) + " |")
        lines.append("")
    path.write_text("\n".join(lines))


if __name__ == "__main__":
    main()
