"""Speed figures for the start-up, the compiled AutoL step and the LGC solve (issue #15). Not a test.

1. Start-up: ``import lgcexp.cli``, ``import tensorflow`` and ``import sklearn.model_selection`` in fresh
   interpreters, and one whole ``lgcexp dataset=isolet algo=lgc`` run with a warm cache (graph and P_LL
   cached; the second of two runs), wall seconds.
2. The compiled AutoL step: in one fresh process, Adam on an ISOLET-sized leave-one-out problem (l = 1040,
   26 classes, 1000 steps, float32, XLA): the first fit (trace + XLA compilation), a second fit of the same
   shapes (reuses both), a fit of other shapes (a new compilation), and the same-shape fit again after
   emptying the cache of compiled steps (what every fit paid before: its own trace and compilation). The
   weights of the reused and the rebuilt fit are compared (they must be identical). Then (``padded_widths``,
   issue 24) 14 such fits whose largest class sizes differ (m = 42 ... 55), in one fresh process, each width
   compiled on its own (the code before) against class widths padded to multiples of 16 columns before the
   tail (AutoL's default), weights compared.
3. The LGC solve on MNIST (ISOLET with ``--quick``), seed 0, labels without noise, the graph from the
   cache: conjugate gradient in the graph's own numbering to 1e-10 (before), in reverse Cuthill-McKee order
   to 1e-10, and in RCM order stopped by the argmax certificate (tol 1e-10 as the fallback); one sparse
   product with 10 columns in float64 and float32, with and without RCM. Same run, so ratios compare.
4. One CG iteration with 10 right-hand sides on that graph (issue 24): the block strategy of
   :func:`lgcexp.solvers.shifted.shifted_solve` (numpy/scipy) against its fused strategy (the numba passes) in float64
   and in float32, with 1 thread and with :func:`lgcexp.solvers.fused.kernel_threads` threads, each 20 iterations / 20,
   against the measured bandwidth floor of an iteration: one streaming read of S's data, indices and row pointers plus
   one copy (read and write) of each of the four n x 10 blocks CG touches (X, R, P, AP), by numba kernels on the same
   threads (``floor``: float64 as the numpy path; ``floor_f32``: the float32 iteration's bytes), the floors and the
   iterations timed in :data:`ROUNDS` interleaved rounds, the best of each kept; the product ``S @ V`` alone by scipy,
   TensorFlow (``tf.sparse.sparse_dense_matmul``) and the fused kernels (generic and specialised for 10 columns),
   float64 and float32; and the warm certified LGC solve: numpy/scipy (``LGCEXP_FUSED=0``) and fused float64 (the
   default), argmax compared on label seeds 0, 7, 13.
5. P_LL on that graph (issue 24), the MNIST table's: 100 labels of seed 0, float32, tol 1e-6, one thread (as
   in a sweep worker): one alpha (0.9, LGC's label judgement) by the block strategy and on the fused passes, and
   the four alphas of ``algo=auto`` (x = 2, 4, 8, 16) by multi-shift CG with the numpy and with the fused
   base recursion; the largest entrywise difference of each pair relative to P_LL's largest entry. Then a
   table sweep's three requests per labelled set (0.9, AutoL's alpha, auto's grid) solved one by one against
   one multi-shift solve of the six rates (``pll_alphas``), on the default path, and that solve with the
   shifted systems' updates by numpy instead of :func:`lgcexp.solvers.fused.shifted_updates` (ISOLET's 1040
   labels are above its size; the same bits).
6. SIIS's ALM (issue 24), as in the ISOLET table: seed 0's labelled set with 40 % uniform noise, m = 300
   eigenpairs, lambda1 = 100, one BLAS thread; the numpy loop (``fused=False``) against the numba edge pass
   (:func:`lgcexp.solvers.fused.siis_edge_pass`), best of 2, with the largest difference of F relative to its
   largest entry and the points whose argmax differs. Also MNIST (m = 30, 30 % noise) without ``--quick``.
7. ``algo=auto``'s search and final run (issue 24), ISOLET seed 0's labelled set with 40 % uniform noise, the
   grid's P_LL from one multi-shift solve: as before (the four alphas as one batched problem for 1000 steps,
   then 5000 steps from omega = 1 at the chosen alpha) against now (the four as single problems sharing one
   compiled step, the chosen one's run continued to 5000 steps); the second of two rounds in one process
   (compilations done), the chosen x and whether the final weights are the same bits.
8. A sweep's per-job set-up (issue 24): every job's config composed as a launcher's worker composes it
   (``load_sweep_config`` on the master config of ``experiment=table_mnist``, its 360 override lists, 240 once
   lgcexp's sweeper drops LGC's duplicate losses; 60 with ``--quick``)
   by Hydra's loader and through :class:`lgcexp.compose_memo.MemoConfigLoader`, ms per job and whether every
   composed config (``hydra`` node included) is the same; then a finished 48-job sweep
   (``lgcexp -m dataset=digits algo=lgc seed=range(48)``, 2 workers) started again, every job skipped after its
   set-up, with the memo (the default) and with ``LGCEXP_MEMO=0``, alternating, two runs each, wall seconds.

Wall seconds (``_s``) and process CPU seconds (``_cpu_s``); the load average is recorded.

    python -m benchmarks speed [--quick]     # writes results/bench/speed.json and speed.md
    python -m benchmarks speed --only cg_iteration   # section 4 only (speed_cg_iteration.json/.md)
    python -m benchmarks speed --only pll            # section 5 only
    python -m benchmarks speed --only siis           # section 6 only
    python -m benchmarks speed --only auto_search    # section 7 only
    python -m benchmarks speed --only sweep_setup    # section 8 only
    python -m benchmarks speed --only padded_widths  # section 2's shared compiled steps only
    python -m benchmarks report --only speed        # the same as a section of bench.json

``run(quick) -> dict`` is what ``benchmarks/report.py`` calls (section "speed").
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

import numpy as np

from benchmarks.common import OUT, ROOT, best_of, compose, figure_rows, open_cache, write_report


def _wall(cmd: list[str], env: dict | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=env, cwd=ROOT)
    return time.perf_counter() - t0


def startup() -> dict:
    py = sys.executable
    out = {f"import_{name.replace('.', '_')}_s": _wall([py, "-c", f"import {name}"])
           for name in ("lgcexp.cli", "tensorflow", "sklearn.model_selection")}
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [py, "-m", "lgcexp.cli", "dataset=isolet", "algo=lgc"]
        _wall(cmd + [f"hydra.run.dir={tmp}/warm"])                      # fills the caches
        out["lgcexp_isolet_lgc_warm_s"] = _wall(cmd + [f"hydra.run.dir={tmp}/timed"])
        res = json.loads(Path(tmp, "timed", "result.json").read_text())
        out["lgcexp_isolet_lgc_stage_seconds"] = res.get("stage_seconds")
        probe = ("import sys, runpy; sys.argv=['lgcexp','dataset=isolet','algo=lgc','hydra.run.dir=" + tmp +
                 "/probe']\ntry: runpy.run_module('lgcexp.cli', run_name='__main__')\nexcept SystemExit: pass\n"
                 "print('MODULES', 'tensorflow' in sys.modules, 'sklearn' in sys.modules)")
        r = subprocess.run([py, "-c", probe], capture_output=True, text=True, cwd=ROOT)
        line = [x for x in r.stdout.splitlines() if x.startswith("MODULES")][-1].split()
        out["lgc_run_imports_tensorflow"] = line[1] == "True"
        out["lgc_run_imports_sklearn"] = line[2] == "True"
    return out


_REUSE = r"""
import json, sys, time
import numpy as np
from lgcexp.algorithms import autol
from lgcexp.algorithms.autol import LooModel, loo_matrix, optimize_weights

