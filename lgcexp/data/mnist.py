"""MNIST: read `mnist.npz` (format of the shared data README), or build it from the four idx files.

`mnist.npz` holds `X` uint8 (70000, 784), raw pixels 0..255 (train rows 0..59999, then test),
and `y` uint8 digits 0..9. The Dataset has X as float32 0..255 (not rescaled) and y as int64.
"""

from __future__ import annotations

import gzip
import hashlib
import zlib
from pathlib import Path

import numpy as np

from lgcexp import memo
from lgcexp.errors import UserError

from ..cache import atomic_save_npz
from .dataset import Dataset, make_dataset
from .download import base_urls, fetch, one_line
from .source import DataSource

FILENAME = "mnist.npz"
URL_ENV = "LGCEXP_MNIST_URL"
BASE_URLS = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
)
TRAIN = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz")
TEST = ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")
# md5 of the UNCOMPRESSED idx files (published; see the shared data README).
IDX_MD5 = {
    "train-images-idx3-ubyte.gz": "6bbc9ace898e44ae57da46a324031adb",
    "train-labels-idx1-ubyte.gz": "a25bea736e30d166cdddb491f175f624",
    "t10k-images-idx3-ubyte.gz": "2646ac647ad5339dbf082846283269ea",
    "t10k-labels-idx1-ubyte.gz": "27ae3e4e09519cfbb04c329615203637",
}
# sha256 of np.ascontiguousarray(a).tobytes() of the converted arrays (shared data README).
ARRAY_SHA256 = {
    "X": "5b92582eb909c82a9bfefcd44acbe9233be3eb5b419a44cf211022ad2bf4bf96",
    "y": "671ff9d70b4811116d55c3dd479efa7a981e2e62753ef7a6d5c15fea81e63d27",
}
N_FEATURES = 784
#: each row is a 28 x 28 image
IMAGE_SHAPE = (28, 28)
CLASS_COUNTS = (6903, 7877, 6990, 7141, 6824, 6313, 6876, 7293, 6825, 6958)  # train + test


def load(data_dir: Path, download: bool) -> Dataset:
    """MNIST from `data_dir/mnist.npz`, downloading and converting it first if missing and allowed."""
    path = data_dir / FILENAME
    if not path.is_file():
        if not download:
            raise UserError(f"{FILENAME} not found: put it at {path} (arrays X uint8 ({sum(CLASS_COUNTS)}, "
                            f"{N_FEATURES}), y uint8), or enable download to fetch it from "
                            f"{base_urls(URL_ENV, BASE_URLS)[0]}")
        build(data_dir)

    def make() -> Dataset:
        X, y = read(path)
        return make_dataset("mnist", X.astype(np.float32), y, source=str(path), image_shape=IMAGE_SHAPE)

    # a sweep worker reads the file once (lgcexp.memo: read again when the file changes)
    return memo.memoised("dataset", "mnist", path, make)[0]


def read(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """X, y from an existing mnist.npz, checked for keys, shape, dtype and class counts."""
    try:
        with np.load(path, allow_pickle=False) as z:
            if "X" not in z.files or "y" not in z.files:
                raise UserError(f"{path}: corrupted or wrong file: expected arrays X and y, found {sorted(z.files)}")
            X, y = z["X"], z["y"]
    except UserError:
        raise
    except Exception as e:  # zip/zlib/format errors of a damaged file
        raise UserError(f"{path}: corrupted, cannot read it ({one_line(e)}); delete it to download it again") from None
    check(X, y, str(path))
    return X, y


def check(X: np.ndarray, y: np.ndarray, what: str) -> None:
    """Raise UserError unless X, y have MNIST's shape, dtype and class counts."""
    n = sum(CLASS_COUNTS)
    if X.shape != (n, N_FEATURES) or X.dtype != np.uint8:
        raise UserError(f"{what}: corrupted: expected X uint8 {(n, N_FEATURES)}, found {X.dtype} {X.shape}")
    if y.shape != (n,) or y.dtype != np.uint8:
        raise UserError(f"{what}: corrupted: expected y uint8 ({n},), found {y.dtype} {y.shape}")
    counts = np.bincount(y, minlength=len(CLASS_COUNTS))
    if tuple(counts.tolist()) != tuple(CLASS_COUNTS):
        raise UserError(f"{what}: corrupted: expected class counts {list(CLASS_COUNTS)}, found {counts.tolist()}")


def parse_idx(raw: bytes, fname: str) -> np.ndarray:
    """An idx file (big-endian header: 0, 0, type 0x08 = uint8, ndim; then ndim int32 sizes) as uint8 array."""
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08 or raw[3] not in (1, 3):
        raise UserError(f"{fname}: corrupted: not a uint8 idx file (header {raw[:4].hex() or 'empty'})")
    ndim = raw[3]
    head = 4 + 4 * ndim
    if len(raw) < head:
        raise UserError(f"{fname}: corrupted: truncated header")
    shape = tuple(int(s) for s in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    size = int(np.prod(shape))
    if len(raw) != head + size:
        raise UserError(f"{fname}: corrupted: header says shape {shape} ({head + size} bytes), "
                        f"file has {len(raw)} bytes")
    return np.frombuffer(raw, dtype=np.uint8, offset=head).reshape(shape)


def _fetch_idx(fname: str, data_dir: Path) -> np.ndarray:
    """Download (or take from data_dir) one idx .gz file, gunzip, verify its md5, parse it."""
    blob, src = fetch(fname, base_urls(URL_ENV, BASE_URLS), data_dir, FILENAME)
    try:
        raw = gzip.decompress(blob) if blob[:2] == b"\x1f\x8b" else blob
    except (OSError, EOFError, zlib.error) as e:
        raise UserError(f"{fname} from {src}: corrupted: not a valid gzip file ({one_line(e)})") from None
    md5 = hashlib.md5(raw).hexdigest()
    if md5 != IDX_MD5[fname]:
        raise UserError(f"{fname} from {src}: corrupted: md5 of the uncompressed file is {md5}, "
                        f"expected {IDX_MD5[fname]}")
    return parse_idx(raw, fname)


def build(data_dir: Path) -> Path:
    """Fetch the four idx files, verify, convert (train then test) and write mnist.npz atomically."""
    images, labels = [], []
    for img_name, lab_name in (TRAIN, TEST):
        img, lab = _fetch_idx(img_name, data_dir), _fetch_idx(lab_name, data_dir)
        if img.ndim != 3 or lab.ndim != 1 or img.shape[0] != lab.shape[0]:
            raise UserError(f"{img_name}/{lab_name}: corrupted: {img.shape} images vs {lab.shape} labels")
        images.append(img.reshape(img.shape[0], -1))
        labels.append(lab)
    X, y = np.ascontiguousarray(np.concatenate(images)), np.ascontiguousarray(np.concatenate(labels))
    check(X, y, "converted MNIST")
    for key, a in (("X", X), ("y", y)):
        sha = hashlib.sha256(a.tobytes()).hexdigest()
        if sha != ARRAY_SHA256[key]:
            raise UserError(f"converted MNIST: sha256 of {key} is {sha}, expected {ARRAY_SHA256[key]}")
    path = data_dir / FILENAME
    atomic_save_npz(path, {"X": X, "y": y}, compressed=True)
    return path


class Mnist(DataSource):
    """MNIST (70000 x 784, 10 classes) from ``data_dir/mnist.npz``, downloaded (and verified) when missing
    and allowed."""

    name = "mnist"
    labels_always_sampled = True

    def _load(self, *, data_dir=None, download=True) -> Dataset:
        from . import resolve_data_dir

        return load(resolve_data_dir(data_dir), bool(download))
