"""Which label-issue detector holds on realistic (instance-dependent) noise, with every point labelled. Not a test.

For each data set (digits, ISOLET; MNIST with ``--mnist``), noise model (``idn``, ``confusion``), rate
(10 / 20 / 40 %) and seed (0-4), every point is labelled and ``rate`` of the labels are flipped; every
detector judges the same noisy labels on the same features and graph (10-NN, Gaussian weights, sigma
"mean"). Detectors (``label_quality``: the probability of the given label, lower = more suspicious; the
flags as stated):

- ``graph``: (a) LGC's graph leave-one-out (alpha 0.9, no learning; :mod:`lgcexp.solvers.diagonal`), flagged where
  another class has more evidence;
- ``lgc+lda``, ``lgc+lr``, ``lgc+mlp``: LGC's evidence judged by ``lgcexp.issues.judge.judge`` with the
  shrinkage-LDA, logistic or network (the fully labelled default) feature view behind the agreement gate, cut
  ``consensus``;
- ``knn+cleanlab``: (b) out-of-fold 10-NN class frequencies (5 stratified folds) + cleanlab's
  ``filter.find_label_issues`` (its default, ``prune_by_noise_rate``), ranked by cleanlab's
  ``rank.get_label_quality_scores`` (self-confidence);
- ``lr+cleanlab``: (c) the same on out-of-fold probabilities of a multinomial logistic regression
  (scikit-learn, C = 1, standardised features; ``--lr-pca`` principal axes);
- ``mlp+cleanlab``: (c') the same on the network's out-of-fold probabilities (``oof_mlp_probs``);
- ``graph*lr`` + cut: the geometric mean of the graph's leave-one-out and the logistic regression's
  out-of-fold probabilities (``combine_views``), cut by ``consensus`` (graph and combination both prefer
  another class), ``suggested`` or confident learning (lgcexp's ``prune_by_noise_rate``).

Also recorded: confident learning's estimate of the number of wrong labels (the off-diagonal of the
calibrated confident joint) on each detector's probabilities, against the true count.

Needs the ``bench`` extra (cleanlab). Writes ``results/bench/detect_realistic.csv`` (one row per run and
detector) and ``detect_realistic.md`` (means over seeds).

    nice python -m benchmarks detect_realistic [--seeds 5 | --seed-list 0 1] [--datasets digits isolet] [--mnist]
        [--detectors ...] [--cache DIR]

Label-independent work is done once per data set (graph, propagation diagonal, on large sets the exact
neighbour lists of the k-NN baseline; with ``--cache`` kept between invocations, so seeds can run in
separate processes) and the per-detector wall time is recorded (``seconds``).
"""
from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import numpy as np

from benchmarks.common import OUT, load, write_rows


def representation(ds: str, X, name: str, npz: dict, cache):
    """``ds``'s features under ``name``: from ``npz[ds]`` when given, else the ``features`` stage's map with
    its defaults (VAE: ~6,000 Adam steps), cached by content key like the pipeline's."""
    if ds in npz:
        Z = np.load(npz[ds])["X"].astype(np.float64)
        if Z.shape[0] != X.shape[0]:
            raise SystemExit(f"--features-npz {ds}: {Z.shape[0]} rows, the data has {X.shape[0]}")
        return Z
    from lgcexp.cache import stable_hash
    from lgcexp.features import make_features

    fp = stable_hash({"bench": ds, "shape": list(X.shape), "sum": float(X.sum()), "sq": float((X * X).sum())}, 32)
    return make_features(name).transform(X, data_fingerprint=fp, cache=cache).X.astype(np.float64)


def metrics(quality, flag, flipped) -> dict:
    from sklearn.metrics import roc_auc_score

    tp = int((flag & flipped).sum())
    fp = int((flag & ~flipped).sum())
    fn = int((~flag & flipped).sum())
    return {"f1": 2 * tp / max(1, 2 * tp + fp + fn), "auc": float(roc_auc_score(flipped, -quality)),
            "precision": tp / max(1, tp + fp), "recall": tp / max(1, tp + fn), "flagged": int(flag.sum())}


