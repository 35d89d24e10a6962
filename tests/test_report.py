"""Figures and REPORT.md (lgcexp/report.py): built from a small fake runs table (files exist, are not trivial,
a method missing from the runs is left out with a note, detection curves from fake label_issues.csv files),
and the committed figures and REPORT.md against the committed tables."""
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from lgcexp.report import (
    LABEL_ISSUES_FILE,
    METHOD_COLORS,
    figure2_facts,
    plotted_values,
    read_label_issues,
    roc_pr,
    write_report,
)
from lgcexp.tables import load_reported, write_tables
from lgcexp.tables_cli import main as tables_main

ROOT = Path(__file__).resolve().parents[1]
TABLES = ROOT / "results" / "tables"


def fake_runs() -> pd.DataFrame:
    """ISOLET: LGC and AutoL (XENT) at 0/20/40 % (the paper also reports SIIS and AutoL (MSE): not run here);
    MNIST: LGC at 0/15 %; 3 seeds each, with run directories."""
    rng = np.random.default_rng(0)
    rows = []
    for ds, cells in (("isolet", [("lgc", None, "LGC"), ("autoL", "xent", "LGC_LVO_AutoL (XENT)")]),
                      ("mnist", [("lgc", None, "LGC")])):
        rates = (0.0, 0.2, 0.4) if ds == "isolet" else (0.0, 0.15)
        for algo, loss, method in cells:
            for rate in rates:
                for seed in range(3):
                    rows.append({"dataset": ds, "algo": algo, "loss": loss, "method": method, "noise": "uniform",
                                 "noise_rate": rate, "seed": seed,
                                 "acc_unlabeled": 0.85 - 0.3 * rate + 0.01 * rng.normal(),
                                 "acc_labeled": 1.0 - rate + (0.2 * rate if algo == "autoL" else 0.0),
                                 "run_dir": f"{ds}/{algo}/noise={rate:g}/seed={seed}"})
    return pd.DataFrame(rows)


def write_label_issues(path: Path, n: int, rate: float, seed: int, separation: float) -> None:
    """A label_issues.csv as the label-issue report writes it (sorted by label_quality, lowest first)."""
    rng = np.random.default_rng(seed)
    flipped = np.zeros(n, dtype=bool)
    flipped[rng.permutation(n)[: round(rate * n)]] = True
    quality = np.clip(np.where(flipped, 0.5 - separation, 0.5 + separation) + 0.25 * rng.normal(size=n), 0, 1)
    given = rng.integers(0, 5, n)
    df = pd.DataFrame({"index": np.arange(n), "given_label": given, "suggested_label": given,
                       "label_quality": quality, "is_label_issue": quality < 0.5, "is_flipped": flipped})
    path.parent.mkdir(parents=True, exist_ok=True)
    df.sort_values("label_quality").to_csv(path, index=False)


def fake_root(tmp_path: Path, runs: pd.DataFrame) -> Path:
    """label_issues.csv for the ISOLET runs with noise (AutoL separates better than LGC); none for MNIST."""
    root = tmp_path / "runs"
    for r in runs[(runs["dataset"] == "isolet") & (runs["noise_rate"] > 0)].itertuples():
        write_label_issues(root / r.run_dir / LABEL_ISSUES_FILE, 200, r.noise_rate, r.seed,
                           0.25 if r.algo == "autoL" else 0.1)
    return root


def fake_curves() -> pd.DataFrame:
    x = np.arange(1, 41, dtype=float)
    bump = lambda c: np.abs(x - c) / 40  # noqa: E731
    return pd.DataFrame({"x": x, "alpha": 2.0 ** (-1 / x), "mae_rd": 0.3 + bump(12), "mse_rd": 0.1 + bump(14),
                         "ce_rd": 0.4 + bump(13), "loo_acc_rd": 0.9 - bump(20).round(1), "mae_nd": 0.2 + bump(3),
                         "mse_nd": 0.05 + bump(4), "ce_nd": 0.1 + bump(3), "loo_acc_nd": np.full(x.size, 0.97),
                         "unl_acc": 0.94 - bump(25)})


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    runs = fake_runs()
    out = tmp / "tables"
    write_tables(runs, load_reported(), out, "provenance line")
    fake_curves().to_csv(out / "autod_curves.csv", index=False)
    written = write_report(runs, load_reported(), out, "provenance line", root=fake_root(tmp, runs))
    return runs, out, written


