"""One Hydra job: resume check, pipeline run, and failure record (``error.json``).

A job whose output directory already holds a ``result.json`` with the same config hash is skipped unless
``force=true``; a failed job writes ``error.json`` there and lets the rest of a sweep go on.
"""
from __future__ import annotations

import logging
import traceback
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from .config import to_container
from .errors import UserError
from .pipeline import run
from .rundir import config_hash
from .records import ERROR_FILE, RESULT_FILE, read_json, write_json

log = logging.getLogger("lgcexp")


def run_job(cfg: DictConfig, out_dir: Path, multirun: bool = False) -> dict[str, Any] | None:
    """Run one job in ``out_dir`` under a lock (parallel duplicates of a sweep wait, then skip)."""
    from filelock import FileLock

    out_dir.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out_dir / ".lock")):
        return _run_job_locked(cfg, out_dir, multirun)


def _run_job_locked(cfg: DictConfig, out_dir: Path, multirun: bool) -> dict[str, Any] | None:
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
            return None
        raise UserError(
            f"{done} holds a result for a different config (hash {prev.get('config_hash')} != {h}); "
            "use another output directory or force=true"
        )
    try:
        result = run(container, out_dir)
    except Exception as exc:
        write_json(out_dir / ERROR_FILE, {
            "error": str(exc), "type": type(exc).__name__, "config_hash": h,
            "traceback": traceback.format_exc() if not isinstance(exc, UserError) else None,
        })
        if multirun and not isinstance(exc, UserError):
            log.exception("job failed")
            return None
        raise
    err = out_dir / ERROR_FILE
    if err.exists():  # a successful rerun clears an old failure record
        err.unlink()
    return result
