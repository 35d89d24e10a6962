"""Diagnosis runs: your own data, with labels nobody has checked.

A data set that carries its own labelled set (``Dataset.labeled`` / ``Dataset.y_observed``, from the
``csv``, ``npy`` or ``npz`` sources) is run as given: no labels are sampled and no noise is added. The
options that only shape sampling and noise (``labels.n``, ``noise.*``, ``seed``) play no part; when set
they are logged as unused and recorded under ``not_used`` (they are not refused, so one sweep can cover
built-in and own data).

There are usually no clean labels to score against, so the record holds no accuracy against truth. When
the file also has trusted clean labels (a benchmark: ``dataset.clean_column``, ``y_clean``, ...), they are
used for scoring only, over the points that have one, and never reach the algorithm.

What a diagnosis run adds to the usual record (``result.json``):

- ``mode``: ``"diagnosis"`` (every other run: ``"sampled"``); ``note``: what was and was not measured;
- ``truth``: ``"none"``, ``"partial"`` or ``"all"``: the points with a trusted label;
- ``noise``, ``noise_rate``: null (no noise was added); ``not_used``: options set that played no part;
- ``classes``: the label values as the file spells them (class k is ``classes[k]``);
- ``n_disagree``: given labels the method's labelled prediction disagrees with (candidates for a check);
- ``label_issue_report``: the files written by :func:`report_label_issues` (``label_issues.csv``, the
  main output: which given labels look wrong and what they should be, and ``label_issues.png``) and, for
  image data, ``label_issue_pages.pdf`` (every flag beside its neighbours; :func:`report_pages`);
- ``label_issue_pages``: what that PDF holds (flags shown of flagged, pages, the cap), null where none;
- ``n_label_issues``: the labels flagged (``detect_*`` when the file has trusted labels);
- ``data_issue_report``, ``data_issues``: the data audit's files (``data_issues.csv``: outliers and
  near-duplicates of every point, lgcexp.issues.data_audit; ``suspicious_examples.png`` for image-shaped data)
  and its counts.

Outputs: ``label_issues.csv`` and ``label_issues.png`` (methods that judge labels: lgc, autoL, auto, siis;
docs/label_issues.md), ``predictions.csv`` (every point: ``index``, ``predicted`` in the file's label values,
``confidence``, ``score``, ``given_label``, and ``clean_label`` when there is truth), ``labels.csv`` (the
given labels: ``index``, ``observed_label``, ``predicted``, [``clean_label``, ``flipped``], then the
method's per-label columns), and ``result.json`` last.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..labels import LabelSplit, given_labels
from ..params import fmt_value
from ..records import LABELS_FILE, RESULT_FILE, write_json, write_labels_csv

log = logging.getLogger("lgcexp")

MODE = "diagnosis"
PREDICTIONS_FILE = "predictions.csv"


@dataclass(frozen=True)
class GivenLabels:
    """The labels a file came with: ``labeled`` point indices, ``y`` their given labels as class numbers
    0..c-1, ``classes`` the file's label values (class k is ``classes[k]``), ``y_clean`` the trusted class
    number of each labelled point where the file has one, else -1."""

    labeled: np.ndarray
    y: np.ndarray
    classes: np.ndarray
    y_clean: np.ndarray

    @property
    def values(self) -> np.ndarray:
        """The given labels as the file spells them."""
        return self.classes[self.y]


ISSUES_FIGURE = "label_issues.png"


def report_label_issues(issues: Any, given: GivenLabels, out_dir: Path, flipped: np.ndarray | None = None) -> list[str]:
    """The label-issue report of a diagnosis run: its main output.

    ``issues``: the judgement (:class:`lgcexp.issues.judge.JudgedLabels`; None for a method that does not
    judge labels: nothing is written). Writes ``label_issues.csv`` (one row per given label, the flagged ones
    first, most suspicious first, labels in the file's own values; ``is_flipped`` where the file has trusted
    labels, empty where a row has none) and ``label_issues.png`` (the histogram of the label quality, flagged
    and kept labels stacked, and the counts of given vs suggested labels among the flagged ones). Returns the
    names of the files written, recorded as ``label_issue_report`` in ``result.json``."""
    if issues is None:
        return []
    from ..records import write_table
    from .frames import ISSUES_FILE, issues_frame

    known = given.y_clean >= 0
    is_flipped = None
    if known.any():
        is_flipped = np.full(given.y.size, None, dtype=object)
        is_flipped[known] = (given.y_clean != given.y)[known]
        if known.all():
            is_flipped = is_flipped.astype(bool)
    frame = issues_frame(given.labeled, given.classes[given.y], given.classes[issues.suggested], issues.quality,
                         issues.is_issue, is_flipped, issues.issue_probability, issues.issue_type)
    write_table(Path(out_dir) / ISSUES_FILE, frame)
    written = [ISSUES_FILE]
    try:
        plot_label_issues(issues, given, Path(out_dir) / ISSUES_FIGURE)
        written.append(ISSUES_FIGURE)
    except Exception as exc:  # a figure must never cost the report
        log.warning("label_issues.png not written: %s", exc)
    return written


def report_label_evidence(issues: Any, given: GivenLabels, out_dir: Path, graph: Any = None) -> str | None:
    """``label_issue_evidence.csv``: why each flagged label was flagged (:func:`lgcexp.issues.explain.evidence_frame`;
    the voting neighbours from ``graph``). Returns the file's name, recorded as ``label_issue_evidence`` in
    ``result.json``; None where nothing is flagged or the method does not judge labels."""
    if issues is None or not issues.is_issue.any():
        return None
    from ..records import write_table
    from .explain import EVIDENCE_FILE, evidence_frame

    write_table(Path(out_dir) / EVIDENCE_FILE, evidence_frame(issues, given.labeled, given.y, given.classes,
                                                              None if graph is None else graph.W))
    return EVIDENCE_FILE


def report_pages(issues: Any, given: GivenLabels, data: Any, out_dir: Path, graph: Any = None) -> dict[str, Any] | None:
    """``label_issue_pages.pdf`` for image data (:func:`image_shape`): every flag beside its nearest labelled
    neighbours of the given and of the suggested class (:mod:`lgcexp.issues.pages`). Returns what
    ``result.json`` records as ``label_issue_pages`` (file, flags shown of flagged, pages, the cap); None for
    other data, where nothing is flagged or the method does not judge labels, or where the PDF failed (logged:
    a picture must never cost the report)."""
    shape = image_shape(data)
    if issues is None or shape is None or not np.any(issues.is_issue):
        return None
    from .pages import PAGES_FILE, report_issue_pages

    try:
        return report_issue_pages(issues, given.labeled, given.y, given.classes, data.X, shape,
                                  None if graph is None else graph.W, Path(out_dir) / PAGES_FILE)
    except Exception as exc:  # a picture must never cost the report
        log.warning("%s not written: %s", PAGES_FILE, exc)
        return None


SUSPICIOUS_FIGURE = "suspicious_examples.png"


def report_data_issues(p: Any, data: Any, split: LabelSplit, issues: Any, features: Any, out: Path,
                       result: dict[str, Any], graph: Any = None) -> list[str]:
    """``data_issues.csv`` (outliers and near-duplicates of every point, from the kNN lists of the graph's
    features with the graph's k: the graph's own exact lists where it keeps them, ``graph.neighbors``, else
    searched here) and, for image-shaped data, ``suspicious_examples.png``; the counts go to
    ``result["data_issues"]``. Returns the names of the files written."""
    from ..records import write_table
    from . import data_audit as di

    k = int(getattr(p.graph, "k", 10) or 10)
    lists = getattr(graph, "neighbors", None) if graph is not None else None
    knn = (lists[0][:, :k], lists[1][:, :k]) if lists is not None and lists[0].shape[1] >= k else None
    audit = di.find_data_issues(np.asarray(features), k=k, knn=knn)
    source = "searched" if knn is None else "the graph's exact lists" if graph.neighbors_exact else \
        f"the graph's approximate lists ({p.graph.name}; recall in result.json's graph section)"
    write_table(Path(out) / di.DATA_ISSUES_FILE, audit.frame())
    result["data_issues"] = {**audit.summary(), "knn_lists": source}
    log.info("data issues: %d outliers, %d near-duplicates in %d sets (%s)", result["data_issues"]["n_outliers"],
             result["data_issues"]["n_near_duplicates"], result["data_issues"]["n_near_duplicate_sets"],
             di.DATA_ISSUES_FILE)
    written = [di.DATA_ISSUES_FILE]
    shape = image_shape(data)
    if shape is not None:
        try:
            if plot_suspicious(data, shape, split, issues, audit, np.asarray(p.algorithm.predict()),
                               Path(out) / SUSPICIOUS_FIGURE):
                written.append(SUSPICIOUS_FIGURE)
        except Exception as exc:  # a figure must never cost the report
            log.warning("%s not written: %s", SUSPICIOUS_FIGURE, exc)
    return written


def image_shape(data: Any) -> tuple[int, ...] | None:
    """The image shape of a data set's rows: one the data set records (``image_shape``), else a square
    when the dimension is a perfect square of at least 4 x 4; None for other data."""
    shape = getattr(data, "image_shape", None)
    if shape is not None:
        return tuple(int(v) for v in shape)
    d = int(data.X.shape[1])
    s = int(round(np.sqrt(d)))
    return (s, s) if s * s == d and s >= 4 else None


def suspicious_rows(split: LabelSplit, issues: Any, audit: Any,
                    per_row: int = 10) -> list[tuple[str, list[tuple[int, str]]]]:
    """The rows of ``suspicious_examples.png`` as (row label, [(data row, score text)]): the first ``per_row``
    flagged labels in the order of ``label_issues.csv`` (``q=`` their quality to three significant digits),
    the flagged outliers by decreasing score (``z=``), the first near-duplicate sets (two members each); a
    finding with nothing flagged has no row."""
    from .explain import table_order
    from .pages import format_quality

    rows: list[tuple[str, list[tuple[int, str]]]] = []
    if issues is not None:
        n_flag = int(np.sum(issues.is_issue))
        order = table_order(split.labeled, issues.quality, issues.is_issue, issues.issue_type)[:min(n_flag, per_row)]
        if order.size:
            rows.append((f"label issues\n(first {order.size} of {n_flag})",
                         [(int(split.labeled[i]), f"q={format_quality(issues.quality[i])}") for i in order]))
    outliers = np.flatnonzero(audit.is_outlier)
    if outliers.size:
        top = outliers[np.argsort(-audit.outlier_score[outliers], kind="stable")][:per_row]
        rows.append((f"outliers\n({top.size} of {outliers.size})",
                     [(int(i), f"z={audit.outlier_score[i]:.1f}") for i in top]))
    dup = []
    sets = audit.near_duplicate_set
    all_sets = np.unique(sets[sets >= 0])
    for s in all_sets[: per_row // 2]:
        members = np.flatnonzero(sets == s)[:2]
        dup += [(int(i), f"set {s}") for i in members]
    if dup:
        rows.append((f"near-duplicates\n({min(all_sets.size, per_row // 2)} of {all_sets.size} sets)", dup))
    return rows


def plot_suspicious(data: Any, shape: tuple[int, ...], split: LabelSplit, issues: Any, audit: Any,
                    predicted: np.ndarray, path: Path, per_row: int = 10) -> bool:
    """``suspicious_examples.png``: raw examples the run flagged, each titled with its index, its score and
    ``given -> suggested`` label, one row per finding: the first ``per_row`` flagged labels in the order of
    ``label_issues.csv`` (their ``label_quality`` to three significant digits; every flag is in
    ``label_issue_pages.pdf``), the strongest flagged outliers (robust z-score), and near-duplicate sets side
    by side. A finding with nothing flagged has no row (the row labels say how many of how many are shown).
    Returns False (nothing written) where nothing at all is flagged."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..cache import atomic_open
    from .pages import FONT, image_tile

    classes = np.asarray(data.classes)
    given = np.full(data.n, -1, dtype=np.int64)
    given[split.labeled] = split.y_observed
    suggested = predicted.copy()
    if issues is not None:
        suggested[split.labeled] = np.asarray(issues.suggested)
    rows = suspicious_rows(split, issues, audit, per_row)
    if not rows:
        return False

    def name(k: int) -> str:
        return "-" if k < 0 else str(classes[k] if classes.size else k)

    fig, axes = plt.subplots(len(rows), per_row, figsize=(1.6 * per_row, 2.1 * len(rows)), squeeze=False)
    for r, (label, items) in enumerate(rows):
        for c in range(per_row):
            ax = axes[r, c]
            ax.set_xticks([])
            ax.set_yticks([])
            if c >= len(items):
                ax.axis("off")
                continue
            i, note = items[c]
            ax.imshow(image_tile(data.X[i], shape), interpolation="nearest")
            ax.set_title(f"#{i} {note}\n{name(given[i])} \u2192 {name(suggested[i])}", fontsize=FONT)
        axes[r, 0].set_ylabel(label, fontsize=FONT)
    fig.suptitle("flagged examples: index, score (q: label quality, z: outlier score), given \u2192 suggested label",
                 fontsize=FONT + 1)
    fig.tight_layout()
    with atomic_open(path) as fh:
        fig.savefig(fh, format="png", dpi=100)
    plt.close(fig)
    return True


