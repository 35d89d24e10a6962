"""Name -> class registries, one per configurable stage (data sources, noise models, graph builders,
algorithms). Classes are imported lazily, so a run pays only for the modules it uses (TensorFlow only for
the methods that need it).

A config group's yaml may also name its class directly with ``_target_: package.module.Class``: that is
how a plug-in (a noise model, graph builder, data source or algorithm living outside lgcexp) is added with
one module and one yaml, without touching lgcexp.
"""
from __future__ import annotations

import importlib
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


class Registry:
    """Config name -> class (``"module:Class"`` strings, imported on first use)."""

    def __init__(self, group: str, builtins: Mapping[str, str]):
        self.group = group
        self._targets = dict(builtins)

    def names(self) -> tuple[str, ...]:
        return tuple(self._targets)

    def __contains__(self, name: object) -> bool:
        return name in self._targets

    def register(self, name: str, target: str) -> None:
        self._targets[name] = target

    def get(self, name: Any, target: str | None = None) -> type:
        """The class for ``name``; a ``_target_`` from the config wins over the built-in table."""
        if target:
            return import_target(target, f"{self.group}._target_")
        if name not in self._targets:
            raise UserError(f"{self.group}={name} is not allowed: choose one of {', '.join(self._targets)}")
        return import_target(self._targets[name], f"{self.group}.name")

    def from_config(self, section: Mapping[str, Any]) -> tuple[type, dict[str, Any]]:
        """(class, parameters) of a config group section ``{name, [_target_], **params}``."""
        cls = self.get(section.get("name"), section.get("_target_"))
        params = {k: v for k, v in section.items() if k not in RESERVED_KEYS}
        return cls, params
