"""Content-keyed on-disk cache for seed-independent results (graphs, eigenpairs).

Entries are ``<cache_dir>/<kind>-<key>.npz``. Writes go to a temporary file in the same directory and are
renamed into place (atomic on POSIX); a per-entry file lock makes parallel workers (the joblib launcher)
wait for the first one instead of computing the same entry twice.

Every entry carries, inside the npz, the kind/key it was written for and a sha256 checksum of its arrays
(names, dtypes, shapes, bytes). On load the checksum is verified and the caller may check the shapes
against what it expects (``validate=``); a bad entry (unreadable, truncated, checksum mismatch, written for
another key, wrong shape, or from a version without a checksum) is reported with one WARNING line, removed
and recomputed. A cache directory that cannot be written (a file, a path under a file, read-only) is
reported once and the run goes on without storing anything.
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator

import numpy as np

log = logging.getLogger(__name__)


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


def current_umask() -> int:
    """The process umask, read without changing it where the OS allows (Linux), else set and restored."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextmanager
def atomic_open(path: str | os.PathLike) -> Iterator[BinaryIO]:
    """A binary file handle whose content appears at ``path`` only if the block completes: it writes to a
    temporary file in the same directory, fsyncs and renames it into place; on any error the temporary file
    is removed and ``path`` is untouched. The file gets the mode a plain ``open()`` would give it
    (0666 minus the umask), not mkstemp's 0600, so a cache or results directory can be shared by a group."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~current_umask())
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


def remove_stale_temp_files(directory: Path, name: str | None = None) -> int:
    """Remove temporary files that :func:`atomic_open` left in ``directory`` (for target ``name``, or all)
    when its writer was killed. Call only while holding the lock every writer of those files holds."""
    removed = 0
    try:
        for f in Path(directory).glob(f".{name or '*'}.*.tmp"):
            try:
                f.unlink()
                removed += 1
            except FileNotFoundError:
                pass
    except OSError:
        pass
    return removed


#: names of the bookkeeping arrays stored with every entry
META_KEY = "__lgcexp_entry__"
CHECKSUM_KEY = "__lgcexp_sha256__"
ENTRY_FORMAT = 1

#: a shape check: returns None (or True) when the arrays are fine, a reason string (or raises) when not
Validator = Callable[[dict[str, np.ndarray]], Any]


class BadCacheEntry(Exception):
    """A cache entry that cannot be used; ``str(exc)`` is the reason."""


def content_checksum(arrays: dict[str, np.ndarray], meta: str) -> str:
    """sha256 over ``meta`` and every array's name, dtype, shape and bytes (in name order)."""
    h = hashlib.sha256(meta.encode())
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"\0{name}\0{a.dtype.str}\0{a.shape}\0".encode())
        h.update(a.reshape(-1).view(np.uint8))
    return h.hexdigest()


