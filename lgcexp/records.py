"""Stage 7: run records. ``result.json`` and ``labels.csv`` per run, written atomically."""
from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .cache import atomic_write_text

RESULT_FILE = "result.json"
ERROR_FILE = "error.json"
LABELS_FILE = "labels.csv"


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return _jsonable(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def write_json(path: Path, payload: dict[str, Any]) -> None:
    atomic_write_text(Path(path), json.dumps(_jsonable(payload), indent=2, sort_keys=False) + "\n")


def read_json(path: Path) -> dict[str, Any]:
    with open(path) as fh:
        return json.load(fh)


def write_labels_csv(path: Path, columns: dict[str, np.ndarray]) -> None:
    buf = io.StringIO()
    pd.DataFrame(columns).to_csv(buf, index=False)
    atomic_write_text(Path(path), buf.getvalue())


def write_table(path: Path, frame: pd.DataFrame) -> None:
    """A DataFrame as CSV (no index), written atomically."""
    buf = io.StringIO()
    frame.to_csv(buf, index=False)
    atomic_write_text(Path(path), buf.getvalue())


def replace_rows(old: pd.DataFrame, new: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """``old``'s rows that no row of ``new`` shares ``keys`` with, then ``new``'s rows: a rerun replaces the
    committed row of the same place. The keys are those of ``keys`` that either table has (a key one table lacks
    reads as missing there). They are compared as text after the two tables are joined, so ``1`` and ``1.0`` of a
    column that one side read as float are one place, as are two missing values. Rows of one table that share
    their keys are all kept (a run or benchmark writes one row per place)."""
    if not len(new):
        return old.reset_index(drop=True)
    both = pd.concat([old, new], ignore_index=True)
    cols = [k for k in keys if k in both]
    if not cols:
        raise ValueError(f"replace_rows: neither table has any of the keys {keys}")
    place = pd.MultiIndex.from_frame(both[cols].astype(str))
    fresh = np.arange(len(both)) >= len(old)
    replaced = ~fresh & place.isin(place[fresh])
    return both[~replaced].reset_index(drop=True)
