"""Per-process memo of what a sweep worker would otherwise reload for every job: the data set read from a
file and the graph read from the cache.

A sweep worker (joblib's loky processes, a submitit job running several runs) runs many jobs on the same data
and graph; reading MNIST's npz, hashing its 220 MB and rebuilding ``S`` from the cached graph cost ~0.7 s per
job, more than some methods' fit. Entries are keyed by what determines them *and* by the signature (inode,
size, modification time) of the file they were read from, so a file that is replaced, removed or damaged
afterwards is read again through the usual checks (:mod:`lgcexp.cache`); a memoised object is exactly what a
fresh read of the same file gives. At most :data:`MAX_ENTRIES` of each kind are kept (the oldest goes).
``LGCEXP_MEMO=0`` turns the memo off.
"""
from __future__ import annotations

import os
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Hashable, TypeVar

T = TypeVar("T")

MAX_ENTRIES = 2
_STORES: dict[str, OrderedDict] = {}


def enabled() -> bool:
    return os.environ.get("LGCEXP_MEMO", "1").strip().lower() not in ("0", "false", "no", "off")


def file_signature(path: str | os.PathLike | None) -> tuple | None:
    """(path, inode, size, mtime_ns) of an existing file, else None (nothing is memoised without one)."""
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (str(Path(path).resolve()), st.st_ino, st.st_size, st.st_mtime_ns)


def get(kind: str, key: Hashable) -> Any | None:
    store = _STORES.get(kind)
    if store is None or key not in store:
        return None
    store.move_to_end(key)
    return store[key]


def put(kind: str, key: Hashable, value: T) -> T:
    store = _STORES.setdefault(kind, OrderedDict())
    store[key] = value
    store.move_to_end(key)
    while len(store) > MAX_ENTRIES:
        store.popitem(last=False)
    return value


def memoised(kind: str, key: Hashable, path: str | os.PathLike | None, make: Callable[[], T]) -> tuple[T, bool]:
    """``(make(), False)`` the first time, ``(the same object, True)`` while ``path`` is unchanged."""
    sig = file_signature(path) if enabled() else None
    if sig is None:
        return make(), False
    full = (key, sig)
    hit = get(kind, full)
    if hit is not None:
        return hit, True
    value = make()
    after = file_signature(path)
    if after == sig:  # not replaced while it was read
        put(kind, full, value)
    return value, False


def clear() -> None:
    _STORES.clear()
