"""LGC_LVO_AutoD: spectral leave-one-out quantities against dense inverses, grid choice against brute force,
gradient search against the grid, bad input, plotting, and a pipeline run."""
import json

import numpy as np
import pytest
from conftest import random_graph
from threadpoolctl import threadpool_limits

from lgcexp.algorithms import make_algorithm
from lgcexp.algorithms.autod import (
    AutoD,
    SpectralLOO,
    alpha_of_x,
    loo_curves,
    loo_losses,
    normalize_rows,
    select_index,
    spectral_scores,
    x_grid,
    x_of_alpha,
)
from lgcexp.algorithms.lgc import LGC
from lgcexp.errors import UserError
from lgcexp.spectral import Eigenpairs, pair_residuals


def full_eigenpairs(g) -> Eigenpairs:
    """All n eigenpairs by dense eigh (p = n: the spectral P is exact)."""
    L = np.eye(g.n) - g.S.toarray()
    lam, U = np.linalg.eigh(0.5 * (L + L.T))
    pr = pair_residuals(g.S, lam, U)
    return Eigenpairs(lam, U, float(pr.max()), pr, solver="dense")


def labelled_problem(n=60, n_classes=3, n_labels=15, seed=0, noise=0):
    g, X = random_graph(n, 5, seed=seed)
    rng = np.random.default_rng(seed)
    labeled = np.sort(rng.choice(n, n_labels, replace=False))
    # labels from a smooth function of the coordinates, so propagation means something
    y_all = np.digitize(X[:, 0], np.quantile(X[:, 0], np.linspace(0, 1, n_classes + 1)[1:-1]))
    y = y_all[labeled].copy()
    if noise:
        flip = rng.choice(n_labels, noise, replace=False)
        y[flip] = (y[flip] + 1) % n_classes
    return g, labeled, y, y_all


def brute_force_curves(P_of_alpha, labeled, y, n_classes, xs, remove_diag, eps=1e-7, smoothing=0.01):
    """Losses/accuracy per x from an explicit propagation matrix (no spectral shortcuts)."""
    Y_L = np.eye(n_classes)[y]
    rows = {k: [] for k in ("mae", "mse", "ce", "loo_acc")}
    for x in xs:
        P = P_of_alpha(2.0 ** (-1.0 / x))
        P_LL = P[np.ix_(labeled, labeled)]
        if remove_diag:
            P_LL = P_LL - np.diag(np.diag(P_LL))
        H = np.maximum(P_LL @ Y_L, 0) + eps
        Q = H / H.sum(1, keepdims=True)
        rows["mae"].append(np.mean(np.abs(Q - Y_L).sum(1)))
        rows["mse"].append(np.mean(((Q - Y_L) ** 2).sum(1)))
        rows["ce"].append(-np.mean(np.log((1 - smoothing) * Q[np.arange(len(y)), y] + smoothing / n_classes)))
        rows["loo_acc"].append(np.mean(Q.argmax(1) == y))
    return {k: np.array(v) for k, v in rows.items()}


def brute_best(curves, select, loss="ce"):
    """Brute-force selection written independently: sort keys explicitly."""
    n = len(curves["loo_acc"])
    if select == "acc":
        key = [(-curves["loo_acc"][i], curves[loss][i], i) for i in range(n)]
    else:
        key = [(curves[select][i], i) for i in range(n)]
    return min(key)[-1]


@pytest.fixture(autouse=True, scope="module")
def _single_blas_thread():
    """Small dense problems: one BLAS thread (busy-waiting threads on a shared 2-core machine cost 50x)."""
    with threadpool_limits(1):
        yield


# ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("alpha", [0.3, 0.9, 0.99])
def test_spectral_P_LL_and_self_influence_match_dense_inverse(alpha):
    g, labeled, y, _ = labelled_problem()
    eig = full_eigenpairs(g)
    Y_L = np.eye(3)[y]
    sl = SpectralLOO(eig.values, eig.vectors[labeled], Y_L)
    P = np.linalg.inv(np.eye(g.n) - alpha * g.S.toarray())
    P_LL = P[np.ix_(labeled, labeled)]
    assert np.allclose(sl.propagated(alpha), P_LL @ Y_L, rtol=1e-9, atol=1e-9)
    assert np.allclose(sl.self_influence([alpha])[0], np.diag(P_LL), rtol=1e-9, atol=1e-9)
    # H with the diagonal removed is the leave-one-out propagation (P_LL - diag P_LL) Y_L
    H = sl.H_raw([alpha], remove_diag=True)[0]
    assert np.allclose(H, (P_LL - np.diag(np.diag(P_LL))) @ Y_L, atol=1e-9)
    assert np.allclose(sl.H_raw([alpha], remove_diag=False)[0], P_LL @ Y_L, atol=1e-9)
    # spectral scores on all rows = P[:, L] Y_L
    F = spectral_scores(eig.vectors, sl, [alpha], block=17)[0]
    assert np.allclose(F, P[:, labeled] @ Y_L, atol=1e-9)


def test_alpha_parametrisation_and_grid():
    assert alpha_of_x(1.0) == pytest.approx(0.5)
    assert np.allclose(x_of_alpha(alpha_of_x([1, 7.5, 50])), [1, 7.5, 50])
    assert np.allclose(x_grid(1, 50, 1), np.arange(1, 51))
    assert np.allclose(x_grid(1, 2, 0.25), [1, 1.25, 1.5, 1.75, 2])
    assert np.allclose(x_grid(3, 3, 1), [3])


def test_losses_are_smoothed_and_bounded():
    Y = np.eye(2)[[0, 1]]
    Q = normalize_rows(np.array([[0.0, 5.0], [0.0, -1.0]]), 1e-7)  # wrong and all-clipped rows
    out = loo_losses(Q[None], Y, 0.01)
    assert np.isfinite(out["ce"][0]) and out["ce"][0] <= -np.log(0.01 / 2) + 1e-12
    assert np.allclose(Q.sum(1), 1) and Q[1, 0] == pytest.approx(0.5)


@pytest.mark.parametrize("remove_diag", [True, False])
@pytest.mark.parametrize("select", ["acc", "mae", "mse", "ce"])
def test_grid_choice_equals_brute_force(select, remove_diag):
    g, labeled, y, _ = labelled_problem(noise=3, seed=4)
    eig = full_eigenpairs(g)
    xs = x_grid(1, 40, 1)
    sl = SpectralLOO(eig.values, eig.vectors[labeled], np.eye(3)[y])
    curves = loo_curves(sl, xs, remove_diag)
    S = g.S.toarray()
    ref = brute_force_curves(lambda a: np.linalg.inv(np.eye(g.n) - a * S), labeled, y, 3, xs, remove_diag)
    for k in ref:
        assert np.allclose(curves[k], ref[k], atol=1e-8), k
    assert select_index(curves, select, "ce") == brute_best(ref, select, "ce")


