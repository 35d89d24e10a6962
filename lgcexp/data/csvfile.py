"""``dataset=csv``: your own data in a CSV file, with labels nobody has checked.

One row per point. Feature columns hold numbers; the label column (``dataset.label_column``, a name, or a
0-based position) holds the labels as given, any values (ints or strings). A row whose label is empty (or
NA/NaN/null, as pandas reads them) or equals ``dataset.unlabeled_value`` (default -1; null: no sentinel) is
unlabelled. Every other row is labelled *as written*: the run is a diagnosis run (nothing sampled, no noise
added; see :mod:`lgcexp.issues.diagnosis`).

``dataset.clean_column`` optionally names trusted labels (a benchmark): used for scoring only, never for
fitting; empty cells there mean "truth unknown". With ``label_column=null`` and a ``clean_column``, the
clean labels are the data set's labels and labels are sampled and corrupted as for the built-in sets.

``dataset.feature_columns`` selects the features (default: every other column); ``dataset.header=false``
reads a file without a header line (columns are then given by position); ``dataset.sep`` is the separator.
A CSV is parsed into memory (it cannot be memory-mapped); for big data use ``dataset=npy``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from lgcexp.errors import UserError

from ..params import Array, Boolean, Constraint, NoneValue, String, fmt_value
from .dataset import Dataset
from .download import one_line
from .own import LABEL_VALUE, UNLABELED_VALUE, existing_file, make_own_dataset, parse_labels
from .source import DataSource


class ColumnRef(Constraint):
    """A column: a name (non-empty string) or a 0-based position (an integer; negative counts from the end)."""

    def is_satisfied_by(self, v: Any) -> bool:
        return (isinstance(v, str) and v.strip() != "") or (isinstance(v, int) and not isinstance(v, bool))

    def __str__(self) -> str:
        return "a column name or a 0-based column position"


def _show_columns(columns: list) -> str:
    shown = ", ".join(str(c) for c in columns[:12])
    return shown + (f", ... ({len(columns)} in all)" if len(columns) > 12 else "")


class CsvFile(DataSource):
    """A user's CSV: feature columns, a column of given labels and optionally one of clean labels."""

    name = "csv"
    _parameter_constraints = {
        "path": [String("a path to a .csv file")],
        "label_column": [ColumnRef(), NoneValue()],
        "clean_column": [ColumnRef(), NoneValue()],
        "feature_columns": [NoneValue(), Array(ColumnRef(), "a list of column names or positions", min_length=1)],
        "unlabeled_value": LABEL_VALUE,
        "header": [Boolean()],
        "sep": [String("a separator such as , or ;")],
    }

    def __init__(self, path: str | None = None, label_column: str | int | None = "label",
                 clean_column: str | int | None = None, feature_columns: list | None = None,
                 unlabeled_value: int | str | None = UNLABELED_VALUE, header: bool = True, sep: str = ","):
        self.path = path
        self.label_column = label_column
        self.clean_column = clean_column
        self.feature_columns = feature_columns
        self.unlabeled_value = unlabeled_value
        self.header = header
        self.sep = sep

    @classmethod
    def _check_relations(cls, params: dict[str, Any], prefix: str) -> None:
        label, clean = params.get("label_column"), params.get("clean_column")
        if label is None and clean is None:
            raise UserError(f"{prefix}label_column=null is not allowed without {prefix}clean_column: name the "
                            "column of given labels (a diagnosis run) or of clean labels (labels are then sampled)")
        if label is not None and label == clean:
            raise UserError(f"{prefix}clean_column={fmt_value(clean)} is not allowed: it is the label column too")
        for c in params.get("feature_columns") or ():
            if c is not None and c in (label, clean):
                raise UserError(f"{prefix}feature_columns={fmt_value(list(params['feature_columns']))} is not "
                                f"allowed: it lists the {'label' if c == label else 'clean'} column {fmt_value(c)}")

    # ---------------------------------------------------------------------------------------------------
    def _source(self) -> str:
        return f"dataset.path={self.path}"

    def _resolve(self, key: str, value: Any, columns: list) -> Any:
        """The pandas column name of option ``key`` (a name or a position) or a UserError naming it."""
        typed = f"dataset.{key}={fmt_value(value)}"
        if isinstance(value, int):
            if not -len(columns) <= value < len(columns):
                raise UserError(f"{typed} is not allowed: {self.path} has {len(columns)} columns "
                                f"(positions 0..{len(columns) - 1})")
            return columns[value]
        if not self.header:
            raise UserError(f"{typed} is not allowed: with dataset.header=false the columns have no names; "
                            f"give a 0-based position (0..{len(columns) - 1})")
        if value not in columns:
            import difflib

            close = difflib.get_close_matches(value, [str(c) for c in columns], n=1)
            guess = f" (did you mean {close[0]!r}?)" if close else ""
            data_line = ""
            if all(_is_number(c) for c in columns):
                data_line = " (the first line looks like data: set dataset.header=false and give positions)"
            raise UserError(f"{typed} is not allowed: {self.path} has no column {value!r}{guess}; "
                            f"columns: {_show_columns(columns)}{data_line}")
        return value

    def _read(self, p: str, **kw: Any):
        import pandas as pd

        try:
            return pd.read_csv(p, sep=self.sep, header=0 if self.header else None, **kw)
        except pd.errors.EmptyDataError:
            raise UserError(f"{self._source()}: the file is empty") from None
        except UnicodeDecodeError as e:
            raise UserError(f"{self._source()}: not UTF-8 text ({one_line(e)})") from None
        except (pd.errors.ParserError, ValueError, OSError) as e:
            raise UserError(f"{self._source()}: not a readable CSV file ({one_line(e)})") from None

    def _check_rows(self, p: str, width: int) -> None:
        """Every non-blank line has ``width`` fields (pandas, reading some columns, would silently shift a row
        with an extra field and pad a short one). Quoted fields and one-character separators are counted by
        :mod:`csv`; a plain file by counting separators; a regular-expression separator is left to pandas."""
        import csv

        if len(self.sep) != 1:
            return
        with open(p, "rb") as fh:
            raw = fh.read()
        if b'"' in raw:
            counts = ((i, len(row)) for i, row in enumerate(
                csv.reader(raw.decode("utf-8", errors="replace").splitlines(), delimiter=self.sep), 1) if row)
        else:
            sep = self.sep.encode()
            counts = ((i, line.count(sep) + 1) for i, line in enumerate(raw.splitlines(), 1) if line.strip())
        for line, n in counts:
            if n != width:
                raise UserError(f"{self._source()}: line {line} has {n} fields, not {width} like the "
                                f"{'header' if self.header else 'first line'} (a ragged row; sep={self.sep!r})")

    def _load(self, *, data_dir=None, download=True) -> Dataset:
        p = existing_file("dataset.path", self.path, "file.csv")
        columns = list(self._read(p, nrows=0 if self.header else 1).columns)
        self._check_rows(p, len(columns))
        label = None if self.label_column is None else self._resolve("label_column", self.label_column, columns)
        clean = None if self.clean_column is None else self._resolve("clean_column", self.clean_column, columns)
        if label is not None and label == clean:
            raise UserError(f"dataset.clean_column={fmt_value(self.clean_column)} is not allowed: "
                            f"it is the label column ({label!r}) too")
        if self.feature_columns is None:
            features = [c for c in columns if c not in (label, clean)]
        else:
            features = [self._resolve("feature_columns", c, columns) for c in self.feature_columns]
            taken = [c for c in features if c in (label, clean)]
            if taken or len(set(features)) != len(features):
                why = f"lists the label/clean column {taken[0]!r}" if taken else "lists a column twice"
                raise UserError(f"dataset.feature_columns={fmt_value(list(self.feature_columns))} is not "
                                f"allowed: it {why}")
        if not features:
            raise UserError(f"{self._source()}: no feature columns left besides the label column(s); "
                            f"columns: {_show_columns(columns)}")
        label_cols = [c for c in (label, clean) if c is not None]
        df = self._read(p, usecols=[*features, *label_cols], dtype={c: str for c in label_cols})
        if len(df) == 0:
            raise UserError(f"{self._source()}: the file has a header line ({_show_columns(columns)}) but no data "
                            "rows")
        X = self._features(df, features)
        given = None if label is None else parse_labels(
            df[label].to_numpy(dtype=object), f"dataset.label_column={fmt_value(self.label_column)}",
            self.unlabeled_value)
        trusted = None if clean is None else parse_labels(
            df[clean].to_numpy(dtype=object), f"dataset.clean_column={fmt_value(self.clean_column)}",
            self.unlabeled_value)
        hint = (f"rows whose label is empty or {fmt_value(self.unlabeled_value)} are unlabelled; see "
                "dataset.unlabeled_value") if self.unlabeled_value is not None else "empty cells are unlabelled"
        return make_own_dataset("csv", X, given=given, clean=trusted, source=self._source(), hint=hint)

    def _features(self, df, features: list) -> np.ndarray:
        import pandas as pd

        for c in features:
            col = df[c]
            if not pd.api.types.is_numeric_dtype(col):
                num = pd.to_numeric(col, errors="coerce")
                bad = np.flatnonzero(num.isna().to_numpy() & col.notna().to_numpy())
                first = f" (row {int(bad[0])}: {col.iloc[int(bad[0])]!r})" if bad.size else ""
                how = ("dataset.feature_columns=[...]" if self.feature_columns is None
                       else f"dataset.feature_columns={fmt_value(list(self.feature_columns))}")
                raise UserError(f"{self._source()}: column {c!r} holds non-numeric values{first}; features "
                                f"must be numbers (choose the feature columns with {how})")
        return df[features].to_numpy(dtype=np.float64)


def _is_number(s: Any) -> bool:
    try:
        float(str(s))
        return True
    except ValueError:
        return False
