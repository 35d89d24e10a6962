"""Stage 3: the affinity graph (docs/fidelity.md#graph; paper Eqs. (7)-(9)). One module per graph builder, a registry
(``graph=<name>`` in the config).

The paper's graph (``graph=knn``): exact k-nearest neighbours with faiss (``IndexFlatL2``, self excluded),
symmetrised as the union graph (element-wise max of the distance matrix and its transpose; ``mutual`` =
min), Gaussian weights ``W_ij = exp(-d_ij^2 / (2 sigma^2))`` with a zero diagonal (``graph.kernel=`` picks
another weight function), and the normalised affinity ``S = D^-1/2 W D^-1/2`` (paper Eq. (9):
``L_N = I - S``). The graph depends only on the data and these settings, never on the seed, so it is cached
on disk.

Modules: :mod:`.base` (the :class:`Graph` record, the :class:`GraphBuilder` protocol), :mod:`.kernels`
(edge weights: gaussian, self_tuning, binary), :mod:`.knn` (``graph=knn``), :mod:`.knn_approx`
(``graph=knn_approx``: faiss HNSW / IVF-Flat, recall measured against the exact search),
:mod:`.precomputed` (``graph=precomputed``: a scipy sparse adjacency from a file), :mod:`.anchor`
(``graph=anchor``: the anchor graph), :mod:`.eigenfunction` (``graph=eigenfunction``: numerical
eigenfunctions), :mod:`.search` (the faiss primitives the kNN modules share), :mod:`.extension` (new points).
A builder module is imported when its name is first used. Built-ins are registered here, by name; a plug-in
by its yaml's ``_target_`` (:mod:`lgcexp.registry`).
"""
from __future__ import annotations

import logging

from ..registry import Registry
from .base import Graph, GraphBuilder, check_graph_arrays, check_no_isolated_points, fingerprint
from .kernels import (
    KERNELS,
    LOCAL_SCALE,
    SIGMA_NEIGHBOR,
    binary_weights,
    gaussian_weights,
    local_scales,
    self_tuning_weights,
    sigma_mean_heuristic,
)
from .knn import (
    SYMMETRIZE,
    KnnGraph,
    build_affinity,
    build_graph,
    exact_search,
    graph_key,
    knn_distance_matrix,
    knn_search,
)
from .search import as_float32, flat_index, import_faiss, knn_query, openblas_coretype

log = logging.getLogger(__name__)

#: config name -> graph builder class
GRAPH_BUILDERS = Registry("graph", {
    "knn": "lgcexp.graph.knn:KnnGraph",
    "knn_approx": "lgcexp.graph.knn_approx:KnnApproxGraph",
    "precomputed": "lgcexp.graph.precomputed:PrecomputedGraph",
    "anchor": "lgcexp.graph.anchor:AnchorGraphBuilder",
    "eigenfunction": "lgcexp.graph.eigenfunction:EigenfunctionBuilder",
})

__all__ = [
    "GRAPH_BUILDERS", "Graph", "GraphBuilder", "KERNELS", "KnnGraph", "LOCAL_SCALE", "SIGMA_NEIGHBOR", "SYMMETRIZE",
    "binary_weights", "build_affinity", "build_graph", "exact_search", "fingerprint", "gaussian_weights",
    "graph_key", "knn_distance_matrix", "knn_search", "local_scales", "self_tuning_weights",
    "sigma_mean_heuristic", "as_float32", "flat_index", "knn_query", "import_faiss", "openblas_coretype",
    "check_graph_arrays", "check_no_isolated_points",
]
