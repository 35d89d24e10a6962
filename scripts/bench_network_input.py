#!/usr/bin/env python
"""What the network feature view should read: out-of-fold accuracy of the same network on clean labels
under four input transforms. Not a test.

The network and folds of :func:`lgcexp.issues.out_of_fold.oof_mlp_probs` (256 ReLU units, 5 stratified folds,
seed 0), on every point of digits, ISOLET and MNIST with their clean labels, after:

- ``standardised+whitened`` (the input before): each feature standardised, 50 principal axes, each axis
  standardised;
- ``standardised``: each feature standardised, 50 principal axes, divided by the first axis's deviation;
- ``centred, top axis``: centred only, 50 principal axes, divided by the first axis's deviation;
- ``centred, mean variance`` (:func:`lgcexp.issues.out_of_fold.network_inputs`, the input now): centred only, 50
  principal axes, divided by the root of their mean variance.

Writes ``results/bench/network_input.{csv,md}``: accuracy of the out-of-fold argmax and the mean negative
log-likelihood of the clean label.

    python scripts/bench_network_input.py [--datasets digits isolet mnist]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from bench_rows import write_rows

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))


def inputs(X: np.ndarray, seed: int = 0) -> dict[str, np.ndarray]:
    from lgcexp.issues import out_of_fold as oo

    std = oo._pca_axes(X, 50, seed)
    cen = oo._pca_axes(X, 50, seed, standardize=False)
    return {"standardised+whitened": oo._standardize(std), "standardised": std / std[:, 0].std(),
            "centred, top axis": cen / cen[:, 0].std(), "centred, mean variance": oo.network_inputs(X, 50, seed)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", nargs="+", default=["digits", "isolet", "mnist"])
    ap.add_argument("--out", default=str(ROOT / "results" / "bench" / "network_input"))
    a = ap.parse_args()
    from bench_detect_realistic import load
    from sklearn.neural_network import MLPClassifier

    from lgcexp.issues import out_of_fold as oo

    def network(n_train: int) -> MLPClassifier:
        b = int(min(oo.MLP_BATCH, n_train))
        return MLPClassifier(hidden_layer_sizes=oo.MLP_HIDDEN, alpha=oo.MLP_ALPHA, batch_size=b,
                             learning_rate_init=1e-3, max_iter=oo.mlp_epochs(n_train, b), random_state=0)

    rows = []
    for ds in a.datasets:
        X, y = load(ds)
        c = int(y.max()) + 1
        for name, Z in inputs(X).items():
            t0 = time.perf_counter()
            P = oo._out_of_fold(Z, y, c, 5, 0, None, network)
            rows.append({"dataset": ds, "input": name, "accuracy": float(np.mean(P.argmax(axis=1) == y)),
                         "nll": float(-np.log(P[np.arange(y.size), y] + 1e-12).mean()),
                         "seconds": round(time.perf_counter() - t0, 1)})
            print(rows[-1], flush=True)
    out = Path(a.out)
    write_rows(rows, out.with_suffix(".csv"))
    lines = ["| data | input | out-of-fold accuracy | NLL of the clean label |", "|---|---|---|---|"]
    lines += [f"| {r['dataset']} | {r['input']} | {r['accuracy']:.4f} | {r['nll']:.3f} |" for r in rows]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
