"""LGC_LVO_Auto (algo=auto) and AutoD's exact leave-one-out: multi-shift CG against dense inverses, the batched
leave-one-out model against separate ones, the alpha step against a brute-force argmin, determinism, a
one-point grid against AutoL, bad input."""
import numpy as np
import pytest
from conftest import random_graph

from lgcexp.algorithms import make_algorithm
from lgcexp.algorithms.auto import Auto
from lgcexp.algorithms.autod import AutoD, ExactLOO, alpha_of_x, loo_curves, x_grid
from lgcexp.algorithms.autol import (
    AutoL,
    LooModel,
    loo_matrix,
    optimize_weights,
)
from lgcexp.algorithms.propagation import cached_submatrices, propagation_submatrices, propagation_submatrix
from lgcexp.cache import Cache
from lgcexp.errors import UserError
from lgcexp.solvers.shifted import shifted_solve

XS = [2.0, 4.0, 8.0, 16.0]


def dense_P(g, alpha):
    return np.linalg.inv(np.eye(g.n) - alpha * g.S.toarray())


def problem(n=70, l=24, c=3, seed=0, flips=4):
    g, X = random_graph(n, 5, seed=seed)
    rng = np.random.default_rng(seed)
    labeled = np.sort(rng.choice(n, l, replace=False))
    y_all = np.digitize(X[:, 0], np.quantile(X[:, 0], np.linspace(0, 1, c + 1)[1:-1]))
    y = y_all[labeled].copy()
    f = rng.choice(l, flips, replace=False)
    y[f] = (y[f] + 1) % c
    return g, labeled, y, y_all


# ---------------------------------------------------------------- multi-shift CG


def test_multishift_solve_equals_dense_inverse_for_every_alpha():
    g, labeled, _, _ = problem()
    n, l = g.n, labeled.size
    E = np.zeros((n, l))
    E[labeled, np.arange(l)] = 1.0
    alphas = alpha_of_x([1.0, 3.0, 10.0, 100.0])
    rows, it, rel = shifted_solve(g.S, E, alphas, tol=1e-12, select=lambda M: M[labeled])
    diag, _, _ = shifted_solve(g.S, E, alphas, tol=1e-12, select=lambda M: M[labeled, np.arange(l)])
    assert rel <= 1e-12 and it > 0
    for a, R, d in zip(alphas, rows, diag):
        P = dense_P(g, a)[np.ix_(labeled, labeled)]
        np.testing.assert_allclose(R, P, rtol=0, atol=1e-9 * np.abs(P).max())
        np.testing.assert_allclose(d, np.diag(P), rtol=1e-9)


def test_fused_multishift_takes_a_column_major_block():
    """The fused kernels index rows of C-ordered blocks: a Fortran-ordered B (a transposed array, say) gives
    the same solution as its C-ordered copy (it used to diverge)."""
    from lgcexp.solvers.shifted import rcm_reordered

    pytest.importorskip("numba")
    g, labeled, _, _ = problem()
    S, _ = rcm_reordered(g.S, np.float64)
    B = np.random.default_rng(0).standard_normal((g.n, 6))
    alphas = alpha_of_x([1.0, 10.0])
    ref, it_ref, _ = shifted_solve(S, B, alphas, tol=1e-10, strategy="fused", select=lambda M: M)
    got, it, _ = shifted_solve(S, np.asfortranarray(B), alphas, tol=1e-10, strategy="fused", select=lambda M: M)
    assert it == it_ref
    for a, b in zip(ref, got):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("reorder,block", [(True, None), (False, 7)])
def test_propagation_submatrices_equal_dense_and_single_alpha(reorder, block):
    g, labeled, _, _ = problem()
    alphas = alpha_of_x(XS)
    Ps, st = propagation_submatrices(g.S, labeled, alphas, tol=1e-11, reorder=reorder, block=block)
    Ds, _ = propagation_submatrices(g.S, labeled, alphas, tol=1e-11, diagonal_only=True, scale=False)
    for a, P, D in zip(alphas, Ps, Ds):
        dense = dense_P(g, a)[np.ix_(labeled, labeled)]
        np.testing.assert_allclose(P, (1 - a) * dense, atol=1e-9)
        np.testing.assert_allclose(D, np.diag(dense), rtol=1e-8)
        single, _ = propagation_submatrix(g.S, labeled, a, tol=1e-11)
        np.testing.assert_allclose(P, single, atol=1e-9)
    assert st["residual"] <= 1e-11


