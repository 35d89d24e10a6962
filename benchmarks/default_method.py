"""Which method should judge a fully labelled data set by default: LGC's leave-one-out or AutoL's. Not a test.

Every point of a data set labelled, ``noise`` (idn, confusion) at 10 / 20 / 40 % flipped; ``find_label_issues``
with ``method=lgc`` and ``method=autoL`` (each with its defaults: the out-of-fold feature view, cut
``consensus``) on the same noisy labels. Prints F1 of the flags and ROC AUC of ``label_quality`` per run and
writes ``results/bench/default_method.csv``. AutoL's dense l x l matrix keeps this to small sets (digits).

    nice python -m benchmarks default_method [--dataset digits] [--seeds 2]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks.common import OUT, load, write_rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="digits")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--out", default=str(OUT / "default_method.csv"))
    a = ap.parse_args(argv)
    from sklearn.metrics import roc_auc_score

    from lgcexp import find_label_issues
    from lgcexp.noise import make_noise

    X, y = load(a.dataset)
    c = int(y.max()) + 1
    rows = []
    for noise in ("idn", "confusion"):
        for rate in (0.1, 0.2, 0.4):
            for seed in range(a.seeds):
                y_obs, flipped = make_noise(noise, rate=rate).corrupt(y, c, seed, X=X)
                flipped = np.asarray(flipped, dtype=bool)
                for method in ("lgc", "autoL"):
                    t0 = time.perf_counter()
                    df = find_label_issues(X, y_obs, method=method).sort_values("index")
                    flag = df["is_label_issue"].to_numpy()
                    f1 = 2 * (flag & flipped).sum() / (flag.sum() + flipped.sum())
                    auc = roc_auc_score(flipped, -df["label_quality"].to_numpy())
                    rows.append({"dataset": a.dataset, "noise": noise, "rate": rate, "seed": seed, "method": method,
                                 "f1": float(f1), "auc": float(auc), "seconds": time.perf_counter() - t0})
                    print(rows[-1], flush=True)
                    write_rows(rows, a.out)
