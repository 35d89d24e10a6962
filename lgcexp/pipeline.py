"""The stage sequence of one run:
load -> label sampling/noise -> features -> affinity -> eigendecomposition -> optimize -> evaluate (-> record).

``run(cfg)`` takes a resolved config (a dict or DictConfig shaped like ``conf/config.yaml``) and returns
the result record; nothing here depends on Hydra, so the pipeline can be driven from Python too.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from . import devices
from .algorithms import GraphSSLAlgorithm
from .cache import Cache
from .config import RunPlan, check_against_data, plan
from .data import Dataset
from .evaluate import evaluate, mark_unreached
from .graph import Graph
from .issues import diagnosis
from .issues import frames as label_issues
from .labels import LabelSplit, sample_and_corrupt
from .records import LABELS_FILE, RESULT_FILE, write_json, write_labels_csv, write_table
from .rundir import config_hash, effective_config
from .stages import StageTimer, fit_on_graph
from .version import __version__

log = logging.getLogger("lgcexp")

STAGES = ("load", "labels", "features", "graph", "eig", "optimize", "evaluate")


def run(cfg: Any, out_dir: str | Path | None = None) -> dict[str, Any]:
    """Run one experiment; write ``result.json`` and ``labels.csv`` into ``out_dir`` when given."""
    p = plan(cfg)
    devices.configure(p.config.get("device"))
    paths = p.config.get("paths") or {}
    cache = Cache(paths.get("cache_dir"))
    timer = StageTimer()
    with timer.stage("load"):
        data = load(p, paths)
        # the user's out-of-fold probabilities (detect.pred_probs, or a dataset=npz array), checked before any
        # heavy work by the one check of find_label_issues (lgcexp.issues.pred_probs)
        pred_probs, pred_probs_source = user_pred_probs(p, data)
    with timer.stage("labels"):
        if data.has_given_labels:  # the file's own labels, as given: a diagnosis run (lgcexp.issues.diagnosis)
            split = diagnosis.given_split(p, data)
        else:
            split = sample_and_corrupt(data.y, p.n_labels, seed=p.seed, noise=p.noise, X=data.X,
                                       labels=p.config["labels"])
            log.info("labelled %d points, %d flipped", split.n_labeled, split.n_flipped)
    with timer.stage("features"):
        feats = features(p, data, split, cache)
    X = feats.X
    # graph -> eig -> optimize -> judge: the stages the scikit-learn estimators run too (lgcexp.stages); the
    # graph is keyed by the features' key (raw: the data's fingerprint, as before)
    fitted = fit_on_graph(p.graph, p.algorithm, X, split.labeled, split.y_observed, data.n_classes,
                          cache=cache, data_fingerprint=feats.key or data.fingerprint(),
                          n_eigenpairs=p.n_eigenpairs or 0,
                          eig_options=p.eig, detect=p.detect, progress=p.progress, timer=timer, features=X,
                          class_priors=p.config.get("class_priors"), pll_alphas=p.config.get("pll_alphas"),
                          view=None if pred_probs is None else pred_probs[split.labeled],
                          image_shape=data.image_shape if feats.key is None else None)  # pixels: the image view
    graph, graph_hit, eig, eig_hit, issues = (fitted.graph, fitted.graph_hit, fitted.eig, fitted.eig_hit,
                                              fitted.issues)
    log.info("graph: %d edges, sigma=%.6g (%s)", graph.n_edges, graph.sigma, "cached" if graph_hit else "built")
    with timer.stage("evaluate"):
        metrics = evaluate_run(p.algorithm, graph, data.y, split)
        # label issues of a method that judges labels (lgcexp.issues; None for the others)
        metrics.update(label_issues.run_metrics(issues, split))
    result = record(p, data, graph, graph_hit, eig, eig_hit, metrics, timer)
    if feats.key is not None:  # a raw run's record stays as it was
        result["features"] = {"name": p.features.name, "key": feats.key, "dim": int(X.shape[1]),
                              "cache_hit": feats.cache_hit, "params": p.features.get_params(), **feats.info}
    if data.has_given_labels:
        result.update(diagnosis.record_fields(p, data, split))
    if pred_probs_source is not None:
        result["detect_pred_probs"] = pred_probs_source
    if p.warnings:  # what the run was warned about (lgcexp.config.check_labelled_set)
        result["warnings"] = list(p.warnings)
    if out_dir is not None:
        writer = diagnosis.write_outputs if data.has_given_labels else write_outputs
        writer(p, Path(out_dir), result, data, split, issues=issues, features=X, graph=graph)
    return result


def load(p: RunPlan, paths: dict[str, Any]) -> Dataset:
    """Stage 1, plus every check that needs the data size (still before any heavy work)."""
    data = p.source.load(data_dir=paths.get("data_dir"), download=bool(paths.get("download", True)))
    check_against_data(p, data.n, data.n_classes, given_labels=data.has_given_labels, n_features=data.X.shape[1],
                       n_given=None if data.labeled is None else int(data.labeled.size), y=data.y,
                       y_given=data.y_observed)
    log.info("loaded %s: n=%d, d=%d, %d classes", data.name, data.n, data.X.shape[1], data.n_classes)
    return data


def user_pred_probs(p: RunPlan, data: Dataset) -> tuple[np.ndarray | None, str | None]:
    """:func:`lgcexp.issues.pred_probs.run_pred_probs` for this run (None, None where there are none, or the
    method does not judge labels: the option is then refused before the run, :mod:`lgcexp.cli`)."""
    from .config import judges_labels
    from .issues.pred_probs import run_pred_probs

    if not judges_labels(p.algorithm):
        return None, None
    path = getattr(p.source, "path", None)
    return run_pred_probs(p.pred_probs, data, f"dataset.path={path}" if path else f"dataset={data.name}")


def features(p: RunPlan, data: Dataset, split: LabelSplit, cache: Cache) -> Any:
    """Stage 3 (lgcexp.features): the representation the graph is built on (raw: the data's X as is)."""
    from .features import FeatureResult

    fmap = p.features
    if fmap is None or fmap.name == "raw":
        return FeatureResult(X=data.X, key=None)
    res = fmap.transform(data.X, data_fingerprint=data.fingerprint(), labeled=split.labeled,
                         y=split.y_observed, n_classes=data.n_classes, cache=cache, progress=p.progress)
    log.info("features=%s: %d dimensions (%s)", fmap.name, res.X.shape[1], "cached" if res.cache_hit else "computed")
    return res


def evaluate_run(algorithm: GraphSSLAlgorithm, graph: Graph, y_true: np.ndarray, split: LabelSplit) -> dict[str, Any]:
    """Stage 6: accuracies (points no label reaches are predicted -1, not class 0, and count as wrong). Own
    data scores only the points with a known clean label (``y_clean`` -1: unknown). The label judgement is
    scored by :func:`lgcexp.issues.frames.run_metrics`."""
    pred, n_unreached = mark_unreached(algorithm.predict(), graph, split.labeled)
    metrics = evaluate(pred, algorithm.labeled_pred_, y_true, split)
    metrics["n_unreached"] = n_unreached
    known = split.y_clean >= 0
    if algorithm.lgc_labeled_pred_ is not None and known.any():
        metrics["acc_labeled_lgc"] = float(np.mean(algorithm.lgc_labeled_pred_[known] == split.y_clean[known]))
    return metrics


def record(p: RunPlan, data: Dataset, graph: Graph, graph_hit: bool, eig: Any, eig_hit: bool | None,
           metrics: dict[str, Any], timer: StageTimer) -> dict[str, Any]:
    """The result record of one run (the record step after the six stages)."""
    c = p.config
    return {
        "dataset": data.name,
        "algo": p.algorithm.name,
        "mode": "sampled",  # labels sampled and corrupted; "diagnosis" for data with its own labels
        "loss": p.loss,
        "seed": p.seed,
        "noise": p.noise.name,
        "noise_rate": p.noise.rate_,
        "noise_counts": _noise_counts(p.noise),
        "n": data.n,
        "n_classes": data.n_classes,
        **metrics,
        **p.algorithm.info_,
        "graph": {"builder": p.graph.name, "key": graph.key, **p.graph.get_params(), "sigma": graph.sigma,
                  "edges": graph.n_edges, "components": graph.n_components(), "cache_hit": graph_hit,
                  **graph.info},
        "eig": None if eig is None else {"p": p.n_eigenpairs, "cache_hit": eig_hit, **eig.summary()},
        "stage_seconds": {s: timer.seconds.get(s, 0.0) for s in STAGES},
        "device": devices.report(),
        "config": effective_config(c),
        "config_hash": config_hash(c),
        "lgcexp_version": __version__,
    }


def _noise_counts(noise: Any) -> list[list[int]] | None:
    """The realised (true, observed) label count matrix of the run's noise draw, as lists."""
    counts = getattr(noise, "counts_", None)
    return None if counts is None else np.asarray(counts).tolist()


def write_outputs(p: RunPlan, out: Path, result: dict[str, Any], data: Dataset, split: LabelSplit,
                  issues: Any = None, features: Any = None, graph: Any = None) -> None:
    """``labels.csv``, ``label_issues.csv`` (methods that judge labels: ``issues``), figures (``plot=true``)
    and ``result.json`` (last: its presence marks the run done). ``features``: the graph's features (the
    data audit of a diagnosis run reads them, with the ``graph``'s kNN lists; not used here)."""
    algorithm = p.algorithm
    columns = {
        "index": split.labeled,
        "clean_label": split.y_clean,
        "observed_label": split.y_observed,
        "flipped": split.flipped,
        "predicted": algorithm.labeled_pred_,
        **algorithm.label_info_,
    }
    write_labels_csv(out / LABELS_FILE, columns)
    if issues is not None:
        write_table(out / label_issues.ISSUES_FILE, label_issues.run_frame(issues, split))
    if p.config.get("plot"):
        # figures may use the true labels for evaluation curves; they never steer the fit
        result["figures"] = algorithm.plot(out, y_true=data.y, split=split)
    write_json(out / RESULT_FILE, result)
    result["_out_dir"] = str(out)


def format_summary(r: dict[str, Any]) -> str:
    """A short human-readable summary of one run."""
    if r.get("mode") == diagnosis.MODE:
        return diagnosis.format_summary(r)
    secs = r["stage_seconds"]
    stage_txt = "  ".join(f"{s} {secs[s]:.2f}" for s in STAGES)
    lines = [
        f"lgcexp: dataset={r['dataset']} algo={r['algo']}" + (f" loss={r['loss']}" if r.get("loss") else "")
        + f" seed={r['seed']} noise={r.get('noise', 'uniform')}:{r['noise_rate']:.2f}",
        f"  n={r['n']}  classes={r['n_classes']}  labelled={r['n_labeled']}  flipped={r['n_flipped']}",
        "  accuracy: " + (f"unlabelled {100 * r['acc_unlabeled']:.2f}%   " if r["n"] > r["n_labeled"] else "")
        + f"labelled (vs clean) {100 * r['acc_labeled']:.2f}%",
        f"  seconds: {stage_txt}  (total {sum(secs.values()):.2f})",
    ]
    if r.get("detect_cut") is not None:
        auc = r.get("detect_auc")
        est = r.get("detect_estimated_issues")
        lines.insert(3, f"  label issues: {r['n_label_issues']} flagged (label_issues.csv)"
                        + (f", {est} estimated wrong (docs/label_issues.md#count)" if est is not None else "")
                        + (f"; against the {r['n_flipped']} flipped: F1 {r['detect_f1']:.3f}"
                           + (f", ROC AUC {auc:.3f}" if auc is not None else "") if "detect_f1" in r else ""))
    if r.get("n_unreached"):
        lines.insert(3, f"  unreached: {r['n_unreached']} points in graph components without a label "
                        "(predicted -1, counted wrong)")
    if r.get("_out_dir"):
        lines.append(f"  written: {r['_out_dir']}/{RESULT_FILE}")
    return "\n".join(lines)
