"""An InfiMNIST-style data set: seeded random deformations of the 70,000 MNIST digits, any size.

Loosli, Canu & Bottou ("Training invariant support vector machines using selective sampling", 2007) made
MNIST bigger by deforming its digits; the deformations here follow Simard, Steinkraus & Platt ("Best
practices for convolutional neural networks applied to visual document analysis", ICDAR 2003):

* an elastic deformation: a displacement field ``(dx, dy)`` drawn uniformly in [-1, 1] per pixel, smoothed
  by a Gaussian of width ``sigma`` (default 4 px) and scaled by ``alpha`` (default 8 px; Simard et al.
  used 34 on 29x29 for training a classifier, a stronger distortion than a benchmark that should stay
  close to MNIST needs);
* a small affine map about the image centre: a rotation uniform in ±``rotate`` degrees (default 10) and a
  translation uniform in ±``shift`` pixels (default 2) on each axis;

the pixel at ``p`` takes the bilinearly interpolated value of the original at ``A(p) + d(p)``
(``scipy.ndimage.map_coordinates``, zero outside the image).

Row ``i`` is digit ``i mod 70000`` of the shared ``mnist.npz`` (train rows first), label included; rows
``0..69999`` are the digits themselves, every later row a deformation. Rows are made in blocks of
``BLOCK`` rows, block ``b`` from ``numpy.random.default_rng([seed, b])``: the first ``n`` rows of a bigger
set are the set of size ``n`` (the scaling benchmark uses prefixes of one file).

Written under the cache directory (``$LGCEXP_CACHE_DIR/infimnist/``; never committed) as
``infimnist-<n>-s<seed>-X.npy`` (float32 0..255, n x 784, for ``np.load(mmap_mode='r')``) and ``-y.npy``
(int64 labels). Made by ``scripts/make_infimnist.py`` (and the scale benchmarks, ``python -m benchmarks scale``)::

    python scripts/make_infimnist.py --n 1000000          # about 3 GB, a few minutes on 2 cores
    lgcexp dataset=npy dataset.path=<X.npy> dataset.clean_labels_path=<y.npy> labels.n=1000 \
        noise.rate=0.2 graph=knn_approx graph.pca=64 graph.index=ivf ...

The files are made under temporary names and renamed when complete; an existing complete file is kept, and
a smaller set is copied from a bigger one with the same seed when there is one. Only the default deformation
settings should share an output directory (the file names carry n and the seed, not the settings).
"""
from __future__ import annotations

import functools
import os
import sys
import time
from pathlib import Path

import numpy as np
from scipy import ndimage

SIDE = 28
N_MNIST = 70000
BLOCK = 10000  # divides N_MNIST


def deform_block(images: np.ndarray, rng: np.random.Generator, *, alpha: float, sigma: float, rotate: float,
                 shift: float, draws: int | None = None) -> np.ndarray:
    """Deformed copies (m, 28, 28) float32 of ``images`` (m, 28, 28): elastic field + rotation + shift.
    ``draws`` (>= m; default m): the random parameters are drawn for that many images and the first m used,
    so a short last block gets the same deformations as the start of a full one."""
    m = images.shape[0]
    draws = m if draws is None else max(m, int(draws))
    # elastic displacement: uniform noise, smoothed over the two image axes only, scaled by alpha
    field = rng.uniform(-1.0, 1.0, size=(2, draws, SIDE, SIDE)).astype(np.float32)[:, :m]
    theta = np.deg2rad(rng.uniform(-rotate, rotate, size=draws)[:m]).astype(np.float32)
    t = rng.uniform(-shift, shift, size=(2, draws))[:, :m].astype(np.float32)
    for c in range(2):
        field[c] = ndimage.gaussian_filter(field[c], sigma=(0, sigma, sigma), mode="constant", truncate=3.0)
    field *= np.float32(alpha)
    centre = (SIDE - 1) / 2.0
    r, c = np.meshgrid(np.arange(SIDE, dtype=np.float32) - centre, np.arange(SIDE, dtype=np.float32) - centre,
                       indexing="ij")
    cos, sin = np.cos(theta)[:, None, None], np.sin(theta)[:, None, None]
    # source coordinates: rotate the output grid about the centre, shift it, displace it
    src_r = cos * r - sin * c + centre + t[0][:, None, None] + field[0]
    src_c = sin * r + cos * c + centre + t[1][:, None, None] + field[1]
    plane = np.broadcast_to(np.arange(m, dtype=np.float32)[:, None, None], src_r.shape)
    coords = np.stack([plane, src_r, src_c])
    out = ndimage.map_coordinates(images.astype(np.float32), coords, order=1, mode="constant", cval=0.0)
    return np.clip(out, 0.0, 255.0, out=out)


def _larger_set(out_dir: Path, n: int, seed: int) -> tuple[Path, Path] | None:
    """The smallest complete set with this seed and more than n rows in ``out_dir`` (made with the default
    deformation settings), or None."""
    found = []
    for f in out_dir.glob(f"infimnist-*-s{seed}-X.npy"):
        try:
            m = int(f.name.split("-")[1])
        except ValueError:
            continue
        y = f.with_name(f.name[:-len("X.npy")] + "y.npy")
        if m > n and y.is_file():
            found.append((m, f, y))
    return (min(found)[1], min(found)[2]) if found else None


