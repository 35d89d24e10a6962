"""The sweep's per-process composition memo (lgcexp.compose_memo) against Hydra's own composition: the same
configs, ``hydra`` node included, for group choices, value overrides, additions, deletions, dict values and
Hydra's own settings; fresh copies; Hydra's errors; a new sweep (token) and LGCEXP_MEMO=0 read the files again."""
from __future__ import annotations

import pickle
import threading

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
    ["+noise@extra_noise=pairwise", "seed=1"],
    ["+noise@extra_noise=pairwise", "noise.rate=0.3"],
    ["~features", "seed=2"],
    ["~features", "seed=3"],
    ["hydra/launcher=parallel", "hydra.launcher.n_jobs=3"],
    ["hydra/launcher=parallel", "hydra.launcher.n_jobs=1", "++loss=mse"],
    ["seed=3"],
]


def _loader(conf_dir: str | None = None) -> ConfigLoaderImpl:
    return ConfigLoaderImpl(config_search_path=create_config_search_path(conf_dir or cli._conf_dir()))


def _compose(loader, overrides, run_mode=RunMode.RUN):
    return loader.load_configuration(config_name="config", overrides=list(overrides), run_mode=run_mode)


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


@pytest.mark.parametrize("run_mode", [RunMode.RUN, RunMode.MULTIRUN])
def test_memo_composes_what_hydra_composes(monkeypatch, run_mode):
    monkeypatch.delenv("LGCEXP_MEMO", raising=False)
    counting = _Counting(monkeypatch)
    plain, memo = _loader(), MemoConfigLoader(_loader())
    for job in JOBS:
        expected = _snapshot(_compose(plain, job, run_mode))
        assert _snapshot(_compose(memo, job, run_mode)) == expected, job
    # the plain loader ran Hydra every time; the memo once per distinct choice of groups
    groups = ("algo", "experiment", "dataset", "features", "noise@extra_noise", "hydra/launcher")
    distinct = {tuple(o for o in job if o.split("=")[0].lstrip("+~") in groups) for job in JOBS}
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


def test_search_path_is_part_of_the_key(tmp_path, monkeypatch):
    """Two search paths that hold the same group option with other contents: the memo keeps them apart."""
    monkeypatch.delenv("LGCEXP_MEMO", raising=False)
    (tmp_path / "main").mkdir()
    (tmp_path / "main" / "config.yaml").write_text("defaults:\n  - _self_\n  - grp: x\nvalue: 0\n")
    for name, v in (("a", 1), ("b", 2)):
        (tmp_path / name / "grp").mkdir(parents=True)
        (tmp_path / name / "grp" / "x.yaml").write_text(f"v: {v}\n")
    memo = MemoConfigLoader(_loader(str(tmp_path / "main")))
    for name, v in (("a", 1), ("b", 2), ("a", 1)):
        cfg = _compose(memo, [f"hydra.searchpath=[file://{tmp_path / name}]", f"value={v}"])
        assert (cfg.grp.v, cfg.value) == (v, v)


def test_threads_share_one_memo_safely(monkeypatch):
    monkeypatch.delenv("LGCEXP_MEMO", raising=False)
    memo = MemoConfigLoader(_loader())
    jobs = [["algo=autoL", f"seed={i}"] for i in range(16)]
    want = {i: _snapshot(_compose(_loader(), job)) for i, job in enumerate(jobs)}
    got, errors = {}, []

    def work(ids):
        try:
            for i in ids:
                got[i] = _snapshot(_compose(memo, jobs[i]))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(range(k, 16, 4),)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and got == want
    # the cached config is intact: every child still linked to its parent
    (entry,) = [e for e in compose_memo._MEMO["memo"].entries.values() if e.config is not None]
    assert all(entry.config._get_node(k)._get_parent() is entry.config for k in entry.config.keys())


def test_sweeper_and_preflight_compose_through_the_memo(tmp_path, monkeypatch):
    from hydra.core.plugins import Plugins
    from hydra.types import HydraContext

    from hydra_plugins.lgcexp_sweeper.sweeper import LgcexpSweeper

    monkeypatch.delenv("LGCEXP_MEMO", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LGCEXP_OUTPUT_DIR", str(tmp_path / "out"))
    config = _compose(_loader(), ["experiment=table_mnist"], RunMode.MULTIRUN)
    context = HydraContext(config_loader=_loader(), callbacks=None)
    sweeper = LgcexpSweeper()
    Plugins.instance()  # the plug-ins registered, as the CLI does before a sweep
    sweeper.setup(hydra_context=context, task_function=lambda cfg: None, config=config)
    assert isinstance(sweeper.hydra_context.config_loader, MemoConfigLoader)
    assert sweeper.launcher.hydra_context.config_loader is sweeper.hydra_context.config_loader
    # the pre-flight of a command-line sweep: one composition by Hydra for jobs that differ only in values
    counting = _Counting(monkeypatch)
    cli.preflight(["-m", "dataset=digits", "seed=1,2,3,4,5"])
    assert counting.calls["compose"] == 1
