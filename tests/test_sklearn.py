"""The scikit-learn estimators (lgcexp.sklearn): estimator checks, parameters and their validation, grid
search and clone, the same answers as the command, precomputed graphs, label values, label issues."""
from __future__ import annotations

import json
import pickle

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from helpers import make_cfg
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.model_selection import GridSearchCV
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import parametrize_with_checks

from lgcexp.algorithms import ALGORITHMS, algorithm_class
from lgcexp.algorithms.base import GraphSSLAlgorithm, label_matrix
from lgcexp.algorithms.lgc import LGC
from lgcexp.graph import GRAPH_BUILDERS, Graph, GraphBuilder, KnnGraph
from lgcexp.graph.precomputed import PrecomputedGraph
from lgcexp.params import constructor_defaults
from lgcexp.pipeline import run
from lgcexp.sklearn import (
    ESTIMATORS,
    AutoClassifier,
    AutoDClassifier,
    AutoLClassifier,
    EigenfunctionClassifier,
    GFHFClassifier,
    GraphSSLClassifier,
    GTFClassifier,
    LGCClassifier,
    LSSCClassifier,
    estimator_for,
    expected_failed_checks,
    quick_estimators,
)

# The estimator checks fit data sets of 10 to 300 points: every registered algorithm (from the registry, no
# list here) with its own and its graph builder's ``quick_params`` (fewer eigenpairs, Adam or ADMM steps than
# the paper's defaults, as scikit-learn does for its own estimators with max_iter=5, ...). The last two have
# graphs that fit 10 points (a Gaussian with a given sigma, the self-tuning kernel), so the two checks that
# fit 10 points run too.
CHECKED = [
    *quick_estimators(),
    GraphSSLClassifier(LGC(), KnnGraph(k=5, sigma=1.0)),
    GraphSSLClassifier(LGC(stop="tol"), KnnGraph(k=5, kernel="self_tuning", local_scale=5)),
]


@parametrize_with_checks(CHECKED, expected_failed_checks=expected_failed_checks)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_every_registered_algorithm_is_checked():
    checked = {type(est.algorithm).name for est in CHECKED}
    assert checked == set(ALGORITHMS.names())


def test_expected_failures_have_reasons():
    assert set(expected_failed_checks(LGCClassifier())) == {
        "check_classifiers_classes", "check_fit2d_1feature", "check_estimators_nan_inf"}
    # a graph that fits 10 points leaves only the check whose labels -1/1 cannot apply
    assert set(expected_failed_checks(LGCClassifier(n_neighbors=5, sigma=1.0))) == {"check_classifiers_classes"}
    assert set(expected_failed_checks(LGCClassifier(n_neighbors=5, kernel="binary"))) == {"check_classifiers_classes"}
    # sigma="mean" is the Gaussian kernel's only: the self-tuning kernel needs local_scale + 1 points instead
    assert set(expected_failed_checks(LGCClassifier(n_neighbors=5, kernel="self_tuning", local_scale=9))) == {
        "check_classifiers_classes"}
    assert len(expected_failed_checks(LGCClassifier(n_neighbors=5, kernel="self_tuning", local_scale=10))) == 3
    assert set(expected_failed_checks(AutoDClassifier(p=10, n_neighbors=5, sigma=1.0))) == {
        "check_classifiers_classes", "check_fit2d_1feature", "check_estimators_nan_inf"}  # p=10 needs 11 points
    for est in CHECKED:
        assert all(len(reason) > 40 for reason in expected_failed_checks(est).values())


# --- parameters: the stage objects' own, reached as nested parameters -------------------------------------

def test_one_estimator_per_algorithm():
    assert set(ESTIMATORS) == set(ALGORITHMS.names())
    for name, cls in ESTIMATORS.items():
        assert type(cls()._algorithm()) is algorithm_class(name)


class _Toy(GraphSSLAlgorithm):
    """A toy algorithm: one step of propagation, F = S Y + Y."""

    name = "toy_sklearn"
    _parameter_constraints = {}

    def _fit(self, graph, labeled, y_labeled, n_classes, *, eig=None, progress=False, cache=None):
        Y = label_matrix(graph.n, labeled, y_labeled, n_classes)
        self.scores_ = graph.S @ Y + Y


def test_an_algorithm_registered_later_gets_its_estimator_and_passes_the_checks(monkeypatch):
    from sklearn.utils.estimator_checks import check_estimator

    monkeypatch.setitem(ALGORITHMS._builtins, "toy_sklearn", f"{__name__}:_Toy")
    cls = estimator_for("toy_sklearn")
    assert cls.__name__ == "_ToyClassifier" and type(cls()._algorithm()) is _Toy
    est = GraphSSLClassifier(_Toy(), KnnGraph(k=5, sigma=1.0))
    check_estimator(est, expected_failed_checks=expected_failed_checks(est))


