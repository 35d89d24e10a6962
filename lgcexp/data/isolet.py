"""ISOLET: read `isolet.npz` (format of the shared data README), or build it from UCI's isolet.zip.

`isolet.npz` holds `X` float32 (7797, 617) in [-1, 1], `y` uint8 0..25 (A..Z) and `part`
uint8 1..5 (5 = isolet5, the UCI test set). The Dataset has X float32 and y int64.

A file built here by `build` keeps UCI's row order. The shared copy sorts rows by class
within parts 1-4, so the two differ in row order (same rows, same part 5 order); only exact
reproduction of random splits depends on that. `part` of a built file: the rows of
`isolet1+2+3+4.data` are split into consecutive 1560-row blocks as parts 1, 2, 3, 4
(sizes 1560, 1560, 1560, 1558, as in the shared copy); if the first three blocks do not
each hold 60 rows per letter (so the file is not the four parts in order), all its rows get
part 1. Rows of `isolet5.data` get part 5.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np

from lgcexp import memo
from lgcexp.errors import UserError

from ..cache import atomic_save_npz
from . import lzw
from .dataset import Dataset, make_dataset
from .download import base_urls, fetch, one_line
from .source import DataSource

FILENAME = "isolet.npz"
URL_ENV = "LGCEXP_ISOLET_URL"
BASE_URLS = ("https://archive.ics.uci.edu/static/public/54/",)
ZIP_NAME = "isolet.zip"
PARTS = (("isolet1+2+3+4.data", 6238), ("isolet5.data", 1559))  # member stem, rows
N_FEATURES = 617
N_CLASSES = 26
CLASS_COUNTS = tuple(298 if c == 5 else 299 if c == 12 else 300 for c in range(N_CLASSES))  # F=298, M=299
PART_SIZE = 1560


def load(data_dir: Path, download: bool) -> Dataset:
    """ISOLET from `data_dir/isolet.npz`, downloading and converting it first if missing and allowed."""
    path = data_dir / FILENAME
    if not path.is_file():
        if not download:
            raise UserError(f"{FILENAME} not found: put it at {path} (arrays X float32 ({sum(CLASS_COUNTS)}, "
                            f"{N_FEATURES}), y uint8, part uint8), or enable download to fetch it from "
                            f"{base_urls(URL_ENV, BASE_URLS)[0]}{ZIP_NAME}")
        build(data_dir)

    def make() -> Dataset:
        X, y, _part = read(path)
        return make_dataset("isolet", X, y, source=str(path))

    # a sweep worker reads the file once (lgcexp.memo: read again when the file changes)
    return memo.memoised("dataset", "isolet", path, make)[0]


def read(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """X, y, part from an existing isolet.npz, checked for keys, shape, dtype, range and class counts."""
    try:
        with np.load(path, allow_pickle=False) as z:
            missing = [k for k in ("X", "y", "part") if k not in z.files]
            if missing:
                raise UserError(f"{path}: corrupted or wrong file: expected arrays X, y, part, found {sorted(z.files)}")
            X, y, part = z["X"], z["y"], z["part"]
    except UserError:
        raise
    except Exception as e:  # zip/zlib/format errors of a damaged file
        raise UserError(f"{path}: corrupted, cannot read it ({one_line(e)}); delete it to download it again") from None
    check(X, y, part, str(path))
    return X, y, part


def check(X: np.ndarray, y: np.ndarray, part: np.ndarray, what: str) -> None:
    """Raise UserError unless the arrays have ISOLET's shape, dtype, value range and class counts."""
    n = sum(CLASS_COUNTS)
    if X.shape != (n, N_FEATURES) or X.dtype != np.float32:
        raise UserError(f"{what}: corrupted: expected X float32 {(n, N_FEATURES)}, found {X.dtype} {X.shape}")
    for key, a in (("y", y), ("part", part)):
        if a.shape != (n,) or a.dtype != np.uint8:
            raise UserError(f"{what}: corrupted: expected {key} uint8 ({n},), found {a.dtype} {a.shape}")
    counts = np.bincount(y, minlength=N_CLASSES)
    if tuple(counts.tolist()) != tuple(CLASS_COUNTS):
        raise UserError(f"{what}: corrupted: expected class counts {list(CLASS_COUNTS)}, found {counts.tolist()}")
    if part.min() < 1 or part.max() > 5:
        raise UserError(f"{what}: corrupted: expected part values 1..5, found {part.min()}..{part.max()}")
    if not (np.abs(X) <= 1.0).all():  # also catches NaN
        raise UserError(f"{what}: corrupted: expected all features in [-1, 1]")


