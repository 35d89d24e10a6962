#!/usr/bin/env python
"""Speed figures for lgcexp, written to results/bench/ (JSON + Markdown). Not a test.

Every figure is quoted as a ratio against a baseline measured in the same run:
- graph:  kNN graph on MNIST (faiss exact search) and LGC on MNIST by conjugate gradient vs the authors'
          1000-step fixed-point iteration, and vs scikit-learn's ``LabelSpreading(kernel="knn")``.
- autol / autod / siis: sections from ``scripts/bench_<name>.py`` (each exposes ``run(quick) -> dict``).

    python scripts/bench.py                 # all sections
    python scripts/bench.py --only graph    # one section
    python scripts/bench.py --quick         # smaller problems (digits / ISOLET only)
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SECTIONS = ("graph", "autol", "autod", "siis")


def timed(fn, *args, **kw):
    t0 = time.perf_counter()
    out = fn(*args, **kw)
    return out, time.perf_counter() - t0


def bench_graph(quick: bool) -> dict:
    """kNN graph + LGC on MNIST (digits with --quick), against the power method and scikit-learn."""
    from sklearn.semi_supervised import LabelSpreading

    from lgcexp.algorithms.lgc import lgc_propagate
    from lgcexp.data import load_dataset
    from lgcexp.graph import Graph, build_affinity
    from lgcexp.labels import sample_and_corrupt

    name, k, n_lab = ("digits", 10, 100) if quick else ("mnist", 15, 100)
    data = load_dataset(name, data_dir=os.environ.get("LGCEXP_DATA_DIR"))
    (W, sigma), t_graph = timed(build_affinity, data.X, k, "mean")
    g = Graph(W=W, sigma=sigma, key="bench")
    split = sample_and_corrupt(data.y, n_lab, 0.0, seed=0)
    Y = np.zeros((data.n, data.n_classes))
    Y[split.labeled, split.y_observed] = 1
    unl = split.unlabeled_mask(data.n)
    (F, iters), t_cg = timed(lgc_propagate, g.S, Y, 0.9, solver="cg", tol=1e-10)
    (Fp, _), t_pw = timed(lgc_propagate, g.S, Y, 0.9, solver="power", t=1000)
    acc = float(np.mean(F.argmax(1)[unl] == data.y[unl]))
    agree = float(np.mean(F.argmax(1) == Fp.argmax(1)))
    y_sk = np.full(data.n, -1)
    y_sk[split.labeled] = split.y_observed
    ls = LabelSpreading(kernel="knn", n_neighbors=k, alpha=0.9)
    _, t_sk = timed(ls.fit, data.X.astype(np.float64), y_sk)
    acc_sk = float(np.mean(ls.transduction_[unl] == data.y[unl]))
    return {
        "dataset": name, "n": data.n, "k": k, "sigma": sigma, "edges": g.n_edges,
        "knn_graph_s": t_graph,
        "lgc_cg_s": t_cg, "lgc_cg_iterations": iters, "lgc_power1000_s": t_pw,
        "speedup_cg_vs_power": t_pw / t_cg, "cg_power_same_argmax": agree,
        "lgc_acc_unlabeled": acc,
        "ours_graph_plus_lgc_s": t_graph + t_cg,
        "sklearn_labelspreading_knn_s": t_sk, "sklearn_acc_unlabeled": acc_sk,
        "speedup_ours_vs_sklearn": t_sk / (t_graph + t_cg),
        "note": "sklearn LabelSpreading(kernel='knn', alpha=0.9, max_iter=30 default) builds its own unweighted kNN graph",
    }


def bench_external(name: str, quick: bool) -> dict:
    path = HERE / f"bench_{name}.py"
    if not path.exists():
        return {"skipped": f"{path.name} not found"}
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod.run(quick)


def to_markdown(report: dict) -> str:
    lines = ["# lgcexp benchmark", "", f"{report['date']} — {report['machine']}", ""]
    for sec, figs in report["sections"].items():
        lines += [f"## {sec}", "", "| figure | value |", "|---|---|"]
        for k, v in figs.items():
            lines.append(f"| {k} | {v:.4g} |" if isinstance(v, float) else f"| {k} | {v} |")
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", choices=SECTIONS, default=list(SECTIONS))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=str(ROOT / "results" / "bench"))
    a = ap.parse_args()
    report = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
              "quick": a.quick, "sections": {}}
    for sec in a.only:
        print(f"[bench] {sec} ...", flush=True)
        report["sections"][sec] = bench_graph(a.quick) if sec == "graph" else bench_external(sec, a.quick)
        print(json.dumps(report["sections"][sec], indent=1, default=float), flush=True)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "bench_quick" if a.quick else "bench"
    (out / f"{stem}.json").write_text(json.dumps(report, indent=2, default=float))
    (out / f"{stem}.md").write_text(to_markdown(report))
    print(f"[bench] wrote {out / stem}.json and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
