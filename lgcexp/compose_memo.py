"""A sweep's compositions, memoised per process by their config-group choices.

Hydra composes every job of a sweep from scratch, in the worker that runs it: it builds the defaults list
(reading and parsing every YAML file on it), merges the files, then applies the job's value overrides
(``seed=3``, ``noise.rate=0.15``) and fills in ``hydra.*``. The jobs of a sweep differ mostly in such values,
so their defaults lists and merged configs repeat; on ``lgcexp experiment=table_mnist`` a composition took
0.14 s, about half of each job's own set-up, and the sweeper's check composes some 50 more before any job
starts.

:class:`MemoConfigLoader` wraps the sweep's config loader (``LgcexpSweeper.setup``; it travels to the joblib
or submitit workers with the job). While it composes, Hydra's ``create_defaults_list`` and
``ConfigLoaderImpl._compose_config_from_defaults_list`` are memoised in the process, keyed by

- the primary config's name, ``prepend_hydra`` and ``skip_missing``;
- the config sources (search path), as (kind, provider, path);
- every override that is not a value override, as typed (``algo=autoL``, ``+features=x``, ``~graph``), in
  order. An override is a value override exactly when Hydra's ``Overrides`` says so: its key is no config group,
  or its value is a dict.

A job whose key was seen gets the cached defaults list with its own value overrides, and a deep copy of the
cached merged config; Hydra then goes on as without the memo (struct mode, the job's value overrides, the
``hydra.*`` bookkeeping), so the composed config is the same object for object
(``tests/test_compose_memo.py`` compares full configs, ``hydra`` node included, with and without it).

Scope: only compositions through a :class:`MemoConfigLoader`, in the thread that called it. Each sweep has its
own token, and a process keeps the memo of one token only, so a worker reused by a later sweep (loky reuses
its workers within a process) reads the config files again; within one sweep the files are read once per
process, and an edit of a config file while a sweep runs is seen by no later job of that process (without the
memo, jobs would see it and the sweep would mix two versions of the config). ``LGCEXP_MEMO=0`` turns the memo
off, with lgcexp's other per-process memos.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import threading
import uuid
from collections import OrderedDict
from typing import Any

#: most distinct group choices kept per process (the least recently used goes)
MAX_ENTRIES = 64

_local = threading.local()          # .memo: the active _Memo of this thread, or absent
_LOCK = threading.Lock()
_MEMO: dict[str, Any] = {}          # "token" -> the token of the one memo kept, "memo" -> that _Memo
_ORIGINAL: dict[str, Any] = {}      # Hydra's own functions, once patched


class _Entry:
    """One group choice: the first job's defaults list (hydra._internal.defaults_list.DefaultsList) and the
    merged config before any job's overrides (kept unmodified)."""

    __slots__ = ("defaults_list", "config")

    def __init__(self, defaults_list: Any) -> None:
        self.defaults_list = defaults_list
        self.config = None


class _Memo:
    """The entries of one sweep, least recently used first. ``lock`` serialises their use: OmegaConf's deep
    copy briefly unlinks the copied config's children from their parent, so two threads must not copy (or
    fill) one entry at once."""

    def __init__(self) -> None:
        self.entries: OrderedDict[tuple, _Entry] = OrderedDict()
        self.by_defaults: dict[int, _Entry] = {}    # id of an entry's defaults list -> the entry
        self.lock = threading.RLock()

    def get(self, key: tuple) -> _Entry | None:
        entry = self.entries.get(key)
        if entry is not None:
            self.entries.move_to_end(key)
        return entry

    def add(self, key: tuple, entry: _Entry) -> None:
        if key in self.entries:
            self.by_defaults.pop(id(self.entries[key].defaults_list.defaults), None)
        self.entries[key] = entry
        self.entries.move_to_end(key)
        self.by_defaults[id(entry.defaults_list.defaults)] = entry
        while len(self.entries) > MAX_ENTRIES:
            _, old = self.entries.popitem(last=False)
            self.by_defaults.pop(id(old.defaults_list.defaults), None)


