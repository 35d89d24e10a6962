"""Faults of issue 21: CSV labels saved as floats and ragged rows, sweep launcher options, a reserved
character in an override, options a method would ignore, atomic figures, and result.json's device block on a
cache hit."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lgcexp.cli import preflight
from lgcexp.data import load_dataset
from lgcexp.data.own import parse_labels
from lgcexp.errors import UserError

ROOT = Path(__file__).resolve().parents[1]


def _blobs(tmp_path: Path, sep: str = ",") -> Path:
    """Two separated blobs, every 6th row labelled, the label column written by pandas as floats (-1.0)."""
    rng = np.random.default_rng(0)
    X = np.r_[rng.normal(0, 1, (30, 2)), rng.normal(5, 1, (30, 2))]
    y = np.r_[np.zeros(30), np.ones(30)]
    label = np.full(60, -1.0)
    label[::6] = y[::6]
    path = tmp_path / "blobs.csv"
    pd.DataFrame({"x1": X[:, 0], "x2": X[:, 1], "label": label}).to_csv(path, index=False, sep=sep)
    return path


def test_float_label_column_keeps_minus_one_unlabelled(tmp_path):
    path = _blobs(tmp_path)
    assert "-1.0" in path.read_text() and ",1.0\n" in path.read_text()  # as pandas saved it
    data = load_dataset("csv", path=str(path), label_column="label")
    assert data.n_classes == 2 and data.classes.tolist() == [0, 1]
    assert data.labeled.tolist() == list(range(0, 60, 6)) and data.y_observed.tolist() == [0] * 5 + [1] * 5
    col = parse_labels(np.array(["3.0", "-1.0", "", "10.0", "-1"], dtype=object), "k")
    assert col.values.dtype == np.int64 and col.present.tolist() == [True, False, False, True, False]
    assert col.values[col.present].tolist() == [3, 10]
    # text that only looks numeric stays text, as before ("07", "1.5")
    assert parse_labels(np.array(["07", "1"], dtype=object), "k").values.dtype.kind == "U"
    assert parse_labels(np.array(["1.5", "1"], dtype=object), "k").values.dtype.kind == "U"


@pytest.mark.parametrize("edit, fields", [(lambda s: s + ",9", 4), (lambda s: s.rsplit(",", 1)[0], 2)])
def test_ragged_csv_row_is_an_error_naming_the_line(tmp_path, edit, fields):
    path = _blobs(tmp_path)
    lines = path.read_text().splitlines()
    lines[3] = edit(lines[3])
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(UserError, match=rf"line 4 has {fields} fields, not 3 like the header"):
        load_dataset("csv", path=str(path), label_column="label")
    quoted = tmp_path / "quoted.csv"
    quoted.write_text('a,b,label\n1,"2,5",0\n3,4,1\n5,6\n')
    with pytest.raises(UserError, match="line 4 has 2 fields"):
        load_dataset("csv", path=str(quoted), label_column="label")


def test_semicolon_separator_as_documented(tmp_path, monkeypatch):
    monkeypatch.setenv("LGCEXP_OUTPUT_DIR", str(tmp_path / "out"))
    path = _blobs(tmp_path, sep=";")
    usage = (ROOT / "docs" / "usage.md").read_text()
    assert "`\"dataset.sep=';'\"`" in usage  # the form the manual gives, as the shell hands it to lgcexp:
    preflight(["dataset=csv", f"dataset.path={path}", "dataset.sep=';'"])
    assert load_dataset("csv", path=str(path), sep=";").n_classes == 2
    with pytest.raises(UserError, match="quote a value with characters Hydra reserves"):
        preflight(["dataset=csv", f"dataset.path={path}", "dataset.sep=;"])


@pytest.mark.parametrize("args, env, message", [
    (["hydra/launcher=parallel", "hydra.launcher.n_jobs=0"], {}, "hydra.launcher.n_jobs=0 is not allowed"),
    (["hydra/launcher=parallel"], {"LGCEXP_JOBS": "abc"}, "LGCEXP_JOBS=abc is not allowed"),
    (["hydra/launcher=parallel"], {"LGCEXP_JOBS": "0"}, "LGCEXP_JOBS=0 is not allowed"),
    (["hydra/launcher=parallel", "hydra.launcher.prefer=gpu"], {}, "hydra.launcher.prefer=gpu is not allowed"),
    (["hydra/launcher=parallel", "hydra.launcher.nope=1"], {}, "hydra.launcher.nope=1 is not allowed"),
    (["hydra/launcher=slurm"], {"PATH": ""}, "hydra/launcher=slurm is not allowed here: no Slurm found"),
])
def test_launcher_options_are_checked_before_the_sweep(tmp_path, monkeypatch, args, env, message):
    monkeypatch.setenv("LGCEXP_OUTPUT_DIR", str(tmp_path / "out"))
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(UserError, match=message):
        preflight(["-m", "seed=0", *args])
    monkeypatch.setenv("LGCEXP_JOBS", "3")
    preflight(["-m", "seed=0", "hydra/launcher=parallel"])  # a good one passes


def test_launcher_error_is_one_line_and_exit_2(tmp_path):
    env = {**os.environ, "LGCEXP_OUTPUT_DIR": str(tmp_path / "out"), "LGCEXP_JOBS": "abc"}
    p = subprocess.run([sys.executable, "-m", "lgcexp.cli", "-m", "seed=0", "hydra/launcher=parallel"],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0, p.stderr
    assert p.stderr.startswith("lgcexp: error: LGCEXP_JOBS=abc is not allowed")
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").rglob("result.json"))


@pytest.mark.parametrize("args, message", [
    (["algo=autoD", "loss=xent"], "loss=xent is not allowed for algo=autoD: .* algo.params.loss"),
    (["algo=siis", "eig.p=5000"], "eig.p=5000 is not allowed with algo=siis: it computes 30 eigenpairs"),
    (["algo=lgc", "eig.p=50"], "eig.p=50 is not allowed with algo=lgc: it computes no eigenpairs"),
])
def test_options_a_method_would_ignore_are_refused(tmp_path, monkeypatch, args, message):
    monkeypatch.setenv("LGCEXP_OUTPUT_DIR", str(tmp_path / "out"))
    with pytest.raises(UserError, match=message):
        preflight(args)


def test_options_used_by_some_job_of_a_sweep_pass(tmp_path, monkeypatch):
    monkeypatch.setenv("LGCEXP_OUTPUT_DIR", str(tmp_path / "out"))
    preflight(["-m", "algo=autoL,autoD", "loss=xent"])   # AutoL takes it; AutoD's job is a duplicate
    preflight(["-m", "algo=siis,autoD", "eig.p=40"])     # AutoD takes it
    preflight(["algo=autoD", "eig.p=40", "algo.params.loss=mse"])


def test_autod_figures_are_written_atomically(tmp_path, monkeypatch):
    """A plot that fails half-way leaves neither figure2.png nor a temporary file; a good one writes both."""
    import matplotlib.figure
    from helpers import make_cfg

    from lgcexp.pipeline import run

    cfg = make_cfg("algo=autoD", "eig.p=20", "algo.params.x_max=5", "plot=true", tmp=tmp_path)

    def broken(self, fh, **kw):
        fh.write(b"\x89PNG partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", broken)
    with pytest.raises(OSError):
        run(cfg, out_dir=tmp_path / "run")
    out = tmp_path / "run"
    assert not (out / "figure2.png").exists() and not list(out.glob(".*.tmp"))
    assert not (out / "result.json").exists()
    monkeypatch.undo()
    r = run(cfg, out_dir=tmp_path / "run")
    assert r["figures"] == ["autod_curves.csv", "figure2.png"] and (out / "figure2.png").read_bytes()[:4] == b"\x89PNG"
    assert not list(out.glob(".*.tmp"))


def test_device_block_is_the_same_on_a_cache_hit(tmp_path):
    env = {**os.environ, "LGCEXP_CACHE_DIR": str(tmp_path / "cache"), "LGCEXP_OUTPUT_DIR": str(tmp_path / "out")}
    records = []
    for i in range(2):
        out = tmp_path / f"run{i}"
        p = subprocess.run([sys.executable, "-m", "lgcexp.cli", f"hydra.run.dir={out}"], capture_output=True,
                           text=True, env=env, cwd=tmp_path, timeout=300)
        assert p.returncode == 0, p.stderr
        records.append(json.loads((out / "result.json").read_text()))
    assert [r["graph"]["cache_hit"] for r in records] == [False, True]
    assert records[0]["device"] == records[1]["device"] and records[0]["device"]["faiss"] is not None


def test_docs_agree_on_a_cache_directory_that_is_a_file(tmp_path, monkeypatch):
    monkeypatch.setenv("LGCEXP_OUTPUT_DIR", str(tmp_path / "out"))
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(UserError, match="paths.cache_dir=.* is not allowed: it is a file, not a directory"):
        preflight([f"paths.cache_dir={f}"])
    faults = " ".join((ROOT / "docs" / "faults.md").read_text().split())
    assert "A cache directory that is a regular file is refused by the CLI before the run" in faults
    assert "a cache directory that is a file" in (ROOT / "docs" / "usage.md").read_text()


KILLER = '''
"""A noise model that kills its own process for seed 1 (a worker the OOM killer took) and flips nothing."""
import os
import signal

from lgcexp.noise.base import RATE, NoiseModel


class Killer(NoiseModel):
    name = "killer"
    _parameter_constraints = {"rate": RATE}

    def __init__(self, rate=0.0):
        self.rate = rate

    def _corrupt(self, y, c, seed):
        if seed == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        return y.copy(), y != y
'''


def test_a_killed_parallel_worker_does_not_abort_the_sweep(tmp_path):
    """hydra/launcher=parallel, 2 workers, 3 jobs; the job of seed 1 kills its worker: the other two still
    run, every job is counted, the summary is printed and the exit code is 1."""
    pkg, conf = tmp_path / "pkg", tmp_path / "conf" / "noise"
    pkg.mkdir()
    conf.mkdir(parents=True)
    (pkg / "killer_noise.py").write_text(KILLER)
    (conf / "killer.yaml").write_text("_target_: killer_noise.Killer\nname: killer\nrate: 0.0\n")
    env = {**os.environ, "LGCEXP_OUTPUT_DIR": str(tmp_path / "out"), "LGCEXP_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join([str(pkg), str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "LGCEXP_JOBS": "2"}
    p = subprocess.run([sys.executable, "-m", "lgcexp.cli", "-m", "noise=killer", "seed=0,1,2",
                        "hydra/launcher=parallel", f"hydra.searchpath=[file://{tmp_path / 'conf'}]",
                        "progress=false"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "lgcexp: sweep finished: 2 done, 0 skipped, 1 failed" in p.stdout, p.stdout + p.stderr
    results = sorted((tmp_path / "out" / "multirun").rglob("result.json"))
    assert sorted(json.loads(r.read_text())["seed"] for r in results) == [0, 2]
    assert "seed=1_" in p.stdout.split("sweep finished")[1]  # the summary names the failed job's directory
    assert "Traceback" not in p.stdout


def test_a_sweep_job_that_records_nothing_is_counted_failed(tmp_path, monkeypatch, capsys):
    """A full disk: the job failed and neither error.json nor its ledger entry could be written. The
    ledger still counts it (from the launch record) and the sweep reports a failure."""
    from omegaconf import OmegaConf

    from lgcexp import callbacks

    sweep_dir = tmp_path / "multirun"
    cfg = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep_dir)}, "mode": "MULTIRUN"}})
    ledger = callbacks.SweepLedger()
    ledger.on_multirun_start(cfg)
    done, full = sweep_dir / "a", sweep_dir / "b"
    done.mkdir(parents=True)
    (done / "result.json").write_text("{}")
    for d in (done, full):
        callbacks.note_launched(str(d))
    job = OmegaConf.create({"hydra": {"mode": "MULTIRUN", "runtime": {"output_dir": str(done)}, "job": {"num": 0}}})
    from hydra.core.utils import JobReturn, JobStatus

    from lgcexp.runner import _OUTCOMES, DONE, JobOutcome

    _OUTCOMES[str(done.resolve())] = JobOutcome(DONE, done)
    ledger.on_job_end(job, JobReturn(status=JobStatus.COMPLETED))
    # job b's worker could write nothing at all (ENOSPC): no ledger file, no error.json, no result.json
    ledger.on_multirun_end(cfg)
    out = capsys.readouterr().out
    assert "lgcexp: sweep finished: 1 done, 0 skipped, 1 failed" in out and callbacks.last_sweep_failed()
    # a ledger that could not even be created (the disk full from the start): every launched job counted
    monkeypatch.setattr(Path, "mkdir", lambda *a, **k: (_ for _ in ()).throw(OSError(28, "No space left")))
    ledger.on_multirun_start(cfg)
    assert ledger.ledger is None
    monkeypatch.undo()
    callbacks.note_launched(str(full))
    ledger.on_multirun_end(cfg)
    assert "lgcexp: sweep finished: 0 done, 0 skipped, 1 failed" in capsys.readouterr().out



def test_a_job_finished_in_a_killed_batch_counts_done(tmp_path, capsys):
    """A batch's pool is killed after one job wrote its result but before its worker recorded it: relaunched,
    that job is "skipped, already done", yet it was done in this sweep; a relaunched job whose result is older
    than the sweep stays skipped (the race behind test_a_killed_parallel_worker_does_not_abort_the_sweep)."""
    import os
    import time

    from omegaconf import OmegaConf

    from lgcexp import callbacks
    from lgcexp.runner import _OUTCOMES, SKIPPED, JobOutcome

    sweep_dir = tmp_path / "multirun"
    old, new = sweep_dir / "old", sweep_dir / "new"
    for d in (old, new):
        d.mkdir(parents=True)
        (d / "result.json").write_text("{}")
    os.utime(old / "result.json", (time.time() - 3600, time.time() - 3600))  # from an earlier sweep
    cfg = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep_dir)}, "mode": "MULTIRUN"}})
    ledger = callbacks.SweepLedger()
    ledger.on_multirun_start(cfg)
    later = time.time() + 1  # written during this sweep, in the killed batch (the file clock is coarser)
    os.utime(new / "result.json", (later, later))
    from hydra.core.utils import JobReturn, JobStatus

    for num, d in enumerate((old, new)):
        callbacks.note_relaunched(str(d))
        callbacks.note_launched(str(d))
        _OUTCOMES[str(d.resolve())] = JobOutcome(SKIPPED, d)
        job = OmegaConf.create({"hydra": {"mode": "MULTIRUN", "runtime": {"output_dir": str(d)},
                                          "job": {"num": num}}})
        ledger.on_job_end(job, JobReturn(status=JobStatus.COMPLETED))
    ledger.on_multirun_end(cfg)
    assert "lgcexp: sweep finished: 1 done, 1 skipped, 0 failed" in capsys.readouterr().out


# ---- issue 36: legitimate runs that will not do what an option says warn, in the log and in result.json ------

def test_warnings_are_logged_and_recorded(tmp_path, caplog):
    from helpers import make_cfg

    from lgcexp.config import to_container
    from lgcexp.pipeline import run

    def run_(*args):
        caplog.clear()
        r = run(to_container(make_cfg("noise=confusion", *args, tmp=tmp_path)))
        logged = [rec.getMessage() for rec in caplog.records if rec.levelname == "WARNING"]
        assert r.get("warnings", []) == [m for m in logged if m in r.get("warnings", [])] and \
            set(r.get("warnings", [])) <= set(logged)
        return r

    r = run_("labels.per_class=10", "noise.folds=20")  # 20 folds over 100 labels: the folds never look at classes
    assert r.get("warnings", []) == []
    r = run_("noise.pca=5000")  # digits has 64 features: no projection
    assert r["warnings"] == ["noise.pca=5000: the data has 64 features, so there is no projection (the standardised "
                             "features are used as they are)"]
    assert "warnings" not in run_()  # the defaults warn of nothing (a record as it was)


def test_a_diagnosis_run_records_labels_options_as_not_used(tmp_path):
    from helpers import make_cfg

    from lgcexp.config import to_container
    from lgcexp.pipeline import run

    path = _blobs(tmp_path)
    for opt, value in (("labels.per_class", 3), ("labels.sets", str(tmp_path / "any.npz"))):
        r = run(to_container(make_cfg("dataset=csv", f"dataset.path={path}", f"{opt}={value}", tmp=tmp_path)))
        assert r["mode"] == "diagnosis" and r["not_used"] == {opt: value}, r["not_used"]


def test_lone_labels_warn_alike_in_both_protocols(tmp_path):
    """A class with a single label: AutoL drops it (its leave-one-out cannot confirm it). A diagnosis run and a
    sampled run (labels.sets) say so alike; every class single is refused (test_bad_input)."""
    from helpers import make_cfg

    from lgcexp.config import to_container
    from lgcexp.pipeline import run

    X, y = _two_blobs()
    labels = np.full(60, -1)
    keep = [0, 1, 2, 3, 30]  # class 1 has one label
    labels[keep] = y[keep]
    csv = tmp_path / "lone.csv"
    pd.DataFrame({"x1": X[:, 0], "x2": X[:, 1], "label": labels, "clean": y}).to_csv(csv, index=False)
    np.savez(tmp_path / "X.npz", X=X, y=y)
    np.savez(tmp_path / "sets.npz", indices=np.array([keep]))
    common = ("algo=autoL", "noise.rate=0", "graph.k=5", "detect.features=false")
    diag = run(to_container(make_cfg("dataset=csv", f"dataset.path={csv}", "dataset.clean_column=clean", *common,
                                     tmp=tmp_path)))
    sampled = run(to_container(make_cfg("dataset=npz", f"dataset.path={tmp_path}/X.npz", f"labels.sets={tmp_path}/"
                                        "sets.npz", *common, tmp=tmp_path)))
    for r in (diag, sampled):
        assert any(w.startswith("class(es) 1 have a single labelled point: algo=autoL's leave-one-out cannot "
                                "confirm such a label and drops it") for w in r["warnings"]), r.get("warnings")


def _two_blobs():
    rng = np.random.default_rng(0)
    X = np.r_[rng.normal(0, 1, (30, 2)), rng.normal(6, 1, (30, 2))]
    return X, np.r_[np.zeros(30, dtype=int), np.ones(30, dtype=int)]


# ---- issue 36: inputs of the Python API --------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, message", [
    ({"X": "complex"}, "X: X has complex values"),
    ({"labels": "continuous"}, "labels: 60 label.s. are numbers with a fraction .*look continuous"),
    ({"clean_labels": "text"}, "clean_labels: holds text but labels holds numbers"),
])
def test_find_label_issues_inputs(kwargs, message):
    from lgcexp.issues.find import find_label_issues

    X, y = _two_blobs()
    args = {"X": X, "labels": y}
    if kwargs.get("X") == "complex":
        args["X"] = X * (1 + 1j)
    if kwargs.get("labels") == "continuous":
        args["labels"] = np.random.default_rng(0).normal(size=60)
    if kwargs.get("clean_labels") == "text":
        args["clean_labels"] = np.array(["a", "b"])[y]
    with pytest.raises(UserError, match=message):
        find_label_issues(**args)


# ---- issue 36: read-only directories are one line, exit 2 ----------------------------------------------------

def _read_only(monkeypatch, root: Path):
    """Every file created under ``root`` fails as on a read-only mount (root ignores chmod; this does not)."""
    import errno
    import tempfile as real

    from lgcexp import cache, config

    class Shim:
        def __getattr__(self, name):
            return getattr(real, name)

        @staticmethod
        def mkstemp(*a, dir=None, **k):
            if dir is not None and Path(dir).resolve().is_relative_to(root.resolve()):
                raise OSError(errno.EROFS, "Read-only file system", str(dir))
            return real.mkstemp(*a, dir=dir, **k)

    monkeypatch.setattr(cache, "tempfile", Shim())
    monkeypatch.setattr(config, "write_error", lambda d: "Read-only file system"
                        if Path(d).resolve().is_relative_to(root.resolve()) else None)


def _one_run(tmp_path: Path) -> Path:
    from helpers import make_cfg

    from lgcexp.config import to_container
    from lgcexp.pipeline import run

    root = tmp_path / "runs"
    run(to_container(make_cfg("labels.n=50", tmp=tmp_path)), out_dir=root / "one")
    return root


def test_tables_into_a_read_only_directory(tmp_path, monkeypatch, capsys):
    from lgcexp import tables_cli

    root = _one_run(tmp_path)
    ro = tmp_path / "ro"
    ro.mkdir()
    _read_only(monkeypatch, ro)
    code = tables_cli.main(["--root", str(root), "--out", str(ro / "tables"), "--no-report"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("lgcexp-tables: error: cannot write ") \
        and "Read-only file system" in err[0], err
    assert not list(ro.rglob("*.csv"))


def test_tables_into_a_chmod_read_only_directory(tmp_path, capsys):
    from lgcexp import tables_cli

    root = _one_run(tmp_path)
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("running as root: chmod does not stop writes (the monkeypatched test covers it)")
        code = tables_cli.main(["--root", str(root), "--out", str(ro / "tables"), "--no-report"])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and "Permission denied" in err[0], err
    finally:
        ro.chmod(0o755)


@pytest.mark.parametrize("chmod", [False, True])
def test_experiment_into_a_read_only_results_directory(tmp_path, monkeypatch, capsys, chmod):
    """``experiment=figure2`` writes into ``${paths.results_dir}/figure2``: refused before the run."""
    from lgcexp import cli

    monkeypatch.setenv("LGCEXP_OUTPUT_DIR", str(tmp_path / "out"))
    ro = tmp_path / "results"
    ro.mkdir()
    if chmod:
        ro.chmod(0o555)
        if os.access(ro, os.W_OK):
            ro.chmod(0o755)
            pytest.skip("running as root: chmod does not stop writes (the monkeypatched case covers it)")
    else:
        _read_only(monkeypatch, ro)
    try:
        with pytest.raises(SystemExit) as exc:
            cli.main(["experiment=figure2", f"paths.results_dir={ro}"])
    finally:
        ro.chmod(0o755)
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1, err
    assert err[0].startswith(f"lgcexp: error: paths.results_dir={ro} is not allowed: cannot write {ro}/figure2 in "
                             f"{ro} (") and not list(ro.iterdir())


def test_a_run_whose_outputs_cannot_be_written_is_one_line(tmp_path, monkeypatch, capsys):
    """The directory turned read-only after the pre-flight: one line, exit 2, no result.json."""
    import errno

    from lgcexp import cli, pipeline

    def refuse(path, *a, **k):
        raise OSError(errno.EROFS, "Read-only file system", str(path))

    monkeypatch.setenv("LGCEXP_OUTPUT_DIR", str(tmp_path / "out"))
    monkeypatch.setattr(pipeline, "write_json", refuse)
    with pytest.raises(SystemExit) as exc:
        cli.main(["labels.n=50", f"hydra.run.dir={tmp_path}/run"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and err == [f"lgcexp: error: cannot write {tmp_path}/run/result.json (Read-only file "
                                           "system)"], err
    assert not (tmp_path / "run" / "result.json").exists()


# ---- issue 36: the sweep summary names only error.json files that exist ---------------------------------------

def test_sweep_summary_points_only_to_existing_error_files(tmp_path):
    from lgcexp.callbacks import summary_line

    a, b, c = (tmp_path / n for n in "abc")
    for d in (a, b, c):
        d.mkdir()
    (a / "error.json").write_text("{}")
    line = summary_line({"done": 0, "skipped": 0, "failed": 3, "failed_dirs": [str(a), str(b), str(c)]}, str(tmp_path))
    assert line == (f"lgcexp: sweep finished: 0 done, 0 skipped, 3 failed (see error.json in {a}; 2 wrote no "
                    f"error.json ({b} and 1 more): see the log above)")
    line = summary_line({"done": 1, "skipped": 0, "failed": 1, "failed_dirs": [str(b)]}, str(tmp_path))
    assert "see error.json" not in line and f"1 wrote no error.json ({b})" in line


# ---- issue 36: TensorFlow's start-up lines ----------------------------------------------------------------------

def test_tensorflow_imports_quietly(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    code = ("from lgcexp.devices import tensorflow\ntf = tensorflow()\nprint(float(tf.constant(2.0) * 2))\n"
            "import sys; print('after', file=sys.stderr)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                       timeout=300)
    assert p.returncode == 0 and p.stdout.strip() == "4.0", p.stderr
    assert p.stderr == "after\n", p.stderr  # no absl / oneDNN lines; stderr itself still works afterwards


def test_label_sets_read_from_npy_like_npz(tmp_path):
    """``labels.sets=rows.npy``: the rows themselves (it used to be a traceback); the same rows as the .npz."""
    from lgcexp.labels import read_label_set, write_label_sets

    y = np.repeat(np.arange(3), 20)
    rows = write_label_sets(tmp_path / "s.npz", y, range(3), per_class=2)
    np.save(tmp_path / "s.npy", rows)
    for s in range(3):
        assert np.array_equal(read_label_set(str(tmp_path / "s.npy"), s, 60, y),
                              read_label_set(str(tmp_path / "s.npz"), s, 60, y))
    np.save(tmp_path / "flat.npy", rows[0])
    with pytest.raises(UserError, match=r"labels.sets=.*flat.npy is not allowed: the array must be a 2-D integer"):
        read_label_set(str(tmp_path / "flat.npy"), 0, 60)
