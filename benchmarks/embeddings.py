"""Which neighbourhoods suit a network's embeddings: ``find_label_issues`` on embeddings with the Euclidean kNN
graph against the cosine one (rows scaled to unit length first), F1 and AUPRC at 2, 5 and 10 % wrong labels.
Not a test.

The embeddings: a small network (scikit-learn's ``MLPClassifier``, two ReLU hidden layers of 512 and 256
units, Adam, ``--epochs`` passes) is trained on ``--train`` clean MNIST images (raw pixels / 255); the points
judged are ``--n`` other MNIST images (rows 60,000 on: MNIST's test part, never seen by the network), embedded
as the activations of its first (512 columns) and of its last hidden layer (256, the penultimate layer). The
same on scikit-learn's digits (1,797 images of 8 x 8: the network, 256 and 128 units, trained on the first half,
the second half judged). Every point is labelled; ``--rates`` of the labels are flipped uniformly to another
class (seeds 0..``--seeds``-1). For each embedding, rate and seed, ``find_label_issues(E, labels)`` runs with
its defaults (LGC, the out-of-fold network view) and with ``features=False`` (the graph's leave-one-out alone:
the metric's effect without the second view), each on E as given (``euclidean``) and with ``metric="cosine"``.

Columns: F1 of the flags against the flipped labels, AUPRC (average precision of ``-label_quality``), flagged,
seconds; means over the seeds. Writes ``embeddings.md``, ``embeddings.json`` and ``embeddings.png`` under
``--out``.

    python -m benchmarks embeddings [--n 4000] [--train 10000] [--seeds 5] [--out results/bench]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from benchmarks.common import OUT, data_dir, header, write_report

METRICS = ("euclidean", "cosine")


def hidden_layers(net, X: np.ndarray) -> list[np.ndarray]:
    """The ReLU activations of every hidden layer of a fitted ``MLPClassifier`` for rows X (float32)."""
    out, H = [], np.asarray(X, dtype=np.float32)
    for W, b in zip(net.coefs_[:-1], net.intercepts_[:-1]):
        H = np.maximum(H @ W.astype(np.float32) + b.astype(np.float32), 0.0)
        out.append(H)
    return out


def embeddings(n: int, n_train: int, epochs: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{name: (E, y)}: the hidden layers of a network trained on clean images, for images it never saw."""
    import warnings

    from sklearn.datasets import load_digits
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier

    from lgcexp.data import load_dataset

    sets = {}
    mnist = load_dataset("mnist", data_dir=data_dir(), download=False)
    X = np.asarray(mnist.X, dtype=np.float32) / 255.0
    y = np.asarray(mnist.y, dtype=np.int64)
    judged = np.arange(60_000, 60_000 + n)
    digits = load_digits()
    Xd, yd = digits.data.astype(np.float32) / 16.0, digits.target.astype(np.int64)
    half = yd.size // 2
    for name, (Xt, yt, Xj, yj, sizes) in {
            "mnist": (X[:n_train], y[:n_train], X[judged], y[judged], (512, 256)),
            "digits": (Xd[:half], yd[:half], Xd[half:], yd[half:], (256, 128))}.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            net = MLPClassifier(hidden_layer_sizes=sizes, max_iter=epochs, batch_size=128, random_state=0,
                                tol=0.0).fit(Xt, yt)
        acc = float(net.score(Xj, yj))
        for layer, E in zip(("first", "last"), hidden_layers(net, Xj)):
            sets[f"{name} {layer} hidden layer ({E.shape[1]} columns; net accuracy {acc:.3f})"] = (E, yj)
    return sets


