"""One default data directory and one default cache directory for the CLI config and the Python API."""
import os
from pathlib import Path

import pytest
from helpers import make_cfg
from omegaconf import OmegaConf

from lgcexp import locations
from lgcexp.data import resolve_data_dir


def _paths():
    return OmegaConf.to_container(make_cfg().paths, resolve=True)


def test_defaults_agree_without_env(monkeypatch, tmp_path):
    monkeypatch.delenv(locations.DATA_DIR_ENV, raising=False)
    monkeypatch.delenv(locations.CACHE_DIR_ENV, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    paths = _paths()
    assert paths["data_dir"] == locations.DEFAULT_DATA_DIR == "~/.cache/lgcexp/data"
    assert paths["cache_dir"] == locations.DEFAULT_CACHE_DIR == "~/.cache/lgcexp/cache"
    assert resolve_data_dir(None) == Path(os.path.expanduser(paths["data_dir"])) == tmp_path / ".cache/lgcexp/data"
    assert locations.default_dir("cache") == paths["cache_dir"]


@pytest.mark.parametrize("env", ["set", "empty"])
def test_env_overrides_both(monkeypatch, tmp_path, env):
    if env == "set":  # both follow the variables
        want_data, want_cache = str(tmp_path / "d"), str(tmp_path / "c")
    else:  # set but empty: the defaults, as if unset
        want_data, want_cache = locations.DEFAULT_DATA_DIR, locations.DEFAULT_CACHE_DIR
    monkeypatch.setenv(locations.DATA_DIR_ENV, want_data if env == "set" else "")
    monkeypatch.setenv(locations.CACHE_DIR_ENV, want_cache if env == "set" else "")
    paths = _paths()
    assert paths["data_dir"] == want_data and paths["cache_dir"] == want_cache
    assert resolve_data_dir(None) == Path(os.path.expanduser(want_data))
    assert locations.default_dir("data") == want_data and locations.default_dir("cache") == want_cache


def test_yaml_reads_the_resolver():
    """The yaml holds no copy of the defaults: it names the resolver."""
    raw = OmegaConf.load(Path(__file__).resolve().parents[1] / "conf" / "paths" / "default.yaml")
    assert OmegaConf.to_container(raw)["data_dir"] == "${lgcexp.default_dir:data}"
    assert OmegaConf.to_container(raw)["cache_dir"] == "${lgcexp.default_dir:cache}"
    with pytest.raises(ValueError, match="unknown directory kind"):
        locations.default_dir("outputs")


def test_env_switch_default_and_values(monkeypatch):
    from lgcexp.locations import env_switch

    monkeypatch.delenv("LGCEXP_TEST_SWITCH", raising=False)
    assert env_switch("LGCEXP_TEST_SWITCH") and not env_switch("LGCEXP_TEST_SWITCH", default=False)
    for off in ("0", "false", "No", " OFF "):
        monkeypatch.setenv("LGCEXP_TEST_SWITCH", off)
        assert not env_switch("LGCEXP_TEST_SWITCH") and not env_switch("LGCEXP_TEST_SWITCH", default=False)
    for on in ("1", "true", "yes"):
        monkeypatch.setenv("LGCEXP_TEST_SWITCH", on)
        assert env_switch("LGCEXP_TEST_SWITCH") and env_switch("LGCEXP_TEST_SWITCH", default=False)
    monkeypatch.setenv("LGCEXP_TEST_SWITCH", "")
    assert env_switch("LGCEXP_TEST_SWITCH") and not env_switch("LGCEXP_TEST_SWITCH", default=False)
