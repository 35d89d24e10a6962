"""The one config validator: a composed config is checked against the parameter tables of every stage
before any heavy work, and turned into the stage objects of one run (a :class:`RunPlan`).

Every refusal is a :class:`lgcexp.errors.UserError` with one line naming the key as the user typed it
(``algo.params.alpha=1.5 is not allowed: it must be a number in (0, 1)``). Checks that need the data size
(``labels.n`` against n, ``graph.k`` against n, eigenpairs against n, a noise matrix or permutation against
c) run in :func:`check_against_data`, right after loading and still before the graph is built.
"""
from __future__ import annotations

import errno
import logging
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import OmegaConf
from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

from .algorithms.propagation import DENSE_METHODS, dense_refusal
from .devices import DEVICES
from .errors import UserError
from .labels import LABELS_PARAMETERS, check_label_count, label_protocol
from .params import (
    Array,
    Boolean,
    Interval,
    NoneValue,
    Options,
    String,
    check_params,
    check_value,
    constructor_defaults,
    fmt_value,
    unit_open,
)
from .priors import CLASS_PRIORS_PARAMETERS, check_priors

log = logging.getLogger("lgcexp")

#: keys that change where files go or what is shown, not the numbers: left out of the config hash
NON_SEMANTIC_KEYS = ("paths", "force", "progress", "plot", "suggested", "device")
#: every value the top-level ``loss`` option can take (each method accepts a subset; see ``algo.losses``)
KNOWN_LOSSES = ("xent", "ce", "mse", "mae")
#: the top-level scalar options
TOP_PARAMETERS = {
    "seed": [Interval("int", 0, 2**32 - 1)],
    "loss": [NoneValue(), Options(KNOWN_LOSSES)],
    "force": [Boolean()],
    "progress": [Boolean(), NoneValue()],
    "plot": [Boolean()],
    "device": [Options(DEVICES)],  # lgcexp.devices: auto = the GPU when there is one
    **CLASS_PRIORS_PARAMETERS,     # lgcexp.priors: a volume label projection of any method's scores
    # lgcexp.algorithms.propagation.cached_submatrices: rates solved with every P_LL (one multi-shift CG)
    "pll_alphas": [NoneValue(), Array(unit_open(), "a list of diffusion rates in (0, 1)", min_length=1)],
}
PATHS_PARAMETERS = {
    "data_dir": [String("a directory path")],
    "cache_dir": [String("a directory path"), NoneValue()],
    "output_dir": [String("a directory path")],
    "results_dir": [String("a directory path")],
    "download": [Boolean()],
}
#: sections (config groups and plain sections) every config has
SECTIONS = ("dataset", "noise", "graph", "algo", "labels", "eig", "paths")
#: optional sections (a config without one gets the defaults)
OPTIONAL_SECTIONS = ("detect", "features")
TOP_KEYS = (*TOP_PARAMETERS, *SECTIONS, *OPTIONAL_SECTIONS, "suggested", "hydra")


def to_container(cfg: Any) -> dict[str, Any]:
    """Resolve interpolations; a missing mandatory value becomes a UserError naming the key."""
    if isinstance(cfg, dict):
        return cfg
    try:
        return OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)  # type: ignore[return-value]
    except MissingMandatoryValue as exc:
        key = getattr(exc, "full_key", None) or str(exc)
        raise UserError(f"{key} has no value: set it on the command line, e.g. {key}=...") from None
    except OmegaConfBaseException as exc:
        raise UserError(f"bad configuration: {str(exc).splitlines()[0]}") from None


#: options added after results were recorded: left out of the semantic config while null, so the config
#: hash (and run directory) of every run that does not use them stays what it was; per section ("" the top
#: level). ``detect.pred_probs`` is a file of the user's out-of-fold probabilities (lgcexp.issues.pred_probs):
#: an input beside the judgement's options (:class:`lgcexp.issues.options.DetectOptions`), not one of them
NULL_DEFAULT_KEYS = {"": ("class_priors", "pll_alphas"), "labels": ("per_class", "sets"), "detect": ("pred_probs",)}
PRED_PROBS_KEY = "pred_probs"
#: detect.cut's default and the value it is hashed as (:func:`semantic_config`) on the data sets whose labels are
#: always sampled (``DataSource.labels_always_sampled``: ``auto`` is ``consensus`` there)
AUTO_CUT, AUTO_CUT_HASHED_AS = "auto", "consensus"


