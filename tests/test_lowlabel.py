"""The low-label experiments' runs table and tables (lgcexp/lowlabel.py, ``lgcexp-tables --lowlabel``): the committed
tables rebuild byte for byte from the committed rows, docs/poisson.md's generated blocks equal them, the numbers
equal an independent computation on made-up rows, and the experiments compose as the tables expect."""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hydra import compose, initialize_config_dir

from lgcexp import lowlabel
from lgcexp.tables import main as tables_main

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "results" / "lowlabel" / "runs.csv"
TABLES = ROOT / "results" / "lowlabel" / "tables"
DOC = ROOT / "docs" / "poisson.md"
sys.path.insert(0, str(ROOT / "scripts"))
import reproduce_lowlabel  # noqa: E402


def test_committed_tables_rebuild_byte_for_byte(tmp_path):
    assert tables_main(["--lowlabel", "--from-csv", str(RUNS), "--out", str(tmp_path), "--no-report"]) == 0
    committed = sorted(p.name for p in TABLES.iterdir() if p.suffix in (".md", ".csv"))
    rebuilt = sorted(p.name for p in tmp_path.iterdir())
    assert committed == rebuilt and "lowlabel_digits.md" in committed
    for name in committed:
        assert (tmp_path / name).read_bytes() == (TABLES / name).read_bytes(), name


def test_docs_blocks_are_the_committed_tables():
    blocks = lowlabel.doc_blocks(DOC)
    assert {"lowlabel_digits.md", "lowlabel_digits_noise_k5.md", "lowlabel_mnist_raw.md", "lowlabel_mnist.md",
            "lowlabel_mnist_mbo.md", "lowlabel_isolet_noise_k5.md", "lowlabel_isolet_noise_k10.md",
            "lowlabel_mnist_noise_k5.md"} <= set(blocks)
    for name, body in blocks.items():
        assert body == (TABLES / name).read_text(), f"docs/poisson.md's block {name}: run make tables-lowlabel"


def test_committed_rows_are_the_experiments():
    runs = pd.read_csv(RUNS)
    assert list(runs.columns) == lowlabel.LOWLABEL_COLUMNS
    assert not runs.duplicated(["experiment", "config_hash"]).any()
    lowlabel.check_unique_places(runs, "results/lowlabel/runs.csv")   # one run per place of a table
    assert set(runs["experiment"]) <= set(reproduce_lowlabel.FULL)
    digits = runs[runs["experiment"] == "lowlabel_digits"]
    assert len(digits) == 7 * 3 * 20  # methods x labels per class x seeds of conf/experiment/lowlabel_digits.yaml
    assert (digits["n_labeled"] == 10 * digits["per_class"]).all()
    key = re.search(r"\b([0-9a-f]{32})\b", (ROOT / "conf" / "experiment" / "lowlabel_mnist.yaml").read_text()).group(1)
    for experiment, algo in [("lowlabel_mnist", "poisson"), ("lowlabel_mnist_mbo", "poissonMBO")]:
        vae = runs[runs["experiment"] == experiment]   # 1 / 3 / 5 labels per class x seeds 0-99, on the recorded codes
        assert len(vae) == 300 and set(vae["algo"]) == {algo} and (vae["features_key"] == key).all()
        assert sorted(vae.groupby("per_class")["seed"].apply(lambda s: tuple(sorted(s))).items()) == \
            [(k, tuple(range(100))) for k in (1, 3, 5)]
    # conf/experiment/lowlabel_isolet_noise.yaml: 8 methods x 5 and 10 per class x uniform / confusion at 0 / 20 / 40 %
    # x seeds 0-19, every cell complete; 26 classes, and round(rate x labels) labels flipped
    iso = runs[runs["experiment"] == "lowlabel_isolet_noise"]
    assert set(iso["algo"]) == {"gfhf", "lgc", "poisson", "poissonMBO", "autoL", "auto", "poissonL", "poissonBayes"}
    cells = iso.groupby(["algo", "per_class", "noise", "noise_rate"])["seed"].apply(lambda s: tuple(sorted(s)))
    assert len(cells) == 8 * 2 * 2 * 3 and (cells == tuple(range(20))).all()
    assert (iso["n_labeled"] == 26 * iso["per_class"]).all()
    assert (iso["n_flipped"] == (iso["noise_rate"] * iso["n_labeled"]).round()).all()
    # conf/experiment/lowlabel_mnist_noise.yaml: 10 methods x 5 per class x uniform / confusion at 0 / 20 / 40 % x
    # seeds 0-19 on the recorded codes, every cell complete; lowlabel_mnist_noise_cutssl: CutSSL, the same cells, seeds
    # 0-19;
    # lowlabel_mnist_noise_cutsslL: CutSSL-L at 40 %, seeds 0-19 (their runs join the same experiment); 50 labels
    mn = runs[runs["experiment"] == "lowlabel_mnist_noise"]
    full = {"gfhf", "lgc", "meanshift", "poisson", "poissonMBO", "autoL", "auto", "poissonL", "poissonLMBO",
            "poissonBayes", "cutssl"}
    assert set(mn["algo"]) == full | {"cutsslL"}
    cells = mn.groupby(["algo", "noise", "noise_rate"])["seed"].apply(lambda s: tuple(sorted(s)))
    assert len(cells) == 11 * 2 * 3 + 2
    assert (cells == tuple(range(20))).all()
    assert set(cells["cutsslL"].index) == {("uniform", 0.4), ("confusion", 0.4)}
    assert (mn["per_class"] == 5).all() and (mn["n_labeled"] == 50).all() and (mn["features_key"] == key).all()
    assert (mn["n_flipped"] == (mn["noise_rate"] * 50).round()).all()


