"""Compose lgcexp configs in-process (no subprocess) for end-to-end tests."""
from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir

CONF = str(Path(__file__).resolve().parents[1] / "conf")


def make_cfg(*overrides: str, tmp: Path | None = None):
    extra = []
    if tmp is not None:
        extra = [f"paths.cache_dir={tmp}/cache", f"paths.output_dir={tmp}/out"]
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return compose(config_name="config", overrides=[*overrides, *extra])
