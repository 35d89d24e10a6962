"""Declarative parameter constraints and the one validator (in the style of scikit-learn's
``_parameter_constraints``).

Every configurable thing (data source, noise model, graph builder, eigensolver, algorithm) declares its
parameters once, as a table ``{name: [constraint, ...]}``; a value is valid when it satisfies at least one
constraint of its list. :func:`check_params` checks a whole section of a config against such a table and
raises :class:`lgcexp.errors.UserError` with one line that names the key *as the user typed it*::

    algo.params.alpha=1.5 is not allowed: it must be a number in (0, 1)

Constructors (``__init__``) only store their arguments; validation runs once, at ``fit``/``build`` time or
in the pipeline's pre-flight, never in ``__init__``.

The same tables check the scikit-learn estimators' nested parameters (:mod:`lgcexp.sklearn` holds the
stage objects themselves and validates each with its own table at ``fit``).
"""
from __future__ import annotations

import inspect
import math
import numbers
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from .errors import UserError

__all__ = [
    "Interval", "Options", "Boolean", "String", "NoneValue", "Array", "Mapping_", "Constraint",
    "positive", "unit_open", "check_value", "check_params", "describe", "fmt_value", "constructor_defaults",
    "Configurable",
]


def fmt_value(value: Any) -> str:
    """A value as a user types it on the command line (true, null, 0.5, foo, [1,2,0])."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if value and value.strip() == value else repr(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(fmt_value(v) for v in value) + "]"
    return str(value)


class Constraint:
    """One allowed form of a value."""

    def is_satisfied_by(self, value: Any) -> bool:  # pragma: no cover - interface
        raise NotImplementedError

    def __str__(self) -> str:  # pragma: no cover - interface
        raise NotImplementedError

def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_real(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _num(x: float) -> str:
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    return f"{x:g}"


@dataclass(frozen=True)
class Interval(Constraint):
    """A number (``kind`` 'int' or 'real') in an interval; ``closed`` is 'both', 'left', 'right' or 'neither'.
    ``None`` bounds are unbounded. A real interval accepts ints too; NaN and infinities never pass."""

    kind: str
    low: float | None
    high: float | None
    closed: str = "both"

    def is_satisfied_by(self, v: Any) -> bool:
        if self.kind == "int":
            if not _is_int(v):
                return False
        elif not _is_real(v) or not math.isfinite(float(v)):
            return False
        lo_ok = self.low is None or (v >= self.low if self.closed in ("both", "left") else v > self.low)
        hi_ok = self.high is None or (v <= self.high if self.closed in ("both", "right") else v < self.high)
        return bool(lo_ok and hi_ok)

    def __str__(self) -> str:
        what = "an integer" if self.kind == "int" else "a number"
        lo, hi = self.low, self.high
        if lo is None and hi is None:
            return what
        if hi is None:
            return f"{what} {'>=' if self.closed in ('both', 'left') else '>'} {_num(lo)}"
        if lo is None:
            return f"{what} {'<=' if self.closed in ('both', 'right') else '<'} {_num(hi)}"
        left = "[" if self.closed in ("both", "left") else "("
        right = "]" if self.closed in ("both", "right") else ")"
        return f"{what} in {left}{_num(lo)}, {_num(hi)}{right}"

@dataclass(frozen=True)
class Options(Constraint):
    """One of a fixed set of values (strings, usually)."""

    values: tuple

    def __init__(self, values: Iterable[Any]):
        object.__setattr__(self, "values", tuple(values))

    def is_satisfied_by(self, v: Any) -> bool:
        return any(v == o and type(v) is type(o) for o in self.values)

    def __str__(self) -> str:
        if len(self.values) == 1:
            return fmt_value(self.values[0])
        return "one of " + ", ".join(fmt_value(o) for o in self.values)

class Boolean(Constraint):
    def is_satisfied_by(self, v: Any) -> bool:
        return isinstance(v, bool) or type(v).__name__ == "bool_"

    def __str__(self) -> str:
        return "true or false"

class String(Constraint):
    """A non-empty string (a path, a column name, ...)."""

    def __init__(self, what: str = "a non-empty string"):
        self.what = what

    def is_satisfied_by(self, v: Any) -> bool:
        return isinstance(v, str) and v.strip() != ""

    def __str__(self) -> str:
        return self.what

class NoneValue(Constraint):
    def is_satisfied_by(self, v: Any) -> bool:
        return v is None

    def __str__(self) -> str:
        return "null"

class Array(Constraint):
    """A list (or tuple) whose items each satisfy ``item``; ``length`` fixed when given."""

    def __init__(self, item: Constraint, what: str | None = None, min_length: int = 0):
        self.item, self.what, self.min_length = item, what, min_length

    def is_satisfied_by(self, v: Any) -> bool:
        if not isinstance(v, (list, tuple)) or len(v) < self.min_length:
            return False
        return all(self.item.is_satisfied_by(x) for x in v)

    def __str__(self) -> str:
        return self.what or f"a list of {self.item}"

class Mapping_(Constraint):
    """A mapping (free-form sub-config)."""

    def is_satisfied_by(self, v: Any) -> bool:
        return isinstance(v, Mapping)

    def __str__(self) -> str:
        return "a mapping"

#: shorthands used by the tables
def positive(kind: str = "real") -> Interval:
    return Interval(kind, 0, None, "neither") if kind == "real" else Interval("int", 1, None)


def unit_open() -> Interval:
    """A number in (0, 1)."""
    return Interval("real", 0, 1, "neither")


def describe(constraints: Iterable[Constraint]) -> str:
    return " or ".join(str(c) for c in constraints)


def check_value(key: str, value: Any, constraints: Constraint | Iterable[Constraint]) -> Any:
    """Return ``value`` when some constraint allows it, else raise a one-line UserError naming ``key``."""
    cs = [constraints] if isinstance(constraints, Constraint) else list(constraints)
    if any(c.is_satisfied_by(value) for c in cs):
        return value
    if len(cs) == 1 and isinstance(cs[0], Options) and len(cs[0].values) > 1:
        raise UserError(f"{key}={fmt_value(value)} is not allowed: choose {cs[0]}")
    if len(cs) == 1 and isinstance(cs[0], Boolean):
        raise UserError(f"{key}={fmt_value(value)} is not allowed: use true or false")
    raise UserError(f"{key}={fmt_value(value)} is not allowed: it must be {describe(cs)}")


def check_params(params: Mapping[str, Any], table: Mapping[str, Any], prefix: str = "",
                 owner: str = "", ignore: Iterable[str] = ()) -> None:
    """Check every entry of ``params`` against ``table``; unknown keys are refused with the known ones listed.

    ``prefix`` is how the section is spelled on the command line (``algo.params.``); ``owner`` names the
    thing for the unknown-key message (``algo=lgc``)."""
    ignore = set(ignore)
    for k, v in params.items():
        if k in ignore:
            continue
        if k not in table:
            allowed = ", ".join(sorted(table)) or "none"
            where = f" of {owner}" if owner else ""
            raise UserError(f"{prefix}{k} is not a parameter{where}; allowed: {allowed}")
        check_value(f"{prefix}{k}", v, table[k])


def constructor_defaults(cls: type) -> dict[str, Any]:
    """The keyword defaults of ``cls.__init__`` (what a yaml default must equal)."""
    sig = inspect.signature(cls.__init__)
    return {n: p.default for n, p in sig.parameters.items()
            if n != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.default is not p.empty}


class Configurable:
    """Base of every configurable stage object: ``__init__`` only stores; one table declares the parameters.

    Subclasses set ``name`` (the config choice), ``_parameter_constraints`` and optionally override
    :meth:`_check_relations` for checks between parameters (``x_max >= x_min``) and :meth:`check_data` for
    checks that need the data size (still before any heavy work)."""

    name: str = ""
    #: how the parameters are spelled on the command line, e.g. "algo.params." (used in messages)
    config_prefix: str = ""
    _parameter_constraints: dict[str, list] = {}
    #: parameters the config group's yaml leaves out (set them with ``+group.key=value``): added after runs
    #: were recorded, where listing them would change every recorded run's config hash. Their constructor
    #: default is the recorded behaviour.
    unlisted_params: tuple[str, ...] = ()

    def get_params(self, deep: bool = False) -> dict[str, Any]:
        return {k: getattr(self, k) for k in constructor_defaults(type(self))}

    def __repr__(self) -> str:
        """``Class(param=value, ...)`` with the parameters that differ from the constructor's defaults."""
        defaults = constructor_defaults(type(self))
        shown = []
        for k, d in defaults.items():
            v = getattr(self, k, d)
            try:
                same = bool(v == d)
            except Exception:
                same = False
            if not same:
                shown.append(f"{k}={v!r}")
        return f"{type(self).__name__}({', '.join(shown)})"

    def set_params(self, **params: Any) -> "Configurable":
        names = constructor_defaults(type(self))
        for k, v in params.items():
            if k not in names:
                raise ValueError(f"{k} is not a parameter of {type(self).__name__}")
            setattr(self, k, v)
        return self

    @classmethod
    def check_config(cls, params: Mapping[str, Any], prefix: str | None = None) -> None:
        """Validate a (partial) parameter mapping as typed in a config, defaults filled in for the
        relations check."""
        prefix = cls.config_prefix if prefix is None else prefix
        check_params(params, cls._parameter_constraints, prefix, owner=cls._owner())
        full = {**constructor_defaults(cls), **dict(params)}
        cls._check_relations(full, prefix)

    @classmethod
    def _owner(cls) -> str:
        group = cls.config_prefix.split(".")[0] if cls.config_prefix else ""
        return f"{group}={cls.name}" if group else cls.__name__

    def _validate_params(self, prefix: str | None = None) -> None:
        """Validate the stored parameters (called at fit/build time)."""
        self.check_config(self.get_params(), prefix)

    @classmethod
    def _check_relations(cls, params: dict[str, Any], prefix: str) -> None:
        """Checks between parameters; raise UserError naming the key. Default: none."""

    def check_data(self, n: int, n_classes: int, prefix: str | None = None) -> None:
        """Checks that need the data size (n points, c classes), run right after loading. Default: none."""
