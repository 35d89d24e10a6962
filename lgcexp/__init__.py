"""lgcexp: graph-based semi-supervised learning under label noise.

Reproduces de Aquino Afonso & Berton, "Optimizing Diffusion Rate and Label Reliability
in a Graph-based Semi-supervised Classifier" (LGC_LVO_AutoL / LGC_LVO_AutoD).
"""

__version__ = "0.1.0"

from .locations import register_resolver as _register_resolver

_register_resolver()  # conf/paths/default.yaml reads the default data/cache directories through it
