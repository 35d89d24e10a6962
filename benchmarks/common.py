"""What the benchmarks share: where they write, timing, the report header, rows and figures written to files,
the paper's graphs and the data sets they load, and the worker-count rule.

Imports nothing but the standard library and numpy at module level: ``benchmarks.gpu`` runs on a bare GPU
machine (no hydra, omegaconf, TensorFlow or faiss), and every lgcexp import below is inside a function.
"""
from __future__ import annotations

import csv
import json
import os
import platform
import resource
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

#: the repository root (benchmarks run from it: ``python -m benchmarks NAME``)
ROOT = Path(__file__).resolve().parents[1]
#: where every benchmark writes its figures (git-ignored)
OUT = ROOT / "results" / "bench"

#: the paper's graph of each data set: (k, sigma) of the kNN graph (union-symmetrised), and its labelled points
GRAPH = {"mnist": (15, "mean"), "isolet": (10, 100.0), "digits": (10, "mean")}
LABELS = {"mnist": 100, "isolet": 1040, "digits": 100}


def timed(fn, *args, **kw):
    """(result, wall seconds) of ``fn(*args, **kw)``."""
    t0 = time.perf_counter()
    out = fn(*args, **kw)
    return out, time.perf_counter() - t0


def timed_cpu(fn, *args, **kw):
    """(result, wall seconds, CPU seconds of this process, all threads): on a shared, loaded machine the
    CPU time is the steadier measure of the work done."""
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn(*args, **kw)
    return out, time.perf_counter() - t0, time.process_time() - c0


def best_of(fn, repeat: int = 3):
    """(result, best wall seconds, CPU seconds of that repetition) over ``repeat`` calls of ``fn()``."""
    best = None
    for _ in range(repeat):
        c0, t0 = time.process_time(), time.perf_counter()
        out = fn()
        w, c = time.perf_counter() - t0, time.process_time() - c0
        if best is None or w < best[1]:
            best = (out, w, c)
    return best


class Clock:
    """Wall (``wall``) and process-CPU (``cpu``) seconds of a ``with`` block."""

    def __enter__(self):
        self.w0, self.c0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.w0
        self.cpu = time.process_time() - self.c0


def cpu_seconds() -> float:
    """User + system CPU seconds of this process so far (resource.getrusage)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def workers() -> int:
    """How many worker processes or threads a benchmark uses: the CPUs this process may use
    (:func:`lgcexp.devices.cpu_threads`, the rule's home; OMP_NUM_THREADS when set)."""
    from lgcexp.devices import cpu_threads

    return cpu_threads()


def header() -> dict:
    """The date (UTC) and the machine, as every report starts."""
    return {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"}


def figure_rows(figures: dict) -> list[str]:
    """A Markdown table ``| figure | value |`` of a dict of figures (floats to 4 significant digits)."""
    lines = ["| figure | value |", "|---|---|"]
    for k, v in figures.items():
        lines.append(f"| {k} | {v:.4g} |" if isinstance(v, float) else f"| {k} | {v} |")
    return lines


def write_report(out: Path | str, stem: str, report: dict, markdown: str) -> Path:
    """``report`` to ``out/stem.json`` and ``markdown`` to ``out/stem.md`` (creating ``out``); returns the
    JSON file's path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps(report, indent=2, default=float))
    (out / f"{stem}.md").write_text(markdown)
    return out / f"{stem}.json"


def write_rows(rows: list[dict], path: Path | str) -> None:
    """``rows`` (dicts with the same keys) to ``path`` (CSV; the columns those of the first row), creating its
    folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def data_dir() -> str | None:
    """$LGCEXP_DATA_DIR (None: lgcexp's default data directory)."""
    return os.environ.get("LGCEXP_DATA_DIR")


def open_cache():
    """lgcexp's cache in $LGCEXP_CACHE_DIR (its default directory when unset)."""
    from lgcexp.cache import Cache

    return Cache(os.environ.get("LGCEXP_CACHE_DIR"))


def compose(overrides: list[str]):
    """The run configuration of ``lgcexp <overrides>`` (Hydra's compose on this checkout's conf/)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=list(overrides))


def load_graph(dataset: str, download: bool = False):
    """(data, graph, cache): a data set and its paper graph (:data:`GRAPH`), the graph from / into the cache."""
    from lgcexp.data import load_dataset
    from lgcexp.graph import build_graph

    data = load_dataset(dataset, data_dir=data_dir(), download=download)
    k, sigma = GRAPH[dataset]
    store = open_cache()
    graph, _ = build_graph(data.X, k, sigma, "union", cache=store, data_fingerprint=data.fingerprint())
    return data, graph, store


def load(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(X, y) of a data set with every point labelled, as float64 / int64: ``digits`` (scikit-learn's), else
    ``<name>.npz`` in lgcexp's data directory ($LGCEXP_DATA_DIR)."""
    if name == "digits":
        from sklearn.datasets import load_digits

        X, y = load_digits(return_X_y=True)
        return X.astype(np.float64), y.astype(np.int64)
    from lgcexp.locations import default_dir

    z = np.load(Path(default_dir("data")).expanduser() / f"{name}.npz")
    return z["X"].astype(np.float64), z["y"].astype(np.int64)
