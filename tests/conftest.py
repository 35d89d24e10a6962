import os
from pathlib import Path

# One BLAS thread: on a loaded 2-core machine, threads waiting for a busy core make LAPACK far slower.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import pytest
import scipy.sparse as sp

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    d = os.environ.get("LGCEXP_DATA_DIR") or (str(SHARED_DATA) if SHARED_DATA.exists() else None)
    if not d or not (Path(d) / "isolet.npz").exists():
        pytest.skip("real data not available (set LGCEXP_DATA_DIR)")
    return Path(d)


def random_graph(n: int = 40, k: int = 5, seed: int = 0):
    """A small connected symmetric kNN-like graph built independently of lgcexp.graph."""
    from lgcexp.graph import Graph

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    D = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    np.fill_diagonal(D, np.inf)
    A = np.zeros((n, n))
    nn = np.argsort(D, axis=1)[:, :k]
    for i in range(n):
        A[i, nn[i]] = np.exp(-D[i, nn[i]] ** 2)
    A = np.maximum(A, A.T)
    for i in range(n - 1):  # a chain keeps it connected
        A[i, i + 1] = A[i + 1, i] = max(A[i, i + 1], 0.05)
    return Graph(W=sp.csr_matrix(A), sigma=1.0, key=f"toy{n}-{k}-{seed}"), X


@pytest.fixture
def toy_graph():
    return random_graph()[0]


def two_clusters(n_per: int = 30, seed: int = 0, gap: float = 6.0):
    """Two well-separated Gaussian blobs: (X, y)."""
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(size=(n_per, 2)), rng.normal(size=(n_per, 2)) + gap])
    y = np.repeat([0, 1], n_per)
    return X, y


@pytest.fixture(autouse=True)
def _restore_logging():
    """Tests that run the CLI in-process let Hydra configure logging (handlers bound to the test's captured
    stderr); put the root logger back afterwards so no later log line goes to a closed stream."""
    import logging
    import sys

    root = logging.getLogger()
    if "absl.logging" in sys.modules:
        # TensorFlow's absl handler holds the stderr of the test that imported it; logging.config (Hydra) would
        # close that stream when it clears the handlers, which is pytest's capture file: keep it off the root
        # (logging.config closes every handler ever created, attached or not): point it at the real stderr,
        # which absl never closes
        absl_handler = sys.modules["absl.logging"].get_absl_handler()
        absl_handler.python_handler.stream = sys.__stderr__
    saved = (list(root.handlers), root.level)
    yield
    for h in root.handlers:
        if h not in saved[0]:
            try:
                h.close()
            except Exception:
                pass
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])
