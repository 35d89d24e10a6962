"""scikit-learn's LabelSpreading vs lgcexp's AutoLClassifier on noisy labels (docs/api.md, "scikit-learn estimators").

Digits: 10 % of the points keep a label, 20 % of those labels are flipped to another digit, the rest are -1.

    python examples/sklearn_noisy_digits.py
"""
import numpy as np
from sklearn.datasets import load_digits
from sklearn.semi_supervised import LabelSpreading

from lgcexp.sklearn import AutoLClassifier

X, y = load_digits(return_X_y=True)
rng = np.random.default_rng(0)
labeled = rng.choice(y.size, size=y.size // 10, replace=False)           # 10 % of the labels
flip = rng.choice(labeled, size=labeled.size // 5, replace=False)         # 20 % of them wrong
y_train = np.full(y.size, -1)
y_train[labeled] = y[labeled]
y_train[flip] = (y[flip] + rng.integers(1, 10, flip.size)) % 10
unlabeled = y_train == -1

for clf in (LabelSpreading(kernel="knn", n_neighbors=10, alpha=0.9, max_iter=1000), AutoLClassifier()):
    clf.fit(X, y_train)
    acc = np.mean(clf.transduction_[unlabeled] == y[unlabeled])
    print(f"{type(clf).__name__:16s} accuracy on the unlabelled points: {acc:.1%}")

found = np.flatnonzero(clf.label_issues_)                                 # AutoL's suspicious labels
print(f"AutoL flags {found.size} labels as wrong, {np.isin(found, flip).sum()} of them among the {flip.size} flipped")
