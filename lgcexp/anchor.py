"""Moved to :mod:`lgcexp.graph.anchor` (every graph builder lives under ``lgcexp/graph/``). This name stays
importable because ``conf/graph/anchor.yaml`` names ``lgcexp.anchor.AnchorGraphBuilder``, and that string is
part of every recorded anchor-graph run's config hash."""
from .graph.anchor import (  # noqa: F401
                           WEIGHTS,
                           AnchorCodes,
                           AnchorGraph,
                           AnchorGraphBuilder,
                           LowRankAffinity,
                           _fingerprint,
                           anchor_matrix,
                           anchor_weights,
                           kernel_weights,
                           kmeans_anchors,
                           lae_weights,
                           nearest_anchors,
                           project_simplex,
                           require_sparse_graph,
)
