"""The pictures of a diagnosis run (lgcexp.issues.pages, lgcexp.issues.diagnosis): label_issue_pages.pdf
pages through every flag in the table's order, each beside its nearest labelled neighbours of the given and
suggested class (checked against brute force); suspicious_examples.png shows only flagged points; the
confusion matrix of label_issues.png runs in numeric class order."""
from __future__ import annotations

import math
import re
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from lgcexp.issues import diagnosis as dg
from lgcexp.issues import pages as pg


def pdf_pages(path) -> int:
    """Pages of a PDF: its page objects (``/Type /Pages`` is the tree's root, not a page)."""
    return len(re.findall(rb"/Type\s*/Page(?![A-Za-z])", path.read_bytes()))


@pytest.fixture(scope="module")
def digits():
    """400 digits (8 x 8 images), every point labelled, a kNN graph, and a judgement with 23 flags whose
    qualities are far below 0.01; types mixed, two ties in quality."""
    from sklearn.datasets import load_digits
    from sklearn.neighbors import kneighbors_graph

    X, y = load_digits(return_X_y=True)
    X, y = X[:400].astype(np.float32), y[:400].astype(np.int64)
    W = kneighbors_graph(X, 8, mode="distance")
    W.data = np.exp(-W.data / 20.0)
    W = (W + W.T).tocsr()
    rng = np.random.default_rng(1)
    n = y.size
    flag = np.zeros(n, bool)
    flag[rng.choice(n, 23, replace=False)] = True
    quality = rng.random(n)
    quality[flag] = rng.random(23) * 1e-4
    f = np.flatnonzero(flag)
    quality[f[5]] = quality[f[3]]  # a tie: broken by index
    suggested = y.copy()
    suggested[flag] = (y[flag] + 1 + rng.integers(0, 9, 23)) % 10
    types = np.full(n, "", dtype=object)
    types[flag] = np.where(rng.random(23) < 0.6, "wrong", "ambiguous")
    judged = SimpleNamespace(is_issue=flag, quality=quality, suggested=suggested, issue_type=types)
    return X, y, W, judged


def expected_order(judged, labeled):
    """The flags in the order of label_issues.csv, computed here: wrong first, then by quality, then index."""
    flags = [r for r in range(labeled.size) if judged.is_issue[r]]
    return sorted(flags, key=lambda r: (judged.issue_type[r] != "wrong", judged.quality[r], labeled[r]))


def test_pdf_has_one_row_per_flag(digits, tmp_path):
    X, y, W, judged = digits
    labeled = np.arange(y.size)
    info = pg.report_issue_pages(judged, labeled, y, np.arange(10), X, (8, 8), W, tmp_path / "p.pdf",
                                 rows_per_page=4)
    assert info["n_flagged"] == info["n_shown"] == 23
    assert info["pages"] == math.ceil(23 / 4) == pdf_pages(tmp_path / "p.pdf")
    # the cap: the first max_pages * rows_per_page flags
    capped = pg.report_issue_pages(judged, labeled, y, np.arange(10), X, (8, 8), W, tmp_path / "c.pdf",
                                   rows_per_page=4, max_pages=2)
    assert (capped["n_shown"], capped["pages"], pdf_pages(tmp_path / "c.pdf")) == (8, 2, 2)
    none = SimpleNamespace(**{**vars(judged), "is_issue": np.zeros(y.size, bool)})
    assert pg.report_issue_pages(none, labeled, y, np.arange(10), X, (8, 8), W, tmp_path / "n.pdf") is None
    assert not (tmp_path / "n.pdf").exists()


def test_rows_titles_and_neighbours(digits):
    """Rank, index, given -> suggested in the file's values, quality to 3 significant digits, type; the
    neighbours: the heaviest labelled graph edges of that class, then the nearest in X (brute force)."""
    X, y, W, judged = digits
    labeled = np.arange(0, y.size, 2)  # half the points labelled: neighbours must be labelled ones
    sub = SimpleNamespace(**{k: np.asarray(v)[labeled] for k, v in vars(judged).items()})
    yl = y[labeled]
    classes = np.array([f"c{k}" for k in range(10)])
    rows = pg.flag_rows(sub, labeled, yl, classes, W, X, m=3)
    order = expected_order(sub, labeled)
    assert [r.index for r in rows] == [int(labeled[o]) for o in order]
    Wd = W.toarray()
    is_lab = np.zeros(y.size, bool)
    is_lab[labeled] = True
    given_of = np.full(y.size, -1)
    given_of[labeled] = yl
    for t, (row, o) in enumerate(zip(rows, order)):
        i = labeled[o]
        assert row.rank == t + 1
        assert row.given == classes[yl[o]] and row.suggested == classes[sub.suggested[o]]
        assert row.title.startswith(f"{t + 1}. #{i}   given {classes[yl[o]]} \u2192 suggested "
                                    f"{classes[sub.suggested[o]]}   quality {sub.quality[o]:.3g}")
        assert row.title.endswith(sub.issue_type[o])
        assert "0.00 " not in row.title + " "
        for nbs, c in ((row.given_neighbours, yl[o]), (row.suggested_neighbours, sub.suggested[o])):
            cand = [j for j in range(y.size) if is_lab[j] and j != i and given_of[j] == c and Wd[i, j] > 0]
            graph = sorted(cand, key=lambda j: (-Wd[i, j], j))[:3]
            assert [j for j, _, k in nbs if k == "w"] == graph
            np.testing.assert_allclose([v for _, v, k in nbs if k == "w"], [Wd[i, j] for j in graph])
            rest = [j for j in range(y.size) if is_lab[j] and j != i and given_of[j] == c and j not in graph]
            dist = {j: float(np.linalg.norm(X[i].astype(np.float64) - X[j])) for j in rest}
            near = sorted(rest, key=lambda j: (dist[j], j))[: 3 - len(graph)]
            assert [j for j, _, k in nbs if k == "d"] == near
            np.testing.assert_allclose([v for _, v, k in nbs if k == "d"], [dist[j] for j in near], rtol=1e-6)
            assert len(nbs) == 3


