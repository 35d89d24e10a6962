"""The configuration house: every config under conf/ composes and validates; every yaml default equals the
constructor default it configures; a plug-in noise model or graph builder is one module plus one yaml."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from helpers import CONF
from lgcexp.algorithms import ALGORITHMS
from lgcexp.config import plan, to_container
from lgcexp.data import DATA_SOURCES
from lgcexp.graph import GRAPH_BUILDERS
from lgcexp.noise import NOISE_MODELS
from lgcexp.params import constructor_defaults

GROUPS = {"algo": ALGORITHMS, "dataset": DATA_SOURCES, "noise": NOISE_MODELS, "graph": GRAPH_BUILDERS}


def _yamls(group: str) -> list[str]:
    return sorted(p.stem for p in (Path(CONF) / group).glob("*.yaml"))


def _compose(*overrides: str):
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_every_registered_name_has_a_yaml_and_back(group):
    assert set(_yamls(group)) == set(GROUPS[group].names())


@pytest.mark.parametrize("group,choice", [(g, c) for g in sorted(GROUPS) for c in _yamls(g)])
def test_yaml_defaults_equal_constructor_defaults(group, choice):
    """A yaml's parameter defaults are exactly the constructor defaults of the class it configures, except
    values a yaml derives from another key (interpolations) and values a dataset must set (???)."""
    raw = OmegaConf.load(Path(CONF) / group / f"{choice}.yaml")
    if group == "dataset":  # @package _global_: the dataset's own section
        raw = raw.get("dataset", {})
    section = OmegaConf.to_container(raw, resolve=False)
    params = section.get("params", {}) if group == "algo" else section
    cls = GROUPS[group].get(section.get("name"), section.get("_target_"))
    defaults = constructor_defaults(cls)
    checked = 0
    for k, v in params.items():
        if k in ("name", "_target_"):
            continue
        assert k in defaults, f"{group}/{choice}.yaml sets {k}, which {cls.__name__}.__init__ does not take"
        if isinstance(v, str) and (v.startswith("${") or v == "???"):
            continue
        assert v == defaults[k] and type(v) is type(defaults[k]) or (
            isinstance(v, float) and isinstance(defaults[k], float) and v == defaults[k]), \
            f"{group}/{choice}.yaml: {k}={v!r} but {cls.__name__}() has {defaults[k]!r}"
        checked += 1
    assert set(params) - {"name", "_target_"} <= set(defaults)
    if group != "dataset":
        # every constructor parameter is visible in the yaml
        assert set(defaults) <= set(params), f"{group}/{choice}.yaml misses {set(defaults) - set(params)}"


@pytest.mark.parametrize("overrides", [
    *[(f"algo={a}",) for a in _yamls("algo")],
    *[(f"dataset={d}",) + ((f"dataset.path=x.{d}",) if d in ("npz", "npy", "csv") else ()) + (("dataset.labels_path=y.npy",) if d == "npy" else ()) for d in _yamls("dataset")],
    *[(f"noise={n}",) + (("noise.matrix=[[1.0,0.0],[0.0,1.0]]",) if n == "matrix" else ()) for n in _yamls("noise")],
    *[(f"graph={g}",) + (("graph.path=g.npz",) if g == "precomputed" else ()) for g in _yamls("graph")],
    *[(f"experiment={e}",) for e in _yamls("experiment")],
])
def test_every_config_composes_and_validates(overrides):
    cfg = _compose(*overrides)
    p = plan(to_container(cfg))
    assert p.algorithm.name == cfg.algo.name and p.source.name == cfg.dataset.name


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
