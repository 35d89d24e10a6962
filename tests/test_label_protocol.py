"""labels.per_class, labels.sets (read and written), class_priors in a run; config hashes of runs that use
none of them are unchanged."""
import json

import numpy as np
import pytest
from helpers import make_cfg

from lgcexp.config import plan, to_container
from lgcexp.errors import UserError
from lgcexp.labels import read_label_set, sample_per_class, write_label_sets
from lgcexp.pipeline import run
from lgcexp.rundir import config_hash


def test_per_class_draws_exactly_k_of_every_class_and_is_seeded():
    y = np.repeat(np.arange(4), [10, 20, 30, 40])
    a = sample_per_class(y, 3, 7)
    assert np.array_equal(np.bincount(y[a]), [3, 3, 3, 3]) and np.all(np.diff(a) > 0)
    assert np.array_equal(a, sample_per_class(y, 3, 7)) and not np.array_equal(a, sample_per_class(y, 3, 8))
    with pytest.raises(UserError, match="labels.per_class=10 is not allowed for this dataset: class 0 has 10"):
        sample_per_class(y, 10, 0)


def test_label_sets_round_trip_and_bad_files(tmp_path):
    y = np.repeat(np.arange(3), 20)
    rows = write_label_sets(tmp_path / "s.npz", y, range(5), per_class=2)
    assert rows.shape == (5, 6)
    for s in range(5):
        assert np.array_equal(read_label_set(str(tmp_path / "s.npz"), s, 60), np.sort(sample_per_class(y, 2, s)))
    with pytest.raises(UserError, match=r"seed=5 is not allowed with labels.sets=.*5 rows"):
        read_label_set(str(tmp_path / "s.npz"), 5, 60)
    np.savez(tmp_path / "bad.npz", indices=np.array([[0, 0, 1]]))
    with pytest.raises(UserError, match="row 0 must hold distinct indices"):
        read_label_set(str(tmp_path / "bad.npz"), 0, 60)


def test_run_with_per_class_sets_and_class_priors(tmp_path):
    base = ("algo=poisson", "noise.rate=0")
    r1 = run(to_container(make_cfg(*base, "labels.per_class=2", tmp=tmp_path)))
    assert r1["n_labeled"] == 20
    write_label_sets(tmp_path / "d.npz", _digits_y(), [0, 1], per_class=2)
    r2 = run(to_container(make_cfg(*base, f"labels.sets={tmp_path}/d.npz", "seed=0", tmp=tmp_path)))
    assert r2["acc_unlabeled"] == r1["acc_unlabeled"]          # the same set, read back from the file
    r3 = run(to_container(make_cfg(*base, "labels.per_class=2", "class_priors=uniform", tmp=tmp_path)))
    assert "class_priors_error" in r3 and r3["config_hash"] != r1["config_hash"]
    # a run that uses none of the new options keeps its config hash (null options are left out)
    c = to_container(make_cfg("algo=lgc", tmp=tmp_path))
    slim = json.loads(json.dumps(c))
    del slim["class_priors"], slim["labels"]["per_class"], slim["labels"]["sets"]
    assert config_hash(c) == config_hash(slim)


def test_bad_values_name_the_key(tmp_path):
    with pytest.raises(UserError, match="labels.per_class=0 is not allowed"):
        plan(to_container(make_cfg("labels.per_class=0", tmp=tmp_path)))
    with pytest.raises(UserError, match="class_priors=foo is not allowed"):
        plan(to_container(make_cfg("class_priors=foo", tmp=tmp_path)))
    from lgcexp.config import check_against_data

    p = plan(to_container(make_cfg("class_priors=[1,2]", tmp=tmp_path)))
    with pytest.raises(UserError, match=r"class_priors=\[1,2\] is not allowed: it must be 10 non-negative"):
        check_against_data(p, 1797, 10)          # right after loading, before the graph


def _digits_y():
    from sklearn.datasets import load_digits

    return load_digits().target
