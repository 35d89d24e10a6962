"""End-to-end runs of the pipeline (in-process) and its records."""
import json

import numpy as np
import pandas as pd
import pytest
from helpers import make_cfg

from lgcexp.errors import UserError
from lgcexp.pipeline import run

REQUIRED = ["dataset", "algo", "loss", "seed", "noise_rate", "n", "n_classes", "n_labeled", "n_flipped",
            "acc_unlabeled", "acc_labeled", "stage_seconds", "config", "config_hash"]


def test_digits_default_run_writes_records(tmp_path):
    r = run(make_cfg(tmp=tmp_path), out_dir=tmp_path / "run")
    res = json.loads((tmp_path / "run" / "result.json").read_text())
    for key in REQUIRED:
        assert key in res
    assert res["dataset"] == "digits" and res["n"] == 1797 and res["n_labeled"] == 100 and res["n_flipped"] == 20
    counts = np.array(res["noise_counts"])  # realised (true, observed) label counts
    assert res["noise"] == "uniform" and counts.shape == (10, 10) and counts.sum() == 100 and np.trace(counts) == 80
    assert set(res["stage_seconds"]) == {"load", "labels", "features", "graph", "eig", "optimize", "evaluate"}
    assert 0.8 < res["acc_unlabeled"] <= 1.0
    labels = pd.read_csv(tmp_path / "run" / "labels.csv")
    assert list(labels.columns[:5]) == ["index", "clean_label", "observed_label", "flipped", "predicted"]
    assert len(labels) == 100 and labels["flipped"].sum() == 20
    assert (labels["clean_label"] != labels["observed_label"]).sum() == 20
    # labelled accuracy is measured against the clean labels
    assert res["acc_labeled"] == pytest.approx(np.mean(labels["predicted"] == labels["clean_label"]))
    assert r["config_hash"] == res["config_hash"]


def test_same_config_and_seed_same_numbers(tmp_path):
    a = run(make_cfg("seed=4", tmp=tmp_path))
    b = run(make_cfg("seed=4", tmp=tmp_path))
    c = run(make_cfg("seed=5", tmp=tmp_path))
    assert a["acc_unlabeled"] == b["acc_unlabeled"] and a["config_hash"] == b["config_hash"]
    assert a["graph"]["cache_hit"] is False and b["graph"]["cache_hit"] is True
    assert c["config_hash"] != a["config_hash"]


def test_unlabeled_labels_never_reach_the_algorithm(tmp_path, monkeypatch):
    """Scramble the true labels of the unlabelled points (same labelled split): predictions must not change."""
    import lgcexp.pipeline as pl
    from lgcexp.data import Dataset

    real_load, real_split = pl.load, pl.sample_and_corrupt
    kept = {}

    def split_once(y, n, rate=0.0, seed=0, **kw):
        if "split" not in kept:
            kept["split"] = real_split(y, n, rate, seed, **kw)
        return kept["split"]

    monkeypatch.setattr(pl, "sample_and_corrupt", split_once)
    r1 = run(make_cfg("algo=gfhf", tmp=tmp_path), out_dir=tmp_path / "a")

    def scrambled(plan, paths):
        ds = real_load(plan, paths)
        y = ds.y.copy()
        unl = kept["split"].unlabeled_mask(ds.n)
        y[unl] = (y[unl] + 1) % ds.n_classes  # every unlabelled label is now wrong
        return Dataset(name=ds.name, X=ds.X, y=y, n_classes=ds.n_classes)

    monkeypatch.setattr(pl, "load", scrambled)
    r2 = run(make_cfg("algo=gfhf", tmp=tmp_path), out_dir=tmp_path / "b")
    pa = pd.read_csv(tmp_path / "a" / "labels.csv")
    pb = pd.read_csv(tmp_path / "b" / "labels.csv")
    assert pa.equals(pb)
    assert r1["acc_unlabeled"] > 0.8 and r2["acc_unlabeled"] < 0.2  # same predictions, scored against new truth