def test_parameters_are_the_stage_objects():
    est = GraphSSLClassifier(LGC(), KnnGraph())
    params = est.get_params(deep=True)
    for k, v in constructor_defaults(LGC).items():
        assert params[f"algorithm__{k}"] == v
    for k, v in constructor_defaults(KnnGraph).items():
        assert params[f"graph__{k}"] == v
    assert set(est.get_params(deep=False)) == {"algorithm", "graph", "detect", "cache_dir"}
    # the named classes only fix the default algorithm
    for name, cls in ESTIMATORS.items():
        assert set(cls().get_params(deep=False)) == {"algorithm", "graph", "detect", "cache_dir"}
    # no parameter of an algorithm or graph builder is restated in the estimator module
    import inspect

    import lgcexp.sklearn as mod

    src = inspect.getsource(mod)
    names = set()
    for name in ALGORITHMS.names():
        names |= set(constructor_defaults(algorithm_class(name)))
    for name in GRAPH_BUILDERS.names():
        names |= set(constructor_defaults(GRAPH_BUILDERS.get(name)))
    for n in names - {"graph", "cache_dir"}:
        assert f"self.{n} = " not in src
    assert src.count("def __init__") == 1  # GraphSSLClassifier's: algorithm, graph, detect, cache_dir
    # backwards-compatible keywords go to the stage objects
    legacy = LGCClassifier(alpha=0.7, n_neighbors=8)
    assert legacy.algorithm.alpha == 0.7 and legacy.graph.k == 8 and legacy.algorithm.stop == "tol"
    assert EigenfunctionClassifier(n_eigenfunctions=12).graph.k == 12
    assert LGCClassifier(max_iter=50).algorithm.maxiter == 50  # scikit-learn's glossary name
    assert GTFClassifier(max_iter=50).algorithm.max_iter == 50
    with pytest.raises(TypeError, match="unexpected parameter 'n_trees'"):
        LGCClassifier(n_trees=3).fit(*_blobs())  # reported at fit: scikit-learn's __init__ never raises


def test_bad_parameters_fail_at_fit_with_sklearns_error():
    X, y = _blobs()
    est = LGCClassifier()
    est.set_params(alpha=1.5)  # stored, not checked
    with pytest.raises(InvalidParameterError, match=r"^algorithm__alpha=1\.5 is not allowed: it must be a number in "
                                                    r"\(0, 1\)"):
        est.fit(X, y)
    with pytest.raises(InvalidParameterError, match=r"^algorithm__solver=lu is not allowed: choose one of cg, power"):
        GraphSSLClassifier(LGC(solver="lu")).fit(X, y)
    with pytest.raises(InvalidParameterError, match=r"^graph__k=0 is not allowed"):
        GFHFClassifier(n_neighbors=0).fit(X, y)
    with pytest.raises(InvalidParameterError, match="The 'graph' parameter"):
        LGCClassifier(graph="radius").fit(X, y)
    with pytest.raises(InvalidParameterError, match="The 'algorithm' parameter"):
        GraphSSLClassifier("nope").fit(X, y)
    with pytest.raises(InvalidParameterError, match=r"^algorithm__loss=hinge is not allowed"):
        AutoLClassifier(loss="hinge").fit(X, y)
    with pytest.raises(InvalidParameterError, match=r"^graph__kernel=rbf is not allowed"):
        GTFClassifier(kernel="rbf").fit(X, y)
    with pytest.raises(InvalidParameterError, match=r"^algorithm__x_grid=\[0\.5,2\.0\] is not allowed: it must be a "
                                                    r"non-empty list of numbers >= 1"):
        AutoClassifier(x_grid=(0.5, 2.0)).fit(X, y)
    with pytest.raises(InvalidParameterError, match=r"^algorithm__x_grid=\[\] is not allowed"):
        AutoClassifier(x_grid=()).fit(X, y)
    with pytest.raises(InvalidParameterError, match=r"^graph__n_bins=2 is not allowed"):
        EigenfunctionClassifier(n_bins=2).fit(X, y)
    with pytest.raises(ValueError, match=r"^graph__n_anchors=100 is not allowed: it must be at most the number of "
                                         r"points \(60\)"):
        LSSCClassifier(n_anchors=100).fit(X, y)
    with pytest.raises(ValueError, match=r"^graph__s=5 is not allowed: it must be at most graph__n_anchors=4"):
        LSSCClassifier(n_anchors=4, s=5).fit(X, y)
    with pytest.raises(ValueError, match=r"^graph__local_scale=60 is not allowed: it must be less than the number "):
        LGCClassifier(kernel="self_tuning", local_scale=60).fit(X, y)
    with pytest.raises(ValueError, match=r"^algorithm__x_max=2\.0 is not allowed: the x range is empty; it must be "
                                         r">= algorithm__x_min"):
        AutoDClassifier(p=5, x_min=5.0, x_max=2.0).fit(X, y)
    with pytest.raises(ValueError, match=r"^graph__k=60 is not allowed: it must be less than the number of points"):
        LGCClassifier(n_neighbors=60).fit(X, y)
    with pytest.raises(ValueError, match=r"^algorithm__p=60 is not allowed: it must be less than the number of "):
        AutoDClassifier(p=60).fit(X, y)
    with pytest.raises(ValueError, match=r"^graph__k=true is not allowed"):
        LGCClassifier(n_neighbors=True).fit(X, y)
    with pytest.raises(ValueError, match=r"isolated .* increase graph.sigma or use graph.sigma=mean"):
        LGCClassifier(sigma=1e-3).fit(X * 100, y)
    with pytest.raises(ValueError, match="no labelled point"):
        LGCClassifier().fit(X, np.full(len(y), -1))


