"""Which device each numerical library runs on: the GPU when there is one, unless ``device=cpu``.

* faiss (the kNN search): with a GPU build of faiss (the ``gpu`` extra) and ``faiss.get_num_gpus() > 0``,
  an index is moved to all visible GPUs (``faiss.index_cpu_to_all_gpus``) before it is searched; the CPU
  build has no ``get_num_gpus`` or reports 0, and everything stays on the CPU.
* TensorFlow (AutoL's and AutoD's Adam loops): places operations on ``GPU:0`` by itself when a CUDA build
  sees a GPU. ``device=cpu`` hides the GPUs from it (``tf.config.set_visible_devices([], "GPU")``, or
  ``CUDA_VISIBLE_DEVICES=-1`` before TensorFlow is first imported).

* CuPy (the sparse solves: LGC's conjugate gradient, the P_LL column blocks, multi-shift CG): the solvers in
  :mod:`lgcexp.solvers` are written against an array module (``xp``: numpy with scipy.sparse, or cupy with
  cupyx.scipy.sparse, whose CSR product is cuSPARSE's SpMM), so one code path serves both.
  :func:`solve_module` picks cupy when it is installed (the ``gpu`` extra's ``cupy-cuda12x``), sees a GPU,
  the problem is large enough to pay for the transfers (:data:`GPU_MIN_ENTRIES`), and the device is not
  forced to the CPU; numpy otherwise. CuPy rather than TensorFlow's sparse kernels: TensorFlow's GPU build
  is far larger than what the lent GPU machines can carry, and CuPy mirrors the numpy/scipy.sparse API
  that the CPU path already uses, so the GPU code is the CPU code.

``device=auto`` (the default) uses the GPU when present; ``device=cpu`` forces the CPU for all. The
choice is where a run computes, not what: it is left out of the run's config hash (the numbers agree to
float round-off). :func:`report` gives result.json's ``device`` block: ``{"faiss": "cpu" | "gpu:N",
"tensorflow": "cpu" | "GPU:0" | null}`` (null: the run did not use TensorFlow).

Threads: :func:`cpu_threads` is the one rule for how many threads a process's own pools take (the kNN
self-join, the numba kernels, TensorFlow's CPU pools via :func:`tensorflow`): ``OMP_NUM_THREADS`` when set
(joblib's loky workers get ``cores // jobs`` there, so parallel sweep workers do not oversubscribe the cores),
else the CPUs this process may use.
"""
from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

DEVICES = ("auto", "cpu")

_force_cpu = False


def configure(device: str | None) -> None:
    """Set the device policy of this process (``auto`` or ``cpu``; None: auto)."""
    global _force_cpu
    _force_cpu = device == "cpu"
    if not _force_cpu:
        return
    if sys.modules.get("tensorflow") is not None:
        try:
            sys.modules["tensorflow"].config.set_visible_devices([], "GPU")
        except (RuntimeError, ValueError) as exc:  # devices already initialised: TF cannot change them now
            log.warning("device=cpu: TensorFlow has initialised its devices already (%s)", exc)
    elif sys.modules.get("faiss") is None:
        os.environ["CUDA_VISIBLE_DEVICES"] = "-1"


def force_cpu() -> bool:
    return _force_cpu


