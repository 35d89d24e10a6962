"""A sweeper that launches every distinct run once, after checking the sweep at the cost of a few composes.

Hydra's :class:`~hydra._internal.core_plugins.basic_sweeper.BasicSweeper` composes the config of every job
in the launching process before it starts any (``validate_batch_is_legal``: ~0.1 s each, 77 s for the 640
jobs of Table 1), then each worker composes its job again. This subclass changes two things and nothing else
(same job order, same override lists, same launchers):

- **check**: jobs are grouped by their config-group choices (``algo=...``, ``dataset=...``; a different
  defaults list); every group is composed once with the first value of every other swept key, and every
  value of every swept key is composed once (the others at their first value) — the value-by-value check
  the pre-flight of :mod:`lgcexp.cli` uses for large command-line sweeps. Each composed config also passes
  lgcexp's own checks (:func:`lgcexp.config.plan`), so a bad value stops the sweep with one line before any
  job starts.
- **duplicates**: a swept key that a group's runs ignore (``loss`` for ``algo=lgc``: the effective config,
  hence the run directory, is the same for every value; :func:`lgcexp.rundir.effective_config`) would give
  jobs that share one output directory and are skipped one after the other in the workers. Such jobs are
  left out before the launch (the first of each set runs): a key counts as ignored by a group only when
  every one of its values composes to the same output directory (``hydra.sweep.dir``/``subdir``), checked
  with the other swept keys at their first and at their last values.
"""
from __future__ import annotations

import logging
import sys
import time
from collections import OrderedDict
from typing import Sequence

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

log = logging.getLogger(__name__)


def _key(override: str) -> str:
    return override.split("=", 1)[0]


class LgcexpSweeper(BasicSweeper):
    """Hydra's basic sweeper; cheaper check, no duplicate jobs (module docstring)."""

    def __init__(self, max_batch_size: int | None = None, params: dict[str, str] | None = None) -> None:
        super().__init__(max_batch_size=max_batch_size, params=params)
        self._seen: set[str] = set()  # jobs launched by earlier batches (their overrides, ignored keys left out)

    def setup(self, *, hydra_context, task_function, config) -> None:
        """BasicSweeper's setup with the config loader of the sweep (and of its launcher's jobs) composing
        through the per-process memo of :mod:`lgcexp.compose_memo`."""
        from lgcexp.compose_memo import memo_context

        super().setup(hydra_context=memo_context(hydra_context), task_function=task_function, config=config)

    def sweep(self, arguments: list[str]):
        """BasicSweeper's sweep through a launcher that counts every job and survives a dead worker."""
        if not isinstance(self.launcher, _CountingLauncher):
            self.launcher = _CountingLauncher(self.launcher, self._job_dir)
        return super().sweep(arguments)

    # -- hooks of BasicSweeper.sweep ---------------------------------------------------------------------
    def get_job_batch(self) -> Sequence[Sequence[str]]:
        batch = super().get_job_batch()
        return self._distinct(batch)

    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        """The check is part of :meth:`_distinct` (which composed what it needed already)."""

    # -- helpers ---------------------------------------------------------------------------------------
    def _job_dir(self, overrides: list[str]) -> str:
        """The output directory of the job of ``overrides`` (``hydra.sweep.dir``/``hydra.sweep.subdir``; the run
        directory is the hash of the effective config, lgcexp.rundir), after lgcexp's checks of its config: a
        bad value stops the sweep with one line and exit code 2, as the pre-flight of lgcexp.cli does for the
        command line."""
        from lgcexp.config import plan, to_container
        from lgcexp.errors import UserError

        assert self.hydra_context is not None and self.config is not None
        cfg = self.hydra_context.config_loader.load_sweep_config(master_config=self.config,
                                                                 sweep_overrides=list(overrides))
        try:
            plan(to_container(OmegaConf.create({k: v for k, v in cfg.items() if k != "hydra"})))
        except UserError as exc:
            print(f"lgcexp: error: {exc}", file=sys.stderr)
            sys.exit(2)
        try:
            return f"{OmegaConf.select(cfg, 'hydra.sweep.dir')}/{OmegaConf.select(cfg, 'hydra.sweep.subdir')}"
        except Exception:  # e.g. a subdir of ${hydra.job.num}, known at launch only: every job is its own
            return "\x00".join(overrides)

    def _group_keys(self, batch: Sequence[Sequence[str]]) -> set[str]:
        """Override keys that choose a config group (they change the defaults list)."""
        assert self.hydra_context is not None
        loader = self.hydra_context.config_loader
        keys = set()
        parser = OverridesParser.create()
        for o in parser.parse_overrides(list(batch[0])):
            group = o.key_or_group.lstrip("+~")
            if group.startswith("hydra"):
                continue
            try:
                is_group = "/" in group or bool(loader.get_group_options(group))
            except Exception:  # not a group
                is_group = False
            if is_group:
                keys.add(o.get_key_element())
        return keys

    def _distinct(self, batch: Sequence[Sequence[str]]) -> list[list[str]]:
        batch = [list(job) for job in batch]
        if not batch:
            return batch
        t0 = time.perf_counter()
        group_keys = self._group_keys(batch)
        # the values each key takes in this batch, in order of appearance
        values: OrderedDict[str, list[str]] = OrderedDict()
        for job in batch:
            for ov in job:
                vals = values.setdefault(_key(ov), [])
                if ov not in vals:
                    vals.append(ov)
        swept = [k for k, v in values.items() if len(v) > 1 and k not in group_keys]

        def group_of(job: list[str]) -> tuple[str, ...]:
            return tuple(ov for ov in job if _key(ov) in group_keys)

        groups: OrderedDict[tuple[str, ...], list[list[str]]] = OrderedDict()
        for job in batch:
            groups.setdefault(group_of(job), []).append(job)
        checked: set[str] = set()

        def job_dir(base: list[str], value: str) -> str:
            checked.add(value)
            return self._job_dir([value if _key(ov) == _key(value) else ov for ov in base])

        def one_dir(base: list[str], key: str) -> bool:
            """Do all values of ``key`` give one output directory (the others as in ``base``)? Stops at the
            second directory."""
            first = job_dir(base, values[key][0])
            return all(job_dir(base, v) == first for v in values[key][1:])

        # a key is ignored by a group when every value gives the same output directory, with the other keys
        # at the group's first and at its last values
        ignored: dict[tuple[str, ...], set[str]] = {}
        for gsel, jobs in groups.items():
            ignored[gsel] = {key for key in swept if one_dir(jobs[0], key) and one_dir(jobs[-1], key)}
            if not swept:  # nothing swept besides the groups: check the group once
                self._job_dir(jobs[0])
        for key in swept:  # every value checked at least once (the others at the first job's values)
            for v in values[key]:
                if v not in checked:
                    job_dir(batch[0], v)
        out = []
        for job in batch:
            drop = ignored[group_of(job)]
            sig = "\x00".join(ov for ov in job if _key(ov) not in drop)
            if sig not in self._seen:
                self._seen.add(sig)
                out.append(job)
        if len(out) < len(batch):
            log.info("lgcexp sweeper: %d of %d jobs are duplicates (a key their method ignores: %s) and are left out",
                     len(batch) - len(out), len(batch),
                     ", ".join(sorted({k for s in ignored.values() for k in s})) or "-")
        log.debug("lgcexp sweeper: checked the sweep in %.2fs", time.perf_counter() - t0)
        return out


