"""Faults and recovery (issue 9): bad cache entries, sweep accounting, kill -9 and resume, concurrent
sweeps, unwritable directories, the umask, run-directory hashing and degenerate graphs.

Every test drives the real code (real files, real subprocesses, real signals) and compares against a
clean run; nothing here mocks the behaviour it checks.
"""
import json
import logging
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import make_cfg

from lgcexp.algorithms.autol import AutoL
from lgcexp.cache import Cache, atomic_write_text, stable_hash
from lgcexp.config import to_container
from lgcexp.errors import UserError
from lgcexp.graph import build_graph
from lgcexp.pipeline import format_summary, run
from lgcexp.records import write_json
from lgcexp.rundir import config_hash, run_dir_name
from lgcexp.runner import DONE, FAILED, SKIPPED, run_job_outcome
from lgcexp.spectral import laplacian_eigenpairs

SUMMARY = "lgcexp: sweep finished:"


# ============================================================== 1. cache entries verified on load

def _points(n=150, seed=3):
    return np.random.default_rng(seed).normal(size=(n, 3))


def _graph(cache):
    return build_graph(_points(), 6, "mean", cache=cache, data_fingerprint="faults-fp")


def _pll(cache, graph):
    alg = AutoL()
    labeled = np.arange(0, graph.n, 7)
    P, st = alg._propagation_submatrix(graph, labeled, False, cache)
    return P, st["cache_hit"], labeled.size


def _entry(cache, kind):
    files = sorted(cache.root.glob(f"{kind}-*.npz"))
    assert len(files) == 1, files
    return files[0]