FIGURES = ["fig_accuracy_isolet.png", "fig_seeds_isolet.png", "fig_detection_isolet.png", "fig_accuracy_mnist.png",
           "fig_seeds_mnist.png", "fig_figure2.png"]


def test_figures_exist_and_are_not_trivial(built):
    _, out, written = built
    assert sorted(p.name for p in written) == sorted(FIGURES + ["REPORT.md"])
    for name in FIGURES:
        png = out / name
        assert png.stat().st_size > 30_000, name
        with Image.open(png) as im:
            w, h = im.size
            assert 900 <= w <= 2200 and 600 <= h <= 1400, (name, im.size)  # reads on a laptop screen
            assert len(set(im.convert("RGB").resize((64, 32)).getdata())) > 20, name  # not a blank canvas
    report = (out / "REPORT.md").read_text()
    for name in FIGURES:
        assert f"]({name})" in report, name
    assert report.count("Summarises") == len(FIGURES)
    assert "provenance line" in report and not re.search(r"\bnan\b", report, re.I)


def test_a_method_missing_from_the_runs_is_left_out_with_a_note(built):
    _, out, _ = built
    report = (out / "REPORT.md").read_text()
    assert "ISOLET: the paper reports SIIS, which is not in the runs; it is left out" in report
    assert "ISOLET: the paper reports LGC_LVO_AutoL (MSE), which is not in the runs" in report
    assert "MNIST: the paper reports LGC_LVO_AutoL (XENT), which is not in the runs" in report
    vals = pd.DataFrame(plotted_values(out / "fig_accuracy_isolet.png"))
    assert set(vals.loc[vals["kind"] == "paper", "method"]) == {"LGC", "LGC_LVO_AutoL (XENT)"}
    assert set(vals.loc[vals["kind"] == "others", "method"]) == {"LSSC", "GTF", "GFHF", "SIIS (Gong)"}
    # the noise rate the paper reports (60 %) but the runs lack is not drawn as ours
    assert set(vals.loc[vals["kind"] == "ours", "noise"]) == {0, 20, 40}


def test_plotted_values_equal_the_tables(built):
    runs, out, _ = built
    summary = pd.read_csv(out / "summary.csv")
    for ds in ("ISOLET", "MNIST"):
        vals = pd.DataFrame(plotted_values(out / f"fig_accuracy_{ds.lower()}.png"))
        _check_accuracy_values(vals, summary[summary["dataset"] == ds], out, ds)
        seeds = pd.DataFrame(plotted_values(out / f"fig_seeds_{ds.lower()}.png"))
        _check_seed_values(seeds, runs[runs["dataset"] == ds.lower()])


def test_detection_curves_from_label_issues(built):
    _, out, _ = built
    table = pd.DataFrame(plotted_values(out / "fig_detection_isolet.png"))
    assert set(zip(table["method"], table["noise"])) == {(m, n) for m in ("LGC", "LGC_LVO_AutoL (XENT)")
                                                         for n in (20, 40)}
    assert (table["n_runs"] == 3).all()
    auc = table.set_index(["method", "noise"])["auc_mean"]
    assert auc[("LGC_LVO_AutoL (XENT)", 20)] > auc[("LGC", 20)] > 0.5
    report = (out / "REPORT.md").read_text()
    assert "## ISOLET: finding the flipped labels" in report and "(12 files)" in report
    assert "MNIST" in report.split("## Notes")[1].split("Detection curves")[1].split("\n")[0]


def test_unusable_label_issues_are_skipped_with_a_note(tmp_path):
    runs = fake_runs()
    root = fake_root(tmp_path, runs)
    isolet = runs[runs["dataset"] == "isolet"]
    r0 = isolet[isolet["noise_rate"] == 0].iloc[0]  # 0 % noise: nothing flipped, no curve
    write_label_issues(root / r0.run_dir / LABEL_ISSUES_FILE, 50, 0.0, 0, 0.2)
    bad = isolet[isolet["noise_rate"] == 0.2].iloc[0]  # no clean labels known: is_flipped empty
    df = pd.read_csv(root / bad.run_dir / LABEL_ISSUES_FILE)
    df.assign(is_flipped=np.nan).to_csv(root / bad.run_dir / LABEL_ISSUES_FILE, index=False)
    out = tmp_path / "tables"
    write_report(runs, load_reported(), out, render=False, root=root)
    report = (out / "REPORT.md").read_text()
    assert "(11 files)" in report  # 12 with noise, one unusable; the 0 % file adds no curve
    assert "1 `label_issues.csv` file(s) could not be used" in report and "is_flipped is empty" in report


