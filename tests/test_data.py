"""Tests of lgcexp.data: built-in sets, npz files, input errors, and the shared ISOLET/MNIST files."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from lgcexp.data import DATASETS, Dataset, load_dataset
from lgcexp.errors import UserError


def _save(tmp_path: Path, name: str = "d.npz", **arrays) -> str:
    p = tmp_path / name
    np.savez(p, **arrays)
    return str(p)


# --- built-in sets ---------------------------------------------------------------------------

def test_registry():
    """Every data source has a yaml under conf/dataset/ and every yaml a source (derived: a new data set is
    one module and one yaml, no edit here)."""
    from pathlib import Path

    from helpers import CONF

    assert set(DATASETS) == {p.stem for p in (Path(CONF) / "dataset").glob("*.yaml")}
    assert {"digits", "spirals", "isolet", "mnist"} <= set(DATASETS)


def test_digits():
    d = load_dataset("digits")
    assert isinstance(d, Dataset) and d.name == "digits"
    assert d.X.shape == (1797, 64) and d.n == 1797 and d.n_classes == 10
    assert d.X.dtype == np.float64 and d.y.dtype == np.int64
    assert set(np.unique(d.y)) == set(range(10))


def test_spirals_shape_and_determinism():
    a = load_dataset("spirals", n_samples=301, noise=0.05, seed=3)
    b = load_dataset("spirals", n_samples=301, noise=0.05, seed=3)
    c = load_dataset("spirals", n_samples=301, noise=0.05, seed=4)
    assert a.X.shape == (301, 2) and a.n_classes == 2 and a.y.dtype == np.int64
    assert np.bincount(a.y).tolist() == [151, 150]
    assert np.array_equal(a.X, b.X) and np.array_equal(a.y, b.y)
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()
    clean = load_dataset("spirals", n_samples=200, noise=0.0, seed=0)
    r = np.linalg.norm(clean.X, axis=1)
    assert r.max() <= 1.0 + 1e-12
    # the two spirals are point reflections of each other: class 1 radius range matches class 0
    assert abs(r[clean.y == 0].max() - r[clean.y == 1].max()) < 0.05


def test_npz_and_label_remap(tmp_path):
    X = np.arange(12, dtype=np.float32).reshape(6, 2)
    p = _save(tmp_path, X=X, y=np.array([7, -3, 7, 10, -3, 10]))
    d = load_dataset("npz", path=p)
    assert d.X.shape == (6, 2) and d.X.dtype == np.float32 and d.n_classes == 3
    assert d.y.tolist() == [1, 0, 1, 2, 0, 2] and d.y.dtype == np.int64
    s = load_dataset("npz", path=_save(tmp_path, "s.npz", X=X, y=np.array(["b", "a", "c", "a", "b", "c"])))
    assert s.y.tolist() == [1, 0, 2, 0, 1, 2] and s.n_classes == 3
    ints = load_dataset("npz", path=_save(tmp_path, "i.npz", X=X.astype(np.int32), y=np.array([0, 1] * 3)))
    assert ints.X.dtype == np.float64


def test_fingerprint_stable_and_sensitive(tmp_path):
    X = np.random.default_rng(0).normal(size=(10, 3))
    y = np.array([0, 1] * 5)
    a = load_dataset("npz", path=_save(tmp_path, "a.npz", X=X, y=y))
    b = load_dataset("npz", path=_save(tmp_path, "b.npz", X=X.copy(), y=y))
    X2 = X.copy()
    X2[3, 1] += 1e-9
    c = load_dataset("npz", path=_save(tmp_path, "c.npz", X=X2, y=y))
    d = load_dataset("npz", path=_save(tmp_path, "d.npz", X=X.astype(np.float32), y=y))
    assert a.fingerprint() == b.fingerprint()
    assert len({a.fingerprint(), c.fingerprint(), d.fingerprint()}) == 3
    assert len(a.fingerprint()) == 64


# --- bad input -------------------------------------------------------------------------------

def test_unknown_dataset():
    with pytest.raises(UserError, match=r"dataset=foo is not allowed: choose one of digits, spirals, isolet, mnist, "
                                        r"npz, csv, npy"):
        load_dataset("foo")


@pytest.mark.parametrize("kw, bad", [({"n_samples": 1}, "1"), ({"n_samples": 2.5}, "2.5"),
                                     ({"noise": -0.1}, "-0.1"), ({"noise": float("nan")}, "nan"),
                                     ({"noise": "x"}, "dataset.noise=x")])
def test_spirals_bad_args(kw, bad):
    with pytest.raises(UserError, match=bad):
        load_dataset("spirals", **kw)


def _err(path) -> str:
    with pytest.raises(UserError) as e:
        load_dataset("npz", path=path)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_npz_errors(tmp_path):
    X = np.zeros((4, 2))
    assert "path=" in _err(None)
    missing = tmp_path / "nope.npz"
    assert str(missing) in _err(missing)
    msg = _err(_save(tmp_path, "noy.npz", X=X, labels=np.arange(4)))
    assert "noy.npz" in msg and "missing array(s) y" in msg and "'X'" in msg and "'labels'" in msg
    msg = _err(_save(tmp_path, "len.npz", X=X, y=np.array([0, 1, 0])))
    assert "4 rows" in msg and "3 labels" in msg
    Xn = np.zeros((5, 2))
    Xn[1, 0], Xn[3, 1] = np.nan, np.inf
    msg = _err(_save(tmp_path, "nan.npz", X=Xn, y=np.array([0, 1, 0, 1, 0])))
    assert "NaN or Inf in 2 of 5 rows" in msg and "nan.npz" in msg
    msg = _err(_save(tmp_path, "one.npz", X=X, y=np.full(4, 3)))
    assert "1 distinct label" in msg and "at least 2 classes" in msg
    assert "2-D" in _err(_save(tmp_path, "x1.npz", X=np.zeros(4), y=np.array([0, 1, 0, 1])))
    assert "1-D" in _err(_save(tmp_path, "y2.npz", X=X, y=np.zeros((4, 2))))
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"this is not a zip")
    assert "junk.npz" in _err(junk)


def test_offline_missing_file(tmp_path):
    for name in ("mnist", "isolet"):
        with pytest.raises(UserError) as e:
            load_dataset(name, data_dir=str(tmp_path), download=False)
        msg = str(e.value)
        assert f"{name}.npz not found" in msg and str(tmp_path / f"{name}.npz") in msg and "download" in msg
        assert "\n" not in msg
    assert list(tmp_path.iterdir()) == []


def test_data_dir_tilde(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(UserError, match=str(tmp_path / "d" / "mnist.npz")):
        load_dataset("mnist", data_dir="~/d", download=False)


def test_corrupted_existing_file(tmp_path):
    np.savez(tmp_path / "mnist.npz", X=np.zeros((5, 784), np.uint8), y=np.zeros(5, np.uint8))
    with pytest.raises(UserError, match=r"mnist\.npz.*expected X uint8 \(70000, 784\), found uint8 \(5, 784\)"):
        load_dataset("mnist", data_dir=str(tmp_path), download=False)
    (tmp_path / "isolet.npz").write_bytes(b"PK\x03\x04garbage")
    with pytest.raises(UserError, match=r"isolet\.npz: corrupted"):
        load_dataset("isolet", data_dir=str(tmp_path), download=True)  # existing file: no download attempt


# --- the shared real files -------------------------------------------------------------------

def _shared(name: str) -> str:
    d = os.environ.get("LGCEXP_DATA_DIR")
    if not d or not (Path(d).expanduser() / f"{name}.npz").is_file():
        pytest.skip(f"set LGCEXP_DATA_DIR to a directory holding {name}.npz")
    return d


def test_isolet_shared():
    d = load_dataset("isolet", data_dir=_shared("isolet"), download=False)
    assert d.X.shape == (7797, 617) and d.X.dtype == np.float32 and d.n_classes == 26
    counts = np.bincount(d.y, minlength=26)
    assert counts[5] == 298 and counts[12] == 299
    assert (np.delete(counts, [5, 12]) == 300).all()
    assert -1.0 <= d.X.min() and d.X.max() <= 1.0


def test_mnist_shared():
    d = load_dataset("mnist", data_dir=_shared("mnist"), download=False)
    assert d.X.shape == (70000, 784) and d.X.dtype == np.float32 and d.n_classes == 10
    assert d.X.max() == 255.0 and d.y.dtype == np.int64
    assert np.bincount(d.y).tolist() == [6903, 7877, 6990, 7141, 6824, 6313, 6876, 7293, 6825, 6958]
    assert np.bincount(d.y[60000:]).tolist() == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    assert len(d.fingerprint()) == 64
