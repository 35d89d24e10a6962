"""Hydra entry point: config in, one pipeline run, summary out.

``lgcexp dataset=isolet algo=lgc noise.rate=0.6 seed=3``; ``lgcexp -m ... seed='range(20)'`` for sweeps.

Before Hydra starts, a pre-flight composes the config of every job the command line asks for and checks
it (:func:`lgcexp.config.plan`), so a bad value, an unknown option or group choice, or an unwritable output
directory stops with one line naming the key as typed and exit code 2, before any heavy work.
"""
from __future__ import annotations

import itertools
import logging
import os
import re
import sys
import uuid
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TensorFlow's start-up logs out of the terminal

import hydra  # noqa: E402
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from hydra.types import RunMode  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from .errors import UserError  # noqa: E402
from .rundir import register_resolver  # noqa: E402

register_resolver()


def _register_sweeper() -> None:
    """lgcexp's sweeper (``hydra/sweeper=lgcexp``, conf/config.yaml) by Hydra's manual plugin registration: an
    editable install's import hook hides the ``hydra_plugins`` package from Hydra's own plugin scan."""
    from hydra.core.plugins import Plugins

    plugins = Plugins.instance()  # first: Hydra's scan re-executes its core plugin modules (BasicSweeper)
    from hydra_plugins.lgcexp_sweeper.sweeper import LgcexpSweeper

    plugins.register(LgcexpSweeper)


_register_sweeper()

#: Hydra flags that take a value, and flags that make the pre-flight step aside (help, shell completion,
#: another config directory)
_VALUE_FLAGS = {"-c", "--cfg", "-p", "--package", "--experimental-rerun"}
_PASS_FLAGS = {"-h", "--help", "--hydra-help", "--version", "-sc", "--shell-completion", "-i", "--info",
               "-cp", "--config-path", "-cn", "--config-name", "-cd", "--config-dir", "--experimental-rerun"}
#: sweeps larger than this are checked value by value instead of job by job (lgcexp's sweeper then checks
#: every config group with the first and last values of the other keys: hydra_plugins/lgcexp_sweeper)
_MAX_PREFLIGHT_JOBS = 64


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
    except OSError as exc:
        from .config import WRITE_ERRNOS

        if exc.errno not in WRITE_ERRNOS:
            raise
        # a directory that became unwritable after the pre-flight: one line (nothing partial is left)
        where = exc.filename or hc.runtime.output_dir
        print(f"lgcexp: error: cannot write {where} ({exc.strerror or exc})", file=sys.stderr)
        sys.exit(2)
    if outcome.status == FAILED:  # a sweep job; counted by the sweep ledger (lgcexp.callbacks)
        return None
    if outcome.status == SKIPPED:  # this directory already holds the result
        print(f"lgcexp: skipped, already done: {hc.runtime.output_dir}", flush=True)
        return None
    result = outcome.result
    print(format_summary(result), flush=True)
    return result.get("acc_unlabeled")


# ------------------------------------------------------------------------------------------------------------
# pre-flight
# ------------------------------------------------------------------------------------------------------------

def _split_args(argv: list[str]) -> tuple[list[str], bool, bool]:
    """(overrides, multirun, skip): Hydra's own flags removed."""
    overrides, multirun, skip, i = [], False, False, 0
    while i < len(argv):
        a = argv[i]
        if a in _PASS_FLAGS or a.split("=", 1)[0] in _PASS_FLAGS:
            skip = True
        if a in ("-m", "--multirun"):
            multirun = True
        elif a in _VALUE_FLAGS:
            i += 1
        elif a.startswith("-"):
            pass
        else:
            overrides.append(a)
        i += 1
    return overrides, multirun, skip


def _group_options(group: str) -> list[str]:
    from hydra.core.global_hydra import GlobalHydra

    try:
        return sorted(GlobalHydra.instance().config_loader().get_group_options(group))
    except Exception:  # pragma: no cover - defensive
        return []


def _compose(overrides: list[str]):
    from hydra import compose

    return compose(config_name="config", overrides=overrides)


def _composition_error(exc: Exception, overrides: list[str], parsed: list) -> UserError:
    """Hydra's multi-line composition errors as one line naming the override as typed."""
    from omegaconf import OmegaConf

    text = str(exc)
    cause = exc.__cause__ or exc.__context__
    for o in parsed:
        key = o.get_key_element().lstrip("+~")
        group = o.key_or_group
        m = re.search(rf"Could not (?:find|load) '{re.escape(group)}/([^']*)'", text)
        if m:
            choices = _group_options(group)
            return UserError(f"{group}={m.group(1)} is not allowed: choose one of {', '.join(choices)}")
        if (f"Could not override '{key}'" in text
                or f"Could not append to config. An item is already at '{key}'" in text):
            others = [x for x in overrides if x != o.input_line]
            parent, _, leaf = key.rpartition(".")
            allowed = ""
            try:
                node = OmegaConf.select(_compose(others), parent) if parent else _compose(others)
                if node is not None and hasattr(node, "keys"):
                    allowed = "; allowed: " + ", ".join(str(k) for k in node.keys() if k != "hydra")
            except Exception:
                pass
            if "already at" in text:
                return UserError(f"{o.input_line} is not allowed: {key} exists already; drop the +")
            return UserError(f"{o.input_line} is not allowed: {key} is not an option{allowed}")
    first = (str(cause) if cause else text).strip().splitlines()
    return UserError("bad command line: " + (first[0] if first else type(exc).__name__))