def test_roc_pr_against_scikit_learn():
    from sklearn.metrics import average_precision_score, roc_auc_score

    rng = np.random.default_rng(1)
    y = rng.random(300) < 0.3
    s = np.round(y * 0.4 + rng.random(300), 1)  # ties
    c = roc_pr(s, y)
    assert c["auc"] == pytest.approx(roc_auc_score(y, s)) and c["ap"] == pytest.approx(average_precision_score(y, s))
    perfect = roc_pr(np.r_[np.ones(5), np.zeros(5)], np.r_[np.ones(5), np.zeros(5)].astype(bool))
    assert perfect["auc"] == 1.0 and perfect["ap"] == 1.0
    none = roc_pr(np.arange(4.0), np.zeros(4, dtype=bool))
    assert none["auc"] is None and none["ap"] is None


def test_label_issues_file_is_checked(tmp_path):
    p = tmp_path / LABEL_ISSUES_FILE
    write_label_issues(p, 20, 0.2, 0, 0.2)
    assert len(read_label_issues(p)) == 20
    df = pd.read_csv(p)
    df.assign(label_quality=df["label_quality"] + 2).to_csv(p, index=False)
    with pytest.raises(ValueError, match="within \\[0, 1\\]"):
        read_label_issues(p)
    df.drop(columns="is_flipped").to_csv(p, index=False)
    with pytest.raises(ValueError, match="is_flipped"):
        read_label_issues(p)


def test_figure2_facts():
    f = figure2_facts(fake_curves())
    # the accuracy ties on x = 18..22 (rounded): the lowest cross-entropy among them, nearest its minimum at 13
    assert f["rd"]["x_select"] == 18 and f["rd"]["loss_argmin"] == {"mae": 12, "mse": 14, "ce": 13}
    assert f["nd"]["x_select"] == 3  # all accuracies tie: the lowest cross-entropy
    assert f["x_unl_max"] == 25


def test_cli_writes_the_report_and_notes_missing_detection(tmp_path):
    runs_csv = tmp_path / "runs.csv"
    fake_runs().drop(columns="noise").to_csv(runs_csv, index=False)  # an old runs table: uniform noise
    out = tmp_path / "tables"
    assert tables_main(["--from-csv", str(runs_csv), "--out", str(out), "--root", str(tmp_path / "none")]) == 0
    report = (out / "REPORT.md").read_text()
    assert "left out for ISOLET, MNIST: no run has a `label_issues.csv`" in report
    assert "Figure 2: no `autod_curves.csv` in this folder" in report
    assert (out / "fig_accuracy_isolet.png").exists() and not (out / "fig_detection_isolet.png").exists()
    # with the run directories at hand the detection figure appears
    root = fake_root(tmp_path, fake_runs())
    assert tables_main(["--from-csv", str(runs_csv), "--out", str(out), "--root", str(root)]) == 0
    assert (out / "fig_detection_isolet.png").exists()
    bare = tmp_path / "bare"
    assert tables_main(["--from-csv", str(runs_csv), "--out", str(bare), "--no-report"]) == 0
    assert not list(bare.glob("*.png")) and not (bare / "REPORT.md").exists()


def test_other_noise_model_gets_its_own_figures(tmp_path):
    runs = fake_runs()
    pairwise = runs[(runs["dataset"] == "isolet") & (runs["noise_rate"] > 0)].assign(noise="pairwise")
    runs = pd.concat([runs, pairwise.assign(acc_unlabeled=pairwise["acc_unlabeled"] - 0.05)], ignore_index=True)
    out = tmp_path / "tables"
    write_tables(runs, load_reported(), out)
    write_report(runs, load_reported(), out, render=True)
    vals = pd.DataFrame(plotted_values(out / "fig_accuracy_isolet_pairwise.png"))
    assert set(vals["kind"]) == {"ours"} and set(vals["noise"]) == {20, 40}
    report = (out / "REPORT.md").read_text()
    assert "## ISOLET, pairwise noise: accuracy against the noise rate" in report
    assert "[`table1c_isolet_pairwise_unlabeled`](table1c_isolet_pairwise_unlabeled.md)" in report
    assert "The paper reports no numbers for this noise model" in report


def test_one_colour_per_method():
    assert len(set(METHOD_COLORS.values())) == len(METHOD_COLORS)


