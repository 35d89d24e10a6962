"""Uniform label noise drawn exactly as the paper's authors' code draws it (``apply_noise`` with
``deterministic=False`` in their ``noise_utils.py``; docs/fidelity.md#noise), so a seed flips the same labels.

The call sequence, on numpy's legacy generator (a ``RandomState(seed)`` object: the stream of
``np.random.seed(seed)``), for the ``l`` labelled points in ascending index order:

1. ``clean = round(l * trace(T) / c)`` with the nominal T (diagonal ``1 - rate``), i.e. ``round(l (1 - rate))``
   computed as the authors do; ``m = l - clean`` labels are noisy.
2. The noisy picks are the first ``m`` entries of ``permutation(l)``. For each pick, in that order, a new
   class is drawn with ``choice(c)`` until it differs from the true one; ``A[true, new]`` counts these,
   and ``A[k, k]`` holds class k's kept labels.
3. The labelled positions are walked in the order of ``RandomState(seed).permutation(l)`` (a fresh
   generator, hence the same permutation as in 2); a position of true class ``k`` gets the lowest class
   ``h`` with ``A[k, h] > 0``, and ``A[k, h]`` is decremented.

So the counts per (true, new) pair come from the picks, but which points carry them is decided by the walk:
within a class, the first positions in permutation order take the new classes below ``k``, then the kept
label, then the classes above ``k``. The result is exact-count uniform noise, like ``noise=uniform``, with a
different (the authors') draw.
"""
from __future__ import annotations

import numpy as np

from .uniform import UniformNoise


def reference_clean_count(n_labeled: int, n_classes: int, rate: float) -> int:
    """``round(l * trace(T) / c)`` evaluated as the authors' code does (floating-point sum of the diagonal,
    numpy's round half to even)."""
    trace = sum([1.0 - float(rate)] * int(n_classes))
    return int(np.round(int(n_labeled) * trace / int(n_classes)))


class ReferenceNoise(UniformNoise):
    """The authors' uniform-noise draw (bit-for-bit on the same labelled set and seed).

    ========  ===============  =========================================================
    rate      [0, 1), 0.0      fraction of the labelled points flipped
                               (``l - round(l (1 - rate))``, as the authors round it)
    ========  ===============  =========================================================

    Expected transition matrix: ``1 - rate`` on the diagonal, ``rate / (c - 1)`` elsewhere.
    """

    name = "reference"  # parameters and expected transition matrix: uniform noise's; only the draw differs

    def _corrupt(self, y_clean: np.ndarray, n_classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        l, c = y_clean.size, n_classes
        m = l - reference_clean_count(l, c, float(self.rate))
        rs = np.random.RandomState(seed)
        picks = rs.permutation(l)[:m]
        A = np.diag(np.bincount(y_clean, minlength=c)).astype(np.int64)
        for pos in picks:
            j = int(y_clean[pos])
            new = j
            while new == j:
                new = int(rs.choice(c))
            A[j, j] -= 1
            A[j, new] += 1
        walk = np.random.RandomState(seed).permutation(l)
        cursor = np.zeros(c, dtype=np.int64)
        y_obs = y_clean.copy()
        for pos in walk:
            k = int(y_clean[pos])
            while A[k, cursor[k]] == 0:
                cursor[k] += 1
            y_obs[pos] = cursor[k]
            A[k, cursor[k]] -= 1
        return y_obs, y_obs != y_clean