def class_order(classes: np.ndarray) -> np.ndarray:
    """The class numbers in the order a reader expects: by value where every label value is a number (also
    numbers written as strings, so "10" comes after "9", not after "1"), else as the classes are numbered."""
    values = np.asarray(classes)
    if values.dtype.kind in "biuf":
        return np.argsort(values, kind="stable")
    try:
        num = np.array([float(v) for v in values], dtype=np.float64)
    except (TypeError, ValueError):
        return np.arange(values.size)
    return np.argsort(num, kind="stable") if np.isfinite(num).all() else np.arange(values.size)


def plot_label_issues(issues: Any, given: GivenLabels, path: Path, max_classes: int = 30) -> None:
    """``label_issues.png``: the label quality of kept and flagged labels (stacked histogram), and the
    confusion of given vs suggested labels among the flagged ones (the classes most involved, at most
    ``max_classes``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..cache import atomic_open

    q = np.asarray(issues.quality)
    flag = np.asarray(issues.is_issue, dtype=bool)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.5))
    bins = np.linspace(0.0, 1.0, 21)
    ax1.hist([q[~flag], q[flag]], bins=bins, stacked=True, color=["#4c72b0", "#dd8452"],
             label=[f"kept ({int((~flag).sum())})", f"flagged ({int(flag.sum())})"])
    ax1.set_xlabel("label quality (share of the evidence for the given label)")
    ax1.set_ylabel("labels")
    ax1.set_title(f"{given.y.size} given labels, {int(flag.sum())} flagged")
    ax1.legend()
    c = given.classes.size
    M = np.zeros((c, c), dtype=np.int64)
    np.add.at(M, (given.y[flag], np.asarray(issues.suggested)[flag]), 1)
    involved = confusion_classes(M, given.classes, max_classes)
    if involved.size:
        sub = M[np.ix_(involved, involved)]
        ax2.imshow(sub, cmap="Oranges", aspect="auto")
        names = [str(v) for v in given.classes[involved]]
        wide = involved.size > 8 and max(len(v) for v in names) > 2
        ax2.set_xticks(range(involved.size), names, rotation=90 if wide else 0, fontsize=9)
        ax2.set_yticks(range(involved.size), names, fontsize=9)
        if involved.size <= 15:
            for (i, j), v in np.ndenumerate(sub):
                if v:
                    ax2.text(j, i, str(v), ha="center", va="center", fontsize=9)
    else:
        ax2.text(0.5, 0.5, "no label flagged", ha="center", va="center", transform=ax2.transAxes)
        ax2.set_xticks([])
        ax2.set_yticks([])
    ax2.set_xlabel("suggested label")
    ax2.set_ylabel("given label")
    ax2.set_title("flagged labels: given vs suggested (classes in order)")
    fig.tight_layout()
    with atomic_open(path) as fh:
        fig.savefig(fh, format="png", dpi=100)
    plt.close(fig)


def confusion_classes(M: np.ndarray, classes: np.ndarray, max_classes: int) -> np.ndarray:
    """The classes of the given-vs-suggested matrix ``M``: those with a flag, at most ``max_classes`` (the most
    involved), in :func:`class_order`."""
    load = M.sum(axis=0) + M.sum(axis=1)
    order = class_order(classes)
    involved = order[load[order] > 0]
    if involved.size > max_classes:
        keep = np.sort(np.argsort(-load[involved], kind="stable")[:max_classes])
        involved = involved[keep]
    return involved


def given_split(p: Any, data: Any) -> LabelSplit:
    """Stage 2 of a diagnosis run: the data's own labelled set as given (logs the options not used). The
    labelled set was checked right after loading (:func:`lgcexp.config.check_labelled_set`: memory, lone
    labels, folds)."""
    split = given_labels(data)
    log.info("diagnosis run: the data's own %d labelled points, as given (nothing sampled, no noise added)",
             split.n_labeled)
    unused = not_used(p)
    if unused:
        log.warning("not used in a diagnosis run (the data carries its own labels): %s",
                    ", ".join(f"{k}={fmt_value(v)}" for k, v in unused.items()))
    return split


def not_used(p: Any) -> dict[str, Any]:
    """The options set for this run that a diagnosis run does not use (sampling and noise)."""
    out: dict[str, Any] = {}
    if p.n_labels is not None:
        out["labels.n"] = p.n_labels
    lab = p.config.get("labels") or {}
    for k in ("per_class", "sets"):
        if lab.get(k) is not None:
            out[f"labels.{k}"] = lab[k]
    if p.noise.name != "uniform" or p.noise.rate_ != 0:
        out["noise"] = p.noise.name
        out.update({f"noise.{k}": v for k, v in p.noise.get_params().items()})
    if p.seed != 0:
        out["seed"] = p.seed
    return out


def _truth(data: Any) -> str:
    known = data.truth_known
    return "all" if known.all() else "partial" if known.any() else "none"


def record_fields(p: Any, data: Any, split: LabelSplit) -> dict[str, Any]:
    """The keys a diagnosis run adds to (or overrides in) the record."""
    truth = _truth(data)
    if truth == "none":
        note = ("diagnosis run: the labels are the file's own, as given (none sampled, no noise added); there "
                "are no clean labels, so this record holds no accuracy against truth. predictions.csv holds "
                "the prediction for every point, labels.csv the given labels.")
    else:
        where = "every point has one" if truth == "all" else "only the points that have one are scored"
        note = ("diagnosis run: the labels are the file's own, as given (none sampled, no noise added); "
                f"accuracies are against the file's trusted clean labels ({where}), which were used for "
                "scoring only, never for fitting.")
    pred = p.algorithm.labeled_pred_
    return {
        "mode": MODE,
        "noise": None,
        "noise_rate": None,
        "truth": truth,
        "note": note,
        "classes": np.asarray(data.classes).tolist(),
        "n_disagree": int(np.sum(pred != split.y_observed)),
        "not_used": not_used(p),
    }


def _values(data: Any, k: np.ndarray, present: np.ndarray | None = None) -> np.ndarray:
    """Class numbers as the file's label values; None (an empty cell) where ``present`` is False."""
    vals = np.asarray(data.classes)[np.asarray(k)]
    if present is None:
        return vals
    out = np.full(vals.shape[0], None, dtype=object)
    out[present] = vals[present]
    return out