def _labels_always_sampled(dataset: dict[str, Any]) -> bool:
    """Whether the config's data source never carries labels of its own (its class says so)."""
    from .data import DATA_SOURCES

    name, target = dataset.get("name"), dataset.get("_target_")
    if not target and name not in DATA_SOURCES:
        return False
    return bool(getattr(DATA_SOURCES.get(name, target), "labels_always_sampled", False))


def semantic_config(container: dict[str, Any]) -> dict[str, Any]:
    """The part of a resolved config that determines a run's numbers. The default ``features`` section
    (``{name: raw}``) and the options that are null by default (:data:`NULL_DEFAULT_KEYS`: ``class_priors``,
    ``pll_alphas``, ``labels.per_class``, ``labels.sets``, ``detect.pred_probs``) are left out, and
    ``detect.cut=auto`` counts as ``consensus`` on the data sets whose labels are always sampled
    (:func:`_labels_always_sampled`, where it is consensus), so earlier runs keep the config hash they had
    before these existed. On a user's file ``auto`` keeps its own value: there it is ``count`` wherever the file
    labels every row, and must not share a run directory with an explicit ``consensus``."""
    from .features import is_default

    c = {k: v for k, v in container.items() if k not in NON_SEMANTIC_KEYS and k != "hydra"
         and not (k == "features" and is_default(v)) and not (k in NULL_DEFAULT_KEYS[""] and v is None)}
    for section, keys in NULL_DEFAULT_KEYS.items():
        if section and isinstance(c.get(section), dict):
            c[section] = {k: v for k, v in c[section].items() if not (k in keys and v is None)}
    dataset = c.get("dataset") if isinstance(c.get("dataset"), dict) else {}
    if isinstance(c.get("detect"), dict) and c["detect"].get("cut") == AUTO_CUT and _labels_always_sampled(dataset):
        # detect.cut=auto is consensus wherever labels are sampled (every run made before auto existed), so those
        # runs keep their hash; on a user's file it may be count, so it is hashed as itself
        c["detect"] = {**c["detect"], "cut": AUTO_CUT_HASHED_AS}
    return c


@dataclass
class RunPlan:
    """The validated stage objects of one run."""

    config: dict[str, Any]
    source: Any          # lgcexp.data.source.DataSource
    noise: Any           # lgcexp.noise.NoiseModel
    graph: Any           # lgcexp.graph.GraphBuilder
    algorithm: Any       # lgcexp.algorithms.GraphSSLAlgorithm
    eig: dict[str, Any]  # solver options; p = algorithm.required_eigenpairs()
    seed: int
    n_labels: int | None  # None: the data's own labelled set is used (a diagnosis run)
    loss: str | None     # the loss the run used (methods that take one), else None
    detect: Any = None   # lgcexp.issues.options.DetectOptions (label issues of methods that judge labels)
    features: Any = None  # lgcexp.features.FeatureMap (the representation the graph is built on; raw by default)
    pred_probs: str | None = None  # detect.pred_probs: a file of the user's out-of-fold probabilities
    #: what this run was warned about (logged, and recorded as ``warnings`` in result.json): :meth:`warn`
    warnings: list[str] = field(default_factory=list)

    def warn(self, message: str) -> None:
        """Log a WARNING and keep it for the run's record."""
        log.warning("%s", message)
        if message not in self.warnings:
            self.warnings.append(message)

    @property
    def n_eigenpairs(self) -> int:
        return int(self.algorithm.required_eigenpairs())

    @property
    def progress(self) -> bool:
        p = self.config.get("progress")
        return bool(sys.stderr.isatty()) if p is None else bool(p)


def _section(c: dict[str, Any], name: str) -> dict[str, Any]:
    sec = c.get(name)
    if not isinstance(sec, dict):
        raise UserError(f"the config has no '{name}' section")
    return sec


def _build(registry: Any, section: dict[str, Any], group: str) -> Any:
    cls, params = registry.from_config(section)
    cls.check_config(params, f"{group}.")
    return cls(**params)