def test_format_quality():
    assert pg.format_quality(1.2345e-5) == "1.23e-05"
    assert pg.format_quality(0.000105) == "0.000105"
    assert pg.format_quality(0.5) == "0.5"
    assert pg.format_quality(float("nan")) == "nan"


def test_class_order_is_numeric():
    strings = np.array([str(k) for k in range(11)])  # np.unique's order: "0", "1", "10", "2", ...
    strings = np.unique(strings)
    assert list(strings[dg.class_order(strings)]) == [str(k) for k in range(11)]
    ints = np.array([-3, 2, 10])
    assert list(dg.class_order(ints)) == [0, 1, 2]
    words = np.array(["cat", "dog", "emu"])
    assert list(dg.class_order(words)) == [0, 1, 2]
    M = np.zeros((11, 11), dtype=np.int64)
    pos = {v: k for k, v in enumerate(strings)}
    M[pos["10"], pos["9"]] = 3
    M[pos["2"], pos["1"]] = 1
    M[pos["5"], pos["0"]] = 2
    assert list(strings[dg.confusion_classes(M, strings, 30)]) == ["0", "1", "2", "5", "9", "10"]
    # the most involved when too many, still in class order
    assert list(strings[dg.confusion_classes(M, strings, 4)]) == ["0", "5", "9", "10"]


def test_suspicious_rows_show_only_flags():
    """No flagged outlier: no outlier row; flagged outliers by score; label issues in the table's order."""
    n = 30
    split = SimpleNamespace(labeled=np.arange(0, n, 2))
    flag = np.zeros(15, bool)
    flag[[1, 4, 7]] = True
    issues = SimpleNamespace(is_issue=flag, quality=np.r_[np.ones(15)] * 0.9, suggested=np.zeros(15, int),
                             issue_type=np.where(flag, "wrong", "").astype(object))
    issues.quality[[1, 4, 7]] = [3e-5, 1e-5, 2e-5]
    audit = SimpleNamespace(is_outlier=np.zeros(n, bool), outlier_score=np.linspace(0, 3, n),
                            near_duplicate_set=np.full(n, -1))
    rows = dg.suspicious_rows(split, issues, audit)
    assert len(rows) == 1 and rows[0][0].startswith("label issues")
    assert rows[0][1] == [(8, "q=1e-05"), (14, "q=2e-05"), (2, "q=3e-05")]
    audit.is_outlier[[3, 20]] = True
    rows = dg.suspicious_rows(split, issues, audit)
    assert rows[1] == ("outliers\n(2 of 2)", [(20, f"z={audit.outlier_score[20]:.1f}"),
                                               (3, f"z={audit.outlier_score[3]:.1f}")])
    assert dg.suspicious_rows(split, None, SimpleNamespace(**{**vars(audit), "is_outlier": np.zeros(n, bool)})) == []


def _diagnosis(tmp_path, X, lab):
    from helpers import make_cfg

    from lgcexp import pipeline
    from lgcexp.config import to_container

    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", lab)
    c = to_container(make_cfg("dataset=npy", f"dataset.path={tmp_path}/X.npy",
                              f"dataset.labels_path={tmp_path}/y.npy", tmp=tmp_path))
    c.pop("hydra", None)
    out = tmp_path / "run"
    return pipeline.run(c, out_dir=out), out


def test_diagnosis_run_pages_through_every_flag(tmp_path):
    """Digits as .npy (64 columns = 8 x 8): the PDF's pages hold every flag of label_issues.csv."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X, lab = X[:500].astype(np.float32), y[:500].copy()
    lab[::25] = (lab[::25] + 3) % 10
    r, out = _diagnosis(tmp_path, X, lab)
    table = pd.read_csv(out / "label_issues.csv")
    n_flag = int(table["is_label_issue"].sum())
    assert n_flag > 0
    assert r["label_issue_pages"]["n_shown"] == n_flag
    assert "label_issue_pages.pdf" in r["label_issue_report"]
    assert pdf_pages(out / "label_issue_pages.pdf") == math.ceil(n_flag / pg.ROWS_PER_PAGE)


def test_no_pages_for_other_data(tmp_path):
    """Rows that are not images (10 columns): no PDF and no picture of examples, and no error."""
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(0, 1, (150, 10)), rng.normal(4, 1, (150, 10))]).astype(np.float32)
    lab = np.repeat([0, 1], 150)
    lab[:6] = 1
    r, out = _diagnosis(tmp_path, X, lab)
    assert r["label_issue_pages"] is None
    assert not (out / "label_issue_pages.pdf").exists()
    assert "suspicious_examples.png" not in r["data_issue_report"]
    assert r["n_label_issues"] > 0


def test_image_tile():
    """Grey images dark on white, each by its own range; one channel squeezed; colour kept."""
    x = np.array([0.0, 5.0, 10.0, 10.0])
    t = pg.image_tile(x, (2, 2))
    assert t.shape == (2, 2, 3)
    np.testing.assert_allclose(t[:, :, 0], [[1.0, 0.5], [0.0, 0.0]])
    np.testing.assert_array_equal(pg.image_tile(x, (2, 2, 1)), t)
    rgb = np.arange(12.0)
    np.testing.assert_allclose(pg.image_tile(rgb, (2, 2, 3)), (rgb / 11).reshape(2, 2, 3))
    assert np.all(pg.image_tile(np.full(4, 7.0), (2, 2)) == 1.0)  # a blank image stays white
