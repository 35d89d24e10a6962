"""Deterministic run directories for sweeps, so an interrupted sweep resumes where it stopped.

A sweep job's directory is ``<dataset>/<method>/noise=<rate>/seed=<seed>_<hash>``, where ``<hash>`` is the
hash of the run's *effective* config (the ``loss`` option counts only for methods that use it). The same
effective config always lands in the same directory, so a finished run is found and skipped, and duplicate
jobs of a sweep such as ``algo=lgc,autoL loss=mse,xent`` (LGC ignores ``loss``) share one directory.
"""
from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

from .cache import stable_hash
from .config import semantic_config

RESOLVER = "lgcexp_run_dir"


def effective_config(container: dict[str, Any]) -> dict[str, Any]:
    """The semantic config with ``loss`` cleared for methods that take none and ``pll_alphas`` left out for
    a method that solves no P_LL by CG with its parameters (SIIS, GFHF, LGC with ``judge=false``), else sorted
    without repeats (a set)."""
    from .algorithms import algorithm_class

    c = semantic_config(container)
    algo = c.get("algo") or {}
    try:
        cls = algorithm_class(algo.get("name"), algo.get("_target_"))
    except Exception:  # an unknown algorithm: keep the config as given (validation reports it)
        return c
    if c.get("loss") is not None and not cls.losses:
        c = {**c, "loss": None}
    if c.get("pll_alphas") is not None:
        try:
            shares = bool(cls(**dict(algo.get("params") or {})).propagation_alphas())
        except Exception:  # bad parameters: as given (validation reports them)
            return c
        if not shares:
            c = {k: v for k, v in c.items() if k != "pll_alphas"}
        else:  # a set: its order and repeats change nothing
            c = {**c, "pll_alphas": sorted({float(a) for a in c["pll_alphas"]})}
    return c


def config_hash(container: dict[str, Any]) -> str:
    return stable_hash(effective_config(container))


def method_label(algo: str, loss: str | None) -> str:
    return f"{algo}-{loss}" if loss else algo


def run_dir_name(container: dict[str, Any]) -> str:
    c = effective_config(container)
    return (f"{c['dataset']['name']}/{method_label(c['algo']['name'], c.get('loss'))}/"
            f"{noise_label(c.get('noise') or {})}/seed={c['seed']}_{stable_hash(c, 8)}")


def noise_label(noise: dict[str, Any]) -> str:
    """``noise=<rate>`` for uniform noise (the paper's), ``noise=<model>-<rate>`` for another model with a
    rate, ``noise=<model>`` for one without (a transition matrix)."""
    name, rate = noise.get("name", "uniform"), noise.get("rate")
    if rate is None:
        return f"noise={name}"
    return f"noise={float(rate):g}" if name == "uniform" else f"noise={name}-{float(rate):g}"


def _resolve_run_dir(*, _root_: DictConfig) -> str:
    job = {k: v for k, v in _root_.items() if k != "hydra"}
    container = OmegaConf.to_container(OmegaConf.create(job), resolve=True)
    return run_dir_name(container)  # type: ignore[arg-type]


def register_resolver() -> None:
    if not OmegaConf.has_resolver(RESOLVER):
        OmegaConf.register_new_resolver(RESOLVER, _resolve_run_dir)
