"""The bad-input suite: every refusal is exit code 2, exactly one line on stderr naming the key as typed,
no traceback, and no heavy work (no graph, eigenpairs or fit) started.

The CLI runs in-process (``lgcexp.cli.main``) so the suite stays fast; ``test_cli.py`` covers the console
script in a subprocess. Cases are generated from every stage's parameter table (a value of the wrong type
and one out of range for each parameter) and completed by hand-written ones (group choices, unknown keys,
paths, malformed data files, sweeps, checks that need the data size).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lgcexp import cli
from lgcexp.algorithms import ALGORITHMS
from lgcexp.config import TOP_PARAMETERS
from lgcexp.params import Interval
from lgcexp.spectral import EIG_PARAMETERS

CANDIDATES = (-1, 0, 0.5, 1.5, 2.5, "abc")


def _typed(v) -> str:
    return str(v)


def bad_values(constraints) -> list:
    """Up to two values no constraint allows: a number and a string."""
    out = []
    for v in CANDIDATES:
        if not any(c.is_satisfied_by(v) for c in constraints):
            kind = "str" if isinstance(v, str) else "num"
            if kind not in {("str" if isinstance(o, str) else "num") for o in out}:
                out.append(v)
    return out


def table_cases():
    cases = []
    for name in ALGORITHMS.names():
        cls = ALGORITHMS.get(name)
        for p, cons in cls._parameter_constraints.items():
            if p == "loss" and cls.losses:
                continue  # the top-level loss option, below
            for v in bad_values(cons):
                cases.append(((f"algo={name}", f"algo.params.{p}={_typed(v)}"), f"algo.params.{p}={_typed(v)}"))
    from lgcexp.features import FEATURES

    for name in FEATURES.names():
        for p, cons in FEATURES.get(name)._parameter_constraints.items():
            for v in bad_values(cons):
                cases.append(((f"features={name}", f"features.{p}={_typed(v)}"), f"features.{p}={_typed(v)}"))
    from lgcexp.graph import KnnGraph

    for p, cons in KnnGraph._parameter_constraints.items():
        for v in bad_values(cons):
            cases.append(((f"graph.{p}={_typed(v)}",), f"graph.{p}={_typed(v)}"))
    for p, cons in EIG_PARAMETERS.items():
        for v in bad_values(cons):
            cases.append((("algo=autoD", f"eig.{p}={_typed(v)}"), f"eig.{p}={_typed(v)}"))
    from lgcexp.data.builtin import Spirals

    for p, cons in Spirals._parameter_constraints.items():
        for v in bad_values(cons):
            cases.append((("dataset=spirals", f"dataset.{p}={_typed(v)}"), f"dataset.{p}={_typed(v)}"))
    for p, cons in TOP_PARAMETERS.items():
        for v in bad_values(cons):
            cases.append(((f"{p}={_typed(v)}",), f"{p}={_typed(v)}"))
    from lgcexp.issues.options import DetectOptions

    for p, cons in DetectOptions._parameter_constraints.items():
        for v in bad_values(cons):
            cases.append(((f"detect.{p}={_typed(v)}",), f"detect.{p}={_typed(v)}"))
    for v in bad_values([Interval("real", 0, 1, "left")]):
        cases.append(((f"noise.rate={_typed(v)}",), f"noise.rate={_typed(v)}"))
    for v in bad_values([Interval("int", 1, None)]):
        cases.append(((f"labels.n={_typed(v)}",), f"labels.n={_typed(v)}"))
    cases.append((("paths.download=maybe",), "paths.download=maybe"))
    return cases


HAND_CASES = [
    # group choices and unknown keys (Hydra-level mistakes)
    (("dataset=foo",), "dataset=foo is not allowed: choose one of"),
    (("algo=foo",), "algo=foo is not allowed: choose one of"),
    (("noise=foo",), "noise=foo is not allowed: choose one of"),
    (("graph=foo",), "graph=foo is not allowed: choose one of"),
    (("features=foo",), "features=foo is not allowed: choose one of"),
    (("+features.foo=1",), "features.foo is not a parameter of features=raw"),
    (("features=pca", "features.n_components=65"), "features.n_components=65 is not allowed for this dataset"),
    (("features=oof", "features.folds=60"), "features.folds=60 is not allowed for this run"),
    (("foo=1",), "foo=1 is not allowed: foo is not an option"),
    (("+detect.foo=1",), "detect.foo is not a parameter of detect; allowed: cut, features, folds, min_agreement, "
                         "min_per_class, threshold"),
    (("+foo=1",), "foo is not an option"),
    (("algo.params.alfa=0.5",), "algo.params.alfa=0.5 is not allowed: algo.params.alfa is not an option"),
    (("+algo.params.alfa=0.5",), "algo.params.alfa is not a parameter of algo=lgc"),
    (("+graph.kk=3",), "graph.kk is not a parameter of graph=knn"),
    (("+noise.foo=3",), "noise.foo is not a parameter of noise=uniform"),
    (("+dataset.foo=3",), "dataset.foo is not a parameter of dataset=digits"),
    (("noise.rate=[",), "cannot parse the command line"),
    (("algo=lgc,gfhf",), "algo=lgc,gfhf is not allowed: a list of values is a sweep; add -m"),
    # numbers at the edges
    (("seed=4294967296",), "seed=4294967296 is not allowed"),
    (("seed=-1",), "seed=-1 is not allowed"),
    (("seed=1.5",), "seed=1.5 is not allowed"),
    (("noise.rate=1",), "noise.rate=1 is not allowed: it must be a number in [0, 1)"),
    (("noise.rate=nan",), "noise.rate=nan is not allowed"),
    (("noise.rate=inf",), "noise.rate=inf is not allowed"),
    (("graph.sigma=median",), "graph.sigma=median is not allowed"),
    (("graph.sigma=0",), "graph.sigma=0 is not allowed"),
    (("algo.params.alpha=1",), "algo.params.alpha=1 is not allowed: it must be a number in (0, 1)"),
    (("algo.params.alpha=true",), "algo.params.alpha=true is not allowed"),
    (("algo=autoL", "loss=hinge"), "loss=hinge is not allowed"),
    (("algo=autoL", "algo.params.loss=hinge"), "algo.params.loss=hinge is not allowed"),
    (("force=yes",), "force=yes is not allowed: use true or false"),
    (("plot=1",), "plot=1 is not allowed"),
    (("progress=auto",), "progress=auto is not allowed"),
    # relations between parameters
    (("algo=autoD", "algo.params.x_min=10", "algo.params.x_max=5"), "algo.params.x_max=5 is not allowed"),
    (("algo=autoD", "algo.params.search=gradient", "algo.params.x0=500"), "algo.params.x0=500 is not allowed"),
    (("algo=siis", "algo.params.mu=10", "algo.params.mu_max=5"), "algo.params.mu_max=5 is not allowed"),
    # checks that need the data size (digits: n = 1797, 10 classes)
    (("labels.n=5",), "labels.n=5 is not allowed for this dataset"),
    (("labels.n=1797",), "labels.n=1797 is not allowed for this dataset"),
    (("graph.k=1797",), "graph.k=1797 is not allowed: it must be less than the number of points (1797)"),
    (("algo=autoD", "eig.p=1797"), "p=1797 is not allowed"),
    (("algo=autoD", "eig.p=5"), "p=5 is not allowed"),
    (("algo=siis", "algo.params.m=4000"), "algo.params.m=4000 is not allowed"),
    (("algo=siis", "algo.params.m=3"), "algo.params.m=3 is not allowed"),
    (("dataset=spirals", "dataset.n_samples=8", "labels.n=2", "graph.k=3"), "graph.sigma=mean is not allowed"),
    # sweeps: a bad value anywhere in the sweep stops it before any job runs
    (("-m", "noise.rate=0.2,1.5"), "noise.rate=1.5 is not allowed"),
    (("-m", "algo=lgc,nope"), "algo=nope is not allowed"),
    (("-m", "seed=0,1", "algo=autoL", "loss=mse,hinge"), "loss=hinge is not allowed"),
    # issue 36: options that would run at chance, be cut silently or be ignored
    (("labels.per_class=1", "algo=autoL"), "labels.per_class=1 is not allowed with algo=autoL: every class has a "
                                           "single label"),
    (("labels.per_class=1", "algo=auto"), "labels.per_class=1 is not allowed with algo=auto"),
    (("detect.folds=1000",), "detect.folds=1000 is not allowed for this run: it has 100 labelled points"),
    (("labels.per_class=3", "detect.folds=31"), "detect.folds=31 is not allowed for this run: it has 30 labelled"),
    (("algo=gfhf", "detect.folds=3"), "detect.folds=3 is not allowed with algo=gfhf: it does not judge its labels"),
    (("algo=poisson", "detect.cut=threshold"), "detect.cut=threshold is not allowed with algo=poisson"),
    (("labels.per_class=5", "noise=confusion", "noise.folds=51"), "noise.folds=51 is not allowed for this run: it "
                                                                   "has 50 labelled points"),
    (("labels.per_class=2", "features=oof", "features.folds=50"), "features.folds=50 is not allowed for this run: it "
                                                                   "has 20 labelled points"),
    (("algo=poissonL", "algo.params.min_iter=100", "algo.params.max_iter=10"),
     "algo.params.max_iter=10 is not allowed: it must be >= algo.params.min_iter (100)"),
    # launcher keys: unknown ones for every launcher, and checked in a single run too
    (("-m", "seed=0", "+hydra.launcher.foo=1"), "+hydra.launcher.foo=1 is not allowed: hydra.launcher.foo is not an "
                                                "option of hydra/launcher=basic"),
    (("-m", "seed=0", "hydra/launcher=parallel", "+hydra.launcher.foo=1"),
     "+hydra.launcher.foo=1 is not allowed: hydra.launcher.foo is not an option of hydra/launcher=parallel; allowed:"),
    (("+hydra.launcher.foo=1",), "+hydra.launcher.foo=1 is not allowed"),
    (("hydra/launcher=parallel", "hydra.launcher.n_jobs=0"), "hydra.launcher.n_jobs=0 is not allowed"),
    (("-m", "seed=0", "hydra.launcher.timeout_min=-1"), "hydra.launcher.timeout_min=-1 is not allowed"),
]


def path_cases(tmp: Path):
    """Cases that need files: (overrides, needle)."""
    a_file = tmp / "a_file"
    a_file.write_text("x")
    bad = tmp / "bad"
    bad.mkdir()
    np.savez(bad / "one_class.npz", X=np.random.default_rng(0).normal(size=(50, 3)), y=np.zeros(50))
    np.savez(bad / "nan.npz", X=np.full((50, 3), np.nan), y=np.arange(50) % 2)
    np.savez(bad / "no_y.npz", X=np.zeros((50, 3)))
    np.savez(bad / "flat.npz", X=np.zeros(50), y=np.arange(50) % 2)
    np.savez(bad / "mismatch.npz", X=np.zeros((50, 3)), y=np.arange(40) % 2)
    np.save(bad / "objects.npy", np.zeros(3))
    (bad / "garbage.npz").write_bytes(b"this is not a zip file at all")
    (bad / "truncated.npz").write_bytes((bad / "one_class.npz").read_bytes()[:100])
    np.savez(bad / "strings.npz", X=np.array([["a", "b"]] * 50), y=np.arange(50) % 2)
    np.savez(bad / "complex.npz", X=np.ones((50, 3)) * (1 + 2j), y=np.arange(50) % 2)
    np.savez(bad / "continuous.npz", X=np.random.default_rng(0).normal(size=(50, 3)),
             y=np.random.default_rng(1).normal(size=50))
    # label-set files (issue 36): digits has 1797 points, 10 classes
    from sklearn.datasets import load_digits

    from lgcexp.labels import write_label_sets

    digits_y = load_digits().target
    sets = tmp / "sets"
    sets.mkdir()
    (sets / "text.npz").write_text("0 1 2 3\n")
    np.savez(sets / "empty.npz", indices=np.zeros((3, 0), dtype=np.int64))
    np.savez(sets / "one.npz", indices=np.array([[5]]))
    np.savez(sets / "fives.npz", indices=np.flatnonzero(digits_y < 5)[None, :20])
    write_label_sets(sets / "other.npz", np.random.default_rng(0).integers(0, 10, 1797), [0], per_class=3)
    write_label_sets(sets / "small.npz", np.arange(50) % 10, [0], per_class=2)
    (tmp / "header.csv").write_text("a,b,label\n")
    (tmp / "text.npy").write_text("1,2,3\n")
    (tmp / "kinds.csv").write_text("a,label,clean\n" + "".join(f"{i},{i % 2},{'xy'[i % 2]}\n" for i in range(20)))
    npz = ("dataset=npz", "labels.n=10")
    ls = "labels.sets"
    return [
        ((f"paths.output_dir={a_file}/out",), f"paths.output_dir={a_file}/out is not allowed"),
        ((f"paths.output_dir={a_file}",), f"paths.output_dir={a_file} is not allowed: it is a file"),
        ((f"paths.cache_dir={a_file}",), f"paths.cache_dir={a_file} is not allowed: it is a file"),
        ((f"paths.data_dir={a_file}",), f"paths.data_dir={a_file} is not allowed: it is a file"),
        (("dataset=isolet", "paths.download=false", f"paths.data_dir={tmp}/empty"), "isolet.npz not found"),
        (("dataset=mnist", "paths.download=false", f"paths.data_dir={tmp}/empty"), "mnist.npz not found"),
        (("dataset=npz",), "has no value"),
        (("dataset=npz", "dataset.path=x.npz"), "npz file not found"),
        ((*npz, f"dataset.path={tmp}/missing.npz"), "npz file not found"),
        ((*npz, f"dataset.path={bad}/one_class.npz"), "need at least 2 classes"),
        ((*npz, f"dataset.path={bad}/nan.npz"), "NaN or Inf"),
        ((*npz, f"dataset.path={bad}/no_y.npz"), "missing array(s) y"),
        ((*npz, f"dataset.path={bad}/flat.npz"), "X must be 2-D"),
        ((*npz, f"dataset.path={bad}/mismatch.npz"), "X has 50 rows but y has 40 labels"),
        ((*npz, f"dataset.path={bad}/garbage.npz"), "not a readable npz file"),
        ((*npz, f"dataset.path={bad}/truncated.npz"), "not a readable npz file"),
        ((*npz, f"dataset.path={bad}/strings.npz"), "not numeric"),
        ((*npz, f"dataset.path={bad}"), f"dataset.path={bad} is not allowed: it is a directory, not a file"),
        ((*npz, f"dataset.path={bad}/complex.npz"), "X has complex values"),
        ((*npz, f"dataset.path={bad}/continuous.npz"), "they look continuous, and class labels must be ints or"),
        (("dataset=csv", f"dataset.path={bad}"), f"dataset.path={bad} is not allowed: it is a directory, not a file"),
        (("dataset=csv", f"dataset.path={tmp}/header.csv"), "has a header line (a, b, label) but no data rows"),
        (("dataset=npy", f"dataset.path={tmp}/text.npy", f"dataset.labels_path={tmp}/text.npy"),
         f"dataset.path={tmp}/text.npy is not allowed: it is not a .npy file"),
        (("dataset=csv", f"dataset.path={tmp}/kinds.csv", "dataset.clean_column=clean"),
         "dataset.clean_column=clean: holds text but dataset.label_column=label holds numbers"),
        ((f"{ls}={sets}/text.npz",), f"{ls}={sets}/text.npz is not allowed: it is not an .npz or .npy file"),
        ((f"{ls}={sets}",), f"{ls}={sets} is not allowed: it is a directory, not a file"),
        ((f"{ls}={sets}/missing.npz",), f"{ls}={sets}/missing.npz is not allowed: no such file"),
        ((f"{ls}={sets}/empty.npz",), f"{ls}={sets}/empty.npz is not allowed: its rows are empty"),
        ((f"{ls}={sets}/one.npz",), f"{ls}={sets}/one.npz is not allowed: row 0 labels 1 of 10 classes"),
        ((f"{ls}={sets}/fives.npz",), f"{ls}={sets}/fives.npz is not allowed: row 0 labels 5 of 10 classes (none of "
                                      "class 5, 6, 7, 8, 9)"),
        ((f"{ls}={sets}/other.npz",), "is not allowed: it was written for another data set of 1797 points"),
        ((f"{ls}={sets}/small.npz",), "is not allowed: it was written for a data set of 50 points, and this one has "
                                      "1797"),
    ]


#: how many cases path_cases makes (the parametrisation needs the number before the files exist)
N_PATH_CASES = 32


@pytest.fixture
def run_cli(tmp_path, monkeypatch, capsys):
    """Run the CLI in-process; return (exit code, stderr lines, stages entered)."""
    import lgcexp.pipeline as pl

    monkeypatch.setenv("LGCEXP_OUTPUT_DIR", str(tmp_path / "out"))
    monkeypatch.setenv("LGCEXP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    entered: list[str] = []
    real_stage = pl.StageTimer.stage

    def spy(self, name):
        entered.append(name)
        return real_stage(self, name)

    monkeypatch.setattr(pl.StageTimer, "stage", spy)

    def call(*argv: str):
        capsys.readouterr()
        with pytest.raises(SystemExit) as exc:
            cli.main(list(argv))
        out, err = capsys.readouterr()
        return exc.value.code, [l for l in err.splitlines() if l.strip()], list(entered), out

    return call


def _assert_refused(result, needle: str, tmp: Path) -> None:
    code, lines, entered, out = result
    assert code == 2, (code, lines, out)
    assert len(lines) == 1, lines
    assert lines[0].startswith("lgcexp: error: ") and needle in lines[0], (needle, lines[0])
    assert "Traceback" not in lines[0]
    assert set(entered) <= {"load"}, f"heavy stages started: {entered}"
    assert not list((tmp / "out").rglob("result.json"))
    cache = tmp / "cache"
    assert not cache.exists() or not [p for p in cache.rglob("*.npz")], "nothing may be cached"


ALL_CASES = table_cases() + HAND_CASES


def test_the_suite_has_at_least_100_cases(tmp_path):
    assert len(ALL_CASES) + len(path_cases(tmp_path)) >= 100


@pytest.mark.parametrize("overrides,needle", ALL_CASES, ids=[" ".join(c[0]) for c in ALL_CASES])
def test_bad_value_is_one_line_exit_2(run_cli, tmp_path, overrides, needle):
    _assert_refused(run_cli(*overrides), needle, tmp_path)


@pytest.mark.parametrize("i", range(N_PATH_CASES))
def test_bad_path_or_data_file(run_cli, tmp_path, i):
    cases = path_cases(tmp_path)
    assert len(cases) == N_PATH_CASES
    overrides, needle = cases[i]
    _assert_refused(run_cli(*overrides), needle, tmp_path)


def test_good_config_runs_in_process(run_cli, tmp_path):
    """The fixture is no trap: a valid run goes through every stage and exits 0."""
    import lgcexp.cli

    code = None
    try:
        lgcexp.cli.main(["labels.n=50"])
    except SystemExit as exc:  # pragma: no cover - a valid run does not exit
        code = exc.code
    assert code in (None, 0)
    assert list((tmp_path / "out").rglob("result.json"))


# ---- issue 36: one memory rule for every way of choosing labels (no memory is allocated: a 1 KiB machine) ------

@pytest.mark.parametrize("how", ["labels.n=1000", "labels.per_class=100", "sets", "diagnosis"])
def test_memory_rule_for_every_way_of_choosing_labels(run_cli, tmp_path, monkeypatch, how):
    from lgcexp.algorithms import propagation

    monkeypatch.setattr(propagation, "physical_memory", lambda: 1 << 10)
    args, l = [how], 1000
    if how == "sets":
        from sklearn.datasets import load_digits

        from lgcexp.labels import write_label_sets

        write_label_sets(tmp_path / "s.npz", load_digits().target, [0], per_class=100)
        args = [f"labels.sets={tmp_path}/s.npz"]
    elif how == "diagnosis":  # the data's own 40 labels
        rng = np.random.default_rng(0)
        csv = tmp_path / "own.csv"
        csv.write_text("a,b,label\n" + "".join(f"{rng.normal()},{rng.normal()},{i % 2 if i < 40 else -1}\n"
                                                for i in range(80)))
        args, l = ["dataset=csv", f"dataset.path={csv}"], 40
    result = run_cli("algo=autoL", *args)
    _assert_refused(result, f"algo=autoL is not allowed with {l} labels on this machine", tmp_path)
    assert args[-1] in result[1][0] or how in ("labels.n=1000", "diagnosis")  # the key as typed
    monkeypatch.undo()
    assert propagation.physical_memory() > 1 << 20


def test_memory_rule_for_the_estimators(monkeypatch):
    from lgcexp import stages
    from lgcexp.algorithms import propagation
    from lgcexp.sklearn import estimator_for

    monkeypatch.setattr(propagation, "physical_memory", lambda: 1 << 10)
    monkeypatch.setattr(stages, "fit_on_graph", lambda *a, **k: pytest.fail("the fit started"))
    X = np.random.default_rng(0).normal(size=(200, 3))
    y = np.arange(200) % 2
    for algo in ("autoL", "auto"):
        with pytest.raises(ValueError, match=rf"Classifier: algorithm={algo} is not allowed with 200 labels on this "
                                             "machine.*use algorithm=lgc"):
            estimator_for(algo)().fit(X, y)
