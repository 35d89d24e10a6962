"""lgcexp: graph-based semi-supervised learning under label noise.

Reproduces de Aquino Afonso & Berton, "Optimizing Diffusion Rate and Label Reliability
in a Graph-based Semi-supervised Classifier" (LGC_LVO_AutoL / LGC_LVO_AutoD).
"""

__version__ = "0.1.0"
