"""The count of wrong labels and the flags at low noise rates (0.5-5 %, every point labelled) beside 10-40 %.
Not a test.

Per data set (``digits``: scikit-learn's; ``isolet``: lgcexp's data directory; ``mnist_test``: MNIST's 10,000
test images, judged with the image view, :mod:`lgcexp.issues.image_view`), noise model (uniform, idn,
confusion), rate and seed, the same noisy labels judged by:

- ``lgcexp``: ``find_label_issues(X, labels)``'s stages and defaults (the graph's leave-one-out and the
  out-of-fold feature view — the image view where the rows are images —, ``cut=auto``, which is ``count``
  where every point is labelled: the estimate's lowest-quality labels), and the same views cut by
  ``consensus`` (the default before) and by the count's own rule (``clear``: every view names the same other
  class clearly, :func:`lgcexp.issues.count.clear_classes`);
- ``graph alone``: the same fit's leave-one-out without the feature view (``cut=suggested``);
- ``10-NN + CL``: out-of-fold 10-NN frequencies with confident learning's ``prune_by_noise_rate``;
- ``view + CL``: the tool's own feature view (its out-of-fold probabilities) with confident learning's
  ``prune_by_noise_rate``.

Columns: F1 of each, the estimated count (``estimated_issues``, :mod:`lgcexp.issues.count`), the majority count
alone (``estimated_majority``: the count before the fitted uniform rate), the count with every view calibrated by
temperature alone (``estimated_temperature``, the rule before calibration under noise; in the CSV) and the truth.
A second table: the flagged labels that were flipped and those that were clean, and how many of each
``issue_type`` calls ``wrong``. Writes ``low_rates.csv`` and ``low_rates.md`` (means over seeds per cell) under
``--out``.

    python -m benchmarks low_rates [--datasets digits isolet] [--rates 0.005 0.01 ...] [--seeds 1]
"""
from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import numpy as np

from benchmarks.common import OUT, load, write_rows

RATES = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.4)
NOISES = ("uniform", "idn", "confusion")


def f1_of(flag: np.ndarray, wrong: np.ndarray) -> float:
    tp = int((flag & wrong).sum())
    return 2 * tp / (int(flag.sum()) + int(wrong.sum())) if flag.any() or wrong.any() else 0.0


def flags(df, n: int) -> np.ndarray:
    out = np.zeros(n, dtype=bool)
    out[df["index"].to_numpy()] = df["is_label_issue"].to_numpy()
    return out


#: data sets whose rows are images: their shape
IMAGE_SHAPES = {"mnist_test": (28, 28)}


