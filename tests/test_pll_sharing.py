"""``pll_alphas``: one multi-shift solve per labelled set shared by every method of a sweep
(lgcexp.algorithms.propagation.cached_submatrices, the ``pll_alphas`` option)."""
import numpy as np
import pytest
from helpers import make_cfg
from test_auto import dense_P, problem

from lgcexp.algorithms import algorithm_class
from lgcexp.algorithms.auto import Auto
from lgcexp.algorithms.autod import alpha_of_x
from lgcexp.algorithms.autol import AutoL
from lgcexp.algorithms.lgc import LGC
from lgcexp.algorithms.propagation import cached_submatrices, solve_set
from lgcexp.cache import Cache
from lgcexp.config import plan, to_container
from lgcexp.errors import UserError
from lgcexp.rundir import config_hash, effective_config

GRID = [float(a) for a in alpha_of_x([2.0, 4.0, 8.0, 16.0])]
AUTOL = AutoL().alpha
SHARED = GRID + [0.9, AUTOL]


def test_solve_set_is_the_sorted_union_for_cg_only():
    assert solve_set([0.9], None) == [0.9]
    assert solve_set([0.9], [0.5, 0.9, 0.7]) == [0.5, 0.7, 0.9]
    assert solve_set([0.9], [0.5], solver="power") == [0.9]


def test_shared_set_is_solved_once_and_leaves_the_grid_bit_for_bit(tmp_path):
    """LGC's request (0.9) with the shared set solves and stores all six alphas; auto's grid and AutoL's
    alpha are then cache hits. The extra alphas are smaller than the grid's largest, which spans the Krylov
    space, so the grid's P_LL equal those of auto's own multi-shift solve bit for bit; every P_LL is the
    dense inverse's block to the tolerance."""
    g, labeled, _, _ = problem()
    own_grid, _ = cached_submatrices(g, labeled, GRID, None, dtype="float64", tol=1e-10)
    cache = Cache(tmp_path)
    (P9,), s9 = cached_submatrices(g, labeled, [0.9], cache, dtype="float64", tol=1e-10, shared_alphas=SHARED)
    assert s9["cache_hits"] == 0 and len(list(tmp_path.glob("pll-*.npz"))) == len(SHARED)
    grid, sg = cached_submatrices(g, labeled, GRID, cache, dtype="float64", tol=1e-10, shared_alphas=SHARED)
    assert sg["cache_hits"] == len(GRID)
    for a, b in zip(own_grid, grid):
        np.testing.assert_array_equal(a, b)
    (PA,), sa = cached_submatrices(g, labeled, [AUTOL], cache, dtype="float64", tol=1e-10, shared_alphas=SHARED)
    assert sa["cache_hits"] == 1
    for a, P in ((0.9, P9), (AUTOL, PA)):
        exact = (1 - a) * dense_P(g, a)[np.ix_(labeled, labeled)]
        np.testing.assert_allclose(P, exact, atol=1e-8)
    # the numbers do not depend on the cache: a cold solve without one gives the same bits
    (cold,), _ = cached_submatrices(g, labeled, [AUTOL], None, dtype="float64", tol=1e-10, shared_alphas=SHARED)
    np.testing.assert_array_equal(cold, PA)
    # without the shared set, a one-alpha request keeps its own entry (another rounding, the same matrix)
    (own,), so = cached_submatrices(g, labeled, [0.9], cache, dtype="float64", tol=1e-10)
    assert so["cache_hits"] == 0
    np.testing.assert_allclose(own, P9, atol=1e-8)


def test_a_lost_entry_of_the_set_is_solved_again_bit_for_bit(tmp_path):
    """Each entry of the set lost in turn (the rest still cached): AutoL's P_LL is the same bits, read or
    solved again, and exactly one loss makes it a miss."""
    g, labeled, _, _ = problem(seed=3)
    cache = Cache(tmp_path)
    (first,), _ = cached_submatrices(g, labeled, [AUTOL], cache, dtype="float64", tol=1e-8, shared_alphas=SHARED)
    entries = sorted(tmp_path.glob("pll-*.npz"))
    assert len(entries) == len(SHARED)
    misses = 0
    for f in entries:
        f.unlink()
        (again,), st = cached_submatrices(g, labeled, [AUTOL], cache, dtype="float64", tol=1e-8,
                                          shared_alphas=SHARED)
        misses += st["cache_hits"] == 0
        np.testing.assert_array_equal(first, again)
        assert len(list(tmp_path.glob("pll-*.npz"))) == len(SHARED) - (0 if st["cache_hits"] == 0 else 1)
        if st["cache_hits"]:  # another rate's entry: put the set back whole for the next round
            cached_submatrices(g, labeled, SHARED, cache, dtype="float64", tol=1e-8, shared_alphas=SHARED)
            assert len(list(tmp_path.glob("pll-*.npz"))) == len(SHARED)
    assert misses == 1