def _runs(rows):
    base = {"experiment": "e", "dataset": "mnist", "features": "vae", "features_key": "k", "noise": "none",
            "noise_rate": 0.0, "n_flipped": 0, "n_dropped": np.nan, "seconds_total": 1.0}
    return lowlabel.tidy(pd.DataFrame([{**base, "config_hash": f"h{i}", **r} for i, r in enumerate(rows)]))


def test_protocol_table_against_independent_numbers():
    rng = np.random.default_rng(0)
    acc = rng.uniform(0.85, 0.95, 7)
    T = [60, 104, 58, 200, 77, 91, 66]
    runs = _runs([{"algo": "poisson", "per_class": 1, "seed": s, "n_labeled": 10, "acc_unlabeled": a,
                   "solver_iterations": t} for s, (a, t) in enumerate(zip(acc, T))]
                 + [{"algo": "lgc", "per_class": 1, "seed": 0, "n_labeled": 10, "acc_unlabeled": 0.5,
                     "solver_iterations": np.nan}])
    cells, md = lowlabel.protocol_table(runs)
    x = 100 * acc
    mean, sd = sum(x) / len(x), (sum((v - sum(x) / len(x)) ** 2 for v in x) / len(x)) ** 0.5
    se = (sum((v - mean) ** 2 for v in x) / (len(x) - 1)) ** 0.5 / len(x) ** 0.5
    line = next(v for v in md.splitlines() if "`poisson`" in v)
    assert line == (f"| 1 | `poisson` | 7 | {mean:.2f} ± {sd:.2f} | {se:.2f} | 90.2 | {mean - 90.2:+.2f} | "
                    f"{np.mean(T):.0f} (58–200) |")
    # LGC: one trial (no standard error), no published figure, no step count; listed before Poisson
    assert md.splitlines()[2] == "| 1 | `lgc` | 1 | 50.00 ± 0.00 | – | – | – | – |"


def test_noise_table_pairs_trials_and_merges_the_clean_runs():
    rows = []
    acc = {("poisson", 0): 0.80, ("poisson", 1): 0.70, ("poissonL", 0): 0.85, ("poissonL", 1): 0.69,
           ("poisson", 2): 0.75}
    for (algo, seed), a in acc.items():
        rows.append({"algo": algo, "per_class": 5, "seed": seed, "noise": "uniform", "noise_rate": 0.2,
                     "n_labeled": 50, "acc_unlabeled": a, "solver_iterations": 60})
        for model in ("uniform", "confusion"):  # the 0 % runs of both models: the same draw, counted once
            rows.append({"algo": algo, "per_class": 5, "seed": seed, "noise": model, "noise_rate": 0.0,
                         "n_labeled": 50, "acc_unlabeled": a + 0.1, "solver_iterations": 60})
    cells, md = lowlabel.noise_table(_runs(rows))
    lines = md.splitlines()
    assert lines[0] == "| noise | trials | `poisson` | `poissonL` | PoissonL - Poisson (s.e., wins) |"
    assert lines[2].startswith("| none, 0 % | 3 | ")
    d = np.array([5.0, -1.0])  # paired over the seeds both ran (0 and 1), seed 2 left out
    assert lines[3] == (f"| uniform, 20 % | 3 | 75.00 ± 4.08 | 77.00 ± 8.00 (2) | "
                        f"{d.mean():+.2f} ± {d.std(ddof=1) / np.sqrt(2):.2f} (1/2) |")
    assert cells[(cells["noise"] == "none") & (cells["method"] == "poisson")]["n"].item() == 3


