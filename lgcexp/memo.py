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
from typing import Callable, Hashable, TypeVar

from .locations import env_switch

T = TypeVar("T")

MAX_ENTRIES = 2
_STORES: dict[str, OrderedDict] = {}


def enabled() -> bool:
    return env_switch("LGCEXP_MEMO")


def file_signature(path: str | os.PathLike | None) -> tuple | None:
    """(path, inode, size, mtime_ns) of an existing file, else None (nothing is memoised without one)."""
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (str(Path(path).resolve()), st.st_ino, st.st_size, st.st_mtime_ns)


def memoised(kind: str, key: Hashable, path: str | os.PathLike | None, make: Callable[[], T]) -> tuple[T, bool]:
    """``(make(), False)`` the first time, ``(the same object, True)`` while ``path`` is unchanged. ``path`` is
    the file ``make`` reads; when it does not exist yet (``make`` writes it), the next call reads and memoises."""
    sig = file_signature(path) if enabled() else None
    if sig is None:
        return make(), False
    store = _STORES.setdefault(kind, OrderedDict())
    full = (key, sig)
    if full in store:
        store.move_to_end(full)
        return store[full], True
    value = make()
    if file_signature(path) == sig:  # not replaced while it was read
        store[full] = value
        while len(store) > MAX_ENTRIES:
            store.popitem(last=False)
    return value, False


def clear() -> None:
    _STORES.clear()
