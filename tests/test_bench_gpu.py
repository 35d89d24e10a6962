"""scripts/bench_gpu.py runs in CPU-only mode without hydra, omegaconf, TensorFlow, faiss or filelock (the
lent GPU machine has none of them): a subprocess with those imports blocked, on a small MNIST-shaped set."""
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
sys.argv = ['bench_gpu.py'] + {argv!r}
runpy.run_path({script!r}, run_name='__main__')
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
            "--pll-labels", "60", "--pll-cpu-cols", "40", "--lgc-labels", "30", "--eig-p", "4"]
    code = RUNNER.format(blocked=BLOCKED, argv=argv, script=str(ROOT / "scripts" / "bench_gpu.py"))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=False,
                          env={"PATH": "/usr/bin:/bin", "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)},
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rep = json.loads((out / "gpu.json").read_text())
    assert (out / "gpu.md").exists()
    assert rep["environment"]["gpu"] is None
    assert rep["environment"]["imported_of_hydra_omegaconf_tensorflow_faiss"] == []
    for name in ("graph", "lgc", "cg_iter", "pll", "eig"):
        assert "error" not in rep[name] and "skipped" not in rep[name], (name, rep[name])
    lgc = rep["lgc"]
    # the certified stop predicts what the solve to 1e-10 predicts, point for point
    assert lgc["cpu_cert_argmax_differs_from_cpu_tol1e-10"] == 0
    assert lgc["cpu_cert_iterations"] <= lgc["cpu_tol1e-10_iterations"]
    assert lgc["cpu_tol1e-10_accuracy"] > 0.5
    assert rep["graph"]["nnz_S"] >= 1200 * 15
    assert rep["pll"]["cpu_columns"] == 40
    assert abs(rep["eig"]["cpu_lambda_max"] - 1.0) < 1e-6  # S = D^-1/2 W D^-1/2 has top eigenvalue 1