def test_flags_table_against_independent_numbers():
    """Means of the recorded flags per method and setting; a method without recorded flags has no column, a 0 %
    row shows its false alarms, a table without any flags is not written."""
    rows = []
    f1 = {("lgc", 0): 0.5, ("lgc", 1): 0.7, ("poissonBayes", 0): 0.9, ("poissonBayes", 1): 0.8}
    for (algo, seed), f in f1.items():
        rows.append({"algo": algo, "per_class": 5, "seed": seed, "noise": "uniform", "noise_rate": 0.2, "n_labeled": 50,
                     "n_flipped": 10, "acc_unlabeled": 0.8, "n_label_issues": 10 + seed, "detect_estimated_issues": 9,
                     "detect_f1": f, "detect_ap": f - 0.1})
        rows.append({"algo": algo, "per_class": 5, "seed": seed, "noise": "uniform", "noise_rate": 0.0, "n_labeled": 50,
                     "n_flipped": 0, "acc_unlabeled": 0.9, "n_label_issues": 2 * seed, "detect_estimated_issues": 1,
                     "detect_f1": np.nan, "detect_ap": np.nan})
    unflagged = {"algo": "poisson", "per_class": 5, "seed": 0, "noise": "uniform", "noise_rate": 0.2, "n_labeled": 50,
                 "n_flipped": 10, "acc_unlabeled": 0.7}
    rows.append(unflagged)
    # the same 0 % trials drawn under the other noise model, recorded before flags were kept: they must not displace
    # the flagged ones (noise_rows keeps one model's 0 % runs, the first by name)
    rows += [{"algo": a, "per_class": 5, "seed": s, "noise": "confusion", "noise_rate": 0.0, "n_labeled": 50,
              "n_flipped": 0, "acc_unlabeled": 0.9} for a in ("lgc", "poissonBayes") for s in (0, 1)]
    # a method with flags in one trial of two
    rows.append({"algo": "poissonL", "per_class": 5, "seed": 0, "noise": "uniform", "noise_rate": 0.2, "n_labeled": 50,
                 "n_flipped": 10, "acc_unlabeled": 0.8, "n_label_issues": 9, "detect_estimated_issues": 9,
                 "detect_f1": 0.95, "detect_ap": np.nan})
    cells, md = lowlabel.flags_table(_runs(rows))
    lines = md.splitlines()
    assert lines[0] == ("| noise | flipped (mean) | `lgc` F1 / AP / flagged | `poissonL` F1 / AP / flagged | "
                        "`poissonBayes` F1 / AP / flagged |")
    assert lines[2] == "| none, 0 % | 0.0 | – / – / 1.0 | – | – / – / 1.0 |"
    assert lines[3] == "| uniform, 20 % | 10.0 | 0.600 / 0.500 / 10.5 | 0.950 / – / 9.0 (1) | 0.850 / 0.750 / 10.5 |"
    assert set(cells["method"]) == {"lgc", "poissonL", "poissonBayes"}
    assert lowlabel.flags_table(_runs([unflagged])) is None
    caption = lowlabel.flags_caption("e", _runs(rows), 5)
    assert "seeds 0–1 (9 runs)" in caption   # 4 + 4 + 1 flagged runs, the unflagged 0 % duplicates left out


def test_count_table_means_each_methods_estimate_per_setting():
    rows = []
    est = {("lgc", 0): (8, 1), ("lgc", 1): (13, 2), ("poissonBayes", 0): (20, 0), ("poissonBayes", 1): (np.nan, 0)}
    for (algo, seed), (noisy, clean) in est.items():
        for rate, e, flipped in ((0.2, noisy, 10 + seed), (0.0, clean, 0)):
            rows.append({"algo": algo, "per_class": 5, "seed": seed, "noise": "confusion", "noise_rate": rate,
                         "n_labeled": 50, "n_flipped": flipped, "acc_unlabeled": 0.8, "n_label_issues": 3,
                         "detect_estimated_issues": e, "detect_f1": 0.5, "detect_ap": 0.5})
    cells, _ = lowlabel.flags_table(_runs(rows))
    lines = lowlabel.count_table(cells).splitlines()
    assert lines[0] == "| noise | flipped (mean) | `lgc` estimated | `poissonBayes` estimated |"
    assert lines[2] == "| none, 0 % | 0.0 | 1.5 | 0.0 |"
    # a run without a count is left out of the mean, and the runs that have one are counted in brackets
    assert lines[3] == "| confusion, 20 % | 10.5 | 10.5 | 20.0 (1) |"
    assert "seeds 0–1 (7 runs with a count)" in lowlabel.count_caption("e", _runs(rows), 5)
    # the flipped mean is over the row's runs, whatever each method's number of runs
    more = rows + [{**rows[0], "algo": "poissonL", "seed": s, "n_flipped": 40} for s in (0, 1, 2, 3)]
    lines = lowlabel.count_table(lowlabel.flags_table(_runs(more))[0]).splitlines()
    assert lines[0].endswith("| `poissonL` estimated | `poissonBayes` estimated |")
    assert lines[3] == f"| confusion, 20 % | {(10 + 11 + 10 + 11 + 4 * 40) / 8:.1f} | 10.5 (2) | 8.0 | 20.0 (1) |"