class Cache:
    """A directory of npz entries keyed by content hashes. ``cache_dir=None`` disables caching."""

    _warned_unwritable: set[str] = set()  # roots already reported in this process

    def __init__(self, cache_dir: str | os.PathLike | None):
        self.root = Path(os.path.expanduser(str(cache_dir))) if cache_dir else None
        self.writable = self.root is not None

    def path(self, kind: str, key: str) -> Path | None:
        return None if self.root is None else self.root / f"{kind}-{key}.npz"

    # -- writing ---------------------------------------------------------------------------------------------
    def _unwritable(self, exc: BaseException) -> None:
        """Stop writing to this cache; say so once per directory and process."""
        self.writable = False
        root = str(self.root)
        if root not in Cache._warned_unwritable:
            Cache._warned_unwritable.add(root)
            log.warning("cache directory %s cannot be written (%s); running without caching", root, exc)

    @contextmanager
    def locked(self, path: Path) -> Iterator[None]:
        """Hold the entry's file lock (parallel workers wait for each other), and clear the temporary files
        a killed writer of this entry left behind. When the lock cannot be created (the cache directory is
        not writable) the block runs unlocked and the cache stops storing."""
        lock = None
        if self.writable:
            lock_path = str(path) + ".lock"
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                # create the lock file ourselves first: filelock retries forever on some permission errors
                os.close(os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666))
                from filelock import FileLock  # imported where a lock is taken: reading needs none

                lock = FileLock(lock_path)
                lock.acquire()
            except OSError as exc:
                lock = None
                self._unwritable(exc)
        try:
            if lock is not None:
                remove_stale_temp_files(path.parent, path.name)
            yield
        finally:
            if lock is not None:
                lock.release()

    def store(self, kind: str, key: str, arrays: dict[str, np.ndarray]) -> bool:
        """Write an entry (with its kind/key and checksum) atomically; False when the cache is disabled or
        cannot be written (reported once). Call under :meth:`locked`."""
        path = self.path(kind, key)
        if path is None or not self.writable:
            return False
        clash = {META_KEY, CHECKSUM_KEY} & set(arrays)
        if clash:
            raise ValueError(f"cache entry arrays may not be named {sorted(clash)}")
        meta = json.dumps({"kind": kind, "key": key, "format": ENTRY_FORMAT}, sort_keys=True)
        data = {k: np.asarray(v) for k, v in arrays.items()}
        try:
            atomic_save_npz(path, {**data, META_KEY: np.array(meta),
                                   CHECKSUM_KEY: np.array(content_checksum(data, meta))})
        except OSError as exc:
            self._unwritable(exc)
            return False
        return True

    # -- reading ---------------------------------------------------------------------------------------------
    @staticmethod
    def read(path: Path) -> dict[str, np.ndarray]:
        """All arrays of one cache file (bookkeeping arrays included), unverified."""
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}

    def read_verified(self, path: Path, kind: str, key: str,
                      validate: Validator | None = None) -> dict[str, np.ndarray]:
        """The data arrays of an entry, or :class:`BadCacheEntry` saying why they cannot be used."""
        try:
            raw = self.read(path)
        except Exception as exc:  # truncated, garbage, not an npz, an I/O error
            raise BadCacheEntry(f"unreadable: {type(exc).__name__}: {exc}") from None
        meta, checksum = raw.pop(META_KEY, None), raw.pop(CHECKSUM_KEY, None)
        if meta is None or checksum is None:
            raise BadCacheEntry("it has no checksum (written by an older lgcexp, or not by lgcexp)")
        try:
            ok = content_checksum(raw, str(meta)) == str(checksum)
        except Exception as exc:
            raise BadCacheEntry(f"checksum cannot be computed ({exc})") from None
        if not ok:
            raise BadCacheEntry("checksum mismatch: the content is not what was written")
        try:
            info = json.loads(str(meta))
        except ValueError:
            info = {}
        if info.get("kind") != kind or info.get("key") != key:
            raise BadCacheEntry(f"it was written for {info.get('kind')}-{info.get('key')}, not {kind}-{key}")
        if validate is not None:
            try:
                verdict = validate(raw)
            except Exception as exc:
                verdict = f"{exc}" or type(exc).__name__
            if isinstance(verdict, str) and verdict:
                raise BadCacheEntry(verdict)
            if verdict is False:
                raise BadCacheEntry("its arrays do not fit this entry")
        return raw

    def load(self, kind: str, key: str, validate: Validator | None = None) -> dict[str, np.ndarray] | None:
        """The entry's data arrays, or None when it is missing or bad (a bad one is reported and removed)."""
        path = self.path(kind, key)
        if path is None:
            return None
        try:
            st = path.stat()
        except OSError:  # missing (or the cache directory is not a directory)
            return None
        try:
            return self.read_verified(path, kind, key, validate)
        except BadCacheEntry as bad:
            self._discard(path, st, str(bad))
            return None

    def _discard(self, path: Path, st: os.stat_result, reason: str) -> None:
        """Report a bad entry and remove it, unless another process has replaced it since it was read."""
        try:
            now = path.stat()
            same = (now.st_ino, now.st_size, now.st_mtime_ns) == (st.st_ino, st.st_size, st.st_mtime_ns)
        except OSError:
            same = False
        if not same:
            log.info("cache entry %s was replaced while it was read; reading it again", path)
            return
        try:
            path.unlink()
            what = "removed it; recomputing"
        except FileNotFoundError:
            what = "recomputing"
        except OSError as exc:
            what = f"could not remove it ({exc}); recomputing"
        log.warning("bad cache entry %s: %s; %s", path, reason, what)

    def get_or_compute(
        self, kind: str, key: str, compute: Callable[[], dict[str, np.ndarray]], validate: Validator | None = None
    ) -> tuple[dict[str, np.ndarray], bool]:
        """Return (arrays, hit). On a miss (or a bad entry), ``compute()`` runs once under the entry's lock
        and is stored. ``validate(arrays)`` checks a loaded entry's shapes against what ``key`` implies."""
        path = self.path(kind, key)
        if path is None:
            return compute(), False
        arrays = self.load(kind, key, validate)
        if arrays is not None:
            return arrays, True
        with self.locked(path):
            arrays = self.load(kind, key, validate)  # another worker may have finished it while we waited
            if arrays is not None:
                return arrays, True
            arrays = compute()
            self.store(kind, key, arrays)
            return arrays, False
