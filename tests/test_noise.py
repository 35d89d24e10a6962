"""Noise models: exact counts, determinism, the authors' draw (noise=reference), transition matrices,
configs and bad values."""
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import make_cfg

from lgcexp.config import plan
from lgcexp.errors import UserError
from lgcexp.noise import NOISE_MODELS, NoiseModel, make_noise, noisy_count
from lgcexp.noise.matrix import allocate_counts
from lgcexp.params import constructor_defaults

CONF_NOISE = Path(__file__).resolve().parents[1] / "conf" / "noise"
RATE_MODELS = ("uniform", "pairwise", "reference")
SEEDS = (0, 1, 7, 123)


def labels(l: int, c: int, seed: int = 0) -> np.ndarray:
    """Labels of l points over c classes, every class present, in a shuffled order."""
    y = np.arange(l) % c
    return np.random.default_rng(seed).permutation(y).astype(np.int64)


# ---------------------------------------------------------------------------------------------- configs

@pytest.mark.parametrize("name", NOISE_MODELS.names())
def test_yaml_defaults_equal_constructor_defaults(name):
    cfg = yaml.safe_load((CONF_NOISE / f"{name}.yaml").read_text())
    cls = NOISE_MODELS.get(name)
    assert cfg.pop("name") == cls.name == name
    # a data set's suggested rate is read through an interpolation; its fallback is the constructor default
    cfg = {k: (0.0 if isinstance(v, str) and v.startswith("${oc.select:suggested.rate") else v) for k, v in cfg.items()}
    assert cfg == constructor_defaults(cls)
    assert set(cls._parameter_constraints) == set(constructor_defaults(cls))
    assert cls.__doc__ and cls.transition_matrix is not NoiseModel.transition_matrix


def test_every_yaml_is_registered():
    assert {p.stem for p in CONF_NOISE.glob("*.yaml")} == set(NOISE_MODELS.names())


@pytest.mark.parametrize("name", ["none", "uniform", "pairwise", "reference"])
def test_selectable_on_the_command_line(name):
    p = plan(make_cfg("dataset=isolet", f"noise={name}"))
    assert p.noise.name == name and p.noise.rate_ == 0.0
    if name != "none":
        p = plan(make_cfg("dataset=isolet", f"noise={name}", "noise.rate=0.4"))
        assert p.noise.rate == 0.4


def test_matrix_selectable_on_the_command_line(tmp_path):
    p = plan(make_cfg("dataset=isolet", "noise=matrix", "noise.matrix=[[0.8,0.2],[0.1,0.9]]"))
    assert np.allclose(p.noise.transition_matrix(2), [[0.8, 0.2], [0.1, 0.9]])
    np.save(tmp_path / "T.npy", np.eye(3))
    p = plan(make_cfg("dataset=isolet", "noise=matrix", f"noise.path={tmp_path}/T.npy"))
    assert np.array_equal(p.noise.transition_matrix(3), np.eye(3))


# ---------------------------------------------------------------------------------- exact counts, seeds

@pytest.mark.parametrize("name", RATE_MODELS)
@pytest.mark.parametrize("l,c,rate", [(30, 4, 0.2), (30, 4, 0.6), (100, 10, 0.15), (100, 10, 0.3), (1040, 26, 0.4),
                                      (57, 3, 0.0), (12, 2, 0.9)])
def test_exact_count(name, l, c, rate):
    y = labels(l, c)
    model = make_noise(name, rate=rate)
    for seed in SEEDS:
        obs, flipped = model.corrupt(y, c, seed)
        assert flipped.sum() == noisy_count(l, rate)
        assert np.all(obs[flipped] != y[flipped]) and np.all(obs[~flipped] == y[~flipped])
        assert np.all((obs >= 0) & (obs < c))
        counts = model.counts_
        assert counts.sum() == l and np.trace(counts) == l - flipped.sum()
        assert np.array_equal(counts.sum(axis=1), np.bincount(y, minlength=c))


@pytest.mark.parametrize("name,params", [("none", {}), ("uniform", {"rate": 0.4}), ("pairwise", {"rate": 0.4}),
                                         ("reference", {"rate": 0.4}),
                                         ("matrix", {"matrix": [[0.5, 0.3, 0.2], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]]})])
def test_same_seed_same_flips(name, params):
    y = labels(60, 3)
    a = make_noise(name, **params).corrupt(y, 3, 5)
    b = make_noise(name, **params).corrupt(y, 3, 5)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    if name != "none":
        others = [make_noise(name, **params).corrupt(y, 3, s)[0] for s in (6, 7, 8)]
        assert any(not np.array_equal(a[0], o) for o in others)


