"""Stage 4: the p smallest eigenpairs of the normalised Laplacian ``L = I - S`` (paper §3.2).

``L = U Lambda U^T`` restricted to its p smoothest eigenfunctions is what the spectral methods need
(AutoD: ``P = U diag(1 / (1 - alpha + alpha lambda)) U^T``; SIIS: ``F = U A``). The pairs are returned
sorted ascending in lambda, with the trivial eigenvector (lambda = 0, ``u ~ D^1/2 1``) kept, each column of
unit norm, and signs fixed (the largest-magnitude entry of every column is positive) so that results do
not depend on the solver's random start.

Solvers (``solver=``). Measured on MNIST (n = 70000, 15-NN union graph, 1.55M stored entries), p = 300,
one BLAS thread on a shared 2-core machine (``python -m benchmarks autod eig``):

- ``chebyshev`` (44-55 s, residual < 1e-13): ARPACK Lanczos on a degree-12 Chebyshev polynomial of S that
  maps the unwanted part of the spectrum into [-1, 1] and blows up the wanted end, so one Lanczos pass of
  ncv = 1.5p + 20 steps converges (12 sparse products per step, few orthogonalisations). The cut is set by a
  kernel-polynomial eigenvalue count and checked afterwards. Default for large graphs.
- ``lanczos`` (230-250 s): ARPACK ``eigsh`` for the p largest algebraic eigenvalues of S (lambda = 1 - mu);
  ~3000 Lanczos steps with ncv = 2p + 1, dominated by ARPACK's re-orthogonalisation.
- ``shift-invert``: close to the authors' choice (docs/fidelity.md#autod-eigensolver), ``eigsh(L, sigma=-0.75,
  which='LM')`` with a SuperLU factor of ``L + 0.75 I``: not finished after 11 min (RSS 3 GB and growing;
  kNN graphs of high-dimensional data fill in badly). Fine on small graphs. Uses ARPACK's 'normal' mode:
  the authors' 'cayley' mode returns wrong (largest-lambda) pairs once lambda_p > 0.28 (ISOLET, p = 300).
- ``lobpcg`` (block p + 30, random start, no preconditioner: diag(L) = 1): not finished within 600 s.
- ``dense``: LAPACK ``eigh`` (subset, driver evr) of the dense L; small graphs only.
- ``auto`` (default): ``dense`` for n <= ``DENSE_MAX_N`` unless p < n / 20, otherwise ``chebyshev``.

All solvers are followed by the same checks, recorded in the result: per-pair residuals
``||L u_k - lambda_k u_k||_2`` (their max is ``residual``) and ``max |U^T U - I|``.

The result is cached next to the graph (``<cache_dir>/eig-<graph key>-p<p>.npz``, atomic write under a file
lock). A request for p pairs is served from any entry of the same graph holding p' >= p pairs computed
with a tolerance at least as strict, by taking its head; the solver does not enter the key (all solvers
return the same pairs to within the tolerance; the entry records which one ran).
"""
from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from .cache import Cache
from .errors import UserError
from .params import Interval, Options, check_params, unit_open

log = logging.getLogger(__name__)

SOLVERS = ("auto", "lanczos", "chebyshev", "shift-invert", "lobpcg", "dense")
DEFAULT_SOLVER = "auto"
DEFAULT_TOL = 1e-8
#: ``solver='auto'`` decomposes densely when n <= DENSE_MAX_N and p >= n / DENSE_MIN_FRACTION
DENSE_MAX_N = 2500
DENSE_MIN_FRACTION = 20
#: the authors' shift for the shift-invert solver (docs/fidelity.md#autod-eigensolver)
SHIFT_SIGMA = -0.75
CACHE_KIND = "eig"


