"""What the ``make reproduce-*`` scripts share (scripts/reproduce_tables.py, scripts/reproduce_lowlabel.py): the
environment of their ``lgcexp experiment=...`` commands and running them one after another, timed."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["experiment_env", "run_commands"]


def experiment_env(results: Path, jobs: int) -> dict[str, str]:
    """The commands' environment: results under ``results``, ``jobs`` sweep workers, and one BLAS thread per
    worker where there are several (parallel workers already fill the cores)."""
    env = {**os.environ, "LGCEXP_RESULTS_DIR": str(results), "LGCEXP_JOBS": str(jobs)}
    if jobs > 1:
        env.setdefault("OPENBLAS_NUM_THREADS", "1")
    return env


def run_commands(commands: list[list[str]], env: dict[str, str], who: str) -> list[tuple[str, float, int]]:
    """Run each command (echoed as ``+ ...``), go on after a failure (said on stderr, naming ``who``); returns
    (command line, seconds, exit code) per command."""
    timings = []
    for cmd in commands:
        line = " ".join(cmd)
        print("+", line, flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call(cmd, env=env)
        timings.append((line, time.perf_counter() - t0, rc))
        if rc != 0:
            print(f"{who}: {line} exited with {rc}; continuing with the tables", file=sys.stderr)
    return timings
