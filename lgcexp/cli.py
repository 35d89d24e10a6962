"""Hydra entry point: config in, one pipeline run, summary out.

``lgcexp dataset=isolet algo=lgc noise.rate=0.6 seed=3``; ``lgcexp -m ... seed='range(20)'`` for sweeps.
"""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TensorFlow's start-up logs out of the terminal

import hydra  # noqa: E402
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from hydra.types import RunMode  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from .errors import UserError  # noqa: E402
from .rundir import register_resolver  # noqa: E402

register_resolver()


def _conf_dir() -> str:
    """``conf/`` of a source checkout (editable install), else the copy shipped inside the package."""
    here = Path(__file__).resolve().parent
    for cand in (here.parent / "conf", here / "conf"):
        if (cand / "config.yaml").exists():
            return str(cand)
    raise RuntimeError("lgcexp: cannot find the conf/ directory next to the package")


log = logging.getLogger("lgcexp")


@hydra.main(version_base="1.3", config_path=_conf_dir(), config_name="config")
def _app(cfg: DictConfig) -> float | None:
    from .pipeline import format_summary
    from .runner import FAILED, SKIPPED, run_job_outcome

    hc = HydraConfig.get()
    multirun = hc.mode == RunMode.MULTIRUN
    try:
        # in a sweep every failure comes back as an outcome (error.json written, the sweep goes on)
        outcome = run_job_outcome(cfg, Path(hc.runtime.output_dir), multirun=multirun)
    except UserError as exc:
        print(f"lgcexp: error: {exc}", file=sys.stderr)
        sys.exit(2)
    if outcome.status == FAILED:  # a sweep job; counted by the sweep ledger (lgcexp.callbacks)
        return None
    if outcome.status == SKIPPED:  # this directory already holds the result
        print(f"lgcexp: skipped, already done: {hc.runtime.output_dir}", flush=True)
        return None
    result = outcome.result
    print(format_summary(result), flush=True)
    return result.get("acc_unlabeled")


def main() -> None:
    _app()
    from .callbacks import last_sweep_failed

    if last_sweep_failed():  # a sweep with failed jobs (its summary line names them)
        sys.exit(1)


if __name__ == "__main__":
    main()
