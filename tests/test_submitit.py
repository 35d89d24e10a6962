"""Sweeps through Hydra's submitit launcher with submitit's local executor (``hydra/launcher=submitit_local``):
the same pickling, job-array and resume path as ``hydra/launcher=slurm``, with real worker processes that
share one cache directory."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lgcexp.cache import Cache
from lgcexp.graph.base import check_graph_arrays

pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
pytest.importorskip("submitit")


def sweep(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "LGCEXP_CACHE_DIR": str(tmp / "cache"), "LGCEXP_OUTPUT_DIR": str(tmp / "out"),
           "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "lgcexp.cli", "-m", "hydra/launcher=submitit_local",
                           "hydra.launcher.timeout_min=5", *args],
                          capture_output=True, text=True, env=env, cwd=tmp, timeout=300)


def results(tmp: Path) -> dict[Path, dict]:
    return {p: json.loads(p.read_text()) for p in sorted((tmp / "out" / "multirun").rglob("result.json"))}


def test_submitit_local_sweep_shares_the_cache_and_resumes(tmp_path):
    # four jobs in four worker processes, all started at once, all needing the same digits graph
    p = sweep(tmp_path, "algo=lgc,gfhf", "seed=0,1")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "lgcexp: sweep finished: 4 done, 0 skipped, 0 failed" in p.stdout
    runs = results(tmp_path)
    assert len(runs) == 4
    assert {(r["algo"], r["seed"]) for r in runs.values()} == {("lgc", 0), ("lgc", 1), ("gfhf", 0), ("gfhf", 1)}
    # every job ran in a submitit worker (its job folder holds the pickled job and its result)
    submitit_dir = tmp_path / "out" / "multirun" / ".submitit"
    assert len(list(submitit_dir.rglob("*_submitted.pkl"))) == 4
    assert len(list(submitit_dir.rglob("*_result.pkl"))) == 4
    # one graph for all: exactly one process computed it under the entry's lock, the others read it
    keys = {r["graph"]["key"] for r in runs.values()}
    assert len(keys) == 1
    assert sorted(r["graph"]["cache_hit"] for r in runs.values()) == [False, True, True, True]
    (key,) = keys
    cache = Cache(tmp_path / "cache")
    n = runs[next(iter(runs))]["n"]
    entry = cache.load("graph", key, validate=lambda a: check_graph_arrays(a, n))
    assert entry is not None  # complete, checksum verified
    assert list((tmp_path / "cache").glob("graph-*.npz")) == [cache.path("graph", key)]
    assert not list((tmp_path / "cache").glob(".*.tmp"))  # no partial entry left behind
    # the same labelled points give the same numbers in every process: the two LGC seeds differ, and
    # GFHF and LGC on one seed saw the same labels
    by = {(r["algo"], r["seed"]): r for r in runs.values()}
    assert by[("lgc", 0)]["n_flipped"] == by[("gfhf", 0)]["n_flipped"]

    # a rerun with one more seed: the four finished jobs are skipped untouched, only the new ones run
    mtimes = {q: q.stat().st_mtime_ns for q in runs}
    p2 = sweep(tmp_path, "algo=lgc,gfhf", "seed=0,1,2")
    assert p2.returncode == 0, p2.stdout + p2.stderr
    assert "lgcexp: sweep finished: 2 done, 4 skipped, 0 failed" in p2.stdout
    runs2 = results(tmp_path)
    assert len(runs2) == 6
    assert all(q.stat().st_mtime_ns == t for q, t in mtimes.items())
    assert all(runs2[q]["graph"]["cache_hit"] for q in runs2 if q not in runs)
