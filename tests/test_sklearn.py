"""The scikit-learn estimators (lgcexp.sklearn): estimator checks, parameters and their validation, grid
search and clone, the same answers as the command, precomputed graphs, label values, label issues."""
from __future__ import annotations

import json
import pickle

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.model_selection import GridSearchCV
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import parametrize_with_checks

from helpers import make_cfg
from lgcexp.algorithms import ALGORITHMS, algorithm_class
from lgcexp.algorithms.eigenfunction import EigenfunctionBuilder
from lgcexp.anchor import AnchorGraphBuilder
from lgcexp.graph import KnnGraph
from lgcexp.params import constructor_defaults
from lgcexp.pipeline import run
from lgcexp.sklearn import (ESTIMATORS, AutoClassifier, AutoDClassifier, AutoLClassifier, EigenfunctionClassifier,
                            GFHFClassifier, GTFClassifier, LGCClassifier, LSSCClassifier, SIISClassifier,
                            expected_failed_checks)

GRAPH_DEFAULTS = {"graph": "knn", "n_neighbors": 10, "sigma": "mean", "symmetrize": "union", "kernel": "gaussian",
                  "local_scale": 7, "cache_dir": None}

# The estimator checks fit data sets of 10 to 300 points: the spectral methods get fewer eigenpairs than
# their paper defaults (p=300, m=30 need more points than that), AutoL and Auto fewer Adam steps and Auto
# two grid points, GTF fewer ADMM steps (speed), as scikit-learn does for its own estimators (max_iter=5,
# ...). The last two instances have graphs that fit 10 points (a Gaussian with a given sigma, the
# self-tuning kernel), so the two checks that fit 10 points run too.
CHECKED = [
    LGCClassifier(),
    GFHFClassifier(),
    AutoLClassifier(steps=50, xla=False),
    AutoDClassifier(p=10),
    SIISClassifier(m=10),
    AutoClassifier(x_grid=(2.0, 8.0), steps=20, xla=False),  # search and final steps: 20 (one compiled loop)
    GTFClassifier(max_iter=100),
    LSSCClassifier(n_anchors=8, max_iter=200),
    EigenfunctionClassifier(n_eigenfunctions=10, n_bins=10),
    LGCClassifier(n_neighbors=5, sigma=1.0),
    LGCClassifier(n_neighbors=5, kernel="self_tuning", local_scale=5),
]


@parametrize_with_checks(CHECKED, expected_failed_checks=expected_failed_checks)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_expected_failures_have_reasons():
    assert set(expected_failed_checks(LGCClassifier())) == {
        "check_classifiers_classes", "check_fit2d_1feature", "check_estimators_nan_inf"}
    # a graph that fits 10 points leaves only the check whose labels -1/1 cannot apply
    assert set(expected_failed_checks(LGCClassifier(n_neighbors=5, sigma=1.0))) == {"check_classifiers_classes"}
    assert set(expected_failed_checks(LGCClassifier(n_neighbors=5, kernel="binary"))) == {"check_classifiers_classes"}
    # sigma="mean" is the Gaussian kernel's only: the self-tuning kernel needs local_scale + 1 points instead
    assert set(expected_failed_checks(LGCClassifier(n_neighbors=5, kernel="self_tuning", local_scale=9))) == {
        "check_classifiers_classes"}
    assert set(expected_failed_checks(LGCClassifier(n_neighbors=5, kernel="self_tuning"))) == {
        "check_classifiers_classes"}
    assert len(expected_failed_checks(LGCClassifier(n_neighbors=5, kernel="self_tuning", local_scale=10))) == 3
    assert set(expected_failed_checks(AutoDClassifier(p=10, n_neighbors=5, sigma=1.0))) == {
        "check_classifiers_classes", "check_fit2d_1feature", "check_estimators_nan_inf"}  # p=10 needs 11 points
    for est in CHECKED:
        assert all(len(reason) > 40 for reason in expected_failed_checks(est).values())


# --- parameters: the algorithms' own, with their defaults and their tables --------------------------------

