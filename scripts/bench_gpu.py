#!/usr/bin/env python
"""GPU against CPU in one run (issue 15): the MNIST kNN graph's search (faiss) and one AutoL fit (TensorFlow).
Not a test.

When this machine has no GPU that faiss or TensorFlow can use (the CPU builds, or no device), it writes
``{"gpu": "no GPU", ...}`` and measures nothing. Otherwise, all in the same process:

1. the exact 16-NN search of the 70,000 MNIST points (what ``graph=knn`` computes: faiss ``IndexFlatL2``),
   on the CPU and on all GPUs (``index_cpu_to_all_gpus``), and the neighbour lists compared;
2. ``graph=knn_approx index=ivf`` on MNIST with ``device=cpu`` and ``device=auto`` (the GPU), recall of each;
3. one ``AutoL.fit`` on the MNIST graph (100 labels, 20 % noise, seed 0, 5000 Adam steps) under
   ``tf.device('/CPU:0')`` and ``tf.device('/GPU:0')``: the optimisation seconds and the weights' agreement.

``run(quick) -> dict`` is what ``scripts/bench.py`` calls (section "gpu"); as a script it writes
``results/bench/gpu.json`` and ``gpu.md``. The machine this was written on has no GPU: the GPU branch has
not been run (the selection logic is tested with a monkeypatched faiss in tests/test_scale.py).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = Path(__file__).resolve().parents[1]


def available() -> dict:
    """What GPUs faiss and TensorFlow see (importing both)."""
    from lgcexp import devices
    from lgcexp.graph import import_faiss

    faiss = import_faiss()
    out = {"faiss": devices.faiss_device(faiss), "tensorflow": "cpu"}
    try:
        import tensorflow as tf

        if tf.config.list_physical_devices("GPU"):
            out["tensorflow"] = "GPU:0"
    except ImportError:
        out["tensorflow"] = None
    return out


def timed(fn, *a, **kw):
    t0 = time.perf_counter()
    out = fn(*a, **kw)
    return out, time.perf_counter() - t0


def run(quick: bool = False) -> dict:
    from lgcexp import devices
    from lgcexp.data import load_dataset
    from lgcexp.graph import Graph, import_faiss
    from lgcexp.graph.knn_approx import KnnApproxGraph
    from lgcexp.labels import sample_and_corrupt

    dev = available()
    report: dict = {"devices": dev, "load_before": round(os.getloadavg()[0], 2)}
    if dev["faiss"] == "cpu" and dev["tensorflow"] != "GPU:0":
        report["gpu"] = "no GPU"
        return report
    name = "digits" if quick else "mnist"
    data = load_dataset(name, data_dir=os.environ.get("LGCEXP_DATA_DIR"))
    X = np.ascontiguousarray(data.X, dtype=np.float32)
    faiss = import_faiss()
    if dev["faiss"] != "cpu":
        def search(gpu: bool):
            index = faiss.IndexFlatL2(X.shape[1])
            if gpu:
                index = faiss.index_cpu_to_all_gpus(index)
            index.add(X)
            return index.search(X, 16)

        (cd, ci), report["exact_knn_cpu_s"] = timed(search, False)
        (gd, gi), report["exact_knn_gpu_s"] = timed(search, True)
        report["exact_knn_speedup"] = report["exact_knn_cpu_s"] / report["exact_knn_gpu_s"]
        report["exact_knn_same_lists"] = float(np.mean(np.sort(ci, 1) == np.sort(gi, 1)))
        for tag, device in (("cpu", "cpu"), ("gpu", "auto")):
            devices.configure(device)
            g, report[f"ivf_graph_{tag}_s"] = timed(lambda: KnnApproxGraph(k=15, index="ivf").build(X)[0])
            report[f"ivf_graph_{tag}_recall"] = g.info["recall_at_k"]
            report[f"ivf_graph_{tag}_device"] = g.info["device"]
        devices.configure("auto")
        report["ivf_graph_speedup"] = report["ivf_graph_cpu_s"] / report["ivf_graph_gpu_s"]
    if dev["tensorflow"] == "GPU:0":
        import tensorflow as tf

        from lgcexp.algorithms.autol import AutoL
        from lgcexp.graph import build_graph

        graph, _ = build_graph(X, 15, "mean")
        split = sample_and_corrupt(data.y, 100, 0.2, 0)
        weights = {}
        for tag, where in (("cpu", "/CPU:0"), ("gpu", "/GPU:0")):
            with tf.device(where):
                a, wall = timed(lambda: AutoL().fit(graph, split.labeled, split.y_observed, data.n_classes))
            report[f"autol_fit_{tag}_s"] = wall
            report[f"autol_adam_{tag}_s"] = a.info_["opt_seconds"]
            weights[tag] = np.asarray(a.label_info_["omega"], dtype=float)
        report["autol_adam_speedup"] = report["autol_adam_cpu_s"] / report["autol_adam_gpu_s"]
        report["autol_omega_max_abs_diff"] = float(np.max(np.abs(weights["cpu"] - weights["gpu"])))
    report["load_after"] = round(os.getloadavg()[0], 2)
    return report


def to_markdown(r: dict) -> str:
    lines = ["# GPU vs CPU (scripts/bench_gpu.py)", ""]
    if r.get("gpu") == "no GPU":
        lines.append(f"no GPU: faiss {r['devices']['faiss']}, TensorFlow {r['devices']['tensorflow']}; nothing measured.")
        return "\n".join(lines) + "\n"
    lines += ["| figure | value |", "|---|---|"]
    lines += [f"| {k} | {v:.4g} |" if isinstance(v, float) else f"| {k} | {v} |" for k, v in r.items()]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "bench")
    a = ap.parse_args()
    r = run(a.quick)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "gpu.json").write_text(json.dumps(r, indent=2, default=float))
    (a.out / "gpu.md").write_text(to_markdown(r))
    print(to_markdown(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
