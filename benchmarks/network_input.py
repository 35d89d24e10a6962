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

    python -m benchmarks network_input [--datasets digits isolet mnist]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from benchmarks.common import OUT, load, write_rows


def pca_axes(X: np.ndarray, seed: int, standardize: bool) -> np.ndarray:
    """X (float64) standardised per feature (scikit-learn's StandardScaler: a constant feature only
    centred) or only centred, on its 50 leading principal axes (randomised PCA seeded with ``seed``)."""
    from sklearn.decomposition import PCA
    from sklearn.preprocessing import StandardScaler

    Z = StandardScaler(with_std=standardize).fit_transform(np.asarray(X, dtype=np.float64))
    if Z.shape[1] > 50:
        Z = PCA(n_components=min(50, Z.shape[0] - 1), svd_solver="randomized", random_state=seed).fit_transform(Z)
    return Z


def inputs(X: np.ndarray, seed: int = 0) -> dict[str, np.ndarray]:
    """The four inputs compared (the module's docstring); the last is the feature view's own."""
    from sklearn.preprocessing import StandardScaler

    from lgcexp.issues.out_of_fold import network_inputs

    std = pca_axes(X, seed, standardize=True)
    cen = pca_axes(X, seed, standardize=False)
    return {"standardised+whitened": StandardScaler().fit_transform(std), "standardised": std / std[:, 0].std(),
            "centred, top axis": cen / cen[:, 0].std(), "centred, mean variance": network_inputs(X, 50)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=["digits", "isolet", "mnist"])
    ap.add_argument("--out", default=str(OUT / "network_input"))
    a = ap.parse_args(argv)
    from sklearn.neural_network import MLPClassifier

    from lgcexp.issues import out_of_fold as oo

    def network(n_train: int) -> MLPClassifier:
        b = int(min(oo.MLP_BATCH, n_train))
        return MLPClassifier(hidden_layer_sizes=oo.MLP_HIDDEN, alpha=oo.MLP_ALPHA, batch_size=b,
                             learning_rate_init=oo.MLP_LEARNING_RATE, max_iter=oo.mlp_epochs(n_train, b),
                             random_state=0)

    rows = []
    for ds in a.datasets:
        X, y = load(ds)
        c = int(y.max()) + 1
        for name, Z in inputs(X).items():
            t0 = time.perf_counter()
            P = oo.out_of_fold_probs(Z, y, c, 5, 0, None, network)
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
