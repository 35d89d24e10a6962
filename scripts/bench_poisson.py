#!/usr/bin/env python
"""Poisson learning figures (issue #23). Not a test. All parts use one graph: MNIST (70,000 raw pixels; no
learned features), exact 10-NN (faiss), lgcexp's ``self_tuning`` kernel (local scale: 7th neighbour), union
symmetrisation (``graph=knn graph.k=10 graph.kernel=self_tuning``), and GraphLearning (when installed) is given
the same weight matrix and the same labelled sets (``labels.per_class``, seeds 0..trials-1).

    python scripts/bench_poisson.py protocol --trials 10      # accuracy at 1/3/5 labels per class, vs GraphLearning
    python scripts/bench_poisson.py timing                    # one Poisson solve vs GraphLearning's, same run
    python scripts/bench_poisson.py noise --trials 20         # poissonL vs Poisson vs AutoL, 5 per class, 20/40 % noise

Each part writes results/bench/poisson_<part>.json (per-trial figures) and prints a summary.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "bench"


def mnist_graph():
    from lgcexp.cache import Cache
    from lgcexp.graph.base import fingerprint
    from lgcexp.graph.knn import KnnGraph

    data_dir = os.environ.get("LGCEXP_DATA_DIR", str(ROOT / "data"))
    with np.load(Path(data_dir) / "mnist.npz") as f:
        X, y = f["X"], f["y"].astype(np.int64)
    X = X.astype(np.float32)
    t = time.perf_counter()
    g, hit = KnnGraph(k=10, kernel="self_tuning").build(X, cache=Cache(os.environ.get("LGCEXP_CACHE_DIR")),
                                                         data_fingerprint=fingerprint(X))
    print(f"graph: n={g.n} edges={g.n_edges} ({'cached' if hit else 'built'} in {time.perf_counter() - t:.1f}s)")
    return g, y


def acc_unlabeled(pred, y, labeled):
    mask = np.ones(y.size, dtype=bool)
    mask[labeled] = False
    return float(np.mean(pred[mask] == y[mask]))


def gl_module():
    try:
        import graphlearning as gl
        return gl
    except ImportError:
        return None


def protocol(args):
    from lgcexp.algorithms import make_algorithm
    from lgcexp.labels import sample_per_class

    g, y = mnist_graph()
    gl = gl_module()
    rows = []
    for k in args.ks:
        for seed in range(args.trials):
            lab = sample_per_class(y, k, seed)
            row = {"per_class": k, "seed": seed}
            t = time.perf_counter()
            ours = make_algorithm("poisson").fit(g, lab, y[lab], 10)
            row["poisson_s"] = time.perf_counter() - t
            row["poisson"] = acc_unlabeled(ours.predict(), y, lab)
            row["T"] = ours.info_["solver_iterations"]
            if args.priors:
                from lgcexp.priors import volume_projection
                row["poisson_priors"] = acc_unlabeled(volume_projection(ours.scores_, np.full(10, 0.1))[0].argmax(1),
                                                      y, lab)
            if seed < args.mbo_trials:
                t = time.perf_counter()
                mbo = make_algorithm("poissonMBO").fit(g, lab, y[lab], 10)
                row["poissonMBO_s"] = time.perf_counter() - t
                row["poissonMBO"] = acc_unlabeled(mbo.predict(), y, lab)
            for name in args.baselines:
                t = time.perf_counter()
                row[name] = acc_unlabeled(make_algorithm(name).fit(g, lab, y[lab], 10).predict(), y, lab)
                row[name + "_s"] = time.perf_counter() - t
            if gl is not None:
                t = time.perf_counter()
                m = gl.ssl.poisson(g.W, solver="gradient_descent")
                u = m.fit(lab, y[lab])
                row["gl_poisson"] = acc_unlabeled(u.argmax(1), y, lab)
                row["gl_same_pred"] = float(np.mean(u.argmax(1) == ours.predict()))
                row["gl_poisson_s"] = time.perf_counter() - t
                if seed < args.mbo_trials:
                    mm = gl.ssl.poisson_mbo(g.W, class_priors=np.full(10, 0.1), solver="gradient_descent")
                    mm.fit(lab, y[lab])
                    p = mm.predict()
                    row["gl_poissonMBO"] = acc_unlabeled(p, y, lab)
                    row["gl_mbo_same_pred"] = float(np.mean(p == mbo.predict()))
            rows.append(row)
            print(json.dumps({k2: (round(v, 4) if isinstance(v, float) else v) for k2, v in row.items()}), flush=True)
    summary = {}
    for k in args.ks:
        sel = [r for r in rows if r["per_class"] == k]
        summary[k] = {key: (round(100 * float(np.mean([r[key] for r in sel if key in r])), 2),
                            round(100 * float(np.std([r[key] for r in sel if key in r])), 2),
                            sum(key in r for r in sel))
                      for key in ("poisson", "gl_poisson", "poisson_priors", "poissonMBO", "gl_poissonMBO", "gfhf",
                                  "wnll", "lgc", "gl_same_pred", "gl_mbo_same_pred") if any(key in r for r in sel)}
    return {"rows": rows, "summary": summary}


def timing(args):
    from lgcexp.algorithms.poisson import Poisson
    from lgcexp.labels import sample_per_class

    g, y = mnist_graph()
    gl = gl_module()
    lab = sample_per_class(y, 5, 0)
    res = {}
    for rep in range(args.repeats):
        for name, fn in [
            ("ours_iterate", lambda: Poisson().fit(g, lab, y[lab], 10).scores_),
            ("ours_cg_1e-3", lambda: Poisson(solver="cg", tol=1e-3).fit(g, lab, y[lab], 10).scores_),
            ("gl_gradient_descent", lambda: gl.ssl.poisson(g.W, solver="gradient_descent").fit(lab, y[lab])),
            ("gl_default_cg", lambda: gl.ssl.poisson(g.W).fit(lab, y[lab])),
        ]:
            if name.startswith("gl") and gl is None:
                continue
            t = time.perf_counter()
            U = fn()
            res.setdefault(name, []).append(time.perf_counter() - t)
            res.setdefault(name + "_acc", acc_unlabeled(U.argmax(1), y, lab))
    best = {k: min(v) for k, v in res.items() if isinstance(v, list)}
    ratios = {}
    if gl is not None:
        ratios = {"ours_iterate / gl_gradient_descent": best["ours_iterate"] / best["gl_gradient_descent"],
                  "ours_iterate / gl_default_cg": best["ours_iterate"] / best["gl_default_cg"],
                  "ours_cg_1e-3 / gl_default_cg": best["ours_cg_1e-3"] / best["gl_default_cg"]}
    return {"seconds": res, "best_s": best, "ratios": ratios,
            "accuracy": {k: v for k, v in res.items() if k.endswith("_acc")}}


def noise(args):
    from lgcexp.algorithms import make_algorithm
    from lgcexp.cache import Cache
    from lgcexp.labels import sample_per_class
    from lgcexp.noise.uniform import UniformNoise

    g, y = mnist_graph()
    cache = Cache(os.environ.get("LGCEXP_CACHE_DIR"))
    rows = []
    path = OUT / "poisson_noise_rows.jsonl"
    for seed in range(args.trials):
        lab = sample_per_class(y, args.per_class, seed)
        for rate in args.rates:
            obs, flipped = UniformNoise(rate).corrupt(y[lab], 10, seed)
            row = {"seed": seed, "rate": rate, "n_flipped": int(flipped.sum())}
            for name in args.methods:
                t = time.perf_counter()
                a = make_algorithm(name).fit(g, lab, obs, 10, cache=cache)
                row[name] = acc_unlabeled(a.predict(), y, lab)
                row[name + "_s"] = round(time.perf_counter() - t, 2)
                if a.dropped_ is not None:
                    row[name + "_dropped_flipped"] = int((a.dropped_ & flipped).sum())
                    row[name + "_dropped"] = int(a.dropped_.sum())
            rows.append(row)
            with open(path, "a") as f:
                f.write(json.dumps(row) + "\n")
            print(json.dumps(row), flush=True)
    summary = {}
    for rate in args.rates:
        sel = [r for r in rows if r["rate"] == rate]
        summary[str(rate)] = {m: (round(100 * float(np.mean([r[m] for r in sel])), 2),
                                  round(100 * float(np.std([r[m] for r in sel])), 2)) for m in args.methods}
        if "poissonL" in args.methods:
            for other in ("poisson", "autoL"):
                if other in args.methods:
                    d = np.array([r["poissonL"] - r[other] for r in sel])
                    summary[str(rate)][f"poissonL-{other}"] = (round(100 * float(d.mean()), 2),
                                                               round(100 * float(d.std(ddof=1) / np.sqrt(d.size)), 2)
                                                               if d.size > 1 else None, int((d > 0).sum()), int(d.size))
    return {"rows": rows, "summary": summary, "per_class": args.per_class}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("part", choices=("protocol", "timing", "noise"))
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--priors", action="store_true", help="protocol: also Poisson with uniform class priors")
    ap.add_argument("--tag", default="", help="suffix of the output file name")
    ap.add_argument("--ks", type=int, nargs="+", default=[1, 3, 5], help="protocol: labels per class")
    ap.add_argument("--mbo-trials", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--per-class", type=int, default=5)
    ap.add_argument("--rates", type=float, nargs="+", default=[0.2, 0.4])
    ap.add_argument("--baselines", nargs="*", default=["wnll", "lgc"], help="protocol: other methods to run")
    ap.add_argument("--methods", nargs="+", default=["poisson", "poissonL", "autoL"])
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    res = {"protocol": protocol, "timing": timing, "noise": noise}[args.part](args)
    res["wall_s"] = round(time.perf_counter() - t, 1)
    res["loadavg"] = os.getloadavg()
    res["argv"] = vars(args)
    (OUT / f"poisson_{args.part}{args.tag}.json").write_text(json.dumps(res, indent=1, default=float))
    print(json.dumps({k: v for k, v in res.items() if k != "rows"}, indent=1, default=float))


if __name__ == "__main__":
    main()
