"""A table cell is one setting: runs whose recorded configs differ in anything but seed and noise rate are
never averaged together (lgcexp.tables.label_methods), checked end to end on digits sweeps and by brute force
over random settings."""
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd

from lgcexp.cache import stable_hash
from lgcexp.tables import CELL_KEYS, aggregate, collect, flat_config, label_methods, run_setting, setting_labels
from lgcexp.tables import main as tables_main

ROOT = Path(__file__).resolve().parents[1]


def _sweep(tmp: Path, root: Path, *args: str) -> None:
    env = {**os.environ, "LGCEXP_CACHE_DIR": str(tmp / "cache"), "LGCEXP_OUTPUT_DIR": str(tmp / "out")}
    p = subprocess.run([sys.executable, "-m", "lgcexp.cli", "-m", "dataset=digits", *args,
                        f"hydra.sweep.dir={root}", "progress=false"],
                       capture_output=True, text=True, env=env, cwd=tmp, timeout=600)
    assert p.returncode == 0, p.stderr


def _config_outside_cell(result: Path) -> str:
    """A run's recorded config without seed and noise rate, computed here from result.json (not by tables)."""
    c = json.loads(result.read_text())["config"]
    c.pop("seed")
    c["noise"].pop("rate")
    return json.dumps(c, sort_keys=True)


def _cells(root: Path) -> dict[str, int]:
    agg = aggregate(collect(root)[0])
    return dict(zip(agg["method"], agg["n_seeds"]))


def _assert_one_setting_per_cell(root: Path) -> None:
    """Every cell of the tables built from ``root`` holds runs whose configs agree outside seed / noise rate."""
    runs, _ = collect(root)
    by_dir = {str(p.parent.relative_to(root)): _config_outside_cell(p) for p in root.rglob("result.json")}
    labelled = label_methods(runs)
    for (_, _, _), g in labelled.groupby(["dataset", "method", "noise_rate"]):
        assert len({by_dir[d] for d in g["run_dir"]}) == 1, g["run_dir"].tolist()
        assert g["config_hash"].is_unique


def test_sweeps_on_digits_get_one_cell_per_setting(tmp_path):
    alpha, k, builder = tmp_path / "alpha", tmp_path / "k", tmp_path / "builder"
    _sweep(tmp_path, alpha, "algo.params.alpha=0.5,0.99", "seed=0,1")
    _sweep(tmp_path, k, "graph.k=5,15", "seed=0,1")
    _sweep(tmp_path, builder, "graph=knn,knn_approx", "seed=0,1")
    assert _cells(alpha) == {"LGC [alpha=0.5]": 2, "LGC [alpha=0.99]": 2}
    assert _cells(k) == {"LGC [graph.k=5]": 2, "LGC [graph.k=15]": 2}
    assert _cells(builder) == {"LGC [graph=knn]": 2, "LGC [graph=knn_approx]": 2}
    for root in (alpha, k, builder):
        _assert_one_setting_per_cell(root)
    # all three sweeps in one table: the brackets grow to what tells the settings apart, still one per cell
    both = tmp_path / "all"
    for root in (alpha, k, builder):
        shutil.copytree(root, both / root.name)
    cells = _cells(both)
    assert set(cells.values()) == {2} and len(cells) == 6  # alpha 0.9 / k 10 / knn is in both k and builder sweeps
    assert "LGC [graph=knn, graph.k=10, alpha=0.5]" in cells and "LGC [graph=knn_approx]" in cells
    _assert_one_setting_per_cell(both)
    # lgcexp-tables --root X --out Y: the runs table beside Y, the digits tables in Y; --from-csv of that runs
    # table gives the same cells (the setting travels in the runs table)
    out = tmp_path / "res" / "tables"
    assert tables_main(["--root", str(alpha), "--out", str(out), "--no-report"]) == 0
    assert (tmp_path / "res" / "runs.csv").is_file() and not (tmp_path / "results").exists()
    md = (out / "table_digits_unlabeled.md").read_text()
    assert "| Noise | LGC [alpha=0.5] | LGC [alpha=0.99] |" in md and "no numbers for this data set" in md
    assert (out / "table_digits_labeled.tex").is_file()
    again = tmp_path / "again"
    assert tables_main(["--from-csv", str(tmp_path / "res" / "runs.csv"), "--out", str(again), "--no-report"]) == 0
    assert (again / "summary.csv").read_text() == (out / "summary.csv").read_text()
    # --merge of a later sweep: the old rows get their brackets too (no cell mixes old and new settings)
    assert tables_main(["--root", str(k), "--out", str(out), "--merge", "--no-report"]) == 0
    merged = pd.read_csv(tmp_path / "res" / "runs.csv")
    assert merged.groupby("method")["setting"].nunique().max() == 1 and merged["method"].nunique() == 4


def _random_setting(rng: random.Random) -> dict:
    builder = rng.choice(["knn", "knn_approx", "anchor"])
    graph = {"name": builder, "k": rng.choice([5, 10])} if builder != "anchor" else \
        {"name": builder, "n_anchors": rng.choice([100, 200]), "s": 3}
    if builder == "knn_approx" and rng.random() < 0.5:
        graph["nprobe"] = rng.choice([4, 8])
    return {"seed": rng.randrange(3), "graph": graph, "noise": {"name": "uniform", "rate": rng.choice([0.0, 0.2])},
            "algo": {"name": "lgc",
                     "params": {"alpha": rng.choice([0.5, 0.99, 1, 1.0]), "cmn": rng.choice([True, None])}},
            "eig": {"p": rng.choice([100, 300])}, "detect": {"cut": rng.choice(["consensus", "both"])}}