@dataclass(eq=False)  # numpy fields: no element-wise __eq__
class Eigenpairs:
    """The p smallest eigenpairs of ``L = I - S``.

    ``values`` (p,) ascending; ``vectors`` (n, p) orthonormal columns, column k pairs with ``values[k]``;
    ``residual`` = max_k ||L u_k - lambda_k u_k||_2. The remaining fields are bookkeeping.
    """

    values: np.ndarray
    vectors: np.ndarray
    residual: float
    pair_residuals: np.ndarray | None = None  # per-column ||L u_k - lambda_k u_k||_2
    solver: str = "unknown"
    tol: float = float("nan")
    seconds: float = float("nan")  # wall time of the solve that produced the pairs (not of a cache load)
    orth_error: float = float("nan")  # max |U^T U - I|
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def p(self) -> int:
        return int(self.values.size)

    @property
    def n(self) -> int:
        return int(self.vectors.shape[0])

    def head(self, m: int) -> "Eigenpairs":
        """The m smallest pairs (views, no copy)."""
        m = int(m)
        if not 0 < m <= self.p:
            raise ValueError(f"head({m}) of {self.p} eigenpairs")
        if m == self.p:
            return self
        pr = None if self.pair_residuals is None else self.pair_residuals[:m]
        res = float(pr.max()) if pr is not None else float(self.residual)
        return Eigenpairs(self.values[:m], self.vectors[:, :m], res, pr, self.solver, self.tol, self.seconds,
                          self.orth_error, dict(self.extra, head_of=self.p))

    def summary(self) -> dict[str, Any]:
        """Small JSON-able description (for result.json)."""
        out = {
            "p": self.p,
            "solver": self.solver,
            "tol": float(self.tol),
            "residual": float(self.residual),
            "orth_error": float(self.orth_error),
            "seconds": None if not np.isfinite(self.seconds) else round(float(self.seconds), 3),
            "lambda_min": float(self.values[0]),
            "lambda_max": float(self.values[-1]),
        }
        out.update({k: v for k, v in self.extra.items() if isinstance(v, (int, float, str, bool))})
        return out

    # -- (de)serialisation for the cache -------------------------------------------------------------------
    def to_arrays(self) -> dict[str, np.ndarray]:
        return {
            "values": np.asarray(self.values, dtype=np.float64),
            "vectors": np.asarray(self.vectors, dtype=np.float64),
            "pair_residuals": np.asarray(self.pair_residuals if self.pair_residuals is not None
                                         else np.full(self.p, self.residual), dtype=np.float64),
            "solver": np.array(self.solver),
            "tol": np.array(float(self.tol)),
            "seconds": np.array(float(self.seconds)),
            "orth_error": np.array(float(self.orth_error)),
            "extra_json": np.array(json.dumps({k: v for k, v in self.extra.items()
                                               if isinstance(v, (int, float, str, bool))})),
        }

    @classmethod
    def from_arrays(cls, a: dict[str, np.ndarray]) -> "Eigenpairs":
        pr = np.asarray(a["pair_residuals"], dtype=np.float64)
        return cls(values=np.asarray(a["values"]), vectors=np.asarray(a["vectors"]), residual=float(pr.max()),
                   pair_residuals=pr, solver=str(a["solver"]), tol=float(a["tol"]), seconds=float(a["seconds"]),
                   orth_error=float(a["orth_error"]),
                   extra=json.loads(str(a["extra_json"])) if "extra_json" in a else {})


# -------------------------------------------------------------------------------------------------------------
# checks and helpers
# -------------------------------------------------------------------------------------------------------------

#: the ``eig`` section of the config (the eigendecomposition stage)
EIG_PARAMETERS = {
    "p": [Interval("int", 1, None)],
    "solver": [Options(SOLVERS)],
    "tol": [unit_open()],
    # solver options (add with +eig.ncv=..., +eig.maxiter=...): Lanczos basis size and iteration cap
    "ncv": [Interval("int", 2, None)],
    "maxiter": [Interval("int", 1, None)],
}


def check_eig_params(p: Any, n: int | None = None, solver: Any = DEFAULT_SOLVER, tol: Any = DEFAULT_TOL) -> None:
    """Validate the eigendecomposition settings against ``EIG_PARAMETERS`` (and p < n); one-line UserError."""
    check_params({"p": p, "solver": solver, "tol": tol}, {k: EIG_PARAMETERS[k] for k in ("p", "solver", "tol")}, "eig.")
    if n is not None and p >= n:
        raise UserError(f"eig.p={p} is not allowed: it must be less than the number of points ({n})")


