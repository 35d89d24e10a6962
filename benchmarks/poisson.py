"""Poisson learning figures (issue #23). Not a test. Every part uses one graph: exact 10-NN (faiss), lgcexp's
``self_tuning`` kernel (local scale: 7th neighbour), union symmetrisation (``graph=knn graph.k=10
graph.kernel=self_tuning``), built on ``--dataset`` (mnist | isolet) and ``--features`` (raw: the pixels /
spectral features as given; vae: the posterior means of lgcexp's ``features=vae``, ``--epochs`` passes, cached
in $LGCEXP_CACHE_DIR exactly as the CLI caches them). GraphLearning (when installed) is given the same weight
matrix and the same labelled sets (``labels.per_class``, seeds 0..trials-1).

    python -m benchmarks poisson protocol --trials 10      # accuracy at 1/3/5 labels per class, vs GraphLearning
    python -m benchmarks poisson timing                    # one Poisson solve vs GraphLearning's, same run
    python -m benchmarks poisson noise --trials 20         # poissonL vs Poisson vs AutoL, 5 per class, 20/40 % noise
    python -m benchmarks poisson features --features vae --epochs 100   # 10-NN accuracy of the representation
    python -m benchmarks poisson summary --tag _x          # the tables of a (possibly partial) noise run's rows
    python -m benchmarks poisson mbo --features vae --epochs 100 --mbo-priors true --repeats 2   # MBO steps, old vs new

Each part writes results/bench/poisson_<part><tag>.json (per-trial figures) and prints a summary; ``protocol``
and ``noise`` also append every trial to results/bench/poisson_<part><tag>_rows.jsonl as it finishes.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from benchmarks.common import OUT, ROOT, open_cache


def mnist_graph():
    """The raw-pixel MNIST graph of the first measurements (keyed by the pixels' fingerprint)."""
    from lgcexp.graph.base import fingerprint
    from lgcexp.graph.knn import KnnGraph

    data_dir = os.environ.get("LGCEXP_DATA_DIR", str(ROOT / "data"))
    with np.load(Path(data_dir) / "mnist.npz") as f:
        X, y = f["X"], f["y"].astype(np.int64)
    X = X.astype(np.float32)
    t = time.perf_counter()
    g, hit = KnnGraph(k=10, kernel="self_tuning").build(X, cache=open_cache(),
                                                         data_fingerprint=fingerprint(X))
    print(f"graph: n={g.n} edges={g.n_edges} ({'cached' if hit else 'built'} in {time.perf_counter() - t:.1f}s)")
    return g, y, X, X


def representation(args):
    """(data set, features, their cache key or None): ``--dataset`` through lgcexp's loader, ``--features``
    through its features stage (the CLI's cache entry: ``dataset=<d> features=vae features.epochs=<e>``)."""
    from lgcexp.data import load_dataset
    from lgcexp.features import make_features

    data = load_dataset(args.dataset, data_dir=os.environ.get("LGCEXP_DATA_DIR", str(ROOT / "data")))
    if args.features == "raw":
        return data, data.X, None
    t = time.perf_counter()
    params = {"epochs": args.epochs} if args.features == "vae" else {}
    res = make_features(args.features, **params).transform(data.X, data_fingerprint=data.fingerprint(),
                                                           cache=open_cache(),
                                                           progress=True)
    print(f"features={args.features}: {res.X.shape} ({'cached' if res.cache_hit else 'computed'} in "
          f"{time.perf_counter() - t:.1f}s) {res.info}")
    return data, res.X, res.key


def setting_graph(args):
    """(graph, true labels, the data's own features, the graph's features) of ``--dataset``/``--features``; raw
    MNIST: :func:`mnist_graph`."""
    if args.dataset == "mnist" and args.features == "raw":
        return mnist_graph()
    from lgcexp.graph.knn import KnnGraph

    data, Z, key = representation(args)
    t = time.perf_counter()
    g, hit = KnnGraph(k=10, kernel="self_tuning").build(Z, cache=open_cache(),
                                                         data_fingerprint=key or data.fingerprint())
    print(f"graph: n={g.n} edges={g.n_edges} ({'cached' if hit else 'built'} in {time.perf_counter() - t:.1f}s)")
    return g, np.asarray(data.y, dtype=np.int64), data.X, Z


def gl_own_graph(gl, Z):
    """GraphLearning's own MNIST weight matrix on the features Z: its ``knn`` kernel ``exp(-4 d^2 / d_k^2)``
    (k = 10 neighbours and the point itself), ``(W + W^T) / 2``, fed faiss's exact neighbours."""
    from lgcexp.graph.search import faiss_exact_search

    d2, idx = faiss_exact_search(Z, 10)
    n = Z.shape[0]
    ind = np.hstack([np.arange(n)[:, None], idx])
    dist = np.hstack([np.zeros((n, 1)), np.sqrt(np.maximum(d2, 0.0))])
    return gl.weightmatrix.knn(None, 10, knn_data=(ind, dist))


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

    g, y, _, Z = setting_graph(args)
    gl = gl_module()
    W_gl = gl_own_graph(gl, Z) if args.gl_own_graph and gl is not None else None
    # Poisson-MBO's class priors: uniform (the method's default) or the data's true class fractions (what
    # GraphLearning's published MNIST experiments give it)
    mbo_priors = "uniform" if args.mbo_priors == "uniform" else (np.bincount(y) / y.size).tolist()
    rows = []
    path = OUT / f"poisson_protocol{args.tag}_rows.jsonl"
    for k in args.ks:
        for seed in range(args.first_seed, args.trials):
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
                mbo = make_algorithm("poissonMBO", {"priors": mbo_priors}).fit(g, lab, y[lab], 10)
                row["poissonMBO_s"] = time.perf_counter() - t
                row["poissonMBO"] = acc_unlabeled(mbo.predict(), y, lab)
            for name in args.baselines:
                t = time.perf_counter()
                row[name] = acc_unlabeled(make_algorithm(name).fit(g, lab, y[lab], 10).predict(), y, lab)
                row[name + "_s"] = time.perf_counter() - t
            if gl is not None and seed < (args.trials if args.gl_trials is None else args.gl_trials):
                t = time.perf_counter()
                m = gl.ssl.poisson(g.W, solver="gradient_descent")
                u = m.fit(lab, y[lab])
                row["gl_poisson"] = acc_unlabeled(u.argmax(1), y, lab)
                row["gl_same_pred"] = float(np.mean(u.argmax(1) == ours.predict()))
                row["gl_poisson_s"] = time.perf_counter() - t
                if W_gl is not None:
                    u = gl.ssl.poisson(W_gl, solver="gradient_descent").fit(lab, y[lab])
                    row["gl_own_graph_poisson"] = acc_unlabeled(u.argmax(1), y, lab)
                if seed < args.mbo_trials and seed < args.gl_mbo_trials:
                    mm = gl.ssl.poisson_mbo(g.W, class_priors=np.full(10, 0.1) if mbo_priors == "uniform"
                                            else np.asarray(mbo_priors), solver="gradient_descent")
                    mm.fit(lab, y[lab])
                    p = mm.predict()
                    row["gl_poissonMBO"] = acc_unlabeled(p, y, lab)
                    row["gl_mbo_same_pred"] = float(np.mean(p == mbo.predict()))
            rows.append(row)
            with open(path, "a") as f:
                f.write(json.dumps(row) + "\n")
            print(json.dumps({k2: (round(v, 4) if isinstance(v, float) else v) for k2, v in row.items()}), flush=True)
    summary = {}
    for k in args.ks:
        sel = [r for r in rows if r["per_class"] == k]
        summary[k] = {key: (round(100 * float(np.mean([r[key] for r in sel if key in r])), 2),
                            round(100 * float(np.std([r[key] for r in sel if key in r])), 2),
                            sum(key in r for r in sel))
                      for key in ("poisson", "gl_poisson", "poisson_priors", "poissonMBO", "gl_poissonMBO", "gfhf",
                                  "wnll", "lgc", "gl_same_pred", "gl_mbo_same_pred", "gl_own_graph_poisson")
                      if any(key in r for r in sel)}
    return {"rows": rows, "summary": summary}


def timing(args):
    from lgcexp.algorithms.poisson import Poisson
    from lgcexp.labels import sample_per_class

    g, y, _, _ = setting_graph(args)
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


def mbo_plain_steps(g, U0, B, b, n_classes, Ns=40, mu=1.0, T=20):
    """Poisson-MBO's steps after the Poisson solve as they were first written (the dense-row update over all
    rows, every projection sorting all rows); returns (decisions, heat seconds, projection seconds)."""
    import scipy.sparse as sp

    from lgcexp.algorithms.base import one_hot
    from lgcexp.priors import volume_projection

    d = g.degree
    dt = 1.0 / d.max()
    src = (mu * dt) * B
    keep = (1.0 - dt * d)[:, None]
    Wdt = sp.csr_matrix(g.W * dt)
    labels, weights, t_heat, t_proj = U0.argmax(axis=1), None, 0.0, 0.0
    for _ in range(T):
        t = time.perf_counter()
        U = one_hot(labels, n_classes)
        for _ in range(Ns):
            U = keep * U + Wdt @ U + src
        t_heat += time.perf_counter() - t
        t = time.perf_counter()
        F, weights, _ = volume_projection(U, b, weights=weights, sorted_share=1.0)
        labels = F.argmax(axis=1)
        t_proj += time.perf_counter() - t
    return labels, t_heat, t_proj


def mbo_fast_steps(g, U0, B, b, n_classes, Ns=40, mu=1.0, T=20):
    """The same steps as :class:`lgcexp.algorithms.poisson_mbo.PoissonMBO` takes them now (renumbered rows,
    one product a heat step, the projection sorting only the rows near the cuts); same return as
    :func:`mbo_plain_steps` (the set-up, numbering included, counted as heat)."""
    from lgcexp.algorithms.base import one_hot
    from lgcexp.algorithms.poisson_mbo import HeatSteps
    from lgcexp.priors import volume_projection

    t = time.perf_counter()
    d = g.degree
    dt = 1.0 / d.max()
    heat = HeatSteps(g.W, 1.0 - dt * d, dt, (mu * dt) * B)
    labels, weights, t_heat, t_proj = heat.to_new(U0.argmax(axis=1)), None, time.perf_counter() - t, 0.0
    for _ in range(T):
        t = time.perf_counter()
        U = heat.run(one_hot(labels, n_classes), Ns)
        t_heat += time.perf_counter() - t
        t = time.perf_counter()
        F, weights, _ = volume_projection(U, b, weights=weights)
        labels = F.argmax(axis=1)
        t_proj += time.perf_counter() - t
    return heat.to_old(labels), t_heat, t_proj


def mbo(args):
    """Poisson-MBO's steps after the Poisson solve, first version vs now, on the same graph, labelled sets
    (seed 0 at each ``--ks``) and Poisson solution: seconds (best of ``--repeats``) and whether every
    prediction is identical; the whole fit (``make_algorithm('poissonMBO')``) is checked against them too."""
    from lgcexp.algorithms import make_algorithm
    from lgcexp.algorithms.base import one_hot
    from lgcexp.algorithms.poisson import Poisson, poisson_sources
    from lgcexp.labels import sample_per_class

    g, y, _, _ = setting_graph(args)
    c = int(y.max()) + 1
    priors = "uniform" if args.mbo_priors == "uniform" else (np.bincount(y) / y.size).tolist()
    b = np.full(c, 1.0 / c) if priors == "uniform" else np.asarray(priors)
    rows = []
    for k in args.ks:
        lab = sample_per_class(y, k, 0)
        B = poisson_sources(g.n, lab, one_hot(y[lab], c))
        t = time.perf_counter()
        U0, _ = Poisson().solve(g.W, B, lab)
        row = {"per_class": k, "seed": 0, "poisson_solve_s": time.perf_counter() - t}
        preds = {}
        for name, fn in [("plain", mbo_plain_steps), ("fast", mbo_fast_steps)]:
            for _ in range(args.repeats):
                p, th, tp = fn(g, U0, B, b, c)
                for key, v in [("heat_s", th), ("projection_s", tp), ("steps_s", th + tp)]:
                    row[f"{name}_{key}"] = min(row.get(f"{name}_{key}", np.inf), v)
                if name in preds and not np.array_equal(preds[name], p):
                    raise SystemExit(f"mbo: {name} steps not deterministic")
                preds[name] = p
        t = time.perf_counter()
        fit = make_algorithm("poissonMBO", {"priors": priors}).fit(g, lab, y[lab], c).predict()
        row["fit_s"] = time.perf_counter() - t
        row["identical_predictions"] = int(np.sum(preds["plain"] == preds["fast"]))
        row["fit_identical_predictions"] = int(np.sum(fit == preds["plain"]))
        row["n"] = int(g.n)
        row["accuracy"] = acc_unlabeled(preds["fast"], y, lab)
        for key in ("heat_s", "projection_s", "steps_s"):
            row[f"speedup_{key[:-2]}"] = row[f"plain_{key}"] / row[f"fast_{key}"]
        rows.append(row)
        print(json.dumps({k2: (round(v, 3) if isinstance(v, float) else v) for k2, v in row.items()}), flush=True)
    return {"rows": rows, "all_identical": all(r["identical_predictions"] == r["n"] == r["fit_identical_predictions"]
                                               for r in rows)}


def noise_settings(args):
    """(noise model name, rate) pairs: 0 % once (no noise), then every ``--noise`` model at every positive rate."""
    out = [("none", 0.0)] if 0.0 in args.rates else []
    return out + [(m, r) for m in args.noise for r in args.rates if r > 0]


def setting_key(model, rate):
    """The summary's key of a setting (uniform: the rate alone, as the first measurements wrote it)."""
    return str(rate) if model == "uniform" else f"{model} {rate}"


def noise(args):
    from lgcexp.algorithms import make_algorithm
    from lgcexp.labels import sample_and_corrupt
    from lgcexp.noise import make_noise

    g, y, X, _ = setting_graph(args)
    c = int(y.max()) + 1
    cache = open_cache()
    rows = []
    path = OUT / f"poisson_noise{args.tag}_rows.jsonl"
    for seed in range(args.first_seed, args.trials):
        for model, rate in noise_settings(args):
            split = sample_and_corrupt(y, None, seed=seed, noise=make_noise(model, rate=rate) if rate else None, X=X,
                                       labels={"per_class": args.per_class})
            lab, obs, flipped = split.labeled, split.y_observed, split.flipped
            row = {"seed": seed, "noise": model, "rate": rate, "n_flipped": int(flipped.sum()),
                   "dataset": args.dataset, "features": args.features, "per_class": args.per_class}
            for name in args.methods:
                t = time.perf_counter()
                a = make_algorithm(name).fit(g, lab, obs, c, cache=cache)
                row[name] = acc_unlabeled(a.predict(), y, lab)
                row[name + "_s"] = round(time.perf_counter() - t, 2)
                if a.dropped_ is not None:
                    row[name + "_dropped_flipped"] = int((a.dropped_ & flipped).sum())
                    row[name + "_dropped"] = int(a.dropped_.sum())
            rows.append(row)
            with open(path, "a") as f:
                f.write(json.dumps(row) + "\n")
            print(json.dumps(row), flush=True)
    return {"rows": rows, "summary": noise_summary(rows, args.methods), "per_class": args.per_class}


def noise_summary(rows, methods):
    """Per setting: every method's mean and sd (points), and poissonL's paired differences with the others
    (mean, standard error, wins, trials)."""
    summary = {}
    for key in dict.fromkeys(setting_key(r.get("noise", "uniform"), r["rate"]) for r in rows):
        sel = [r for r in rows if setting_key(r.get("noise", "uniform"), r["rate"]) == key]
        have = [m for m in methods if any(m in r for r in sel)]
        summary[key] = {m: (round(100 * float(np.mean([r[m] for r in sel if m in r])), 2),
                            round(100 * float(np.std([r[m] for r in sel if m in r])), 2),
                            sum(m in r for r in sel)) for m in have}
        if "poissonL" in have:
            for other in have:
                if other == "poissonL":
                    continue
                d = np.array([r["poissonL"] - r[other] for r in sel if "poissonL" in r and other in r])
                summary[key][f"poissonL-{other}"] = (round(100 * float(d.mean()), 2),
                                                     round(100 * float(d.std(ddof=1) / np.sqrt(d.size)), 2)
                                                     if d.size > 1 else None, int((d > 0).sum()), int(d.size))
    return summary


def summary_table(args):
    """The markdown table of a noise run's rows file (``--tag``), e.g. of a run cut short."""
    merged = {}
    for tag in [args.tag] + list(args.merge):  # one row per trial and setting; later files add their methods
        path = OUT / f"poisson_noise{tag}_rows.jsonl"
        for line in path.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                merged.setdefault((r["seed"], r.get("noise", "uniform"), r["rate"]), {}).update(r)
    rows = list(merged.values())
    summ = noise_summary(rows, args.methods)
    lines = ["| noise | trials | " + " | ".join(args.methods) + " | PoissonL - Poisson (s.e., wins) "
             "| PoissonL - AutoL (s.e., wins) |", "|---" * (len(args.methods) + 4) + "|"]
    for key, v in summ.items():
        cells = [f"{v[m][0]:.2f} ± {v[m][1]:.2f}" + ("" if v[m][2] == max(x[2] for k, x in v.items() if "-" not in k)
                                                    else f" ({v[m][2]})") if m in v else "–" for m in args.methods]
        diffs = []
        for other in ("poisson", "autoL"):
            d = v.get(f"poissonL-{other}")
            diffs.append(f"{d[0]:+.2f} ± {d[1]:.2f} ({d[2]}/{d[3]})" if d and d[1] is not None else "–")
        n = max(x[2] for k, x in v.items() if "-" not in k)
        model, rate = key.split() if " " in key else ("uniform", key)
        label = "none, 0 %" if model == "none" else f"{model}, {round(100 * float(rate))} %"
        lines.append(f"| {label} | {n} | " + " | ".join(cells) + " | " + " | ".join(diffs) + " |")
    table = "\n".join(lines)
    print(table)
    return {"summary": summ, "table": table, "n_rows": len(rows)}


def features_quality(args):
    """Leave-one-out 10-NN accuracy (majority vote, exact search) of the representation, and of the raw data."""
    from lgcexp.graph.search import faiss_exact_search

    data, Z, _ = representation(args)
    y = np.asarray(data.y, dtype=np.int64)
    X = data.X
    if args.knn_n:  # the first knn_n points only (a cheaper comparison with the raw data)
        Z, X, y = Z[:args.knn_n], X[:args.knn_n], y[:args.knn_n]
    out = {"n": int(y.size)}
    for name, F in ([(args.features, Z)] + ([("raw", X)] if args.raw and args.features != "raw" else [])):
        t = time.perf_counter()
        _, idx = faiss_exact_search(F, 10)
        votes = np.zeros((y.size, int(y.max()) + 1))
        np.add.at(votes, (np.repeat(np.arange(y.size), idx.shape[1]), y[idx].ravel()), 1.0)
        out[name] = {"knn10_acc": float(np.mean(votes.argmax(1) == y)), "dim": int(F.shape[1]),
                     "s": round(time.perf_counter() - t, 1)}
        print(name, out[name], flush=True)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("part", choices=("protocol", "timing", "noise", "features", "summary", "mbo"))
    ap.add_argument("--dataset", default="mnist", choices=("mnist", "isolet"))
    ap.add_argument("--features", default="raw", choices=("raw", "vae", "pca"))
    ap.add_argument("--epochs", type=int, default=None, help="features=vae: passes over the data (default: auto)")
    ap.add_argument("--raw", action="store_true", help="features: also the raw data's 10-NN accuracy")
    ap.add_argument("--merge", nargs="*", default=[], help="summary: also these tags' rows (other methods)")
    ap.add_argument("--knn-n", type=int, default=None, help="features: among the first N points only")
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--priors", action="store_true", help="protocol: also Poisson with uniform class priors")
    ap.add_argument("--tag", default="", help="suffix of the output file name")
    ap.add_argument("--ks", type=int, nargs="+", default=[1, 3, 5], help="protocol, mbo: labels per class")
    ap.add_argument("--mbo-trials", type=int, default=3)
    ap.add_argument("--mbo-priors", default="uniform", choices=("uniform", "true"),
                    help="protocol, mbo: Poisson-MBO's class priors (true: the data's class fractions)")
    ap.add_argument("--gl-trials", type=int, default=None, help="protocol: GraphLearning on the first N (default all)")
    ap.add_argument("--gl-own-graph", action="store_true",
                    help="protocol: also GraphLearning's Poisson on its own kernel's graph of the same features")
    ap.add_argument("--gl-mbo-trials", type=int, default=10**9, help="protocol: GraphLearning's MBO on the first N")
    ap.add_argument("--first-seed", type=int, default=0, help="protocol, noise: first seed (to resume)")
    ap.add_argument("--noise", nargs="+", default=["uniform"], help="noise: models (uniform, confusion, ...)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--per-class", type=int, default=5)
    ap.add_argument("--rates", type=float, nargs="+", default=[0.2, 0.4])
    ap.add_argument("--baselines", nargs="*", default=["wnll", "lgc"], help="protocol: other methods to run")
    ap.add_argument("--methods", nargs="+", default=["poisson", "poissonL", "autoL"])
    args = ap.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    res = {"protocol": protocol, "timing": timing, "noise": noise, "features": features_quality,
           "summary": summary_table, "mbo": mbo}[args.part](args)
    res["wall_s"] = round(time.perf_counter() - t, 1)
    res["loadavg"] = os.getloadavg()
    res["argv"] = vars(args)
    (OUT / f"poisson_{args.part}{args.tag}.json").write_text(json.dumps(res, indent=1, default=float))
    print(json.dumps({k: v for k, v in res.items() if k != "rows"}, indent=1, default=float))
