"""``find_label_issues(labels, pred_probs=...)`` on real human label noise (CIFAR-10N), against self-confidence's
best threshold and confident learning's default cut measured in the same run. Not a test.

For every ``*.npz`` in ``--data`` (arrays ``pred_probs``, ``labels``, ``true_labels``; the truth is
``labels != true_labels``), rows:

- ``lgcexp pred_probs``: ``find_label_issues(labels=labels, pred_probs=pred_probs)`` with its defaults (ranked by
  self-confidence, flags = the estimated number of wrong labels, :mod:`lgcexp.issues.count`);
- ``self-confidence, best threshold``: the best F1 of any cut of the same ranking (it needs the truth: the
  ceiling of a cut on this ranking);
- ``confident learning, prune_by_noise_rate``: lgcexp's own :func:`lgcexp.issues.cuts.confident_learning`
  (cleanlab's default filter), ranked by self-confidence.

Columns: F1, AUPRC (average precision of the ranking), flagged, the estimated count, the truth. A second table
lists the counts of wrong labels each estimator makes without the truth (docs/label_issues.md#count). Writes
``pred_probs.md`` / ``pred_probs.json`` under ``--out``.

    python -m benchmarks pred_probs [--data /work/shared/data/cifar10n] [--out results/bench]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from benchmarks.common import OUT, header, write_report


def f1_of(flag: np.ndarray, wrong: np.ndarray) -> float:
    tp = int((flag & wrong).sum())
    return 2 * tp / (int(flag.sum()) + int(wrong.sum())) if flag.any() or wrong.any() else 0.0


def best_threshold_f1(score: np.ndarray, wrong: np.ndarray) -> tuple[float, int]:
    """The best F1 of flagging the k lowest scores, over every k (needs the truth), and that k."""
    order = np.argsort(score, kind="stable")
    tp = np.cumsum(wrong[order])
    k = np.arange(1, score.size + 1)
    f1 = 2 * tp / (k + wrong.sum())
    i = int(f1.argmax())
    return float(f1[i]), i + 1


def counts(P: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """Every count of wrong labels measured (none reads the truth)."""
    from lgcexp.issues.count import calibrate_temperature, estimate_wrong_labels
    from lgcexp.issues.cuts import estimate_issues

    Q, T = calibrate_temperature(P, y)
    rows = np.arange(y.size)
    return {"majority joint, calibrated (lgcexp)": estimate_wrong_labels(P, y),
            "confident learning's calibrated joint": estimate_issues(P, y),
            "argmax disagrees with the label": int((P.argmax(axis=1) != y).sum()),
            "sum of (1 - p_given)": float((1 - P[rows, y]).sum()),
            "sum of (1 - p_given), calibrated": float((1 - Q[rows, y]).sum()),
            "sum of (1 - p_max), calibrated": float((1 - Q.max(axis=1)).sum()),
            "temperature": T}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="/work/shared/data/cifar10n", help="folder of npz sets")
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args(argv)
    from sklearn.metrics import average_precision_score

    from lgcexp import find_label_issues
    from lgcexp.issues.cuts import confident_learning

    sets = sorted(Path(a.data).glob("*.npz"))
    if not sets:
        raise SystemExit(f"--data {a.data}: no .npz set there")
    report = {**header(), "sets": {}}
    md = [f"# find_label_issues(labels, pred_probs=...) on {a.data}", "", f"{report['date']}, {report['machine']}",
          "", "| set | rule | F1 | AUPRC | flagged | estimated | wrong (truth) |", "|---|---|---|---|---|---|---|"]
    md_counts = ["", "## Counts of wrong labels made without the truth", ""]
    for path in sets:
        z = np.load(path)
        P, y = z["pred_probs"].astype(np.float64), z["labels"].astype(np.int64)
        wrong = y != z["true_labels"].astype(np.int64)
        self_conf = P[np.arange(y.size), y]
        ap_self = float(average_precision_score(wrong, -self_conf))
        df = find_label_issues(labels=y, pred_probs=z["pred_probs"]).sort_values("index")
        flag = df["is_label_issue"].to_numpy()
        ours = {"f1": f1_of(flag, wrong), "auprc": float(average_precision_score(wrong, -df["label_quality"])),
                "flagged": int(flag.sum()), "estimated": int(df.attrs["estimated_issues"])}
        best, k_best = best_threshold_f1(self_conf, wrong)
        cl = confident_learning(P, y, filter_by="prune_by_noise_rate")
        rows = {"lgcexp pred_probs (default)": ours,
                "self-confidence, best threshold (needs the truth)": {"f1": best, "auprc": ap_self, "flagged": k_best},
                "confident learning, prune_by_noise_rate": {"f1": f1_of(cl, wrong), "auprc": ap_self,
                                                            "flagged": int(cl.sum())}}
        est = counts(P, y)
        report["sets"][path.stem] = {"rows": rows, "counts": est, "wrong": int(wrong.sum()), "n": int(y.size),
                                     "f1_gap_to_best": best - ours["f1"], "auprc_gap": ap_self - ours["auprc"]}
        for rule, r in rows.items():
            md.append(f"| {path.stem} | {rule} | {r['f1']:.3f} | {r['auprc']:.3f} | {r['flagged']:,} | "
                      f"{r.get('estimated', '')} | {int(wrong.sum()):,} |")
        md_counts += [f"{path.stem}: {int(wrong.sum()):,} of {y.size:,} labels wrong", "",
                      "| estimator | count | / truth |", "|---|---|---|"]
        md_counts += [f"| {k} | {v:,.0f} | {v / wrong.sum():.2f} |" for k, v in est.items() if k != "temperature"]
        md_counts += [f"| (temperature fitted to the given labels) | {est['temperature']:.3f} | |", ""]
        print(f"{path.stem}: F1 {ours['f1']:.3f} (best {best:.3f}), AUPRC {ours['auprc']:.3f} (self-confidence "
              f"{ap_self:.3f}), flagged {ours['flagged']} of {int(wrong.sum())} wrong", flush=True)
    write_report(a.out, "pred_probs", report, "\n".join(md + md_counts) + "\n")
    print(f"wrote {Path(a.out) / 'pred_probs.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
