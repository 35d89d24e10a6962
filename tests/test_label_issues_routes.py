"""The user's out-of-fold probabilities (``pred_probs``) through every front end: the command (``dataset=npz``
array ``pred_probs`` or ``detect.pred_probs=file``), the estimators (``fit(X, y, pred_probs=...)``) and
``find_label_issues``: one check, one judgement, the same flags; bad input refused before any work."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import make_cfg

from lgcexp.errors import UserError
from lgcexp.issues.find import find_label_issues
from lgcexp.pipeline import run


def _problem(n_per: int = 40, seed: int = 0):
    """Three blobs in 4-D (float32), 8 labels flipped, and out-of-fold-like probabilities that are sure of
    the true class for most points but name the given (wrong) class for two of the flipped ones."""
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(size=(n_per, 4)) + 5.0 * k for k in range(3)]).astype(np.float32)
    y = np.repeat([0, 1, 2], n_per)
    labels = y.copy()
    flip = rng.choice(y.size, 8, replace=False)
    labels[flip] = (labels[flip] + 1) % 3
    P = np.full((y.size, 3), 0.05)
    P[np.arange(y.size), y] = 0.9
    for i in flip[:2]:  # the user's model believes these wrong labels
        P[i] = 0.05
        P[i, labels[i]] = 0.9
    return X, labels, y, P, flip


def _write(tmp: Path, name: str = "d.npz", with_probs: bool = True, **extra) -> tuple[str, dict]:
    X, labels, y, P, flip = _problem()
    arrays = {"X": X, "y": labels, "labeled": np.arange(y.size), "y_clean": y, **extra}
    if with_probs:
        arrays["pred_probs"] = P
    np.savez(tmp / name, **arrays)
    return str(tmp / name), {"X": X, "labels": labels, "y": y, "P": P, "flip": flip}


def _cli_frame(result: dict) -> pd.DataFrame:
    f = Path(result["_out_dir"]) / "label_issues.csv"
    return pd.read_csv(f).sort_values("index").reset_index(drop=True)


def _api_frame(d: dict, **kw) -> pd.DataFrame:
    df = find_label_issues(d["X"], d["labels"], method="lgc", **kw)
    return df.sort_values("index").reset_index(drop=True)


def test_npz_array_and_path_option_judge_as_find_label_issues(tmp_path):
    path, d = _write(tmp_path)
    r = run(make_cfg("dataset=npz", f"dataset.path={path}", "algo=lgc", tmp=tmp_path), out_dir=tmp_path / "a")
    assert r["detect_pred_probs"] == f"dataset.path={path}: array pred_probs"
    assert r["detect_feature_model"] == "pred_probs" and r["detect_features"] is True
    cli, api = _cli_frame({"_out_dir": tmp_path / "a"}), _api_frame(d, pred_probs=d["P"])
    assert np.array_equal(cli["is_label_issue"], api["is_label_issue"])
    np.testing.assert_allclose(cli["label_quality"], api["label_quality"], rtol=1e-9, atol=1e-12)
    assert r["detect_estimated_issues"] == api.attrs["estimated_issues"]
    # they were used: the user's model believes two of the wrong labels, so those labels' quality is higher
    # than with the tool's own feature view
    own = _api_frame(d)
    believed = d["flip"][:2]
    assert (api.loc[believed, "label_quality"] > own.loc[believed, "label_quality"] + 0.01).all()

    # the same probabilities from a file (.npy, and .npz with array pred_probs), the data without the array
    bare, _ = _write(tmp_path, "bare.npz", with_probs=False)
    np.save(tmp_path / "p.npy", d["P"])
    np.savez(tmp_path / "p.npz", pred_probs=d["P"])
    for i, f in enumerate(("p.npy", "p.npz")):
        r2 = run(make_cfg("dataset=npz", f"dataset.path={bare}", "algo=lgc", f"detect.pred_probs={tmp_path / f}",
                          tmp=tmp_path), out_dir=tmp_path / f"b{i}")
        assert r2["detect_pred_probs"] == str(tmp_path / f)
        pd.testing.assert_frame_equal(_cli_frame({"_out_dir": tmp_path / f"b{i}"}), cli)
    # the option wins over the file's own array: uniform probabilities change the judgement
    np.save(tmp_path / "u.npy", np.full_like(d["P"], 1 / 3))
    r3 = run(make_cfg("dataset=npz", f"dataset.path={path}", "algo=lgc", f"detect.pred_probs={tmp_path / 'u.npy'}",
                      tmp=tmp_path), out_dir=tmp_path / "c")
    assert r3["detect_pred_probs"] == str(tmp_path / "u.npy")
    u = _cli_frame({"_out_dir": tmp_path / "c"})
    assert np.array_equal(u["is_label_issue"], _api_frame(d, pred_probs=np.full_like(d["P"], 1 / 3))["is_label_issue"])
    assert not np.allclose(u["label_quality"], cli["label_quality"])


def test_a_partly_labelled_file_reads_the_labelled_rows(tmp_path):
    X, labels, y, P, _ = _problem()
    given = np.arange(0, y.size, 2)  # every other row labelled; pred_probs still has a row per point
    np.savez(tmp_path / "h.npz", X=X, y=labels, labeled=given, pred_probs=P)
    r = run(make_cfg("dataset=npz", f"dataset.path={tmp_path}/h.npz", "algo=lgc", tmp=tmp_path), out_dir=tmp_path / "h")
    assert r["n_labeled"] == given.size
    cli = _cli_frame({"_out_dir": tmp_path / "h"})
    part = np.full(y.size, -1)
    part[given] = labels[given]
    api = find_label_issues(X, part, method="lgc", pred_probs=P).sort_values("index").reset_index(drop=True)
    assert np.array_equal(cli["index"], given) and np.array_equal(cli["index"], api["index"])
    assert np.array_equal(cli["is_label_issue"], api["is_label_issue"])
    np.testing.assert_allclose(cli["label_quality"], api["label_quality"], rtol=1e-9, atol=1e-12)


def test_without_pred_probs_the_record_is_unchanged(tmp_path):
    bare, _ = _write(tmp_path, "bare.npz", with_probs=False)
    r = run(make_cfg("dataset=npz", f"dataset.path={bare}", "algo=lgc", tmp=tmp_path))
    assert "detect_pred_probs" not in r and r["detect_feature_model"] != "pred_probs"
    from lgcexp.config import semantic_config, to_container

    c = semantic_config(to_container(make_cfg("dataset=npz", f"dataset.path={bare}", tmp=tmp_path)))
    assert "pred_probs" not in c["detect"]  # a null option leaves every earlier run's config hash as it was


def test_estimator_api_and_command_give_the_same_flags(tmp_path):
    from lgcexp.algorithms.lgc import LGC
    from lgcexp.graph import KnnGraph
    from lgcexp.sklearn import GraphSSLClassifier

    path, d = _write(tmp_path)
    run(make_cfg("dataset=npz", f"dataset.path={path}", "algo=lgc", tmp=tmp_path), out_dir=tmp_path / "a")
    cli = _cli_frame({"_out_dir": tmp_path / "a"})
    api = _api_frame(d, pred_probs=d["P"])
    est = GraphSSLClassifier(LGC(), KnnGraph(k=10, sigma="mean")).fit(d["X"], d["labels"], pred_probs=d["P"])
    assert np.array_equal(est.label_issues_, api["is_label_issue"].to_numpy())
    assert np.array_equal(est.label_issues_, cli["is_label_issue"].to_numpy())
    np.testing.assert_allclose(est.label_quality_, api["label_quality"], rtol=1e-9, atol=1e-12)
    plain = GraphSSLClassifier(LGC(), KnnGraph(k=10, sigma="mean")).fit(d["X"], d["labels"])
    assert not np.allclose(plain.label_quality_, est.label_quality_)  # they were used
    # partly labelled: rows of unlabelled points are read but never judged
    part = d["labels"].copy()
    part[::7] = -1
    e2 = GraphSSLClassifier(LGC(), KnnGraph(k=10, sigma="mean")).fit(d["X"], part, pred_probs=d["P"])
    a2 = find_label_issues(d["X"], part, method="lgc", pred_probs=d["P"]).set_index("index").sort_index()
    assert np.array_equal(np.flatnonzero(e2.label_issues_), a2.index[a2["is_label_issue"]].to_numpy())


@pytest.mark.parametrize("change,match", [
    (lambda P: P[:, :2], r"^pred_probs has 2 columns, fewer than the 3 classes"),
    (lambda P: P[:-1], r"^pred_probs has 119 rows but X has 120 rows"),
    (lambda P: P * 3, r"^pred_probs: 120 row\(s\) do not sum to 1"),
])
def test_estimator_bad_pred_probs(change, match):
    from lgcexp.algorithms.gfhf import GFHF
    from lgcexp.algorithms.lgc import LGC
    from lgcexp.sklearn import GraphSSLClassifier

    X, labels, _, P, _ = _problem()
    with pytest.raises(ValueError, match=match):
        GraphSSLClassifier(LGC()).fit(X, labels, pred_probs=change(P))
    with pytest.raises(ValueError, match=r"^pred_probs: algorithm=gfhf does not judge its labels"):
        GraphSSLClassifier(GFHF()).fit(X, labels, pred_probs=P)


def _bad(tmp: Path, name: str, P) -> str:
    np.save(tmp / name, P)
    return str(tmp / name)


def test_bad_pred_probs_refused_before_any_work(tmp_path, monkeypatch):
    import lgcexp.pipeline as pipeline

    path, d = _write(tmp_path, with_probs=False)
    P = d["P"]
    monkeypatch.setattr(pipeline, "fit_on_graph", lambda *a, **k: pytest.fail("the run started"))

    def refusal(*extra: str) -> str:
        with pytest.raises(UserError) as e:
            run(make_cfg("dataset=npz", f"dataset.path={path}", "algo=lgc", *extra, tmp=tmp_path))
        msg = str(e.value)
        assert "\n" not in msg
        return msg

    cases = {
        "wide.npy": (np.hstack([P, np.zeros((P.shape[0], 1))]), "has 4 columns, more than the 3 classes the labels"),
        "short.npy": (P[:-1], "has 119 rows but the data has 120 rows"),
        "flat.npy": (P[:, 0], "it has shape (120,); it must be 2-D"),
        "sums.npy": (P * 2, "120 row(s) do not sum to 1 (first: row 0, sum 2)"),
        "nan.npy": (np.where(np.arange(P.size).reshape(P.shape) == 7, np.nan, P), "1 row(s) hold NaN"),
        "neg.npy": (P - np.eye(120, 3) * 2, "hold negative entries"),
    }
    for name, (bad, needle) in cases.items():
        f = _bad(tmp_path, name, bad)
        msg = refusal(f"detect.pred_probs={f}")
        assert msg.startswith(f"detect.pred_probs={f}") and needle in msg, msg
    # missing, unreadable, an npz without the array: refused by the plan, before the data is read
    assert refusal(f"detect.pred_probs={tmp_path}/none.npy").startswith(
        f"detect.pred_probs={tmp_path}/none.npy is not allowed: no such file")
    (tmp_path / "junk.npy").write_bytes(b"not an array")
    assert refusal(f"detect.pred_probs={tmp_path}/junk.npy").startswith(
        f"detect.pred_probs={tmp_path}/junk.npy: not a readable .npy or .npz file")
    np.savez(tmp_path / "other.npz", probs=P)
    assert "the npz has no array 'pred_probs' (found ['probs'])" in refusal(f"detect.pred_probs={tmp_path}/other.npz")
    # the file's own array, named as the file
    bad_own, _ = _write(tmp_path, "own.npz", with_probs=False, pred_probs=P[:, :2])
    with pytest.raises(UserError, match=r"^dataset.path=.*own.npz: array 'pred_probs' has 2 columns, fewer than"):
        run(make_cfg("dataset=npz", f"dataset.path={bad_own}", "algo=lgc", tmp=tmp_path))


def test_pred_probs_need_the_data_sets_own_labels(tmp_path):
    X, _, y, P, _ = _problem()
    np.savez(tmp_path / "s.npz", X=X, y=y, pred_probs=P)  # y: the true labels; the run samples and adds noise
    with pytest.raises(UserError, match=r"s.npz: has pred_probs but no array 'labeled'"):
        run(make_cfg("dataset=npz", f"dataset.path={tmp_path}/s.npz", "labels.n=30", tmp=tmp_path))
    np.save(tmp_path / "p.npy", P)
    with pytest.raises(UserError, match=r"^detect.pred_probs=.*p.npy is not allowed with dataset=spirals: "
                                        "out-of-fold probabilities judge the labels a data set comes with"):
        run(make_cfg("dataset=spirals", "algo=lgc", f"detect.pred_probs={tmp_path}/p.npy", tmp=tmp_path))
    with pytest.raises(UserError, match=r"^detect.pred_probs=3 is not allowed: it must be the path"):
        run(make_cfg("dataset=spirals", "algo=lgc", "detect.pred_probs=3", tmp=tmp_path))


def _lgcexp(*args: str, tmp: Path) -> subprocess.CompletedProcess:
    import os

    env = {**os.environ, "LGCEXP_CACHE_DIR": str(tmp / "cache"), "LGCEXP_OUTPUT_DIR": str(tmp / "out")}
    return subprocess.run([sys.executable, "-m", "lgcexp.cli", *args], capture_output=True, text=True, env=env,
                          cwd=tmp, timeout=300)


def test_the_command_end_to_end(tmp_path):
    path, d = _write(tmp_path, with_probs=False)
    np.save(tmp_path / "p.npy", d["P"])
    ok = _lgcexp("dataset=npz", f"dataset.path={path}", "algo=lgc", "detect.pred_probs=p.npy", tmp=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert "second view: your out-of-fold probabilities (p.npy" in ok.stdout
    res = list((tmp_path / "out").rglob("result.json"))
    assert len(res) == 1 and json.loads(res[0].read_text())["detect_pred_probs"] == "p.npy"
    cli = pd.read_csv(res[0].parent / "label_issues.csv").sort_values("index").reset_index(drop=True)
    assert np.array_equal(cli["is_label_issue"], _api_frame(d, pred_probs=d["P"])["is_label_issue"])
    np.save(tmp_path / "bad.npy", d["P"] * 2)
    bad = _lgcexp("dataset=npz", f"dataset.path={path}", "algo=lgc", "detect.pred_probs=bad.npy", tmp=tmp_path)
    lines = [line for line in bad.stderr.strip().splitlines() if line.strip()]
    assert bad.returncode == 2 and len(lines) == 1 and "Traceback" not in bad.stderr
    assert lines[0] == ("lgcexp: error: detect.pred_probs=bad.npy: 120 row(s) do not sum to 1 (first: row 0, sum 2); "
                        "give probabilities (a softmax), not scores or log-probabilities")
    gf = _lgcexp("dataset=npz", f"dataset.path={path}", "algo=gfhf", "detect.pred_probs=p.npy", tmp=tmp_path)
    assert gf.returncode == 2 and "detect.pred_probs=p.npy is not allowed with algo=gfhf" in gf.stderr
