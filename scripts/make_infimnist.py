"""Write an InfiMNIST-style data set: seeded random deformations of the 70,000 MNIST digits, any size
(:mod:`lgcexp.data.infimnist` says how it is made and where it goes).

    python scripts/make_infimnist.py --n 1000000          # about 3 GB, a few minutes on 2 cores
    lgcexp dataset=npy dataset.path=<X.npy> dataset.clean_labels_path=<y.npy> labels.n=1000 \\
        noise.rate=0.2 graph=knn_approx graph.pca=64 graph.index=ivf ...
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from lgcexp.data.infimnist import default_mnist, default_out_dir, make


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="rows (default 1,000,000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None,
                    help="output directory (default <cache dir>/infimnist: $LGCEXP_CACHE_DIR, "
                         "else ~/.cache/lgcexp/cache)")
    ap.add_argument("--mnist", type=Path, default=None, help="mnist.npz (default $LGCEXP_DATA_DIR/mnist.npz)")
    ap.add_argument("--alpha", type=float, default=8.0, help="elastic displacement scale in pixels")
    ap.add_argument("--sigma", type=float, default=4.0, help="Gaussian smoothing of the displacement field")
    ap.add_argument("--rotate", type=float, default=10.0, help="maximum rotation in degrees")
    ap.add_argument("--shift", type=float, default=2.0, help="maximum translation in pixels")
    ap.add_argument("--workers", type=int, default=1, help="processes deforming blocks (same file for any number)")
    a = ap.parse_args(argv)
    if a.n < 1:
        ap.error("--n must be at least 1")
    out = a.out or default_out_dir()
    mnist = a.mnist or default_mnist()
    if not mnist.is_file():
        ap.error(f"{mnist}: no such file (set LGCEXP_DATA_DIR or --mnist)")
    t0 = time.perf_counter()
    x_path, y_path = make(a.n, a.seed, out, mnist, alpha=a.alpha, sigma=a.sigma, rotate=a.rotate, shift=a.shift,
                          workers=a.workers)
    print(f"{x_path}\n{y_path}\n({time.perf_counter() - t0:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
