"""Sweeps: deterministic run directories, resume, failures, and the tables built from them."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lgcexp.tables import aggregate, collect, compare, load_reported, method_name
from lgcexp.tables import main as tables_main


def sweep(tmp: Path, *args: str):
    env = {**os.environ, "LGCEXP_CACHE_DIR": str(tmp / "cache"), "LGCEXP_OUTPUT_DIR": str(tmp / "out")}
    return subprocess.run([sys.executable, "-m", "lgcexp.cli", "-m", *args], capture_output=True, text=True,
                          env=env, cwd=tmp, timeout=600)


def test_sweep_resumes_dedupes_and_records_failures(tmp_path):
    p = sweep(tmp_path, "algo=lgc,gfhf", "loss=mse,xent", "seed=0,1")
    assert p.returncode == 0, p.stderr
    results = sorted((tmp_path / "out" / "multirun").rglob("result.json"))
    # LGC and GFHF take no loss: 2 algos x 2 seeds distinct runs; the sweeper leaves the loss duplicates out
    assert len(results) == 4 and p.stdout.count("accuracy:") == 4
    assert "lgcexp: sweep finished: 4 done, 0 skipped, 0 failed" in p.stdout
    assert "4 of 8 jobs are duplicates (a key their method ignores: loss)" in p.stdout + p.stderr
    mtimes = {r: r.stat().st_mtime_ns for r in results}
    # a rerun touches nothing; a bigger sweep only runs the missing seed
    p2 = sweep(tmp_path, "algo=lgc,gfhf", "seed=0,1,2")
    assert p2.returncode == 0 and p2.stdout.count("skipped, already done") == 4 and p2.stdout.count("accuracy:") == 2
    assert all(r.stat().st_mtime_ns == t for r, t in mtimes.items())
    # force=true reruns in place (atomic replace), same numbers
    before = json.loads(results[0].read_text())
    p3 = sweep(tmp_path, "algo=lgc,gfhf", "seed=0", "force=true")
    assert p3.stdout.count("accuracy:") == 2
    after = json.loads(results[0].read_text())
    assert before["acc_unlabeled"] == after["acc_unlabeled"] and before["config_hash"] == after["config_hash"]
    # a failing job writes error.json and the sweep goes on; the sweep then exits 1 and counts it
    p4 = sweep(tmp_path, "labels.n=5,100", "seed=7")
    assert p4.returncode == 1 and p4.stdout.count("accuracy:") == 1
    assert "lgcexp: sweep finished: 1 done, 0 skipped, 1 failed" in p4.stdout
    errors = list((tmp_path / "out" / "multirun").rglob("error.json"))
    assert len(errors) == 1 and "labels.n=5" in json.loads(errors[0].read_text())["error"]
    runs, fails = collect(tmp_path / "out" / "multirun")
    assert len(runs) == 7 and len(fails) == 1


def _fake_run(root: Path, algo, loss, noise, seed, acc_u, acc_l):
    d = root / f"{algo}-{loss}-{noise}-{seed}"
    d.mkdir(parents=True)
    rec = {"dataset": "isolet", "algo": algo, "loss": loss, "noise_rate": noise, "seed": seed, "n": 10,
           "n_labeled": 4, "n_flipped": 0, "acc_unlabeled": acc_u, "acc_labeled": acc_l,
           "stage_seconds": {"load": 1.0}, "config_hash": f"{algo}{loss}{noise}{seed}"}
    (d / "result.json").write_text(json.dumps(rec))


def test_aggregate_population_sd_and_paper_comparison(tmp_path):
    for s, (u, l) in enumerate([(0.80, 0.99), (0.90, 1.0)]):
        _fake_run(tmp_path, "lgc", None, 0.0, s, u, l)
        _fake_run(tmp_path, "autoL", "xent", 0.6, s, u - 0.1, l - 0.2)
    _fake_run(tmp_path, "lgc", None, 0.6, 0, 0.5, 0.4)
    runs, fails = collect(tmp_path)
    assert len(runs) == 5 and len(fails) == 0
    agg = aggregate(runs)
    row = agg[(agg["method"] == "LGC") & (agg["noise"] == 0)].iloc[0]
    assert row["unlabeled_mean"] == pytest.approx(85.0)
    assert row["unlabeled_sd"] == pytest.approx(5.0)  # ddof=0: std of (80, 90) is 5, not 7.07
    reported = load_reported()  # the copy shipped in the package
    cmp = compare(agg, reported, "ISOLET", "unlabeled")
    lgc0 = cmp[(cmp["method"] == "LGC") & (cmp["noise"] == 0)].iloc[0]
    assert lgc0["paper_mean"] == 84.71 and lgc0["diff"] == pytest.approx(85.0 - 84.71)
    assert lgc0["within"]  # |0.29| <= max(1, 0.56)
    x60 = cmp[(cmp["method"] == "LGC_LVO_AutoL (XENT)") & (cmp["noise"] == 60)].iloc[0]
    assert x60["paper_mean"] == 74.51 and x60["within"]  # |75.0 - 74.51| <= max(1, 1.75)
    lgc60 = cmp[(cmp["method"] == "LGC") & (cmp["noise"] == 60)].iloc[0]
    assert lgc60["diff"] == pytest.approx(50.0 - 70.69) and not lgc60["within"]
    out = tmp_path / "tables"
    assert tables_main(["--root", str(tmp_path), "--out", str(out), "--runs-csv", str(tmp_path / "runs.csv")]) == 0
    md = (out / "table1a_isolet_unlabeled.md").read_text()
    assert "85.00 ± 5.00" in md and "paper 84.71 ± 0.56" in md
    assert (out / "table1b_isolet_labeled.tex").exists() and (out / "table1a_isolet_unlabeled.csv").exists()
    assert len(pd.read_csv(tmp_path / "runs.csv")) == 5


def test_method_names():
    assert method_name("autoL", "mse") == "LGC_LVO_AutoL (MSE)"
    assert method_name("lgc", None) == "LGC" and method_name("lgc", np.nan) == "LGC"


def test_sweeper_keeps_jobs_that_write_elsewhere(tmp_path):
    """A key outside the run's config that moves its output directory (paths.output_dir) is not a
    duplicate: each value runs, the loss duplicates of LGC are still left out."""
    a, b = tmp_path / "a", tmp_path / "b"
    p = sweep(tmp_path, "algo=lgc", "loss=mse,xent", f"paths.output_dir={a},{b}")
    assert p.returncode == 0, p.stderr
    assert "lgcexp: sweep finished: 2 done, 0 skipped, 0 failed" in p.stdout
    assert len(list(a.rglob("result.json"))) == 1 and len(list(b.rglob("result.json"))) == 1
