"""The configuration house: every config under conf/ composes and validates; every yaml default equals the
constructor default it configures; a plug-in noise model or graph builder is one module plus one yaml."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from helpers import CONF
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from lgcexp.algorithms import ALGORITHMS, GraphSSLAlgorithm
from lgcexp.config import plan, to_container
from lgcexp.data import DATA_SOURCES
from lgcexp.data.source import DataSource
from lgcexp.graph import GRAPH_BUILDERS, GraphBuilder
from lgcexp.noise import NOISE_MODELS
from lgcexp.noise.base import NoiseModel
from lgcexp.params import constructor_defaults

GROUPS = {"algo": ALGORITHMS, "dataset": DATA_SOURCES, "noise": NOISE_MODELS, "graph": GRAPH_BUILDERS}
BASES = {"algo": GraphSSLAlgorithm, "dataset": DataSource, "noise": NoiseModel, "graph": GraphBuilder}


def _yamls(group: str, conf: str = CONF) -> list[str]:
    return sorted(p.stem for p in (Path(conf) / group).glob("*.yaml"))


def _compose(*overrides: str, conf: str = CONF):
    with initialize_config_dir(config_dir=conf, version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


#: a value for every key a yaml leaves mandatory (``???``), by key: any group, any choice
MANDATORY_VALUES = {"path": "x.{choice}"}
#: keys whose null default the run refuses (one of two ways to give the same thing), by key
NULL_REQUIRED = {"labels_path": "y.npy", "matrix": "[[1.0,0.0],[0.0,1.0]]"}


def _mandatory_overrides(group: str, choice: str, conf: str = CONF) -> tuple[str, ...]:
    """``key=value`` overrides for the keys the yaml leaves ``???`` (found in the yaml, valued by key)."""
    raw = OmegaConf.to_container(OmegaConf.load(Path(conf) / group / f"{choice}.yaml"), resolve=False)
    section = raw.get(group, raw) if group == "dataset" else raw
    out = []
    for k, v in section.items():
        if v == "???":
            assert k in MANDATORY_VALUES, f"{group}/{choice}.yaml leaves {k} mandatory: add a value to MANDATORY_VALUES"
            out.append(f"{group}.{k}=" + MANDATORY_VALUES[k].format(choice=choice))
        elif v is None and k in NULL_REQUIRED:
            out.append(f"{group}.{k}=" + NULL_REQUIRED[k])
    return tuple(out)


# The registry checks, as functions of a conf root: the tests below run them on conf/, and the plug-in test
# runs them on a copy of conf/ with four toy yamls added.

def check_names_and_yamls(group: str, conf: str = CONF) -> None:
    assert set(_yamls(group, conf)) == set(GROUPS[group].names())


def check_yaml_defaults(group: str, choice: str, conf: str = CONF) -> None:
    """A yaml's parameter defaults are exactly the constructor defaults of the class it configures, except
    values a yaml derives from another key (interpolations) and values a dataset must set (???)."""
    raw = OmegaConf.load(Path(conf) / group / f"{choice}.yaml")
    if group == "dataset":  # @package _global_: the dataset's own section
        raw = raw.get("dataset", {})
    section = OmegaConf.to_container(raw, resolve=False)
    params = section.get("params", {}) if group == "algo" else section
    cls = GROUPS[group].get(section.get("name"), section.get("_target_"))
    defaults = constructor_defaults(cls)
    for k, v in params.items():
        if k in ("name", "_target_"):
            continue
        assert k in defaults, f"{group}/{choice}.yaml sets {k}, which {cls.__name__}.__init__ does not take"
        if isinstance(v, str) and (v.startswith("${") or v == "???"):
            continue
        assert v == defaults[k] and type(v) is type(defaults[k]) or (
            isinstance(v, float) and isinstance(defaults[k], float) and v == defaults[k]), \
            f"{group}/{choice}.yaml: {k}={v!r} but {cls.__name__}() has {defaults[k]!r}"
    assert set(params) - {"name", "_target_"} <= set(defaults)
    if group != "dataset":
        # every constructor parameter is visible in the yaml
        # (but for parameters added after runs were recorded, left out to keep their config hashes)
        missing = set(defaults) - set(params) - set(cls.unlisted_params)
        assert not missing, f"{group}/{choice}.yaml misses {missing}"


def check_composes(overrides: tuple[str, ...], conf: str = CONF) -> None:
    cfg = _compose(*overrides, conf=conf)
    p = plan(to_container(cfg))
    assert p.algorithm.name == cfg.algo.name and p.source.name == cfg.dataset.name


def _every_choice(conf: str = CONF) -> list[tuple[str, ...]]:
    return [(f"{g}={c}",) + _mandatory_overrides(g, c, conf) for g in ("algo", "dataset", "noise", "graph")
            for c in _yamls(g, conf)] + [(f"experiment={e}",) for e in _yamls("experiment", conf)]


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_every_registered_name_has_a_yaml_and_back(group):
    check_names_and_yamls(group)


def check_registration_route(group: str, conf: str = CONF) -> None:
    """Every yaml of the group names its class by a documented route (docs/architecture.md#registries): a
    ``_target_`` naming a class of the stage's base, or a line in the stage's built-in table; where a yaml
    has both (the built-ins whose ``_target_`` is in their recorded runs' config hashes), the same class."""
    from lgcexp.registry import import_target

    for choice in _yamls(group, conf):
        raw = OmegaConf.to_container(OmegaConf.load(Path(conf) / group / f"{choice}.yaml"), resolve=False)
        section = raw.get(group, raw) if group == "dataset" else raw
        target = section.get("_target_")
        assert target or choice in GROUPS[group]._builtins, \
            f"{group}/{choice}.yaml names no _target_ and is not in the built-in table"
        cls = GROUPS[group].get(choice, target)
        assert issubclass(cls, BASES[group]), f"{group}/{choice}.yaml: {cls} is not a {BASES[group].__name__}"
        if target and choice in GROUPS[group]._builtins:
            assert import_target(target, "t") is GROUPS[group].get(choice)


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_every_yaml_names_its_class_by_a_documented_route(group):
    check_registration_route(group)


def test_a_yaml_without_a_route_fails_the_route_check(tmp_path, monkeypatch):
    import lgcexp.registry

    (tmp_path / "noise").mkdir()
    (tmp_path / "noise" / "uniform.yaml").write_text("name: uniform\nrate: 0.0\n")  # in the table: fine
    (tmp_path / "noise" / "stray.yaml").write_text("name: stray\nrate: 0.0\n")      # neither route
    monkeypatch.setattr(lgcexp.registry, "conf_dir", lambda: tmp_path)
    with pytest.raises(AssertionError, match="noise/stray.yaml names no _target_"):
        check_registration_route("noise", str(tmp_path))
    (tmp_path / "noise" / "stray.yaml").write_text("_target_: lgcexp.graph.knn.KnnGraph\nname: stray\n")
    with pytest.raises(AssertionError, match="is not a NoiseModel"):
        check_registration_route("noise", str(tmp_path))


@pytest.mark.parametrize("group,choice", [(g, c) for g in sorted(GROUPS) for c in _yamls(g)])
def test_yaml_defaults_equal_constructor_defaults(group, choice):
    check_yaml_defaults(group, choice)


@pytest.mark.parametrize("overrides", _every_choice())
def test_every_config_composes_and_validates(overrides):
    check_composes(overrides)


def test_plan_builds_each_stage_once_with_the_typed_values():
    p = plan(to_container(_compose("algo=autoL", "loss=mse", "algo.params.steps=7", "noise.rate=0.3")))
    assert p.algorithm.loss == "mse" and p.algorithm.steps == 7 and p.loss == "mse"
    assert p.noise.rate == 0.3 and p.graph.k == 10
    p = plan(to_container(_compose("algo=lgc", "loss=mse")))
    assert p.loss is None  # LGC takes no loss: the option is ignored and not recorded


# ------------------------------------------------------------------------------------------------------------
# plug-ins: one module + one yaml, nothing else touched
# ------------------------------------------------------------------------------------------------------------

TOY_NOISE = '''
"""A toy noise model: flips the first round(rate * l) labels to the next class."""
import numpy as np
from lgcexp.noise.base import RATE, NoiseModel


class FirstK(NoiseModel):
    name = "firstk"
    _parameter_constraints = {"rate": RATE}

    def __init__(self, rate=0.0):
        self.rate = rate

    def _corrupt(self, y, c, seed):
        m = int(round(self.rate * y.size))
        yo = y.copy()
        yo[:m] = (y[:m] + 1) % c
        return yo, yo != y
'''

TOY_GRAPH = '''
"""A toy graph builder: a ring over the points in their file order, unit weights."""
import numpy as np
import scipy.sparse as sp
from lgcexp.graph import Graph, GraphBuilder
from lgcexp.params import Interval


class Ring(GraphBuilder):
    name = "ring"
    _parameter_constraints = {"hops": [Interval("int", 1, None)]}

    def __init__(self, hops=1):
        self.hops = hops

    def _build(self, X, *, cache, data_fingerprint):
        n = X.shape[0]
        rows = np.concatenate([np.arange(n)] * self.hops)
        cols = np.concatenate([(np.arange(n) + h) % n for h in range(1, self.hops + 1)])
        W = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n, n))
        W = W.maximum(W.T).tocsr()
        return Graph(W=W, sigma=1.0, key=f"ring{self.hops}-{data_fingerprint}"), False
'''


TOY_ALGORITHM = '''
"""A toy algorithm: one step of propagation, F = Y + beta S Y."""
from lgcexp.algorithms.base import GraphSSLAlgorithm, label_matrix
from lgcexp.params import Interval


class OneStep(GraphSSLAlgorithm):
    name = "onestep"
    _parameter_constraints = {"beta": [Interval("real", 0, None)]}

    def __init__(self, beta=1.0):
        self.beta = beta

    def _fit(self, graph, labeled, y_labeled, n_classes, *, eig=None, progress=False, cache=None):
        Y = label_matrix(graph.n, labeled, y_labeled, n_classes)
        self.scores_ = Y + self.beta * (graph.S @ Y)
'''

TOY_DATA = '''
"""A toy data set: three Gaussian blobs in the plane."""
import numpy as np
from lgcexp.data.dataset import Dataset
from lgcexp.data.source import DataSource
from lgcexp.params import Interval


class Blobs(DataSource):
    name = "blobs"
    _parameter_constraints = {"n_per_class": [Interval("int", 2, None)]}

    def __init__(self, n_per_class=40):
        self.n_per_class = n_per_class

    def _load(self, *, data_dir=None, download=True):
        rng = np.random.default_rng(0)
        m = int(self.n_per_class)
        X = np.vstack([rng.normal(size=(m, 2)) + 8 * k for k in range(3)])
        return Dataset(name="blobs", X=X, y=np.repeat(np.arange(3), m), n_classes=3)
'''

TOY_YAMLS = {
    "noise/firstk.yaml": "_target_: toy_noise.FirstK\nname: firstk\nrate: 0.0\n",
    "graph/ring.yaml": "_target_: toy_graph.Ring\nname: ring\nhops: 1\n",
    "algo/onestep.yaml": "_target_: toy_algorithm.OneStep\nname: onestep\nparams:\n  beta: 1.0\n",
    "dataset/blobs.yaml": "# @package _global_\ndataset:\n  _target_: toy_data.Blobs\n  name: blobs\n"
                          "  n_per_class: 40\nlabels:\n  n: 12\n",
}


def _toy_package(tmp_path: Path) -> tuple[Path, Path]:
    """A package of four toy modules and a conf folder of their four yamls (one module + one yaml each)."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    for name, src in (("toy_noise", TOY_NOISE), ("toy_graph", TOY_GRAPH), ("toy_algorithm", TOY_ALGORITHM),
                      ("toy_data", TOY_DATA)):
        (pkg / f"{name}.py").write_text(textwrap.dedent(src))
    conf = tmp_path / "conf"
    for rel, text in TOY_YAMLS.items():
        (conf / rel).parent.mkdir(parents=True, exist_ok=True)
        (conf / rel).write_text(text)
    return pkg, conf


def test_four_toys_run_and_pass_the_registry_checks_with_no_other_edit(tmp_path, monkeypatch, capsys):
    """A toy algorithm, noise model, graph builder and data set, one module and one yaml each: they run
    through the command together, and, once their yamls sit beside the built-in ones, they pass the same
    registry checks as the built-ins (names and yamls, the registration route, yaml defaults, composition, one
    estimator per algorithm and scikit-learn's estimator checks) with no edit to any test or to lgcexp."""
    import shutil

    from sklearn.utils.estimator_checks import check_estimator

    import lgcexp.registry
    from lgcexp import cli
    from lgcexp.sklearn import GraphSSLClassifier, estimator_for, expected_failed_checks, quick_estimators

    pkg, conf = _toy_package(tmp_path)
    monkeypatch.syspath_prepend(str(pkg))
    monkeypatch.setenv("LGCEXP_OUTPUT_DIR", str(tmp_path / "out"))
    monkeypatch.setenv("LGCEXP_CACHE_DIR", str(tmp_path / "cache"))
    cli.main(["dataset=blobs", "algo=onestep", "noise=firstk", "noise.rate=0.25", "graph=ring",
              f"hydra.searchpath=[file://{conf}]"])
    result = json.loads(next((tmp_path / "out").rglob("result.json")).read_text())
    assert (result["dataset"], result["algo"], result["noise"], result["graph"]["builder"]) == (
        "blobs", "onestep", "firstk", "ring")
    assert result["n"] == 120 and result["n_flipped"] == 3

    # the built-in conf/ plus the four yamls, as if they had been added to lgcexp
    merged = tmp_path / "merged"
    shutil.copytree(CONF, merged)
    for rel in TOY_YAMLS:
        shutil.copy(conf / rel, merged / rel)
    monkeypatch.setattr(lgcexp.registry, "conf_dir", lambda: merged)
    for group in GROUPS:
        check_names_and_yamls(group, str(merged))
        check_registration_route(group, str(merged))
    for rel in TOY_YAMLS:
        group, choice = rel.split("/")[0], Path(rel).stem
        check_yaml_defaults(group, choice, str(merged))
    for overrides in _every_choice(str(merged)):
        if any(o.split("=")[1] in ("onestep", "blobs", "firstk", "ring") for o in overrides[:1]):
            check_composes(overrides, str(merged))
    # the scikit-learn side: an estimator for the new algorithm, checked like every registered one
    assert estimator_for("onestep").__name__ == "OneStepClassifier"
    quick = [e for e in quick_estimators() if type(e.algorithm).name == "onestep"]
    assert len(quick) == 1
    est = GraphSSLClassifier(quick[0].algorithm, GROUPS["graph"].get("knn")(k=5, sigma=1.0))
    check_estimator(est, expected_failed_checks=expected_failed_checks(est))


def test_a_plugin_noise_model_and_graph_builder_are_one_module_and_one_yaml(tmp_path, monkeypatch, capsys):
    from lgcexp import cli

    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "toy_noise.py").write_text(textwrap.dedent(TOY_NOISE))
    (pkg / "toy_graph.py").write_text(textwrap.dedent(TOY_GRAPH))
    conf = tmp_path / "conf"
    (conf / "noise").mkdir(parents=True)
    (conf / "graph").mkdir(parents=True)
    (conf / "noise" / "firstk.yaml").write_text("_target_: toy_noise.FirstK\nname: firstk\nrate: 0.0\n")
    (conf / "graph" / "ring.yaml").write_text("_target_: toy_graph.Ring\nname: ring\nhops: 2\n")
    monkeypatch.syspath_prepend(str(pkg))
    monkeypatch.setenv("LGCEXP_OUTPUT_DIR", str(tmp_path / "out"))
    monkeypatch.setenv("LGCEXP_CACHE_DIR", str(tmp_path / "cache"))
    search = f"hydra.searchpath=[file://{conf}]"
    cli.main(["noise=firstk", "noise.rate=0.3", "graph=ring", "labels.n=50", search])
    result = json.loads(next((tmp_path / "out").rglob("result.json")).read_text())
    assert result["noise"] == "firstk" and result["n_flipped"] == 15  # round(0.3 * 50), the first 15
    assert result["graph"]["builder"] == "ring" and result["graph"]["edges"] == 2 * 1797
    labels = __import__("pandas").read_csv(next((tmp_path / "out").rglob("labels.csv")))
    assert labels["flipped"].tolist() == [True] * 15 + [False] * 35
    # the plug-in's parameter table is enforced like a built-in one
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        cli.main(["graph=ring", "graph.hops=0", search])
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip() == "lgcexp: error: graph.hops=0 is not allowed: it must be an integer >= 1"