def test_too_few_iterations_warn():
    from sklearn.exceptions import ConvergenceWarning

    X, y = _blobs()
    with pytest.warns(ConvergenceWarning, match="did not reach tol"):
        est = LGCClassifier(maxiter=2, n_neighbors=5, sigma=1.0, judge=False).fit(X, y)
    assert est.n_iter_ == 2 and est.transduction_.shape == (len(y),)


def test_string_minus_one_is_not_a_class():
    X, y = _blobs()
    ys = np.where(y == -1, "-1", np.array(["a", "b", "c"])[np.maximum(y, 0)]).astype(object)
    est = LGCClassifier(n_neighbors=5, sigma=1.0).fit(X, ys)
    assert list(est.classes_) == ["a", "b", "c"]
    est = LGCClassifier(n_neighbors=5, sigma=1.0).fit(X, ys.astype(str))
    assert list(est.classes_) == ["a", "b", "c"]
    assert set(est.transduction_) <= {"a", "b", "c"}


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

    def scalars(e):  # the nested parameters (stage objects compare by their parameters)
        return {k: v for k, v in e.get_params(deep=True).items() if k not in ("algorithm", "graph", "detect")}

    assert scalars(c) == scalars(est) and c is not est and c.algorithm is not est.algorithm
    fitted = clone(gs.best_estimator_)
    assert scalars(fitted) == scalars(gs.best_estimator_) and not hasattr(fitted, "classes_")
    # nested parameters of the stage objects, no parameter restated
    gs = GridSearchCV(GraphSSLClassifier(LGC()), {"algorithm__alpha": [0.9, 0.99], "graph__k": [10, 15]}, cv=3,
                      error_score="raise").fit(X, ym)
    assert set(gs.best_params_) == {"algorithm__alpha", "graph__k"}
    assert gs.best_estimator_.graph_builder_.k == gs.best_params_["graph__k"]


def test_in_a_pipeline():
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y, ym = _digits_masked()
    pipe = make_pipeline(StandardScaler(), GFHFClassifier()).fit(X, ym)
    assert pipe.score(X[:500], y[:500]) > 0.85
    assert np.array_equal(pipe[-1].transduction_,
                          GFHFClassifier().fit(StandardScaler().fit_transform(X), ym).transduction_)


def test_score_ignores_unlabelled_rows():
    X, y, ym = _digits_masked()
    est = LGCClassifier().fit(X, ym)
    keep = ym != -1
    assert est.score(X, ym) == pytest.approx(np.mean(est.predict(X[keep]) == ym[keep]))


# --- the same answers as the command -----------------------------------------------------------------------

NAMES = np.array(["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"])
#: case -> (algo, command overrides, estimator parameters): the same settings spelled both ways
CLI_CASES = {
    # the command's LGC stops at the argmax certificate; LGCClassifier's default runs to tol
    "lgc": ("lgc", [], {"stop": "argmax"}),
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
                        {"kernel": "self_tuning", "local_scale": 5, "stop": "argmax"}),
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
    if (out / "label_issues.csv").exists():  # a label judge: the same label_issues.csv as the command's
        li = pd.read_csv(out / "label_issues.csv", keep_default_na=False).sort_values("index")
        idx = li["index"].to_numpy()
        assert np.array_equal(est.label_issues_[idx], li["is_label_issue"].to_numpy().astype(bool))
        assert np.allclose(est.label_quality_[idx], li["label_quality"].to_numpy(), rtol=1e-6, atol=1e-9)
        assert np.allclose(est.issue_probability_[idx], li["issue_probability"].to_numpy(), rtol=1e-6, atol=1e-9)
        assert np.array_equal(est.suggested_labels_[idx], li["suggested_label"].to_numpy())
        assert est.label_issues_.sum() > 0 and not est.label_issues_[y_obj == -1].any()
    else:
        assert algo in ("gfhf", "gtf", "autoD", "lssc", "eigenfunction")
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


