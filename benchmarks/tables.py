"""Speed of the table sweeps (issue #15): the paper's Table 1 / Table 2 sweeps on a few seeds, today's code
against the same code with this issue's three sweep-level speed-ups turned off, in one run. Not a test.

The three switches (each one a supported setting, so the baseline is today's numbers by other means):

- ``hydra/sweeper=basic``: Hydra's own sweeper (composes every job's config before the launch and launches
  the duplicate ``loss=`` jobs of methods without a loss, which then skip) instead of lgcexp's;
- ``LGCEXP_MEMO=0``: every job reads the data file and the cached graph again (lgcexp/memo.py);
- ``LGCEXP_AUTOL_NARROW=0``: the AutoL step keeps reading the columns of dropped labels
  (lgcexp.algorithms.autol._narrowed_layout).
- ``LGCEXP_SETTLE_HEAP=0`` (issue 24): sweep workers do not freeze their long-lived heap, so joblib's
  ``gc.collect()`` after a job walks every object of the process (lgcexp.runner.settle_heap); this one is
  also timed alone (``<table>_heap_off_s``: only this switch off).

Order: one warm-up sweep fills the cache (graph, eigenpairs, P_LL of these seeds), then the baseline and
today's sweep run into fresh output directories; both must give the same numbers (checked: every run's
accuracies, dropped labels and final loss). Wall seconds of the whole ``lgcexp experiment=...`` command.

    python -m benchmarks report --only tables [--quick]   # section "tables" of results/bench/bench.{json,md}
    python -m benchmarks tables [--quick]                 # the same

``--quick``: ISOLET only, 2 seeds; otherwise ISOLET and MNIST, 4 seeds each. The full tables (20 seeds)
take ``make reproduce-tables``; their wall times are in results/tables/PROVENANCE.md.
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks.common import ROOT

FIELDS = ("acc_unlabeled", "acc_labeled", "n_dropped", "loss_final", "alpha")


def _sweep(experiment: str, seeds: int, results: Path, baseline: bool, heap_off: bool = False) -> float:
    env = {**os.environ, "LGCEXP_RESULTS_DIR": str(results), "OPENBLAS_NUM_THREADS": "1",
           "TF_CPP_MIN_LOG_LEVEL": "2"}
    cmd = ["lgcexp", f"experiment={experiment}", f"seed=range({seeds})"]
    if baseline or heap_off:
        env.update(LGCEXP_SETTLE_HEAP="0")
    if baseline:
        env.update(LGCEXP_MEMO="0", LGCEXP_AUTOL_NARROW="0")
        cmd.append("hydra/sweeper=basic")
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    return time.perf_counter() - t0


def _numbers(results: Path) -> dict:
    out = {}
    for f in (results / "runs").rglob("result.json"):
        r = json.loads(f.read_text())
        out[(r["algo"], r.get("loss"), r["noise_rate"], r["seed"])] = tuple(r.get(k) for k in FIELDS)
    return out


def run(quick: bool) -> dict:
    seeds = 2 if quick else 4
    experiments = ["table_isolet"] if quick else ["table_isolet", "table_mnist"]
    figures: dict = {"seeds": seeds, "jobs": int(os.environ.get("LGCEXP_JOBS", "2")),
                     "load_before": round(os.getloadavg()[0], 2)}
    with tempfile.TemporaryDirectory(prefix="lgcexp-bench-tables-") as tmp:
        for exp in experiments:
            name = exp.replace("table_", "")
            _sweep(exp, seeds, Path(tmp) / f"{name}-warm", baseline=False)  # fills the cache
            t_base = _sweep(exp, seeds, Path(tmp) / f"{name}-base", baseline=True)
            t_new = _sweep(exp, seeds, Path(tmp) / f"{name}-new", baseline=False)
            t_heap = _sweep(exp, seeds, Path(tmp) / f"{name}-heap-off", baseline=False, heap_off=True)
            base, new = _numbers(Path(tmp) / f"{name}-base"), _numbers(Path(tmp) / f"{name}-new")
            heap = _numbers(Path(tmp) / f"{name}-heap-off")
            figures[f"{name}_runs"] = len(new)
            figures[f"{name}_baseline_s"] = round(t_base, 1)
            figures[f"{name}_today_s"] = round(t_new, 1)
            figures[f"{name}_speedup"] = round(t_base / t_new, 2)
            figures[f"{name}_heap_off_s"] = round(t_heap, 1)
            figures[f"{name}_heap_speedup"] = round(t_heap / t_new, 2)
            figures[f"{name}_same_numbers"] = bool(base == new == heap and len(new) > 0)
    figures["load_after"] = round(os.getloadavg()[0], 2)
    return figures


def main(argv: list[str] | None = None) -> int:
    """The report's section "tables" (``python -m benchmarks report --only tables``), with these options."""
    from benchmarks import report

    return report.main(["--only", "tables", *(argv or [])])
