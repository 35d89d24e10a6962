"""lgcexp.runner.settle_heap: a sweep worker freezes its long-lived heap after a job that loaded modules."""
import subprocess
import sys
import textwrap


def test_settle_heap_collects_then_freezes_only_when_modules_were_loaded(tmp_path):
    (tmp_path / "lgcexp_probe_module.py").write_text("VALUE = 1\n")
    code = textwrap.dedent("""
        import gc, sys, weakref
        from lgcexp import runner

        class Node:
            pass

        a, b = Node(), Node()          # a reference cycle that is garbage before the freeze
        a.other, b.other = b, a
        dead = weakref.ref(a)
        del a, b
        assert runner.settle_heap() is True          # modules were loaded since the start
        assert dead() is None                        # collected first, not frozen
        frozen = gc.get_freeze_count()
        assert frozen > 1000
        assert runner.settle_heap() is False         # nothing new loaded: no second freeze
        assert gc.get_freeze_count() == frozen
        sys.path.insert(0, sys.argv[1])
        import lgcexp_probe_module                   # a new module: the next job's end freezes again
        assert runner.settle_heap() is True
        assert gc.get_freeze_count() > frozen
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_settle_heap_switch_off():
    code = "import gc\nfrom lgcexp import runner\nprint(runner.settle_heap(), gc.get_freeze_count())"
    env = {**__import__("os").environ, "LGCEXP_SETTLE_HEAP": "0"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "0"]


def test_a_sweep_settles_the_heap_from_its_second_job_on(monkeypatch, tmp_path):
    """run_job_outcome calls settle_heap before a sweep's second and later jobs of a process, never before
    the first (a one-job Slurm task pays nothing) nor in a single run."""
    from lgcexp import runner

    calls = []
    monkeypatch.setattr(runner, "settle_heap", lambda: calls.append(1) or False)
    monkeypatch.setattr(runner, "_SWEEP_JOBS", 0)
    monkeypatch.setattr(runner, "_run_job_locked", lambda cfg, out, multirun: runner.JobOutcome(runner.DONE, out))
    runner.run_job_outcome({}, tmp_path / "a", multirun=False)
    runner.run_job_outcome({}, tmp_path / "b", multirun=True)
    assert calls == []
    runner.run_job_outcome({}, tmp_path / "c", multirun=True)
    runner.run_job_outcome({}, tmp_path / "d", multirun=True)
    assert calls == [1, 1]