def test_none_changes_nothing():
    y = labels(50, 5)
    obs, flipped = make_noise("none").corrupt(y, 5, 3)
    assert np.array_equal(obs, y) and not flipped.any()
    assert np.array_equal(make_noise("none").transition_matrix(5), np.eye(5))


# ------------------------------------------------------------------------------------------- pairwise

def test_pairwise_default_moves_to_the_next_class():
    y = labels(200, 5)
    obs, flipped = make_noise("pairwise", rate=0.5).corrupt(y, 5, 2)
    assert flipped.sum() == 100
    assert np.array_equal(obs[flipped], (y[flipped] + 1) % 5)


def test_pairwise_permutation():
    perm = [2, 0, 3, 1]
    y = labels(120, 4)
    model = make_noise("pairwise", rate=0.3, permutation=perm)
    for seed in SEEDS:
        obs, flipped = model.corrupt(y, 4, seed)
        assert flipped.sum() == 36
        assert np.array_equal(obs[flipped], np.asarray(perm)[y[flipped]])
        assert np.all(model.counts_[model.transition_matrix(4) == 0] == 0)  # only the allowed pairs
    T = model.transition_matrix(4)
    assert np.allclose(T.sum(1), 1) and T[0, 2] == pytest.approx(0.3) and T[0, 0] == pytest.approx(0.7)


def test_pairwise_picks_are_uniform_over_labelled_points():
    y = labels(40, 4)
    hits = np.zeros(40)
    for seed in range(2000):
        hits += make_noise("pairwise", rate=0.25).corrupt(y, 4, seed)[1]
    assert np.allclose(hits / 2000, 0.25, atol=0.05)


# --------------------------------------------------------------------------------------------- matrix

def test_largest_remainder_allocation_by_hand():
    rng = np.random.default_rng(0)
    # n = 8: 5.6, 0.8, 0.8, 0.8 -> floors 5,0,0,0; 3 units left go to the three 0.8 remainders
    T = np.array([[0.7, 0.1, 0.1, 0.1], [0, 1, 0, 0], [0.5, 0.5, 0, 0], [0.25, 0.25, 0.25, 0.25]])
    C = allocate_counts(np.array([8, 7, 8, 7]), T, rng)
    assert C[0].tolist() == [5, 1, 1, 1]
    assert C[1].tolist() == [0, 7, 0, 0]
    assert C[2].tolist() == [4, 4, 0, 0]
    # n = 7 at 1/4 each: floors 1,1,1,1, three units for four equal remainders: the diagonal gets one
    assert C[3].sum() == 7 and C[3, 3] == 2 and sorted(C[3].tolist()) == [1, 2, 2, 2]
    # n = 3 on [0.5, 0.5]: a tie between keeping and flipping is kept
    assert allocate_counts(np.array([3, 3]), np.full((2, 2), 0.5), rng).tolist() == [[2, 1], [1, 2]]


def test_matrix_counts_exact_and_fixed_by_T():
    T = [[0.6, 0.3, 0.1], [0.05, 0.9, 0.05], [0.2, 0.2, 0.6]]
    y = labels(90, 3)  # 30 per class
    want = [[18, 9, 3], [2, 27, 1], [6, 6, 18]]  # 30 * T, the 1.5s rounded by largest remainder
    model = make_noise("matrix", matrix=T)
    flips = set()
    for seed in SEEDS:
        obs, flipped = model.corrupt(y, 3, seed)
        C = model.counts_
        assert C.sum(1).tolist() == [30, 30, 30]
        assert C[0].tolist() == want[0] and C[2].tolist() == want[2]
        assert C[1, 1] == 27 and sorted(C[1, [0, 2]].tolist()) == [1, 2]  # 1.5 / 1.5: a seeded tie-break
        assert flipped.sum() == 90 - 18 - 27 - 18
        assert model.rate_ == pytest.approx(27 / 90)
        flips.add(tuple(np.flatnonzero(flipped)))
    assert len(flips) == len(SEEDS)  # the seed picks which points


def test_matrix_from_files(tmp_path):
    T = np.array([[0.7, 0.3], [0.25, 0.75]])
    np.save(tmp_path / "T.npy", T)
    np.savetxt(tmp_path / "T.csv", T, delimiter=",")
    y = labels(40, 2)
    inline = make_noise("matrix", matrix=T.tolist()).corrupt(y, 2, 3)[0]
    for f in ("T.npy", "T.csv"):
        model = make_noise("matrix", path=str(tmp_path / f))
        assert np.array_equal(model.corrupt(y, 2, 3)[0], inline)
        assert np.allclose(model.transition_matrix(2), T)


def test_matrix_rows_renormalised_within_tolerance():
    model = make_noise("matrix", matrix=[[0.5000004, 0.5], [0.0, 1.0]])
    assert np.allclose(model.transition_matrix(2).sum(1), 1.0, atol=1e-15)


# ------------------------------------------------------------------------------------------ reference