def test_one_estimator_per_algorithm():
    assert set(ESTIMATORS) == set(ALGORITHMS.names())


def _as_estimator_default(value):
    """A constructor default as an estimator holds it: scikit-learn wants immutable defaults, so a list
    default of an algorithm (auto's x_grid) is the same values as a tuple."""
    return tuple(value) if isinstance(value, list) else value


def _graph_table(algo: str) -> dict:
    """The graph builder's own table, with the estimator's names: LSSC's anchor graph, or the kNN graph
    (``k`` spelled ``n_neighbors``)."""
    if algo == "lssc":
        return dict(AnchorGraphBuilder._parameter_constraints)
    if algo == "eigenfunction":
        return {("n_eigenfunctions" if k == "k" else k): v
                for k, v in EigenfunctionBuilder._parameter_constraints.items()}
    return {("n_neighbors" if k == "k" else k): v for k, v in KnnGraph._parameter_constraints.items()}


@pytest.mark.parametrize("algo", sorted(ESTIMATORS))
def test_parameters_are_the_algorithms_and_the_graphs(algo):
    est = ESTIMATORS[algo]()
    cls = algorithm_class(algo)
    knn = constructor_defaults(KnnGraph)
    assert {("n_neighbors" if k == "k" else k): v for k, v in knn.items()} == {
        k: v for k, v in GRAPH_DEFAULTS.items() if k not in ("graph", "cache_dir")}
    graph_defaults = {
        "lssc": {**constructor_defaults(AnchorGraphBuilder), "cache_dir": None},
        "eigenfunction": {**{("n_eigenfunctions" if k == "k" else k): v
                             for k, v in constructor_defaults(EigenfunctionBuilder).items()}, "cache_dir": None},
    }.get(algo, GRAPH_DEFAULTS)
    algo_defaults = {k: _as_estimator_default(v) for k, v in constructor_defaults(cls).items()}
    assert est.get_params() == {**algo_defaults, **graph_defaults}
    # one constraint table, translated from the algorithm's (and the graph builder's) own
    assert set(est._parameter_constraints) == set(est.get_params())
    assert set(cls._parameter_constraints) <= set(est._parameter_constraints)


PROBES = [0, 1, 2, 10, -1, 0.0, 0.5, 1.0, 1.5, 1e-12, 100.0, "mean", "grid", "cg", "union", "knn", "xent", "x", "",
          True, False, None, [1], float("nan"), float("inf"), -float("inf")]


@pytest.mark.parametrize("algo", sorted(ESTIMATORS))
def test_translated_constraints_accept_what_the_tables_accept(algo):
    """lgcexp's table and its scikit-learn translation agree on every probe value (scikit-learn's integer
    intervals also take booleans: those are refused at fit by the algorithm's own check)."""
    from sklearn.utils._param_validation import make_constraint

    est = ESTIMATORS[algo]()
    tables = {**algorithm_class(algo)._parameter_constraints, **_graph_table(algo)}
    for name, ours in tables.items():
        theirs = [make_constraint(c) for c in est._parameter_constraints[name]]
        for v in PROBES + [est.get_params()[name]]:
            a = any(c.is_satisfied_by(v) for c in ours)
            b = any(c.is_satisfied_by(v) for c in theirs)
            assert a == b or (b and isinstance(v, bool)), (name, v, a, b)


