"""``graph=precomputed``: a graph given as a file, ``graph.path=W.npz``, a scipy sparse adjacency saved with
``scipy.sparse.save_npz`` (any sparse format: csr, csc, coo, ...; matrix or array).

The file is read and checked before any heavy work (reading it is cheap): it must be a sparse n x n matrix,
n the number of points of the data, with finite, non-negative weights, symmetric and with a zero
diagonal. What is not fixed by an option is refused with one line naming ``graph.path=`` as typed:

* an asymmetric matrix is refused unless ``graph.symmetrize=max`` (``W <- max(W, W^T)``, the union graph)
  or ``mean`` (``W <- (W + W^T) / 2``) is asked for; differences within round-off (10^-10 of the largest
  weight) are averaged away silently;
* a nonzero diagonal (self-loops) is refused unless ``graph.diagonal=drop`` (LGC's ``W`` has
  ``W_ii = 0``; a kernel matrix saved with its ones on the diagonal is the usual cause);
* a dense array (``.npy``, or ``.npz`` arrays from ``numpy.savez``) is refused: at the sizes this tool is
  for a dense n x n graph does not fit; save ``scipy.sparse.csr_matrix(W)`` instead.

The features are not used: the builder never reads ``X``. The scikit-learn estimators hand the matrix over
in memory instead of as a file (``build(X, adjacency=W)``, ``graph="precomputed"``); it passes the same
checks, each refusal naming ``X`` instead of ``graph.path``. A graph without a single edge is refused too
(every point would be unreached: nothing to propagate). The graph's key is a hash of its content (after
the rules above), so two files with the same graph share the cached eigenpairs; the graph itself is not
cached (the file is). ``sigma`` is NaN (the weights are the file's).
"""
from __future__ import annotations

import hashlib
import logging
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..cache import Cache, stable_hash
from ..errors import UserError
from ..params import Options, String, fmt_value
from .base import Graph, GraphBuilder

log = logging.getLogger(__name__)

SYMMETRIZE_RULES = ("none", "max", "mean")
DIAGONAL_RULES = ("refuse", "drop")
SYMMETRY_RTOL = 1e-10