def _record(algo, seed, k, acc, exp_hash):
    return {"dataset": "digits", "algo": algo, "seed": seed, "noise": "none", "noise_rate": 0.0, "n_labeled": 10 * k,
            "n_flipped": 0, "acc_unlabeled": acc, "solver_iterations": 51, "stage_seconds": {"load": 1.0, "graph": 0.5},
            "config": {"labels": {"per_class": k}}, "config_hash": exp_hash}


def test_collect_and_merge(tmp_path):
    for exp, algo, seed, h in [("a", "poisson", 0, "h1"), ("a", "poisson", 1, "h2"), ("b", "lgc", 0, "h3")]:
        d = tmp_path / exp / "digits" / algo / f"seed={seed}_{h}"
        d.mkdir(parents=True)
        (d / "result.json").write_text(json.dumps(_record(algo, seed, 3, 0.9, h)))
    new = lowlabel.collect(tmp_path)
    assert list(new["experiment"]) == ["a", "a", "b"] and list(new["per_class"]) == [3, 3, 3]
    assert list(new["features"]) == ["raw"] * 3 and new["seconds_total"].tolist() == [1.5] * 3
    old = new.copy()
    old.loc[old["config_hash"] == "h1", ["acc_unlabeled", "config_hash"]] = [0.1, "h0"]  # an older config, same place
    old = pd.concat([old, old.iloc[[0]].assign(experiment="c", config_hash="h9")])
    merged = lowlabel.merge(old, new[new["config_hash"] == "h1"])
    assert len(merged) == 4  # h0 replaced by h1 (same experiment, method, labels, noise, seed); h2, h3 and c kept
    assert "h0" not in set(merged["config_hash"])
    assert merged.loc[merged["config_hash"] == "h1", "acc_unlabeled"].item() == 0.9


def test_sync_docs_replaces_only_marked_blocks(tmp_path):
    doc = tmp_path / "d.md"
    doc.write_text("a\n<!-- lowlabel-table: x.md -->\nold\n<!-- /lowlabel-table -->\nb\n"
                   "<!-- lowlabel-table: y.md -->\nkeep\n<!-- /lowlabel-table -->\n")
    assert lowlabel.sync_docs(doc, {"x.md": "new\n"}) == ["y.md"]
    assert doc.read_text() == ("a\n<!-- lowlabel-table: x.md -->\nnew\n<!-- /lowlabel-table -->\nb\n"
                               "<!-- lowlabel-table: y.md -->\nkeep\n<!-- /lowlabel-table -->\n")


#: experiments whose runs join another experiment's folder (and so its tables)
JOINS = {"lowlabel_mnist_noise_cutssl": "lowlabel_mnist_noise", "lowlabel_mnist_noise_cutsslL": "lowlabel_mnist_noise"}


@pytest.mark.parametrize("experiment", reproduce_lowlabel.FULL)
def test_experiments_sweep_into_their_own_folder(experiment):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"experiment={experiment}"], return_hydra_config=True)
    assert cfg.hydra.sweep.dir == f"{cfg.paths.results_dir}/lowlabel/runs/{JOINS.get(experiment, experiment)}"
    params = dict(cfg.hydra.sweeper.params)
    assert "seed" in params and "algo" in params
    assert "labels.per_class" in params or cfg.labels.per_class is not None
    assert cfg.graph.k == 10 and cfg.graph.kernel == "self_tuning"


