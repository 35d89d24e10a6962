"""The stage sequence of one run:
load -> label sampling/noise -> affinity -> eigendecomposition -> optimize -> evaluate (-> record).

``run(cfg)`` takes a resolved config (a dict or DictConfig shaped like ``conf/config.yaml``) and returns
the result record; nothing here depends on Hydra, so the pipeline can be driven from Python too.
"""
from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from . import __version__
from .algorithms import make_algorithm
from .cache import Cache
from .config import to_container, validate
from .rundir import config_hash, effective_config
from .data import load_dataset
from .errors import UserError
from .evaluate import detection_metrics, evaluate, mark_unreached
from .graph import build_graph, check_graph_params
from .labels import check_label_count, sample_and_corrupt
from .records import LABELS_FILE, RESULT_FILE, write_json, write_labels_csv

log = logging.getLogger("lgcexp")

STAGES = ("load", "labels", "graph", "eig", "optimize", "evaluate")


class StageTimer:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = round(time.perf_counter() - t0, 4)


def run(cfg: Any, out_dir: str | Path | None = None) -> dict[str, Any]:
    """Run one experiment; write ``result.json`` and ``labels.csv`` into ``out_dir`` when given."""
    c = cfg if isinstance(cfg, dict) else to_container(cfg)
    validate(c)
    algo_cfg = c["algo"]
    algorithm = make_algorithm(algo_cfg["name"], algo_cfg.get("params") or {}, c.get("loss"))
    loss = getattr(algorithm, "loss", None)
    progress = bool(c.get("progress", False))
    paths = c.get("paths") or {}
    cache = Cache(paths.get("cache_dir"))
    timer = StageTimer()
    seed = int(c["seed"])

    with timer.stage("load"):
        ds_cfg = dict(c["dataset"])
        ds_name = ds_cfg.pop("name")
        try:
            data = load_dataset(ds_name, data_dir=paths.get("data_dir"), download=bool(paths.get("download", True)),
                                **ds_cfg)
        except TypeError as exc:  # an option the loader does not take, e.g. +dataset.foo=1
            raise UserError(f"bad option for dataset={ds_name}: {exc}") from exc
        check_label_count(int(c["labels"]["n"]), data.n, data.n_classes)
        g = c["graph"]
        check_graph_params(g["k"], g["sigma"], g.get("symmetrize", "union"), data.n)
        # checks that need n and c, still before any heavy work
        if hasattr(algorithm, "check_data"):
            algorithm.check_data(data.n, data.n_classes)
        p = algorithm.required_eigenpairs()
        eig_cfg = {k: v for k, v in (c.get("eig") or {}).items() if k != "p"}
        if p:
            from .spectral import check_eig_params

            check_eig_params(p, data.n, eig_cfg.get("solver", "auto"), eig_cfg.get("tol", 1e-8))
        fingerprint = data.fingerprint()
    log.info("loaded %s: n=%d, d=%d, %d classes", data.name, data.n, data.X.shape[1], data.n_classes)

    with timer.stage("labels"):
        split = sample_and_corrupt(data.y, int(c["labels"]["n"]), float(c["noise"]["rate"]), seed)
    log.info("labelled %d points, %d flipped", split.n_labeled, split.n_flipped)

    with timer.stage("graph"):
        graph, graph_hit = build_graph(
            data.X, int(g["k"]), g["sigma"], g.get("symmetrize", "union"), cache=cache, data_fingerprint=fingerprint
        )
    log.info("graph: %d edges, sigma=%.6g (%s)", graph.n_edges, graph.sigma, "cached" if graph_hit else "built")

    eig = None
    eig_hit = None
    with timer.stage("eig"):
        if p:
            from .spectral import laplacian_eigenpairs

            try:
                eig, eig_hit = laplacian_eigenpairs(graph, p, cache=cache, progress=progress, **eig_cfg)
            except TypeError as exc:  # an option the solver does not take, e.g. +eig.foo=1
                raise UserError(f"bad eig option: {exc}") from exc

    with timer.stage("optimize"):
        algorithm.fit(graph, split.labeled, split.y_observed, data.n_classes, eig=eig, progress=progress,
                      cache=cache)

    with timer.stage("evaluate"):
        pred = algorithm.predict()
        pred, n_unreached = mark_unreached(pred, graph, split.labeled)  # no label reaches them: -1, not class 0
        metrics = evaluate(pred, algorithm.labeled_pred_, data.y, split)
        metrics["n_unreached"] = n_unreached
        # label-noise detectors (AutoL) expose per-label decisions and a suspicion score
        if getattr(algorithm, "dropped_", None) is not None:
            metrics.update(detection_metrics(algorithm.dropped_, algorithm.suspicion_, split.flipped))
        # methods that correct labels and then propagate (AutoL) also report the propagated labelled readout
        if getattr(algorithm, "lgc_labeled_pred_", None) is not None:
            metrics["acc_labeled_lgc"] = float(np.mean(algorithm.lgc_labeled_pred_ == split.y_clean))

    result: dict[str, Any] = {
        "dataset": data.name,
        "algo": algo_cfg["name"],
        "loss": loss,
        "seed": seed,
        "noise_rate": float(c["noise"]["rate"]),
        "n": data.n,
        "n_classes": data.n_classes,
        **metrics,
        **algorithm.info_,
        "graph": {"key": graph.key, "k": int(g["k"]), "sigma": graph.sigma, "edges": graph.n_edges,
                  "components": graph.n_components(), "cache_hit": graph_hit},
        "eig": None if eig is None else {"p": p, "cache_hit": eig_hit, **getattr(eig, "summary", lambda: {})()},
        "stage_seconds": {s: timer.seconds.get(s, 0.0) for s in STAGES},
        "config": effective_config(c),
        "config_hash": config_hash(c),
        "lgcexp_version": __version__,
    }

    if out_dir is not None:
        out = Path(out_dir)
        columns = {
            "index": split.labeled,
            "clean_label": split.y_clean,
            "observed_label": split.y_observed,
            "flipped": split.flipped,
            "predicted": algorithm.labeled_pred_,
            **algorithm.label_info_,
        }
        write_labels_csv(out / LABELS_FILE, columns)
        if c.get("plot") and hasattr(algorithm, "plot"):
            # figures may use the true labels for evaluation curves; they never steer the fit
            result["figures"] = algorithm.plot(out, y_true=data.y, split=split)
        write_json(out / RESULT_FILE, result)
        result["_out_dir"] = str(out)
    return result


def format_summary(r: dict[str, Any]) -> str:
    """A short human-readable summary of one run."""
    secs = r["stage_seconds"]
    stage_txt = "  ".join(f"{s} {secs[s]:.2f}" for s in STAGES)
    lines = [
        f"lgcexp: dataset={r['dataset']} algo={r['algo']}" + (f" loss={r['loss']}" if r.get("loss") else "")
        + f" seed={r['seed']} noise={r['noise_rate']:.2f}",
        f"  n={r['n']}  classes={r['n_classes']}  labelled={r['n_labeled']}  flipped={r['n_flipped']}",
        f"  accuracy: unlabelled {100 * r['acc_unlabeled']:.2f}%   labelled (vs clean) {100 * r['acc_labeled']:.2f}%",
        f"  seconds: {stage_txt}  (total {sum(secs.values()):.2f})",
    ]
    if r.get("n_unreached"):
        lines.insert(3, f"  unreached: {r['n_unreached']} points in graph components without a label "
                        "(predicted -1, counted wrong)")
    if r.get("_out_dir"):
        lines.append(f"  written: {r['_out_dir']}/{RESULT_FILE}")
    return "\n".join(lines)
