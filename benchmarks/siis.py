"""SIIS speed figures (section "siis" of benchmarks/report.py; also runs on its own).

One SIIS fit on ISOLET (m = 300, the paper's graph, 1040 labels, seed 0) at 0 % noise (lambda1 = 1e5, the
slowest setting: most ALM iterations) and at 40 % (lambda1 = 1e2), after the eigenpairs are cached
(``$LGCEXP_CACHE_DIR``; the first run computes them). Baseline, measured in the same run: the textbook ALM
of docs/fidelity.md#siis as the authors' code does it, with the dense (edges x m) matrix P U formed explicitly
and an m x m solve per iteration; it runs a few iterations only and is compared per iteration.

    python -m benchmarks siis            # ISOLET
    python -m benchmarks siis --quick    # digits, m = 30, 20 % and 40 % noise (offline, dense eigenpairs)
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

from benchmarks.common import LABELS, load_graph

BASELINE_ITERS = 5


def textbook_iterations(prob, n_iter: int, mu: float = 1.0, rho: float = 1.2) -> float:
    """Seconds per iteration of the plain ALM with PU formed explicitly (multipliers at ones)."""
    from lgcexp.algorithms.siis import group_shrink

    t0 = time.perf_counter()
    PU = np.asarray(prob.P @ prob.U)
    JU, Y = prob.UL, prob.YL
    S2 = 2 * prob.lambda2 * np.diag(prob.sigma)
    G = PU.T @ PU + JU.T @ JU
    setup = time.perf_counter() - t0
    L1, L2 = np.ones((PU.shape[0], Y.shape[1])), np.ones(Y.shape)
    A = np.zeros((PU.shape[1], Y.shape[1]))
    t0 = time.perf_counter()
    for _ in range(n_iter):
        Q = group_shrink(PU @ A - L1 / mu, 1 / mu)
        R = group_shrink(JU @ A - Y - L2 / mu, prob.lambda1 / mu)
        A = np.linalg.solve(S2 + mu * G, PU.T @ L1 + JU.T @ L2 + mu * PU.T @ Q + mu * JU.T @ (R + Y))
        L1 = L1 + mu * (Q - PU @ A)
        L2 = L2 + mu * (R - JU @ A + Y)
        mu = mu * rho
    return (time.perf_counter() - t0) / n_iter, setup, PU.nbytes


def run(quick: bool = False) -> dict:
    from lgcexp.algorithms.base import one_hot
    from lgcexp.algorithms.siis import SIIS, SIISProblem, incidence_matrix
    from lgcexp.labels import sample_and_corrupt
    from lgcexp.spectral import laplacian_eigenpairs

    if quick:
        name, m, settings = "digits", 30, ((0.2, 1e2), (0.4, 1e2))
    else:
        name, m, settings = "isolet", 300, ((0.0, 1e5), (0.4, 1e2))
    n_lab = LABELS[name]
    data, g, cache = load_graph(name, download=True)
    t0 = time.perf_counter()
    eig, hit = laplacian_eigenpairs(g, m, cache=cache)
    t_eig = time.perf_counter() - t0
    out: dict = {"dataset": name, "n": data.n, "edges_stored": int(g.W.nnz), "m": m, "classes": data.n_classes,
                 "eig_s": t_eig, "eig_cache_hit": hit}
    for rate, lam1 in settings:
        split = sample_and_corrupt(data.y, n_lab, rate, seed=0)
        unl_mask = split.unlabeled_mask(data.n)
        algo = SIIS(m=m, lambda1=lam1, lambda2=10.0)
        t0 = time.perf_counter()
        algo.fit(g, split.labeled, split.y_observed, data.n_classes, eig=eig)
        t = time.perf_counter() - t0
        tag = f"noise{int(round(100 * rate))}"
        it = algo.info_["solver_iterations"]
        out.update({
            f"{tag}_fit_s": t,
            f"{tag}_iterations": it,
            f"{tag}_s_per_iter": (t - algo.info_["siis_setup_seconds"]) / it,
            f"{tag}_acc_unlabeled": float(np.mean(algo.predict()[unl_mask] == data.y[unl_mask])),
            f"{tag}_acc_labeled": float(np.mean(algo.labeled_pred_ == split.y_clean)),
        })
    # baseline: textbook iterations with explicit PU (the last problem above: 40 % noise)
    prob = SIISProblem(U=eig.vectors[:, :m], sigma=eig.values[:m], P=incidence_matrix(g.W), labeled=split.labeled,
                       YL=one_hot(split.y_observed, data.n_classes), lambda1=settings[-1][1], lambda2=10.0)
    per_iter, setup, nbytes = textbook_iterations(prob, BASELINE_ITERS)
    out.update({
        "textbook_s_per_iter": per_iter,
        "textbook_setup_s": setup,
        "textbook_PU_MB": nbytes / 2 ** 20,
        "speedup_per_iter_vs_textbook": per_iter / out[f"noise{int(round(100 * settings[-1][0]))}_s_per_iter"],
        "note": f"textbook: dense PU ({prob.P.shape[0]} x {m}) and an m x m solve per "
                f"iteration, timed over {BASELINE_ITERS} iterations",
    })
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args(argv)
    print(json.dumps(run(a.quick), indent=1, default=float))
    return 0
