"""Stage 2b, label noise: one module per noise model, a registry (``noise=<name>`` in the config)."""
from __future__ import annotations

from typing import Any

from ..registry import Registry
from .base import NoiseModel, count_matrix, noisy_count

NOISE_MODELS = Registry("noise", {
    "none": "lgcexp.noise.none:NoNoise",
    "uniform": "lgcexp.noise.uniform:UniformNoise",
    "pairwise": "lgcexp.noise.pairwise:PairwiseNoise",
    "matrix": "lgcexp.noise.matrix:MatrixNoise",
    "reference": "lgcexp.noise.reference:ReferenceNoise",
    "idn": "lgcexp.noise.idn:IDNNoise",
    "confusion": "lgcexp.noise.confusion:ConfusionNoise",
})


def make_noise(name: str = "uniform", **params: Any) -> NoiseModel:
    """A noise model by name, e.g. ``make_noise("uniform", rate=0.2)``."""
    cls = NOISE_MODELS.get(name)
    return cls(**params)


__all__ = ["NOISE_MODELS", "NoiseModel", "count_matrix", "make_noise", "noisy_count"]