def test_bad_parameters_fail_at_fit_with_sklearns_error():
    X, y = _blobs()
    est = LGCClassifier()
    est.set_params(alpha=1.5)  # stored, not checked
    with pytest.raises(InvalidParameterError,
                       match=r"The 'alpha' parameter of LGCClassifier must be a float in the range \(0.0, 1.0\)\. "
                             r"Got 1.5 instead\."):
        est.fit(X, y)
    with pytest.raises(InvalidParameterError, match="The 'solver' parameter of LGCClassifier must be a str among"):
        LGCClassifier(solver="lu").fit(X, y)
    with pytest.raises(InvalidParameterError, match="The 'n_neighbors' parameter of GFHFClassifier must be an int"):
        GFHFClassifier(n_neighbors=0).fit(X, y)
    with pytest.raises(InvalidParameterError, match="The 'graph' parameter"):
        LGCClassifier(graph="radius").fit(X, y)
    with pytest.raises(InvalidParameterError, match="The 'loss' parameter of AutoLClassifier"):
        AutoLClassifier(loss="hinge").fit(X, y)
    with pytest.raises(InvalidParameterError, match="The 'kernel' parameter of GTFClassifier must be a str among"):
        GTFClassifier(kernel="rbf").fit(X, y)
    with pytest.raises(InvalidParameterError, match="The 'x_grid' parameter of AutoClassifier must be an array-like"):
        AutoClassifier(x_grid=2.0).fit(X, y)
    # the items of x_grid: the algorithm's own table (scikit-learn's "array-like" says nothing of them)
    with pytest.raises(ValueError, match=r"^x_grid=\[0\.5,2\.0\] is not allowed: it must be a non-empty list of "
                                         r"numbers >= 1"):
        AutoClassifier(x_grid=(0.5, 2.0)).fit(X, y)
    with pytest.raises(ValueError, match=r"^x_grid=\[\] is not allowed"):
        AutoClassifier(x_grid=()).fit(X, y)
    # an array is array-like too: passed on as the list the table takes
    auto = AutoClassifier(x_grid=np.array([8.0, 2.0]), steps=20, xla=False).fit(X, y)
    assert auto.algorithm_.info_["grid_x"] == [2.0, 8.0]
    # the own-graph estimators: their graph stage's tables and checks, with the names as spelled here
    with pytest.raises(InvalidParameterError, match="The 'n_bins' parameter of EigenfunctionClassifier must be an int"):
        EigenfunctionClassifier(n_bins=2).fit(X, y)
    with pytest.raises(ValueError, match=r"^n_anchors=100 is not allowed: it must be at most the number of "
                                         r"points \(60\)"):
        LSSCClassifier(n_anchors=100).fit(X, y)
    with pytest.raises(ValueError, match=r"^s=5 is not allowed: it must be at most n_anchors=4"):
        LSSCClassifier(n_anchors=4, s=5).fit(X, y)
    with pytest.raises(ValueError, match=r"^local_scale=60 is not allowed: it must be less than the number of points"):
        LGCClassifier(kernel="self_tuning", local_scale=60).fit(X, y)
    # relations between parameters and checks against the data: the algorithm's own, named as here
    with pytest.raises(ValueError, match=r"^x_max=2\.0 is not allowed: the x range is empty; it must be >= x_min"):
        AutoDClassifier(p=5, x_min=5.0, x_max=2.0).fit(X, y)
    with pytest.raises(ValueError, match=r"^n_neighbors=60 is not allowed: it must be less than the number of points \(60\)"):
        LGCClassifier(n_neighbors=60).fit(X, y)
    with pytest.raises(ValueError, match=r"^p=60 is not allowed: it must be less than the number of points \(60\)"):
        AutoDClassifier(p=60).fit(X, y)
    with pytest.raises(ValueError, match=r"^n_neighbors=true is not allowed"):  # a bool passes sklearn's int check
        LGCClassifier(n_neighbors=True).fit(X, y)
    with pytest.raises(ValueError, match=r"isolated .* increase sigma or use sigma=mean"):
        LGCClassifier(sigma=1e-3).fit(X * 100, y)
    with pytest.raises(ValueError, match="no labelled point"):
        LGCClassifier().fit(X, np.full(len(y), -1))


# --- GridSearchCV, clone ---------------------------------------------------------------------------------

def _digits_masked(frac: float = 0.1, seed: int = 0):
    X, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(seed)
    y_masked = np.where(rng.random(y.size) < frac, y, -1)
    return X, y, y_masked