def _member(zf: zipfile.ZipFile, stem: str, src: str) -> bytes:
    """Text of `stem` from the zip: `stem.Z` (LZW, decoded) or plain `stem`, in any folder."""
    names = {Path(n).name.lower(): n for n in zf.namelist() if not n.endswith("/")}
    try:
        if stem + ".z" in names:
            return lzw.decompress(zf.read(names[stem + ".z"]))
        if stem in names:
            return zf.read(names[stem])
    except lzw.LZWError as e:
        raise UserError(f"{ZIP_NAME} from {src}: corrupted: {stem}.Z: {e}") from None
    except (zipfile.BadZipFile, OSError, EOFError) as e:  # bad CRC, truncated member
        raise UserError(f"{ZIP_NAME} from {src}: corrupted: {stem}: {one_line(e)}") from None
    raise UserError(f"{ZIP_NAME} from {src}: corrupted or wrong file: no {stem}.Z or {stem} in it, "
                    f"found {sorted(names.values())}")


def parse_data(text: bytes, what: str) -> tuple[np.ndarray, np.ndarray]:
    """UCI `.data` text (617 comma-separated features, then class 1..26 like `1.`) -> X float32, y uint8 0..25."""
    rows = [r for r in text.decode("ascii", errors="replace").splitlines() if r.strip()]
    tokens = ",".join(rows).split(",")
    width = N_FEATURES + 1
    if not rows or len(tokens) != len(rows) * width:
        raise UserError(f"{what}: corrupted: expected {width} comma-separated values per line")
    try:
        a = np.array(tokens, dtype=np.float64).reshape(len(rows), width)
    except ValueError as e:
        raise UserError(f"{what}: corrupted: non-numeric value ({one_line(e)})") from None
    labels = a[:, -1]
    if not (np.isin(labels, np.arange(1, N_CLASSES + 1))).all():
        raise UserError(f"{what}: corrupted: expected class labels 1..{N_CLASSES} in the last column")
    return a[:, :-1].astype(np.float32), (labels - 1).astype(np.uint8)


def _parts_of_train(y: np.ndarray) -> np.ndarray:
    """Part 1..4 by consecutive PART_SIZE-row blocks if blocks 1..3 each hold every letter equally, else all 1."""
    part = np.minimum(np.arange(y.size) // PART_SIZE, 3).astype(np.uint8) + 1
    per_letter = PART_SIZE // N_CLASSES
    ok = y.size > 3 * PART_SIZE and all(
        (np.bincount(y[part == p], minlength=N_CLASSES) == per_letter).all() for p in (1, 2, 3))
    return part if ok else np.ones(y.size, dtype=np.uint8)


def build(data_dir: Path) -> Path:
    """Fetch isolet.zip (or take it from data_dir), decode, verify, convert and write isolet.npz atomically."""
    blob, src = fetch(ZIP_NAME, base_urls(URL_ENV, BASE_URLS), data_dir, FILENAME)
    try:
        zf = zipfile.ZipFile(io.BytesIO(blob))
    except zipfile.BadZipFile as e:
        raise UserError(f"{ZIP_NAME} from {src}: corrupted: not a zip file ({one_line(e)})") from None
    Xs, ys, parts = [], [], []
    with zf:
        for i, (stem, n_rows) in enumerate(PARTS):
            X, y = parse_data(_member(zf, stem, src), f"{ZIP_NAME} from {src}: {stem}")
            if X.shape[0] != n_rows:
                raise UserError(f"{ZIP_NAME} from {src}: corrupted: {stem} has {X.shape[0]} rows, expected {n_rows}")
            Xs.append(X)
            ys.append(y)
            parts.append(_parts_of_train(y) if i == 0 else np.full(y.size, 5, dtype=np.uint8))
    X, y, part = np.concatenate(Xs), np.concatenate(ys), np.concatenate(parts)
    check(X, y, part, f"{ZIP_NAME} from {src}")
    path = data_dir / FILENAME
    atomic_save_npz(path, {"X": X, "y": y, "part": part}, compressed=True)
    return path


class Isolet(DataSource):
    """UCI ISOLET (7797 x 617, 26 classes) from ``data_dir/isolet.npz``, downloaded (and verified) when missing
    and allowed."""

    name = "isolet"
    labels_always_sampled = True

    def _load(self, *, data_dir=None, download=True) -> Dataset:
        from . import resolve_data_dir

        return load(resolve_data_dir(data_dir), bool(download))
