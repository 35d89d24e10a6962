"""The "load" stage: named data sets as `Dataset(name, X, y, n_classes)`.

    load_dataset("digits")                       # scikit-learn digits, offline
    load_dataset("spirals", n_samples=500, noise=0.05, seed=1)
    load_dataset("npz", path="my.npz")           # arrays X (n, d), y (n,) [, labeled, y_clean]
    load_dataset("csv", path="my.csv", label_column="label")   # your own labels, as given
    load_dataset("npy", path="X.npy", labels_path="y.txt")     # X memory-mapped
    load_dataset("mnist", data_dir="~/data")     # data_dir/mnist.npz, downloaded if missing
    load_dataset("isolet", data_dir="~/data")    # data_dir/isolet.npz, downloaded if missing

Bad input raises `lgcexp.errors.UserError` with one line. `data_dir` defaults to
`$LGCEXP_DATA_DIR`, else `~/.cache/lgcexp/data` (`lgcexp.locations`, the CLI's default too).
"""

from __future__ import annotations

import os
from pathlib import Path

from lgcexp.errors import UserError
from lgcexp.locations import default_dir

from ..registry import Registry
from .dataset import Dataset, make_dataset

__all__ = ["DATA_SOURCES", "DATASETS", "Dataset", "load_dataset", "make_dataset", "resolve_data_dir"]

#: config name -> data source class (one module per source)
DATA_SOURCES = Registry("dataset", {
    "digits": "lgcexp.data.builtin:Digits",
    "spirals": "lgcexp.data.builtin:Spirals",
    "isolet": "lgcexp.data.isolet:Isolet",
    "mnist": "lgcexp.data.mnist:Mnist",
    "npz": "lgcexp.data.npzfile:NpzFile",
    "csv": "lgcexp.data.csvfile:CsvFile",
    "npy": "lgcexp.data.npyfile:NpyFile",
})
DATASETS: tuple[str, ...] = DATA_SOURCES.names()


def resolve_data_dir(data_dir: str | os.PathLike | None) -> Path:
    """`data_dir` with `~` expanded; None -> `$LGCEXP_DATA_DIR`, else `~/.cache/lgcexp/data`."""
    raw = data_dir if data_dir not in (None, "") else default_dir("data")
    p = Path(os.path.expanduser(os.fspath(raw)))
    if p.exists() and not p.is_dir():
        raise UserError(f"data_dir {str(p)!r} is not a directory; pass a directory holding mnist.npz / isolet.npz")
    return p


def load_dataset(name: str, *, data_dir: str | None = None, download: bool = True, **params) -> Dataset:
    """Load data set `name` (one of DATASETS) as a checked Dataset; `params` are the source's parameters
    (`path` for npz; `n_samples`, `noise`, `seed` for spirals).

    With `download=False` a missing isolet/mnist file is an error instead of a download.
    """
    key = name.strip().lower() if isinstance(name, str) else name
    cls = DATA_SOURCES.get(key)
    try:
        source = cls(**params)
    except TypeError as exc:
        raise UserError(f"bad option for dataset={name}: {exc}") from None
    return source.load(data_dir=data_dir, download=download)
