"""Speed figures for lgcexp, written to results/bench/ (JSON + Markdown). Not a test.

Every figure is quoted as a ratio against a baseline measured in the same run:
- graph:  kNN graph on MNIST (faiss exact search) and LGC on MNIST by conjugate gradient vs the authors'
          1000-step fixed-point iteration, and vs scikit-learn's ``LabelSpreading(kernel="knn")``.
- sklearn: the scikit-learn estimator ``LGCClassifier().fit(X, y)`` on MNIST (y = -1 except 100 labels) against
          ``LabelSpreading(kernel="knn")`` and against the same stages called directly (kNN graph + LGC),
          all in one run; and ``predict`` on 10,000 points by both estimators.
- knn:    the exact MNIST 15-NN search, faiss ``IndexFlatL2`` (the old path) against the symmetric self-join
          (lgcexp.graph.selfjoin, the default for integer-valued data), checked identical bit for bit; and
          the cold ``LGCClassifier().fit`` (which searches by the self-join) against
          ``LabelSpreading(kernel="knn")``, as in the sklearn section, all in one run.
- autol / autod / siis / speed / tables / gpu: sections from ``benchmarks/<name>.py`` (each exposes
          ``run(quick) -> dict``); speed: start-up and imports, the reused compiled AutoL step, the LGC solve
          with/without RCM and with each stopping rule; tables: the Table 1/2 sweeps on a few seeds against
          the same sweeps with the sweep-level speed-ups off (same numbers checked); gpu: GPU vs CPU when
          there is a GPU, "no GPU" otherwise.

    python -m benchmarks report                 # all sections
    python -m benchmarks report --only graph    # one section
    python -m benchmarks report --quick         # smaller problems (digits / ISOLET only)

With ``--only``, the sections of an existing report file are kept and the ones run replace theirs.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
from pathlib import Path

import numpy as np

from benchmarks.common import OUT, data_dir, figure_rows, header, timed, timed_cpu, write_report

#: the report's sections (gpu: "no GPU" without one)
SECTIONS = ("graph", "sklearn", "knn", "autol", "autod", "siis", "speed", "tables", "gpu")


def semi_supervised(data, n_lab: int):
    """(split, y, unlabelled mask): ``n_lab`` stratified labels of seed 0, no noise, as scikit-learn takes
    them (y = -1 on the other points)."""
    from lgcexp.labels import sample_and_corrupt

    split = sample_and_corrupt(data.y, n_lab, 0.0, seed=0)
    y = np.full(data.n, -1)
    y[split.labeled] = split.y_observed
    return split, y, y == -1


def warm_up(data, k: int) -> None:
    """Both estimators fitted on 500 points (lazy imports, faiss/BLAS threads), so no timing pays for it."""
    from sklearn.semi_supervised import LabelSpreading

    from lgcexp.sklearn import LGCClassifier

    y_warm = np.where(np.arange(500) % 5 == 0, data.y[:500], -1)
    LGCClassifier(n_neighbors=k).fit(data.X[:500], y_warm)
    LabelSpreading(kernel="knn", n_neighbors=k).fit(data.X[:500], y_warm)


def bench_graph(quick: bool) -> dict:
    """kNN graph + LGC on MNIST (digits with --quick), against the power method and scikit-learn."""
    from sklearn.semi_supervised import LabelSpreading

    from lgcexp.algorithms.lgc import lgc_propagate
    from lgcexp.data import load_dataset
    from lgcexp.graph import Graph, build_affinity
    from lgcexp.labels import sample_and_corrupt

    name, k, n_lab = ("digits", 10, 100) if quick else ("mnist", 15, 100)
    data = load_dataset(name, data_dir=data_dir())
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
        "note": "sklearn LabelSpreading(kernel='knn', alpha=0.9, max_iter=30 default) "
                "builds its own unweighted kNN graph",
    }


def bench_sklearn(quick: bool) -> dict:
    """``LGCClassifier().fit(X, y)`` vs ``LabelSpreading(kernel="knn").fit(X, y)`` on MNIST (digits with
    --quick), same X, same y (-1 except 100 stratified labels), same k and alpha; and the estimator against
    the stages it wraps, called directly (build_affinity + lgc_propagate), to show the wrapper costs nothing."""
    from sklearn.semi_supervised import LabelSpreading

    from lgcexp.algorithms.lgc import lgc_propagate
    from lgcexp.data import load_dataset
    from lgcexp.graph import Graph, build_affinity
    from lgcexp.sklearn import LGCClassifier

    name, k, n_lab = ("digits", 10, 100) if quick else ("mnist", 15, 100)
    data = load_dataset(name, data_dir=data_dir())
    X = data.X
    split, y, unl = semi_supervised(data, n_lab)
    m_pred = min(10_000, data.n)
    rng = np.random.default_rng(0)
    X_new = X[rng.choice(data.n, m_pred, replace=False)] + rng.normal(0, 1, (m_pred, X.shape[1])).astype(X.dtype)

    # warm-up (lazy imports, faiss/BLAS threads) on a small slice, so neither timing below pays for it
    warm_up(data, k)

    est = LGCClassifier(n_neighbors=k, alpha=0.9)
    _, t_est, c_est = timed_cpu(est.fit, X, y)
    acc_est = float(np.mean(est.transduction_[unl] == data.y[unl]))
    _, t_est_pred, c_est_pred = timed_cpu(est.predict, X_new)

    def direct():
        W, sigma = build_affinity(X, k, "mean")
        g = Graph(W=W, sigma=sigma, key="bench")
        Y = np.zeros((data.n, data.n_classes))
        Y[split.labeled, split.y_observed] = 1
        return lgc_propagate(g.S, Y, 0.9)[0]

    F, t_direct, c_direct = timed_cpu(direct)
    same = float(np.mean(F.argmax(1) == np.searchsorted(est.classes_, est.transduction_)))

    ls = LabelSpreading(kernel="knn", n_neighbors=k, alpha=0.9)
    _, t_sk, c_sk = timed_cpu(ls.fit, X, y)
    acc_sk = float(np.mean(ls.transduction_[unl] == data.y[unl]))
    _, t_sk_pred, c_sk_pred = timed_cpu(ls.predict, X_new)
    return {
        "dataset": name, "n": data.n, "d": X.shape[1], "X_dtype": str(X.dtype), "k": k, "n_labeled": n_lab,
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", "(detected by OpenBLAS)"),
        "estimator_fit_s": t_est, "estimator_fit_cpu_s": c_est, "estimator_acc_unlabeled": acc_est,
        "direct_graph_plus_lgc_s": t_direct, "direct_graph_plus_lgc_cpu_s": c_direct,
        "estimator_vs_direct": t_est / t_direct, "estimator_vs_direct_cpu": c_est / c_direct,
        "estimator_same_labels_as_direct": same,
        "sklearn_labelspreading_fit_s": t_sk, "sklearn_labelspreading_fit_cpu_s": c_sk,
        "sklearn_acc_unlabeled": acc_sk,
        "speedup_fit_estimator_vs_labelspreading": t_sk / t_est,
        "speedup_fit_estimator_vs_labelspreading_cpu": c_sk / c_est,
        "n_predict": m_pred, "estimator_predict_s": t_est_pred, "estimator_predict_cpu_s": c_est_pred,
        "sklearn_predict_s": t_sk_pred, "sklearn_predict_cpu_s": c_sk_pred,
        "speedup_predict_estimator_vs_labelspreading": t_sk_pred / t_est_pred,
        "speedup_predict_estimator_vs_labelspreading_cpu": c_sk_pred / c_est_pred,
        "note": ("LGCClassifier: exact faiss kNN graph, Gaussian weights (sigma=mean), LGC by CG to 1e-10; "
                 "LabelSpreading(kernel='knn', alpha=0.9, max_iter=30 default): its own unweighted kNN graph "
                 "(NearestNeighbors) and 30 iterations; both get the same X and y. predict: new points = "
                 "training points + N(0, 1) noise"),
    }


def bench_knn(quick: bool) -> dict:
    """The exact kNN search of all points, old (faiss ``IndexFlatL2``) and new (symmetric self-join), on MNIST
    (digits with --quick), then the cold estimator fit against ``LabelSpreading(kernel="knn")`` on the same
    problem as the sklearn section (y = -1 except 100 stratified labels, k = 15, alpha = 0.9)."""
    from sklearn.semi_supervised import LabelSpreading

    from lgcexp.data import load_dataset
    from lgcexp.graph import exact_search, sigma_mean_heuristic
    from lgcexp.graph.knn import use_selfjoin
    from lgcexp.graph.selfjoin import selfjoin_search
    from lgcexp.sklearn import LGCClassifier

    name, k, n_lab = ("digits", 10, 100) if quick else ("mnist", 15, 100)
    data = load_dataset(name, data_dir=data_dir())
    X = data.X
    out: dict = {"dataset": name, "n": data.n, "d": X.shape[1], "k": k, "loadavg_start": os.getloadavg()[0]}

    # warm-up (faiss import and its BLAS, numpy's BLAS threads) on a slice, so neither timing pays for it
    m = min(2000, data.n)
    exact_search(X[:m], k, np.arange(m))
    selfjoin_search(X[:m], k)
    (old_d, old_i), t_old, c_old = timed_cpu(exact_search, X, k, np.arange(data.n))  # faiss: queries given
    integer, t_check, c_check = timed_cpu(use_selfjoin, X)
    stats: dict = {}
    (new_d, new_i), t_new, c_new = timed_cpu(selfjoin_search, X, k, stats=stats)
    t_new, c_new = t_new + t_check, c_new + c_check
    out.update({
        "default_path_is_selfjoin": bool(integer),
        "faiss_search_s": t_old, "faiss_search_cpu_s": c_old,
        "selfjoin_search_s": t_new, "selfjoin_search_cpu_s": c_new,
        "speedup_search": t_old / t_new, "speedup_search_cpu": c_old / c_new,
        "identical_indices": bool(np.array_equal(old_i, new_i)),
        "identical_distances": bool(np.array_equal(old_d, new_d)),
        "sigma_mean_old": f"{sigma_mean_heuristic(old_d):.7f}", "sigma_mean_new": f"{sigma_mean_heuristic(new_d):.7f}",
        "selfjoin_pairs_computed_share": stats["pairs_computed"] / stats["pairs"],
        "selfjoin_blocks_skipped": f"{stats['blocks_skipped']} of {stats['blocks']}",
        "selfjoin_faiss_rows": stats["faiss_rows"],
    })

    split, y, unl = semi_supervised(data, n_lab)
    warm_up(data, k)
    est = LGCClassifier(n_neighbors=k, alpha=0.9)  # no cache_dir: cold, the graph is built in the fit
    _, t_est, c_est = timed_cpu(est.fit, X, y)
    ls = LabelSpreading(kernel="knn", n_neighbors=k, alpha=0.9)
    _, t_sk, c_sk = timed_cpu(ls.fit, X, y)
    out.update({
        "lgc_fit_cold_s": t_est, "lgc_fit_cold_cpu_s": c_est,
        "lgc_acc_unlabeled": float(np.mean(est.transduction_[unl] == data.y[unl])),
        "lgc_sigma": f"{est.sigma_:.7f}",
        "labelspreading_fit_s": t_sk, "labelspreading_fit_cpu_s": c_sk,
        "labelspreading_acc_unlabeled": float(np.mean(ls.transduction_[unl] == data.y[unl])),
        "speedup_lgc_vs_labelspreading": t_sk / t_est, "speedup_lgc_vs_labelspreading_cpu": c_sk / c_est,
        # what the fit took with the old search: the same fit with the search's time swapped (not measured)
        "derived_lgc_fit_with_faiss_search_s": t_est - t_new + t_old,
        "derived_speedup_lgc_vs_labelspreading_with_faiss_search": t_sk / (t_est - t_new + t_old),
        "loadavg_end": os.getloadavg()[0],
        "note": ("old = faiss IndexFlatL2 search of every point (the path before the self-join); new = "
                 "lgcexp.graph.selfjoin (+ the integer-valued check that selects it); identical_* compare "
                 "them bit for bit. lgc_fit: LGCClassifier(n_neighbors=k, alpha=0.9).fit, no cache; "
                 "LabelSpreading(kernel='knn', n_neighbors=k, alpha=0.9, max_iter=30 default). CPU seconds "
                 "count all threads of this process."),
    })
    return out


def bench_external(name: str, quick: bool) -> dict:
    """Section ``name``: ``benchmarks.<name>.run(quick)``."""
    return importlib.import_module(f"benchmarks.{name}").run(quick)


def to_markdown(report: dict) -> str:
    lines = ["# lgcexp benchmark", "", f"{report['date']} — {report['machine']}", ""]
    for sec, figs in report["sections"].items():
        lines += [f"## {sec}", "", *figure_rows(figs), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", choices=SECTIONS, default=list(SECTIONS))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args(argv)
    report = {**header(), "quick": a.quick, "sections": {}}
    for sec in a.only:
        print(f"[bench] {sec} ...", flush=True)
        own = {"graph": bench_graph, "sklearn": bench_sklearn, "knn": bench_knn}
        report["sections"][sec] = own[sec](a.quick) if sec in own else bench_external(sec, a.quick)
        print(json.dumps(report["sections"][sec], indent=1, default=float), flush=True)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "bench_quick" if a.quick else "bench"
    old = out / f"{stem}.json"
    if set(a.only) != set(SECTIONS) and old.exists():  # keep the sections not run this time
        kept = json.loads(old.read_text()).get("sections", {})
        report["sections"] = {**{k: v for k, v in kept.items() if k not in report["sections"]}, **report["sections"]}
    write_report(out, stem, report, to_markdown(report))
    print(f"[bench] wrote {out / stem}.json and .md")
    return 0