class PrecomputedGraph(GraphBuilder):
    """``graph=precomputed``: the adjacency ``W`` read from ``graph.path`` (``scipy.sparse.save_npz``), used as
    it is: ``S = D^-1/2 W D^-1/2`` with ``D = diag(W 1)``. Checked: sparse, n x n with n the data's points,
    finite, ``W >= 0``, ``W = W^T`` (or symmetrised by ``graph.symmetrize``: max ``max(W, W^T)``, mean
    ``(W + W^T) / 2``), zero diagonal (or dropped by ``graph.diagonal=drop``). The features are not read.

    ============  ===============================  ========================================================
    parameter     allowed                          meaning
    ============  ===============================  ========================================================
    path          a path to an .npz file           the adjacency (scipy.sparse.save_npz); mandatory
    symmetrize    none, max, mean                  none (default): refuse an asymmetric matrix; max or mean
                                                   of W and W^T
    diagonal      refuse, drop                     refuse (default) or drop a nonzero diagonal (self-loops)
    ============  ===============================  ========================================================
    """

    name = "precomputed"
    accepts_sparse = True
    pairwise = True
    _parameter_constraints = {
        "path": [String("a path to a scipy sparse .npz file (scipy.sparse.save_npz)")],
        "symmetrize": [Options(SYMMETRIZE_RULES)],
        "diagonal": [Options(DIAGONAL_RULES)],
    }

    def __init__(self, path: str | None = None, symmetrize: str = "none", diagonal: str = "refuse"):
        self.path = path
        self.symmetrize = symmetrize
        self.diagonal = diagonal

    def _validate_params(self, prefix: str | None = None) -> None:
        """The table's checks; without a path (the estimators: the matrix comes in memory, ``build(X,
        adjacency=W)``, and is checked there) the path is not checked here."""
        params = self.get_params()
        if params["path"] is None:
            params.pop("path")
        self.check_config(params, prefix)

    # -- reading and checking ------------------------------------------------------------------------------
    def _refuse(self, why: str, prefix: str | None = None) -> UserError:
        if prefix == _IN_MEMORY:
            return UserError(f"X is not allowed as a precomputed graph (graph='precomputed'): {why}")
        if prefix is not None and prefix.startswith(_ARGUMENT):
            return UserError(f"{prefix[len(_ARGUMENT):]}: {why}")
        prefix = self.config_prefix if prefix is None else prefix
        return UserError(f"{prefix}path={fmt_value(self.path)} is not allowed: {why}")

    def _read(self, prefix: str | None) -> sp.spmatrix:
        """The sparse matrix in the file, or a one-line refusal (missing, unreadable, dense, not sparse)."""
        if self.path is None:
            raise self._refuse("it must be a path to a scipy sparse .npz file (scipy.sparse.save_npz)", prefix)
        path = Path(os.path.expanduser(str(self.path)))
        if not path.exists():
            raise self._refuse("no such file", prefix)
        if path.is_dir():
            raise self._refuse("it is a directory, not a file", prefix)
        try:
            with open(path, "rb") as fh:
                magic = fh.read(6)
        except OSError as exc:
            raise self._refuse(f"cannot read it ({exc.strerror or exc})", prefix) from None
        if magic == b"\x93NUMPY":
            raise self._refuse("it is a dense array (.npy); save the graph as a sparse matrix with "
                               "scipy.sparse.save_npz(path, scipy.sparse.csr_matrix(W))", prefix)
        if not magic.startswith(b"PK"):
            raise self._refuse("it is not an .npz file; save the graph with scipy.sparse.save_npz", prefix)
        try:
            with np.load(path, allow_pickle=False) as z:
                files = list(z.files)
            if "format" not in files:
                raise self._refuse(f"it holds the arrays {', '.join(files) or '(none)'}, not a sparse matrix; save "
                                   "the graph with scipy.sparse.save_npz(path, scipy.sparse.csr_matrix(W))", prefix)
            M = sp.load_npz(path)
        except UserError:
            raise
        except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as exc:
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise self._refuse(f"cannot read it as a scipy sparse .npz ({why})", prefix) from None
        return M

    def load(self, n: int | None = None, prefix: str | None = None) -> tuple[sp.csr_matrix, dict[str, Any]]:
        """The checked adjacency (CSR, float64, symmetric, zero diagonal) and what was done to it; ``n`` the
        number of points it must match (None: not checked)."""
        return self.check_matrix(self._read(prefix), n, prefix)

    def check_matrix(self, M: Any, n: int | None = None, prefix: str | None = None
                     ) -> tuple[sp.csr_matrix, dict[str, Any]]:
        """The checks of :meth:`load` on a matrix (sparse, or a dense array given in memory); the result is a
        new matrix (``M`` is left as it was, its diagonal too)."""
        if not sp.issparse(M):
            M = np.asarray(M)
            if M.ndim != 2:
                raise self._refuse(f"it has {M.ndim} dimensions; it must be a square (n x n) matrix", prefix)
        if M.dtype.kind not in "biuf":
            raise self._refuse(f"its entries have dtype {M.dtype}; weights must be real numbers", prefix)
        if M.ndim != 2 or M.shape[0] != M.shape[1]:
            raise self._refuse(f"the matrix is {' x '.join(map(str, M.shape))}; it must be square (n x n)", prefix)
        if n is not None and M.shape[0] != n:
            raise self._refuse(f"the matrix is {M.shape[0]} x {M.shape[1]} but the data has {n} points", prefix)
        W = sp.csr_matrix(M, dtype=np.float64, copy=True)  # the caller's matrix is never modified
        W.sum_duplicates()
        bad = ~np.isfinite(W.data)
        if bad.any():
            raise self._refuse(f"{int(bad.sum())} entries are NaN or infinite; weights must be finite", prefix)
        if (W.data < 0).any():
            neg = W.data < 0
            raise self._refuse(f"{int(neg.sum())} entries are negative (smallest {W.data[neg].min():.6g}); "
                               "weights must be >= 0", prefix)
        info: dict[str, Any] = {}
        diag = W.diagonal()
        if np.any(diag != 0):
            count = int(np.count_nonzero(diag))
            if self.diagonal != "drop":
                raise self._refuse(f"{count} diagonal entries are nonzero (self-loops); set graph.diagonal=drop "
                                   "to drop them", prefix)
            W.setdiag(0.0)
            info["diagonal_dropped"] = count
        W.eliminate_zeros()
        W.sort_indices()
        asym = abs(W - W.T).max() if W.nnz else 0.0
        if W.nnz and asym > SYMMETRY_RTOL * W.data.max():
            if self.symmetrize == "none":
                raise self._refuse(f"the matrix is not symmetric (largest |W - W^T| = {asym:.6g}); set "
                                   "graph.symmetrize=max or graph.symmetrize=mean to symmetrise it", prefix)
            W = W.maximum(W.T) if self.symmetrize == "max" else (W + W.T) / 2.0
            info["symmetrized"] = self.symmetrize
        elif asym > 0:  # round-off
            W = (W + W.T) / 2.0
        W = sp.csr_matrix(W)
        W.eliminate_zeros()
        W.sort_indices()
        if W.nnz == 0:
            raise self._refuse("it has no edge (every weight is 0): no label could reach another point", prefix)
        return W, info

    def check_argument(self, M: Any, n: int | None, argument: str) -> sp.csr_matrix:
        """The checks of :meth:`check_matrix` on a matrix given to a Python function
        (:func:`lgcexp.issues.find.find_label_issues`' ``graph=``), each refusal naming that ``argument``;
        returns the checked copy."""
        return self.check_matrix(M, n, _ARGUMENT + argument)[0]

    def check_data(self, n: int, n_classes: int, prefix: str | None = None) -> None:
        """Read and check the file against the data's size (cheap); the result is kept for build. Without a
        path the matrix comes at build (``adjacency=``) and is checked there."""
        if self.path is None:
            return
        path = Path(os.path.expanduser(str(self.path)))
        W, info = self.load(n, prefix)
        self._loaded = (self._stamp(path), n, W, info)

    @staticmethod
    def _stamp(path: Path) -> tuple:
        st = path.stat()
        return (str(path.resolve()), st.st_mtime_ns, st.st_size)

    def extension(self, X: Any, graph: Graph, **build_options: Any) -> Any:
        """New points come as their affinities to the training points and vote with them
        (:class:`lgcexp.graph.extension.AffinityVote`)."""
        from .extension import AffinityVote

        return AffinityVote()

    def _build(self, X, *, cache: Cache | None, data_fingerprint: str | None,
               adjacency: Any = None) -> tuple[Graph, bool]:
        # The features are not used: X may be None; only its row count is compared when it is given.
        # ``adjacency``: the matrix itself, in memory (the estimators' graph="precomputed", where X is it)
        n = None if X is None else int(X.shape[0])
        if adjacency is not None:
            W, info = self.check_matrix(adjacency, n, _IN_MEMORY)
            key = stable_hash({"precomputed": _content_hash(W), "v": 1})
            return Graph(W=W, sigma=float("nan"), key=key, info=info), False
        path = Path(os.path.expanduser(str(self.path)))
        loaded = getattr(self, "_loaded", None)
        if loaded is not None and path.exists() and loaded[0] == self._stamp(path) and n in (None, loaded[1]):
            W, info = loaded[2], loaded[3]
        else:
            W, info = self.load(n)
        digest = _content_hash(W)
        key = stable_hash({"precomputed": digest, "v": 1})
        info = {"file": str(path.resolve()), "content_sha256": digest[:16], **info}
        log.info("read graph %s: %d points, %d edges", path, W.shape[0], W.nnz // 2)
        return Graph(W=W, sigma=float("nan"), key=key, info=info), False


#: the ``prefix`` that makes a refusal name the in-memory matrix X
_IN_MEMORY = "\0in-memory"
#: the start of a ``prefix`` that makes a refusal name a Python argument (the rest of the prefix)
_ARGUMENT = "\0argument:"


def _content_hash(W: sp.csr_matrix) -> str:
    """sha256 of a checked CSR graph's shape and arrays (the graph's cache key)."""
    h = hashlib.sha256()
    for a in (np.array(W.shape, dtype=np.int64), W.indptr.astype(np.int64), W.indices.astype(np.int64), W.data):
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()
