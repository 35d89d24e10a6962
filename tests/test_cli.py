"""The console script as a user meets it (subprocess)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def lgcexp(*args, tmp: Path, env_extra=None):
    env = {**os.environ, "LGCEXP_CACHE_DIR": str(tmp / "cache"), "LGCEXP_OUTPUT_DIR": str(tmp / "out")}
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "lgcexp.cli", *args], capture_output=True, text=True, env=env,
                          cwd=tmp, timeout=300)


def test_default_run_prints_summary(tmp_path):
    p = lgcexp(tmp=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "dataset=digits algo=lgc" in p.stdout and "labelled=100" in p.stdout and "flipped=20" in p.stdout
    assert "accuracy: unlabelled" in p.stdout and "seconds:" in p.stdout
    results = list((tmp_path / "out").rglob("result.json"))
    assert len(results) == 1 and json.loads(results[0].read_text())["algo"] == "lgc"


def test_help_and_cfg(tmp_path):
    from lgcexp.algorithms import ALGORITHMS, GraphSSLAlgorithm

    h = lgcexp("--help", tmp=tmp_path)
    assert h.returncode == 0 and "dataset" in h.stdout and "algo" in h.stdout
    # the header's lists come from the registry: every method, and those that judge their labels
    methods = h.stdout.split("Methods (algo=): ", 1)[1].split(".\n", 1)[0]
    assert methods.replace("\n", " ").split(", ") == list(ALGORITHMS.names())
    judging = " ".join(h.stdout.split("judge their labels: ", 1)[1].split(";", 1)[0].split())
    assert judging.split(", ") == [n for n in ALGORITHMS.names()
                                   if ALGORITHMS.get(n).label_judgement is not GraphSSLAlgorithm.label_judgement]
    assert {"lgc", "autoL", "siis", "auto"} <= set(judging.split(", "))
    c = lgcexp("--cfg", "job", "dataset=isolet", tmp=tmp_path)
    assert c.returncode == 0 and "name: isolet" in c.stdout and "sigma: 100.0" in c.stdout


@pytest.mark.parametrize("args,needle", [
    (["noise.rate=1.5"], "noise.rate=1.5"),
    (["labels.n=3"], "labels.n=3"),
    (["loss=hinge"], "loss=hinge"),
])
def test_user_errors_exit_nonzero_one_line(tmp_path, args, needle):
    p = lgcexp(*args, tmp=tmp_path)
    assert p.returncode == 2
    lines = [l for l in p.stderr.strip().splitlines() if l.strip()]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in p.stderr


def test_unknown_group_choice_names_the_choices(tmp_path):
    p = lgcexp("algo=nope", tmp=tmp_path)
    assert p.returncode != 0 and "lgc" in p.stderr and "gfhf" in p.stderr
    p = lgcexp("dataset=nope", tmp=tmp_path)
    assert p.returncode != 0 and "isolet" in p.stderr and "mnist" in p.stderr


def test_missing_data_file_is_a_clear_error(tmp_path):
    p = lgcexp("dataset=isolet", "paths.download=false", f"paths.data_dir={tmp_path}/empty", tmp=tmp_path)
    assert p.returncode == 2 and "isolet.npz" in p.stderr and "Traceback" not in p.stderr


_IMPORT_PROBE = """
import runpy, sys
sys.argv = ["lgcexp", "dataset=spirals", "algo=lgc", "hydra.run.dir=" + sys.argv[1]]
try:
    runpy.run_module("lgcexp.cli", run_name="__main__")
except SystemExit as exc:
    assert not exc.code, exc.code
from hydra import compose, initialize_config_dir
import lgcexp.cli
from lgcexp.config import plan
for algo in ("lgc", "autoL", "auto", "autoD", "siis", "gfhf", "gtf", "lssc", "eigenfunction"):
    with initialize_config_dir(config_dir=lgcexp.cli._conf_dir(), version_base="1.3"):
        plan(compose(config_name="config", overrides=["dataset=spirals", "algo=" + algo]))
print("HEAVY:" + " ".join(m for m in ("tensorflow", "matplotlib", "torch") if m in sys.modules))
"""


def test_an_lgc_run_and_every_config_plan_import_no_tensorflow(tmp_path):
    """Lazy imports: TensorFlow (7 s to import) and matplotlib are loaded only by what uses them, so an LGC
    run on a small data set, and the pre-flight plan of every algorithm, import neither."""
    env = {**os.environ, "LGCEXP_CACHE_DIR": str(tmp_path / "cache"), "LGCEXP_OUTPUT_DIR": str(tmp_path / "out")}
    r = subprocess.run([sys.executable, "-c", _IMPORT_PROBE, str(tmp_path / "run")], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "accuracy" in r.stdout                                          # the run happened
    assert r.stdout.strip().splitlines()[-1] == "HEAVY:", r.stdout.strip().splitlines()[-1]


def test_an_experiment_is_a_sweep_without_m(tmp_path, monkeypatch):
    """``lgcexp experiment=table_isolet seed='range(3)'`` (the experiment sets hydra.mode: MULTIRUN, the
    quick look its comment and ``make reproduce-tables-quick`` use) passes the pre-flight; a list of values
    without -m and without such a config is still refused."""
    from lgcexp.cli import preflight
    from lgcexp.errors import UserError

    monkeypatch.setenv("LGCEXP_RESULTS_DIR", str(tmp_path))
    monkeypatch.setenv("LGCEXP_OUTPUT_DIR", str(tmp_path))
    preflight(["experiment=table_isolet", "seed=range(3)"])
    with pytest.raises(UserError, match=r"seed=range\(3\) is not allowed: a list of values is a sweep; add -m"):
        preflight(["dataset=isolet", "seed=range(3)"])


_PLAN_PROBE = """
import sys
from hydra import compose, initialize_config_dir
import lgcexp.cli
from lgcexp.config import plan
for algo in ("lgc", "autoL", "auto", "siis", "gfhf"):
    with initialize_config_dir(config_dir=lgcexp.cli._conf_dir(), version_base="1.3"):
        plan(compose(config_name="config", overrides=["dataset=isolet", "algo=" + algo]))
print("HEAVY:" + " ".join(m for m in ("pandas", "tensorflow", "sklearn") if m in sys.modules))
"""


def test_the_preflight_plan_imports_no_pandas():
    """The pre-flight (a plan per job, in the launching process) needs no table library: lgcexp.issues
    imports pandas where it makes a table."""
    r = subprocess.run([sys.executable, "-c", _PLAN_PROBE], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().splitlines()[-1] == "HEAVY:", r.stdout.strip().splitlines()[-1]
