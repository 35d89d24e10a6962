"""The faiss primitives every kNN module shares (:mod:`.knn`, :mod:`.selfjoin`, :mod:`.knn_approx`,
:mod:`.extension`): importing faiss with the right OpenBLAS kernels, moving an index to the GPUs, the exact
flat-index search with the query point itself removed, and queries against a built index. Nothing here
imports another graph module."""
from __future__ import annotations

import logging
from typing import Any

import numpy as np

from ..errors import UserError

log = logging.getLogger(__name__)


#: OpenBLAS kernel families by the CPU flags they need (best first); see :func:`openblas_coretype`
_OPENBLAS_CORES = (
    ("SkylakeX", {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}),
    ("Haswell", {"avx2", "fma"}),
)


def openblas_coretype(cpuinfo: str = "/proc/cpuinfo") -> str | None:
    """The OpenBLAS kernel family this CPU can run (``SkylakeX`` with AVX-512, ``Haswell`` with AVX2+FMA),
    from the CPU flags; None when unknown (not Linux, or an older CPU)."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            flags = next((set(line.split(":", 1)[1].split()) for line in f if line.startswith("flags")), set())
    except OSError:
        return None
    return next((name for name, need in _OPENBLAS_CORES if need <= flags), None)


def import_faiss() -> Any:
    """Import faiss. The faiss-cpu wheels bundle their own OpenBLAS (0.3.15 in faiss-cpu 1.15), which does
    not recognise CPUs newer than it and falls back to generic SSE3 kernels (the exact kNN search, a float32
    GEMM, ran 4x slower on the machine we measured). Before faiss is first imported, and unless the user set
    it, ``OPENBLAS_CORETYPE`` is set to the kernel family the CPU flags allow; numpy's own OpenBLAS is loaded
    already and is not affected."""
    import os
    import sys

    if "faiss" not in sys.modules and not os.environ.get("OPENBLAS_CORETYPE"):
        core = openblas_coretype()
        if core:
            os.environ["OPENBLAS_CORETYPE"] = core
            log.debug("OPENBLAS_CORETYPE=%s for faiss's bundled OpenBLAS", core)
    try:
        import faiss
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise UserError(
            "faiss is not installed: install the CPU extra (pip install 'lgcexp[cpu]') or the GPU one ('lgcexp[gpu]')"
        ) from exc
    return faiss


def drop_self(sq: np.ndarray, idx: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """From k+1 results per query (squared distances, indices) of the points ``rows``, remove the query
    itself wherever it appears (duplicates may push it out of column 0); rows that did not return
    themselves drop their last result. Returns (distances, indices), each (m, k)."""
    m, k1 = idx.shape
    is_self = idx == np.asarray(rows)[:, None]
    has_self = is_self.any(axis=1)
    drop = np.where(has_self, is_self.argmax(axis=1), k1 - 1)
    keep = np.ones_like(idx, dtype=bool)
    keep[np.arange(m), drop] = False
    idx = idx[keep].reshape(m, k1 - 1)
    sq = sq[keep].reshape(m, k1 - 1)
    dist = np.sqrt(np.maximum(sq, 0.0)).astype(np.float64)  # sqrt in faiss's float32, as always
    dist[idx < 0] = np.nan  # an approximate search may return fewer than k results
    return dist, idx.astype(np.int64)


def gpu_search() -> bool:
    """Whether faiss searches on GPUs (a GPU build that sees one, and ``device`` not ``cpu``)."""
    from .. import devices

    return devices.faiss_device(import_faiss()) != "cpu"


def on_device(index: Any) -> Any:
    """``index`` moved to the GPUs when faiss searches there (:mod:`lgcexp.devices`), else unchanged."""
    from .. import devices

    return devices.to_faiss_device(import_faiss(), index)[0]


def faiss_exact_search(X: np.ndarray, k: int, queries: np.ndarray | None = None
                       ) -> tuple[np.ndarray, np.ndarray]:
    """faiss's exact kNN (``IndexFlatL2``) of the points ``queries`` (row numbers; default all) among all of
    ``X``, self excluded: (distances, indices), each (m, k)."""
    faiss = import_faiss()
    Xf = np.ascontiguousarray(X, dtype=np.float32)
    rows = np.arange(Xf.shape[0]) if queries is None else np.asarray(queries)
    index = on_device(faiss.IndexFlatL2(Xf.shape[1]))
    index.add(Xf)
    sq, idx = index.search(Xf if queries is None else np.ascontiguousarray(Xf[rows]), k + 1)
    return drop_self(sq, idx, rows)


def as_float32(X: np.ndarray) -> np.ndarray:
    """X as the C-contiguous float32 array faiss reads (no copy when it already is one, e.g. a memory map)."""
    return np.ascontiguousarray(X, dtype=np.float32)


def flat_index(X: np.ndarray) -> Any:
    """An exact faiss ``IndexFlatL2`` holding the rows of X (the index the kNN graph is searched in, and the
    one the scikit-learn estimators query for new points)."""
    faiss = import_faiss()
    Xf = as_float32(X)
    index = on_device(faiss.IndexFlatL2(Xf.shape[1]))
    index.add(Xf)
    return index


def knn_query(index: Any, Xq: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k nearest indexed points of each query row: (distances, indices), each (m, k), nearest first.
    Nothing is excluded (a query that is an indexed point finds itself at distance 0)."""
    sq, idx = index.search(as_float32(Xq), int(k))
    return np.sqrt(np.maximum(sq, 0.0)).astype(np.float64), idx.astype(np.int64)