def cl_estimate(probs, y, c) -> int:
    from lgcexp.issues.count import calibrated_counts
    from lgcexp.issues.cuts import confident_joint

    C, _ = confident_joint(probs, y, c)
    N = calibrated_counts(C, y)
    return int(N.sum() - np.trace(N))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="*", default=["digits", "isolet"])
    ap.add_argument("--mnist", action="store_true")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--rates", nargs="+", type=float, default=[0.1, 0.2, 0.4])
    ap.add_argument("--noises", nargs="+", default=["idn", "confusion"])
    ap.add_argument("--out", default=str(OUT / "detect_realistic"))
    ap.add_argument("--detectors", nargs="+", default=None, help="compute only these (default: all)")
    ap.add_argument("--lr-pca", type=int, default=0, help="principal axes for the logistic regression of (c) "
                    "and graph*lr (0: the standardised features as they are)")
    ap.add_argument("--merge", nargs="*", default=[], help="earlier CSVs whose rows join the table")
    ap.add_argument("--knn-lists-above", type=int, default=10_000, help="above this many points the k-NN baseline "
                    "reads exact neighbour lists searched once (faiss) instead of a brute-force search per draw")
    ap.add_argument("--knn-lists", type=int, default=50, help="length of those lists")
    ap.add_argument("--seed-list", nargs="*", type=int, default=None, help="run these seeds (default: 0..seeds-1)")
    ap.add_argument("--features", default="raw", help="representation the detectors judge on (raw, pca, vae; the "
                    "noise is always made on the raw features, so draws match across representations)")
    ap.add_argument("--features-npz", nargs="*", default=[], help="DATASET=PATH: that data set's representation "
                    "from an .npz (array X; e.g. a cached features entry) instead of training it here")
    ap.add_argument("--dump", default=None, help="directory where each draw's views are written (graph leave-one-out, "
                    "the feature views, noisy and clean labels; one .npz per draw) for benchmarks/cuts.py")
    ap.add_argument("--cache", default=None, help="directory keeping the graph, the diagonal and the neighbour "
                    "lists between invocations (they do not depend on the labels)")
    a = ap.parse_args(argv)
    def want(name):
        return a.detectors is None or name in a.detectors

    import cleanlab
    from cleanlab.filter import find_label_issues as cl_find
    from cleanlab.rank import get_label_quality_scores

    from lgcexp.algorithms.lgc import lgc_loo_probs
    from lgcexp.graph import build_graph
    from lgcexp.issues.cuts import confident_learning
    from lgcexp.issues.judge import judge
    from lgcexp.issues.judgement import LabelJudgement, label_quality, suggested_labels
    from lgcexp.issues.out_of_fold import oof_logistic_probs, oof_mlp_probs
    from lgcexp.issues.views import combine_views, knn_oof_from_neighbors, knn_oof_probs
    from lgcexp.noise import make_noise
    from lgcexp.solvers.diagonal import propagation_diagonal

    datasets = list(a.datasets) + (["mnist"] if a.mnist else [])
    rows = []
    cache = None
    if a.cache:
        from lgcexp.cache import Cache

        cache = Cache(a.cache)

    def stored(name, compute):
        """A label-independent array computed once, kept in ``--cache`` (if given) across runs."""
        if not a.cache:
            return compute()
        path = Path(a.cache) / f"bench-{name}.npy"
        if path.exists():
            return np.load(path)
        arr = compute()
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, arr)
        return arr

    for ds in datasets:
        X, y = load(ds)
        n, c = y.size, int(y.max()) + 1
        X_noise = X  # the noise (confusion: its out-of-fold classifier) always sees the raw features
        if a.features != "raw":
            t0 = time.perf_counter()
            X = representation(ds, X, a.features, dict(s.split("=", 1) for s in a.features_npz), cache)
            print(f"{ds}: features={a.features} {X.shape} {time.perf_counter() - t0:.1f}s", flush=True)
        tag = "" if a.features == "raw" else f"{a.features}-"
        lab = np.arange(n)
        # what does not depend on the labels is computed once per data set and reused by every noise draw:
        # the graph, the diagonal of (I - alpha S)^-1 (lgc_loo_probs(P_diag=...)), and for a large set the
        # exact neighbour lists of the k-NN baseline (knn_oof_from_neighbors)
        t0 = time.perf_counter()
        g, _ = build_graph(X, k=10, sigma="mean", cache=cache)
        how = "exact" if n <= 10_000 else "probe"
        diag = stored(f"{ds}-{n}-{g.key}-diag-{how}",
                      lambda: propagation_diagonal(g.S, lab, 0.9, method=how, distance=3, check=0)[0])
        print(f"{ds}: n={n} graph+diagonal ({how}) {time.perf_counter() - t0:.1f}s", flush=True)
        neighbors = None
        if n > a.knn_lists_above and want("knn+cleanlab"):
            from lgcexp.graph.knn import exact_search

            t0 = time.perf_counter()
            neighbors = stored(f"{ds}-{n}-{tag}nn{a.knn_lists}", lambda: exact_search(X, a.knn_lists)[1])
            print(f"{ds}: exact {a.knn_lists}-NN lists {time.perf_counter() - t0:.1f}s", flush=True)
        # the confusion noise's out-of-fold classifier sees the clean labels only: one fit per seed serves
        # every rate (the same numbers as refitting it)
        confusions: dict = {}

        def noise_model(noise, rate, c=c, confusions=confusions):
            nm = make_noise(noise, rate=rate)
            if noise == "confusion":
                fit = nm.confusion

                def cached(X_, y_, c_, seed_):
                    if seed_ not in confusions:
                        confusions[seed_] = fit(X_, y_, c_, seed_)
                    return confusions[seed_]

                nm.confusion = cached
            return nm

        # seeds outermost, the files rewritten after every run: an interrupted benchmark keeps what it did
        for seed in (a.seed_list if a.seed_list else range(a.seeds)):
            for noise in a.noises:
                for rate in a.rates:
                    t0 = time.perf_counter()
                    y_obs, flipped = noise_model(noise, rate).corrupt(y, c, seed, X=X_noise)
                    graph, _ = lgc_loo_probs(g.S, lab, y_obs, c, 0.9, P_diag=diag)
                    det = {}
                    secs = {}
                    views, gates = {}, {}
                    if want("graph"):
                        det["graph"] = (label_quality(graph, y_obs), suggested_labels(graph, y_obs) != y_obs, graph)
                    for name, fm in (("lgc+lda", "lda"), ("lgc+lr", "logistic"), ("lgc+mlp", "mlp")):
                        if want(name):  # LGC's evidence + the feature view by this model on the kept labels
                            t1 = time.perf_counter()
                            j = judge(LabelJudgement(probs=graph), y_obs, None, X=X, feature_model=fm)
                            det[name] = (j.quality, j.is_issue, j.probs)
                            secs[name] = time.perf_counter() - t1
                            if a.dump and j.feature_view is not None:
                                views[fm] = j.feature_view
                                gates[fm] = np.nan if j.feature_agreement is None else j.feature_agreement
                    if want("knn+cleanlab"):
                        t1 = time.perf_counter()
                        if neighbors is None:
                            knn = knn_oof_probs(X, y_obs, c, k=10, folds=5, seed=seed)
                        else:
                            knn = knn_oof_from_neighbors(X, neighbors, y_obs, c, k=10, folds=5, seed=seed)
                        det["knn+cleanlab"] = (get_label_quality_scores(y_obs, knn), cl_find(y_obs, knn), knn)
                        secs["knn+cleanlab"] = time.perf_counter() - t1
                    if want("mlp+cleanlab"):  # (c') cleanlab on the network's out-of-fold probabilities
                        t1 = time.perf_counter()
                        mlp = oof_mlp_probs(X, y_obs, c, folds=5, pca=50, seed=seed)
                        det["mlp+cleanlab"] = (get_label_quality_scores(y_obs, mlp), cl_find(y_obs, mlp), mlp)
                        secs["mlp+cleanlab"] = time.perf_counter() - t1
                    if any(want(k) for k in ("lr+cleanlab", "graph*lr consensus", "graph*lr suggested", "graph*lr CL")):
                        t1 = time.perf_counter()
                        lr = oof_logistic_probs(X, y_obs, c, folds=5, pca=a.lr_pca, C=1.0, seed=seed)
                        secs["lr+cleanlab"] = time.perf_counter() - t1
                        gl = combine_views(graph, lr)
                        own_g = suggested_labels(graph, y_obs) != y_obs
                        own_gl = suggested_labels(gl, y_obs) != y_obs
                        q = label_quality(gl, y_obs)
                        if want("lr+cleanlab"):
                            det["lr+cleanlab"] = (get_label_quality_scores(y_obs, lr), cl_find(y_obs, lr), lr)
                        if want("graph*lr consensus"):
                            det["graph*lr consensus"] = (q, own_g & own_gl, gl)
                        if want("graph*lr suggested"):
                            det["graph*lr suggested"] = (q, own_gl, gl)
                        if want("graph*lr CL"):
                            det["graph*lr CL"] = (q, confident_learning(gl, y_obs, c), gl)
                    if a.dump:
                        Path(a.dump).mkdir(parents=True, exist_ok=True)
                        np.savez_compressed(Path(a.dump) / f"{tag}{ds}-{noise}-{rate:g}-{seed}.npz", graph=graph, y=y,
                                            y_obs=y_obs, flipped=flipped, **{f"view_{k}": v for k, v in views.items()},
                                            **{f"agreement_{k}": np.float64(v) for k, v in gates.items()})
                    for name, (qq, flag, P) in det.items():
                        m = metrics(np.asarray(qq), np.asarray(flag, bool), flipped)
                        rows.append({"dataset": ds, "features": a.features, "noise": noise, "rate": rate, "seed": seed,
                                     "detector": name, **m, "n_wrong": int(flipped.sum()),
                                     "cl_estimate": cl_estimate(P, y_obs, c),
                                     "lr_pca": a.lr_pca, "seconds": round(secs.get(name, float("nan")), 2)})
                    print(f"{ds} {noise} {rate} seed {seed}: {time.perf_counter() - t0:.1f}s  " + "  ".join(
                        f"{r['detector']} {r['f1']:.3f}/{r['auc']:.3f}" for r in rows[-len(det):]), flush=True)
                    save(rows, Path(a.out), a.merge, cleanlab.__version__)


