"""The data-source protocol: a :class:`~lgcexp.params.Configurable` whose ``load`` returns a checked
:class:`~lgcexp.data.dataset.Dataset`. ``data_dir`` and ``download`` come from the ``paths`` section (sources
that read a named file from the data directory use them; the others ignore them)."""
from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from ..params import Configurable
from .dataset import Dataset


class DataSource(Configurable):
    name: ClassVar[str] = "base"
    config_prefix: ClassVar[str] = "dataset."
    _parameter_constraints: ClassVar[dict] = {}
    #: True where the source carries no labelled set of its own (the built-in data sets: labels are always
    #: sampled); a user's file may label every row (lgcexp.config.semantic_config reads this)
    labels_always_sampled: ClassVar[bool] = False

    def load(self, *, data_dir: str | Path | None = None, download: bool = True) -> Dataset:
        self._validate_params()
        return self._load(data_dir=data_dir, download=download)

    def _load(self, *, data_dir: str | Path | None, download: bool) -> Dataset:  # pragma: no cover
        raise NotImplementedError