def cpu_threads() -> int:
    """Threads for this process's compute pools: ``OMP_NUM_THREADS`` when set to a positive integer, else
    the CPUs this process may use (its affinity mask)."""
    env = os.environ.get("OMP_NUM_THREADS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


_tf_threads_set = False


@contextlib.contextmanager
def _quiet_native_stderr() -> Any:
    """File descriptor 2 sent to a temporary file while TensorFlow's native libraries load: since TensorFlow
    2.16 their start-up lines (absl's "All log messages before absl::InitializeLog()", oneDNN's notice) are
    written before ``TF_CPP_MIN_LOG_LEVEL`` is read, once per library. What was written is replayed on stderr
    when the import fails, so an import error keeps its native details."""
    import tempfile

    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no file descriptor 2 (an embedded interpreter): nothing to silence
        yield
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        ok = False
        try:
            yield
            ok = True
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            if not ok:
                sink.seek(0)
                sys.stderr.write(sink.read().decode("utf-8", errors="replace"))


def tensorflow() -> Any:
    """TensorFlow, imported quietly; the first call in the process sizes its CPU thread pools (intra- and
    inter-op) to :func:`cpu_threads`. TensorFlow's own default is every core of the machine, so two sweep
    workers on two cores ran four compute threads (the tables' time moved by less than the machine's noise
    when this changed; docs/scale.md). The thread count changed no bit of AutoL's weights where tested (a toy
    problem in tests/test_devices.py, and the tables' runs). Pools TensorFlow has already created (its runtime
    used before this call) cannot be resized and are left as they are."""
    global _tf_threads_set
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if "tensorflow" in sys.modules:
        import tensorflow as tf
    else:
        with _quiet_native_stderr():
            import tensorflow as tf

    tf.get_logger().setLevel("ERROR")
    if not _tf_threads_set:
        _tf_threads_set = True
        n = cpu_threads()
        try:
            tf.config.threading.set_intra_op_parallelism_threads(n)
            tf.config.threading.set_inter_op_parallelism_threads(n)
        except RuntimeError:  # the runtime was initialised before this call (TensorFlow used elsewhere)
            log.debug("TensorFlow's thread pools were created already; left as they are")
    return tf


#: a solve goes to the GPU only when its right-hand sides have at least this many entries (n x columns):
#: below, the transfers and kernel launches cost more than the CPU's whole solve
GPU_MIN_ENTRIES = 200_000

_cupy: Any = False  # False: not probed yet; None: not usable


def gpu_module() -> Any:
    """The cupy module when it can compute here (installed, a CUDA device visible, not ``device=cpu``),
    else None. Probed once per process."""
    global _cupy
    if _force_cpu:
        return None
    if _cupy is False:
        try:
            import cupy

            _cupy = cupy if cupy.cuda.runtime.getDeviceCount() > 0 else None
        except Exception:  # noqa: BLE001 - not installed, no driver, no device: the CPU
            _cupy = None
    return _cupy


def solve_module(entries: int) -> Any:
    """The array module (numpy or cupy) a sparse solve with ``entries`` right-hand-side entries runs in."""
    cp = gpu_module() if entries >= GPU_MIN_ENTRIES else None
    return np if cp is None else cp


def is_device_array(a: Any) -> bool:
    """Whether ``a`` is a cupy array or a cupyx.scipy.sparse matrix (lives on the GPU)."""
    return type(a).__module__.split(".", 1)[0] in ("cupy", "cupyx")


def array_module(a: Any) -> Any:
    """numpy or cupy, whichever ``a`` (an array or a sparse matrix) belongs to."""
    if is_device_array(a):
        import cupy

        return cupy
    return np


def sparse_module(xp: Any) -> Any:
    """scipy.sparse for numpy, cupyx.scipy.sparse for cupy."""
    if xp is np:
        import scipy.sparse as sp

        return sp
    import cupyx.scipy.sparse as csp

    return csp


def free_device_bytes(xp: Any) -> int | None:
    """Bytes a new allocation can take on the current GPU: the device's free memory plus what CuPy's memory
    pool holds unused; None for numpy or when it cannot be read."""
    if xp is np:
        return None
    try:
        return int(xp.cuda.Device().mem_info[0]) + int(xp.get_default_memory_pool().free_bytes())
    except Exception:  # noqa: BLE001 - a stand-in module, no device: the caller's default
        return None


def to_host(a: Any) -> Any:
    """``a`` as a numpy array (a copy from the GPU; numpy arrays unchanged)."""
    return a.get() if is_device_array(a) else a


def synchronize(xp: Any) -> None:
    """Wait for the GPU's queued work (for timings); nothing for numpy."""
    if xp is not np:
        xp.cuda.get_current_stream().synchronize()


def faiss_gpu_count(faiss: Any) -> int:
    """GPUs faiss may use: 0 when forced to the CPU, with a CPU build, or when none is visible."""
    if _force_cpu:
        return 0
    get = getattr(faiss, "get_num_gpus", None)
    if get is None:
        return 0
    try:
        return max(0, int(get()))
    except Exception:  # a GPU build without a driver
        return 0


def faiss_device(faiss: Any) -> str:
    """``gpu:N`` (N GPUs) when faiss will use GPUs, else ``cpu``."""
    n = faiss_gpu_count(faiss)
    return f"gpu:{n}" if n else "cpu"


def to_faiss_device(faiss: Any, index: Any) -> tuple[Any, str]:
    """(the index on the chosen device, that device): moved to all GPUs when :func:`faiss_device` says so."""
    device = faiss_device(faiss)
    if device == "cpu":
        return index, device
    return faiss.index_cpu_to_all_gpus(index), device


def tensorflow_device() -> str | None:
    """``GPU:0`` when TensorFlow (already imported) places operations on a GPU, ``cpu`` when not, None when
    TensorFlow was not imported by this run (it is not imported here)."""
    tf = sys.modules.get("tensorflow")
    if tf is None:
        return None
    try:
        gpus = tf.config.list_logical_devices("GPU")
    except Exception:
        return "cpu"
    return "GPU:0" if gpus else "cpu"


def report() -> dict[str, Any]:
    """result.json's ``device`` block. faiss is imported here when installed, so a run whose graph came from
    the cache (faiss not used) records the same ``faiss`` device as the run that built it."""
    faiss = sys.modules.get("faiss")
    if faiss is None:
        try:
            import faiss  # noqa: F811
        except ImportError:
            faiss = None
    return {"faiss": faiss_device(faiss) if faiss is not None else ("cpu" if _force_cpu else None),
            "tensorflow": tensorflow_device()}