def problem(seed, l=1040, c=26):
    rng = np.random.default_rng(seed)
    A, _ = loo_matrix(rng.random((l, l)) ** 8)
    return A, rng.integers(0, c, l)

def fit(A, y):
    c0, t0 = time.process_time(), time.perf_counter()
    om, _ = optimize_weights(LooModel(A, y, 26, loss="xent"), steps=STEPS, chunk=500, xla=True)
    return om, time.perf_counter() - t0, time.process_time() - c0

STEPS = int(sys.argv[1])
A0, y0 = problem(0)
A1, y1 = problem(1)
out = {}
om_first, out["first_fit_s"], out["first_fit_cpu_s"] = fit(A0, y0)
om_second, out["second_fit_same_shapes_s"], out["second_fit_same_shapes_cpu_s"] = fit(A0, y0)
_, out["fit_other_shapes_s"], out["fit_other_shapes_cpu_s"] = fit(A1, y1)
autol._COMPILED.clear()
om_rebuilt, out["rebuilt_fit_s"], out["rebuilt_fit_cpu_s"] = fit(A0, y0)
out["reused_equals_rebuilt"] = bool(np.array_equal(om_second, om_rebuilt) and np.array_equal(om_first, om_rebuilt))
print("RESULT " + json.dumps(out))
"""


def compiled_step(quick: bool) -> dict:
    steps = 500 if quick else 1000
    r = subprocess.run([sys.executable, "-c", _REUSE, str(steps)], capture_output=True, text=True, cwd=ROOT,
                       check=True)
    out = json.loads([x for x in r.stdout.splitlines() if x.startswith("RESULT ")][-1][7:])
    out = {"steps": steps, "l": 1040, "classes": 26, **out}
    out["saved_per_fit_s"] = out["rebuilt_fit_s"] - out["second_fit_same_shapes_s"]
    out["speedup_reused_vs_rebuilt"] = out["rebuilt_fit_s"] / out["second_fit_same_shapes_s"]
    out["speedup_reused_vs_rebuilt_cpu"] = out["rebuilt_fit_cpu_s"] / out["second_fit_same_shapes_cpu_s"]
    return out


_WIDTHS = r"""
import json, sys, time
import numpy as np
from lgcexp.algorithms import autol
from lgcexp.algorithms.autol import LooModel, loo_matrix, optimize_weights