def load_cells(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(X, y) of ``name``: :func:`benchmarks.common.load`, ``mnist_test``: MNIST's last 10,000 points."""
    if name == "mnist_test":
        X, y = load("mnist")
        return X[-10_000:], y[-10_000:]
    return load(name)


def _cached_views(dump: Path | None, y_obs: np.ndarray, wrong: np.ndarray):
    """(evidence, feature view or None, seconds, feature model) of a cell's earlier ``--dump`` when it holds the
    same labels, else None (a dump of other labels, or one without the fit's time, is refitted)."""
    if dump is None or not dump.is_file():
        return None
    with np.load(dump) as z:
        if "seconds" not in z or not (np.array_equal(z["y_obs"], y_obs) and np.array_equal(z["wrong"], wrong)):
            return None
        fp = z["feature_view"]
        return z["evidence"], (fp if fp.size else None), float(z["seconds"]), str(z["feature_model"])


def judge_cell(X: np.ndarray, y_obs: np.ndarray, wrong: np.ndarray, image_shape: tuple | None = None,
               dump: Path | None = None) -> dict:
    """Every rule on one fit: the command's stages with ``find_label_issues``' defaults for a fully labelled
    set (LGC on the kNN graph, the out-of-fold feature view), the cuts applied to the same views. ``dump``: an
    npz path that receives the fit's views (``evidence``, ``feature_view``), ``y_obs``, ``wrong``, the fit's
    ``seconds`` and ``feature_model``, for studying cuts and counts offline; where it already holds this cell's
    views (same labels) they are read instead of refitted: the fit is deterministic, so the row is the one a
    refit gives, with the refit's time as recorded (every rule after the views is recomputed)."""
    from lgcexp import find_label_issues
    from lgcexp.algorithms import make_algorithm
    from lgcexp.graph.knn import KnnGraph
    from lgcexp.issues.count import clear_classes, count_cut, estimate_wrong_labels, majority_count
    from lgcexp.issues.cuts import decide
    from lgcexp.issues.find import default_method
    from lgcexp.stages import fit_on_graph

    n, c = y_obs.size, int(y_obs.max()) + 1
    labeled = np.arange(n)
    cached = _cached_views(dump, y_obs, wrong)
    if cached is not None:  # the same fit's views, written by an earlier run of this cell
        from lgcexp.issues.judge import judge
        from lgcexp.issues.judgement import LabelJudgement

        evidence, fp, seconds, model = cached
        J = judge(LabelJudgement(probs=evidence, leave_one_out=evidence), y_obs, view=fp, every_point_labelled=True)
        J = dataclasses.replace(J, feature_model=model if fp is not None else None)
    else:
        t0 = time.perf_counter()
        J = fit_on_graph(KnnGraph(k=10, sigma="mean"), make_algorithm(default_method(n, n), {}), X, labeled, y_obs,
                         c, features=X, image_shape=image_shape).issues
        seconds = time.perf_counter() - t0
    if dump is not None and cached is None:
        dump.parent.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(dump, evidence=J.evidence, y_obs=y_obs, wrong=wrong,
                            feature_view=J.feature_view if J.features else np.zeros((0, c)), seconds=seconds,
                            feature_model=str(J.feature_model or ""))
    views = [J.evidence] + ([J.feature_view] if J.features else [])
    named = clear_classes(views, y_obs)
    clear = (named >= 0) & (named != y_obs)
    knn = find_label_issues(X, y_obs, method="knn", cut="prune_by_noise_rate").sort_values("index")
    view_cl = decide(J.feature_view, y_obs, "prune_by_noise_rate") if J.features else None
    consensus = decide(J.probs, y_obs, "consensus", evidence=J.evidence)
    return {"cut": J.cut, "f1_lgcexp": f1_of(J.is_issue, wrong),
            "f1_lgcexp_count": f1_of(count_cut(J.probs, y_obs, J.estimated_issues), wrong),
            "f1_lgcexp_consensus": f1_of(consensus, wrong), "flagged_consensus": int(consensus.sum()),
            "f1_lgcexp_clear": f1_of(clear, wrong),
            "f1_graph_alone": f1_of(decide(J.evidence, y_obs, "suggested"), wrong),
            "f1_knn_cl": f1_of(knn["is_label_issue"].to_numpy(), wrong),
            "f1_view_cl": f1_of(view_cl, wrong) if J.features else float("nan"), "feature_model": J.feature_model,
            # candidate counts: confident learning's on the feature view alone, and the smaller of the two
            "estimated_view_cl": int(view_cl.sum()) if J.features else -1,
            "f1_count_view_cl": f1_of(count_cut(J.probs, y_obs, int(view_cl.sum())), wrong) if J.features else
            float("nan"),
            "f1_count_min": f1_of(count_cut(J.probs, y_obs, min(int(view_cl.sum()), J.estimated_issues)), wrong)
            if J.features else float("nan"),
            "flagged": int(J.is_issue.sum()), "flagged_clear": int(clear.sum()), "estimated": int(J.estimated_issues),
            # the count as it was before calibration under noise (every view by temperature alone): the baseline
            "estimated_temperature": estimate_wrong_labels(views, y_obs, under_noise=False),
            # the majority count alone (the count before the fitted uniform rate, lgcexp.issues.count point 3)
            "estimated_majority": majority_count(views, y_obs),
            "truth": int(wrong.sum()), "feature_view": bool(J.features),
            # wrong versus ambiguous: how the flipped and the clean flagged labels are typed
            "flipped_flagged": int((J.is_issue & wrong).sum()),
            "flipped_typed_wrong": int(((J.issue_type == "wrong") & wrong).sum()),
            "clean_flagged": int((J.is_issue & ~wrong).sum()),
            "clean_typed_wrong": int(((J.issue_type == "wrong") & ~wrong).sum()), "seconds": seconds}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=["digits", "isolet"])
    ap.add_argument("--noises", nargs="+", default=list(NOISES))
    ap.add_argument("--rates", nargs="+", type=float, default=list(RATES))
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--first-seed", type=int, default=0, help="resume: the first seed to run")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--no-image-view", action="store_true",
                    help="judge image data with the network on principal axes (the view before the image view)")
    ap.add_argument("--dump", default=None, help="a folder receiving each cell's views as npz (offline study)")
    a = ap.parse_args(argv)
    from lgcexp.noise import make_noise

    rows = []
    for name in a.datasets:
        X, y = load_cells(name)
        c = int(y.max()) + 1
        for noise in a.noises:
            for rate in a.rates:
                for seed in range(a.first_seed, a.seeds):
                    y_obs, flipped = make_noise(noise, rate=rate).corrupt(y, c, seed, X=X)
                    r = {"dataset": name, "noise": noise, "rate": rate, "seed": seed,
                         **judge_cell(X, np.asarray(y_obs), np.asarray(flipped, dtype=bool),
                                      None if a.no_image_view else IMAGE_SHAPES.get(name),
                                      None if a.dump is None else
                                      Path(a.dump) / f"{name}_{noise}_{rate:g}_{seed}.npz")}
                    rows.append(r)
                    print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()}, flush=True)
                    write_rows(rows, Path(a.out) / "low_rates.csv")
    write_md(rows, Path(a.out) / "low_rates.md")
    print(f"wrote {Path(a.out) / 'low_rates.md'}")
    return 0