def _corrupt(how, path, kind, cache, wrong_shape_arrays):
    """Damage the cache entry at ``path`` in one of the ways a disk, a kill or a bug can."""
    blob = path.read_bytes()
    if how == "truncated":
        path.write_bytes(blob[: len(blob) // 2])
    elif how == "garbage":
        path.write_bytes(np.random.default_rng(0).bytes(len(blob)))
    elif how == "no_checksum":  # well-formed npz, plausible but wrong numbers, no checksum (an old entry)
        arrays = {k: v for k, v in Cache.read(path).items() if not k.startswith("__lgcexp")}
        arrays = {k: (v * 1.5 if v.dtype.kind == "f" and v.ndim else v) for k, v in arrays.items()}
        np.savez(path, **arrays)
    elif how == "stale_checksum":  # numbers changed after the checksum was written
        arrays = Cache.read(path)
        arrays = {k: (v * 1.5 if v.dtype.kind == "f" and v.ndim else v) for k, v in arrays.items()}
        np.savez(path, **arrays)
    elif how == "wrong_shape":  # a valid checksum and key, but arrays of another size
        key = path.name[len(kind) + 1: -len(".npz")]
        assert cache.store(kind, key, wrong_shape_arrays)
    else:  # pragma: no cover
        raise AssertionError(how)
    return path.read_bytes()


CORRUPTIONS = ["truncated", "garbage", "no_checksum", "stale_checksum", "wrong_shape"]


def _bad_entry_warnings(caplog, path):
    return [r for r in caplog.records if r.levelno == logging.WARNING and str(path) in r.getMessage()]


def _assert_replaced(cache, kind, path, bad_bytes, caplog):
    assert len(_bad_entry_warnings(caplog, path)) == 1, [r.getMessage() for r in caplog.records]
    assert path.exists() and path.read_bytes() != bad_bytes
    key = path.name[len(kind) + 1: -len(".npz")]
    cache.read_verified(path, kind, key)  # the new entry passes its checksum
    assert not list(cache.root.glob("*.tmp"))


@pytest.mark.parametrize("how", CORRUPTIONS)
def test_bad_graph_entry_is_reported_removed_and_recomputed(tmp_path, caplog, how):
    clean, _ = _graph(Cache(None))
    cache = Cache(tmp_path / "cache")
    _, hit = _graph(cache)
    assert not hit
    path = _entry(cache, "graph")
    other, _ = build_graph(_points(100), 6, "mean")  # a graph of another size
    W = other.W
    bad = _corrupt(how, path, "graph", cache, {"data": W.data, "indices": W.indices, "indptr": W.indptr,
                                               "shape": np.array(W.shape), "sigma": np.array(other.sigma)})
    caplog.set_level(logging.INFO)
    g, hit = _graph(Cache(tmp_path / "cache"))
    assert not hit
    assert g.sigma == clean.sigma and abs(g.W - clean.W).max() == 0
    assert np.array_equal(g.W.indptr, clean.W.indptr) and np.array_equal(g.W.indices, clean.W.indices)
    _assert_replaced(cache, "graph", path, bad, caplog)
    assert _graph(Cache(tmp_path / "cache"))[1]  # and the next run hits the repaired entry


@pytest.mark.parametrize("how", CORRUPTIONS)
def test_bad_eigenpair_entry_is_reported_removed_and_recomputed(tmp_path, caplog, how):
    graph, _ = _graph(Cache(None))
    clean, _ = laplacian_eigenpairs(graph, 8, solver="dense")
    cache = Cache(tmp_path / "cache")
    _, hit = laplacian_eigenpairs(graph, 8, cache=cache, solver="dense")
    assert not hit
    path = _entry(cache, "eig")
    wrong = clean.to_arrays()
    wrong["vectors"] = wrong["vectors"][:-1]  # eigenvectors of a graph with one point less
    bad = _corrupt(how, path, "eig", cache, wrong)
    caplog.set_level(logging.INFO)
    eig, hit = laplacian_eigenpairs(graph, 8, cache=Cache(tmp_path / "cache"), solver="dense")
    assert not hit
    assert np.array_equal(eig.values, clean.values) and np.array_equal(eig.vectors, clean.vectors)
    _assert_replaced(cache, "eig", path, bad, caplog)
    assert laplacian_eigenpairs(graph, 8, cache=Cache(tmp_path / "cache"), solver="dense")[1]


@pytest.mark.parametrize("how", CORRUPTIONS)
def test_bad_pll_entry_is_reported_removed_and_recomputed(tmp_path, caplog, how):
    graph, _ = _graph(Cache(None))
    clean, _, l = _pll(None, graph)
    cache = Cache(tmp_path / "cache")
    assert not _pll(cache, graph)[1]
    path = _entry(cache, "pll")
    bad = _corrupt(how, path, "pll", cache, {"P": np.eye(l - 1), "seconds": np.array(0.0),
                                             "iterations": np.array(1), "residual": np.array(0.0)})
    caplog.set_level(logging.INFO)
    P, hit, _ = _pll(Cache(tmp_path / "cache"), graph)
    assert not hit and np.array_equal(P, clean)
    _assert_replaced(cache, "pll", path, bad, caplog)
    assert _pll(Cache(tmp_path / "cache"), graph)[1]


def test_entry_written_for_another_key_is_not_used(tmp_path, caplog):
    """A valid entry copied (or renamed) onto another key's file name is refused: the key is checked."""
    cache = Cache(tmp_path)
    graph, _ = _graph(cache)
    clean, _, _ = _pll(cache, graph)
    path = _entry(cache, "pll")
    impostor = tmp_path / "pll-0123456789abcdef.npz"
    impostor.write_bytes(path.read_bytes())
    caplog.set_level(logging.WARNING)
    assert cache.load("pll", "0123456789abcdef") is None
    assert not impostor.exists() and "written for pll-" in caplog.text


# ============================================================== 2-4. sweeps: accounting, kill -9, concurrency

def _env(tmp: Path) -> dict:
    return {**os.environ, "LGCEXP_CACHE_DIR": str(tmp / "cache"), "LGCEXP_OUTPUT_DIR": str(tmp / "out"),
            "OPENBLAS_NUM_THREADS": "1", "LGCEXP_JOBS": "2"}


def _cmd(*args: str) -> list:
    return [sys.executable, "-m", "lgcexp.cli", "-m", *args]


def sweep(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(_cmd(*args), capture_output=True, text=True, env=_env(tmp), cwd=tmp, timeout=600)


def counts(stdout: str) -> tuple[int, int, int]:
    lines = [l for l in stdout.splitlines() if l.startswith(SUMMARY)]
    assert len(lines) == 1, stdout
    words = lines[0][len(SUMMARY):].replace(",", " ").split()
    return int(words[0]), int(words[2]), int(words[4])  # done, skipped, failed


def results(root: Path) -> dict:
    """seed -> (acc_unlabeled, acc_labeled, config_hash) of every result.json under ``root``."""
    out = {}
    for f in sorted(root.rglob("result.json")):
        r = json.loads(f.read_text())
        assert r["seed"] not in out, f"two results for seed {r['seed']}"
        out[r["seed"]] = (r["acc_unlabeled"], r["acc_labeled"], r["config_hash"])
    return out


def temp_files(*roots: Path) -> list:
    return [p for root in roots for p in root.rglob("*.tmp")]


N_SEEDS = 20
SWEEP = ("algo=lgc", f"seed=range({N_SEEDS})")


@pytest.fixture(scope="module")
def clean_sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("clean")
    p = sweep(tmp, *SWEEP)
    assert p.returncode == 0, p.stderr
    assert counts(p.stdout) == (N_SEEDS, 0, 0)
    res = results(tmp / "out")
    assert sorted(res) == list(range(N_SEEDS))
    return res


@pytest.mark.parametrize("launcher", ["basic", "parallel"])
def test_sweep_counts_done_skipped_failed_and_exits_1(tmp_path, launcher):
    extra = () if launcher == "basic" else ("hydra/launcher=parallel",)
    # noise.rate=0 and 0.0 are one run (item 7: the sweeper launches it once); labels.n=5 is refused
    # (UserError) in the job: error.json, and the sweep goes on
    p = sweep(tmp_path, *extra, "noise.rate=0,0.0", "seed=0,1", "labels.n=100,5")
    assert p.returncode == 1, p.stderr
    assert counts(p.stdout) == (2, 0, 2)
    assert len(list((tmp_path / "out").rglob("error.json"))) == 2
    # a clean rerun of the good part: its jobs skip, exit 0; no ledger is left behind
    ok = sweep(tmp_path, *extra, "noise.rate=0.0", "seed=0,1")
    assert ok.returncode == 0 and counts(ok.stdout) == (0, 2, 0)
    assert not list((tmp_path / "out" / "multirun").glob(".lgcexp-ledger*"))


def test_crashed_job_is_failed_not_skipped(tmp_path):
    args = ("algo=siis", "algo.params.m=20", "eig.solver=lanczos", "+eig.ncv=3", "seed=0")  # ARPACK raises ValueError
    crash = sweep(tmp_path, *args)
    assert crash.returncode == 1 and counts(crash.stdout) == (0, 0, 1)
    assert "skipped, already done" not in crash.stdout  # the old bug: a crashed job was reported as skipped
    err = list((tmp_path / "out").rglob("error.json"))
    assert len(err) == 1 and json.loads(err[0].read_text())["type"] == "ValueError"
    assert not (err[0].parent / "result.json").exists()
    assert f"see error.json in {err[0].parent}" in crash.stdout
    # a job holding error.json but no result.json is not done: it reruns (and fails again here)
    again = sweep(tmp_path, *args)
    assert again.returncode == 1 and counts(again.stdout) == (0, 0, 1)


def test_failed_job_reruns_once_its_cause_is_fixed(tmp_path):
    data = tmp_path / "blobs.npz"
    args = ("dataset=npz", f"dataset.path={data}", "labels.n=4", "graph.k=3", "seed=0")
    p = sweep(tmp_path, *args)  # the data file is missing: the job fails and records error.json
    assert p.returncode == 1 and counts(p.stdout) == (0, 0, 1)
    job = next((tmp_path / "out").rglob("error.json")).parent
    assert not (job / "result.json").exists()
    rng = np.random.default_rng(0)
    np.savez(data, X=np.vstack([rng.normal(size=(20, 2)), rng.normal(size=(20, 2)) + 3]), y=np.repeat([0, 1], 20))
    p = sweep(tmp_path, *args)
    assert p.returncode == 0 and counts(p.stdout) == (1, 0, 0)
    assert (job / "result.json").exists() and not (job / "error.json").exists()


def test_kill_9_mid_sweep_then_resume(tmp_path, clean_sweep):
    out = tmp_path / "out"
    proc = subprocess.Popen(_cmd(*SWEEP), env=_env(tmp_path), cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline and not list(out.rglob("result.json")):
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGKILL)  # the sweep and anything it started
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    finished = {f: f.stat().st_mtime_ns for f in out.rglob("result.json")}
    assert 1 <= len(finished) < N_SEEDS, "the kill should land mid-sweep"
    # what a kill during a write leaves: a temporary file beside the result that was being written
    pending = next(s for s in range(N_SEEDS)
                   if not (out / "multirun" / run_dir_name(to_container(make_cfg(*SWEEP[:1], f"seed={s}")))
                           / "result.json").exists())
    job = out / "multirun" / run_dir_name(to_container(make_cfg(*SWEEP[:1], f"seed={pending}")))
    job.mkdir(parents=True, exist_ok=True)
    (job / ".result.json.k9abcd.tmp").write_text('{"acc_unlabeled": 0.')

    p = sweep(tmp_path, *SWEEP)
    assert p.returncode == 0, p.stderr
    assert counts(p.stdout) == (N_SEEDS - len(finished), len(finished), 0)
    assert all(f.stat().st_mtime_ns == t for f, t in finished.items())  # finished jobs were not recomputed
    assert results(out) == clean_sweep  # every job has its one correct result
    assert not temp_files(out, tmp_path / "cache")
    assert not list((out / "multirun").glob(".lgcexp-ledger/*"))  # the killed sweep's ledger is gone


def test_two_identical_sweeps_at_once(tmp_path, clean_sweep):
    procs = [subprocess.Popen(_cmd(*extra, *SWEEP), env=_env(tmp_path), cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for extra in ((), ("hydra/launcher=parallel",))]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (so, se) in zip(procs, outs):
        assert p.returncode == 0, se
    c = [counts(so) for so, _ in outs]
    assert all(done + skipped == N_SEEDS and failed == 0 for done, skipped, failed in c)
    assert c[0][0] + c[1][0] == N_SEEDS  # each job computed exactly once, by one of the two sweeps
    out = tmp_path / "out"
    assert len(list(out.rglob("result.json"))) == N_SEEDS and not list(out.rglob("error.json"))
    assert results(out) == clean_sweep
    assert not temp_files(out, tmp_path / "cache")


# ============================================================== 5. unwritable directories

@pytest.mark.parametrize("where", ["file", "under_file"])
def test_unwritable_cache_warns_once_and_runs_uncached(tmp_path, caplog, where):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    cache_dir = blocker if where == "file" else blocker / "sub"
    graph0, _ = _graph(Cache(None))
    eig0, _ = laplacian_eigenpairs(graph0, 8, solver="dense")
    P0, _, _ = _pll(None, graph0)
    caplog.set_level(logging.WARNING)
    cache = Cache(cache_dir)
    graph, hit_g = _graph(cache)
    eig, hit_e = laplacian_eigenpairs(graph, 8, cache=cache, solver="dense")
    P, hit_p, _ = _pll(cache, graph)
    assert not (hit_g or hit_e or hit_p)
    assert abs(graph.W - graph0.W).max() == 0 and np.array_equal(eig.vectors, eig0.vectors) and np.array_equal(P, P0)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "cannot be written" in warnings[0] and str(cache_dir) in warnings[0]
    assert blocker.read_text() == "x"


def test_pipeline_with_unwritable_cache_gives_the_clean_result(tmp_path):
    blocker = tmp_path / "cache-file"
    blocker.write_text("")
    clean = run(make_cfg(tmp=tmp_path))
    r = run(make_cfg(f"paths.cache_dir={blocker}"))
    assert r["acc_unlabeled"] == clean["acc_unlabeled"] and r["acc_labeled"] == clean["acc_labeled"]
    assert r["graph"]["cache_hit"] is False


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores permission bits")
def test_read_only_cache_still_serves_hits_and_never_writes(tmp_path, caplog):
    cache_dir = tmp_path / "ro"
    graph0, _ = _graph(Cache(cache_dir))
    cache_dir.chmod(0o555)
    try:
        graph, hit = _graph(Cache(cache_dir))
        assert hit and abs(graph.W - graph0.W).max() == 0
        caplog.set_level(logging.WARNING)
        P, hit_p, _ = _pll(Cache(cache_dir), graph)
        assert not hit_p and "cannot be written" in caplog.text
    finally:
        cache_dir.chmod(0o755)


def test_unwritable_output_dir_leaves_no_result(tmp_path):
    blocker = tmp_path / "out-file"
    blocker.write_text("")
    cfg = make_cfg(tmp=tmp_path)
    with pytest.raises(OSError):
        run_job_outcome(cfg, blocker / "job")
    outcome = run_job_outcome(cfg, blocker / "job", multirun=True)  # in a sweep: a failed job, not a crash
    assert outcome.status == FAILED and isinstance(outcome.error, OSError)
    assert blocker.read_text() == "" and not list(tmp_path.rglob("result.json"))


def test_failed_rewrite_keeps_the_finished_result(tmp_path):
    """force=true into a directory where writing fails: the finished result.json survives untouched,
    no partial file or temporary file is left, the failure is recorded, and the job still counts as done."""
    job = tmp_path / "job"
    cfg = make_cfg(tmp=tmp_path)
    assert run_job_outcome(cfg, job).status == DONE
    before = (job / "result.json").read_bytes()
    mtime = (job / "result.json").stat().st_mtime_ns
    (job / "labels.csv").unlink()
    (job / "labels.csv").mkdir()  # labels.csv cannot be replaced: the rewrite fails before result.json
    with pytest.raises(OSError):
        run_job_outcome(make_cfg("force=true", tmp=tmp_path), job)
    assert (job / "result.json").read_bytes() == before and (job / "result.json").stat().st_mtime_ns == mtime
    assert json.loads((job / "error.json").read_text())["type"] == "IsADirectoryError"
    assert not temp_files(job)
    assert run_job_outcome(cfg, job).status == SKIPPED


# ============================================================== 6. umask

@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o002, 0o664)])
def test_files_honour_the_umask(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        atomic_write_text(tmp_path / "a.txt", "x")
        write_json(tmp_path / "result.json", {"a": 1})
        cache = Cache(tmp_path / "cache")
        _graph(cache)
        files = [tmp_path / "a.txt", tmp_path / "result.json", _entry(cache, "graph")]
        assert [oct(stat.S_IMODE(f.stat().st_mode)) for f in files] == [oct(mode)] * 3
    finally:
        os.umask(old)


# ============================================================== 7. run-directory hashing

def test_integral_float_and_int_give_the_same_run_dir():
    a = to_container(make_cfg("noise.rate=0"))
    b = to_container(make_cfg("noise.rate=0.0"))
    assert isinstance(a["noise"]["rate"], int) and isinstance(b["noise"]["rate"], float)
    assert run_dir_name(a) == run_dir_name(b) and config_hash(a) == config_hash(b)
    assert "/noise=0/" in run_dir_name(a)
    c = to_container(make_cfg("noise.rate=0.2"))
    assert config_hash(c) != config_hash(a)
    assert stable_hash({"x": 100}) == stable_hash({"x": 100.0}) != stable_hash({"x": 100.5})
    assert stable_hash({"x": True}) != stable_hash({"x": 1})  # booleans are not numbers here


def test_the_auto_cut_keeps_the_hash_runs_had_with_consensus():
    """detect.cut=auto (the default) is consensus wherever labels are sampled: runs made before it existed keep
    their config hash; another cut changes it."""
    auto, consensus = (to_container(make_cfg(f"detect.cut={c}")) for c in ("auto", "consensus"))
    assert auto["detect"]["cut"] == "auto"
    assert config_hash(auto) == config_hash(consensus)
    assert config_hash(to_container(make_cfg("detect.cut=count"))) != config_hash(auto)


def test_the_auto_cut_on_a_users_file_has_a_hash_of_its_own(tmp_path):
    """On a user's file auto is count wherever every row is labelled: a sweep over detect.cut=auto,consensus must
    give two run directories, not one reused for both."""
    f = tmp_path / "d.csv"
    f.write_text("x,label\n0,0\n1,1\n")
    auto, consensus = (to_container(make_cfg("dataset=csv", f"dataset.path={f}", f"detect.cut={c}"))
                       for c in ("auto", "consensus"))
    assert config_hash(auto) != config_hash(consensus) and run_dir_name(auto) != run_dir_name(consensus)


# ============================================================== 8. degenerate graphs

def test_tiny_sigma_isolating_every_point_is_refused(tmp_path):
    with pytest.raises(UserError, match=r"1797 of 1797 points isolated.*graph.sigma=mean") as exc:
        run(make_cfg("graph.sigma=1e-30", tmp=tmp_path))
    assert "\n" not in str(exc.value)


def test_identical_points_give_no_nan():
    X = np.ones((40, 3))
    with pytest.raises(UserError, match="duplicate points"):  # sigma=mean would be 0 -> 0/0
        build_graph(X, 5, "mean")
    g, _ = build_graph(X, 5, 1.0)
    assert np.all(np.isfinite(g.W.data)) and np.all(np.isfinite(g.S.data)) and np.all(g.degree > 0)
    from lgcexp.algorithms.lgc import LGC

    pred = LGC(alpha=0.9).fit(g, np.array([0, 1]), np.array([0, 1]), 2).predict()
    assert set(np.unique(pred)) <= {0, 1}


def _two_blobs():
    """Blob A: 40 points on a line (classes 0 and 1); blob B: 6 points of class 1 far away."""
    X = np.vstack([np.arange(40.0)[:, None], 1000.0 + np.arange(6.0)[:, None]])
    y = np.r_[np.zeros(20, int), np.ones(20, int), np.ones(6, int)]
    return X, y


def test_unreached_mask_two_blobs():
    X, _ = _two_blobs()
    g, _ = build_graph(X, 3, 1.0)
    mask = g.unreached_mask(np.array([3, 30]))
    assert np.array_equal(mask, np.r_[np.zeros(40, bool), np.ones(6, bool)])
    assert not g.unreached_mask(np.array([3, 41])).any()


def test_unreached_points_are_not_predicted_as_class_0(tmp_path):
    from lgcexp.labels import sample_and_corrupt

    X, y = _two_blobs()
    np.savez(tmp_path / "blobs.npz", X=X, y=y)
    seed = next(s for s in range(100) if sample_and_corrupt(y, 2, 0.0, s).labeled.max() < 40)
    cfg = make_cfg("dataset=npz", f"dataset.path={tmp_path / 'blobs.npz'}", "labels.n=2", "graph.k=3",
                   "graph.sigma=1.0", "noise.rate=0", f"seed={seed}", tmp=tmp_path)
    r = run(cfg, out_dir=tmp_path / "run")
    assert r["n_unreached"] == 6 and r["graph"]["components"] == 2
    rec = json.loads((tmp_path / "run" / "result.json").read_text())
    assert rec["n_unreached"] == 6
    # blob B is class 1; the old readout (argmax of all-zero rows = class 0) got it wrong silently, now
    # those points are -1 and count as wrong: the accuracy is that of blob A alone over all 44 unlabelled
    assert r["acc_unlabeled"] <= 38 / 44
    assert "unreached: 6 points" in format_summary(r)