def _copy_prefix(larger: tuple[Path, Path], n: int, x_path: Path, y_path: Path) -> tuple[Path, Path]:
    src = np.load(larger[0], mmap_mode="r")
    tmp_x = x_path.with_name(f".{x_path.name}.{os.getpid()}.tmp")
    X = np.lib.format.open_memmap(tmp_x, mode="w+", dtype=np.float32, shape=(n, src.shape[1]))
    for start in range(0, n, 8 * BLOCK):
        X[start:start + 8 * BLOCK] = src[start:min(n, start + 8 * BLOCK)]
    X.flush()
    del X
    os.replace(tmp_x, x_path)
    tmp_y = y_path.with_name(f".{y_path.name}.{os.getpid()}.tmp.npy")
    np.save(tmp_y, np.load(larger[1])[:n])
    os.replace(tmp_y, y_path)
    return x_path, y_path


def _block_rows(base: np.ndarray, b: int, n: int, seed: int, settings: dict) -> np.ndarray:
    """Rows of block ``b`` (at most BLOCK, float32, flattened): digits, or their deformations by the
    block's own generator ``default_rng([seed, b])`` (so any worker makes the same bytes)."""
    start = b * BLOCK
    stop = min(n, start + BLOCK)
    block = base[np.arange(start, stop) % N_MNIST].astype(np.float32)
    if start >= N_MNIST:  # BLOCK divides 70000: a block is all digits or all deformations
        block = deform_block(block, np.random.default_rng([seed, b]), draws=BLOCK, **settings)
    return block.reshape(stop - start, -1)


_WORKER: dict = {}


def _worker_init(mnist_path: str) -> None:
    with np.load(mnist_path) as z:
        _WORKER["base"] = z["X"].reshape(-1, SIDE, SIDE)


def _worker_block(b: int, n: int, seed: int, settings: dict) -> np.ndarray:
    return _block_rows(_WORKER["base"], b, n, seed, settings)


def make(n: int, seed: int, out_dir: Path, mnist_path: Path, *, alpha: float = 8.0, sigma: float = 4.0,
         rotate: float = 10.0, shift: float = 2.0, quiet: bool = False, workers: int = 1) -> tuple[Path, Path]:
    """Write the first ``n`` rows of the set (see the module doc) and return (X path, y path).
    ``workers`` > 1 deforms the blocks in that many processes (fork); the file's bytes do not change."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / f"infimnist-{n}-s{seed}"
    x_path, y_path = Path(f"{stem}-X.npy"), Path(f"{stem}-y.npy")
    if x_path.is_file() and y_path.is_file():
        return x_path, y_path
    larger = _larger_set(out_dir, n, seed)
    if larger is not None:  # the first n rows of a bigger set with this seed are this set: copy them
        return _copy_prefix(larger, n, x_path, y_path)
    with np.load(mnist_path) as z:
        base, labels = z["X"].reshape(-1, SIDE, SIDE), z["y"].astype(np.int64)
    assert base.shape[0] == N_MNIST, base.shape
    tmp_x = x_path.with_name(f".{x_path.name}.{os.getpid()}.tmp")
    X = np.lib.format.open_memmap(tmp_x, mode="w+", dtype=np.float32, shape=(n, SIDE * SIDE))
    t0 = time.perf_counter()
    settings = {"alpha": alpha, "sigma": sigma, "rotate": rotate, "shift": shift}
    n_blocks = -(-n // BLOCK)
    pool = None
    try:
        if workers > 1 and n_blocks > 1:
            import multiprocessing as mp
            from concurrent.futures import ProcessPoolExecutor

            pool = ProcessPoolExecutor(min(workers, n_blocks), mp_context=mp.get_context("fork"),
                                       initializer=_worker_init, initargs=(str(mnist_path),))
            blocks = pool.map(functools.partial(_worker_block, n=n, seed=seed, settings=settings), range(n_blocks))
        else:
            blocks = (_block_rows(base, b, n, seed, settings) for b in range(n_blocks))
        for b, rows in enumerate(blocks):
            start = b * BLOCK
            stop = start + rows.shape[0]
            X[start:stop] = rows
            if not quiet and (b % 10 == 0 or stop == n):
                print(f"  {stop:>9,d} / {n:,d} rows  {time.perf_counter() - t0:6.1f}s", file=sys.stderr, flush=True)
        X.flush()
        del X
        os.replace(tmp_x, x_path)
    except BaseException:
        if tmp_x.exists():
            tmp_x.unlink()
        raise
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    tmp_y = y_path.with_name(f".{y_path.name}.{os.getpid()}.tmp.npy")
    np.save(tmp_y, labels[np.arange(n) % N_MNIST])
    os.replace(tmp_y, y_path)
    return x_path, y_path


def default_out_dir() -> Path:
    """``<cache dir>/infimnist``: the cache directory the package uses ($LGCEXP_CACHE_DIR, lgcexp.locations)."""
    from lgcexp.locations import default_dir

    return Path(default_dir("cache")).expanduser() / "infimnist"


def default_mnist() -> Path:
    """``mnist.npz`` in the package's data directory ($LGCEXP_DATA_DIR, lgcexp.data.resolve_data_dir)."""
    from lgcexp.data import resolve_data_dir

    return resolve_data_dir(None) / "mnist.npz"