def plan(cfg: Any) -> RunPlan:
    """Validate a composed config (everything that needs no data) and build the stage objects."""
    from .algorithms import ALGORITHMS, algorithm_params
    from .data import DATA_SOURCES
    from .graph import GRAPH_BUILDERS
    from .noise import NOISE_MODELS
    from .spectral import EIG_PARAMETERS

    c = to_container(cfg)
    for k in c:
        if k not in TOP_KEYS:
            raise UserError(f"{k} is not an option; top-level options: "
                            f"{', '.join(k for k in TOP_KEYS if k != 'hydra')}")
    for name in SECTIONS:
        _section(c, name)
    check_params({k: c.get(k) for k in TOP_PARAMETERS if k in c}, TOP_PARAMETERS)
    check_params(c["labels"], LABELS_PARAMETERS, "labels.")
    check_params(c["paths"], PATHS_PARAMETERS, "paths.")
    check_params(c["eig"], EIG_PARAMETERS, "eig.")

    source = _build(DATA_SOURCES, c["dataset"], "dataset")
    noise = _build(NOISE_MODELS, c["noise"], "noise")
    graph = _build(GRAPH_BUILDERS, c["graph"], "graph")

    algo = c["algo"]
    cls = ALGORITHMS.get(algo.get("name"), algo.get("_target_"))
    raw = algo.get("params") or {}
    if not isinstance(raw, dict):
        raise UserError(f"algo.params={fmt_value(raw)} is not allowed: it must be a mapping of parameters")
    loss = c.get("loss")
    if cls.losses and loss is not None and loss not in cls.losses:
        raise UserError(f"loss={loss} is not allowed for algo={cls.name}: choose one of {', '.join(cls.losses)}")
    if loss is None or not cls.losses:
        cls.check_config(raw)
    else:  # the top-level loss overrides algo.params.loss: name it as typed
        check_value("loss", loss, cls._parameter_constraints["loss"])
        cls.check_config({k: v for k, v in raw.items() if k != "loss"})
    params = algorithm_params(cls, raw, loss)
    algorithm = cls(**params)
    used_loss = params.get("loss") if cls.losses else None
    eig = {k: v for k, v in c["eig"].items() if k != "p"}
    detect, pred_probs = _detect_options(c.get("detect"))
    features = _features(c.get("features"))
    return RunPlan(config=c, source=source, noise=noise, graph=graph, algorithm=algorithm, eig=eig,
                   seed=int(c["seed"]),
                   n_labels=None if c["labels"].get("n") is None or label_protocol(c) else int(c["labels"]["n"]),
                   loss=used_loss, detect=detect, features=features, pred_probs=pred_probs)


def _detect_options(section: Any) -> tuple[Any, str | None]:
    """The ``detect`` section (label issues) checked against its parameter table; absent: the defaults. Returns
    the options and ``detect.pred_probs`` (None, or the path of an existing file: a missing one is refused
    here, before any work; its contents once the data is loaded, :func:`lgcexp.issues.pred_probs.run_pred_probs`)."""
    from .issues.options import DetectOptions

    if section is None:
        return DetectOptions(), None
    if not isinstance(section, dict):
        raise UserError(f"detect={fmt_value(section)} is not allowed: it must be a mapping of parameters")
    section = dict(section)
    pred_probs = section.pop(PRED_PROBS_KEY, None)
    if pred_probs is not None:
        from .data.own import existing_file

        if not isinstance(pred_probs, str):
            raise UserError(f"detect.pred_probs={fmt_value(pred_probs)} is not allowed: it must be the path of an "
                            ".npy (n x c) or an .npz with an array 'pred_probs', or null")
        existing_file("detect.pred_probs", pred_probs, "pred_probs.npy")
    DetectOptions.check_config(section)
    return DetectOptions(**section), pred_probs


def _features(section: Any) -> Any:
    """The ``features`` section (lgcexp.features) checked against its map's table; absent: raw."""
    from .features import DEFAULT, FEATURES

    if section is None:
        section = dict(DEFAULT)
    if not isinstance(section, dict):
        raise UserError(f"features={fmt_value(section)} is not allowed: it must be a mapping of parameters")
    return _build(FEATURES, section, "features")


