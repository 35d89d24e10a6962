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
    readme = (ROOT / "README.md").read_text()
    assert "`\"dataset.sep=';'\"`" in readme  # the form the README gives, as the shell hands it to lgcexp:
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
    assert "a cache directory that is a file" in (ROOT / "README.md").read_text()


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
