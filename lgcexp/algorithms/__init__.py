"""Registry of graph SSL algorithms (``algo=<name>``); modules are imported lazily (TensorFlow only where
needed). A yaml under ``conf/algo/`` with ``_target_: package.module.Class`` adds a method from outside."""
from __future__ import annotations

from typing import Any

from ..errors import UserError
from ..registry import Registry
from .base import GraphSSLAlgorithm

ALGORITHMS = Registry("algo", {
    "lgc": "lgcexp.algorithms.lgc:LGC",
    "gfhf": "lgcexp.algorithms.gfhf:GFHF",
    "autoL": "lgcexp.algorithms.autol:AutoL",
    "autoD": "lgcexp.algorithms.autod:AutoD",
    "siis": "lgcexp.algorithms.siis:SIIS",
    "auto": "lgcexp.algorithms.auto:Auto",
    "gtf": "lgcexp.algorithms.gtf:GTF",
    "lssc": "lgcexp.algorithms.lssc:LSSC",
    "eigenfunction": "lgcexp.algorithms.eigenfunction:Eigenfunction",
    "wnll": "lgcexp.algorithms.wnll:WNLL",
    "properly": "lgcexp.algorithms.properly:ProperlyWeighted",
    "poisson": "lgcexp.algorithms.poisson:Poisson",
    "poissonMBO": "lgcexp.algorithms.poisson_mbo:PoissonMBO",
    "poissonL": "lgcexp.algorithms.poissonl:PoissonL",
    "poissonLMBO": "lgcexp.algorithms.poissonl_mbo:PoissonLMBO",
    "poissonBayes": "lgcexp.algorithms.poisson_bayes:PoissonBayes",
    "meanshift": "lgcexp.algorithms.meanshift:MeanShiftLaplace",
    "cutssl": "lgcexp.algorithms.cutssl:CutSSL",
    "cutsslL": "lgcexp.algorithms.cutssl_l:CutSSLL",
})


def method_names(kind: str = "") -> str:
    """The registered methods, comma-separated, in the registry's order: every one (``kind`` empty), or those
    that judge their labels (``kind="judging"``: a ``label_judgement()`` of their own, so a run writes
    ``label_issues.csv``). ``lgcexp --help``'s header reads it through the resolver ``${lgcexp.methods:...}``
    (registered by :mod:`lgcexp`), so the help names every method without a hand-written list."""
    if kind not in ("", "judging"):
        raise ValueError(f"method_names: kind={kind!r} is not allowed: choose '' or 'judging'")
    names = ALGORITHMS.names()
    if kind == "judging":
        names = tuple(n for n in names if ALGORITHMS.get(n).judges_labels())
    return ", ".join(names)


def algorithm_class(name: str, target: str | None = None) -> type[GraphSSLAlgorithm]:
    return ALGORITHMS.get(name, target)


def algorithm_params(cls: type[GraphSSLAlgorithm], params: dict[str, Any] | None,
                     loss: str | None = None) -> dict[str, Any]:
    """The algorithm's parameters from its config: ``algo.params`` with the top-level ``loss`` option
    mapped onto ``params.loss`` for methods that take one."""
    params = dict(params or {})
    if cls.losses and loss is not None:
        params["loss"] = loss
    return params


def make_algorithm(name: str, params: dict[str, Any] | None = None, loss: str | None = None,
                   target: str | None = None) -> GraphSSLAlgorithm:
    """Build (and validate) an algorithm from its config."""
    cls = algorithm_class(name, target)
    params = algorithm_params(cls, params, loss)
    if cls.losses and loss is not None and loss not in cls.losses:
        raise UserError(f"loss={loss} is not allowed for algo={name}: choose one of {', '.join(cls.losses)}")
    cls.check_config(params)
    return cls(**params)


__all__ = ["ALGORITHMS", "GraphSSLAlgorithm", "algorithm_class", "algorithm_params", "make_algorithm",
           "method_names"]
