"""Stage 3: the affinity graph (reference notes §3). One module per graph builder, a registry
(``graph=<name>`` in the config).

Exact k-nearest neighbours with faiss (``IndexFlatL2``, self excluded), symmetrised as the union graph
(element-wise max of the distance matrix and its transpose; ``mutual`` = min), Gaussian weights
``W_ij = exp(-d_ij^2 / (2 sigma^2))`` with a zero diagonal, and the normalised affinity
``S = D^-1/2 W D^-1/2`` (paper Eq. for L_N: ``L_N = I - S``). The graph depends only on the data and these
settings, never on the seed, so it is cached on disk.

Modules: :mod:`.base` (the :class:`Graph` record, the :class:`GraphBuilder` protocol), :mod:`.kernels`
(edge weights), :mod:`.knn` (``graph=knn``).
"""
from __future__ import annotations

from ..registry import Registry
from .base import Graph, GraphBuilder, fingerprint
from .kernels import SIGMA_NEIGHBOR, gaussian_weights, sigma_mean_heuristic
from .knn import SYMMETRIZE, KnnGraph, build_affinity, build_graph, graph_key, knn_distance_matrix, knn_search

_fingerprint = fingerprint  # the old private name

#: config name -> graph builder class
GRAPH_BUILDERS = Registry("graph", {"knn": "lgcexp.graph.knn:KnnGraph"})

__all__ = [
    "GRAPH_BUILDERS", "Graph", "GraphBuilder", "KnnGraph", "SIGMA_NEIGHBOR", "SYMMETRIZE", "build_affinity",
    "build_graph", "fingerprint", "gaussian_weights", "graph_key", "knn_distance_matrix", "knn_search",
    "sigma_mean_heuristic",
]
