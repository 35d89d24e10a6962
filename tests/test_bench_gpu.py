"""The GPU benchmark (``python -m benchmarks gpu``) runs in CPU-only mode without hydra, omegaconf, TensorFlow,
faiss or filelock (the lent GPU machine has none of them): a subprocess with those imports blocked, on a small
MNIST-shaped set."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BLOCKED = ("hydra", "omegaconf", "tensorflow", "faiss", "filelock", "cupy")

RUNNER = """
import importlib.abc, runpy, sys

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in {blocked!r}:
            raise ImportError('blocked for the test: ' + name)
        return None

sys.meta_path.insert(0, Block())
sys.argv = ['benchmarks', 'gpu'] + {argv!r}
runpy.run_module('benchmarks', run_name='__main__', alter_sys=True)
"""


def _small_mnist(path: Path, n: int = 1200) -> None:
    """Integer pixels in 0..255 with class structure (10 prototypes plus noise), as mnist.npz stores them."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 10, n).astype(np.uint8)
    protos = rng.integers(0, 256, (10, 784))
    X = np.clip(protos[y] + rng.integers(-60, 61, (n, 784)), 0, 255).astype(np.uint8)
    np.savez(path, X=X, y=y)


def test_bench_gpu_cpu_only_without_optional_modules(tmp_path):
    data = tmp_path / "mnist.npz"
    _small_mnist(data)
    out = tmp_path / "out"
    argv = ["--data", str(data), "--out", str(out), "--device", "cpu", "--budget", "120",
            "--pll-labels", "60", "--pll-cpu-cols", "40", "--lgc-labels", "30", "--eig-p", "4",
            "--million", "1000", "--million-labels", "100", "--million-cpu-cols", "100", "--million-check", "300"]
    code = RUNNER.format(blocked=BLOCKED, argv=argv)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=False,
                          env={"PATH": "/usr/bin:/bin", "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)},
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rep = json.loads((out / "gpu.json").read_text())
    assert (out / "gpu.md").exists()
    assert rep["environment"]["gpu"] is None
    assert rep["environment"]["imported_of_hydra_omegaconf_tensorflow_faiss"] == []
    for name in ("graph", "lgc", "cg_iter", "pll", "eig", "million"):
        assert "error" not in rep[name] and "skipped" not in rep[name], (name, rep[name])
    lgc = rep["lgc"]
    # the certified stop predicts what the solve to 1e-10 predicts, point for point
    assert lgc["cpu_cert_argmax_differs_from_cpu_tol1e-10"] == 0
    assert lgc["cpu_cert_iterations"] <= lgc["cpu_tol1e-10_iterations"]
    assert lgc["cpu_tol1e-10_accuracy"] > 0.5
    assert rep["graph"]["nnz_S"] >= 1200 * 15
    assert rep["pll"]["cpu_columns"] == 40
    assert abs(rep["eig"]["cpu_lambda_max"] - 1.0) < 1e-6  # S = D^-1/2 W D^-1/2 has top eigenvalue 1
    m = rep["million"]
    # the float32 candidates re-ranked in float64 find the exact neighbours of the checked rows, in order
    assert m["search_module"] == "numpy" and m["recall_at_k"] == 1.0 and m["same_lists_in_order"] == 1.0
    assert m["max_abs_dist_diff"] < 1e-9
    assert m["lgc_cpu_unlabelled_accuracy"] > 0.5 and m["pll_cpu_columns"] == 100
    # --finish: AutoL's Adam loop (TensorFlow, allowed here) on the saved P_LL, the flips judged
    fin = tmp_path / "fin"
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "gpu", "--finish", str(out), "--out",
                           str(fin)], capture_output=True, text=True, check=False, timeout=300, cwd=ROOT,
                          env={"PATH": "/usr/bin:/bin", "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    f = json.loads((fin / "gpu.json").read_text())["million"]
    assert f["adam_steps"] == 5000 and f["labels_flipped"] == 20
    assert f["auc_minus_omega"] > 0.9 and f["auc_minus_vote_share"] > 0.9 and f["drop_f1"] > 0.5


def _bench_module():
    import benchmarks.gpu

    return vars(benchmarks.gpu)


def test_smallest_k_by_chunk_minima_equals_a_full_selection():
    """Several levels of chunk minima (direct=8, chunk=4), uneven widths, ties (small integers): the selected
    entries are k smallest of each row, by value."""
    smallest_k = _bench_module()["smallest_k"]
    rng = np.random.default_rng(3)
    for M, k in ((1000, 3), (997, 7), (130, 1), (64, 16)):
        for V in (rng.standard_normal((40, M)), rng.integers(0, 20, (40, M)).astype(float)):
            sel = smallest_k(np, V, k, chunk=4, direct=8)
            assert sel.shape == (40, k)
            assert all(np.unique(row).size == k for row in sel)             # k distinct columns
            got = np.sort(np.take_along_axis(V, sel, axis=1), axis=1)
            assert np.array_equal(got, np.sort(V, axis=1)[:, :k])


def test_knn_float_is_the_exact_float64_search():
    """knn_float (float32 GEMM candidates, chunk minima, float64 re-rank) against the float64 reference,
    on points with near-equal distances (a tight cluster far from the origin) and exact duplicates."""
    b = _bench_module()
    rng = np.random.default_rng(5)
    X = 1000.0 + rng.standard_normal((601, 20)) * 0.01   # 601: the last chunk is padded
    X[10] = X[11]                                        # a duplicate: distance 0, ties broken by index
    X[300:303] = X[400]
    dist, idx = b["knn_float"](np, X, 6, block=77, chunk=8, direct=16)
    cd, ci = b["exact_rows_knn"](X, np.arange(601), 6, block=129)
    assert np.array_equal(idx, ci)
    assert np.allclose(dist, cd, rtol=0, atol=1e-12)
    assert idx[10, 0] == 11 and idx[300, 0] == 301 and idx[400, :3].tolist() == [300, 301, 302]
    assert not np.any(idx == np.arange(601)[:, None])    # never itself
    assert idx.max() < 601                               # never a padding row
