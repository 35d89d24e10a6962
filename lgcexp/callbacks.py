"""Sweep accounting: a Hydra callback that counts what became of every job of a sweep.

Each job's end (``on_job_end``, run in the process that ran the job: the main process with the basic
launcher, a worker with joblib or Slurm) records its status (done / skipped / failed, from
:mod:`lgcexp.runner`) as one small file, written atomically, in a ledger directory private to this sweep
invocation: ``<sweep dir>/.lgcexp-ledger/<host>-<pid>-<random>/``. Two identical sweeps running at once get
two ledgers, so neither counts the other's jobs. At the end (``on_multirun_end``, main process) the ledger
is counted, one line is printed on stdout::

    lgcexp: sweep finished: 12 done, 3 skipped, 1 failed (see error.json in <job dir>)

the ledger is removed, and :func:`last_sweep_failed` tells ``lgcexp.cli.main`` to exit with status 1.
Ledgers of sweeps killed on this host (their process is gone) are removed when the next sweep starts.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import uuid
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig

from .cache import atomic_write_text

log = logging.getLogger("lgcexp")

LEDGER_DIR = ".lgcexp-ledger"
STATUSES = ("done", "skipped", "failed")

#: counts of the last sweep that ended in this process (None before any)
_LAST: dict[str, Any] | None = None


def last_sweep_counts() -> dict[str, Any] | None:
    return None if _LAST is None else dict(_LAST)


def last_sweep_failed() -> bool:
    return bool(_LAST and _LAST.get("failed"))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists but belongs to someone else
        return True
    return True


def _remove_dead_ledgers(root: Path) -> None:
    """Ledgers left by sweeps on this host whose process is gone (killed before they could count)."""
    host = socket.gethostname()
    try:
        entries = list(root.iterdir())
    except OSError:
        return
    for d in entries:
        h, _, rest = d.name.rpartition("-")[0].rpartition("-")
        try:
            pid = int(rest)
        except ValueError:
            continue
        if h == host and not _pid_alive(pid):
            shutil.rmtree(d, ignore_errors=True)


def summary_line(counts: dict[str, Any], sweep_dir: str) -> str:
    line = (f"lgcexp: sweep finished: {counts['done']} done, {counts['skipped']} skipped, "
            f"{counts['failed']} failed")
    dirs = counts.get("failed_dirs") or []
    if len(dirs) == 1:
        line += f" (see error.json in {dirs[0]})"
    elif dirs:
        line += f" (see error.json in {dirs[0]} and {len(dirs) - 1} more under {sweep_dir})"
    return line


class SweepLedger(Callback):
    """Counts done / skipped / failed jobs of a multirun (registered in conf/config.yaml)."""

    def __init__(self) -> None:
        self.ledger: str | None = None  # set in the main process, carried to workers with the callback

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        global _LAST
        _LAST = None
        root = Path(str(config.hydra.sweep.dir)).resolve() / LEDGER_DIR
        _remove_dead_ledgers(root)
        ledger = root / f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        for attempt in range(3):  # a sweep ending beside us may remove the empty root in between
            try:
                ledger.mkdir(parents=True)
                break
            except FileNotFoundError:
                continue
            except OSError as exc:
                log.warning("cannot keep a sweep ledger in %s (%s): jobs will not be counted", ledger, exc)
                return
        else:
            return
        self.ledger = str(ledger)

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        if self.ledger is None or config.hydra.mode != RunMode.MULTIRUN:
            return
        from .runner import FAILED, pop_outcome

        out_dir = str(config.hydra.runtime.output_dir)
        outcome = pop_outcome(out_dir)
        if outcome is not None:
            status, error = outcome.status, outcome.error
        else:  # the task function raised past the runner, or never reached it
            status = FAILED
            error = (getattr(job_return, "_return_value", None) if job_return.status == JobStatus.FAILED
                     else "no outcome recorded")
        entry = {"status": status, "dir": out_dir, "error": None if error is None else str(error)[:1000]}
        name = f"{int(config.hydra.job.num):06d}-{uuid.uuid4().hex[:8]}.json"
        try:
            atomic_write_text(Path(self.ledger) / name, json.dumps(entry))
        except OSError as exc:
            log.warning("cannot record job %s in the sweep ledger (%s)", out_dir, exc)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        global _LAST
        if self.ledger is None:
            return
        ledger = Path(self.ledger)
        counts: dict[str, Any] = {s: 0 for s in STATUSES}
        failed_dirs: list[str] = []
        for f in sorted(ledger.glob("*.json")):
            try:
                entry = json.loads(f.read_text())
            except (OSError, ValueError):
                entry = {"status": "failed", "dir": str(f)}
            status = entry.get("status") if entry.get("status") in STATUSES else "failed"
            counts[status] += 1
            if status == "failed":
                failed_dirs.append(str(entry.get("dir")))
        counts["failed_dirs"] = failed_dirs
        _LAST = counts
        print(summary_line(counts, str(ledger.parent.parent)), flush=True)
        shutil.rmtree(ledger, ignore_errors=True)
        try:
            ledger.parent.rmdir()  # only when no other sweep is running here
        except OSError:
            pass
        self.ledger = None