def save(rows, out: Path, merge, clv: str) -> None:
    write_rows(rows, out.with_suffix(".csv"))
    rows = list(rows)
    for path in merge:
        with open(path) as fh:
            rows += [{k: (v if k in ("dataset", "features", "noise", "detector") else float(v)) for k, v in r.items()}
                     for r in csv.DictReader(fh)]
    write_md(rows, out.with_suffix(".md"), clv)


def write_md(rows, path: Path, clv: str) -> None:
    import pandas as pd

    df = pd.DataFrame(rows)
    if "features" in df:  # a detector on learned features is its own row: name@features
        other = df["features"].fillna("raw") != "raw"
        df.loc[other, "detector"] = df.loc[other, "detector"] + "@" + df.loc[other, "features"]
    g = df.groupby(["dataset", "noise", "rate", "detector"], sort=False)
    agg = g.agg(f1=("f1", "mean"), auc=("auc", "mean"), precision=("precision", "mean"), recall=("recall", "mean"),
                n_wrong=("n_wrong", "mean"), cl_estimate=("cl_estimate", "mean"), seeds=("seed", "nunique"))
    lines = [f"# Detectors on instance-dependent noise, every point labelled (cleanlab {clv})", "",
             ("F1 / ROC AUC, mean over seeds; `est.`: confident learning's estimate of the number of wrong "
              "labels (true: `wrong`); [seeds]."), ""]
    for (ds, noise), sub in agg.groupby(level=[0, 1], sort=False):
        rates = sorted(sub.index.get_level_values(2).unique())
        ns = sub["seeds"]
        seeds = f"{int(ns.min())} seeds" if ns.min() == ns.max() else f"{int(ns.min())}-{int(ns.max())} seeds"
        lines += [f"## {ds}, noise={noise} ({seeds})", "",
                  "| detector | " + " | ".join(f"{int(100 * r)} % F1 / AUC / est. (wrong)" for r in rates) + " |",
                  "|---|" + "---|" * len(rates)]
        for det in sub.index.get_level_values(3).unique():
            cells = []
            for r in rates:
                if (ds, noise, r, det) not in sub.index:  # not run (a partial benchmark)
                    cells.append("-")
                    continue
                x = sub.loc[(ds, noise, r, det)]
                cells.append(f"{x.f1:.3f} / {x.auc:.3f} / {x.cl_estimate:.0f} ({x.n_wrong:.0f}) [{x.seeds:.0f}]")
            lines.append(f"| {det} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += summary(agg)
    path.write_text("\n".join(lines))


#: the candidates for the fully labelled default, each compared with every other detector cell by cell
CANDIDATES = ("lgc+lr", "lgc+mlp")


def summary(agg) -> list:
    """Mean F1 / AUC over the cells (data set x noise x rate) of each data set and over all, per detector, and
    in how many cells each candidate is above each other detector."""
    dets = list(agg.index.get_level_values(3).unique())
    lines = ["## Means over cells", "", "| detector | " + " | ".join(
        f"{ds} F1 / AUC" for ds in agg.index.get_level_values(0).unique()) + " | all F1 / AUC | cells |",
        "|---|" + "---|" * (agg.index.get_level_values(0).nunique() + 2)]
    for det in dets:
        sub = agg.xs(det, level=3)
        have = set(sub.index.get_level_values(0))
        cells = [f"{sub.xs(ds).f1.mean():.3f} / {sub.xs(ds).auc.mean():.3f}" if ds in have else "-"
                 for ds in agg.index.get_level_values(0).unique()]
        lines.append(f"| {det} | " + " | ".join(cells) + f" | {sub.f1.mean():.3f} / {sub.auc.mean():.3f} | "
                     f"{len(sub)} |")
    lines.append("")
    for cand in CANDIDATES:
        if cand not in dets:
            continue
        a = agg.xs(cand, level=3)
        for other in dets:
            if other == cand:
                continue
            b = agg.xs(other, level=3)
            both = a.index.intersection(b.index)
            if not len(both):
                continue
            f1 = int((a.loc[both].f1 > b.loc[both].f1).sum())
            auc = int((a.loc[both].auc > b.loc[both].auc).sum())
            worst = float((a.loc[both].f1 - b.loc[both].f1).min())
            worst_auc = float((a.loc[both].auc - b.loc[both].auc).min())
            lines.append(f"- {cand} above {other}: F1 in {f1} / {len(both)} cells, AUC in {auc} / {len(both)}; "
                         f"largest loss F1 {max(0.0, -worst):.3f}, AUC {max(0.0, -worst_auc):.3f}; means over "
                         f"these cells F1 {a.loc[both].f1.mean():.3f} vs {b.loc[both].f1.mean():.3f}, AUC "
                         f"{a.loc[both].auc.mean():.3f} vs {b.loc[both].auc.mean():.3f}")
        lines.append("")
    return lines