@pytest.mark.parametrize("select", ["acc", "ce"])
def test_autod_fit_grid_choice_and_final_lgc(select):
    """AutoD.fit with p < n picks the brute-force best for the truncated propagation U_p diag U_p^T, and its
    scores are LGC's at the chosen alpha."""
    g, labeled, y, _ = labelled_problem(n=60, noise=2, seed=1)
    full = full_eigenpairs(g)
    p = 25
    eig = full.head(p)
    algo = AutoD(p=p, select=select, x_min=1, x_max=30, x_step=0.5).fit(g, labeled, y, 3, eig=full)
    xs = x_grid(1, 30, 0.5)
    U, lam = eig.vectors, eig.values
    ref = brute_force_curves(lambda a: U @ np.diag(1 / (1 - a + a * lam)) @ U.T, labeled, y, 3, xs, True)
    best = brute_best(ref, select, "ce")
    assert algo.x_ == pytest.approx(xs[best])
    assert algo.alpha_ == pytest.approx(2 ** (-1 / xs[best]))
    assert algo.info_["loo_acc"] == pytest.approx(ref["loo_acc"][best])
    assert algo.info_["p_used"] == p and algo.info_["n_grid"] == xs.size
    lgc = LGC(alpha=algo.alpha_).fit(g, labeled, y, 3)
    assert np.allclose(algo.scores_, lgc.scores_, atol=1e-8)
    json.dumps(algo.info_)  # JSON-able for result.json
    # the readout on labelled rows is the leave-one-out prediction
    Q = normalize_rows(SpectralLOO(lam, U[labeled], np.eye(3)[y]).H_raw([algo.alpha_])[0], 1e-7)
    assert np.array_equal(algo.labeled_pred_, Q.argmax(1))
    assert set(algo.label_info_) == {"loo_pred", "loo_prob_observed"}


def test_gradient_search_reaches_grid_optimum():
    """On a smooth toy the Adam search on log x lands on the minimiser of a fine grid of the same loss."""
    pytest.importorskip("tensorflow")
    g, labeled, y, _ = labelled_problem(n=60, noise=3, seed=0)
    eig = full_eigenpairs(g).head(59)
    fine = x_grid(1, 60, 0.05)
    sl = SpectralLOO(eig.values, eig.vectors[labeled], np.eye(3)[y])
    curve = loo_curves(sl, fine, True)["ce"]
    i = int(np.argmin(curve))
    assert 0 < i < fine.size - 1, "toy must have an interior minimum"
    assert np.sum(np.diff(np.sign(np.diff(curve))) != 0) == 1, "toy must be unimodal"
    for x0 in (2.0, 30.0, "grid"):
        algo = AutoD(p=59, search="gradient", select="ce", x_min=1, x_max=60, x0=x0, lr=0.05, steps=300)
        algo.fit(g, labeled, y, 3, eig=eig)
        assert algo.x_ == pytest.approx(fine[i], abs=0.05)
        assert algo.info_["gradient_loss"] <= curve[i] + 1e-9
        assert algo.alpha_ == pytest.approx(2 ** (-1 / algo.x_))
        assert algo.info_["gradient_x0"] == (x0 if x0 != "grid" else pytest.approx(round(fine[i])))


# ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "params, needle",
    [
        ({"select": "f1"}, "algo.params.select=f1"),
        ({"search": "bayes"}, "algo.params.search=bayes"),
        ({"loss": "xent"}, "algo.params.loss=xent"),
        ({"x_min": 0.5}, "algo.params.x_min=0.5"),
        ({"x_min": 10, "x_max": 5}, "algo.params.x_max=5"),
        ({"x_step": 0}, "algo.params.x_step=0"),
        ({"p": 0}, "algo.params.p=0"),
        ({"x0": 500, "search": "gradient"}, "algo.params.x0=500"),
        ({"x0": 0.5}, "algo.params.x0=0.5"),
        ({"x0": "best", "search": "gradient"}, "algo.params.x0=best"),
        ({"remove_diag": "yes"}, "algo.params.remove_diag=yes"),
    ],
)
def test_bad_params_refused_by_make_algorithm(params, needle):
    with pytest.raises(UserError, match=needle.replace("(", r"\(").replace(".", r"\.")):
        make_algorithm("autoD", params)


def test_bad_p_for_the_data_refused_before_work(monkeypatch):
    g, labeled, y, _ = labelled_problem(n=30, n_labels=9)
    import lgcexp.spectral as spectral

    monkeypatch.setattr(spectral, "solve_eigenpairs", lambda *a, **k: pytest.fail("solver must not run"))
    with pytest.raises(UserError, match=r"algo\.params\.p=30 .*number of points \(30\)"):
        AutoD(p=30).fit(g, labeled, y, 3)
    with pytest.raises(UserError, match=r"algo\.params\.p=2 .*number of classes \(3\)"):
        AutoD(p=2).fit(g, labeled, y, 3)


