"""lgcexp: graph-based semi-supervised learning under label noise.

Reproduces de Aquino Afonso & Berton, "Optimizing Diffusion Rate and Label Reliability
in a Graph-based Semi-supervised Classifier" (LGC_LVO_AutoL / LGC_LVO_AutoD).

``lgcexp.find_label_issues(X, labels, ...)``: which given labels look wrong and what they should be
(:mod:`lgcexp.issues`), without Hydra.
"""

from .locations import register_resolver as _register_resolver
from .version import __version__  # noqa: F401

#: the OmegaConf resolver of the registered method names, read by conf/config.yaml's help header
METHODS_RESOLVER = "lgcexp.methods"


def _method_names(kind: str = "") -> str:
    from .algorithms import method_names  # on first use: only ``lgcexp --help`` reads it

    return method_names(kind)


try:
    _register_resolver()  # conf/paths/default.yaml reads the default data/cache directories through it
    from omegaconf import OmegaConf as _OmegaConf

    if not _OmegaConf.has_resolver(METHODS_RESOLVER):
        _OmegaConf.register_new_resolver(METHODS_RESOLVER, _method_names)
except ImportError:  # no OmegaConf (e.g. a bare GPU box running benchmarks/gpu.py): no configs to resolve
    pass


def __getattr__(name: str):
    """``find_label_issues`` is imported on first use (it pulls in pandas and scikit-learn)."""
    if name == "find_label_issues":
        from .issues.find import find_label_issues

        return find_label_issues
    raise AttributeError(f"module 'lgcexp' has no attribute {name!r}")
