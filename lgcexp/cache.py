"""Content-keyed on-disk cache for seed-independent results (graphs, eigenpairs).

Entries are ``<cache_dir>/<kind>-<key>.npz``. Writes go to a temporary file in the same directory and are
renamed into place (atomic on POSIX); a per-entry file lock makes parallel workers (the joblib launcher)
wait for the first one instead of computing the same entry twice.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator

import numpy as np
from filelock import FileLock


def _canonical(obj: Any) -> Any:
    """Numbers in one form before hashing: a float that holds an integer hashes as that integer, so
    ``noise.rate=0`` and ``noise.rate=0.0`` (or ``graph.sigma=100`` and ``100.0``) give the same hash.
    Booleans stay booleans; NaN and infinities stay floats."""
    if isinstance(obj, dict):
        return {k: _canonical(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_canonical(v) for v in obj]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (float, np.floating)):
        f = float(obj)
        return int(f) if math.isfinite(f) and f.is_integer() else f
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


def stable_hash(obj: Any, length: int = 16) -> str:
    """sha256 of the canonical JSON form of ``obj`` (sorted keys, integral floats as integers), truncated to
    ``length`` hex digits."""
    blob = json.dumps(_canonical(obj), sort_keys=True, default=str, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:length]


@contextmanager
def atomic_open(path: str | os.PathLike) -> Iterator[BinaryIO]:
    """A binary file handle whose content appears at ``path`` only if the block completes: it writes to a
    temporary file in the same directory, fsyncs and renames it into place; on any error the temporary file
    is removed and ``path`` is untouched."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_bytes(path: Path, data: bytes) -> None:
    with atomic_open(path) as fh:
        fh.write(data)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_save_npz(path: Path, arrays: dict[str, np.ndarray], compressed: bool = False) -> None:
    """``np.savez`` (or ``savez_compressed``) through a temporary file and a rename."""
    with atomic_open(path) as fh:
        (np.savez_compressed if compressed else np.savez)(fh, **arrays)


class Cache:
    """A directory of npz entries keyed by content hashes. ``cache_dir=None`` disables caching."""

    def __init__(self, cache_dir: str | os.PathLike | None):
        self.root = Path(os.path.expanduser(str(cache_dir))) if cache_dir else None

    def path(self, kind: str, key: str) -> Path | None:
        return None if self.root is None else self.root / f"{kind}-{key}.npz"

    @contextmanager
    def locked(self, path: Path) -> Iterator[None]:
        """Hold the entry's file lock (parallel workers wait for each other)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(path) + ".lock"):
            yield

    def get_or_compute(
        self, kind: str, key: str, compute: Callable[[], dict[str, np.ndarray]]
    ) -> tuple[dict[str, np.ndarray], bool]:
        """Return (arrays, hit). On a miss, ``compute()`` runs once under the entry's lock and is stored."""
        path = self.path(kind, key)
        if path is None:
            return compute(), False
        if path.exists():
            return self.read(path), True
        with self.locked(path):
            if path.exists():  # another worker finished it while we waited
                return self.read(path), True
            arrays = compute()
            atomic_save_npz(path, arrays)
            return arrays, False

    def load(self, kind: str, key: str) -> dict[str, np.ndarray] | None:
        path = self.path(kind, key)
        if path is None or not path.exists():
            return None
        return self.read(path)

    @staticmethod
    def read(path: Path) -> dict[str, np.ndarray]:
        """All arrays of one cache file."""
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
