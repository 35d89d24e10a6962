"""Write a small CSV with labels nobody has checked, to try a diagnosis run (docs/usage.md, "Your own data").

scikit-learn's handwritten digits (1797 points, 64 pixel columns p0..p63). The `label` column gives a
label (the digit's name, "zero".."nine") to 200 random points and leaves the others empty; 20 of those
200 labels are wrong on purpose. With --truth, a column `true_label` holds the right label of every point,
to score the run with dataset.clean_column=true_label (a benchmark; it is never used for fitting).

    python examples/make_noisy_csv.py digits_noisy.csv [--labels 200] [--wrong 20] [--seed 0] [--truth]
"""
from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
from sklearn.datasets import load_digits

NAMES = np.array(["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="the CSV file to write")
    ap.add_argument("--labels", type=int, default=200, help="points that get a label")
    ap.add_argument("--wrong", type=int, default=20, help="of those, labels that are wrong")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--truth", action="store_true", help="add the column true_label (the right labels)")
    a = ap.parse_args()

    X, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(a.seed)
    labeled = rng.choice(y.size, size=a.labels, replace=False)
    given = y.copy()
    wrong = rng.choice(labeled, size=a.wrong, replace=False)
    given[wrong] = (y[wrong] + rng.integers(1, 10, size=a.wrong)) % 10  # another digit, at random

    df = pd.DataFrame(X.astype(int), columns=[f"p{i}" for i in range(X.shape[1])])
    df["label"] = pd.Series(NAMES[given]).where(np.isin(np.arange(y.size), labeled), "")
    if a.truth:
        df["true_label"] = NAMES[y]
    df.to_csv(a.out, index=False)
    print(f"wrote {a.out}: {y.size} rows, {a.labels} labelled, {a.wrong} of them wrong "
          f"(rows {', '.join(map(str, sorted(wrong.tolist())))})")


if __name__ == "__main__":
    main()