def test_cached_submatrices_store_one_entry_per_alpha(tmp_path):
    g, labeled, _, _ = problem()
    cache = Cache(tmp_path)
    alphas = alpha_of_x(XS)
    P1, s1 = cached_submatrices(g, labeled, alphas, cache, dtype="float64", tol=1e-10)
    P2, s2 = cached_submatrices(g, labeled, alphas, cache, dtype="float64", tol=1e-10)
    assert s1["cache_hits"] == 0 and s2["cache_hits"] == len(XS)
    for a, b in zip(P1, P2):
        np.testing.assert_array_equal(a, b)
    assert len(list(tmp_path.glob("pll-*.npz"))) == len(XS)
    # another set of shifts rounds otherwise (its largest alpha spans the Krylov space): its own entries
    P4, s4 = cached_submatrices(g, labeled, alphas[1:3], cache, dtype="float64", tol=1e-10)
    assert s4["cache_hits"] == 0
    for a, b in zip(P1[1:3], P4):
        np.testing.assert_allclose(a, b, atol=1e-9)
    # a one-alpha request (AutoL) is solved by plain CG, which differs in round-off: its own entry, equal to
    # multi-shift CG's to the tolerance
    P3, s3 = cached_submatrices(g, labeled, [alphas[2]], cache, dtype="float64", tol=1e-10)
    assert s3["cache_hits"] == 0 and len(list(tmp_path.glob("pll-*.npz"))) == len(XS) + 3
    np.testing.assert_allclose(P3[0], P1[2], atol=1e-9)


def test_cached_submatrices_do_not_depend_on_what_the_cache_holds(tmp_path):
    """A request whose alphas are partly cached computes the rest by the same path as a cold request (not
    one alpha by plain CG), so the numbers are those of a cold cache bit for bit."""
    g, labeled, _, _ = problem()
    alphas = alpha_of_x(XS)
    cold, _ = cached_submatrices(g, labeled, alphas, None, dtype="float64", tol=1e-8)
    cache = Cache(tmp_path)
    cached_submatrices(g, labeled, alphas, cache, dtype="float64", tol=1e-8)
    victim = sorted(tmp_path.glob("pll-*.npz"))[0]
    victim.unlink()                                              # one entry lost (or found corrupt)
    warm, st = cached_submatrices(g, labeled, alphas, cache, dtype="float64", tol=1e-8)
    assert st["cache_hits"] == len(XS) - 1
    for a, b in zip(cold, warm):
        np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------- batched leave-one-out model


def test_batched_model_runs_independent_optimisations():
    g, labeled, y, _ = problem()
    alphas = alpha_of_x(XS[:3])
    As = [loo_matrix((1 - a) * dense_P(g, a)[np.ix_(labeled, labeled)])[0] for a in alphas]
    batched = LooModel(np.stack(As), y, 3, dtype="float64")
    om_b, st_b = optimize_weights(batched, steps=60, lr=0.1, xla=False, chunk=25)
    assert om_b.shape == (3, labeled.size)
    for k, A in enumerate(As):
        single = LooModel(A, y, 3, dtype="float64")
        om, st = optimize_weights(single, steps=60, lr=0.1, xla=False, chunk=25)
        np.testing.assert_allclose(om_b[k], om, rtol=1e-9, atol=1e-9)
        assert st_b["losses_final"][k] == pytest.approx(st["loss_final"], rel=1e-9)
        np.testing.assert_allclose(batched.predict(om_b)[k], single.predict(om), atol=1e-12)


# ---------------------------------------------------------------- the algorithm


