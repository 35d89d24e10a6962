"""One Hydra job: resume check, pipeline run, and failure record (``error.json``).

A job ends in one of three states (:data:`DONE`, :data:`SKIPPED`, :data:`FAILED`):

- done: the result was computed now and ``result.json`` written;
- skipped: the output directory already holds a ``result.json`` with the same config hash (unless
  ``force=true``); a directory holding only ``error.json`` (a failed earlier attempt) is not done and reruns;
- failed: an exception; ``error.json`` is written there (best effort) and, in a sweep, the rest goes on.
"""
from __future__ import annotations

import gc
import logging
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from .cache import remove_stale_temp_files
from .config import to_container
from .errors import UserError
from .locations import env_switch
from .pipeline import run
from .records import ERROR_FILE, RESULT_FILE, read_json, write_json
from .rundir import config_hash

log = logging.getLogger("lgcexp")

DONE, SKIPPED, FAILED = "done", "skipped", "failed"


@dataclass
class JobOutcome:
    """What became of one job: ``status`` is DONE, SKIPPED or FAILED; ``result`` the record when DONE;
    ``error`` the exception when FAILED."""

    status: str
    out_dir: Path
    result: dict[str, Any] | None = None
    error: BaseException | None = None


#: the last outcome per output directory in this process (read by the sweep ledger, lgcexp.callbacks)
_OUTCOMES: dict[str, JobOutcome] = {}


def pop_outcome(out_dir: str | Path) -> JobOutcome | None:
    return _OUTCOMES.pop(str(Path(out_dir).resolve()), None)


def run_job(cfg: DictConfig, out_dir: Path, multirun: bool = False) -> dict[str, Any] | None:
    """Run one job; the result, or None when it was skipped (or failed inside a sweep)."""
    return run_job_outcome(cfg, out_dir, multirun).result


def run_job_outcome(cfg: DictConfig, out_dir: Path, multirun: bool = False) -> JobOutcome:
    """Run one job in ``out_dir`` under a lock (parallel duplicates of a sweep wait, then skip).

    In a sweep (``multirun``) every exception becomes a FAILED outcome; in a single run it propagates
    (after ``error.json`` is written)."""
    from filelock import FileLock

    if multirun:
        _before_sweep_job()
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        with FileLock(str(out_dir / ".lock")):
            outcome = _run_job_locked(cfg, out_dir, multirun)
    except Exception as exc:  # the lock, the directory, or a result.json of another config
        if not multirun:
            raise
        log.error("job failed: %s", exc)
        outcome = JobOutcome(FAILED, out_dir, error=exc)
    _OUTCOMES[str(out_dir.resolve())] = outcome
    return outcome


#: how many modules this process had loaded when it last froze its heap (:func:`settle_heap`)
_MODULES_AT_FREEZE = 0
#: sweep jobs this process has started
_SWEEP_JOBS = 0


def _before_sweep_job() -> None:
    """At the start of a sweep job: :func:`settle_heap` from the process's second job on. Then the jobs
    before it have ended (their config and outcome released: the ledger pops the outcome at the job's
    end), and a process that runs a single job (a Slurm task) never pays for the collection."""
    global _SWEEP_JOBS
    if _SWEEP_JOBS:
        settle_heap()
    _SWEEP_JOBS += 1


def settle_heap() -> bool:
    """Between sweep jobs, when the previous ones loaded new modules: collect the garbage, then move every
    object still alive to the garbage collector's permanent generation (:func:`gc.freeze`); True when it
    froze (called by :func:`_before_sweep_job`).

    joblib's workers (loky) run a full ``gc.collect()`` after nearly every task (once a second at most;
    that is loky's memory check when psutil is not installed), and a full collection walks every object of
    the process: with TensorFlow, faiss, numba and Hydra loaded, about 440,000 objects and 0.3-0.5 s per
    job on this 2-core machine. The modules, the memoised data and the compiled functions live as long as
    the worker; once frozen, a collection walks only the objects made since. Frozen objects are still freed
    by reference counting; only reference cycles among them that die later are never collected (a compiled
    Adam block dropped from :data:`lgcexp.algorithms.autol._COMPILED`, the config of the job that was
    running). The heap is frozen only when the set of loaded modules grew, a handful of times per worker
    (its first jobs, the first TensorFlow method, ...), so what can be kept that way is what was alive at
    those few moments. Changes no number. ``LGCEXP_SETTLE_HEAP=0`` turns it off (the benchmark's
    baseline)."""
    global _MODULES_AT_FREEZE
    if len(sys.modules) <= _MODULES_AT_FREEZE or not env_switch("LGCEXP_SETTLE_HEAP"):
        return False
    gc.collect()
    gc.freeze()
    _MODULES_AT_FREEZE = len(sys.modules)
    return True


def _record_error(out_dir: Path, exc: BaseException, h: str) -> None:
    """Write error.json; a directory that cannot be written is reported, not raised over the real error."""
    try:
        write_json(out_dir / ERROR_FILE, {
            "error": str(exc), "type": type(exc).__name__, "config_hash": h,
            "traceback": traceback.format_exc() if not isinstance(exc, UserError) else None,
        })
    except OSError as werr:
        log.error("could not write %s (%s)", out_dir / ERROR_FILE, werr)


def _run_job_locked(cfg: DictConfig, out_dir: Path, multirun: bool) -> JobOutcome:
    # temporary files of a writer that was killed (all writers of this directory hold its lock)
    remove_stale_temp_files(out_dir)
    container = to_container(cfg)
    h = config_hash(container)
    done = out_dir / RESULT_FILE
    if done.exists() and not container.get("force", False):
        try:
            prev = read_json(done)
        except (OSError, ValueError):
            prev = {}
        if prev.get("config_hash") == h:
            log.info("skipping: %s already holds a result for this config (force=true reruns)", out_dir)
            return JobOutcome(SKIPPED, out_dir)
        raise UserError(
            f"{done} holds a result for a different config (hash {prev.get('config_hash')} != {h}); "
            "use another output directory or force=true"
        )
    try:
        result = run(container, out_dir)
    except Exception as exc:
        _record_error(out_dir, exc, h)
        if multirun:
            if isinstance(exc, UserError):
                log.error("job failed: %s", exc)
            else:
                log.exception("job failed")
            return JobOutcome(FAILED, out_dir, error=exc)
        raise
    err = out_dir / ERROR_FILE
    if err.exists():  # a successful rerun clears an old failure record
        err.unlink()
    return JobOutcome(DONE, out_dir, result=result)
