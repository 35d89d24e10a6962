"""Name -> class registries, one per configurable stage (data sources, noise models, graph builders,
algorithms). Classes are imported lazily, so a run pays only for the modules it uses (TensorFlow only for
the methods that need it).

A class is known by one of two routes (docs/architecture.md#registries): its config group's yaml names it
with ``_target_: package.module.Class``, or the stage's built-in table lists it. The first is the documented way
to add a noise model, graph builder, data source or algorithm with one module and one yaml, the same in lgcexp's
own ``conf/`` and in a plug-in's folder on Hydra's search path; the built-ins are listed in the tables. The
built-in yamls of anchor, eigenfunction (graph and algorithm) and lssc keep a ``_target_`` as well: it is part
of their recorded runs' config hashes, and it names the same class as the table (tests/test_config.py checks
every yaml's route).
"""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Mapping

from .errors import UserError

#: keys of a config group that are not parameters of its class
RESERVED_KEYS = ("name", "_target_")


def import_target(target: str, key: str) -> type:
    """Import ``package.module.Class`` (or ``package.module:Class``)."""
    module, sep, cls = target.partition(":") if ":" in target else target.rpartition(".")
    if not module or not cls:
        raise UserError(f"{key}={target} is not allowed: it must be a dotted path package.module.Class")
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and module.startswith(exc.name):
            raise UserError(f"{key}={target} is not allowed: module {module} cannot be imported") from exc
        raise
    try:
        return getattr(mod, cls)
    except AttributeError:
        raise UserError(f"{key}={target} is not allowed: {module} has no {cls}") from None


def conf_dir() -> Path | None:
    """The ``conf/`` directory: a source checkout's, else the copy shipped inside the package."""
    here = Path(__file__).resolve().parent
    for cand in (here.parent / "conf", here / "conf"):
        if (cand / "config.yaml").exists():
            return cand
    return None


class Registry:
    """Config name -> class (``"module:Class"`` strings, imported on first use). Besides the built-in
    table, every yaml of the group that names its class with ``_target_`` is registered, so a new stage
    object is one module plus one yaml."""

    def __init__(self, group: str, builtins: Mapping[str, str]):
        self.group = group
        self._builtins = dict(builtins)

    @property
    def _targets(self) -> dict[str, str]:
        found = dict(self._builtins)
        root = conf_dir()
        if root is not None and (root / self.group).is_dir():
            import yaml

            for path in sorted((root / self.group).glob("*.yaml")):
                if path.stem in found:
                    continue
                try:
                    doc = yaml.safe_load(path.read_text()) or {}
                    # a "# @package _global_" yaml (data sets) holds its section under the group's name
                    section = doc.get(self.group) if isinstance(doc.get(self.group), dict) else doc
                    target = section.get("_target_")
                except Exception:  # a yaml that does not parse is Hydra's to report
                    target = None
                if isinstance(target, str):
                    found[path.stem] = target
        return found

    def names(self) -> tuple[str, ...]:
        return tuple(self._targets)

    def __contains__(self, name: object) -> bool:
        return name in self._targets

    def register(self, name: str, target: str) -> None:
        self._builtins[name] = target

    def get(self, name: Any, target: str | None = None) -> type:
        """The class for ``name``; a ``_target_`` from the config wins over the built-in table."""
        if target:
            return import_target(target, f"{self.group}._target_")
        if name not in self._builtins and name in self._targets:
            return import_target(self._targets[name], f"{self.group}.name")
        if name not in self._targets:
            raise UserError(f"{self.group}={name} is not allowed: choose one of {', '.join(self._targets)}")
        return import_target(self._targets[name], f"{self.group}.name")

    def from_config(self, section: Mapping[str, Any]) -> tuple[type, dict[str, Any]]:
        """(class, parameters) of a config group section ``{name, [_target_], **params}``."""
        cls = self.get(section.get("name"), section.get("_target_"))
        params = {k: v for k, v in section.items() if k not in RESERVED_KEYS}
        return cls, params
