"""The detector tables of docs/label_issues.md from committed rows (scripts/reproduce_detection.py, ``make
tables-detection``): each rebuilds byte for byte from its rows, and the docs' generated blocks equal the rebuild."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import reproduce_detection  # noqa: E402


def test_detection_table_rebuilds_byte_for_byte(tmp_path):
    """``make tables-detection``: results/label_issues/detection_table.{md,csv} from the committed runs alone."""
    src = ROOT / "results" / "label_issues"
    shutil.copy2(src / "detection_runs.csv", tmp_path / "detection_runs.csv")
    subprocess.run([sys.executable, str(ROOT / "scripts" / "label_issues_table.py"), "--summary-only",
                    "--out", str(tmp_path)], check=True, capture_output=True, cwd=ROOT)
    for name in ("detection_table.md", "detection_table.csv"):
        assert (tmp_path / name).read_bytes() == (src / name).read_bytes(), name



def test_realistic_tables_rebuild_and_docs_blocks(tmp_path):
    pytest.importorskip("cleanlab")  # benchmarks.detect_realistic imports it
    src = ROOT / "results" / "label_issues"
    parts = sorted(src.glob("detect_realistic_*.csv"))
    assert [p.name for p in parts] == [f"detect_realistic_{part}.csv" for part in sorted(reproduce_detection.PARTS)]
    for p in parts:
        shutil.copy2(p, tmp_path / p.name)
    blocks = reproduce_detection.write_realistic(tmp_path)
    assert (tmp_path / "detect_realistic.md").read_bytes() == (src / "detect_realistic.md").read_bytes()
    in_docs = reproduce_detection.doc_blocks()
    assert {f"{d}, noise={m}" for d in ("digits", "isolet", "mnist") for m in ("idn", "confusion")} <= set(in_docs)
    for name, body in in_docs.items():
        if not name.startswith("low rates, "):
            assert body == blocks[name], f"docs/label_issues.md's block {name}: run make tables-detection"


def test_low_rate_tables_rebuild_and_docs_blocks(tmp_path):
    """The count at low noise rates (docs/label_issues.md#count): low_rates.md and the docs' blocks from the
    committed low_rates_<part>.csv rows."""
    src = ROOT / "results" / "label_issues"
    parts = sorted(src.glob("low_rates_*.csv"))
    assert {p.stem for p in parts} == set(reproduce_detection.LOW_PARTS)
    for p in parts:
        shutil.copy2(p, tmp_path / p.name)
    blocks = reproduce_detection.write_low_rates(tmp_path)
    assert (tmp_path / "low_rates.md").read_bytes() == (src / "low_rates.md").read_bytes()
    in_docs = {k: v for k, v in reproduce_detection.doc_blocks().items() if k.startswith("low rates, ")}
    assert set(in_docs) == {"low rates, digits", "low rates, isolet", "low rates, mnist_test"}
    for name, body in in_docs.items():
        assert body == blocks[name], f"docs/label_issues.md's block {name}: run make tables-detection"


def test_sync_docs_fills_marked_blocks_only(tmp_path):
    doc = tmp_path / "d.md"
    doc.write_text("x\n<!-- detection-table: a, noise=idn -->\nold\n<!-- /detection-table -->\n"
                   "<!-- detection-table: b, noise=idn -->\nkept\n<!-- /detection-table -->\n")
    assert reproduce_detection.sync_docs({"a, noise=idn": "new\n"}, doc) == ["b, noise=idn"]
    assert doc.read_text() == ("x\n<!-- detection-table: a, noise=idn -->\nnew\n<!-- /detection-table -->\n"
                               "<!-- detection-table: b, noise=idn -->\nkept\n<!-- /detection-table -->\n")


def test_merge_rows_replaces_the_same_draw_and_keeps_the_rest():
    keys = reproduce_detection.REALISTIC_KEYS
    base = {"dataset": "d", "features": None, "noise": "idn", "rate": 0.1, "detector": "graph"}
    old = pd.DataFrame([{**base, "seed": s, "f1": 0.5 + s / 10} for s in (0, 1, 2)])
    new = pd.DataFrame([{**base, "seed": 1, "f1": 0.99}, {**base, "seed": 3, "f1": 0.8},
                        {**base, "seed": 1, "detector": "lgc+mlp", "f1": 0.7}])
    got = reproduce_detection.merge_rows(old, new, keys)
    assert got["seed"].tolist() == [0, 1, 1, 2, 3]
    assert set(got["features"]) == {"raw"}
    by = got.set_index(["seed", "detector"])["f1"]
    assert by[(1, "graph")] == 0.99 and by[(1, "lgc+mlp")] == 0.7 and by[(0, "graph")] == 0.5
    assert by[(2, "graph")] == 0.7 and by[(3, "graph")] == 0.8


def test_seed_args_restrict_each_benchmark_to_the_seeds():
    args = ["--datasets", "isolet", "--seeds", "5", "--lr-pca", "100"]
    assert reproduce_detection.seed_args(args, None, low=False) == [args]
    assert reproduce_detection.seed_args(args, [5, 6], low=False) == [
        ["--datasets", "isolet", "--lr-pca", "100", "--seed-list", "5", "6"]]
    assert reproduce_detection.seed_args(args, [5, 7], low=True) == [
        ["--datasets", "isolet", "--lr-pca", "100", "--first-seed", "5", "--seeds", "6"],
        ["--datasets", "isolet", "--lr-pca", "100", "--first-seed", "7", "--seeds", "8"]]


@pytest.mark.parametrize("argv, message", [(["--seeds", "3"], "--seeds is not allowed without --parts"),
                                           (["--parts", "digits", "--seeds", "-1"], "--seeds -1 is not allowed")])
def test_bad_seed_options_exit_2_before_any_run(argv, message):
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "reproduce_detection.py"), *argv],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_low_rates_reads_a_kept_cells_views_instead_of_refitting(tmp_path, monkeypatch):
    """``python -m benchmarks low_rates --dump DIR``: a cell whose views are kept (same labels) is not refitted, and
    its row equals the fresh one (the rows of results/label_issues/low_rates_*.csv were recomputed so)."""
    import numpy as np

    sys.path.insert(0, str(ROOT))
    from conftest import two_clusters

    from benchmarks import low_rates
    from lgcexp import stages

    X, y = two_clusters(n_per=60, seed=4)
    y_obs = y.copy()
    y_obs[[0, 7, 70]] = 1 - y_obs[[0, 7, 70]]
    wrong = y_obs != y
    dump = tmp_path / "cell.npz"
    fresh = low_rates.judge_cell(X, y_obs, wrong, dump=dump)
    assert dump.is_file()

    def no_refit(*a, **k):
        raise AssertionError("refitted a kept cell")

    monkeypatch.setattr(stages, "fit_on_graph", no_refit)
    assert low_rates.judge_cell(X, y_obs, wrong, dump=dump) == fresh
    other = y_obs.copy()
    other[1] = 1 - other[1]  # other labels: the kept views are not used
    with pytest.raises(AssertionError, match="refitted"):
        low_rates.judge_cell(X, other, other != y, dump=dump)
    assert np.isfinite(fresh["f1_lgcexp"])


@pytest.mark.parametrize("fail", [False, True])
def test_detection_table_runs_are_redone_not_skipped(tmp_path, monkeypatch, fail):
    """label_issues_table.py skips the runs its --out already holds, so the rerun goes to a scratch folder: the
    committed runs are replaced by the new ones and the provenance line appended; a failed run replaces nothing."""
    monkeypatch.setattr(reproduce_detection, "OUT", tmp_path)
    (tmp_path / "detection_runs.csv").write_text("old runs\n")
    (tmp_path / "PROVENANCE.md").write_text("# Provenance\n\n- earlier entry\n")
    seen = []

    def fake_call(cmd, cwd=None):
        out = Path(cmd[cmd.index("--out") + 1])
        seen.append(out)
        with open(out / "detection_runs.csv", "a") as fh:
            fh.write(f"runs of {cmd[cmd.index('--datasets') + 1]}\n")
        with open(out / "PROVENANCE.md", "a") as fh:
            fh.write(f"# header\n\n- ran {cmd[cmd.index('--datasets') + 1]}\n")
        return int(fail)

    monkeypatch.setattr(reproduce_detection.subprocess, "call", fake_call)
    rc = reproduce_detection.run_detection_table([["--datasets", "a"], ["--datasets", "b"]])
    assert all(out != tmp_path for out in seen) and len(set(seen)) == 1  # one scratch folder, not the committed one
    if fail:
        assert rc == 1 and (tmp_path / "detection_runs.csv").read_text() == "old runs\n"
        assert "ran" not in (tmp_path / "PROVENANCE.md").read_text()
    else:
        assert rc == 0 and (tmp_path / "detection_runs.csv").read_text() == "runs of a\nruns of b\n"
        assert (tmp_path / "PROVENANCE.md").read_text() == "# Provenance\n\n- earlier entry\n- ran a\n- ran b\n"