def laplacian(graph) -> sp.csr_matrix:
    """``L = I - S`` (symmetric CSR)."""
    n = graph.S.shape[0]
    return sp.csr_matrix(sp.identity(n, format="csr") - graph.S)


def pair_residuals(S: sp.spmatrix, values: np.ndarray, vectors: np.ndarray, block: int = 64) -> np.ndarray:
    """``||L u_k - lambda_k u_k||_2`` for every column, with ``L u = u - S u``; done in column blocks."""
    out = np.empty(values.size)
    for j in range(0, values.size, block):
        U = vectors[:, j:j + block]
        R = U - S @ U - U * values[j:j + block]
        out[j:j + block] = np.linalg.norm(R, axis=0)
    return out


def orthonormality_error(U: np.ndarray) -> float:
    G = U.T @ U
    G[np.diag_indices_from(G)] -= 1.0
    return float(np.abs(G).max()) if G.size else 0.0


def _fix_signs(U: np.ndarray) -> np.ndarray:
    """Make the largest-magnitude entry of every column positive (deterministic output)."""
    idx = np.abs(U).argmax(axis=0)
    s = np.sign(U[idx, np.arange(U.shape[1])])
    s[s == 0] = 1.0
    return U * s


class _Counter:
    """Counts operator applications; drives an optional tqdm bar (the total is unknown in advance)."""

    def __init__(self, progress: bool, desc: str):
        self.count = 0
        self.bar = None
        if progress:
            from tqdm.auto import tqdm

            self.bar = tqdm(desc=desc, unit="op", leave=False)

    def tick(self, k: int = 1) -> None:
        self.count += k
        if self.bar is not None:
            self.bar.update(k)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# -------------------------------------------------------------------------------------------------------------
# solvers: each returns (values ascending, vectors, info dict)
# -------------------------------------------------------------------------------------------------------------

