"""Configuration checks: the one place where a bad config is refused, before any heavy work.

Each check raises :class:`lgcexp.errors.UserError` with one line naming the bad value and what is allowed.
Checks that need the data (``labels.n`` against n, ``graph.k`` against n) run right after loading.
"""
from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

from .errors import UserError
from .graph import check_graph_params
from .labels import check_noise_rate

#: keys that change where files go or what is shown, not the numbers: left out of the config hash
NON_SEMANTIC_KEYS = ("paths", "force", "progress", "plot")
#: every value the top-level ``loss`` option can take (each method accepts a subset)
KNOWN_LOSSES = ("xent", "ce", "mse", "mae")


def to_container(cfg: DictConfig) -> dict[str, Any]:
    """Resolve interpolations; a missing mandatory value becomes a UserError naming the key."""
    try:
        return OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)  # type: ignore[return-value]
    except MissingMandatoryValue as exc:
        key = getattr(exc, "full_key", None) or str(exc)
        raise UserError(f"the option {key} has no value; set it on the command line, e.g. {key}=...") from exc
    except OmegaConfBaseException as exc:
        raise UserError(f"bad configuration: {str(exc).splitlines()[0]}") from exc


def semantic_config(container: dict[str, Any]) -> dict[str, Any]:
    """The part of a resolved config that determines a run's numbers."""
    return {k: v for k, v in container.items() if k not in NON_SEMANTIC_KEYS and k != "hydra"}


def _int(value: Any, name: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise UserError(f"{name}={value!r} is not allowed: it must be an integer >= {minimum}")
    return value


def validate(c: dict[str, Any]) -> None:
    """Checks that need no data."""
    from .algorithms import ALGORITHMS
    from .data import DATASETS

    for section in ("dataset", "algo", "graph", "noise", "labels"):
        if not isinstance(c.get(section), dict):
            raise UserError(f"the config has no '{section}' section")
    name = c["dataset"].get("name")
    if name not in DATASETS:
        raise UserError(f"unknown dataset {name!r}; choose one of: {', '.join(DATASETS)}")
    algo = c["algo"].get("name")
    if algo not in ALGORITHMS:
        raise UserError(f"unknown algorithm {algo!r}; choose one of: {', '.join(ALGORITHMS)}")
    _int(c.get("seed"), "seed")
    loss = c.get("loss")
    if loss is not None and loss not in KNOWN_LOSSES:
        raise UserError(f"loss={loss!r} is not allowed: choose one of {', '.join(KNOWN_LOSSES)}")
    check_noise_rate(c["noise"].get("rate"))
    if c["noise"].get("kind", "uniform") != "uniform":
        raise UserError(f"noise.kind={c['noise'].get('kind')!r} is not allowed: choose one of uniform")
    _int(c["labels"].get("n"), "labels.n", minimum=1)
    g = c["graph"]
    check_graph_params(g.get("k"), g.get("sigma"), g.get("symmetrize", "union"))