def confidence(scores: np.ndarray) -> np.ndarray:
    """Share of a point's total class score on its predicted class, for non-negative scores (LGC, GFHF,
    AutoL, AutoD); NaN where a row has no score at all (e.g. a graph component without a labelled point) or
    where the method's scores can be negative (SIIS)."""
    S = np.asarray(scores, dtype=np.float64)
    if (S < 0).any():
        return np.full(S.shape[0], np.nan)
    total = S.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, S.max(axis=1) / total, np.nan)


def prediction_columns(algorithm: Any, data: Any, split: LabelSplit) -> dict[str, np.ndarray]:
    """``predictions.csv``: one row per point."""
    n = data.n
    given = np.zeros(n, dtype=bool)
    given[split.labeled] = True
    y_given = np.zeros(n, dtype=np.int64)
    y_given[split.labeled] = split.y_observed
    cols = {
        "index": np.arange(n),
        "predicted": _values(data, algorithm.predict()),
        "confidence": confidence(algorithm.scores_),
        "score": np.asarray(algorithm.scores_).max(axis=1),
        "given_label": _values(data, y_given, given),
    }
    if data.truth_known.any():
        cols["clean_label"] = _values(data, np.maximum(data.y, 0), data.truth_known)
    return cols


def label_columns(algorithm: Any, data: Any, split: LabelSplit) -> dict[str, np.ndarray]:
    """``labels.csv`` of a diagnosis run: one row per given label."""
    cols = {
        "index": split.labeled,
        "observed_label": _values(data, split.y_observed),
        "predicted": _values(data, algorithm.labeled_pred_),
    }
    if data.truth_known.any():
        known = split.y_clean >= 0
        cols["clean_label"] = _values(data, np.maximum(split.y_clean, 0), known)
        flipped = np.full(split.n_labeled, None, dtype=object)
        flipped[known] = split.flipped[known]
        cols["flipped"] = flipped
    info = dict(algorithm.label_info_)
    for k in algorithm.class_columns:  # the method's class-number columns, in the file's label values too
        if info.get(k) is not None:
            info[k] = _values(data, info[k])
    return {**cols, **info}


