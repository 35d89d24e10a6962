"""Which decision rule (``detect.cut``) turns the two views into flags, on realistic noise. Not a test.

Reads the draws that ``benchmarks/detect_realistic.py --dump DIR`` wrote (per data set, noise, rate and
seed: the graph's leave-one-out distribution ``g``, the out-of-fold feature view ``f`` trained on the labels
the graph keeps, the noisy and the clean labels) and applies every rule to the same views, so the rules
differ only in the cut. Rules (none reads the clean labels):

- ``graph``: (a) the graph's own suggestion, ``argmax g != y``;
- ``consensus``: ``argmax g != y`` and ``argmax combine(g, f) != y`` (the default before);
- ``suggested``: ``argmax combine(g, f) != y``;
- ``posterior``: the product-of-experts probability that the label is wrong (``issue_probability``) at
  least 1/2, i.e. the given class has at most half of the posterior mass;
- ``either``: ``argmax g != y`` or ``argmax combine(g, f) != y``;
- ``cl``: confident learning (``prune_by_noise_rate``) on ``combine(g, f)``;
- ``..._T``: ``consensus``, ``suggested`` and ``posterior`` with ``f`` at the one temperature that maximises
  the likelihood of the labels the graph keeps (a calibrated feature view);
- ``..._f2``: ``consensus`` and ``posterior`` with the floor of the product at 1e-2 instead of 1e-4 (an
  over-confident view vetoes less).

Where the feature view failed its agreement gate the rules fall back to the graph alone, as ``judge`` does.
Ranking (ROC AUC) by the combined quality ``combine(g, f)[y]`` and by the posterior. Writes
``results/bench/cuts.csv`` (one row per draw and rule) and ``cuts.md`` (means per data set x noise x rate,
and over all cells).

    python -m benchmarks cuts --dump /tmp/cuts/dump [--view mlp] [--out results/bench/cuts]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from benchmarks.common import OUT, write_rows

RULES = ("graph", "consensus", "suggested", "posterior", "either", "cl", "consensus_T", "suggested_T", "posterior_T",
         "consensus_f2", "posterior_f2")


def temper(f, y, keep):
    """``f`` at the temperature that maximises the likelihood of the kept labels (one parameter)."""
    L = np.log(np.clip(f, 1e-12, 1))
    best, bt = np.inf, 1.0
    for T in np.geomspace(0.25, 20, 60):
        Z = L[keep] / T
        Z -= Z.max(axis=1, keepdims=True)
        nll = -(Z[np.arange(Z.shape[0]), y[keep]] - np.log(np.exp(Z).sum(axis=1))).mean()
        if nll < best:
            best, bt = nll, T
    Z = L / bt
    Z -= Z.max(axis=1, keepdims=True)
    E = np.exp(Z)
    return E / E.sum(axis=1, keepdims=True), bt


def decisions(g, f, y, gate_ok):
    """flags and ranking score (higher = more suspicious) of every rule on one draw."""
    from lgcexp.issues.cuts import confident_learning, issue_probability
    from lgcexp.issues.judgement import suggested_labels
    from lgcexp.issues.views import combine_views

    c = g.shape[1]
    own_g = suggested_labels(g, y) != y
    if not gate_ok:
        p1 = issue_probability([g], y)
        q = 1 - g[np.arange(y.size), y]
        return {r: (own_g, q) for r in RULES if r != "cl"} | {"cl": (confident_learning(g, y, c), q)}, p1
    comb = combine_views(g, f)
    own_c = suggested_labels(comb, y) != y
    post = issue_probability([g, f], y)
    q = 1 - comb[np.arange(y.size), y]
    fT, _ = temper(f, y, ~own_g)
    combT = combine_views(g, fT)
    own_cT = suggested_labels(combT, y) != y
    postT = issue_probability([g, fT], y)
    comb2 = combine_views(g, f, floor=1e-2)
    own_c2 = suggested_labels(comb2, y) != y
    post2 = issue_probability([g, f], y, floor=1e-2)
    return {
        "consensus_T": (own_g & own_cT, 1 - combT[np.arange(y.size), y]),
        "suggested_T": (own_cT, 1 - combT[np.arange(y.size), y]),
        "posterior_T": (postT >= 0.5, postT),
        "consensus_f2": (own_g & own_c2, 1 - comb2[np.arange(y.size), y]),
        "posterior_f2": (post2 >= 0.5, post2),
        "graph": (own_g, 1 - g[np.arange(y.size), y]),
        "consensus": (own_g & own_c, q),
        "suggested": (own_c, q),
        "posterior": (post >= 0.5, post),
        "either": (own_g | own_c, q),
        "cl": (confident_learning(comb, y, c), q),
    }, post


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dump", required=True)
    ap.add_argument("--view", default="mlp", help="which dumped feature view (mlp, logistic, lda)")
    ap.add_argument("--min-agreement", type=float, default=0.8)
    ap.add_argument("--out", default=str(OUT / "cuts"))
    a = ap.parse_args(argv)
    from sklearn.metrics import roc_auc_score

    rows = []
    for path in sorted(Path(a.dump).glob("*.npz")):
        *name, noise, rate, seed = path.stem.split("-")
        ds = "-".join(name)
        z = np.load(path)
        g, y, flipped = z["graph"], z["y_obs"], z["flipped"].astype(bool)
        key = f"view_{a.view}"
        f = z[key] if key in z else None
        agree = float(z[f"agreement_{a.view}"]) if f"agreement_{a.view}" in z else np.nan
        gate_ok = f is not None and agree >= a.min_agreement
        rules, post = decisions(g, f, y, gate_ok)
        for rule, (flag, score) in rules.items():
            tp = int((flag & flipped).sum())
            fp = int((flag & ~flipped).sum())
            fn = int((~flag & flipped).sum())
            rows.append({"dataset": ds, "noise": noise, "rate": float(rate), "seed": int(seed), "rule": rule,
                         "f1": 2 * tp / max(1, 2 * tp + fp + fn), "precision": tp / max(1, tp + fp),
                         "recall": tp / max(1, tp + fn), "auc": float(roc_auc_score(flipped, score)),
                         "flagged": int(flag.sum()), "n_wrong": int(flipped.sum()),
                         "expected": float(post.sum()), "gate": bool(gate_ok)})
    out = Path(a.out)
    write_rows(rows, out.with_suffix(".csv"))
    import pandas as pd

    df = pd.DataFrame(rows)
    cell = df.groupby(["dataset", "noise", "rate", "rule"]).agg(
        f1=("f1", "mean"), auc=("auc", "mean"), precision=("precision", "mean"), recall=("recall", "mean"),
        seeds=("seed", "nunique")).reset_index()
    lines = [f"# Decision rules on the dumped views ({a.view} feature view)", "",
             "| data | noise | rate | seeds | " + " | ".join(RULES) + " |", "|---|---|---|---|" + "---|" * len(RULES)]
    for (ds, noise, rate), grp in cell.groupby(["dataset", "noise", "rate"]):
        by = grp.set_index("rule")
        lines.append(f"| {ds} | {noise} | {rate:g} | {int(by.seeds.max())} | " + " | ".join(
            f"{by.f1[r]:.3f} ({by.precision[r]:.2f}/{by.recall[r]:.2f})" for r in RULES) + " |")
    mean = cell.groupby("rule")[["f1", "auc"]].mean()
    lines += ["", "F1 (precision/recall) per cell, mean over seeds. Means over cells:", "",
              "| rule | F1 | AUC | F1 above graph in | F1 below graph by at most |", "|---|---|---|---|---|"]
    piv = cell.pivot_table(index=["dataset", "noise", "rate"], columns="rule", values="f1")
    for r in RULES:
        d = piv[r] - piv["graph"]
        lines.append(f"| {r} | {mean.f1[r]:.3f} | {mean.auc[r]:.3f} | {int((d > 0).sum())} / {len(d)} | "
                     f"{max(0.0, -d.min()):.3f} |")
    per = cell.pivot_table(index="rule", columns="dataset", values="f1").loc[list(RULES)]
    lines += ["", "Mean F1 per data set (and representation):", "",
              "| rule | " + " | ".join(per.columns) + " |", "|---|" + "---|" * len(per.columns)]
    lines += [f"| {r} | " + " | ".join(f"{v:.3f}" for v in per.loc[r]) + " |" for r in per.index]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