def _key(repo: Any, config_name: Any, overrides_list: list, prepend_hydra: bool,
         skip_missing: bool) -> tuple[tuple, list]:
    """The memo key of a defaults list, and the value overrides (in order) that Hydra's ``Overrides`` would
    collect as ``config_overrides``."""
    choices, values = [], []
    for o in overrides_list:
        if o.is_sweep_override():
            choices.append(o.input_line)
        elif isinstance(o.value(), dict) or not repo.group_exists(o.key_or_group):
            values.append(o)
        else:
            choices.append(o.input_line)
    sources = tuple((type(s).__name__, s.provider, s.path) for s in repo.get_sources())
    return (config_name, bool(prepend_hydra), bool(skip_missing), sources, tuple(choices)), values


def _create_defaults_list(repo, config_name, overrides_list, prepend_hydra, skip_missing):
    create = _ORIGINAL["create_defaults_list"]
    memo = getattr(_local, "memo", None)
    if memo is None:
        return create(repo=repo, config_name=config_name, overrides_list=overrides_list,
                      prepend_hydra=prepend_hydra, skip_missing=skip_missing)
    key, values = _key(repo, config_name, overrides_list, prepend_hydra, skip_missing)
    with memo.lock:
        entry = memo.get(key)
        if entry is None:
            result = create(repo=repo, config_name=config_name, overrides_list=overrides_list,
                            prepend_hydra=prepend_hydra, skip_missing=skip_missing)
            memo.add(key, _Entry(result))
            return result
    cached = entry.defaults_list
    overrides = copy.copy(cached.overrides)     # the group choices (known_choices) are the same
    overrides.config_overrides = values
    return dataclasses.replace(cached, config_overrides=values, overrides=overrides)


def _compose_config_from_defaults_list(self, defaults, repo):
    compose = _ORIGINAL["compose"]
    memo = getattr(_local, "memo", None)
    if memo is None:
        return compose(self, defaults, repo)
    with memo.lock:
        entry = memo.by_defaults.get(id(defaults))
        if entry is None or entry.defaults_list.defaults is not defaults:
            return compose(self, defaults, repo)
        if entry.config is None:
            entry.config = compose(self, defaults, repo)
        return copy.deepcopy(entry.config)


def _install() -> None:
    """Route Hydra's two functions through the memo (a pass-through where no memo is active)."""
    from hydra._internal import config_loader_impl

    with _LOCK:
        if _ORIGINAL:
            return
        _ORIGINAL["create_defaults_list"] = config_loader_impl.create_defaults_list
        _ORIGINAL["compose"] = config_loader_impl.ConfigLoaderImpl._compose_config_from_defaults_list
        config_loader_impl.create_defaults_list = _create_defaults_list
        config_loader_impl.ConfigLoaderImpl._compose_config_from_defaults_list = _compose_config_from_defaults_list


@contextlib.contextmanager
def active(token: str):
    """The memo of ``token`` for the compositions of this thread within the block."""
    from . import memo as lgcexp_memo

    if not lgcexp_memo.enabled() or getattr(_local, "memo", None) is not None:
        yield                       # switched off, or nested: the outer block's memo serves
        return
    _install()
    with _LOCK:
        if _MEMO.get("token") != token:
            _MEMO["token"], _MEMO["memo"] = token, _Memo()
        memo = _MEMO["memo"]
    _local.memo = memo
    try:
        yield
    finally:
        _local.memo = None


class MemoConfigLoader:
    """A Hydra config loader whose compositions use the memo (module docstring); everything else is the
    wrapped loader's. Picklable: the memo stays in each process, only the token travels."""

    def __init__(self, inner: Any, token: str | None = None) -> None:
        self.inner = inner
        self.token = token or uuid.uuid4().hex

    def load_configuration(self, *args, **kwargs):
        with active(self.token):
            return self.inner.load_configuration(*args, **kwargs)

    def load_sweep_config(self, master_config, sweep_overrides):
        with active(self.token):
            return self.inner.load_sweep_config(master_config, sweep_overrides)

    def __getattr__(self, name: str):
        if name in ("inner", "token") or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.inner, name)


def memo_context(hydra_context: Any) -> Any:
    """``hydra_context`` with its config loader wrapped in a :class:`MemoConfigLoader` (once)."""
    if hydra_context is None or isinstance(hydra_context.config_loader, MemoConfigLoader):
        return hydra_context
    return dataclasses.replace(hydra_context, config_loader=MemoConfigLoader(hydra_context.config_loader))


__all__ = ["MemoConfigLoader", "active", "memo_context", "MAX_ENTRIES"]