def test_grid_search_on_masked_digits_and_clone():
    X, y, ym = _digits_masked()
    gs = GridSearchCV(LGCClassifier(), {"alpha": [0.5, 0.9, 0.99]}, cv=3, error_score="raise").fit(X, ym)
    assert gs.best_params_["alpha"] in (0.5, 0.9, 0.99)
    assert np.all(np.isfinite(gs.cv_results_["mean_test_score"]))
    assert gs.cv_results_["mean_test_score"].min() > 0.85  # scored on the test folds' labelled points
    unl = ym == -1
    assert np.mean(gs.best_estimator_.transduction_[unl] == y[unl]) > 0.95
    # clone round-trips the parameters and drops the fit
    est = LGCClassifier(alpha=0.7, n_neighbors=8, cache_dir=None)
    c = clone(est)
    assert c.get_params() == est.get_params() and c is not est
    fitted = clone(gs.best_estimator_)
    assert fitted.get_params() == gs.best_estimator_.get_params() and not hasattr(fitted, "classes_")


def test_in_a_pipeline():
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y, ym = _digits_masked()
    pipe = make_pipeline(StandardScaler(), GFHFClassifier()).fit(X, ym)
    assert pipe.score(X[:500], y[:500]) > 0.85
    assert np.array_equal(pipe[-1].transduction_, GFHFClassifier().fit(StandardScaler().fit_transform(X), ym).transduction_)


def test_score_ignores_unlabelled_rows():
    X, y, ym = _digits_masked()
    est = LGCClassifier().fit(X, ym)
    keep = ym != -1
    assert est.score(X, ym) == pytest.approx(np.mean(est.predict(X[keep]) == ym[keep]))


# --- the same answers as the command -----------------------------------------------------------------------

NAMES = np.array(["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"])
#: case -> (algo, command overrides, estimator parameters): the same settings spelled both ways
CLI_CASES = {
    "lgc": ("lgc", [], {}),
    "gfhf": ("gfhf", [], {}),
    "autoL": ("autoL", ["algo.params.steps=300"], {"steps": 300}),
    "autoD": ("autoD", ["eig.p=40"], {"p": 40}),
    # the command picks SIIS's lambda1 from the noise rate (1e5 at 0 %): give it the constructor's value
    "siis": ("siis", ["algo.params.lambda1=100.0"], {}),
    # the command's default grid (a yaml list) and the estimator's (a tuple, the same values)
    "auto": ("auto", ["algo.params.search_steps=50", "algo.params.steps=200", "algo.params.xla=false"],
             {"search_steps": 50, "steps": 200, "xla": False}),
    "gtf": ("gtf", ["algo.params.max_iter=50", "algo.params.solver=lu"], {"max_iter": 50, "solver": "lu"}),
    # the graph's other kernels
    "lgc-self_tuning": ("lgc", ["graph.kernel=self_tuning", "graph.local_scale=5"],
                        {"kernel": "self_tuning", "local_scale": 5}),
    "gfhf-binary": ("gfhf", ["graph.kernel=binary"], {"kernel": "binary"}),
    # LSSC on its own graph, the anchor graph
    "lssc": ("lssc", ["graph=anchor", "graph.n_anchors=100", "algo.params.max_iter=300"],
             {"n_anchors": 100, "max_iter": 300}),
    # Eigenfunction on its own "graph", numerical eigenfunctions (graph.k: the number of them)
    "eigenfunction": ("eigenfunction", ["graph=eigenfunction", "graph.k=60"], {"n_eigenfunctions": 60}),
}


def _noisy_digits(n_labels: int = 200, n_wrong: int = 20, seed: int = 0):
    """Digits with string labels on 200 points, 20 of them wrong (as examples/make_noisy_csv.py)."""
    X, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(seed)
    labeled = np.sort(rng.choice(y.size, size=n_labels, replace=False))
    given = y.copy()
    wrong = rng.choice(labeled, size=n_wrong, replace=False)
    given[wrong] = (y[wrong] + rng.integers(1, 10, size=n_wrong)) % 10
    y_obj = np.full(y.size, -1, dtype=object)
    y_obj[labeled] = NAMES[given[labeled]]
    return X, y, y_obj, labeled, wrong