# ------------------------------------------------------------------------------------------------------------
# the committed report
# ------------------------------------------------------------------------------------------------------------

def _check_accuracy_values(vals: pd.DataFrame, summary: pd.DataFrame, tables: Path, ds: str) -> None:
    """Our plotted means/sds equal summary.csv; the paper's equal the paper columns of the table CSVs."""
    for metric in ("unlabeled", "labeled"):
        ours = vals[(vals["kind"] == "ours") & (vals["metric"] == metric)]
        merged = ours.merge(summary, on=["noise", "method"], validate="one_to_one")
        assert len(merged) == len(ours) == len(summary)
        assert np.allclose(merged["mean"], merged[f"{metric}_mean"], atol=5e-5, rtol=0)
        assert np.allclose(merged["sd"], merged[f"{metric}_sd"], atol=5e-5, rtol=0)
        stem = next(tables.glob(f"table*_{ds.lower()}_{metric}.csv"))
        table = pd.read_csv(stem)
        paper = vals[(vals["kind"] == "paper") & (vals["metric"] == metric)]
        if "source" in table:  # a rerun column's reported value may be quoted from another paper
            table = table[table["source"].fillna("") == "paper"]
        m = paper.merge(table, on=["noise", "method"], validate="one_to_one")
        # the paper's value of every method we ran, also at a noise rate we did not run
        assert len(m) == len(paper) == int((table["paper_mean"].notna() & table["method"].isin(ours["method"])).sum())
        assert np.allclose(m["mean"], m["paper_mean"], atol=5e-5, rtol=0)
        assert np.allclose(m["sd"].fillna(-1), m["paper_sd"].fillna(-1), atol=5e-5, rtol=0)


def _check_seed_values(seeds: pd.DataFrame, runs: pd.DataFrame) -> None:
    for metric in ("unlabeled", "labeled"):
        s = seeds[(seeds["kind"] == "seed") & (seeds["metric"] == metric)]
        r = runs.assign(noise=(100 * runs["noise_rate"]).round().astype(int))
        m = s.merge(r, on=["method", "noise", "seed"], validate="one_to_one")
        assert len(m) == len(s) == len(r)
        assert np.allclose(m["value"], 100 * m[f"acc_{metric}"], atol=1e-9, rtol=0)


@pytest.mark.skipif(not (TABLES / "REPORT.md").exists(), reason="no committed report")
def test_committed_figures_match_the_committed_tables():
    summary = pd.read_csv(TABLES / "summary.csv")
    runs = pd.read_csv(ROOT / "results" / "runs.csv")
    if "noise" in runs:  # the paper's figures hold uniform noise; other models have their own figures
        runs = runs[runs["noise"].fillna("uniform") == "uniform"]
    for ds in sorted(set(summary["dataset"])):
        vals = pd.DataFrame(plotted_values(TABLES / f"fig_accuracy_{ds.lower()}.png"))
        _check_accuracy_values(vals, summary[summary["dataset"] == ds], TABLES, ds)
        seeds = pd.DataFrame(plotted_values(TABLES / f"fig_seeds_{ds.lower()}.png"))
        _check_seed_values(seeds, runs[runs["dataset"] == ds.lower()])
    curves = pd.read_csv(TABLES / "autod_curves.csv")
    plotted = {c["column"]: c["values"] for c in plotted_values(TABLES / "fig_figure2.png")}
    assert list(plotted) == list(curves.columns)
    for col in curves:
        assert np.allclose(plotted[col], curves[col], atol=0, rtol=1e-12), col


@pytest.mark.skipif(not (TABLES / "REPORT.md").exists(), reason="no committed report")
def test_committed_report_is_what_the_runs_give(tmp_path):
    """REPORT.md regenerated from results/runs.csv (text only) equals the committed one but for the date line;
    every figure it shows is committed."""
    out = tmp_path / "tables"
    out.mkdir()
    shutil.copy(TABLES / "autod_curves.csv", out)
    runs = pd.read_csv(ROOT / "results" / "runs.csv")
    write_report(runs, load_reported(), out, "PROVENANCE", render=False)
    strip = lambda text: [ln for ln in text.splitlines() if not ln.startswith(("Produced by", "PROVENANCE"))]  # noqa: E731
    committed = (TABLES / "REPORT.md").read_text()
    assert strip((out / "REPORT.md").read_text()) == strip(committed)
    for line in committed.splitlines():
        if line.startswith("!["):
            assert (TABLES / line.split("](")[1].rstrip(")")).is_file(), line