def authors_draw(y: np.ndarray, c: int, p: float, seed: int) -> np.ndarray:
    """The authors' apply_noise (deterministic=False), written out on numpy's global generator."""
    state = np.random.get_state()
    try:
        l = len(y)
        Y = np.eye(c)[y]                                   # one-hot beliefs of the labelled rows
        np.random.seed(seed)
        vec = np.random.RandomState(seed).permutation(l)
        old_A = np.array([[(1 - p) if i == j else p / (c - 1) for j in range(c)] for i in range(c)])
        num_clean = int(np.round(l * sum([old_A[i, i] for i in range(c)]) / c))
        num_noisy = l - num_clean
        perm = np.random.permutation(l)[0:num_noisy]
        A = np.zeros((c, c))
        for i in range(c):
            A[i, i] = int(np.sum(Y[:, i]))
        for my_id in perm:
            j = np.argmax(Y[my_id, :])
            A[j, j] -= 1
            new_j = j
            while new_j == j:
                new_j = np.random.choice(c)
            A[j, new_j] += 1
        flat = list(y)
        cursor = [0] * c
        for i in range(l):
            k = y[vec[i]]
            while A[k, cursor[k]] == 0:
                cursor[k] += 1
            flat[vec[i]] = cursor[k]
            A[k, cursor[k]] -= 1
        return np.array(flat)
    finally:
        np.random.set_state(state)


@pytest.mark.parametrize("rate", [0.2, 0.4, 0.6])
def test_reference_is_the_authors_draw(rate):
    for data_seed in (0, 1):
        y = labels(30, 4, data_seed)
        for seed in range(8):
            obs, flipped = make_noise("reference", rate=rate).corrupt(y, 4, seed)
            assert np.array_equal(obs, authors_draw(y, 4, rate, seed))
            assert flipped.sum() == noisy_count(30, rate)


def test_reference_is_the_authors_draw_isolet_sized():
    y = labels(1040, 26, 3)
    for seed in (0, 19):
        obs, _ = make_noise("reference", rate=0.6).corrupt(y, 26, seed)
        assert np.array_equal(obs, authors_draw(y, 26, 0.6, seed))


def test_reference_differs_from_uniform():
    y = labels(100, 10)
    a = make_noise("reference", rate=0.3).corrupt(y, 10, 0)[0]
    b = make_noise("uniform", rate=0.3).corrupt(y, 10, 0)[0]
    assert not np.array_equal(a, b)


# -------------------------------------------------------------------------------- transition matrices

@pytest.mark.parametrize("name,params", [("none", {}), ("uniform", {"rate": 0.3}), ("pairwise", {"rate": 0.3}),
                                         ("reference", {"rate": 0.3}),
                                         ("matrix", {"matrix": [[0.5, 0.5, 0], [0, 1, 0], [0.2, 0.2, 0.6]]})])
def test_transition_matrix_is_row_stochastic(name, params):
    T = make_noise(name, **params).transition_matrix(3)
    assert T.shape == (3, 3) and np.all(T >= 0) and np.allclose(T.sum(1), 1)
    if name in ("uniform", "reference"):
        assert np.allclose(np.diag(T), 0.7) and np.allclose(T[0, 1:], 0.15)


# ----------------------------------------------------------------------------------------- bad values