@pytest.mark.parametrize("case", sorted(CLI_CASES))
def test_same_answers_as_the_command(case, tmp_path):
    X, y, y_obj, labeled, wrong = _noisy_digits()
    df = pd.DataFrame(X.astype(int), columns=[f"p{i}" for i in range(X.shape[1])])
    df["label"] = np.where(y_obj == -1, "", y_obj)
    path = tmp_path / "d.csv"
    df.to_csv(path, index=False)
    algo, overrides, params = CLI_CASES[case]
    out = tmp_path / "run"
    own_graph = any(o in ("graph=anchor", "graph=eigenfunction") for o in overrides)
    knn = [] if own_graph else ["graph.k=10", "graph.sigma=mean"]
    run(make_cfg("dataset=csv", f"dataset.path={path}", f"algo={algo}", *knn, *overrides, tmp=tmp_path), out_dir=out)
    pred = pd.read_csv(out / "predictions.csv", keep_default_na=False)
    labels = pd.read_csv(out / "labels.csv", keep_default_na=False)

    est = ESTIMATORS[algo](**params).fit(X, y_obj)       # the labels as given: names, -1 where none
    assert list(est.classes_) == sorted(NAMES)
    assert np.array_equal(est.transduction_, pred["predicted"].to_numpy())
    assert np.allclose(est.algorithm_.scores_.max(axis=1), pred["score"].to_numpy(), rtol=1e-6, atol=1e-9)
    assert np.array_equal(est.classes_[est.algorithm_.labeled_pred_], labels["predicted"].to_numpy())
    if algo in ("autoL", "auto", "siis"):  # label judges: issues where the judged label differs from the given one
        issues = est.label_issues_[labels["index"].to_numpy()]
        if algo in ("autoL", "auto"):
            assert np.array_equal(issues, labels["corrected_label"].to_numpy() != labels["observed_label"].to_numpy())
        else:
            assert np.array_equal(issues, labels["siis_corrected"].to_numpy() == 1)
        assert issues.sum() > 0 and not est.label_issues_[y_obj == -1].any()
    else:
        assert not hasattr(est, "label_issues_")
    if algo == "auto":  # the same alpha chosen from the same grid
        result = json.loads((out / "result.json").read_text())
        assert est.algorithm_.x_ == result["x"] and est.algorithm_.alpha_ == pytest.approx(result["alpha"], rel=1e-12)
        assert est.algorithm_.info_["grid_x"] == [2.0, 4.0, 8.0, 16.0]


# --- label issues, label values ---------------------------------------------------------------------------

def test_autol_label_issues_find_the_flipped_labels():
    X, y, y_obj, labeled, wrong = _noisy_digits()
    est = AutoLClassifier(steps=1000).fit(X, y_obj)
    unl = y_obj == -1
    assert np.isnan(est.label_quality_[unl]).all() and not est.label_issues_[unl].any()
    q = est.label_quality_[labeled]
    assert ((q >= 0) & (q <= 1)).all()
    flagged = np.flatnonzero(est.label_issues_)
    assert flagged.size >= 15 and np.isin(flagged, wrong).mean() >= 0.9   # mostly the 20 flipped labels
    # the flipped labels have lower quality than the others
    assert np.median(est.label_quality_[wrong]) < np.median(est.label_quality_[np.setdiff1d(labeled, wrong)])


def test_label_values_are_any_values():
    X, y, ym = _digits_masked()
    base = LGCClassifier().fit(X, ym)
    shifted = LGCClassifier().fit(X, np.where(ym == -1, -1, ym * 10 + 100))
    assert np.array_equal(shifted.classes_, np.arange(100, 200, 10))
    assert np.array_equal(shifted.transduction_, base.transduction_ * 10 + 100)
    names = NAMES[np.maximum(ym, 0)].astype(object)
    names[ym == -1] = -1  # label names, and -1 for the unlabelled points
    named = LGCClassifier().fit(X, names)
    assert np.array_equal(named.transduction_, NAMES[base.transduction_])
    assert np.allclose(named.label_distributions_, base.label_distributions_[:, np.argsort(NAMES)], atol=1e-8)
    assert np.array_equal(named.predict(X[:50]), NAMES[base.predict(X[:50])])