def write_outputs(p: Any, out: Path, result: dict[str, Any], data: Any, split: LabelSplit, issues: Any = None,
                  features: Any = None, graph: Any = None) -> None:
    """``labels.csv``, ``predictions.csv``, the label-issue report (``issues``: the judgement of a method
    that judges labels), the data audit (``data_issues.csv``, from the kNN lists of ``features``, the
    representation the graph was built on; :mod:`lgcexp.issues.data_audit`), the picture of the most suspicious
    examples (image-shaped data), figures (``plot=true``) and ``result.json`` (last: its presence marks the
    run done)."""
    algorithm = p.algorithm
    write_labels_csv(out / LABELS_FILE, label_columns(algorithm, data, split))
    write_labels_csv(out / PREDICTIONS_FILE, prediction_columns(algorithm, data, split))
    given = GivenLabels(labeled=split.labeled, y=split.y_observed, classes=np.asarray(data.classes),
                        y_clean=split.y_clean)
    result["label_issue_report"] = list(report_label_issues(issues, given, out))
    result["label_issue_evidence"] = report_label_evidence(issues, given, out, graph)
    pages = report_pages(issues, given, data, out, graph)
    if pages is not None:
        result["label_issue_report"].append(pages["file"])
    result["label_issue_pages"] = pages
    if features is not None:
        result["data_issue_report"] = report_data_issues(p, data, split, issues, features, out, result, graph)
    if p.config.get("plot"):
        y_true = data.y if data.truth_known.all() else None  # evaluation curves only where all truth is known
        result["figures"] = algorithm.plot(out, y_true=y_true, split=split)
    write_json(out / RESULT_FILE, result)
    result["_out_dir"] = str(out)