@pytest.mark.parametrize("overrides,start", [
    (["noise=none", "noise.rate=0.2"], "noise.rate=0.2 is not allowed: it must be 0"),
    (["noise=none", "noise.rate=0.5"], "noise.rate=0.5 is not allowed"),
    (["noise=uniform", "noise.rate=1.0"], "noise.rate=1.0 is not allowed: it must be a number in [0, 1)"),
    (["noise=reference", "noise.rate=-0.1"], "noise.rate=-0.1 is not allowed"),
    (["noise=pairwise", "noise.rate=true"], "noise.rate=true is not allowed"),
    (["noise=pairwise", "noise.permutation=[0,1,2]"], "noise.permutation=[0,1,2] is not allowed: class 0 maps"),
    (["noise=pairwise", "noise.permutation=[1,1,0]"],
     "noise.permutation=[1,1,0] is not allowed: it must be a permutation"),
    (["noise=pairwise", "noise.permutation=[1,3]"], "noise.permutation=[1,3] is not allowed: it must be a permutation"),
    (["noise=pairwise", "noise.permutation=[1,-1]"], "noise.permutation=[1,-1] is not allowed: it must be null or"),
    (["noise=pairwise", "noise.permutation=2"], "noise.permutation=2 is not allowed"),
    (["noise=pairwise", "+noise.shift=1"], "noise.shift is not a parameter of noise=pairwise"),
    (["noise=matrix", "+noise.rate=0.2"], "noise.rate=0.2 is not allowed: noise=matrix takes no rate"),
    (["noise=matrix"], "noise=matrix needs a transition matrix: set noise.matrix="),
    (["noise=matrix", "noise.matrix=[[0.9,0.1],[0.2,0.7]]"],
     "noise.matrix=[[0.9,0.1],[0.2,0.7]] is not allowed: row 1 sums to 0.9, not 1"),
    (["noise=matrix", "noise.matrix=[[1.1,-0.1],[0,1]]"],
     "noise.matrix=[[1.1,-0.1],[0,1]] is not allowed: entry [0][1] = -0.1 is negative"),
    (["noise=matrix", "noise.matrix=[[0.5,0.5]]"], "noise.matrix=[[0.5,0.5]] is not allowed: it must be square"),
    (["noise=matrix", "noise.matrix=[[1,0],[1]]"], "noise.matrix=[[1,0],[1]] is not allowed"),
    (["noise=matrix", "noise.matrix=[[nan,1],[0,1]]"], "noise.matrix=[[nan,1],[0,1]] is not allowed"),
    (["noise=matrix", "noise.matrix=[1,0]"], "noise.matrix=[1,0] is not allowed"),
    (["noise=matrix", "noise.path=/no/such/T.npy"], "noise.path=/no/such/T.npy is not allowed: no such file"),
    (["noise=matrix", "noise.path=T.txt"], "noise.path=T.txt is not allowed: it must be a .npy or .csv"),
    (["noise=matrix", "noise.path=T.npy", "noise.matrix=[[1]]"],
     "noise.path=T.npy is not allowed: noise.matrix is set too"),
])
def test_bad_values_one_line(overrides, start):
    with pytest.raises(UserError) as e:
        plan(make_cfg(*overrides))
    msg = str(e.value)
    assert msg.startswith(start) and "\n" not in msg


def test_bad_matrix_files(tmp_path):
    (tmp_path / "bad.csv").write_text("0.5,0.5\nfoo,1\n")
    np.save(tmp_path / "neg.npy", np.array([[1.5, -0.5], [0, 1]]))
    np.save(tmp_path / "vec.npy", np.array([0.5, 0.5]))
    (tmp_path / "inf.csv").write_text("inf,0\n0,1\n")
    for f, why in [("bad.csv", "cannot read a matrix"), ("neg.npy", "entry [0][1] = -0.5 is negative"),
                   ("vec.npy", "not a 1-D array"), ("inf.csv", "entry [0][0] is inf, not a finite number")]:
        with pytest.raises(UserError) as e:
            plan(make_cfg("noise=matrix", f"noise.path={tmp_path}/{f}"))
        msg = str(e.value)
        assert msg.startswith(f"noise.path={tmp_path}/{f} is not allowed: ") and why in msg and "\n" not in msg


def test_class_count_checks_at_data_time():
    with pytest.raises(UserError, match=r"^noise.matrix=\[\[1,0\],\[0,1\]\] is not allowed for this dataset: it is "
                                        r"2 x 2 but the data have 10 classes$"):
        make_noise("matrix", matrix=[[1, 0], [0, 1]]).check_data(1797, 10)
    with pytest.raises(UserError, match=r"^noise.permutation=\[1,2,0\] is not allowed for this dataset: it has 3 "
                                        r"entries but the data have 4 classes$"):
        make_noise("pairwise", rate=0.2, permutation=[1, 2, 0]).corrupt(labels(20, 4), 4, 0)
    with pytest.raises(UserError, match=r"^noise.rate=0.2 is not allowed for this dataset: it has one class"):
        make_noise("uniform", rate=0.2).check_data(10, 1)


def test_data_check_runs_before_the_graph(tmp_path, monkeypatch):
    from lgcexp.graph import KnnGraph
    from lgcexp.pipeline import run

    def no_graph(*a, **k):
        raise AssertionError("the graph stage was reached")

    monkeypatch.setattr(KnnGraph, "build", no_graph)
    with pytest.raises(UserError, match=r"^noise.permutation=\[1,2,0\] is not allowed for this dataset"):
        run(make_cfg("noise=pairwise", "noise.permutation=[1,2,0]", tmp=tmp_path))


def test_run_records_noise_and_counts(tmp_path):
    from lgcexp.pipeline import run

    r = run(make_cfg("noise=pairwise", "noise.rate=0.3", "algo=gfhf", tmp=tmp_path))
    C = np.array(r["noise_counts"])
    assert r["noise"] == "pairwise" and r["noise_rate"] == 0.3
    assert C.shape == (10, 10) and C.sum() == 100 and C.sum() - np.trace(C) == r["n_flipped"] == 30
    true, new = (C - np.diag(np.diag(C))).nonzero()
    assert np.array_equal(new, (true + 1) % 10)  # k -> k+1 only