# --- new points, precomputed graphs, pickling -----------------------------------------------------------------

def test_inductive_prediction_is_the_kernel_vote_of_the_neighbours():
    X, y, ym = _digits_masked()
    train, test = np.arange(0, 1500), np.arange(1500, 1797)
    est = LGCClassifier().fit(X[train], ym[train])
    P = est.predict_proba(X[test])
    # by hand: the 10 nearest training points, Gaussian weights with the fitted sigma
    D = ((X[test][:, None, :] - X[train][None, :, :]) ** 2).sum(-1)
    nn = np.argsort(D, axis=1, kind="stable")[:, :10]
    w = np.exp(-np.take_along_axis(D, nn, 1) / (2 * est.sigma_ ** 2))
    ref = np.einsum("mk,mkc->mc", w, est.label_distributions_[nn])
    ref /= ref.sum(1, keepdims=True)
    Ds = np.sort(D, axis=1)
    unique_10th = Ds[:, 9] < Ds[:, 10]  # rows whose 10 nearest are not decided by a tie (digits are integers)
    assert unique_10th.mean() > 0.9
    assert np.allclose(P[unique_10th], ref[unique_10th], atol=1e-6)
    assert np.allclose(P.sum(1), 1) and np.mean(est.predict(X[test]) == y[test]) > 0.9
    # a point far from everything follows its nearest neighbours instead of dividing 0 by 0
    far = X[test[:3]] * 1e3
    assert np.all(np.isfinite(est.predict_proba(far)))


@pytest.mark.parametrize("kernel", ["self_tuning", "binary"])
def test_inductive_prediction_with_the_other_kernels(kernel):
    """The vote weights are the graph's kernel between the new point and each neighbour: self_tuning
    exp(-d^2 / (s_q s_j)) with s_j the training point's local scale (as in the graph's weights) and s_q the
    new point's distance to its local_scale-th nearest training point; binary 1."""
    X, y, ym = _digits_masked()
    X = X + np.random.default_rng(1).normal(scale=1e-3, size=X.shape)  # no tied distances
    train, test = np.arange(0, 900), np.arange(1500, 1797)
    est = LGCClassifier(kernel=kernel, n_neighbors=8, local_scale=5).fit(X[train], ym[train])
    assert est.sigma_ is None
    D = np.sqrt(((X[test][:, None, :] - X[train][None, :, :]) ** 2).sum(-1))
    nn = np.argsort(D, axis=1)[:, :8]
    d = np.take_along_axis(D, nn, 1)
    if kernel == "self_tuning":
        Dtt = np.sqrt(((X[train][:, None, :] - X[train][None, :, :]) ** 2).sum(-1))
        s_train = np.sort(Dtt, axis=1)[:, 5]  # column 0 is the point itself
        assert np.allclose(est.local_scales_, s_train, rtol=1e-4)
        # the graph's own weights use the same scales
        i, j = est.graph_.W.nonzero()
        assert np.allclose(est.graph_.W.data, np.exp(-Dtt[i, j] ** 2 / (s_train[i] * s_train[j])), rtol=1e-3)
        s_q = np.sort(D, axis=1)[:, 4]
        w = np.exp(-d ** 2 / (s_q[:, None] * s_train[nn]))
    else:
        assert est.local_scales_ is None
        w = np.ones_like(d)
    ref = np.einsum("mk,mkc->mc", w, est.label_distributions_[nn])
    ref /= ref.sum(1, keepdims=True)
    assert np.allclose(est.predict_proba(X[test]), ref, atol=1e-4)
    assert np.mean(est.predict(X[test]) == y[test]) > 0.9