def test_no_cell_aggregates_two_settings_brute_force():
    """Random sets of runs of one method (graph builders with their own parameters, absent keys, 1 vs 1.0,
    None vs True): every cell's runs have one config outside seed / noise rate, and runs with one such config
    share a cell."""
    rng = random.Random(0)
    for trial in range(200):
        configs = [_random_setting(rng) for _ in range(rng.randrange(1, 12))]
        runs = pd.DataFrame([{"dataset": "digits", "method": "LGC", "noise": "uniform",
                              "noise_rate": c["noise"]["rate"], "seed": c["seed"], "acc_unlabeled": 0.5,
                              "acc_labeled": 0.5, "setting": run_setting({"config": c})} for c in configs])
        # the config hash (lgcexp.cache.stable_hash, as config_hash: 1 and 1.0 hash alike) outside the cell keys
        outside = [stable_hash({k: v for k, v in flat_config(c).items() if k not in CELL_KEYS}) for c in configs]
        names = label_methods(runs)["method"].tolist()
        assert len(set(zip(names, outside))) == len(set(names)) == len(set(outside)), (trial, names)
        assert label_methods(label_methods(runs))["method"].tolist() == names  # idempotent


def test_brackets_name_only_what_differs():
    assert setting_labels([{"graph.name": "knn", "graph.k": 10}, {"graph.name": "knn", "graph.k": 10}]) == ["", ""]
    assert setting_labels([{"a": 1, "algo.params.alpha": 0.5}, {"a": 1, "algo.params.alpha": 0.99}]) == \
        ["alpha=0.5", "alpha=0.99"]
    # another builder's own parameters are not listed; one builder's differing ones are
    labels = setting_labels([{"graph.name": "knn", "graph.k": 10}, {"graph.name": "knn", "graph.k": 15},
                             {"graph.name": "anchor", "graph.s": 3}])
    assert labels == ["graph=knn, graph.k=10", "graph=knn, graph.k=15", "graph=anchor"]
    assert setting_labels([{"algo.params.cmn": True}, {"algo.params.cmn": None}]) == ["cmn=true", "cmn=null"]


def test_runs_without_a_recorded_setting_keep_their_names():
    runs = pd.DataFrame({"dataset": ["mnist"] * 3, "method": ["LGC", "GFHF + CMN", "LGC* (anchor graph)"],
                         "noise_rate": [0.0] * 3, "seed": [0] * 3, "acc_unlabeled": [0.9] * 3,
                         "acc_labeled": [1.0] * 3})
    assert label_methods(runs)["method"].tolist() == runs["method"].tolist()
    same = runs.assign(setting='{"a":1}')
    assert label_methods(same)["method"].tolist() == runs["method"].tolist()  # one setting each: bare names
    mixed = pd.concat([runs.iloc[:1], runs.iloc[:1].assign(setting='{"a":1}')], ignore_index=True)
    tag = stable_hash('{"a":1}', 8)
    assert label_methods(mixed)["method"].tolist() == ["LGC [setting=unrecorded]", f"LGC [setting={tag}]"]


def test_committed_tables_render_unchanged(tmp_path):
    """The committed tables are byte for byte what results/runs.csv renders to."""
    out = tmp_path / "t"
    assert tables_main(["--from-csv", str(ROOT / "results" / "runs.csv"), "--out", str(out), "--no-report"]) == 0
    committed = sorted((ROOT / "results" / "tables").glob("table*.*")) + [ROOT / "results" / "tables" / "summary.csv"]
    assert len(committed) == 6 * 3 + 1  # ISOLET uniform + pairwise, MNIST: 6 tables in 3 formats
    for path in committed:
        assert (out / path.name).read_text() == path.read_text(), path.name


def test_a_per_noise_protocol_is_one_method_and_an_override_is_another():
    """SIIS's lambda1 comes from the config's own per-noise table (Gong et al.'s protocol): its runs at every
    noise rate are one column, 'SIIS', as in the committed tables; a lambda1 set by hand is told apart."""
    table = {"0": 1.0e5, "0.0": 1.0e5, "0.2": 100.0, "0.4": 100.0}

    def run(rate, lam, seed=0):
        cfg = {"seed": seed, "noise": {"name": "uniform", "rate": rate},
               "algo": {"name": "siis", "lambda1_by_noise": table, "params": {"lambda1": lam, "m": 300}}}
        return {"dataset": "isolet", "method": "SIIS", "noise": "uniform", "noise_rate": rate, "seed": seed,
                "acc_unlabeled": 0.8, "acc_labeled": 0.9, "setting": run_setting({"config": cfg})}

    protocol = [run(0.0, 1.0e5), run(0.2, 100.0), run(0.4, 100.0, seed=1)]
    names = label_methods(pd.DataFrame(protocol))["method"].tolist()
    assert names == ["SIIS"] * 3
    names = label_methods(pd.DataFrame(protocol + [run(0.2, 300.0)]))["method"].tolist()
    assert names == ["SIIS [lambda1=by_noise]"] * 3 + ["SIIS [lambda1=300]"]
