"""The thread rule every compute pool of a process follows (lgcexp.devices.cpu_threads) and TensorFlow's pools
sized by it (lgcexp.devices.tensorflow)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lgcexp import devices
from lgcexp.graph import selfjoin
from lgcexp.solvers import fused


@pytest.mark.parametrize("env, expected", [("3", 3), ("1", 1), (" 2 ", 2), ("0", None), ("two", None), ("", None)])
def test_cpu_threads_follow_omp_num_threads(monkeypatch, env, expected):
    """OMP_NUM_THREADS (what joblib's loky workers get: cores // jobs) when it is a positive integer, else the
    CPUs this process may use; the kNN self-join and the numba kernels take the same number."""
    monkeypatch.setenv("OMP_NUM_THREADS", env)
    own = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    want = own if expected is None else expected
    assert devices.cpu_threads() == want
    assert selfjoin.search_threads() == want
    import numba

    assert fused.kernel_threads() == min(want, numba.config.NUMBA_NUM_THREADS)


_SCRIPT = """
import json, sys
import tensorflow  # imported before lgcexp's helper: the pools are still sized by it
import numpy as np
sys.path.insert(0, {tests!r})
from test_autol import narrowing_problem
from lgcexp.algorithms.autol import LooModel, optimize_weights
from lgcexp.devices import tensorflow
tf = tensorflow()
A, y = narrowing_problem(1, counts=(43, 40, 37))
om, st = optimize_weights(LooModel(A, y, 3, loss="xent"), steps=200, chunk=50)
np.save({out!r}, om)
print(json.dumps([tf.config.threading.get_intra_op_parallelism_threads(),
                  tf.config.threading.get_inter_op_parallelism_threads()]))
"""


def test_tensorflow_pools_take_the_process_share_and_change_no_bit(tmp_path):
    """A sweep worker (OMP_NUM_THREADS=1) gets one TensorFlow thread per pool instead of TensorFlow's default
    of every core, also where TensorFlow was imported before; AutoL's weights (a toy problem) are the same bits
    with one thread and with two."""
    pytest.importorskip("tensorflow")
    got = {}
    for n in (1, 2):
        out = tmp_path / f"w{n}.npy"
        code = _SCRIPT.format(tests=str(Path(__file__).parent), out=str(out))
        env = {**os.environ, "OMP_NUM_THREADS": str(n)}
        res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300,
                             check=True)
        assert json.loads(res.stdout.strip().splitlines()[-1]) == [n, n]
        got[n] = np.load(out)
    assert np.array_equal(got[1], got[2])
    assert (got[1] <= 0).sum() >= 10