@pytest.mark.parametrize("weights", ["kernel", "lae"])
def test_lssc_new_points_get_their_anchor_codes_times_the_anchor_scores(weights):
    """LSSC's predict: the new point's weights on its s nearest anchors (the graph's rule: the Gaussian
    kernel with the graph's width h, normalised; or local anchor embedding), times the anchors' scores."""
    X, y, ym = _digits_masked()
    train, test = np.arange(0, 1500), np.arange(1500, 1797)
    est = LSSCClassifier(n_anchors=100, s=3, weights=weights, max_iter=500).fit(X[train], ym[train])
    A = est.algorithm_.anchor_scores_
    assert A.shape == (100, 10)
    # a training point gets back its own row; the graph's rows are Z, the scores Z A
    assert np.allclose(est.graph_.Z @ A, est.algorithm_.scores_)
    assert np.allclose(est.predict_proba(X[train]), est.label_distributions_)
    U = est.graph_.anchors
    D2 = ((X[test][:, None, :] - U[None, :, :]) ** 2).sum(-1)
    nn = np.argsort(D2, axis=1)[:, :3]
    d2 = np.take_along_axis(D2, nn, 1)
    if weights == "kernel":  # by hand (LAE's codes are checked on the training rows above)
        # the graph's width: mean distance of the training points to their 3rd nearest anchor
        h = np.sqrt(np.sort(((X[train][:, None, :] - U[None, :, :]) ** 2).sum(-1), axis=1)[:, 2]).mean()
        assert est.graph_.sigma == pytest.approx(h, rel=1e-4)
        z = np.exp(-d2 / h ** 2)
        z /= z.sum(1, keepdims=True)
        F = np.clip(np.einsum("ms,msc->mc", z, A[nn]), 0, None)
        F /= F.sum(1, keepdims=True)
        assert np.allclose(est.predict_proba(X[test]), F, atol=1e-4)  # faiss's float32 distances
    assert np.mean(est.predict(X[test]) == y[test]) > 0.85


def test_eigenfunction_new_points_read_the_eigenfunctions_at_them():
    """Eigenfunction's predict: a new point's PCA coordinates (checked against scikit-learn's PCA), each
    kept eigenfunction read by linear interpolation of its table at the point's coordinate on its dimension
    and scaled as on the training points, times the fitted coefficients."""
    from sklearn.decomposition import PCA

    X, y, ym = _digits_masked()
    train, test = np.arange(0, 1500), np.arange(1500, 1797)
    est = EigenfunctionClassifier(n_eigenfunctions=60, n_pca=20).fit(X[train], ym[train])
    model, a = est.graph_.model, est.algorithm_.coef_
    # the tables give back U on the training points (so they are the eigenfunctions the fit used)
    assert np.allclose(est.predict_proba(X[train]), est.label_distributions_, atol=0)
    assert np.allclose(est.algorithm_.scores_, est.graph_.U @ a)
    pca = PCA(n_components=20, svd_solver="full").fit(X[train])
    signs = np.sign(np.sum(pca.components_ * model.rotation.T, axis=1))
    assert np.allclose(pca.components_ * signs[:, None], model.rotation.T, atol=1e-6)
    proj = pca.transform(X[test]) * signs
    U = np.empty((test.size, model.dims.size + 1))
    U[:, 0] = 1 / np.sqrt(train.size)
    for i, j in enumerate(model.dims):
        g, f = model.centres[i], model.values[i]
        x = np.clip(proj[:, j], g[0], g[-1])
        b = np.clip(np.searchsorted(g, x) - 1, 0, g.size - 2)  # the bin segment holding x
        t = (x - g[b]) / (g[b + 1] - g[b])
        U[:, i + 1] = ((1 - t) * f[b] + t * f[b + 1]) / model.norms[i]
    F = np.clip(U @ a, 0, None)
    F /= F.sum(1, keepdims=True)
    assert np.allclose(est.predict_proba(X[test]), F, atol=1e-6)
    assert np.mean(est.predict(X[test]) == y[test]) > 0.6


