#!/usr/bin/env python
"""Speed figures for the start-up, the compiled AutoL step and the LGC solve (issue #15). Not a test.

1. Start-up: ``import lgcexp.cli``, ``import tensorflow`` and ``import sklearn.model_selection`` in fresh
   interpreters, and one whole ``lgcexp dataset=isolet algo=lgc`` run with a warm cache (graph and P_LL
   cached; the second of two runs), wall seconds.
2. The compiled AutoL step: in one fresh process, Adam on an ISOLET-sized leave-one-out problem (l = 1040,
   26 classes, 1000 steps, float32, XLA): the first fit (trace + XLA compilation), a second fit of the same
   shapes (reuses both), a fit of other shapes (a new compilation), and the same-shape fit again after
   emptying the cache of compiled steps (what every fit paid before: its own trace and compilation). The
   weights of the reused and the rebuilt fit are compared (they must be identical).
3. The LGC solve on MNIST (ISOLET with ``--quick``), seed 0, labels without noise, the graph from the
   cache: conjugate gradient in the graph's own numbering to 1e-10 (before), in reverse Cuthill-McKee order
   to 1e-10, and in RCM order stopped by the argmax certificate (tol 1e-10 as the fallback); one sparse
   product with 10 columns in float64 and float32, with and without RCM. Same run, so ratios compare.

Wall seconds (``_s``) and process CPU seconds (``_cpu_s``); the load average is recorded.

    python scripts/bench_speed.py [--quick]     # writes results/bench/speed.json and speed.md
    python scripts/bench.py --only speed        # the same as a section of bench.json

``run(quick) -> dict`` is what ``scripts/bench.py`` calls (section "speed").
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

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = Path(__file__).resolve().parents[1]


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


def _graph_and_labels(dataset: str):
    from hydra import compose, initialize_config_dir

    from lgcexp.cache import Cache
    from lgcexp.config import plan
    from lgcexp.labels import sample_and_corrupt
    from lgcexp.pipeline import load

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"dataset={dataset}", "algo=lgc", "seed=0"])
    p = plan(cfg)
    paths = p.config.get("paths") or {}
    data = load(p, paths)
    split = sample_and_corrupt(data.y, p.n_labels, seed=0, noise=p.noise)
    g, _ = p.graph.build(data.X, cache=Cache(paths.get("cache_dir")), data_fingerprint=data.fingerprint())
    return data, split, g


def _timed(fn, repeat: int = 3):
    """(result, best wall seconds, CPU seconds of that repetition) over ``repeat`` calls."""
    best = None
    for _ in range(repeat):
        c0, t0 = time.process_time(), time.perf_counter()
        out = fn()
        w, c = time.perf_counter() - t0, time.process_time() - c0
        if best is None or w < best[1]:
            best = (out, w, c)
    return best


def lgc_solve(quick: bool) -> dict:
    from lgcexp.linalg import block_cg, rcm_reordered, shifted_operator, shifted_solve

    name = "isolet" if quick else "mnist"
    data, split, g = _graph_and_labels(name)
    Y = np.zeros((data.n, data.n_classes))
    Y[split.labeled, split.y_observed] = 1
    c0, t0 = time.process_time(), time.perf_counter()
    rcm_reordered(g.S)                                                  # once per graph (cached)
    t_rcm, c_rcm = time.perf_counter() - t0, time.process_time() - c0
    (F0, it0, _), t_plain, c_plain = _timed(lambda: block_cg(shifted_operator(g.S, 0.9), Y, tol=1e-10))
    (F1, it1, _), t_rcm_tol, c_rcm_tol = _timed(lambda: shifted_solve(g.S, Y, 0.9, tol=1e-10))
    (F2, it2, _), t_cert, c_cert = _timed(lambda: shifted_solve(g.S, Y, 0.9, tol=1e-10, degree=g.degree))
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
        _, t_a, _ = _timed(lambda: Sd @ Xd, 10)
        _, t_b, _ = _timed(lambda: Sp @ Xp, 10)
        tag = np.dtype(dt).name
        out[f"spmm_10cols_{tag}_plain_ms"] = 1e3 * t_a
        out[f"spmm_10cols_{tag}_rcm_ms"] = 1e3 * t_b
        out[f"speedup_spmm_{tag}_rcm"] = t_a / t_b
    return out


def run(quick: bool = False) -> dict:
    out = {"loadavg_start": os.getloadavg()[0]}
    for name, fn in (("startup", lambda: startup()), ("compiled_step", lambda: compiled_step(quick)),
                     ("lgc_solve", lambda: lgc_solve(quick))):
        print(f"[speed] {name} ...", flush=True)
        for k, v in fn().items():
            out[f"{name}.{k}"] = v
    out["loadavg_end"] = os.getloadavg()[0]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=str(ROOT / "results" / "bench"))
    a = ap.parse_args()
    report = run(a.quick)
    print(json.dumps(report, indent=1, default=float))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "speed_quick" if a.quick else "speed"
    (out / f"{stem}.json").write_text(json.dumps(report, indent=2, default=float))
    lines = ["# lgcexp start-up, compiled AutoL step and LGC solve", "", "| figure | value |", "|---|---|"]
    lines += [f"| {k} | {v:.4g} |" if isinstance(v, float) else f"| {k} | {v} |" for k, v in report.items()]
    (out / f"{stem}.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
