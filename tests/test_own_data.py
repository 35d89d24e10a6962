"""Your own data (csv, npy, npz with its own labels): loading, label mapping, memory mapping, bad input,
and diagnosis runs end to end (no sampling, no noise, clean labels for scoring only)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from helpers import CONF, make_cfg

from lgcexp.data import DATA_SOURCES, load_dataset
from lgcexp.errors import UserError
from lgcexp.params import constructor_defaults
from lgcexp.pipeline import run


def blobs(n_per: int = 40, d: int = 3, seed: int = 0, gap: float = 8.0):
    """Three well-separated blobs: X (3 n_per, d) float64 and y in 0..2."""
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(size=(n_per, d)) + gap * k for k in range(3)])
    return X, np.repeat([0, 1, 2], n_per)


NAMES = np.array(["cat", "dog", "emu"])


def write_csv(path: Path, X: np.ndarray, labels, clean=None, **extra) -> str:
    df = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    df["label"] = labels
    if clean is not None:
        df["truth"] = clean
    for k, v in extra.items():
        df[k] = v
    df.to_csv(path, index=False)
    return str(path)


def given_labels(y: np.ndarray, every: int = 4, wrong=()) -> np.ndarray:
    """Every `every`-th point labelled with its class name (or the next class for rows in `wrong`), others empty."""
    out = np.full(y.size, "", dtype=object)
    rows = np.arange(0, y.size, every)
    out[rows] = NAMES[y[rows]]
    for r in wrong:
        out[r] = NAMES[(y[r] + 1) % 3]
    return out


def err(fn, *a, **kw) -> str:
    with pytest.raises(UserError) as e:
        fn(*a, **kw)
    msg = str(e.value)
    assert "\n" not in msg, msg
    return msg


# --- the yaml defaults are the constructor defaults ----------------------------------------------

@pytest.mark.parametrize("name", ["csv", "npy", "npz"])
def test_yaml_defaults_equal_constructor_defaults(name):
    cfg = yaml.safe_load((Path(CONF) / "dataset" / f"{name}.yaml").read_text())
    section = {k: v for k, v in cfg["dataset"].items() if k != "name"}
    cls = DATA_SOURCES.get(name)
    defaults = constructor_defaults(cls)
    assert set(section) == set(defaults) == set(cls._parameter_constraints)
    for k, v in section.items():
        if v != "???":  # mandatory in the yaml (path)
            assert v == defaults[k], k
    assert cfg["labels"]["n"] is None


# --- csv -------------------------------------------------------------------------------------------

def test_csv_given_labels_and_mapping(tmp_path):
    X, y = blobs(n_per=4)
    labels = np.array(["dog", "", "cat", "-1", "emu", None, "dog", "", "cat", "emu", "", "cat"], dtype=object)
    d = load_dataset("csv", path=write_csv(tmp_path / "a.csv", X, labels))
    assert d.has_given_labels and d.n == 12 and d.n_classes == 3
    assert d.classes.tolist() == ["cat", "dog", "emu"]
    assert d.labeled.tolist() == [0, 2, 4, 6, 8, 9, 11]          # empty, None and -1 are unlabelled
    assert d.original_labels(d.y_observed).tolist() == ["dog", "cat", "emu", "dog", "cat", "emu", "cat"]
    assert (d.y == -1).all() and not d.truth_known.any()           # no clean labels: truth unknown
    np.testing.assert_allclose(d.X, X)


def test_csv_int_labels_sentinel_positions_and_selection(tmp_path):
    X, y = blobs(n_per=3, d=2)
    lab = np.array([10, -1, 2, 10, 2, -1, 7, 7, 10], dtype=object)
    p = tmp_path / "h.csv"
    pd.DataFrame({"id": [f"r{i}" for i in range(9)], "a": X[:, 0], "lab": lab, "b": X[:, 1]}).to_csv(
        p, index=False, header=False, sep=";")
    d = load_dataset("csv", path=str(p), header=False, sep=";", label_column=2, feature_columns=[1, 3])
    assert d.classes.tolist() == [2, 7, 10] and d.classes.dtype == np.int64   # numbers sort as numbers
    assert d.labeled.tolist() == [0, 2, 3, 4, 6, 7, 8]
    np.testing.assert_allclose(d.X, X)
    # null sentinel: -1 is then a label like any other
    d = load_dataset("csv", path=str(p), header=False, sep=";", label_column=-2, feature_columns=[1, 3],
                     unlabeled_value=None)
    assert d.classes.tolist() == [-1, 2, 7, 10] and d.labeled.size == 9
    # a text sentinel
    q = write_csv(tmp_path / "q.csv", X, np.array(["a", "?", "b", "a", "?", "b", "a", "b", "?"]))
    assert load_dataset("csv", path=q, unlabeled_value="?").labeled.tolist() == [0, 2, 3, 5, 6, 7]
    # codes with a leading zero keep their spelling (text, not numbers)
    z = write_csv(tmp_path / "z.csv", X, np.array(["07", "7", "", "07", "10", "7", "", "10", "07"], dtype=object))
    assert pd.read_csv(z, dtype=str)["label"][0] == "07"
    assert load_dataset("csv", path=z).classes.tolist() == ["07", "10", "7"]


def test_csv_clean_column_scores_only(tmp_path):
    X, y = blobs(n_per=4)
    clean = NAMES[y].astype(object)
    clean[[1, 5]] = ""                                               # truth unknown there
    d = load_dataset("csv", path=write_csv(tmp_path / "c.csv", X, given_labels(y, 2), clean),
                     clean_column="truth")
    assert d.has_given_labels and d.truth_known.sum() == 10
    assert d.y[1] == -1 and d.original_labels(d.y[d.truth_known]).tolist() == np.delete(NAMES[y], [1, 5]).tolist()


def test_csv_clean_only_samples_labels(tmp_path):
    X, y = blobs(n_per=4)
    d = load_dataset("csv", path=write_csv(tmp_path / "s.csv", X, NAMES[y]), label_column=None,
                     clean_column="label")
    assert not d.has_given_labels and d.y.tolist() == y.tolist() and d.n_classes == 3


def test_csv_bad_input(tmp_path):
    X, y = blobs(n_per=4)
    good = write_csv(tmp_path / "g.csv", X, given_labels(y, 2), NAMES[y])
    csv = lambda **kw: load_dataset("csv", **{"path": good, **kw})  # noqa: E731

    assert err(csv, path=str(tmp_path / "nope.csv")).startswith(
        f"dataset.path={tmp_path / 'nope.csv'} is not allowed: no such file")
    msg = err(csv, label_column="lable")
    assert msg.startswith("dataset.label_column=lable is not allowed") and "no column 'lable'" in msg
    assert "columns: f0, f1, f2, label, truth" in msg
    assert err(csv, clean_column="clean").startswith("dataset.clean_column=clean is not allowed")
    assert err(csv, label_column=9).startswith("dataset.label_column=9 is not allowed: ")
    assert "dataset.feature_columns=[f0,label] is not allowed" in err(csv, feature_columns=["f0", "label"])
    assert "with dataset.header=false" in err(csv, header=False)
    # non-numeric features: the text column is named, and how to choose columns
    msg = err(load_dataset, "csv", path=write_csv(tmp_path / "t.csv", X, given_labels(y, 2), colour=["red"] * 12))
    assert msg.startswith(f"dataset.path={tmp_path / 't.csv'}: column 'colour' holds non-numeric values (row 0: 'red')")
    assert "dataset.feature_columns=" in msg
    Xn = X.copy()
    Xn[3, 1] = np.nan
    msg = err(load_dataset, "csv", path=write_csv(tmp_path / "n.csv", Xn, given_labels(y, 2)))
    assert msg.startswith(f"dataset.path={tmp_path / 'n.csv'}: X has NaN or Inf in 1 of 12 rows (first bad row: 3)")
    # fewer than two classes among the labelled rows (a one-class file, or labels that are all -1)
    one = np.where(np.arange(12) % 2 == 0, "cat", "").astype(object)
    msg = err(load_dataset, "csv", path=write_csv(tmp_path / "o.csv", X, one))
    assert msg.startswith("dataset.label_column=label: the labelled rows hold 1 distinct label(s) ('cat')")
    msg = err(load_dataset, "csv", path=write_csv(tmp_path / "m.csv", X, np.array([-1, 1] * 6)))
    assert "1 distinct label(s) (1)" in msg and "dataset.unlabeled_value" in msg
    # a class with no labelled point: a clean label no given label carries
    only2 = np.where(y < 2, NAMES[y], "").astype(object)
    msg = err(load_dataset, "csv", path=write_csv(tmp_path / "u.csv", X, only2, NAMES[y]), clean_column="truth")
    assert msg.startswith("dataset.clean_column=truth: clean label(s) 'emu' (4 rows) "
                          "never appear among the given labels")
    empty = tmp_path / "e.csv"
    empty.write_text("")
    assert err(load_dataset, "csv", path=str(empty)) == f"dataset.path={empty}: the file is empty"


@pytest.mark.parametrize("override,msg", [
    ("dataset.label_column=null", "dataset.label_column=null is not allowed without dataset.clean_column"),
    ("dataset.clean_column=label", "dataset.clean_column=label is not allowed: it is the label column too"),
    ("dataset.unlabeled_value=1.5", "dataset.unlabeled_value=1.5 is not allowed"),
    ("dataset.header=maybe", "dataset.header=maybe is not allowed: use true or false"),
    ("+dataset.labelcolumn=y", "dataset.labelcolumn is not a parameter of dataset=csv"),
    ("dataset.feature_columns=3", "dataset.feature_columns=3 is not allowed"),
])
def test_csv_options_refused_before_loading(tmp_path, override, msg):
    from lgcexp.config import plan

    text = err(plan, make_cfg("dataset=csv", "dataset.path=/nonexistent.csv", override, tmp=tmp_path))
    assert text.startswith(msg), text


# --- npy: memory-mapped features -------------------------------------------------------------------

def test_npy_memmap_no_copy_and_label_files(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 16)).astype(np.float32)
    np.save(tmp_path / "X.npy", X)
    y = np.repeat([5, 7, 9], 100)
    lab = np.where(np.arange(300) % 3 == 0, y, -1)
    np.save(tmp_path / "y.npy", lab)
    d = load_dataset("npy", path=str(tmp_path / "X.npy"), labels_path=str(tmp_path / "y.npy"))
    assert isinstance(d.X.base, np.memmap) or isinstance(d.X, np.memmap)
    assert d.X.dtype == np.float32 and not d.X.flags.writeable            # the file itself, read-only
    np.testing.assert_array_equal(d.X, X)
    assert d.classes.tolist() == [5, 7, 9] and d.labeled.tolist() == list(range(0, 300, 3))
    # the same labels from a text file: one per line, empty = unlabelled
    (tmp_path / "y.txt").write_text("\n".join("" if v == -1 else f"c{v}" for v in lab) + "\n")
    t = load_dataset("npy", path=str(tmp_path / "X.npy"), labels_path=str(tmp_path / "y.txt"), mmap=False)
    assert not isinstance(t.X, np.memmap) and t.classes.tolist() == ["c5", "c7", "c9"]
    assert t.labeled.tolist() == d.labeled.tolist() and t.y_observed.tolist() == d.y_observed.tolist()


def test_make_dataset_keeps_a_float32_memmap_and_checks_nan_in_blocks(tmp_path, monkeypatch):
    import lgcexp.data.dataset as ds
    from lgcexp.data import make_dataset

    X = np.random.default_rng(1).normal(size=(1000, 8)).astype(np.float32)
    X[[17, 640], 3] = np.inf
    np.save(tmp_path / "X.npy", X)
    mm = np.load(tmp_path / "X.npy", mmap_mode="r")
    monkeypatch.setattr(ds, "FINITE_CHECK_ELEMENTS", 64)                # 8 rows a block
    with pytest.raises(UserError, match=r"NaN or Inf in 2 of 1000 rows \(first bad row: 17\)"):
        make_dataset("t", mm, np.arange(1000) % 2)
    X[[17, 640], 3] = 0
    np.save(tmp_path / "X.npy", X)
    mm = np.load(tmp_path / "X.npy", mmap_mode="r")
    d = make_dataset("t", mm, np.arange(1000) % 2)
    assert np.shares_memory(d.X, mm) and d.X.dtype == np.float32        # no copy


def test_npy_bad_input(tmp_path):
    X = np.zeros((6, 2), dtype=np.float32)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "short.npy", np.array([0, 1, 0]))
    npy = lambda **kw: load_dataset("npy", **{"path": str(tmp_path / "X.npy"), **kw})  # noqa: E731
    assert err(npy, labels_path=str(tmp_path / "no.npy")).startswith(
        f"dataset.labels_path={tmp_path / 'no.npy'} is not allowed: no such file")
    assert err(npy, labels_path=str(tmp_path / "short.npy")) == (
        f"dataset.labels_path={tmp_path / 'short.npy'}: holds 3 labels but X has 6 rows; they must be equal")
    assert "dataset.labels_path has no value" in err(npy)
    (tmp_path / "y.json").write_text("[]")
    assert "use a .npy file or a text file" in err(npy, labels_path=str(tmp_path / "y.json"))
    np.save(tmp_path / "X1.npy", np.zeros(6))
    np.save(tmp_path / "y6.npy", np.array([0, 1] * 3))
    assert "X must be 2-D" in err(load_dataset, "npy", path=str(tmp_path / "X1.npy"),
                                  labels_path=str(tmp_path / "y6.npy"))
    np.save(tmp_path / "Xs.npy", np.array([["a", "b"]] * 6))
    assert "not numeric" in err(load_dataset, "npy", path=str(tmp_path / "Xs.npy"),
                                labels_path=str(tmp_path / "y6.npy"))


# --- npz: the file's own labelled set, memory mapping ---------------------------------------------

def test_npz_labeled_and_y_clean(tmp_path):
    X, y = blobs(n_per=5)
    yl = np.where(np.arange(15) % 3 == 0, NAMES[y], "")
    y_clean = NAMES[y].copy()
    y_clean[2] = ""
    np.savez(tmp_path / "a.npz", X=X, y=yl, labeled=np.arange(0, 15, 3), y_clean=y_clean)
    d = load_dataset("npz", path=str(tmp_path / "a.npz"))
    assert d.has_given_labels and d.labeled.tolist() == [0, 3, 6, 9, 12]
    assert d.original_labels(d.y_observed).tolist() == NAMES[y[::3]].tolist()
    assert d.truth_known.sum() == 14 and d.y[2] == -1
    mask = np.zeros(15, dtype=bool)
    mask[::3] = True
    np.savez(tmp_path / "b.npz", X=X, y=yl, labeled=mask)
    b = load_dataset("npz", path=str(tmp_path / "b.npz"))
    assert b.labeled.tolist() == d.labeled.tolist() and not b.truth_known.any()
    np.savez(tmp_path / "c.npz", X=X, y=y, y_clean=y)
    assert "has y_clean but no array 'labeled'" in err(load_dataset, "npz", path=str(tmp_path / "c.npz"))
    np.savez(tmp_path / "d.npz", X=X, y=yl, labeled=np.array([0, 1]))
    assert "y is empty or NaN at 1 labelled row(s) (first: row 1)" in err(load_dataset, "npz",
                                                                          path=str(tmp_path / "d.npz"))


def test_npz_uncompressed_is_memory_mapped(tmp_path):
    X = np.random.default_rng(0).normal(size=(50, 4)).astype(np.float32)
    y = np.arange(50) % 2
    np.savez(tmp_path / "u.npz", X=X, y=y)
    np.savez_compressed(tmp_path / "c.npz", X=X, y=y)
    u = load_dataset("npz", path=str(tmp_path / "u.npz"))
    c = load_dataset("npz", path=str(tmp_path / "c.npz"))
    assert isinstance(u.X.base, np.memmap) or isinstance(u.X, np.memmap)
    assert not isinstance(c.X, np.memmap) and not isinstance(c.X.base, np.memmap)
    np.testing.assert_array_equal(u.X, X)
    np.testing.assert_array_equal(c.X, X)
    assert u.fingerprint() == c.fingerprint()


# --- diagnosis runs end to end ---------------------------------------------------------------------

def _diag_csv(tmp_path: Path, clean: bool = False, name: str = "d.csv") -> str:
    X, y = blobs(n_per=40)
    labels = given_labels(y, every=4, wrong=(8, 48))
    return write_csv(tmp_path / name, X, labels, NAMES[y] if clean else None)


def test_diagnosis_run_without_truth(tmp_path):
    path = _diag_csv(tmp_path)
    out = tmp_path / "run"
    r = run(make_cfg("dataset=csv", f"dataset.path={path}", "algo=lgc", tmp=tmp_path), out_dir=out)
    res = json.loads((out / "result.json").read_text())
    assert res["mode"] == "diagnosis" and res["truth"] == "none" and "no accuracy against truth" in res["note"]
    assert not any(k in res for k in ("acc_unlabeled", "acc_labeled", "n_flipped", "detect_auc"))
    assert res["noise"] is None and res["noise_rate"] is None and res["not_used"] == {}
    assert res["n_labeled"] == 30 and res["n_unlabeled"] == 90 and res["classes"] == ["cat", "dog", "emu"]
    assert res["label_issue_report"] == ["label_issues.csv", "label_issues.png"] and r["mode"] == "diagnosis"
    # the report: one row per given label, the two wrong ones flagged first, in the file's label values
    issues = pd.read_csv(out / "label_issues.csv")
    assert list(issues.columns) == ["index", "given_label", "suggested_label", "label_quality", "issue_probability",
                                    "is_label_issue", "issue_type"]
    assert res["label_issue_evidence"] == "label_issue_evidence.csv"
    ev = pd.read_csv(out / "label_issue_evidence.csv")
    assert ev["index"].tolist() == issues["index"][issues["is_label_issue"]].tolist()
    assert ev["issue_type"].isin(["wrong", "ambiguous"]).all() and ev["neighbours"].str.contains(":").all()
    assert len(issues) == 30 and sorted(issues["index"][:2]) == [8, 48]
    assert issues["is_label_issue"].sum() == 2 and res["n_label_issues"] == 2
    assert issues["given_label"][issues["index"] == 8].item() == "dog"          # blob 0 is "cat"
    assert issues["suggested_label"][issues["index"] == 8].item() == "cat"
    assert (out / "label_issues.png").stat().st_size > 1000
    pred = pd.read_csv(out / "predictions.csv", keep_default_na=False)
    assert list(pred.columns) == ["index", "predicted", "confidence", "score", "given_label"]
    assert len(pred) == 120 and pred["index"].tolist() == list(range(120))
    assert set(pred["predicted"]) == {"cat", "dog", "emu"}                   # the file's own label values
    X, y = blobs(n_per=40)
    assert (pred["predicted"] == NAMES[y]).mean() > 0.95                     # the blobs are easy
    assert (pred["given_label"] != "").sum() == 30 and pred["given_label"][8] == "dog"
    assert ((pred["confidence"] > 0) & (pred["confidence"] <= 1)).all()
    labels = pd.read_csv(out / "labels.csv")
    assert list(labels.columns) == ["index", "observed_label", "predicted"] and len(labels) == 30
    assert labels["index"].tolist() == list(range(0, 120, 4))


def test_diagnosis_ignores_labels_n_and_noise_and_records_them(tmp_path):
    path = _diag_csv(tmp_path)
    a = run(make_cfg("dataset=csv", f"dataset.path={path}", "algo=lgc", tmp=tmp_path), out_dir=tmp_path / "a")
    b = run(make_cfg("dataset=csv", f"dataset.path={path}", "algo=lgc", "labels.n=10", "noise.rate=0.4",
                     "seed=3", tmp=tmp_path), out_dir=tmp_path / "b")
    assert b["not_used"] == {"labels.n": 10, "noise": "uniform", "noise.rate": 0.4, "seed": 3}
    assert b["n_labeled"] == a["n_labeled"] == 30
    pa, pb = (pd.read_csv(tmp_path / k / "predictions.csv") for k in "ab")
    assert pa.equals(pb)


def test_clean_labels_are_for_scoring_only(tmp_path):
    """Scramble the clean labels: no prediction changes; only the scores do."""
    X, y = blobs(n_per=40)
    labels = given_labels(y, every=4, wrong=(8, 48))
    scrambled = NAMES[(y + 1) % 3].astype(object)
    scrambled[5] = ""                                                        # and one unknown
    outs = {}
    for tag, clean in (("right", NAMES[y]), ("scrambled", scrambled)):
        path = write_csv(tmp_path / f"{tag}.csv", X, labels, clean)
        outs[tag] = run(make_cfg("dataset=csv", f"dataset.path={path}", "dataset.clean_column=truth", "algo=lgc",
                                 tmp=tmp_path), out_dir=tmp_path / tag)
    pr = pd.read_csv(tmp_path / "right" / "predictions.csv")
    ps = pd.read_csv(tmp_path / "scrambled" / "predictions.csv")
    cols = ["index", "predicted", "confidence", "score", "given_label"]
    assert pr[cols].equals(ps[cols])
    lr = pd.read_csv(tmp_path / "right" / "labels.csv")
    ls = pd.read_csv(tmp_path / "scrambled" / "labels.csv")
    assert lr[["index", "observed_label", "predicted"]].equals(ls[["index", "observed_label", "predicted"]])
    right, scr = outs["right"], outs["scrambled"]
    assert right["truth"] == "all" and scr["truth"] == "partial"
    assert right["acc_unlabeled"] > 0.95 and scr["acc_unlabeled"] < 0.05
    assert right["n_flipped"] == 2 and lr["flipped"].sum() == 2              # the two wrong given labels
    assert scr["n_scored_unlabeled"] == 89 and scr["n_scored_labeled"] == 30
    assert "never for fitting" in right["note"]


def test_label_issue_hook_receives_the_judgement(tmp_path, monkeypatch):
    import lgcexp.issues.diagnosis as dg

    seen = {}

    def hook(issues, given, out_dir):
        seen.update(issues=issues, given=given, out_dir=out_dir)
        (out_dir / "issues.csv").write_text("index\n8\n")
        return ["issues.csv"]

    monkeypatch.setattr(dg, "report_label_issues", hook)
    path = _diag_csv(tmp_path)
    r = run(make_cfg("dataset=csv", f"dataset.path={path}", "algo=lgc", tmp=tmp_path), out_dir=tmp_path / "o")
    assert r["label_issue_report"] == ["issues.csv"] and seen["out_dir"] == tmp_path / "o"
    assert seen["given"].labeled.tolist() == list(range(0, 120, 4))
    assert seen["given"].values[2] == "dog" and (seen["given"].y_clean == -1).all()
    assert seen["issues"].quality.shape == (30,) and seen["issues"].is_issue[[2, 12]].all()
    assert (tmp_path / "o" / "issues.csv").exists()
    # a method that does not judge labels: no judgement, no report
    monkeypatch.undo()
    r = run(make_cfg("dataset=csv", f"dataset.path={path}", "algo=gfhf", tmp=tmp_path), out_dir=tmp_path / "g")
    assert r["label_issue_report"] == [] and not (tmp_path / "g" / "label_issues.csv").exists()


def test_npy_and_npz_diagnosis_runs(tmp_path):
    X, y = blobs(n_per=30)
    np.save(tmp_path / "X.npy", X.astype(np.float32))
    lab = np.where(np.arange(90) % 5 == 0, y + 1, -1)
    np.save(tmp_path / "y.npy", lab)
    r = run(make_cfg("dataset=npy", f"dataset.path={tmp_path}/X.npy", f"dataset.labels_path={tmp_path}/y.npy",
                     "algo=lgc", tmp=tmp_path), out_dir=tmp_path / "npy")
    assert r["mode"] == "diagnosis" and r["classes"] == [1, 2, 3] and r["n_labeled"] == 18
    pred = pd.read_csv(tmp_path / "npy" / "predictions.csv")
    assert (pred["predicted"] == y + 1).mean() > 0.95
    np.savez(tmp_path / "d.npz", X=X, y=y, labeled=np.arange(0, 90, 5), y_clean=y)
    r = run(make_cfg("dataset=npz", f"dataset.path={tmp_path}/d.npz", "algo=lgc", tmp=tmp_path))
    assert r["mode"] == "diagnosis" and r["truth"] == "all" and r["acc_unlabeled"] > 0.95


def test_npz_without_labeled_still_samples(tmp_path):
    X, y = blobs(n_per=20)
    np.savez(tmp_path / "s.npz", X=X, y=y)
    msg = err(run, make_cfg("dataset=npz", f"dataset.path={tmp_path}/s.npz", tmp=tmp_path))
    assert msg.startswith("labels.n has no value: this data has no labelled set of its own")
    r = run(make_cfg("dataset=npz", f"dataset.path={tmp_path}/s.npz", "labels.n=9", tmp=tmp_path))
    assert r["mode"] == "sampled" and r["n_labeled"] == 9


def test_autol_diagnosis_with_partial_truth(tmp_path):
    """A method that judges labels: its class columns come back in the file's label values, and detection
    is scored on the labelled points with a known clean label only."""
    X, y = blobs(n_per=30)
    labels = given_labels(y, every=3, wrong=(9, 39))
    clean = NAMES[y].astype(object)
    clean[[0, 3]] = ""
    path = write_csv(tmp_path / "p.csv", X, labels, clean)
    r = run(make_cfg("dataset=csv", f"dataset.path={path}", "dataset.clean_column=truth", "algo=autoL",
                     "algo.params.steps=200", "algo.params.chunk=100", "algo.params.xla=false", tmp=tmp_path),
            out_dir=tmp_path / "al")
    assert r["truth"] == "partial" and r["n_flipped"] == 2 and r["n_scored_labeled"] == 28
    assert "detect_auc" in r
    lab = pd.read_csv(tmp_path / "al" / "labels.csv", keep_default_na=False)
    assert set(lab["corrected_label"]) <= {"cat", "dog", "emu"} and set(lab["lgc_label"]) <= {"cat", "dog", "emu"}
    assert lab["clean_label"][0] == "" and lab["flipped"][0] == ""
    issues = pd.read_csv(tmp_path / "al" / "label_issues.csv", keep_default_na=False)
    assert issues["is_flipped"][issues["index"] == 0].item() == ""            # truth unknown there
    assert set(issues["given_label"]) <= {"cat", "dog", "emu"} and r["detect_f1"] > 0.5
