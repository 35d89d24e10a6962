"""The label-issue detection table: every judging method and both baselines on the same labelled points and
the same noisy labels (docs/label_issues.md).

    python scripts/label_issues_table.py                                   # the committed table (slow)
    python scripts/label_issues_table.py --datasets isolet --noise uniform --seeds 3   # a quick look

For each (data set, noise model, rate, seed) the labelled set and the noise are drawn once (as a pipeline
run with that seed draws them), ``P_LL`` is computed once per seed (cached under ``LGCEXP_CACHE_DIR``;
alpha = 1/1.1111, AutoL's) and AutoL is fitted once; every detector below reads those:

- ``autoL`` (the default): AutoL's vote share at the learnt weights, the feature view, cut ``consensus``;
- ``autoL, graph only``: the vote share alone, cut ``suggested`` (``detect.features=false``);
- ``autoL, confident learning``: the default distribution, cut ``prune_by_noise_rate``;
- ``autoL, omega <= 0``: the rule lgcexp reported before (ranking by omega, cut omega <= 0);
- ``lgc``: LGC's leave-one-out distribution (from the same ``P_LL``), the feature view, cut ``consensus``;
- ``siis`` (the first ``--siis-seeds`` seeds): its clipped scores on the labelled rows, the
  feature view, cut ``consensus``;
- baseline ``graph LOO``: LGC's leave-one-out distribution, no learning, no feature view, cut ``suggested``;
- baseline ``kNN + CL``: out-of-sample 10-NN frequencies on the features (5 folds), confident learning
  (``prune_by_noise_rate``).

Writes ``results/label_issues/detection_runs.csv`` (one row per run and detector), ``detection_table.md``
and ``.csv`` (mean ± population sd over seeds) and ``PROVENANCE.md``. Runs already in the runs file are
kept, so an interrupted table resumes.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]   # conf/ and results/ of this checkout

from lgcexp.issues import cuts, frames, views  # noqa: E402
from lgcexp.issues import judge as judging  # noqa: E402
from lgcexp.issues import judgement as jm  # noqa: E402
from lgcexp.issues import options as opts_mod  # noqa: E402

RATES = {("isolet", "uniform"): (0.0, 0.2, 0.4, 0.6), ("isolet", "pairwise"): (0.2, 0.4),
         ("mnist", "uniform"): (0.0, 0.15, 0.3), ("mnist", "pairwise"): (0.15, 0.3)}
DETECTORS = ("autoL", "autoL, graph only", "autoL, confident learning", "autoL, omega <= 0", "lgc", "siis",
             "baseline: graph LOO", "baseline: kNN + CL")
METRICS = ("detect_auc", "detect_ap", "detect_precision", "detect_recall", "detect_f1", "detect_precision_at_k",
           "detect_false_alarms", "detect_false_alarm_rate", "detect_suggest_acc", "n_label_issues")
KEY = ["dataset", "noise", "rate", "seed", "detector"]


def setup(dataset: str, cache_dir: str, data_dir: str):
    from hydra import compose, initialize_config_dir

    from lgcexp.cache import Cache
    from lgcexp.config import plan

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"dataset={dataset}", "algo=autoL",
                                                       f"paths.cache_dir={cache_dir}",
                                                       f"paths.data_dir={data_dir}"])
    p = plan(cfg)
    cache = Cache(cache_dir)
    data = p.source.load(data_dir=data_dir, download=False)
    graph, _ = p.graph.build(data.X, cache=cache, data_fingerprint=data.fingerprint())
    return p, data, graph, cache


def noise_model(name: str, rate: float):
    from lgcexp.noise import NOISE_MODELS

    return NOISE_MODELS.get(name)(rate=rate)


def siis_algorithm(dataset: str, rate: float):
    """SIIS with the settings of conf/algo/siis.yaml (lambda1 by noise rate, m by data set)."""
    from hydra import compose, initialize_config_dir

    from lgcexp.config import plan

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"dataset={dataset}", "algo=siis", f"noise.rate={rate}"])
    return plan(cfg).algorithm


def row(base: dict, detector: str, quality, is_issue, suggested, split, extra=None) -> dict:
    m = frames.detection_metrics(quality, is_issue, split.flipped, suggested, split.y_clean)
    return {**base, "detector": detector, **m, **(extra or {})}


def one_run(ctx, dataset: str, noise: str, rate: float, seed: int, with_siis: bool) -> list[dict]:
    from lgcexp.algorithms.autol import AutoL
    from lgcexp.algorithms.propagation import cached_propagation_submatrix
    from lgcexp.labels import sample_and_corrupt

    p, data, graph, cache = ctx
    split = sample_and_corrupt(data.y, p.n_labels, seed=seed, noise=noise_model(noise, rate))
    y, c = split.y_observed, data.n_classes
    X = np.asarray(data.X[split.labeled], dtype=np.float64)
    base = {"dataset": dataset, "noise": noise, "rate": rate, "seed": seed, "n_labeled": split.n_labeled,
            "n_flipped": split.n_flipped}
    rows = []
    t0 = time.perf_counter()
    autol = AutoL().fit(graph, split.labeled, y, c, cache=cache)
    t_fit = time.perf_counter() - t0
    j = autol.label_judgement()
    d = judging.judge(j, y, opts_mod.DetectOptions(), X=X)
    rows.append(row(base, "autoL", d.quality, d.is_issue, d.suggested, split,
                    {"features_used": d.features, "feature_agreement": d.feature_agreement, "fit_seconds": t_fit}))
    g = judging.judge(j, y, opts_mod.DetectOptions(cut="suggested", features=False))
    rows.append(row(base, "autoL, graph only", g.quality, g.is_issue, g.suggested, split))
    cl = cuts.decide(d.probs, y, "prune_by_noise_rate")
    rows.append(row(base, "autoL, confident learning", d.quality, cl, d.suggested, split))
    rows.append(row(base, "autoL, omega <= 0", autol.omega_, autol.omega_ <= 0, autol.labeled_pred_, split))
    # LGC's leave-one-out judgement from the same P_LL (alpha 0.90001 instead of LGC's 0.9)
    P, _ = cached_propagation_submatrix(graph, split.labeled, autol.alpha, cache=cache, solver=autol.solver,
                                        tol=autol.tol, maxiter=autol.maxiter, t=autol.t, dtype=autol.dtype)
    lj = jm.LabelJudgement(probs=jm.graph_loo_probs(P, y, c), source="lgc")
    d = judging.judge(lj, y, opts_mod.DetectOptions(), X=X)
    rows.append(row(base, "lgc", d.quality, d.is_issue, d.suggested, split,
                    {"features_used": d.features, "feature_agreement": d.feature_agreement}))
    b = judging.judge(lj, y, opts_mod.DetectOptions(cut="suggested", features=False))
    rows.append(row(base, "baseline: graph LOO", b.quality, b.is_issue, b.suggested, split))
    kp = views.knn_oof_probs(X, y, c, k=10, folds=5, seed=0)
    rows.append(row(base, "baseline: kNN + CL", jm.label_quality(kp, y), cuts.decide(kp, y, "prune_by_noise_rate"),
                    jm.suggested_labels(kp, y), split))
    if with_siis:
        from lgcexp.spectral import laplacian_eigenpairs

        algo = siis_algorithm(dataset, rate)
        eig, _ = laplacian_eigenpairs(graph, algo.required_eigenpairs(), cache=cache)
        t0 = time.perf_counter()
        algo.fit(graph, split.labeled, y, c, eig=eig, cache=cache)
        d = judging.judge(algo.label_judgement(), y, opts_mod.DetectOptions(), X=X)
        rows.append(row(base, "siis", d.quality, d.is_issue, d.suggested, split,
                        {"features_used": d.features, "feature_agreement": d.feature_agreement,
                         "fit_seconds": time.perf_counter() - t0}))
    return rows


def fmt(mean: float, sd: float, digits: int = 3) -> str:
    return "–" if not np.isfinite(mean) else f"{mean:.{digits}f} ± {sd:.{digits}f}"


def summarize(runs: pd.DataFrame) -> pd.DataFrame:
    out = []
    for (ds, noise, rate, det), g in runs.groupby(["dataset", "noise", "rate", "detector"], sort=False):
        r = {"dataset": ds, "noise": noise, "rate": rate, "detector": det, "n_seeds": g["seed"].nunique()}
        for m in METRICS:
            v = pd.to_numeric(g[m], errors="coerce").astype(float)
            r[m + "_mean"] = v.mean()
            r[m + "_sd"] = v.std(ddof=0)
        out.append(r)
    df = pd.DataFrame(out)
    df["detector"] = pd.Categorical(df["detector"], DETECTORS, ordered=True)
    df["noise"] = pd.Categorical(df["noise"], ["uniform", "pairwise"], ordered=True)
    return df.sort_values(["dataset", "noise", "rate", "detector"]).reset_index(drop=True)


def markdown(summary: pd.DataFrame) -> str:
    lines = ["# Label-issue detection: every method and both baselines",
             "",
             "Mean ± population sd over seeds (`n` seeds). Same labelled points and noisy labels for every detector "
             "in a row group. AUC and AP rank by `label_quality` (ROC AUC / average precision of finding the flipped "
             "labels); P, R, F1: the decision `is_label_issue`; P@k: precision among the k lowest-quality labels, "
             "k = the number of flips; FA: clean labels flagged (count; at 0 % noise also % of the labels); "
             "sugg: share of flipped labels whose suggested label is the clean one. `–`: undefined (no flips). "
             "Made by `scripts/label_issues_table.py`; see docs/label_issues.md.",
             ""]
    for (ds, noise), block in summary.groupby(["dataset", "noise"], sort=False, observed=True):
        lines += [f"## {ds.upper()}, {noise} noise", "",
                  "| noise | detector | n | AUC | AP | P | R | F1 | P@k | FA | sugg |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for _, r in block.iterrows():
            fa = fmt(r["detect_false_alarms_mean"], r["detect_false_alarms_sd"], 1)
            if r["rate"] == 0:
                fa += f" ({100 * r['detect_false_alarm_rate_mean']:.1f} %)"
            cells = [f"{100 * r['rate']:.0f} %", str(r["detector"]), str(int(r["n_seeds"]))]
            cells += [fmt(r[m + "_mean"], r[m + "_sd"]) for m in ("detect_auc", "detect_ap", "detect_precision",
                                                                    "detect_recall", "detect_f1",
                                                                    "detect_precision_at_k")]
            cells += [fa, fmt(r["detect_suggest_acc_mean"], r["detect_suggest_acc_sd"])]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=["isolet", "mnist"])
    ap.add_argument("--noise", nargs="+", default=["uniform", "pairwise"])
    ap.add_argument("--seeds", type=int, default=20, help="seeds 0..N-1 (ISOLET uniform)")
    ap.add_argument("--other-seeds", type=int, default=None,
                    help="seeds for the other (data set, noise) blocks (default: --seeds)")
    ap.add_argument("--siis-seeds", type=int, default=20, help="seeds with SIIS")
    ap.add_argument("--out", default=str(ROOT / "results" / "label_issues"))
    ap.add_argument("--cache-dir", default=os.environ.get("LGCEXP_CACHE_DIR", "~/.cache/lgcexp/cache"))
    ap.add_argument("--data-dir", default=os.environ.get("LGCEXP_DATA_DIR", "~/.cache/lgcexp/data"))
    ap.add_argument("--summary-only", action="store_true", help="rebuild the table from the runs file")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs_path = out / "detection_runs.csv"
    runs = pd.read_csv(runs_path) if runs_path.exists() else pd.DataFrame(columns=KEY)
    t_start = time.perf_counter()
    if not args.summary_only:
        for ds in args.datasets:
            ctx = None
            for noise in args.noise:
                n_seeds = (args.seeds if (ds, noise) == ("isolet", "uniform") or args.other_seeds is None
                           else args.other_seeds)
                for seed in range(n_seeds):
                    for rate in RATES[(ds, noise)]:
                        done = runs[(runs["dataset"] == ds) & (runs["noise"] == noise) & (runs["rate"] == rate)
                                    & (runs["seed"] == seed)] if len(runs) else runs
                        with_siis = seed < args.siis_seeds
                        want = len(DETECTORS) - (0 if with_siis else 1)
                        if len(done) >= want:
                            continue
                        if ctx is None:
                            ctx = setup(ds, os.path.expanduser(args.cache_dir), os.path.expanduser(args.data_dir))
                        t0 = time.perf_counter()
                        new = one_run(ctx, ds, noise, rate, seed, with_siis)
                        runs = pd.concat([runs[~runs.index.isin(done.index)], pd.DataFrame(new)], ignore_index=True)
                        runs.to_csv(runs_path, index=False)
                        print(f"{ds} {noise} rate={rate:g} seed={seed}: {time.perf_counter() - t0:.1f}s", flush=True)
    summary = summarize(runs)
    summary.to_csv(out / "detection_table.csv", index=False)
    (out / "detection_table.md").write_text(markdown(summary))
    if not args.summary_only:
        prov = out / "PROVENANCE.md"
        line = (f"- {datetime.now(timezone.utc).isoformat(timespec='seconds')}: `python scripts/label_issues_table.py "
                f"{' '.join(sys.argv[1:])}` on {platform.node()} ({platform.machine()}, {os.cpu_count()} CPUs, "
                f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}): "
                f"{time.perf_counter() - t_start:.0f} s wall\n")
        with open(prov, "a") as fh:
            if fh.tell() == 0:
                fh.write("# Provenance of results/label_issues\n\nEach invocation of scripts/label_issues_table.py "
                         "(runs already in detection_runs.csv are kept):\n\n")
            fh.write(line)
    print((out / "detection_table.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
