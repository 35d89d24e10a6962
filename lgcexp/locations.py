"""Default locations of the data and cache directories, defined once for the CLI and the Python API.

The Python API (``lgcexp.data.load_dataset(..., data_dir=None)``) calls :func:`default_dir` directly;
``conf/paths/default.yaml`` reads the same function through the OmegaConf resolver ``lgcexp.default_dir``
(registered when the package is imported), so both fall back to the same place:

- data:  ``$LGCEXP_DATA_DIR``, else ``~/.cache/lgcexp/data``  (``isolet.npz`` / ``mnist.npz``)
- cache: ``$LGCEXP_CACHE_DIR``, else ``~/.cache/lgcexp/cache`` (graphs and eigenpairs)

An unset or empty variable means "use the default". ``~`` is expanded by the code that opens the directory.
The Python API's :class:`lgcexp.cache.Cache` still takes an explicit directory (``None`` disables caching);
pass ``default_dir("cache")`` to share the CLI's cache.
"""
from __future__ import annotations

import os

DATA_DIR_ENV = "LGCEXP_DATA_DIR"
CACHE_DIR_ENV = "LGCEXP_CACHE_DIR"
DEFAULT_DATA_DIR = "~/.cache/lgcexp/data"
DEFAULT_CACHE_DIR = "~/.cache/lgcexp/cache"

#: kind -> (environment variable, default)
DIRS: dict[str, tuple[str, str]] = {
    "data": (DATA_DIR_ENV, DEFAULT_DATA_DIR),
    "cache": (CACHE_DIR_ENV, DEFAULT_CACHE_DIR),
}

#: the OmegaConf resolver name used in conf/paths/default.yaml: ``${lgcexp.default_dir:data}``
RESOLVER = "lgcexp.default_dir"


def default_dir(kind: str) -> str:
    """The directory for ``kind`` ('data' or 'cache'): its environment variable if set, else the default."""
    try:
        env, default = DIRS[kind]
    except KeyError:
        raise ValueError(f"unknown directory kind {kind!r}; choose one of: {', '.join(DIRS)}") from None
    return os.environ.get(env) or default


def register_resolver() -> None:
    """Make ``${lgcexp.default_dir:<kind>}`` available to OmegaConf/Hydra configs (idempotent)."""
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver(RESOLVER):
        OmegaConf.register_new_resolver(RESOLVER, default_dir)


def env_switch(name: str, default: bool = True) -> bool:
    """An on/off environment switch: ``default`` where unset or empty, off where set to 0, false, no or off
    (any case), on where set to anything else: ``LGCEXP_MEMO`` (lgcexp.memo), ``LGCEXP_AUTOL_NARROW``
    (lgcexp.algorithms.autol), ``LGCEXP_FUSED`` (on by default; lgcexp.solvers.cg.numba_passes),
    ``LGCEXP_SETTLE_HEAP`` (lgcexp.runner.settle_heap)."""
    value = os.environ.get(name, "").strip().lower()
    if not value:
        return bool(default)
    return value not in ("0", "false", "no", "off")