def _job_overrides(parsed: list) -> list[list[str]]:
    """Every job's override list of a (multi)run command line, or one list per swept value when the
    product is large."""
    choices = []
    for o in parsed:
        if o.is_sweep_override():
            key = o.get_key_element()
            choices.append([f"{key}={v}" for v in o.sweep_string_iterator()])
        else:
            choices.append([o.input_line])
    total = 1
    for ch in choices:
        total *= max(1, len(ch))
    if total <= _MAX_PREFLIGHT_JOBS:
        return [list(c) for c in itertools.product(*choices)]
    jobs = []
    for i, ch in enumerate(choices):
        for v in ch:
            jobs.append([v if j == i else choices[j][0] for j in range(len(choices))])
    return jobs


def _config_is_multirun(parsed: list) -> bool:
    """Does the config itself ask for a sweep (``hydra.mode: MULTIRUN``, as the experiment configs do)?"""
    from hydra import compose

    try:
        cfg = compose(config_name="config", overrides=[o.input_line for o in parsed if not o.is_sweep_override()],
                      return_hydra_config=True)
        return str(cfg.hydra.mode) == str(RunMode.MULTIRUN)
    except Exception:  # a bad override: the composition below reports it
        return False


def preflight(argv: list[str]) -> None:
    """Compose and check the config of every job on the command line; raise UserError on the first bad one."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from . import compose_memo
    from .config import check_paths, plan, to_container

    overrides, multirun, skip = _split_args(argv)
    if skip:
        return
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except HydraException as exc:
        line = str(exc).strip().splitlines()
        hint = ("; quote a value with characters Hydra reserves, keeping the quotes from the shell: "
                "\"dataset.sep=';'\"") if line and "LexerNoViableAlt" in line[0] else ""
        raise UserError(f"cannot parse the command line: {line[0] if line else exc}{hint}") from None
    everything = parsed
    # Hydra's own settings (hydra.*, hydra/launcher=...) are Hydra's business, except the search path,
    # which may add config groups (plug-ins), and the launcher of a sweep (checked below)
    parsed = [o for o in parsed if not o.key_or_group.startswith("hydra") or o.key_or_group == "hydra.searchpath"]
    GlobalHydra.instance().clear()
    # the jobs of a command-line sweep differ mostly in values: their compositions share the per-process memo
    with initialize_config_dir(config_dir=_conf_dir(), version_base="1.3"), compose_memo.active(uuid.uuid4().hex):
        if not multirun and any(o.is_sweep_override() for o in parsed) and not _config_is_multirun(parsed):
            bad = next(o for o in parsed if o.is_sweep_override())
            raise UserError(f"{bad.input_line} is not allowed: a list of values is a sweep; add -m (multirun)")
        checked_paths = False
        plans: list = []
        for job in _job_overrides(parsed):
            try:
                cfg = _compose(job)
            except (HydraException, OmegaConfBaseException) as exc:
                raise _composition_error(exc, job, parsed) from None
            container = to_container(cfg)
            plans.append(plan(container))
            if not checked_paths:
                check_paths(container, output=True)
                checked_paths = True
        _check_unused(parsed, plans)
        if multirun or _config_is_multirun(parsed) or any(
                o.key_or_group.startswith(("hydra.launcher", "hydra/launcher")) for o in everything):
            _check_launcher(everything)
        _check_hydra_dir(everything, multirun or _config_is_multirun(parsed))


def _check_unused(parsed: list, plans: list) -> None:
    """Refuse an option typed on the command line that no job of it would use, where the user plainly meant
    something by it: ``loss=`` for a method with a loss parameter of its own (AutoD: ``algo.params.loss``),
    ``detect.*`` for methods that do not judge labels, and ``eig.p=`` where no method takes its eigenpair count
    from it (SIIS uses ``algo.params.m``; LGC none). A sweep with one job that uses it is fine (the others are
    the sweeper's duplicates)."""
    from .config import judges_labels

    typed = {o.get_key_element().lstrip("+~"): o.input_line for o in parsed}
    if "loss" in typed and plans and not any(p.algorithm.losses for p in plans):
        own = next((p for p in plans if "loss" in p.algorithm._parameter_constraints), None)
        if own is not None:
            name = own.algorithm.name
            choices = own.algorithm._parameter_constraints["loss"][0]
            raise UserError(f"{typed['loss']} is not allowed for algo={name}: the top-level loss is AutoL's; "
                            f"{name}'s own leave-one-out loss is algo.params.loss ({choices})")
    detect = [line for k, line in typed.items() if k == "detect" or k.startswith("detect.")]
    if detect and plans and not any(judges_labels(p.algorithm) for p in plans):
        name = plans[0].algorithm.name
        from .algorithms import method_names

        raise UserError(f"{detect[0]} is not allowed with algo={name}: it does not judge its labels (no "
                        f"label_issues.csv); the detect options are for {method_names('judging')}")
    if "eig.p" in typed and plans and not any(p.n_eigenpairs == p.config["eig"]["p"] for p in plans):
        p = plans[0]
        name = p.algorithm.name
        why = (f"it computes {p.n_eigenpairs} eigenpairs, set by its own parameters"
               + (" (algo.params.m)" if "m" in p.algorithm._parameter_constraints else "")
               if p.n_eigenpairs else "it computes no eigenpairs")
        raise UserError(f"{typed['eig.p']} is not allowed with algo={name}: {why}")


def _check_launcher(parsed: list) -> None:
    """A sweep's launcher options (hydra/launcher=..., hydra.launcher.*, LGCEXP_JOBS): lgcexp/launchers.py."""
    from hydra import compose
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from .launchers import check_launcher

    first = [o.input_line if not o.is_sweep_override() else f"{o.get_key_element()}={next(o.sweep_string_iterator())}"
             for o in parsed]
    try:
        cfg = compose(config_name="config", overrides=first, return_hydra_config=True)
        # the launcher's own options: its config without the hydra.launcher.* keys typed
        base = compose(config_name="config", overrides=[f for f, o in zip(first, parsed)
                                                        if not o.key_or_group.startswith("hydra.launcher.")],
                       return_hydra_config=True)
    except (HydraException, OmegaConfBaseException) as exc:
        raise _composition_error(exc, first, parsed) from None
    known = [str(k) for k in base.hydra.launcher.keys() if k != "_target_"]
    which = cfg.hydra.runtime.choices.get("hydra/launcher") or "basic"
    for o in parsed:
        key = o.get_key_element().lstrip("+~")
        if key.startswith("hydra.launcher.") and key.split(".")[2] not in known:
            raise UserError(f"{o.input_line} is not allowed: {key} is not an option of hydra/launcher={which}"
                            + (f"; allowed: {', '.join(sorted(known))}" if known else " (it takes none)"))
    check_launcher(cfg.hydra.launcher)


def _check_hydra_dir(parsed: list, multirun: bool) -> None:
    """The directory Hydra creates for the run (``hydra.run.dir``) or the sweep (``hydra.sweep.dir``), e.g.
    ``${paths.results_dir}/figure2`` of ``experiment=figure2``: it must be creatable and writable, or the run
    would end in Hydra's traceback. Named by the path option it lies under, as typed where it was typed."""
    from hydra import compose
    from omegaconf import OmegaConf

    from .config import check_creatable_dir

    first = [o.input_line if not o.is_sweep_override() else f"{o.get_key_element()}={next(o.sweep_string_iterator())}"
             for o in parsed]
    try:
        cfg = compose(config_name="config", overrides=first, return_hydra_config=True)
        which = "sweep" if multirun else "run"
        target = str(OmegaConf.select(cfg, f"hydra.{which}.dir"))
        paths = {k: str(OmegaConf.select(cfg, f"paths.{k}")) for k in ("results_dir", "output_dir")}
    except Exception:  # an interpolation only Hydra's run can resolve: left to Hydra
        return
    typed = {o.get_key_element().lstrip("+~"): o.input_line for o in parsed}
    key, value = f"hydra.{which}.dir", target
    for k, v in paths.items():
        root = os.path.abspath(os.path.expanduser(v))
        if os.path.abspath(os.path.expanduser(target)).startswith(root.rstrip(os.sep) + os.sep):
            key, value = f"paths.{k}", v
            break
    if key in typed:
        value = typed[key].split("=", 1)[1]
    check_creatable_dir(key, value, target)


def main(argv: list[str] | None = None) -> None:
    from hydra.core.global_hydra import GlobalHydra

    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        preflight(argv)
    except UserError as exc:
        print(f"lgcexp: error: {exc}", file=sys.stderr)
        sys.exit(2)
    sys.argv = [sys.argv[0], *argv]
    GlobalHydra.instance().clear()
    from .callbacks import forget_last_sweep, last_sweep_failed

    forget_last_sweep()
    _app()

    if last_sweep_failed():  # a sweep with failed jobs (its summary line names them)
        sys.exit(1)


if __name__ == "__main__":
    main()