def test_precomputed_graph_gives_the_knn_answers():
    X, y, ym = _digits_masked()
    knn = LGCClassifier().fit(X, ym)
    W = knn.graph_.W
    pre = LGCClassifier(graph="precomputed").fit(W, ym)
    assert np.array_equal(pre.transduction_, knn.transduction_)
    assert np.allclose(pre.label_distributions_, knn.label_distributions_)
    assert pre.sigma_ is None and pre.n_features_in_ == X.shape[0]
    # predict takes the new points' affinities to the training points (n_new x n_train)
    assert np.array_equal(pre.predict(W[:20]), (W[:20] @ knn.label_distributions_).argmax(1))
    # self-loops are dropped; an asymmetric or negative matrix is refused
    loops = LGCClassifier(graph="precomputed").fit(W + sp.identity(W.shape[0]), ym)
    assert np.array_equal(loops.transduction_, knn.transduction_)
    A = W.tolil(); A[0, 1] = A[0, 1] + 1.0
    with pytest.raises(ValueError, match="symmetric"):
        LGCClassifier(graph="precomputed").fit(A.tocsr(), ym)
    with pytest.raises(ValueError, match="square"):
        LGCClassifier(graph="precomputed").fit(W[:, :100], ym)
    with pytest.raises(ValueError, match="non-negative"):
        LGCClassifier(graph="precomputed").fit(-W, ym)
    # dense input works; sparse X with the kNN graph is refused with a message that says so
    small = W[:300][:, :300]
    assert LGCClassifier(graph="precomputed").fit(small.toarray(), ym[:300]).transduction_.shape == (300,)
    with pytest.raises(TypeError, match="[Ss]parse"):
        LGCClassifier().fit(sp.csr_matrix(X), ym)


def test_precomputed_graph_in_grid_search():
    X, y, ym = _digits_masked()
    W = LGCClassifier().fit(X, ym).graph_.W
    gs = GridSearchCV(LGCClassifier(graph="precomputed"), {"alpha": [0.5, 0.99]}, cv=3, error_score="raise")
    gs.fit(W, ym)  # the pairwise tag makes scikit-learn cut W into train x train and test x train blocks
    assert np.all(np.isfinite(gs.cv_results_["mean_test_score"]))


def test_pickle_keeps_the_index_and_set_params_after_fit_does_not_change_predict():
    X, y, ym = _digits_masked()
    est = LGCClassifier(n_neighbors=7).fit(X, ym)
    P = est.predict_proba(X[:100])
    back = pickle.loads(pickle.dumps(est))
    assert np.array_equal(back.predict_proba(X[:100]), P)
    est.set_params(n_neighbors=3)
    assert np.array_equal(est.predict_proba(X[:100]), P)


def test_cache_dir_reuses_the_graph(tmp_path):
    X, y, ym = _digits_masked()
    a = LGCClassifier(cache_dir=str(tmp_path)).fit(X, ym)
    assert list(tmp_path.glob("graph-*.npz"))
    b = LGCClassifier(cache_dir=str(tmp_path)).fit(X, ym)
    assert (a.graph_.W != b.graph_.W).nnz == 0 and np.array_equal(a.transduction_, b.transduction_)


def _blobs(n_per: int = 20, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(size=(n_per, 2)), rng.normal(size=(n_per, 2)) + 6, rng.normal(size=(n_per, 2)) - 6])
    y = np.repeat([0, 1, 2], n_per)
    y[1::3] = -1
    return X, y


@pytest.mark.slow
def test_example_labelspreading_vs_autol(capsys):
    import re
    import runpy
    from pathlib import Path

    runpy.run_path(str(Path(__file__).resolve().parents[1] / "examples" / "sklearn_noisy_digits.py"), run_name="__main__")
    out = capsys.readouterr().out
    acc = {name: float(v) for name, v in re.findall(r"^(\w+)\s+accuracy on the unlabelled points: ([\d.]+)%", out, re.M)}
    assert set(acc) == {"LabelSpreading", "AutoLClassifier"} and acc["AutoLClassifier"] > acc["LabelSpreading"]
    flagged, right, flipped = map(int, re.search(r"AutoL flags (\d+) labels as wrong, (\d+) of them among the (\d+)", out).groups())
    assert flipped == 35 and right >= 0.8 * flagged
