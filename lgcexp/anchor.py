"""The anchor-graph builder under its first dotted path. Every graph builder lives under ``lgcexp/graph/``
(:mod:`lgcexp.graph.anchor`); this name stays importable for one reason: ``conf/graph/anchor.yaml`` names
``lgcexp.anchor.AnchorGraphBuilder`` as its ``_target_``, and that string is part of the config hash of every
recorded anchor-graph run (committed results and users' resumable sweeps would otherwise rerun)."""
from .graph.anchor import AnchorGraphBuilder

__all__ = ["AnchorGraphBuilder"]