def test_algo_option_reruns_only_the_experiments_that_sweep_it():
    """``--algo cutssl``: the experiments whose sweep has CutSSL (the two digits ones and MNIST's CutSSL
    experiment), each with only ``algo=cutssl``; a method no experiment sweeps is refused with its name."""
    assert reproduce_lowlabel.plan(reproduce_lowlabel.FULL, ["cutssl"]) == [
        ("lowlabel_digits", ["cutssl"]), ("lowlabel_digits_noise", ["cutssl"]),
        ("lowlabel_mnist_noise_cutssl", ["cutssl"])]
    assert reproduce_lowlabel.plan(["lowlabel_mnist_raw", "lowlabel_digits"], ["poisson", "wnll"]) == [
        ("lowlabel_mnist_raw", ["poisson"]), ("lowlabel_digits", ["poisson", "wnll"])]
    assert reproduce_lowlabel.plan(["lowlabel_mnist"], None) == [("lowlabel_mnist", None)]
    with pytest.raises(SystemExit, match=r"^reproduce_lowlabel: --algo wnll is not allowed: .*cutssl"):
        reproduce_lowlabel.plan(["lowlabel_digits_noise"], ["wnll"])


def test_vae_recipe_and_its_recorded_cache_key():
    """The codes' recipe of lowlabel_mnist.yaml and the features cache key its header records."""
    text = (ROOT / "conf" / "experiment" / "lowlabel_mnist.yaml").read_text()
    recorded = re.search(r"\b([0-9a-f]{32})\b", text).group(1)
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["experiment=lowlabel_mnist"])
    params = {k: v for k, v in cfg.features.items() if k != "name"}
    assert cfg.features.name == "vae" and params["epochs"] == 100 and params["seed"] == 0
    data_dir = Path(os.environ.get("LGCEXP_DATA_DIR", ""))
    if not (data_dir / "mnist.npz").is_file():
        pytest.skip("mnist.npz not in LGCEXP_DATA_DIR")
    from lgcexp.data import load_dataset
    from lgcexp.features import make_features

    data = load_dataset("mnist", data_dir=str(data_dir), download=False)
    assert make_features("vae", **params).key(data.fingerprint()) == recorded



def test_two_runs_in_one_place_are_refused_before_anything_is_written():
    rows = [{"algo": "poisson", "per_class": 5, "seed": 0, "acc_unlabeled": 0.9, "solver_iterations": 60}]
    lowlabel.check_unique_places(_runs(rows), "x")
    twice = _runs(rows + [{**rows[0], "acc_unlabeled": 0.8}])
    with pytest.raises(ValueError, match=r"x: 2 runs share a place of a table \(experiment=e, algo=poisson.*"
                                         r"config hashes h0, h1\); move the variant out"):
        lowlabel.check_unique_places(twice, "x")


def test_provenance_replaces_a_commands_row_and_keeps_the_notes():
    old = ("# Provenance of results/lowlabel\n\n- machine of the last invocation: x\n- runs are resumable\n\n"
           "| command | wall time | exit | finished |\n|---|---|---|---|\n"
           "| `lgcexp experiment=b` | 9.0 min | 0 | then |\n| `lgcexp experiment=a` | 1.0 min | 0 | then |\n\n"
           "Note: kept.\n")
    new = reproduce_lowlabel.provenance(old, [("lgcexp experiment=b", 30.0, 0), ("lgcexp experiment=c", 6.0, 1)],
                                        "now", "vm")
    lines = new.splitlines()
    rows = [v for v in lines if v.startswith("| `")]
    assert rows == ["| `lgcexp experiment=a` | 1.0 min | 0 | then |", "| `lgcexp experiment=b` | 0.5 min | 0 | now |",
                    "| `lgcexp experiment=c` | 0.1 min | 1 | now |"]
    assert "- machine of the last invocation: vm" in lines and new.endswith("\n\nNote: kept.\n")
    assert reproduce_lowlabel.provenance("", [], "now", "vm").endswith("|---|---|---|---|\n")
    # a table inside the notes and a note line that looks like a row stay notes
    noted = old + "\n| x | y |\n|---|---|\n| `lgcexp experiment=a` | said |\n\nNote two.\n"
    out = reproduce_lowlabel.provenance(noted, [], "now", "vm")
    assert out.endswith("Note: kept.\n\n| x | y |\n|---|---|\n| `lgcexp experiment=a` | said |\n\nNote two.\n")
    assert "| `lgcexp experiment=a` | 1.0 min | 0 | then |" in out
    # a file without the table: kept whole under the new one
    assert reproduce_lowlabel.provenance("free text\n", [], "now", "vm").endswith("|---|---|---|---|\n\nfree text\n")
    # the committed file comes back unchanged when nothing was rerun (but the machine line)
    committed = (ROOT / "results" / "lowlabel" / "PROVENANCE.md").read_text()
    machine = committed.splitlines()[2].removeprefix("- machine of the last invocation: ")
    assert reproduce_lowlabel.provenance(committed, [], "now", machine) == committed