class _Ring(GraphBuilder):
    """A builder with no rule for new points (no ``extension``): a ring over the rows in their order."""
    name = "ring"
    _parameter_constraints: dict = {}

    def _build(self, X, *, cache, data_fingerprint):
        n = X.shape[0]
        W = sp.csr_matrix((np.ones(n), (np.arange(n), (np.arange(n) + 1) % n)), shape=(n, n))
        return Graph(W=W.maximum(W.T).tocsr(), sigma=1.0, key=f"ring-{data_fingerprint}"), False


def test_a_graph_builder_without_extension_fits_and_predicts_its_training_points():
    """The estimator fits with any builder; one without ``extension`` gives the training rows their fitted
    labels through predict and refuses other rows in one line naming the builder."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = np.full(40, -1)
    y[[0, 1, 2]], y[[20, 21, 22, 23]] = 0, 1  # unequal counts: no point is tied between the classes
    est = GraphSSLClassifier(LGC(alpha=0.9, stop="tol", tol=1e-12), _Ring()).fit(X, y)
    # by hand: LGC's closed form on the ring, F = (I - alpha S)^-1 Y
    n = 40
    W = np.zeros((n, n))
    W[np.arange(n), (np.arange(n) + 1) % n] = W[(np.arange(n) + 1) % n, np.arange(n)] = 1
    d = W.sum(1)
    S = W / np.sqrt(np.outer(d, d))
    Y = np.zeros((n, 2))
    Y[y == 0, 0] = Y[y == 1, 1] = 1
    F = np.linalg.solve(np.eye(n) - 0.9 * S, Y)
    assert np.array_equal(est.transduction_, F.argmax(1))
    assert np.array_equal(est.predict(X), est.transduction_)
    assert np.allclose(est.predict_proba(X), est.label_distributions_)
    with pytest.raises(ValueError, match=r"^graph=ring has no rule for new points .*: predict and predict_proba "
                                         r"take the training points only"):
        est.predict(X[:5])
    assert pickle.loads(pickle.dumps(est)).predict(X).tolist() == est.transduction_.tolist()


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
    # PrecomputedGraph's own checks, as graph=precomputed: self-loops refused unless diagonal="drop"; an
    # asymmetric, negative or all-zero matrix refused
    loops = W + sp.identity(W.shape[0])
    with pytest.raises(ValueError, match=r"^X is not allowed as a precomputed graph .*diagonal entries are nonzero"):
        LGCClassifier(graph="precomputed").fit(loops, ym)
    dropped = LGCClassifier(graph=PrecomputedGraph(diagonal="drop")).fit(loops, ym)
    assert np.array_equal(dropped.transduction_, knn.transduction_)
    A = W.tolil()
    A[0, 1] = A[0, 1] + 1.0
    with pytest.raises(ValueError, match="not symmetric"):
        LGCClassifier(graph="precomputed").fit(A.tocsr(), ym)
    with pytest.raises(ValueError, match="square"):
        LGCClassifier(graph="precomputed").fit(W[:, :100], ym)
    with pytest.raises(ValueError, match="negative"):
        LGCClassifier(graph="precomputed").fit(-W, ym)
    with pytest.raises(ValueError, match="no edge"):
        LGCClassifier(graph="precomputed").fit(sp.csr_matrix(W.shape), ym)
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

    runpy.run_path(str(Path(__file__).resolve().parents[1] / "examples" / "sklearn_noisy_digits.py"),
                   run_name="__main__")
    out = capsys.readouterr().out
    acc = {name: float(v)
           for name, v in re.findall(r"^(\w+)\s+accuracy on the unlabelled points: ([\d.]+)%", out, re.M)}
    assert set(acc) == {"LabelSpreading", "AutoLClassifier"} and acc["AutoLClassifier"] > acc["LabelSpreading"]
    flagged, right, flipped = map(int, re.search(r"AutoL flags (\d+) labels as wrong, (\d+) of them among the (\d+)",
                                                 out).groups())
    assert flipped == 35 and right >= 0.8 * flagged