def flip(y: np.ndarray, rate: float, seed: int) -> np.ndarray:
    """``rate`` of the labels (exactly round(rate n), seeded) moved to another class, uniformly."""
    rng = np.random.default_rng(seed)
    c = int(y.max()) + 1
    out = y.copy()
    idx = rng.choice(y.size, int(round(rate * y.size)), replace=False)
    out[idx] = (out[idx] + rng.integers(1, c, idx.size)) % c
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4000, help="MNIST images judged")
    ap.add_argument("--train", type=int, default=10000, help="clean MNIST images the embedding network learns from")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--rates", default="0.02,0.05,0.1")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args(argv)
    from sklearn.metrics import average_precision_score

    from lgcexp import find_label_issues

    rates = [float(r) for r in a.rates.split(",")]
    report = {**header(), "args": vars(a), "cells": []}
    t0 = time.perf_counter()
    sets = embeddings(a.n, a.train, a.epochs)
    report["embedding_seconds"] = time.perf_counter() - t0
    for name, (E, y) in sets.items():
        for rate in rates:
            for view in (True, False):
                acc = {m: {"f1": [], "auprc": [], "flagged": [], "seconds": []} for m in METRICS}
                for seed in range(a.seeds):
                    labels = flip(y, rate, seed)
                    wrong = labels != y
                    for m in METRICS:
                        t = time.perf_counter()
                        df = find_label_issues(E, labels, metric=m, features=view).sort_values("index")
                        flag = df["is_label_issue"].to_numpy()
                        tp = int((flag & wrong).sum())
                        acc[m]["f1"].append(2 * tp / (flag.sum() + wrong.sum()))
                        acc[m]["auprc"].append(float(average_precision_score(wrong, -df["label_quality"])))
                        acc[m]["flagged"].append(int(flag.sum()))
                        acc[m]["seconds"].append(time.perf_counter() - t)
                for m in METRICS:
                    cell = {"embedding": name, "rate": rate, "features": view, "metric": m,
                            "wrong": int(round(rate * y.size)),
                            **{k: float(np.mean(v)) for k, v in acc[m].items()},
                            "f1_seeds": acc[m]["f1"], "auprc_seeds": acc[m]["auprc"]}
                    report["cells"].append(cell)
                    print(f"{name} | {rate:.0%} | view {view} | {m}: F1 {cell['f1']:.3f} AUPRC {cell['auprc']:.3f} "
                          f"flagged {cell['flagged']:.0f} of {cell['wrong']} ({cell['seconds']:.1f} s)", flush=True)
    md = ["# find_label_issues on network embeddings: Euclidean vs cosine kNN graph", "",
          f"{report['date']}, {report['machine']}; {a.seeds} seeds, uniform flips; means over seeds", "",
          "| embedding | wrong | second view | metric | F1 | AUPRC | flagged | seconds |",
          "|---|---|---|---|---|---|---|---|"]
    for c in report["cells"]:
        md.append(f"| {c['embedding']} | {c['rate']:.0%} ({c['wrong']}) | {'network' if c['features'] else 'none'} | "
                  f"{c['metric']} | {c['f1']:.3f} | {c['auprc']:.3f} | {c['flagged']:.0f} | {c['seconds']:.1f} |")
    wins = {}
    for key in ("f1", "auprc"):
        for view in (True, False):
            pairs = [(c, d) for c in report["cells"] for d in report["cells"]
                     if c["metric"] == "cosine" and d["metric"] == "euclidean" and c["features"] == view
                     and d["features"] == view and c["embedding"] == d["embedding"] and c["rate"] == d["rate"]]
            diff = [c[key] - d[key] for c, d in pairs]
            wins[f"{key}, {'with' if view else 'without'} the network view"] = {
                "cosine better": sum(x > 0 for x in diff), "cells": len(diff), "mean difference": float(np.mean(diff))}
    report["cosine_minus_euclidean"] = wins
    md += ["", "## Cosine minus Euclidean", "", "| figure | cells where cosine is better | mean difference |",
           "|---|---|---|"]
    md += [f"| {k} | {v['cosine better']} of {v['cells']} | {v['mean difference']:+.4f} |" for k, v in wins.items()]
    write_report(a.out, "embeddings", report, "\n".join(md) + "\n")
    plot(report, Path(a.out) / "embeddings.png")
    print(f"wrote {Path(a.out) / 'embeddings.md'} ({time.perf_counter() - t0:.0f} s)")
    return 0


def plot(report: dict, path: Path) -> None:
    """F1 and AUPRC of cosine against Euclidean, one point per cell (above the diagonal: cosine better)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4.6))
    cells = report["cells"]
    for ax, key in zip(axes, ("f1", "auprc")):
        for view, marker in ((True, "o"), (False, "^")):
            pairs = [(d[key], c[key]) for c in cells for d in cells
                     if c["metric"] == "cosine" and d["metric"] == "euclidean" and c["features"] == view
                     and d["features"] == view and c["embedding"] == d["embedding"] and c["rate"] == d["rate"]]
            if pairs:
                e, c = np.array(pairs).T
                ax.scatter(e, c, marker=marker, label="with the network view" if view else "graph alone")
        lo = min(min(c[key] for c in cells), 1.0) - 0.02
        ax.plot([lo, 1], [lo, 1], color="grey", lw=0.8)
        ax.set_xlabel(f"{key.upper()}, Euclidean kNN graph")
        ax.set_ylabel(f"{key.upper()}, cosine kNN graph")
        ax.set_title(f"{key.upper()} per cell (embedding x rate); above the line: cosine better", fontsize=9)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