def write_md(rows: list[dict], path: Path) -> None:
    """``low_rates.md``: per data set, one table of means over seeds per (noise, rate) cell (its heading
    ``## low rates, <data set> (<k> seeds)`` names a docs block, scripts/reproduce_detection.py), then the
    wrong-versus-ambiguous totals."""
    md = ["# Counts and flags at low noise rates (every point labelled)", "",
          "Means over seeds (`python -m benchmarks low_rates`; rebuilt from the rows by "
          "scripts/reproduce_detection.py).", ""]
    noises = list(dict.fromkeys(r["noise"] for r in rows))
    for name in dict.fromkeys(r["dataset"] for r in rows):
        mine = [r for r in rows if r["dataset"] == name]
        seeds = len({r["seed"] for r in mine})
        md += [f"## low rates, {name} ({seeds} seed{'' if seeds == 1 else 's'})", "",
               "| noise | rate | truth | estimated | / truth | majority count / truth "
               "| F1 default (cut at the count) | flagged (consensus) | F1 consensus | F1 graph alone | F1 10-NN + CL "
               "| F1 view + CL |",
               "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        keys = sorted({(r["noise"], r["rate"]) for r in mine}, key=lambda k: (noises.index(k[0]), k[1]))
        for key in keys:
            cell = [r for r in mine if (r["noise"], r["rate"]) == key]
            m = {k: float(np.mean([r[k] for r in cell])) for k in cell[0]
                 if isinstance(cell[0][k], (int, float, np.integer, np.floating)) and not isinstance(cell[0][k], bool)}
            t = max(m["truth"], 1)
            old = f"{m['estimated_majority'] / t:.2f}" if "estimated_majority" in m else "–"
            md.append(f"| {key[0]} | {key[1]:g} | {m['truth']:.0f} | {m['estimated']:.0f} | {m['estimated'] / t:.2f} | "
                      f"{old} | {m['f1_lgcexp']:.3f} | {m['flagged_consensus']:.0f} | {m['f1_lgcexp_consensus']:.3f} | "
                      f"{m['f1_graph_alone']:.3f} | {m['f1_knn_cl']:.3f} | {m['f1_view_cl']:.3f} |")
        md.append("")
    md += ["## Wrong versus ambiguous (issue_type of the flagged labels, summed over the cells)", "",
           "| data | flipped labels flagged | of them typed wrong | clean labels flagged | of them typed wrong |",
           "|---|---|---|---|---|"]
    for name in dict.fromkeys(r["dataset"] for r in rows):
        tot = {k: sum(int(r[k]) for r in rows if r["dataset"] == name) for k in
               ("flipped_flagged", "flipped_typed_wrong", "clean_flagged", "clean_typed_wrong")}
        md.append(f"| {name} | {tot['flipped_flagged']} | {tot['flipped_typed_wrong']} "
                  f"({tot['flipped_typed_wrong'] / max(tot['flipped_flagged'], 1):.0%}) | {tot['clean_flagged']} | "
                  f"{tot['clean_typed_wrong']} ({tot['clean_typed_wrong'] / max(tot['clean_flagged'], 1):.0%}) |")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(md) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