def test_spirals_and_npz(tmp_path):
    r = run(make_cfg("dataset=spirals", "algo=lgc", tmp=tmp_path))
    assert r["n"] == 1000 and r["n_classes"] == 2 and r["acc_unlabeled"] > 0.9
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(size=(50, 3)), rng.normal(size=(50, 3)) + 5])
    y = np.repeat(["a", "b"], 50)
    np.savez(tmp_path / "mine.npz", X=X, y=y)
    r = run(make_cfg("dataset=npz", f"dataset.path={tmp_path}/mine.npz", "labels.n=10", "graph.k=5", tmp=tmp_path))
    assert r["n"] == 100 and r["acc_unlabeled"] == 1.0


@pytest.mark.parametrize("override,msg", [
    ("noise.rate=1.5", "noise.rate=1.5"),
    ("noise.rate=-0.1", "noise.rate=-0.1"),
    ("labels.n=5", "labels.n=5"),
    ("labels.n=5000", "labels.n=5000"),
    ("graph.k=1797", "graph.k=1797"),
    ("graph.sigma=-2", "graph.sigma=-2"),
    ("graph.sigma=median", "graph.sigma=median"),
    ("loss=hinge", "loss=hinge"),
    ("seed=-1", "seed=-1"),
    ("algo.params.alpha=1.2", "algo.params.alpha=1.2"),
])
def test_bad_input_is_one_clear_line(tmp_path, override, msg):
    with pytest.raises(UserError) as exc:
        run(make_cfg(override, tmp=tmp_path))
    text = str(exc.value)
    assert msg in text and "\n" not in text


@pytest.mark.parametrize("overrides,msg", [
    (("algo=autoD", "eig.p=1797"), "p=1797"),
    (("algo=autoD", "eig.p=5"), "p=5"),
    (("algo=autoD", "eig.solver=magic"), "eig.solver=magic"),
    (("algo=siis", "algo.params.m=4000"), "algo.params.m=4000"),
])
def test_eigen_settings_refused_before_the_graph(tmp_path, monkeypatch, overrides, msg):
    import lgcexp.pipeline as pl

    def no_graph(*a, **k):
        raise AssertionError("the graph stage must not start")

    monkeypatch.setattr(pl.Graph, "__init__", no_graph)
    with pytest.raises(UserError) as exc:
        run(make_cfg(*overrides, tmp=tmp_path))
    assert msg in str(exc.value)


def test_npz_without_labels_count_is_refused(tmp_path):
    with pytest.raises(UserError, match="labels.n|dataset.path"):
        run(make_cfg("dataset=npz", tmp=tmp_path))


def test_isolet_lgc_end_to_end(tmp_path, data_dir):
    r = run(make_cfg("dataset=isolet", "noise.rate=0.6", "seed=3", f"paths.data_dir={data_dir}", tmp=tmp_path))
    assert r["n"] == 7797 and r["n_labeled"] == 1040 and r["n_flipped"] == 624
    assert r["acc_labeled"] == pytest.approx(0.40, abs=0.001)  # LGC keeps the noisy labels
    assert 0.68 < r["acc_unlabeled"] < 0.76
    assert r["graph"]["sigma"] == 100.0
    # the count at 60 % noise with 26 classes: calibrated by temperature alone it fell to 0 (docs/label_issues.md#count)
    assert abs(r["detect_estimated_issues"] - 624) < 0.25 * 624


@pytest.mark.mnist
def test_mnist_lgc_end_to_end(tmp_path, data_dir):
    r = run(make_cfg("dataset=mnist", "seed=0", f"paths.data_dir={data_dir}"))
    assert r["n"] == 70000 and r["n_labeled"] == 100
    assert r["graph"]["sigma"] == pytest.approx(423.57, abs=0.05)
    assert r["acc_unlabeled"] >= 0.92 and r["acc_labeled"] == 1.0
