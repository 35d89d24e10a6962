"""Every label of a fully labelled data set judged without P_LL (lgcexp.solvers.diagonal). Not a test.

Fully labelled MNIST (70,000 points, every label given, ``--rate`` of them flipped by ``--noise``): the 10-NN
graph (built, not read from a cache), LGC's solve, its leave-one-out by one solve and the probed diagonal
(:func:`lgcexp.algorithms.lgc.lgc_loo_probs`), the feature view and the default cut (:func:`lgcexp.issues.judge.judge`),
each timed; the peak RSS of the process (``getrusage``; run it under ``/usr/bin/time -v`` to see the same).

Baseline in the same run: on ``--baseline-labels`` labelled points (sampled, same graph) the dense P_LL path
(the one ``find_label_issues`` took until now) against the exact and probed diagonals: seconds and the
largest difference in the leave-one-out distribution.

    /usr/bin/time -v python -m benchmarks loo_scale                    # writes results/bench/loo_scale.json
    python -m benchmarks loo_scale --npz infimnist_1m.npz --baseline-labels 0
"""
from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

import numpy as np

from benchmarks.common import OUT


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--npz", default=None, help="X, y in an .npz (default: MNIST from LGCEXP_DATA_DIR)")
    ap.add_argument("--noise", default="uniform")
    ap.add_argument("--rate", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--alpha", type=float, default=0.9)
    ap.add_argument("--distance", type=int, default=3)
    ap.add_argument("--baseline-labels", type=int, default=1000)
    ap.add_argument("--out", default=str(OUT / "loo_scale.json"))
    a = ap.parse_args(argv)

    from lgcexp.algorithms.lgc import lgc_loo_probs
    from lgcexp.algorithms.propagation import propagation_submatrix
    from lgcexp.graph import build_graph
    from lgcexp.issues.frames import detection_metrics
    from lgcexp.issues.judge import judge
    from lgcexp.issues.judgement import LabelJudgement, graph_loo_probs
    from lgcexp.issues.views import choose_feature_model
    from lgcexp.labels import sample_labeled
    from lgcexp.noise import make_noise

    out: dict = {"args": vars(a), "seconds": {}}
    t = time.perf_counter()
    if a.npz:
        z = np.load(a.npz)
        X, y = z["X"], z["y"].astype(np.int64)
        name = Path(a.npz).stem
    else:
        from lgcexp.data.mnist import load
        from lgcexp.locations import default_dir

        d = load(Path(default_dir("data")).expanduser(), False)
        X, y, name = d.X, d.y, "mnist"
    c = int(y.max()) + 1
    n = y.size
    out.update(dataset=name, n=n, classes=c)
    out["seconds"]["load"] = time.perf_counter() - t
    t = time.perf_counter()
    y_obs, flipped = make_noise(a.noise, rate=a.rate).corrupt(y, c, a.seed, X=X)
    out["seconds"]["noise"] = time.perf_counter() - t
    t = time.perf_counter()
    g, _ = build_graph(X, k=10, sigma="mean", cache=None)
    out["seconds"]["graph"] = time.perf_counter() - t
    out["edges"] = int(g.n_edges)
    labeled = np.arange(n)

    if a.baseline_labels:
        lab = sample_labeled(y, a.baseline_labels, a.seed)
        base: dict = {"labels": int(lab.size)}
        t = time.perf_counter()
        P, _ = propagation_submatrix(g.S, lab, a.alpha, dtype="float32")
        ref = graph_loo_probs(P, y_obs[lab], c)
        base["dense_seconds"] = time.perf_counter() - t
        del P
        for how in ("exact", "probe"):
            t = time.perf_counter()
            pr, st = lgc_loo_probs(g.S, lab, y_obs[lab], c, a.alpha, diagonal=how, distance=a.distance)
            base[f"{how}_seconds"] = time.perf_counter() - t
            base[f"{how}_max_diff"] = float(np.abs(pr - ref).max())
            base[f"{how}_argmax_changed"] = int((pr.argmax(1) != ref.argmax(1)).sum())
        out["baseline"] = base
        print(json.dumps(base), flush=True)

    t = time.perf_counter()
    probs, st = lgc_loo_probs(g.S, labeled, y_obs, c, a.alpha, diagonal="probe", distance=a.distance, progress=False)
    out["seconds"]["loo"] = time.perf_counter() - t
    out["loo_stats"] = st
    t = time.perf_counter()
    model = choose_feature_model(n, n)  # every point labelled: the default feature view of a diagnosis run
    judged = judge(LabelJudgement(probs=probs, source="lgc"), y_obs, None, X=np.asarray(X, dtype=np.float64),
                   feature_model=model)
    out["seconds"]["judge"] = time.perf_counter() - t
    out["seconds"]["total_after_load"] = sum(v for k, v in out["seconds"].items() if k not in ("load", "noise"))
    out["metrics"] = detection_metrics(judged.quality, judged.is_issue, flipped, judged.suggested, y)
    out["feature_view"] = {"model": model, "used": judged.features, "agreement": judged.feature_agreement}
    out["estimated_issues"] = judged.estimated_issues
    out["n_flipped"] = int(flipped.sum())
    out["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1, default=float))
    print(json.dumps(out, indent=1, default=float))