def format_summary(r: dict[str, Any]) -> str:
    """A short human-readable summary of a diagnosis run."""
    secs = r["stage_seconds"]
    stage_txt = "  ".join(f"{s} {v:.2f}" for s, v in secs.items())
    lines = [
        f"lgcexp: diagnosis of dataset={r['dataset']} with algo={r['algo']}"
        + (f" loss={r['loss']}" if r.get("loss") else "")
        + " (the file's own labels, as given: nothing sampled, no noise added)",
        f"  n={r['n']}  classes={r['n_classes']}  given labels={r['n_labeled']}  unlabelled={r['n_unlabeled']}",
    ]
    if r.get("label_issue_report"):
        if r.get("detect_estimated_issues") is not None:
            lines.append(f"  estimated wrong labels: {r['detect_estimated_issues']} of the {r['n_labeled']} given "
                         "labels (the one count, made without clean labels: docs/label_issues.md#count)")
        lines.append(f"  label issues: {r['n_label_issues']} of the {r['n_labeled']} given labels flagged "
                     f"(detect.cut={r.get('detect_cut')}; label_issues.csv: every given label, most suspicious first, "
                     "with a suggested label)")
        if r.get("detect_pred_probs"):
            lines.append(f"  second view: your out-of-fold probabilities ({r['detect_pred_probs']}; their argmax "
                         f"agrees with {100 * (r.get('detect_feature_agreement') or 0):.1f}% of the labels kept)")
        other = f"the method's own argmax differs from {r['n_disagree']} labels"
        if r.get("detect_expected_issues") is not None:
            other += (f"; issue_probability sums to {r['detect_expected_issues']:.0f} (a sum of doubts, not a count "
                      "of wrong labels)")
        lines.append(f"  (other figures, not counts of wrong labels: {other})")
    else:
        lines.append(f"  the method disagrees with {r['n_disagree']} of the {r['n_labeled']} given labels")
    if r.get("data_issues"):
        a = r["data_issues"]
        lines.append(f"  data issues: {a['n_outliers']} outliers, {a['n_near_duplicates']} near-duplicates in "
                     f"{a['n_near_duplicate_sets']} sets ({a['n_exact_duplicates']} exact copies) (data_issues.csv)")
    if "acc_unlabeled" in r:
        scored = (f" ({r['n_scored_unlabeled']} + {r['n_scored_labeled']} points with one)"
                  if "n_scored_unlabeled" in r else "")
        unl = (f"unlabelled {100 * r['acc_unlabeled']:.2f}%   "
               if r['acc_unlabeled'] is not None and np.isfinite(r['acc_unlabeled']) else "")
        lines.append(f"  accuracy against the file's clean labels{scored}: {unl}"
                     f"labelled {100 * r['acc_labeled']:.2f}%   given labels wrong: {r['n_flipped']}")
    else:
        lines.append("  no clean labels: no accuracy against truth (see predictions.csv)")
    if r.get("not_used"):
        lines.append("  not used: " + ", ".join(f"{k}={fmt_value(v)}" for k, v in r["not_used"].items()))
    lines.append(f"  seconds: {stage_txt}  (total {sum(secs.values()):.2f})")
    if r.get("_out_dir"):
        files = [RESULT_FILE, *(r.get("label_issue_report") or []), *(r.get("data_issue_report") or []),
                 PREDICTIONS_FILE, LABELS_FILE]
        lines.append(f"  written: {r['_out_dir']}/{{{','.join(files)}}}")
    return "\n".join(lines)
