import numpy as np
import pytest
from sklearn.model_selection import train_test_split

from lgcexp.errors import UserError
from lgcexp.labels import flip_labels, sample_and_corrupt, sample_labeled
from lgcexp.noise import noisy_count


def test_sampling_matches_sklearn_allocation_isolet_like():
    # ISOLET class sizes: 300 each except F (5) = 298 and M (12) = 299
    counts = np.full(26, 300)
    counts[5], counts[12] = 298, 299
    y = np.repeat(np.arange(26), counts)
    for seed in (0, 7):
        idx = sample_labeled(y, 1040, seed)
        assert idx.size == 1040 and np.all(np.diff(idx) > 0)
        assert np.all(np.bincount(y[idx], minlength=26) == 40)
        ref, _ = train_test_split(np.arange(y.size), test_size=1 - 1040 / y.size, stratify=y, random_state=seed)
        assert np.array_equal(np.sort(ref), idx)  # the authors' call selects the same points


def test_sampling_mnist_counts():
    counts = [6903, 7877, 6990, 7141, 6824, 6313, 6876, 7293, 6825, 6958]
    y = np.repeat(np.arange(10), counts)
    idx = sample_labeled(y, 100, 3)
    got = np.bincount(y[idx], minlength=10)
    assert got[1] == 11 and got[5] == 9 and np.all(np.delete(got, [1, 5]) == 10)


@pytest.mark.parametrize("l,rate,m", [(1040, 0.2, 208), (1040, 0.4, 416), (1040, 0.6, 624), (100, 0.15, 15),
                                      (100, 0.3, 30), (100, 0.0, 0)])
def test_noise_exact_count(l, rate, m):
    assert noisy_count(l, rate) == m
    rng = np.random.default_rng(0)
    y = rng.integers(0, 10, size=l)
    obs, flipped = flip_labels(y, 10, rate, seed=5)
    assert flipped.sum() == m
    assert np.all(obs[flipped] != y[flipped])  # never flipped to the same class
    assert np.all(obs[~flipped] == y[~flipped])


def test_noise_targets_uniform_over_other_classes():
    y = np.zeros(30000, dtype=np.int64)
    obs, flipped = flip_labels(y, 4, 0.9, seed=1)
    freq = np.bincount(obs[flipped], minlength=4) / flipped.sum()
    assert freq[0] == 0
    assert np.allclose(freq[1:], 1 / 3, atol=0.01)


def test_seed_determinism_and_dependence():
    y = np.repeat(np.arange(5), 40)
    a = sample_and_corrupt(y, 50, 0.4, seed=2)
    b = sample_and_corrupt(y, 50, 0.4, seed=2)
    c = sample_and_corrupt(y, 50, 0.4, seed=3)
    assert np.array_equal(a.labeled, b.labeled) and np.array_equal(a.y_observed, b.y_observed)
    assert not (np.array_equal(a.labeled, c.labeled) and np.array_equal(a.y_observed, c.y_observed))
    assert np.array_equal(a.y_clean, y[a.labeled])


@pytest.mark.parametrize("n_labels", [3, 200, 500])
def test_bad_label_count(n_labels):
    y = np.repeat(np.arange(5), 40)
    with pytest.raises(UserError, match=f"labels.n={n_labels}"):
        sample_labeled(y, n_labels, 0)


@pytest.mark.parametrize("rate", [-0.1, 1.0, 1.5])
def test_bad_noise_rate(rate):
    with pytest.raises(UserError, match="noise.rate"):
        flip_labels(np.zeros(10, dtype=np.int64), 3, rate, 0)
