"""Faults and recovery (issue 9): bad cache entries, sweep accounting, kill -9 and resume, concurrent
sweeps, unwritable directories, the umask, run-directory hashing and degenerate graphs.

Every test drives the real code (real files, real subprocesses, real signals) and compares against a
clean run; nothing here mocks the behaviour it checks.
"""

from helpers import make_cfg
from lgcexp.cache import stable_hash
from lgcexp.config import to_container
from lgcexp.rundir import config_hash, run_dir_name


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