def fit_auto(g, labeled, y, **kw):
    params = dict(x_grid=XS, steps=200, search_steps=200, dtype="float64", xla=False, tol=1e-10)
    params.update(kw)
    return Auto(**params).fit(g, labeled, y, 3)


def test_alpha_step_is_the_brute_force_argmin_over_the_grid():
    g, labeled, y, _ = problem(seed=1)
    m = fit_auto(g, labeled, y)
    losses, omegas = [], []
    for x in XS:  # AutoL's optimisation, one alpha at a time, on dense P_LL
        a = float(alpha_of_x(x))
        A, _ = loo_matrix((1 - a) * dense_P(g, a)[np.ix_(labeled, labeled)])
        model = LooModel(A, y, 3, dtype="float64")
        om, st = optimize_weights(model, steps=200, lr=0.7, xla=False)
        losses.append(st["loss_final"])
        omegas.append(om)
    best = int(np.argmin(losses))
    assert m.x_ == XS[best] and m.alpha_ == pytest.approx(float(alpha_of_x(XS[best])))
    np.testing.assert_allclose(m.grid_["loss"], losses, rtol=1e-6)
    np.testing.assert_allclose(m.omega_, omegas[best], rtol=1e-6, atol=1e-6)
    assert m.info_["grid_loss"] == pytest.approx(losses, rel=1e-6)
    assert m.info_["n_dropped"] == int((omegas[best] <= 0).sum()) == int(m.dropped_.sum())
    for attr in ("omega_", "corrected_", "dropped_", "suspicion_", "lgc_labeled_pred_", "labeled_pred_"):
        assert getattr(m, attr).shape[0] == labeled.size


