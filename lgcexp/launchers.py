"""Pre-flight checks of a sweep's launcher (``hydra/launcher=parallel|slurm``, ``hydra.launcher.*``,
``LGCEXP_JOBS``), so a bad setting stops with one line and exit code 2 before any job starts instead of a
traceback from joblib or submitit once the sweep is under way.

The parameter tables mirror the options of Hydra's joblib launcher (joblib.Parallel's arguments) and
submitit's Slurm launcher that ``conf/hydra/launcher/*.yaml`` sets; other keys are left to Hydra's own
structured-config check.
"""
from __future__ import annotations

import os
import shutil
from typing import Any

from .errors import UserError
from .params import Interval, NoneValue, Options, String, check_value

#: hydra.launcher._target_ of the joblib launcher (hydra/launcher=parallel) and of submitit's Slurm one
JOBLIB = "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"
SLURM = "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
#: environment variable behind hydra.launcher.n_jobs in conf/hydra/launcher/parallel.yaml
JOBS_ENV = "LGCEXP_JOBS"

_POSITIVE_INT = [Interval("int", 1, None)]
JOBLIB_PARAMETERS = {
    # joblib.Parallel: n_jobs < 0 counts back from the number of cores (-1: every core); 0 has no meaning
    "n_jobs": [Interval("int", 1, None), Interval("int", None, -1)],
    "backend": [NoneValue(), Options(("loky", "multiprocessing", "threading"))],
    "prefer": [NoneValue(), Options(("processes", "threads"))],
    "require": [NoneValue(), Options(("sharedmem",))],
    "verbose": [Interval("int", 0, None)],
    "timeout": [NoneValue(), Interval("real", 0, None, "neither")],
    "batch_size": [Options(("auto",)), *_POSITIVE_INT],
    "mmap_mode": [NoneValue(), Options(("r+", "r", "w+", "c"))],
}
SLURM_PARAMETERS = {
    "timeout_min": _POSITIVE_INT,
    "cpus_per_task": [*_POSITIVE_INT, NoneValue()],
    "gpus_per_node": [Interval("int", 0, None), NoneValue()],
    "tasks_per_node": _POSITIVE_INT,
    "nodes": _POSITIVE_INT,
    "mem_gb": [Interval("real", 0, None, "neither"), NoneValue()],
    "array_parallelism": _POSITIVE_INT,
    "partition": [String("a partition name"), NoneValue()],
}


def _resolve(launcher: Any, key: str) -> Any:
    """One launcher option, resolved; an interpolation that fails (LGCEXP_JOBS=abc) names what was typed."""
    from omegaconf.errors import OmegaConfBaseException

    try:
        return launcher[key]
    except OmegaConfBaseException as exc:
        if key == "n_jobs" and JOBS_ENV in os.environ:
            raise UserError(f"{JOBS_ENV}={os.environ[JOBS_ENV]} is not allowed: it must be an integer other than 0 "
                            "(joblib workers; -1: every core)") from None
        first = str(exc).strip().splitlines()
        raise UserError(f"hydra.launcher.{key} is not allowed: {first[0] if first else type(exc).__name__}") from None


def check_launcher(launcher: Any) -> None:
    """Check the composed ``hydra.launcher`` node of a sweep; raise UserError on the first bad option."""
    if launcher is None:
        return
    target = str(launcher.get("_target_", ""))
    if target == JOBLIB:
        table = JOBLIB_PARAMETERS
    elif target == SLURM:
        table = SLURM_PARAMETERS
    else:
        return
    for key in table:
        if key not in launcher:
            continue
        value = _resolve(launcher, key)
        if key == "n_jobs" and JOBS_ENV in os.environ and not _typed_n_jobs(launcher):
            check_value(JOBS_ENV, value, table[key])
        check_value(f"hydra.launcher.{key}", value, table[key])
    if target == SLURM and shutil.which("srun") is None:  # what submitit's Slurm executor looks for
        raise UserError("hydra/launcher=slurm is not allowed here: no Slurm found (srun is not on PATH); run the "
                        "sweep on a cluster's login node, or use hydra/launcher=parallel")


def _typed_n_jobs(launcher: Any) -> bool:
    """Was n_jobs given on the command line (a plain value) rather than read from LGCEXP_JOBS?"""
    from omegaconf import OmegaConf

    try:
        return not OmegaConf.is_interpolation(launcher, "n_jobs")
    except Exception:  # pragma: no cover - defensive
        return True


__all__ = ["check_launcher", "JOBLIB_PARAMETERS", "SLURM_PARAMETERS"]