def _start_vector(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(n)


def _solve_lanczos(S, p, tol, counter, ncv=None, maxiter=None):
    n = S.shape[0]

    def mv(x):
        counter.tick()
        return S @ x

    op = spla.LinearOperator((n, n), matvec=mv, dtype=np.float64)
    mu, U = spla.eigsh(op, k=p, which="LA", tol=tol, ncv=ncv, maxiter=maxiter, v0=_start_vector(n))
    return 1.0 - mu, U, {"matvecs": counter.count, "ncv": int(ncv or min(n, max(2 * p + 1, 20)))}


def _kpm_count_above(S, cuts: np.ndarray, degree: int = 200, n_vectors: int = 16, seed: int = 0) -> np.ndarray:
    """Estimated number of eigenvalues of S (spectrum in [-1, 1]) above each cut: stochastic trace
    (Rademacher vectors) of the Jackson-damped Chebyshev expansion of the step function."""
    n = S.shape[0]
    rng = np.random.default_rng(seed)
    V = rng.choice([-1.0, 1.0], size=(n, n_vectors))
    moments = np.empty(degree + 1)
    T0, T1 = V, S @ V
    moments[0] = np.einsum("ij,ij->", V, T0) / n_vectors
    moments[1] = np.einsum("ij,ij->", V, T1) / n_vectors
    for k in range(2, degree + 1):
        T0, T1 = T1, 2.0 * (S @ T1) - T0
        moments[k] = np.einsum("ij,ij->", V, T1) / n_vectors
    k = np.arange(degree + 1)
    M = degree + 1
    jackson = ((M - k + 1) * np.cos(np.pi * k / (M + 1))
               + np.sin(np.pi * k / (M + 1)) / np.tan(np.pi / (M + 1))) / (M + 1)
    out = np.empty(len(cuts))
    for i, c in enumerate(cuts):
        # step function 1[mu >= c] on [-1, 1]: Chebyshev coefficients
        th = np.arccos(np.clip(c, -1.0, 1.0))
        coef = np.empty(degree + 1)
        coef[0] = th / np.pi
        coef[1:] = 2.0 * np.sin(k[1:] * th) / (np.pi * k[1:])
        out[i] = float(np.sum(coef * jackson * moments))
    return out


def _chebyshev_cut(S, p: int, margin: float, counter, degree: int = 120, n_vectors: int = 12) -> tuple[float, float]:
    """A cut c below the p-th largest eigenvalue of S: the estimated count above c is p * (1 + margin) + 20."""
    cuts = np.linspace(0.999, -0.5, 1500)
    counts = _kpm_count_above(S, cuts, degree=degree, n_vectors=n_vectors)
    counter.tick(degree * n_vectors)
    target = p * (1.0 + margin) + 20
    if not np.any(counts >= target):
        return float("nan"), float(counts[-1])  # p is too large a part of the spectrum to filter
    i = int(np.argmax(counts >= target))
    return float(cuts[i]), float(counts[i])


def _solve_chebyshev(S, p, tol, counter, degree=12, margin=0.25, ncv=None, maxiter=None, max_tries=3,
                     kpm_degree=120, kpm_vectors=12):
    """Lanczos (ARPACK) on the Chebyshev filter T_m(t(S)), t mapping [-1, c] onto [-1, 1], with c below the
    p-th eigenvalue: the wanted eigenvalues are blown up and separated, so far fewer Lanczos steps (and
    hence orthogonalisations, the dominant cost on large graphs) are needed, at m sparse products each.
    c is estimated by a kernel polynomial eigenvalue count and validated afterwards (all p Ritz values of S
    must lie above c; otherwise c is lowered and the solve repeated). Finished by a Rayleigh-Ritz step on S.
    """
    n = S.shape[0]
    t0 = time.perf_counter()
    c, est = _chebyshev_cut(S, p, margin, counter, kpm_degree, kpm_vectors)
    t_cut = time.perf_counter() - t0
    if not np.isfinite(c):
        log.info("chebyshev filter: no useful cut for p=%d (estimated count %.0f); plain Lanczos instead", p, est)
        lam, U, info = _solve_lanczos(S, p, tol, counter, ncv=ncv, maxiter=maxiter)
        return lam, U, dict(info, filter="none")
    lo = -1.0
    for attempt in range(max_tries):
        a = 2.0 / (c - lo)
        b = -(c + lo) / (c - lo)

        def mv(x, a=a, b=b):
            counter.tick(degree)
            y0 = x
            y1 = a * (S @ x) + b * x
            for _ in range(degree - 1):
                y0, y1 = y1, 2.0 * (a * (S @ y1) + b * y1) - y0
            return y1

        op = spla.LinearOperator((n, n), matvec=mv, dtype=np.float64)
        k_ncv = ncv or min(n - 1, max(int(1.5 * p) + 20, 40))
        theta, U = spla.eigsh(op, k=p, which="LA", tol=tol, ncv=k_ncv, maxiter=maxiter, v0=_start_vector(n))
        # Rayleigh-Ritz on S in the computed subspace (also orders by mu and cleans clustered pairs)
        SU = S @ U
        mu, Q = np.linalg.eigh(0.5 * ((U.T @ SU) + (U.T @ SU).T))
        U = U @ Q
        if mu.min() >= c - 1e-12:
            break
        log.info("chebyshev filter cut %.5f was above the %d-th eigenvalue (%.5f); retrying lower", c, p, mu.min())
        c = float(mu.min()) - 2.0 * (1.0 - float(mu.min())) / p - 0.01
    else:  # pragma: no cover - would need a badly wrong count estimate three times
        raise RuntimeError("chebyshev-filtered Lanczos could not bracket the wanted eigenvalues")
    return 1.0 - mu, U, {"matvecs": counter.count, "ncv": int(k_ncv), "degree": int(degree), "cut": round(c, 6),
                         "cut_seconds": round(t_cut, 3), "cut_est_count": round(est, 1), "tries": attempt + 1}


def _solve_shift_invert(S, p, tol, counter, sigma=SHIFT_SIGMA, mode="normal", ncv=None, maxiter=None):
    """ARPACK on ``(L - sigma I)^-1`` (SuperLU factor). ``mode='normal'``: the eigenvalues 1/(lambda - sigma)
    are monotone in lambda, so 'LM' returns the p smallest. The authors' ``mode='cayley'`` looks at
    (lambda + sigma)/(lambda - sigma), whose magnitude is *not* monotone on [0, 2]: with sigma = -0.75 it
    returns pairs from the top of the spectrum as soon as lambda_p > 0.28 (e.g. ISOLET with p = 300)."""
    n = S.shape[0]
    L = sp.csc_matrix(sp.identity(n, format="csc") - S)
    t0 = time.perf_counter()
    lu = spla.splu(sp.csc_matrix(L - sigma * sp.identity(n, format="csc")))
    t_fact = time.perf_counter() - t0

    def solve(x):
        counter.tick()
        return lu.solve(x)

    opinv = spla.LinearOperator((n, n), matvec=solve, dtype=np.float64)
    lam, U = spla.eigsh(L, k=p, sigma=sigma, which="LM", mode=mode, OPinv=opinv, tol=tol, ncv=ncv,
                        maxiter=maxiter, v0=_start_vector(n))
    fill = (lu.L.nnz + lu.U.nnz) / max(L.nnz, 1)
    return lam, U, {"solves": counter.count, "factor_seconds": round(t_fact, 3), "lu_fill": round(float(fill), 2),
                    "mode": mode}


def _solve_lobpcg(S, p, tol, counter, maxiter=None, block=None):
    n = S.shape[0]
    L = sp.csr_matrix(sp.identity(n, format="csr") - S)
    # a few guard vectors beyond p speed up convergence of the last wanted pairs
    m = min(n - 1, block or p + max(10, p // 10))
    X = np.random.default_rng(0).standard_normal((n, m))

    def mm(V):
        counter.tick()  # one block product per LOBPCG iteration
        return L @ V

    op = spla.LinearOperator((n, n), matvec=lambda v: L @ v, matmat=mm, dtype=np.float64)
    lam, U = spla.lobpcg(op, X, tol=tol, maxiter=maxiter or 2000, largest=False)
    order = np.argsort(lam)[:p]
    return lam[order], U[:, order], {"block_products": counter.count, "block": m}


def _solve_dense(S, p, tol, counter):
    import scipy.linalg

    L = np.eye(S.shape[0]) - S.toarray()
    L = 0.5 * (L + L.T)
    lam, U = scipy.linalg.eigh(L, subset_by_index=[0, p - 1], driver="evr", overwrite_a=True)
    counter.tick()
    return lam, U, {}


_SOLVER_FUNCS = {"lanczos": _solve_lanczos, "chebyshev": _solve_chebyshev, "shift-invert": _solve_shift_invert,
                 "lobpcg": _solve_lobpcg, "dense": _solve_dense}


def solve_eigenpairs(graph, p: int, *, solver: str = DEFAULT_SOLVER, tol: float = DEFAULT_TOL,
                     progress: bool = False, **solver_options) -> Eigenpairs:
    """Compute (no cache) the p smallest eigenpairs of ``L = I - S`` and check their residuals."""
    S = graph.S
    n = S.shape[0]
    check_eig_params(p, n, solver, tol)
    chosen = resolve_solver(solver, n, int(p))
    counter = _Counter(progress, f"eigenpairs p={p} ({chosen})")
    t0 = time.perf_counter()
    try:
        lam, U, info = _SOLVER_FUNCS[chosen](S, int(p), float(tol), counter, **solver_options)
    finally:
        counter.close()
    order = np.argsort(lam, kind="stable")
    lam = np.asarray(lam, dtype=np.float64)[order]
    U = _fix_signs(np.ascontiguousarray(np.asarray(U, dtype=np.float64)[:, order]))
    seconds = time.perf_counter() - t0
    pr = pair_residuals(S, lam, U)
    eig = Eigenpairs(values=lam, vectors=U, residual=float(pr.max()), pair_residuals=pr, solver=chosen,
                     tol=float(tol), seconds=seconds, orth_error=orthonormality_error(U), extra=info)
    log.info("eigenpairs: p=%d of n=%d by %s in %.1fs; lambda in [%.3g, %.3g], max residual %.2e, "
             "orthonormality error %.1e", p, n, chosen, seconds, lam[0], lam[-1], eig.residual, eig.orth_error)
    return eig


def resolve_solver(solver: str, n: int, p: int) -> str:
    """``auto``: dense LAPACK when the graph is small and p is not a small fraction of it (ARPACK is slow
    when p is a sizeable part of n), otherwise Chebyshev-filtered Lanczos (the fastest on MNIST)."""
    if solver == "auto":
        return "dense" if n <= DENSE_MAX_N and p * DENSE_MIN_FRACTION >= n else "chebyshev"
    return solver


# -------------------------------------------------------------------------------------------------------------
# cached entry point
# -------------------------------------------------------------------------------------------------------------

def _cache_key(graph_key: str, p: int) -> str:
    return f"{graph_key}-p{int(p)}"


def _cached_candidates(cache: Cache, graph_key: str, p: int) -> list[tuple[int, Any]]:
    """Cache files of this graph with p' >= p, smallest p' first (tolerance checked on load)."""
    if cache.root is None or not cache.root.exists():
        return []
    pat = re.compile(rf"^{re.escape(CACHE_KIND)}-{re.escape(graph_key)}-p(\d+)\.npz$")
    found = []
    for f in cache.root.glob(f"{CACHE_KIND}-{graph_key}-p*.npz"):
        m = pat.match(f.name)
        if m and int(m.group(1)) >= p:
            found.append((int(m.group(1)), f))
    return sorted(found, key=lambda t: t[0])


def check_eig_arrays(a: dict[str, np.ndarray], n: int, p: int) -> str | None:
    """Why a cached eigenpair entry cannot hold p pairs of an n-point graph (None when it can)."""
    for name in ("values", "vectors", "pair_residuals", "solver", "tol", "seconds", "orth_error"):
        if name not in a:
            return f"array {name!r} is missing"
    if a["values"].shape != (p,) or a["pair_residuals"].shape != (p,):
        return f"{a['values'].shape} eigenvalues where {p} were expected"
    if a["vectors"].shape != (n, p):
        return f"eigenvectors of shape {a['vectors'].shape} where ({n}, {p}) was expected"
    if not (np.all(np.isfinite(a["values"])) and np.all(np.isfinite(a["vectors"]))):
        return "non-finite eigenpairs"
    return None


def _load_usable(cache: Cache, graph_key: str, p: int, tol: float, n: int) -> Eigenpairs | None:
    for p_cached, path in _cached_candidates(cache, graph_key, p):
        arrays = cache.load(CACHE_KIND, _cache_key(graph_key, p_cached),
                            validate=lambda a, pc=p_cached: check_eig_arrays(a, n, pc))
        if arrays is None:  # a bad entry was reported and removed
            continue
        eig = Eigenpairs.from_arrays(arrays)
        if eig.p != p_cached or not eig.tol <= tol * (1 + 1e-12):
            continue  # computed with a looser tolerance than asked for
        return eig.head(p)
    return None


def laplacian_eigenpairs(graph, p: int, *, cache: Cache | None = None, progress: bool = False,
                         solver: str = DEFAULT_SOLVER, tol: float = DEFAULT_TOL,
                         **solver_options) -> tuple[Eigenpairs, bool]:
    """Returns (eigenpairs, cache_hit).

    If the cache holds an entry for this graph with p' >= p eigenpairs (computed with a tolerance at least
    as strict as ``tol``), its head(p) is returned without solving. Otherwise the pairs are computed under
    the entry's file lock (a parallel worker waits and then reuses them) and written atomically.
    ``solver_options`` go to the solver (e.g. ``ncv``, ``maxiter``).
    """
    check_eig_params(p, graph.n, solver, tol)
    cache = cache or Cache(None)
    if cache.root is None:
        return solve_eigenpairs(graph, p, solver=solver, tol=tol, progress=progress, **solver_options), False
    hit = _load_usable(cache, graph.key, p, tol, graph.n)
    if hit is not None:
        log.info("eigenpairs: p=%d from cache (%s, residual %.2e)", p, hit.solver, hit.residual)
        return hit, True
    path = cache.path(CACHE_KIND, _cache_key(graph.key, p))
    with cache.locked(path):
        hit = _load_usable(cache, graph.key, p, tol, graph.n)  # another worker may have finished meanwhile
        if hit is not None:
            return hit, True
        eig = solve_eigenpairs(graph, p, solver=solver, tol=tol, progress=progress, **solver_options)
        cache.store(CACHE_KIND, _cache_key(graph.key, p), eig.to_arrays())
    return eig, False