def test_one_point_grid_is_autol_at_that_alpha_with_its_readout():
    g, labeled, y, _ = problem(seed=2)
    mu = 0.25
    alpha = 1 / (1 + mu)
    x = float(-1 / np.log2(alpha))
    auto = fit_auto(g, labeled, y, x_grid=[x], readout="soft")
    autol = AutoL(mu=mu, steps=200, dtype="float64", xla=False, tol=1e-10, lgc_alpha=alpha).fit(g, labeled, y, 3)
    np.testing.assert_allclose(auto.omega_, autol.omega_, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(auto.scores_, autol.scores_, rtol=1e-6, atol=1e-8)
    np.testing.assert_array_equal(auto.labeled_pred_, autol.labeled_pred_)


def test_final_weights_are_a_fresh_autol_run_at_the_chosen_alpha(monkeypatch):
    """The search's run at alpha* goes on to `steps` steps (4 x 100 search steps, then 200 more, not 300
    again): its weights are those of one optimize_weights call from omega = 1 at that alpha, bit for bit
    (float32, XLA-compiled, as in the tables)."""
    from lgcexp.algorithms import autol

    g, labeled, y, _ = problem()
    ran = []
    advance = autol._AdamRun.advance

    def counting(run, steps, progress):
        ran.append(steps - run.done)
        return advance(run, steps, progress)

    monkeypatch.setattr(autol._AdamRun, "advance", counting)
    algo = Auto(x_grid=XS, steps=300, search_steps=100, chunk=50, tol=1e-10).fit(g, labeled, y, 3)
    assert ran == [100] * len(XS) + [200]
    P = (1 - algo.alpha_) * dense_P(g, algo.alpha_)[np.ix_(labeled, labeled)]
    # the algorithm's own P_LL (CG to 1e-10) rather than the dense one: the same A as the fit used
    A, iso = loo_matrix(algo._P)
    assert np.allclose(algo._P, P, atol=1e-6)
    fresh, _ = optimize_weights(LooModel(A, y, 3, loss="xent", row_weight=(~iso).astype(float)), steps=300, chunk=50)
    assert np.array_equal(algo.omega_, fresh)
    assert algo.info_["search_steps"] == 100 and len(algo.info_["grid_loss"]) == len(XS)


def test_kept_readout_uses_observed_labels_of_kept_points():
    g, labeled, y, _ = problem(seed=3)
    m = fit_auto(g, labeled, y)
    from lgcexp.algorithms.lgc import lgc_propagate

    B = np.eye(3)[y]
    Y = np.zeros((g.n, 3))
    Y[labeled] = np.where(m.dropped_[:, None], m.corrected_, B)
    F, _ = lgc_propagate(g.S, Y, m.alpha_, degree=g.degree)  # the same solve (argmax-certified stop)
    np.testing.assert_allclose(m.scores_, F, atol=1e-8)


def test_deterministic():
    g, labeled, y, _ = problem(seed=4)
    a, b = fit_auto(g, labeled, y), fit_auto(g, labeled, y)
    np.testing.assert_array_equal(a.omega_, b.omega_)
    np.testing.assert_array_equal(a.scores_, b.scores_)
    assert a.x_ == b.x_


def test_toy_where_the_local_alpha_is_right():
    """A path of 60 nodes, class 0 on the first half and 1 on the second, a label every 5 nodes. With a small
    alpha a label's leave-one-out vote comes from its two nearest labelled neighbours, which (but at the
    boundary) share its class; with alpha near 1 the votes flatten towards the global mix of the chain. So the
    LOO loss at the learnt weights is lower at x = 1 than at x = 64, and auto picks x = 1."""
    import scipy.sparse as sp

    from lgcexp.graph import Graph

    n = 60
    W = sp.diags([np.ones(n - 1), np.ones(n - 1)], [-1, 1], shape=(n, n)).tocsr()
    g = Graph(W=W, sigma=1.0, key="path60")
    labeled = np.arange(0, n, 5)
    y = (labeled >= 30).astype(int)
    m = Auto(x_grid=[1.0, 64.0], steps=300, dtype="float64", xla=False, tol=1e-10).fit(g, labeled, y, 2)
    assert m.grid_["loss"][0] < m.grid_["loss"][1]
    assert m.x_ == 1.0
    assert (m.predict()[:25] == 0).all() and (m.predict()[35:] == 1).all()


@pytest.mark.parametrize("params,msg", [
    ({"x_grid": [0.5, 2.0]}, "algo.params.x_grid=[0.5,2.0] is not allowed"),
    ({"x_grid": []}, "algo.params.x_grid=[] is not allowed"),
    ({"readout": "hard"}, "algo.params.readout=hard is not allowed"),
    ({"steps": 0}, "algo.params.steps=0 is not allowed"),
    ({"search_steps": 1.5}, "algo.params.search_steps=1.5 is not allowed"),
    ({"xgrid": [2.0]}, "algo.params.xgrid is not a parameter of algo=auto"),
])
def test_bad_values_are_refused_in_one_line(params, msg):
    with pytest.raises(UserError) as e:
        make_algorithm("auto", params)
    assert msg in str(e.value) and "\n" not in str(e.value)


def test_auto_ignores_the_top_level_loss_option():
    assert make_algorithm("auto", {}, loss="mse").loss == "xent"


# ---------------------------------------------------------------- AutoD's exact leave-one-out


def test_exact_loo_equals_dense_curves_and_autod_uses_it():
    g, labeled, y, _ = problem(seed=5)
    Y_L = np.eye(3)[y]
    xs = x_grid(1.0, 20.0, 1.0)
    ex = ExactLOO(g.S, labeled, Y_L, alpha_of_x(xs), tol=1e-11)
    for a in alpha_of_x(xs)[[0, 7, 19]]:
        P = dense_P(g, a)[np.ix_(labeled, labeled)]
        H = P @ Y_L - np.diag(P)[:, None] * Y_L
        np.testing.assert_allclose(ex.H_raw([a])[0], H, atol=1e-8)
        np.testing.assert_allclose(ex.H_raw([a], remove_diag=False)[0], P @ Y_L, atol=1e-8)
    with pytest.raises(ValueError):
        ex.H_raw([0.123])
    m = AutoD(loo="exact", x_max=20.0, loo_tol=1e-11).fit(g, labeled, y, 3)
    assert m.required_eigenpairs() == 0 and m.info_["loo"] == "exact"
    curves = loo_curves(ex, xs)
    best = np.flatnonzero(curves["loo_acc"] >= curves["loo_acc"].max() - 1e-12)
    assert m.x_ == xs[best[np.argmin(curves["ce"][best])]]


def test_exact_loo_refuses_gradient_search():
    with pytest.raises(UserError) as e:
        make_algorithm("autoD", {"loo": "exact", "search": "gradient"})
    assert "algo.params.search=gradient is not allowed with algo.params.loo=exact" in str(e.value)


@pytest.mark.parametrize("dtype,tol,atol", [("float64", 1e-11, 1e-9), ("float32", 1e-6, 2e-6)])
def test_multishift_on_the_fused_kernels_equals_the_numpy_recursion(monkeypatch, dtype, tol, atol):
    """Large graphs (MNIST) run multi-shift CG's base recursion on the fused kernels: the numpy recursion's
    P_LL to round-off, the dense inverse's to the tolerance, at every alpha, whole blocks and diagonals."""
    pytest.importorskip("numba")
    from lgcexp.algorithms.propagation import pll_path
    from lgcexp.solvers import shifted

    g, labeled, _, _ = problem()
    alphas = alpha_of_x(XS)
    plain, st_plain = propagation_submatrices(g.S, labeled, alphas, tol=tol, dtype=dtype)
    monkeypatch.setattr(shifted, "FUSED_MIN_ENTRIES", 1)
    assert pll_path(g.S, labeled.size) == "fused"
    fused, st = propagation_submatrices(g.S, labeled, alphas, tol=tol, dtype=dtype)
    diag, _ = propagation_submatrices(g.S, labeled, alphas, tol=tol, dtype=dtype, diagonal_only=True, scale=False)
    assert st["path"] == "multishift-fused" and st_plain["path"] == "multishift-cg" and st["residual"] <= tol
    assert abs(st["iterations"] - st_plain["iterations"]) <= 1
    for a, P, Q, D in zip(alphas, fused, plain, diag):
        dense = dense_P(g, a)[np.ix_(labeled, labeled)]
        np.testing.assert_allclose(P, (1 - a) * dense, atol=atol * dense.max(), rtol=0)
        np.testing.assert_allclose(P, Q, atol=atol * dense.max(), rtol=0)
        np.testing.assert_allclose(D, np.diag(dense), atol=atol * dense.max(), rtol=0)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("fused", [False, True])
def test_shifted_updates_in_one_pass_give_numpy_s_bits(monkeypatch, dtype, fused):
    """Multi-shift CG's shifted updates by lgcexp.solvers.fused.shifted_updates (large labelled sets, e.g. ISOLET's)
    give numpy's P_LL bit for bit, on the numpy and on the fused base recursion; diagonals keep numpy."""
    pytest.importorskip("numba")
    from lgcexp.solvers import fused as passes
    from lgcexp.solvers import shifted
    from lgcexp.solvers.cg import numba_passes

    g, labeled, _, _ = problem()
    alphas = alpha_of_x(XS)
    if fused:
        monkeypatch.setattr(shifted, "FUSED_MIN_ENTRIES", 1)
    calls = []
    monkeypatch.setattr(passes, "shifted_updates", lambda *a, f=passes.shifted_updates: (calls.append(1), f(*a)))
    monkeypatch.setattr(shifted, "SHIFTED_KERNEL_MIN_ENTRIES", 1 << 62)
    plain, _ = propagation_submatrices(g.S, labeled, alphas, tol=1e-8, dtype=dtype)
    assert not calls
    monkeypatch.setattr(shifted, "SHIFTED_KERNEL_MIN_ENTRIES", 1)
    one_pass, _ = propagation_submatrices(g.S, labeled, alphas, tol=1e-8, dtype=dtype)
    assert calls  # the kernel ran
    for a, b in zip(plain, one_pass):
        np.testing.assert_array_equal(a, b)
    monkeypatch.setenv("LGCEXP_FUSED", "0")
    assert numba_passes(10 ** 9, shifted.SHIFTED_KERNEL_MIN_ENTRIES) is None