def test_repeated_rates_and_hit_counts(tmp_path):
    g, labeled, _, _ = problem()
    cache = Cache(tmp_path)
    Ps, st = cached_submatrices(g, labeled, [0.9, 0.9], cache, dtype="float64", tol=1e-8, shared_alphas=SHARED)
    assert st["cache_hits"] == 0 and len(Ps) == 2
    np.testing.assert_array_equal(Ps[0], Ps[1])
    Ps2, st2 = cached_submatrices(g, labeled, [0.9, AUTOL, 0.9], cache, dtype="float64", tol=1e-8,
                                  shared_alphas=SHARED)
    assert st2["cache_hits"] == 3
    np.testing.assert_array_equal(Ps2[0], Ps[0])


def test_methods_share_the_solve_through_fit(tmp_path):
    """LGC's judgement fills the set; AutoL and auto then read their P_LL from it."""
    g, labeled, y, _ = problem()
    cache = Cache(tmp_path)
    LGC().fit(g, labeled, y, 3, cache=cache, pll_alphas=SHARED)
    assert len(list(tmp_path.glob("pll-*.npz"))) == len(SHARED)
    autol = AutoL(steps=5, xla=False).fit(g, labeled, y, 3, cache=cache, pll_alphas=SHARED)
    assert autol.info_["pll_cache_hit"] is True
    auto = Auto(steps=5, search_steps=5, xla=False).fit(g, labeled, y, 3, cache=cache, pll_alphas=SHARED)
    assert auto.info_["pll_cache_hits"] == len(GRID)
    assert len(list(tmp_path.glob("pll-*.npz"))) == len(SHARED)
    assert autol._pll_alphas is None and auto._pll_alphas is None  # held during fit only


def test_propagation_alphas():
    assert LGC().propagation_alphas() == (0.9,)
    assert LGC(judge=False).propagation_alphas() == ()
    assert LGC(solver="power").propagation_alphas() == ()   # the power iteration's P_LL is not shared
    assert AutoL().propagation_alphas() == (AUTOL,)
    assert AutoL(solver="power").propagation_alphas() == ()
    assert Auto().propagation_alphas() == tuple(GRID)
    assert algorithm_class("siis")().propagation_alphas() == ()


@pytest.mark.parametrize("experiment, algos", [("table_mnist", ("lgc", "autoL", "auto")),
                                               ("table_isolet", ("lgc", "autoL", "auto", "siis"))])
def test_table_sweeps_list_exactly_their_methods_rates(experiment, algos):
    """The table experiments' ``pll_alphas`` are the rates their methods solve, bit for bit (a rate written
    with another rounding would be one more shift, solved for nobody)."""
    used = set()
    for algo in algos:
        p = plan(to_container(make_cfg(f"experiment={experiment}", f"algo={algo}", "loss=xent")))
        used |= set(p.algorithm.propagation_alphas())
        assert p.config["pll_alphas"] is not None
    assert set(p.config["pll_alphas"]) == used


def test_config_hash_counts_pll_alphas_only_where_a_method_solves_p_ll():
    base = ("dataset=digits",)
    shared = "pll_alphas=[0.5,0.9]"
    for algo, counts in (("lgc", True), ("autoL", True), ("auto", True), ("siis", False), ("gfhf", False)):
        a = to_container(make_cfg(*base, f"algo={algo}"))
        b = to_container(make_cfg(*base, f"algo={algo}", shared))
        assert (config_hash(a) != config_hash(b)) is counts, algo
        assert ("pll_alphas" in effective_config(b)) is counts
    a = to_container(make_cfg(*base, "algo=lgc", "algo.params.judge=false"))
    b = to_container(make_cfg(*base, "algo=lgc", "algo.params.judge=false", shared))
    assert config_hash(a) == config_hash(b)
    # a set: order and repeats do not count
    c = to_container(make_cfg(*base, "algo=autoL", "pll_alphas=[0.9,0.5,0.9]"))
    d = to_container(make_cfg(*base, "algo=autoL", shared))
    assert config_hash(c) == config_hash(d)


@pytest.mark.parametrize("value", ["[0.5,1.2]", "0.9", "[]", "[abc]"])
def test_bad_pll_alphas_are_refused_naming_the_key(value):
    with pytest.raises(UserError, match=r"pll_alphas=.* is not allowed: it must be null or a list of diffusion "
                                        r"rates in \(0, 1\)"):
        plan(to_container(make_cfg(f"pll_alphas={value}")))
