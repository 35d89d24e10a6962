"""The :class:`Graph` record and the :class:`GraphBuilder` protocol every builder follows."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from ..cache import Cache
from ..params import Configurable


@dataclass
class Graph:
    """A weighted undirected graph with its normalised affinity.

    ``W`` symmetric CSR with zero diagonal; ``degree`` its row sums; ``S = D^-1/2 W D^-1/2``;
    ``key`` a content hash of what the graph depends on (used for caching derived results); ``info``
    builder-specific facts worth recording (the measured recall of an approximate search, the source
    file of a precomputed graph, ...).
    """

    W: sp.csr_matrix
    sigma: float
    key: str
    info: dict[str, Any] = field(default_factory=dict)
    degree: np.ndarray = field(init=False)
    S: sp.csr_matrix = field(init=False)

    def __post_init__(self) -> None:
        self.W = sp.csr_matrix(self.W, dtype=np.float64)
        self.degree = np.asarray(self.W.sum(axis=1)).ravel()
        inv_sqrt = np.ones_like(self.degree)
        pos = self.degree > 0
        inv_sqrt[pos] = 1.0 / np.sqrt(self.degree[pos])  # a zero degree gets factor 1 (notes §3)
        Dm = sp.diags(inv_sqrt)
        self.S = sp.csr_matrix(Dm @ self.W @ Dm)
        self.inv_sqrt_degree = inv_sqrt

    @property
    def n(self) -> int:
        return self.W.shape[0]

    @property
    def n_edges(self) -> int:
        """Number of undirected edges."""
        return int(self.W.nnz // 2)

    def n_components(self) -> int:
        return int(sp.csgraph.connected_components(self.W, directed=False)[0])


def fingerprint(X: np.ndarray) -> str:
    """Content hash of a feature matrix (when the caller gives no data fingerprint)."""
    Xc = np.ascontiguousarray(X)
    return hashlib.sha256(Xc.tobytes()).hexdigest() + f"{Xc.shape}{Xc.dtype}"


class GraphBuilder(Configurable):
    """The graph-builder protocol: ``build(X, cache=, data_fingerprint=) -> (Graph, cache_hit)``.

    After ``build`` the builder's ``info_`` holds the returned graph's ``info``."""

    name: ClassVar[str] = "base"
    config_prefix: ClassVar[str] = "graph."

    def build(self, X: np.ndarray, *, cache: Cache | None = None,
              data_fingerprint: str | None = None) -> tuple[Graph, bool]:
        self._validate_params()
        graph, hit = self._build(X, cache=cache, data_fingerprint=data_fingerprint)
        self.info_ = dict(graph.info)
        return graph, hit

    def _build(self, X, *, cache, data_fingerprint) -> tuple[Graph, bool]:  # pragma: no cover
        raise NotImplementedError
