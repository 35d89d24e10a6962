"""Stage 2c, features: the representation the graph is built on. One module per representation, a registry
(``features=<name>`` in the config).

* ``raw`` (:mod:`.raw`, default): the data's own features, unchanged (today's behaviour: same graph, same
  cache keys, same config hash);
* ``pca`` (:mod:`.pca`): the leading principal components (centred data, SVD);
* ``vae`` (:mod:`.vae`): the posterior means of a variational autoencoder trained on the data itself,
  without labels (Kingma & Welling 2014; the MNIST representation of GraphLearning, Calder et al.);
* ``oof`` (:mod:`.oof`): the out-of-fold logits of a small network trained on the given labels, k folds:
  a labelled point's embedding comes from the fold model that never saw its label.

Learned features are cached by content key (the data, the parameters and, for ``oof``, the labels) like the
graph, whose cache key then holds the features' key. Modules: :mod:`.base` (the :class:`FeatureMap`
protocol), :mod:`.nets` (the TensorFlow pieces the learned maps share).
"""
from __future__ import annotations

from typing import Any, Mapping

from ..registry import Registry
from .base import FeatureMap, FeatureResult

FEATURES = Registry("features", {
    "raw": "lgcexp.features.raw:RawFeatures",
    "pca": "lgcexp.features.pca:PCAFeatures",
    "vae": "lgcexp.features.vae:VAEFeatures",
    "oof": "lgcexp.features.oof:OOFFeatures",
})

#: the default section: a config holding exactly this is the same run as one without a features section
DEFAULT = {"name": "raw"}


def is_default(section: Any) -> bool:
    """True for a ``features`` section that is today's behaviour (absent, or ``{name: raw}``)."""
    return section is None or (isinstance(section, Mapping) and dict(section) == DEFAULT)


def make_features(name: str = "raw", **params: Any) -> FeatureMap:
    """A feature map by name, e.g. ``make_features("pca", n_components=20)``."""
    return FEATURES.get(name)(**params)


__all__ = ["DEFAULT", "FEATURES", "FeatureMap", "FeatureResult", "is_default", "make_features"]