STEPS, QUANTUM, OUT = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
autol._WIDTH_QUANTUM = QUANTUM

def problem(m, l=1040, c=26):
    # ISOLET's size; class 0 is the widest, with m labels (the others about 40 each)
    rng = np.random.default_rng(m)
    A, _ = loo_matrix(rng.random((l, l)) ** 8)
    y = np.r_[np.zeros(m, dtype=int), 1 + np.arange(l - m) % (c - 1)]
    return A, rng.permutation(y)

problems = [problem(m) for m in range(42, 56)]
c0, t0 = time.process_time(), time.perf_counter()
oms = [optimize_weights(LooModel(A, y, 26, loss="xent"), steps=STEPS, chunk=500)[0] for A, y in problems]
out = {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
       "compiled_steps": len(autol._COMPILED)}
np.save(OUT, np.stack(oms))
print("RESULT " + json.dumps(out))
"""


def padded_widths(quick: bool) -> dict:
    """AutoL fits whose largest class sizes differ (ISOLET's size, l = 1040, 26 classes, m = 42 ... 55: 14 widths,
    as the ISOLET table's 80 labelled sets have), one after the other in one fresh process as a sweep worker
    runs them: each width compiled on its own (``_WIDTH_QUANTUM`` = 8, the code before) against widths padded
    to whole multiples of 16 columns before the tail (the default); wall and CPU seconds of the 14 fits, the
    compiled steps made, and whether the weights are the same bits."""
    import tempfile

    steps = 500 if quick else 1000
    out: dict = {"steps": steps, "fits": 14, "l": 1040, "classes": 26}
    with tempfile.TemporaryDirectory() as tmp:
        weights = {}
        for tag, quantum in (("unpadded", 8), ("padded", 16)):
            path = str(Path(tmp) / f"{tag}.npy")
            r = subprocess.run([sys.executable, "-c", _WIDTHS, str(steps), str(quantum), path], capture_output=True,
                               text=True, cwd=ROOT, check=True)
            res = json.loads([x for x in r.stdout.splitlines() if x.startswith("RESULT ")][-1][7:])
            out.update({f"{tag}_{k}": v for k, v in res.items()})
            weights[tag] = np.load(path)
    out["speedup_padded"] = out["unpadded_wall_s"] / out["padded_wall_s"]
    out["speedup_padded_cpu"] = out["unpadded_cpu_s"] / out["padded_cpu_s"]
    out["weights_identical"] = bool(np.array_equal(weights["unpadded"], weights["padded"]))
    out["dropped_identical"] = bool(np.array_equal(weights["unpadded"] <= 0, weights["padded"] <= 0))
    out["weights_max_abs_diff"] = float(np.abs(weights["unpadded"] - weights["padded"]).max())
    return out


def _graph_and_labels(dataset: str, seeds: tuple[int, ...] = (0,)):
    """(data, {seed: labelled split without noise}, graph from the cache)."""
    from lgcexp.cache import Cache
    from lgcexp.config import plan
    from lgcexp.labels import sample_and_corrupt
    from lgcexp.pipeline import load

    p = plan(compose([f"dataset={dataset}", "algo=lgc", "seed=0"]))
    paths = p.config.get("paths") or {}
    data = load(p, paths)
    splits = {s: sample_and_corrupt(data.y, p.n_labels, seed=s, noise=p.noise) for s in seeds}
    g, _ = p.graph.build(data.X, cache=Cache(paths.get("cache_dir")), data_fingerprint=data.fingerprint())
    return data, splits, g


def lgc_solve(quick: bool) -> dict:
    from lgcexp.solvers.shifted import rcm_reordered, shifted_solve

    name = "isolet" if quick else "mnist"
    data, splits, g = _graph_and_labels(name)
    split = splits[0]
    Y = np.zeros((data.n, data.n_classes))
    Y[split.labeled, split.y_observed] = 1
    c0, t0 = time.process_time(), time.perf_counter()
    rcm_reordered(g.S)                                                  # once per graph (cached)
    t_rcm, c_rcm = time.perf_counter() - t0, time.process_time() - c0
    (F0, it0, _), t_plain, c_plain = best_of(lambda: shifted_solve(g.S, Y, 0.9, tol=1e-10, strategy="block"))
    (F1, it1, _), t_rcm_tol, c_rcm_tol = best_of(lambda: shifted_solve(g.S, Y, 0.9, tol=1e-10, reorder=True))
    (F2, it2, _), t_cert, c_cert = best_of(lambda: shifted_solve(g.S, Y, 0.9, tol=1e-10, degree=g.degree,
                                                                 reorder=True))
    ref = F0.argmax(1)
    out = {
        "dataset": name, "n": data.n, "nnz_S": int(g.S.nnz), "columns": data.n_classes,
        "rcm_order_once_s": t_rcm, "rcm_order_once_cpu_s": c_rcm,
        "plain_tol1e-10_s": t_plain, "plain_tol1e-10_cpu_s": c_plain, "plain_iterations": it0,
        "rcm_tol1e-10_s": t_rcm_tol, "rcm_tol1e-10_cpu_s": c_rcm_tol, "rcm_iterations": it1,
        "rcm_argmax_stop_s": t_cert, "rcm_argmax_stop_cpu_s": c_cert, "rcm_argmax_stop_iterations": it2,
        "speedup_rcm_vs_plain": t_plain / t_rcm_tol,
        "speedup_rcm_argmax_vs_plain": t_plain / t_cert,
        "rows_argmax_differs_rcm": int((F1.argmax(1) != ref).sum()),
        "rows_argmax_differs_rcm_argmax_stop": int((F2.argmax(1) != ref).sum()),
    }
    X = np.ascontiguousarray(Y[:, :10] + 0.5)
    for dt in (np.float64, np.float32):
        Sd = g.S.astype(dt)
        Sp, perm = rcm_reordered(g.S, dt)
        Xd, Xp = X.astype(dt), np.ascontiguousarray(X[perm].astype(dt))
        _, t_a, _ = best_of(lambda: Sd @ Xd, 10)
        _, t_b, _ = best_of(lambda: Sp @ Xp, 10)
        tag = np.dtype(dt).name
        out[f"spmm_10cols_{tag}_plain_ms"] = 1e3 * t_a
        out[f"spmm_10cols_{tag}_rcm_ms"] = 1e3 * t_b
        out[f"speedup_spmm_{tag}_rcm"] = t_a / t_b
    return out


_FLOOR_SRC = """
import numpy as np
from numba import njit, prange

@njit(parallel=True, nogil=True)
def read_sum(a, b, c):
    s = 0.0
    for i in prange(a.size):
        s += a[i]
    t = 0
    for i in prange(b.size):
        t += b[i]
    for i in prange(c.size):
        t += c[i]
    return s + t

@njit(parallel=True, nogil=True)
def copy(src, dst):
    for i in prange(src.size):
        dst[i] = src[i]
"""


def _floor_kernels():
    ns: dict = {}
    exec(compile(_FLOOR_SRC, "<bench_speed floor>", "exec"), ns)  # noqa: S102 - our own source
    return ns["read_sum"], ns["copy"]


def _tf_product(S, dt):
    """``V -> S @ V`` by TensorFlow's ``tf.sparse.sparse_dense_matmul`` in ``dt`` (a compiled tf.function),
    or None when TensorFlow is not importable."""
    try:
        import tensorflow as tf
    except ImportError:  # pragma: no cover - TensorFlow is a dependency
        return None
    coo = S.tocoo()
    St = tf.sparse.SparseTensor(np.stack([coo.row, coo.col], 1).astype(np.int64), coo.data.astype(dt), coo.shape)
    fn = tf.function(lambda V: tf.sparse.sparse_dense_matmul(St, V))
    return lambda V: fn(tf.constant(V)).numpy()


#: interleaved timing rounds of the CG iteration and its floor (:func:`cg_iteration`)
ROUNDS = 5


def cg_iteration(quick: bool) -> dict:
    """Section 4: one CG iteration with 10 columns (numpy/scipy, fused float64, fused float32) against the
    bandwidth floor; the products alone (scipy, TensorFlow, the fused kernels, float64 and float32); the warm
    certified LGC solve on three label seeds (numpy/scipy, fused float64), all by the one entry
    :func:`lgcexp.solvers.shifted.shifted_solve`."""
    import numba

    from lgcexp.solvers import fused as kernels
    from lgcexp.solvers.cg import NotConverged
    from lgcexp.solvers.shifted import rcm_reordered, shifted_solve

    name = "isolet" if quick else "mnist"
    seeds = (0, 7, 13)
    data, splits, g = _graph_and_labels(name, seeds)
    S, _ = rcm_reordered(g.S)
    S32, _ = rcm_reordered(g.S, np.float32)
    n, m, c = S.shape[0], 20, 10
    B = np.ascontiguousarray(np.random.default_rng(0).random((n, c)))
    B32 = B.astype(np.float32)
    read_sum, copy = _floor_kernels()
    floors = {}
    for dt, tag in ((np.float64, ""), (np.float32, "_f32")):
        Sd = S if dt == np.float64 else S32
        blocks = [np.random.default_rng(i).random(n * c).astype(dt) for i in range(4)]
        dst = np.empty(n * c, dtype=dt)

        def floor(Sd=Sd, blocks=blocks, dst=dst):
            read_sum(Sd.data, Sd.indices, Sd.indptr)
            for b in blocks:
                copy(b, dst)
        floors[tag] = floor

    def iterations(fn):
        def go():
            try:
                fn()
            except NotConverged:
                pass
        return go

    numpy_iter = iterations(lambda: shifted_solve(S, B, 0.9, tol=0.0, maxiter=m, strategy="block"))
    fused_iter = iterations(lambda: shifted_solve(S, B, 0.9, tol=0.0, maxiter=m, strategy="fused"))
    fused32_iter = iterations(lambda: shifted_solve(S32, B32, 0.9, tol=0.0, maxiter=m, strategy="fused"))
    bounds = kernels.row_chunks_of(S)
    dots = np.zeros((bounds.size - 1, c))
    products = {}
    for dt, tag in ((np.float64, "f64"), (np.float32, "f32")):
        Sd = S if dt == np.float64 else S32
        V, AV, na = B.astype(dt), np.empty((n, c), dtype=dt), np.array([-0.9], dtype=dt)
        products[f"scipy_{tag}"] = lambda Sd=Sd, V=V: Sd @ V
        tf_fn = _tf_product(Sd, dt)
        if tf_fn is not None:
            products[f"tensorflow_{tag}"] = lambda f=tf_fn, V=V: f(V)
        for kname, kern in (("fused_generic", kernels.shifted_product_dot),
                            ("fused_specialised", kernels.product_for(c, dt))):
            products[f"{kname}_{tag}"] = (lambda k=kern, Sd=Sd, V=V, AV=AV, na=na:
                                          k(Sd.indptr, Sd.indices, Sd.data, V, na, AV, bounds, dots))
    out = {"dataset": name, "n": n, "nnz_S": int(S.nnz), "columns": c,
           "bytes_S": int(S.data.nbytes + S.indices.nbytes + S.indptr.nbytes), "bytes_block": int(n * c * 8),
           "bytes_S_f32": int(S32.data.nbytes + S32.indices.nbytes + S32.indptr.nbytes),
           "kernel_threads": kernels.kernel_threads(), "numba_threading_layer": None}
    with mock.patch.dict(os.environ):           # OMP_NUM_THREADS as it was again after the loop
        for threads in sorted({1, kernels.kernel_threads()}):
            os.environ["OMP_NUM_THREADS"] = str(threads)
            numba.set_num_threads(threads)
            tag = f"{threads}thread"
            # the floors and the iterations in interleaved rounds, the best of each kept: a shared machine's
            # slow spells then hit both sides of a ratio alike instead of whichever ran during one
            timed = [(f"floor{ftag}", floor, 1, 3) for ftag, floor in floors.items()]
            timed += [(f"{vname}_iteration", fn, m, 1) for vname, fn in (("fused", fused_iter),
                                                                      ("fused_f32", fused32_iter))]
            best: dict = {}
            for _, fn, _, _ in timed:
                fn()                                                # compile / warm
            for _ in range(ROUNDS):
                for key, fn, per, reps in timed:
                    _, t, c_ = best_of(fn, reps)
                    if key not in best or t < best[key][0]:
                        best[key] = (t, c_)
            for key, _, per, _ in timed:
                out[f"{key}_ms_{tag}"] = 1e3 * best[key][0] / per
                out[f"{key}_cpu_ms_{tag}"] = 1e3 * best[key][1] / per
            t64, t32 = out[f"floor_ms_{tag}"], out[f"floor_f32_ms_{tag}"]
            out[f"fused_over_floor_{tag}"] = out[f"fused_iteration_ms_{tag}"] / t64
            out[f"fused_f32_over_floor_{tag}"] = out[f"fused_f32_iteration_ms_{tag}"] / t64
            out[f"fused_f32_over_floor_f32_{tag}"] = out[f"fused_f32_iteration_ms_{tag}"] / t32
            with kernels.parallel_section():                        # the kernels' own thread setting
                for pname, fn in products.items():
                    if pname.startswith(("scipy", "tensorflow")) and threads != kernels.kernel_threads():
                        continue                                    # their own threads: timed once
                    fn()
                    _, t_p, c_p = best_of(fn, 10)
                    key = pname if pname.startswith(("scipy", "tensorflow")) else f"{pname}_{tag}"
                    out[f"product_{key}_ms"] = 1e3 * t_p
                    out[f"product_{key}_cpu_ms"] = 1e3 * c_p
    out["numba_threading_layer"] = numba.threading_layer()
    numpy_iter()
    _, t_np, c_np = best_of(numpy_iter, 5)
    out["numpy_iteration_ms"] = 1e3 * t_np / m
    out["numpy_iteration_cpu_ms"] = 1e3 * c_np / m
    t1 = out["floor_ms_1thread"]
    out["numpy_over_floor_1thread"] = out["numpy_iteration_ms"] / t1
    # one thread: CPU seconds are the work itself, without the waits of a busy machine
    for v in ("fused", "fused_f32"):
        out[f"{v}_over_floor_1thread_cpu"] = out[f"{v}_iteration_cpu_ms_1thread"] / out["floor_cpu_ms_1thread"]
    out["numpy_over_floor_1thread_cpu"] = out["numpy_iteration_cpu_ms"] / out["floor_cpu_ms_1thread"]
    for k in [k for k in out if k.startswith(("fused_iteration_ms_", "fused_f32_iteration_ms_"))]:
        out[f"speedup_{k.replace('_iteration_ms', '')}_vs_numpy"] = out["numpy_iteration_ms"] / out[k]
    # the warm certified LGC solve: numpy/scipy (LGCEXP_FUSED=0) and fused float64 (the default); timed on
    # seed 0, argmax compared on every seed
    paths = (("numpy", {"LGCEXP_FUSED": "0"}), ("fused", {}))
    for seed in seeds:
        split = splits[seed]
        Y = np.zeros((data.n, data.n_classes))
        Y[split.labeled, split.y_observed] = 1
        sols = {}
        for tag, env in paths:
            os.environ.pop("LGCEXP_FUSED", None)
            os.environ.update(env)
            if seed == seeds[0]:
                shifted_solve(g.S, Y, 0.9, degree=g.degree, reorder=True)
                (F, it, rel), t, cpu = best_of(lambda: shifted_solve(g.S, Y, 0.9, degree=g.degree, reorder=True), 3)
                out[f"lgc_solve_{tag}_s"], out[f"lgc_solve_{tag}_cpu_s"] = t, cpu
                out[f"lgc_solve_{tag}_iterations"], out[f"lgc_solve_{tag}_residual"] = it, rel
            else:
                F, it, rel = shifted_solve(g.S, Y, 0.9, degree=g.degree, reorder=True)
            sols[tag] = F
        os.environ.pop("LGCEXP_FUSED", None)
        sfx = "" if seed == seeds[0] else f"_seed{seed}"
        out[f"lgc_solve_rows_argmax_differs_fused{sfx}"] = int((sols["numpy"].argmax(1) !=
                                                                sols["fused"].argmax(1)).sum())
    out["lgc_solve_speedup_fused"] = out["lgc_solve_numpy_s"] / out["lgc_solve_fused_s"]
    return out


def pll(quick: bool) -> dict:
    from lgcexp.algorithms.auto import alpha_of_x
    from lgcexp.algorithms.propagation import propagation_submatrices, propagation_submatrix
    from lgcexp.solvers import shifted

    _, splits, g = _graph_and_labels("isolet" if quick else "mnist")
    labeled = splits[0].labeled
    alphas = alpha_of_x(np.array([2.0, 4.0, 8.0, 16.0]))
    out: dict = {"n": g.n, "labels": int(labeled.size), "alphas": len(alphas)}
    with mock.patch.dict(os.environ, {"OMP_NUM_THREADS": "1"}):
        results = {}
        for path in ("plain", "fused"):
            with mock.patch.object(shifted, "FUSED_MIN_ENTRIES", 1 if path == "fused" else 1 << 62):
                propagation_submatrix(g.S, labeled, 0.9, tol=1e-6, dtype="float32")     # warm: kernels, RCM
                (P, st), w, c = best_of(lambda: propagation_submatrix(g.S, labeled, 0.9, tol=1e-6, dtype="float32"), 2)
                out[f"one_alpha_{path}_s"], out[f"one_alpha_{path}_cpu_s"] = w, c
                out[f"one_alpha_{path}_iterations"] = st["iterations"]
                (Ps, st), w, c = best_of(lambda: propagation_submatrices(g.S, labeled, alphas, tol=1e-6,
                                                                        dtype="float32"), 2)
                out[f"multishift_{path}_s"], out[f"multishift_{path}_cpu_s"] = w, c
                out[f"multishift_{path}_iterations"] = st["iterations"]
                results[path] = (P, Ps)
        out.update(_shared_set(g, labeled, alphas))
    (P0, Ps0), (P1, Ps1) = results["plain"], results["fused"]
    out["one_alpha_max_rel_diff"] = float(np.abs(P0 - P1).max() / np.abs(P0).max())
    out["multishift_max_rel_diff"] = float(max(np.abs(a - b).max() / np.abs(a).max() for a, b in zip(Ps0, Ps1)))
    out["one_alpha_speedup"] = out["one_alpha_plain_s"] / out["one_alpha_fused_s"]
    out["multishift_speedup"] = out["multishift_plain_s"] / out["multishift_fused_s"]
    return out


def _shared_set(g, labeled, grid) -> dict:
    """A table sweep's three P_LL requests per labelled set (LGC's judgement at 0.9, AutoL's alpha, auto's
    grid) solved one by one, against one multi-shift solve of the union (``pll_alphas``), on the default
    path (in :func:`pll`'s one thread); and how far the shared solve's P_LL are from the separate ones."""
    from lgcexp.algorithms.autol import AutoL
    from lgcexp.algorithms.propagation import propagation_submatrices, propagation_submatrix

    a_autol = AutoL().alpha
    union = sorted(set(float(a) for a in grid) | {0.9, a_autol})

    def separate():
        P9, _ = propagation_submatrix(g.S, labeled, 0.9, tol=1e-6, dtype="float32")
        PA, _ = propagation_submatrix(g.S, labeled, a_autol, tol=1e-6, dtype="float32")
        Ps, _ = propagation_submatrices(g.S, labeled, grid, tol=1e-6, dtype="float32")
        return P9, PA, Ps

    (P9, PA, Ps), w_sep, c_sep = best_of(separate, 2)
    (Pu, _), w_sh, c_sh = best_of(lambda: propagation_submatrices(g.S, labeled, union, tol=1e-6, dtype="float32"), 2)
    from lgcexp.solvers import shifted
    from lgcexp.solvers.cg import numba_passes

    with mock.patch.object(shifted, "SHIFTED_KERNEL_MIN_ENTRIES", 1 << 62):  # the shifted updates by numpy
        (Pn, _), w_np, c_np = best_of(lambda: propagation_submatrices(g.S, labeled, union, tol=1e-6,
                                                                     dtype="float32"), 2)
    updates = {"shared_set_numpy_updates_s": w_np, "shared_set_numpy_updates_cpu_s": c_np,
               "shifted_kernel_used": numba_passes(len(union) * labeled.size * 32,
                                                   shifted.SHIFTED_KERNEL_MIN_ENTRIES) is not None,
               "shifted_kernel_speedup": w_np / w_sh,
               "shifted_kernel_bit_for_bit": all(np.array_equal(a, b) for a, b in zip(Pu, Pn))}
    by_alpha = dict(zip(union, Pu))
    grid_same = all(np.array_equal(P, by_alpha[float(a)]) for P, a in zip(Ps, grid))
    rel = max(float(np.abs(P - by_alpha[a]).max() / np.abs(P).max()) for P, a in ((P9, 0.9), (PA, a_autol)))
    return {"shared_rates": len(union), "separate_three_s": w_sep, "separate_three_cpu_s": c_sep,
            "shared_set_s": w_sh, "shared_set_cpu_s": c_sh, "shared_speedup": w_sep / w_sh,
            "shared_grid_bit_for_bit": bool(grid_same), "shared_one_alpha_max_rel_diff": rel, **updates}


def siis(quick: bool) -> dict:
    from threadpoolctl import threadpool_limits

    from lgcexp.algorithms.base import one_hot
    from lgcexp.algorithms.siis import SIISProblem, incidence_matrix
    from lgcexp.noise.uniform import UniformNoise
    from lgcexp.spectral import laplacian_eigenpairs

    out: dict = {}
    for dataset, m, rate in (("isolet", 300, 0.4),) + (() if quick else (("mnist", 30, 0.3),)):
        data, splits, g = _graph_and_labels(dataset)
        labeled = splits[0].labeled
        y_obs, _ = UniformNoise(rate).corrupt(data.y[labeled].astype(np.int64), int(data.y.max()) + 1, 0)
        eig, _ = laplacian_eigenpairs(g, m, cache=open_cache())
        prob = SIISProblem(U=np.asarray(eig.vectors)[:, :m], sigma=np.asarray(eig.values)[:m],
                           P=incidence_matrix(g.W), labeled=labeled, YL=one_hot(y_obs, int(data.y.max()) + 1),
                           lambda1=100.0, lambda2=10.0)
        res = {}
        with threadpool_limits(limits=1, user_api="blas"):
            prob.solve(fused=True, max_iter=2)                                   # compile (or load) the pass
            for path, fused in (("numpy", False), ("fused", True)):
                r, w, c = best_of(lambda: prob.solve(fused=fused), 2)
                res[path] = r
                out[f"{dataset}_{path}_s"], out[f"{dataset}_{path}_cpu_s"] = w, c
                out[f"{dataset}_{path}_iterations"] = r.iterations
        a, b = res["numpy"].F, res["fused"].F
        out[f"{dataset}_edges"] = int(prob.P.shape[0])
        out[f"{dataset}_speedup"] = out[f"{dataset}_numpy_s"] / out[f"{dataset}_fused_s"]
        out[f"{dataset}_max_rel_diff_F"] = float(np.abs(a - b).max() / np.abs(a).max())
        out[f"{dataset}_argmax_differs"] = int((a.argmax(1) != b.argmax(1)).sum())
    return out


def auto_search(quick: bool) -> dict:
    from lgcexp.algorithms.autod import alpha_of_x
    from lgcexp.algorithms.autol import LooModel, loo_matrix, optimize_weights
    from lgcexp.algorithms.propagation import propagation_submatrices
    from lgcexp.noise.uniform import UniformNoise

    data, splits, g = _graph_and_labels("isolet")
    labeled = splits[0].labeled
    c = int(data.y.max()) + 1
    y, _ = UniformNoise(0.4).corrupt(data.y[labeled].astype(np.int64), c, 0)
    xs = np.array([2.0, 4.0, 8.0, 16.0])
    Ps, _ = propagation_submatrices(g.S, labeled, alpha_of_x(xs), tol=1e-6, dtype="float32")
    As = [loo_matrix(P)[0] for P in Ps]
    steps, search = (2000, 500) if quick else (5000, 1000)

    def before():
        om, st = optimize_weights(LooModel(np.stack(As), y, c, loss="xent"), steps=search)
        best = int(np.argmin(st["losses_final"]))
        final, _ = optimize_weights(LooModel(As[best], y, c, loss="xent"), steps=steps)
        return best, final

    def now():
        models = [LooModel(A, y, c, loss="xent") for A in As]
        runs = [optimize_weights(m, steps=search, keep=True) for m in models]
        best = int(np.argmin([st["loss_final"] for _, st in runs]))
        final, _ = optimize_weights(models[best], steps=steps, resume=runs[best][1]["state"])
        return best, final

    out: dict = {"steps": steps, "search_steps": search}
    res = {}
    for rnd in range(2):  # the first round compiles; the second is what a sweep worker pays
        for name, fn in (("before", before), ("now", now)):
            res[name], w, cpu = best_of(fn, 1)
            if rnd:
                out[f"{name}_s"], out[f"{name}_cpu_s"] = w, cpu
    out["speedup"] = out["before_s"] / out["now_s"]
    out["x_before"], out["x_now"] = float(xs[res["before"][0]]), float(xs[res["now"][0]])
    out["final_weights_same_bits"] = bool(np.array_equal(res["before"][1], res["now"][1]))
    return out


def _table_jobs(experiment: str) -> list[list[str]]:
    """The override lists of an experiment's sweep (its ``hydra.sweeper.params``), expanded by Hydra's basic
    sweeper, in its order."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    params = OmegaConf.load(ROOT / "conf" / "experiment" / f"{experiment}.yaml").hydra.sweeper.params
    parsed = OverridesParser.create().parse_overrides([f"{k}={v}" for k, v in params.items()])
    (jobs,) = BasicSweeper.split_arguments(parsed, max_batch_size=None)
    return [list(job) for job in jobs]


def sweep_setup(quick: bool) -> dict:
    """Section 8: per-job composition, Hydra's loader against the memo; a finished sweep started again."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.utils import create_config_search_path
    from hydra.types import RunMode
    from omegaconf import OmegaConf

    import lgcexp.cli  # noqa: F401  (lgcexp's resolvers and sweeper, as in the CLI)
    from lgcexp.compose_memo import MemoConfigLoader

    def loader():
        return ConfigLoaderImpl(config_search_path=create_config_search_path(str(ROOT / "conf")))

    master = loader().load_configuration(config_name="config", overrides=["experiment=table_mnist"],
                                         run_mode=RunMode.MULTIRUN)
    jobs = _table_jobs("table_mnist")[: 60 if quick else None]
    out = {"jobs_composed": len(jobs)}
    configs = {}
    for tag, ld in (("hydra", loader()), ("memo", MemoConfigLoader(loader()))):
        t0, c0 = time.perf_counter(), time.process_time()
        configs[tag] = [OmegaConf.to_yaml(ld.load_sweep_config(master, job)) for job in jobs]
        out[f"compose_{tag}_ms_per_job"] = 1e3 * (time.perf_counter() - t0) / len(jobs)
        out[f"compose_{tag}_cpu_ms_per_job"] = 1e3 * (time.process_time() - c0) / len(jobs)
    out["compose_speedup"] = out["compose_hydra_ms_per_job"] / out["compose_memo_ms_per_job"]
    out["compose_configs_differ"] = sum(a != b for a, b in zip(configs["hydra"], configs["memo"]))
    n = 48
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "LGCEXP_OUTPUT_DIR": tmp, "LGCEXP_JOBS": "2", "OPENBLAS_NUM_THREADS": "1"}
        cmd = ["lgcexp", "-m", "dataset=digits", "algo=lgc", f"seed=range({n})"]
        out["sweep_first_run_s"] = _wall(cmd, env)
        for rnd in range(2):
            for memo in ("1", "0"):
                out[f"sweep_all_skipped_memo{memo}_run{rnd}_s"] = _wall(cmd, {**env, "LGCEXP_MEMO": memo})
    for memo in ("1", "0"):
        out[f"sweep_all_skipped_memo{memo}_s"] = min(out[f"sweep_all_skipped_memo{memo}_run{r}_s"] for r in range(2))
    out["sweep_jobs"] = n
    out["sweep_all_skipped_speedup"] = out["sweep_all_skipped_memo0_s"] / out["sweep_all_skipped_memo1_s"]
    return out


SECTIONS = ("startup", "compiled_step", "padded_widths", "lgc_solve", "cg_iteration", "pll", "siis", "auto_search",
            "sweep_setup")


def run(quick: bool = False, only: tuple[str, ...] = SECTIONS) -> dict:
    out = {"loadavg_start": os.getloadavg()[0]}
    fns = {"startup": lambda: startup(), "compiled_step": lambda: compiled_step(quick),
           "padded_widths": lambda: padded_widths(quick),
           "lgc_solve": lambda: lgc_solve(quick), "cg_iteration": lambda: cg_iteration(quick),
           "pll": lambda: pll(quick), "siis": lambda: siis(quick), "auto_search": lambda: auto_search(quick),
           "sweep_setup": lambda: sweep_setup(quick)}
    for name, fn in ((k, fns[k]) for k in SECTIONS if k in only):
        print(f"[speed] {name} ...", flush=True)
        for k, v in fn().items():
            out[f"{name}.{k}"] = v
    out["loadavg_end"] = os.getloadavg()[0]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", nargs="*", choices=SECTIONS, default=list(SECTIONS))
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args(argv)
    report = run(a.quick, tuple(a.only))
    print(json.dumps(report, indent=1, default=float))
    stem = ("speed_quick" if a.quick else "speed") + ("" if set(a.only) == set(SECTIONS) else "_" + "_".join(a.only))
    lines = ["# lgcexp start-up, compiled AutoL step and LGC solve", "", *figure_rows(report)]
    write_report(a.out, stem, report, "\n".join(lines) + "\n")
    return 0