class _CountingLauncher:
    """The configured launcher, plus two things the sweep's accounting (lgcexp.callbacks) needs:

    - every launched job's output directory is noted, so a job that records no outcome (its ledger entry could
      not be written: a full disk) is still counted;
    - a batch whose launch raises (a joblib worker killed: ``TerminatedWorkerError``, the whole batch lost) is
      relaunched one job at a time: jobs finished already skip (their result.json is there), the healthy rest
      runs, and a job whose own launch raises again is counted as failed. The sweep goes on and ends with
      its summary line and a non-zero exit code.
    """

    def __init__(self, inner, job_dir) -> None:
        self.inner = inner
        self.job_dir = job_dir

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def _note(self, results) -> None:
        from lgcexp.callbacks import note_launched

        for r in results:
            try:
                note_launched(str(r.hydra_cfg.hydra.runtime.output_dir))
            except Exception:  # pragma: no cover - a launcher that returns no hydra config
                continue

    def launch(self, job_overrides, initial_job_idx: int):
        from hydra.core.utils import JobReturn, JobStatus

        from lgcexp.callbacks import note_failed, note_relaunched

        try:
            results = self.inner.launch(job_overrides, initial_job_idx=initial_job_idx)
            self._note(results)
            return results
        except Exception as exc:
            why = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
            log.error("lgcexp sweeper: a batch of %d jobs stopped (%s); relaunching its jobs one at a time",
                      len(job_overrides), why)
        out = []
        for i, job in enumerate(job_overrides):
            try:
                note_relaunched(self.job_dir(list(job)))
            except BaseException:  # the job's directory cannot be composed: its launch below says why
                pass
            try:
                results = self.inner.launch([job], initial_job_idx=initial_job_idx + i)
                self._note(results)
                out.extend(results)
            except Exception as exc:
                try:
                    where = self.job_dir(list(job))
                except BaseException:  # the job's directory cannot be composed: name it by its overrides
                    where = " ".join(job)
                msg = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
                log.error("lgcexp sweeper: job %s failed in its launcher (%s)", where, msg)
                note_failed(where, f"the job's launch failed ({msg})")
                out.append(JobReturn(overrides=list(job), status=JobStatus.COMPLETED, _return_value=None))
        return out
