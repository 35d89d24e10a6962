"""Registry of graph SSL algorithms; modules are imported lazily (TensorFlow only where needed)."""
from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from ..errors import UserError
from .base import GraphSSLAlgorithm

#: config name -> "module:Class"
ALGORITHMS: dict[str, str] = {
    "lgc": "lgcexp.algorithms.lgc:LGC",
    "gfhf": "lgcexp.algorithms.gfhf:GFHF",
    "autoL": "lgcexp.algorithms.autol:AutoL",
    "autoD": "lgcexp.algorithms.autod:AutoD",
    "siis": "lgcexp.algorithms.siis:SIIS",
}


def algorithm_class(name: str) -> type[GraphSSLAlgorithm]:
    if name not in ALGORITHMS:
        raise UserError(f"unknown algorithm {name!r}; choose one of: {', '.join(ALGORITHMS)}")
    module, cls = ALGORITHMS[name].split(":")
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name == module:
            raise UserError(f"algorithm {name!r} is not available in this version; available: "
                            f"{', '.join(n for n in ALGORITHMS if _importable(n))}") from exc
        raise
    return getattr(mod, cls)


def _importable(name: str) -> bool:
    module = ALGORITHMS[name].split(":")[0]
    return importlib.util.find_spec(module) is not None


def make_algorithm(name: str, params: dict[str, Any], loss: str | None = None) -> GraphSSLAlgorithm:
    """Build an algorithm from its config; ``loss`` (top-level option) goes to methods that take one."""
    cls = algorithm_class(name)
    params = dict(params or {})
    if cls.losses:
        if loss is not None:
            params["loss"] = loss
        if "loss" in params and params["loss"] not in cls.losses:
            raise UserError(f"loss={params['loss']!r} is not allowed for algo={name}: choose one of {', '.join(cls.losses)}")
    try:
        return cls(**params)
    except TypeError as exc:
        raise UserError(f"bad parameters for algo={name}: {exc}") from exc
