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
import time
import uuid
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig

from .cache import atomic_write_text
from .records import ERROR_FILE

log = logging.getLogger("lgcexp")

LEDGER_DIR = ".lgcexp-ledger"
STATUSES = ("done", "skipped", "failed")

#: counts of the last sweep that ended in this process (None before any)
_LAST: dict[str, Any] | None = None
#: the running sweep, as the launching process sees it: the output directory of every job launched (from
#: lgcexp's sweeper), entries it recorded itself (a job whose worker died; a ledger file that could not be
#: written by a job run in this process) and when the sweep started
_SWEEP: dict[str, Any] = {"launched": {}, "entries": [], "start": 0.0, "relaunched": set()}
#: precedence of the statuses of one job directory recorded twice (a batch relaunched after a worker died)
_RANK = {"done": 2, "skipped": 1, "failed": 0}
NO_OUTCOME = ("no outcome recorded: its worker died, or its ledger entry could not be written "
              "(a full disk?)")


def note_launched(out_dir: str) -> None:
    """Called by lgcexp's sweeper for every job it launched (so a job that records nothing still counts)."""
    _SWEEP["launched"][str(Path(out_dir).resolve())] = None


def note_relaunched(out_dir: str) -> None:
    """Called by lgcexp's sweeper for every job of a batch it relaunches one at a time (a worker died): such a
    job may have finished before the pool was killed, without recording it."""
    _SWEEP["relaunched"].add(str(Path(out_dir).resolve()))


def note_failed(out_dir: str, error: str) -> None:
    """Called by lgcexp's sweeper for a job whose launch raised (its worker was killed)."""
    note_launched(out_dir)
    _SWEEP["entries"].append({"status": "failed", "dir": str(Path(out_dir).resolve()), "error": error[:1000]})


def last_sweep_counts() -> dict[str, Any] | None:
    return None if _LAST is None else dict(_LAST)


def forget_last_sweep() -> None:
    """Before a command runs: the counts of an earlier sweep in this process are not its own."""
    global _LAST
    _LAST = None


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
    with_file = [d for d in dirs if (Path(d) / ERROR_FILE).is_file()]
    without = [d for d in dirs if d not in with_file]
    notes = []
    if len(with_file) == 1:
        notes.append(f"see error.json in {with_file[0]}")
    elif with_file:
        notes.append(f"see error.json in {with_file[0]} and {len(with_file) - 1} more under {sweep_dir}")
    if without:  # a job that could not write error.json (or never started): its error is in the log
        notes.append(f"{len(without)} wrote no error.json ({without[0]}"
                     + (f" and {len(without) - 1} more" if len(without) > 1 else "") + "): see the log above")
    if notes:
        line += f" ({'; '.join(notes)})"
    return line


class SweepLedger(Callback):
    """Counts done / skipped / failed jobs of a multirun (registered in conf/config.yaml)."""

    def __init__(self) -> None:
        self.ledger: str | None = None  # set in the main process, carried to workers with the callback

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        global _LAST
        _LAST = None
        _SWEEP.update(launched={}, entries=[], start=time.time(), relaunched=set())
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
        except OSError as exc:  # run in the launching process (basic launcher): keep it in memory instead
            log.warning("cannot record job %s in the sweep ledger (%s)", out_dir, exc)
            _SWEEP["entries"].append(entry)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        global _LAST
        ledger = None if self.ledger is None else Path(self.ledger)
        entries: list[dict[str, Any]] = list(_SWEEP["entries"])
        for f in sorted(ledger.glob("*.json")) if ledger is not None else []:
            try:
                entries.append(json.loads(f.read_text()))
            except (OSError, ValueError):
                entries.append({"status": "failed", "dir": str(f)})
        # one status per job directory (a relaunched job may have two entries: the better one counts)
        by_dir: dict[str, str] = {}
        shown: dict[str, str] = {}  # the directory as the job spelled it
        for e in entries:
            status = e.get("status") if e.get("status") in STATUSES else "failed"
            d = str(Path(str(e.get("dir"))).resolve())
            shown.setdefault(d, str(e.get("dir")))
            if d not in by_dir or _RANK[status] > _RANK[by_dir[d]]:
                by_dir[d] = status
        # a launched job with no entry: its files say what became of it; a relaunched job "skipped, already
        # done" finished in its batch before the pool was killed, unrecorded: its result's time says whether
        # that was during this sweep (done) or before it (skipped)
        for d in _SWEEP["launched"]:
            if d not in by_dir or (by_dir[d] == "skipped" and d in _SWEEP["relaunched"]):
                by_dir[d] = _status_from_files(Path(d), _SWEEP["start"])
        if ledger is None and not by_dir:
            log.warning("the sweep's jobs could not be counted (no ledger, no launch record)")
            return
        counts: dict[str, Any] = {s: 0 for s in STATUSES}
        for status in by_dir.values():
            counts[status] += 1
        counts["failed_dirs"] = [shown.get(d, d) for d, s in by_dir.items() if s == "failed"]
        _LAST = counts
        print(summary_line(counts, str(Path(str(config.hydra.sweep.dir)).resolve())), flush=True)
        _SWEEP.update(launched={}, entries=[], relaunched=set())
        if ledger is not None:
            shutil.rmtree(ledger, ignore_errors=True)
            try:
                ledger.parent.rmdir()  # only when no other sweep is running here
            except OSError:
                pass
        self.ledger = None


def _status_from_files(out_dir: Path, start: float) -> str:
    """The status of a launched job that recorded none: done when its result.json was written during this
    sweep, skipped when it is older, failed when there is none."""
    from .records import RESULT_FILE

    try:
        mtime = (out_dir / RESULT_FILE).stat().st_mtime
    except OSError:
        log.error("job %s: %s", out_dir, NO_OUTCOME)
        return "failed"
    return "done" if mtime >= start else "skipped"