def check_against_data(p: RunPlan, n: int, n_classes: int, given_labels: bool = False,
                       n_features: int | None = None, n_given: int | None = None, y: Any = None,
                       y_given: Any = None) -> None:
    """Checks that need the data size, run right after loading (before the graph is built).
    ``given_labels``: the data carries its own labelled set (a diagnosis run, ``n_given`` labels, their classes
    ``y_given``), so ``labels.n`` is not used; ``n_features``: the data's dimension (``features.*`` checks);
    ``y``: every point's label (a sampled run's labelled set is then drawn here and checked:
    :func:`check_labelled_set`)."""
    from .spectral import check_eig_params

    if not given_labels:
        if not label_protocol(p.config):
            check_label_count(p.n_labels, n, n_classes)
        p.noise.check_data(n, n_classes)
    y_lab = None
    if given_labels and y_given is not None:
        y_lab = np.asarray(y_given, dtype=np.int64)
    elif not given_labels and y is not None:
        from .labels import choose_labeled

        y = np.asarray(y, dtype=np.int64)
        y_lab = y[choose_labeled(y, p.n_labels, p.seed, p.config.get("labels"))]
    n_lab = n_given if given_labels else p.n_labels
    if y_lab is not None:
        n_lab = int(y_lab.size)
    elif n_lab is not None and p.algorithm.name in DENSE_METHODS:  # the memory rule without the labels at hand
        why = dense_refusal(p.algorithm.name, int(n_lab), "algo")
        if why:
            raise UserError(why)
    if p.features is not None:
        p.features.check_data(n, n_classes, n_features=n_features)
        if p.features.uses_labels and n_lab is not None:
            p.features.check_labels(int(n_lab))
    p.graph.check_data(n, n_classes)
    p.algorithm.check_data(n, n_classes)
    check_priors(p.config.get("class_priors"), n_classes)
    if p.n_eigenpairs:
        check_eig_params(p.n_eigenpairs, n, p.eig.get("solver", "auto"), p.eig.get("tol", 1e-8))
    if y_lab is not None:
        check_labelled_set(p, y_lab, n_classes, given_labels, n_features)


#: methods whose leave-one-out drops a label it cannot confirm: a class's only label (AutoL's weights)
DROPS_LONE_LABELS = ("autoL", "auto")


def _labels_key(p: RunPlan, given: bool) -> str:
    """How the user chose the labelled set, as typed (for messages)."""
    lab = p.config.get("labels") or {}
    if given:
        return f"algo={p.algorithm.name}"
    for k in ("sets", "per_class", "n"):
        if lab.get(k) is not None:
            return f"labels.{k}={fmt_value(lab[k])}"
    return "labels"


def judges_labels(algorithm: Any) -> bool:
    """Does the method judge its labels (label_issues.csv, the detect options)?"""
    return type(algorithm).judges_labels()


def _check_folds(p: RunPlan, key: str, folds: int, default: int, counts: np.ndarray, what: str) -> None:
    """Out-of-fold models on the labelled points (:func:`lgcexp.preprocess.fold_splits`): more folds than
    labels is refused (they would be cut to one per label; the ``default`` count is cut with a warning). The
    folds do not look at the labels, so a class's size does not matter to them."""
    l = int(counts.sum())
    if folds > l and folds == default:
        p.warn(f"{key}={folds}: the run has {l} labelled points, so {what} uses {max(2, l)} folds")
        return
    if folds > l:
        raise UserError(f"{key}={folds} is not allowed for this run: it has {l} labelled points, and {what} "
                        f"needs at most one fold per label (at most {key}={l})")