def test_plot_writes_csv_and_figure(tmp_path):
    g, labeled, y, y_all = labelled_problem(n=60, seed=2)
    eig = full_eigenpairs(g).head(30)
    algo = AutoD(p=30, x_max=20).fit(g, labeled, y, 3, eig=eig)
    files = algo.plot(tmp_path, y_true=y_all, split=None)
    assert files == ["autod_curves.csv", "figure2.png"]
    assert (tmp_path / "figure2.png").stat().st_size > 10_000
    head = (tmp_path / "autod_curves.csv").read_text().splitlines()
    cols = head[0].split(",")
    assert cols[:2] == ["x", "alpha"] and "unl_acc" in cols and "ce_rd" in cols and "loo_acc_nd" in cols
    assert len(head) == 1 + 20
    data = np.loadtxt(tmp_path / "autod_curves.csv", delimiter=",", skiprows=1)
    # unlabelled accuracy column = spectral prediction on the unlabelled rows
    unl = np.setdiff1d(np.arange(g.n), labeled)
    sl = SpectralLOO(eig.values, eig.vectors[labeled], np.eye(3)[y])
    F = spectral_scores(eig.vectors, sl, [alpha_of_x(5.0)])[0]
    assert data[4, cols.index("unl_acc")] == pytest.approx(np.mean(F[unl].argmax(1) == y_all[unl]))


def test_pipeline_run_with_cached_eigenpairs(tmp_path):
    """digits through the whole pipeline; the second run takes the eigenpairs from the cache."""
    from helpers import make_cfg

    from lgcexp.pipeline import run

    cfg = make_cfg("algo=autoD", "eig.p=40", "algo.params.x_max=30", "plot=true", tmp=tmp_path)
    r1 = run(cfg, out_dir=tmp_path / "run1")
    assert r1["eig"]["cache_hit"] is False and r1["eig"]["p"] == 40
    assert r1["eig"]["residual"] < 1e-8
    assert 1 <= r1["x"] <= 30 and r1["alpha"] == pytest.approx(2 ** (-1 / r1["x"]))
    assert r1["figures"] == ["autod_curves.csv", "figure2.png"]
    assert r1["acc_unlabeled"] > 0.8
    r2 = run(cfg, out_dir=tmp_path / "run2")
    assert r2["eig"]["cache_hit"] is True
    assert r2["x"] == r1["x"] and r2["acc_unlabeled"] == r1["acc_unlabeled"]


@pytest.mark.mnist
def test_mnist_figure2(tmp_path, data_dir):
    """Experiment 3 (MNIST, 100 labels, p = 300): run with -m mnist; uses $LGCEXP_CACHE_DIR when set (the graph
    and the eigenpairs take ~3 min on 2 cores when not cached)."""
    from helpers import make_cfg

    from lgcexp.pipeline import run

    r = run(make_cfg("dataset=mnist", "algo=autoD", "plot=true", f"paths.data_dir={data_dir}",
                     f"paths.output_dir={tmp_path}"), out_dir=tmp_path / "run")
    assert r["eig"]["p"] == 300 and r["eig"]["residual"] < 1e-8
    assert r["sweep_seconds"] < 1.0
    assert r["acc_unlabeled"] >= 0.94 and 0.9 <= r["loo_acc"] <= 1.0
    d = np.genfromtxt(tmp_path / "run" / "autod_curves.csv", delimiter=",", names=True)
    # the paper's claim: without the diagonal the loss minimisers come much earlier (overfitting)
    for k in ("mae", "mse", "ce"):
        assert d["x"][np.argmin(d[f"{k}_nd"])] < d["x"][np.argmin(d[f"{k}_rd"])]
