"""The sweep's per-process composition memo (lgcexp.compose_memo) against Hydra's own composition: the same
configs, ``hydra`` node included, for group choices, value overrides, additions, deletions, dict values and
Hydra's own settings; fresh copies; Hydra's errors; a new sweep (token) and LGCEXP_MEMO=0 read the files again."""
from __future__ import annotations

import pickle

import pytest
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.utils import create_config_search_path
from hydra.errors import ConfigCompositionException
from hydra.types import RunMode
from omegaconf import OmegaConf

import lgcexp.cli as cli
from lgcexp import compose_memo
from lgcexp.compose_memo import MemoConfigLoader

# jobs in an order that makes later ones hit the entries of earlier ones with other values
JOBS = [
    [],
    ["seed=3"],
    ["seed=4", "noise.rate=0.15"],
    ["algo=autoL", "loss=xent", "seed=1"],
    ["algo=autoL", "loss=mse", "seed=2", "algo.params.lr=0.5"],
    ["experiment=table_mnist", "algo=lgc", "seed=0", "noise.rate=0.15"],
    ["experiment=table_mnist", "algo=auto", "seed=7", "noise.rate=0.3"],
    ["dataset=isolet", "graph.k=10", "seed=2"],
    ["dataset=isolet", "graph.k=12", "~suggested"],
    ["graph={k: 5}", "seed=5"],
    ["graph={k: 6}"],
    ["hydra.job.chdir=true", "seed=1"],
    ["+extra_key=1", "seed=2"],
    ["features=pca", "dataset=isolet", "seed=9"],
    ["dataset=isolet", "features=pca", "seed=9"],   # the same choices in another order: its own entry
    ["seed=3"],
]


def _loader(conf_dir: str | None = None) -> ConfigLoaderImpl:
    return ConfigLoaderImpl(config_search_path=create_config_search_path(conf_dir or cli._conf_dir()))


def _compose(loader, overrides):
    return loader.load_configuration(config_name="config", overrides=list(overrides), run_mode=RunMode.RUN)


def _snapshot(cfg) -> tuple:
    return (OmegaConf.to_container(cfg, resolve=False), OmegaConf.is_struct(cfg), OmegaConf.is_readonly(cfg.hydra),
            OmegaConf.to_yaml(cfg))


class _Counting:
    """Counts the calls of Hydra's original functions behind the memo."""

    def __init__(self, monkeypatch):
        self.calls = {"create_defaults_list": 0, "compose": 0}
        compose_memo._install()
        for name in self.calls:
            original = compose_memo._ORIGINAL[name]

            def counted(*args, _original=original, _name=name, **kwargs):
                self.calls[_name] += 1
                return _original(*args, **kwargs)

            monkeypatch.setitem(compose_memo._ORIGINAL, name, counted)


def test_memo_composes_what_hydra_composes(monkeypatch):
    monkeypatch.delenv("LGCEXP_MEMO", raising=False)
    counting = _Counting(monkeypatch)
    plain, memo = _loader(), MemoConfigLoader(_loader())
    for job in JOBS:
        expected = _snapshot(_compose(plain, job))
        assert _snapshot(_compose(memo, job)) == expected, job
    # the plain loader ran Hydra every time; the memo once per distinct choice of groups
    distinct = {tuple(o for o in job if o.split("=")[0].lstrip("+~") in ("algo", "experiment", "dataset", "features"))
                for job in JOBS}
    assert counting.calls["compose"] == len(JOBS) + len(distinct)
    assert counting.calls["create_defaults_list"] == len(JOBS) + len(distinct)


def test_memo_gives_fresh_copies_and_sweep_configs(monkeypatch):
    monkeypatch.delenv("LGCEXP_MEMO", raising=False)
    memo = MemoConfigLoader(_loader())
    first = _compose(memo, ["seed=1"])
    first.seed = 99
    first.hydra.job.name = "changed"
    second = _compose(memo, ["seed=2"])
    assert second.seed == 2 and second.hydra.job.name != "changed"
    # load_sweep_config, as the launchers call it, on a pickled copy (as a loky or submitit worker gets it)
    master = _compose(_loader(), ["experiment=table_mnist"])
    worker = pickle.loads(pickle.dumps(memo))
    assert worker.token == memo.token
    for job in (["algo=lgc", "seed=3"], ["algo=autoL", "loss=mse", "seed=4"], ["algo=lgc", "seed=5"]):
        got = worker.load_sweep_config(master, job)
        want = _loader().load_sweep_config(master, job)
        assert _snapshot(got) == _snapshot(want)


def test_memo_raises_hydras_errors(monkeypatch):
    monkeypatch.delenv("LGCEXP_MEMO", raising=False)
    memo, plain = MemoConfigLoader(_loader()), _loader()
    _compose(memo, ["seed=1"])                          # the entry the bad jobs would hit
    for bad in (["no_such_key=1"], ["algo=no_such_method"], ["graph.no_such=1"]):
        with pytest.raises(ConfigCompositionException) as want:
            _compose(plain, bad)
        with pytest.raises(ConfigCompositionException) as got:
            _compose(memo, bad)
        assert str(got.value) == str(want.value)


def test_new_sweep_or_switch_off_reads_files_again(tmp_path, monkeypatch):
    monkeypatch.delenv("LGCEXP_MEMO", raising=False)
    counting = _Counting(monkeypatch)
    (tmp_path / "config.yaml").write_text("value: 1\nother: 0\n")
    first = MemoConfigLoader(_loader(str(tmp_path)))
    assert _compose(first, ["other=1"]).value == 1
    (tmp_path / "config.yaml").write_text("value: 2\nother: 0\n")
    # within the sweep (token) the files were read once: the edit is not seen ...
    assert _compose(first, ["other=2"]).value == 1
    assert counting.calls["compose"] == 1
    # ... a new sweep reads them again, and so does every composition with the memo switched off
    assert _compose(MemoConfigLoader(_loader(str(tmp_path))), ["other=3"]).value == 2
    assert counting.calls["compose"] == 2
    monkeypatch.setenv("LGCEXP_MEMO", "0")
    assert _compose(first, ["other=4"]).value == 2
    assert _compose(first, ["other=5"]).value == 2
    assert counting.calls["compose"] == 4


def test_only_memo_loaders_use_the_memo(monkeypatch):
    monkeypatch.delenv("LGCEXP_MEMO", raising=False)
    counting = _Counting(monkeypatch)
    memo = MemoConfigLoader(_loader())
    _compose(memo, ["seed=1"])
    _compose(_loader(), ["seed=2"])                     # a plain loader after the memo was installed
    _compose(_loader(), ["seed=3"])
    assert counting.calls["compose"] == 3