def check_labelled_set(p: RunPlan, y_lab: np.ndarray, n_classes: int, given: bool,
                       n_features: int | None = None) -> None:
    """The checks that need the labelled set (its size and classes), for every way of choosing it
    (``labels.n``, ``labels.per_class``, ``labels.sets``, the data's own labels), before any heavy work: the
    memory rule of the dense leave-one-out (:func:`lgcexp.algorithms.propagation.dense_refusal`), lone labels of a
    method that drops them, and the folds and PCA of the out-of-fold models (``detect.folds``, ``noise.folds``,
    ``noise.pca``). Refusals raise UserError; legitimate runs that will not do what the option says warn
    (:meth:`RunPlan.warn`)."""
    name = p.algorithm.name
    l = int(y_lab.size)
    key = _labels_key(p, given)
    if name in DENSE_METHODS:
        why = dense_refusal(name, l, "algo")
        if why:
            raise UserError(why if given or key.startswith("labels.n=") else f"{key}: {why}")
    counts = np.bincount(y_lab, minlength=n_classes)
    if name in DROPS_LONE_LABELS and (counts[counts > 0] == 1).all():
        raise UserError(f"{key} is not allowed with algo={name}: every class has a single label, and its "
                        "leave-one-out cannot confirm a label that is its class's only one (it drops them all and "
                        "predicts at chance); give at least 2 labels per class")
    if (counts == 1).any():
        lone = np.flatnonzero(counts == 1)
        shown = ", ".join(str(int(c)) for c in lone[:5]) + (", ..." if lone.size > 5 else "")
        if name in DROPS_LONE_LABELS:
            p.warn(f"class(es) {shown} have a single labelled point: algo={name}'s leave-one-out cannot confirm "
                   "such a label and drops it, so those classes are predicted only where other evidence reaches")
        elif given:
            p.warn(f"class(es) {shown} have a single labelled point: leave-one-out methods (autoL, auto) cannot "
                   "confirm such a label, and drop it")
    if judges_labels(p.algorithm) and p.detect is not None and p.detect.features:
        from .issues.options import DetectOptions

        _check_folds(p, "detect.folds", int(p.detect.folds), DetectOptions().folds, counts,
                     "the label-issue feature view")
    if not given and p.noise.rate_ and hasattr(p.noise, "folds"):
        _check_folds(p, "noise.folds", int(p.noise.folds), constructor_defaults(type(p.noise)).get("folds"), counts,
                     f"noise={p.noise.name}'s classifier")
        pca = int(getattr(p.noise, "pca", 0) or 0)
        if pca and n_features is not None and pca >= n_features:
            p.warn(f"noise.pca={pca}: the data has {n_features} features, so there is no projection (the "
                   "standardised features are used as they are)")
        elif pca and pca > l - 1:
            p.warn(f"noise.pca={pca}: the PCA is fitted on the {l} labelled points, so it keeps {l - 1} axes")


#: errors of a write the user can fix (permissions, a read-only or full file system, a file in the way)
WRITE_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.ENOTDIR,
                          errno.EEXIST, errno.EISDIR})


def write_error(directory: Path) -> str | None:
    """Why no file can be created in the existing ``directory`` (None: one can). Tries it: permission bits
    say nothing for root, nor for a read-only mount."""
    try:
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def check_writable_dir(key: str, value: str) -> Path:
    """Refuse a directory that cannot be created or written (one line naming ``key``)."""
    path = Path(os.path.expanduser(str(value)))
    if path.exists() and not path.is_dir():
        raise UserError(f"{key}={value} is not allowed: it is a file, not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{key}={value} is not allowed: cannot write there ({exc.strerror or exc})") from None
    why = write_error(path)
    if why:
        raise UserError(f"{key}={value} is not allowed: cannot write there ({why})")
    return path


def check_creatable_dir(key: str, value: Any, target: str) -> None:
    """Refuse when directory ``target`` (named to the user by ``key``=``value``) cannot be created or written,
    without creating it: its nearest existing ancestor must be a writable directory."""
    path = Path(os.path.abspath(os.path.expanduser(str(target))))
    probe = path
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if not probe.is_dir():
        raise UserError(f"{key}={value} is not allowed: cannot create {path} ({probe} is a file, not a directory)")
    why = write_error(probe)
    if why:
        where = "there" if probe == path else f"{path} in {probe}"
        raise UserError(f"{key}={value} is not allowed: cannot write {where} ({why})")


def check_paths(c: dict[str, Any], output: bool = True) -> None:
    """The paths a run writes to: the output directory must be writable (when ``output``), and the cache
    and data directories must not be files."""
    paths = c.get("paths") or {}
    if output:
        check_writable_dir("paths.output_dir", paths["output_dir"])
    for key in ("cache_dir", "data_dir"):
        v = paths.get(key)
        if v and Path(os.path.expanduser(str(v))).is_file():
            raise UserError(f"paths.{key}={v} is not allowed: it is a file, not a directory")
