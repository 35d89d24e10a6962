"""lgcexp: graph-based semi-supervised learning under label noise.

Reproduces de Aquino Afonso & Berton, "Optimizing Diffusion Rate and Label Reliability
in a Graph-based Semi-supervised Classifier" (LGC_LVO_AutoL / LGC_LVO_AutoD).

``lgcexp.find_label_issues(X, labels, ...)``: which given labels look wrong and what they should be
(:mod:`lgcexp.issues`), without Hydra.
"""

__version__ = "0.1.0"

from .locations import register_resolver as _register_resolver

try:
    _register_resolver()  # conf/paths/default.yaml reads the default data/cache directories through it
except ImportError:  # no OmegaConf (e.g. a bare GPU box running benchmarks/gpu.py): no configs to resolve
    pass


def __getattr__(name: str):
    """``find_label_issues`` is imported on first use (it pulls in pandas and scikit-learn)."""
    if name == "find_label_issues":
        from .issues.find import find_label_issues

        return find_label_issues
    raise AttributeError(f"module 'lgcexp' has no attribute {name!r}")
