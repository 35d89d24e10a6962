#!/usr/bin/env python
"""Run the paper's experiments and rebuild the tables: ``make reproduce-tables`` (``--quick``: 3 seeds).

Each experiment is an ordinary lgcexp sweep (resumable: finished runs are skipped), timed here; the
wall times, date, machine and commands go to ``<results>/tables/PROVENANCE.md`` beside the tables (its
``Note`` paragraphs are kept). ``lgcexp-tables`` then writes the tables, the figures and ``REPORT.md``.
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from lgcexp.reproduce import experiment_env, run_commands

#: the paper's tables and figure, then the columns lgcexp reruns beside them (ISOLET's pairwise-noise table and the
#: baselines the paper quotes from Gong et al. and Lu et al.; docs/fidelity.md says how each setting was chosen)
EXPERIMENTS = ["table_isolet", "table_mnist", "figure2", "table_isolet_pairwise", "table_isolet_gfhf",
               "table_isolet_gtf", "table_isolet_lssc", "table_mnist_gfhf", "table_mnist_anchor_lgc",
               "table_mnist_lssc", "table_mnist_eigenfunction"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 seeds, into results/quick")
    ap.add_argument("--only", nargs="*", choices=EXPERIMENTS, default=EXPERIMENTS)
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("LGCEXP_JOBS", "2")))
    a = ap.parse_args()
    results = Path(os.environ.get("LGCEXP_RESULTS_DIR", "results/quick" if a.quick else "results"))
    env = experiment_env(results, a.jobs)
    quick = ["seed=range(3)"] if a.quick else []
    timings = run_commands([["lgcexp", f"experiment={exp}"] + (quick if exp != "figure2" else []) for exp in a.only],
                           env, "reproduce_tables")
    tables = results / "tables"
    tables.mkdir(parents=True, exist_ok=True)
    fig = results / "figure2"
    for name in ("figure2.png", "autod_curves.csv"):
        if (fig / name).exists():
            shutil.copy2(fig / name, tables / name)
    # --merge: a rerun replaces its own rows (same config hash, or an older row of the same method, noise and seed
    # that recorded no setting) and keeps the others (hand-run variants such as docs/fidelity.md's studies)
    cmd = [sys.executable, "-m", "lgcexp.tables_cli", "--root", str(results / "runs"), "--out", str(tables),
           "--runs-csv", str(results / "runs.csv"), "--merge",
           "--command", "make reproduce-tables" + ("-quick" if a.quick else "")]
    rc = subprocess.call(cmd, env=env)
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    prov = tables / "PROVENANCE.md"
    rows = {}  # keep the timing rows of experiments not rerun this time
    notes: list[str] = []  # and the hand-written notes: everything from the first paragraph starting "Note", verbatim
    if prov.exists():
        head, sep, tail = prov.read_text().partition("\nNote ")
        if sep:
            notes.append(("Note " + tail).strip())
        for line in head.splitlines():  # the command table only, not the tables inside the notes
            if line.startswith("| `lgcexp"):
                rows[line.split("`")[1]] = line
    for c, s, r in timings:
        rows[c] = f"| `{c}` | {s / 60:.1f} min | {r} | {now} |"
    lines = ["# Provenance", "", f"- tables rebuilt: {now}",
             f"- machine: {platform.node()} ({platform.machine()}, {os.cpu_count()} cores), "
             f"Python {platform.python_version()}",
             f"- parallel jobs: {a.jobs}", "- runs are resumable: a rerun only computes missing runs, so a wall time "
             "covers the runs computed by that invocation", "",
             "| command | wall time | exit | finished |", "|---|---|---|---|"]
    lines += list(rows.values())
    for note in notes:
        lines += ["", note]
    prov.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return rc or max((r for _, _, r in timings), default=0)


if __name__ == "__main__":
    sys.exit(main())
