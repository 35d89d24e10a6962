"""Table rendering from a small fake runs table: quoted values without an sd, empty "reported by others"
blocks, the `*` legend, --from-csv, and the reported numbers shipped inside the package."""
from importlib import resources

import numpy as np
import pandas as pd
import pytest

from lgcexp.tables import (
    REPORTED_RESOURCE,
    aggregate,
    compare,
    load_reported,
    render_latex,
    render_markdown,
    star_legend,
    write_tables,
)
from lgcexp.tables_cli import main as tables_main


def fake_runs() -> pd.DataFrame:
    """Two seeds of LGC on MNIST at 0 % and 15 % noise (the columns runs.csv has)."""
    rows = []
    for noise, accs in ((0.0, [(0.92, 1.0), (0.94, 1.0)]), (0.15, [(0.84, 0.85), (0.86, 0.85)])):
        for seed, (u, lab) in enumerate(accs):
            rows.append({"dataset": "mnist", "algo": "lgc", "loss": np.nan, "method": "LGC", "noise_rate": noise,
                         "seed": seed, "acc_unlabeled": u, "acc_labeled": lab})
    return pd.DataFrame(rows)


def fake_reported() -> pd.DataFrame:
    """The paper's LGC cells (one with no sd), and others' values for the unlabelled metric only."""
    cols = ["table", "dataset", "noise", "method", "unlabeled_mean", "unlabeled_sd", "labeled_mean", "labeled_sd",
            "source"]
    rows = [
        (2, "MNIST", 0, "LGC", 93.0, 1.0, 100.0, 0.0, "paper"),        # a real 0.00 sd
        (2, "MNIST", 15, "LGC", 85.4, np.nan, 85.0, np.nan, "paper"),  # quoted without an sd
        (2, "MNIST", 0, "LSSC*", 93.1, 0.7, np.nan, np.nan, "lu2015"),
        (2, "MNIST", 15, "LSSC*", 91.1, np.nan, np.nan, np.nan, "lu2015"),
        (2, "MNIST", 0, "GFHF", 80.0, 0.0, np.nan, np.nan, "gong2017"),
    ]
    return pd.DataFrame(rows, columns=cols)


def _render(metric: str) -> tuple[str, pd.DataFrame]:
    reported = fake_reported()
    cmp = compare(aggregate(fake_runs()), reported, "MNIST", metric)
    others = reported[reported["source"] != "paper"]
    return render_markdown(cmp, others, "caption", metric), cmp


def test_values_without_sd_show_the_mean_alone():
    md, cmp = _render("unlabeled")
    assert "93.00 ± 1.00 (n=2)<br>paper 93.00 ± 1.00" in md
    assert "85.00 ± 1.00 (n=2)<br>paper 85.40<br>Δ -0.40 ✓" in md  # no sd quoted: mean alone, tolerance 1
    assert "| 15% | 91.10 |" in md and "nan" not in md
    assert "| 0% | 93.10 ± 0.70 | 80.00 ± 0.00 |" in md  # a quoted 0.00 sd is shown as such
    row = cmp[cmp["noise"] == 15].iloc[0]
    assert np.isnan(row["paper_sd"]) and row["tolerance"] == 1.0 and row["within"]
    labeled, _ = _render("labeled")
    assert "paper 100.00 ± 0.00" in labeled and "paper 85.00<br>" in labeled


def test_latex_without_sd():
    _, cmp = _render("unlabeled")
    tex = render_latex(cmp, "caption")
    assert r"paper $85.40$" in tex and r"paper $93.00 \pm 1.00$" in tex and "nan" not in tex


def test_empty_others_block_is_omitted():
    md, _ = _render("labeled")  # others quote no labelled accuracy
    assert "Reported by others" not in md and "LSSC*" not in md and "`*`" not in md
    md, _ = _render("unlabeled")
    assert "Reported by others (quoted in the paper from Lu et al. (2015), Gong et al. (2017); not rerun here):" in md


def test_star_legend_under_the_table():
    md, _ = _render("unlabeled")
    lines = md.rstrip("\n").splitlines()
    assert lines[-1].startswith("`*` (LSSC*): kept from the paper") and "Lu et al. (2015)" in lines[-1]
    assert "anchor graph" in lines[-1]
    assert star_legend(["GFHF"], fake_reported()) == ""  # no starred method shown: no legend


def test_write_tables_and_from_csv(tmp_path):
    runs_csv = tmp_path / "runs.csv"
    fake_runs().to_csv(runs_csv, index=False)
    reported_csv = tmp_path / "reported.csv"
    fake_reported().to_csv(reported_csv, index=False)
    out = tmp_path / "tables"
    assert tables_main(["--from-csv", str(runs_csv), "--out", str(out), "--reported", str(reported_csv)]) == 0
    names = sorted(p.name for p in out.iterdir() if p.suffix != ".png" and p.name != "REPORT.md")
    assert names == ["README.md", "summary.csv", "table2a_mnist_unlabeled.csv", "table2a_mnist_unlabeled.md",
                     "table2a_mnist_unlabeled.tex", "table2b_mnist_labeled.csv", "table2b_mnist_labeled.md",
                     "table2b_mnist_labeled.tex"]
    # beside the tables: the figures and REPORT.md (tests/test_report.py)
    assert sorted(p.name for p in out.glob("*.png")) == ["fig_accuracy_mnist.png", "fig_seeds_mnist.png"]
    assert (out / "REPORT.md").is_file()
    readme = (out / "README.md").read_text()
    assert f"--from-csv {runs_csv}" in readme and f"read from `{runs_csv}`" in readme
    # the same as building in-process from the DataFrame (apart from the provenance line)
    direct = tmp_path / "direct"
    write_tables(fake_runs(), fake_reported(), direct)
    for name in names[1:]:
        assert (out / name).read_text() == (direct / name).read_text(), name
    summary = pd.read_csv(out / "summary.csv")
    assert summary["unlabeled_mean"].tolist() == [93.0, 85.0] and summary["unlabeled_sd"].tolist() == [1.0, 1.0]


def test_from_csv_errors(tmp_path, capsys):
    assert tables_main(["--from-csv", str(tmp_path / "none.csv"), "--out", str(tmp_path / "t")]) == 2
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"dataset": ["mnist"]}).to_csv(bad, index=False)
    assert tables_main(["--from-csv", str(bad), "--out", str(tmp_path / "t")]) == 2
    err = capsys.readouterr().err
    assert "is not a file" in err and "lacks the column(s) method, noise_rate" in err
    assert not (tmp_path / "t").exists()


def test_reported_numbers_ship_in_the_package():
    folder, name = REPORTED_RESOURCE
    res = resources.files("lgcexp") / folder / name
    assert res.is_file()
    reported = load_reported()
    assert set(reported["source"]) == {"paper", "gong2017", "lu2015"}
    assert len(reported[reported["source"] == "paper"]) == 16 + 9  # own rows of Tables 1 (4 x 4) and 2 (3 x 3)
    lgc = reported[(reported["dataset"] == "ISOLET") & (reported["noise"] == 0) & (reported["method"] == "LGC")]
    assert lgc["unlabeled_mean"].item() == 84.71 and lgc["unlabeled_sd"].item() == 0.56


@pytest.mark.parametrize("metric", ["unlabeled", "labeled"])
def test_shipped_reported_renders_without_nan(metric):
    reported = load_reported()
    cmp = compare(aggregate(fake_runs()), reported, "MNIST", metric)
    md = render_markdown(cmp, reported[(reported["dataset"] == "MNIST") & (reported["source"] != "paper")],
                         "caption", metric)
    assert "nan" not in md and ("Reported by others" in md) == (metric == "unlabeled")


def test_runs_are_grouped_by_noise_model(tmp_path):
    """Runs of another noise model than the paper's (uniform) get their own tables, with no paper column;
    the paper's tables and summary.csv keep uniform runs only; a missing ``noise`` means uniform."""
    uniform = fake_runs()                       # no noise column at all: an old runs table
    pairwise = fake_runs().assign(noise="pairwise", acc_unlabeled=lambda d: d["acc_unlabeled"] - 0.10)
    runs = pd.concat([uniform.assign(noise=np.nan), pairwise], ignore_index=True)
    agg = aggregate(runs)
    assert sorted(set(agg["noise_model"])) == ["pairwise", "uniform"] and len(agg) == 4
    assert aggregate(uniform)["noise_model"].tolist() == ["uniform", "uniform"]
    out = tmp_path / "tables"
    write_tables(runs, fake_reported(), out)
    names = sorted(p.name for p in out.iterdir())
    assert "table2c_mnist_pairwise_unlabeled.md" in names and "table2d_mnist_pairwise_labeled.tex" in names
    assert "summary_pairwise.csv" in names and "summary.csv" in names
    # the paper's table is exactly what uniform runs alone give
    alone = tmp_path / "alone"
    write_tables(uniform, fake_reported(), alone)
    for name in ("table2a_mnist_unlabeled.md", "table2a_mnist_unlabeled.csv", "table2b_mnist_labeled.tex",
                 "summary.csv"):
        assert (out / name).read_text() == (alone / name).read_text(), name
    md = (out / "table2c_mnist_pairwise_unlabeled.md").read_text()
    assert "pairwise noise" in md and "paper" not in md.split("\n", 3)[3] and "Reported by others" not in md
    assert "| 0% | 83.00 ± 1.00 (n=2) |" in md and "| 15% | 75.00 ± 1.00 (n=2) |" in md
    csv = pd.read_csv(out / "table2c_mnist_pairwise_unlabeled.csv")
    assert list(csv.columns) == ["noise", "method", "n_seeds", "ours_mean", "ours_sd"]
    assert pd.read_csv(out / "summary_pairwise.csv")["unlabeled_mean"].tolist() == [83.0, 75.0]


def test_collect_records_the_noise_model(tmp_path):
    import json

    from lgcexp.tables import RUN_COLUMNS, collect

    assert "chosen_alpha" not in RUN_COLUMNS and RUN_COLUMNS.index("noise") == RUN_COLUMNS.index("noise_rate") - 1
    for i, model in enumerate([None, "pairwise"]):
        d = tmp_path / f"run{i}"
        d.mkdir()
        rec = {"dataset": "isolet", "algo": "lgc", "noise_rate": 0.2, "seed": 0, "acc_unlabeled": 0.8,
               "acc_labeled": 0.8, "config_hash": f"h{i}", **({"noise": model} if model else {})}
        (d / "result.json").write_text(json.dumps(rec))
    runs, _ = collect(tmp_path)
    assert dict(zip(runs["config_hash"], runs["noise"])) == {"h0": "uniform", "h1": "pairwise"}


def test_merge_runs_keeps_one_row_per_config_hash_and_the_new_one_wins():
    from lgcexp.tables import merge_runs

    old = pd.DataFrame({"dataset": ["isolet", "isolet"], "method": ["LGC", "LGC"], "noise_rate": [0.0, 0.2],
                        "seed": [0, 0], "acc_unlabeled": [0.8, 0.7], "acc_labeled": [1.0, 0.8],
                        "config_hash": ["a", "b"]})
    new = pd.DataFrame({"dataset": ["isolet", "isolet"], "method": ["LGC", "LGC"], "noise": ["uniform", "pairwise"],
                        "noise_rate": [0.2, 0.2], "seed": [0, 0], "acc_unlabeled": [0.75, 0.6],
                        "acc_labeled": [0.8, 0.8], "config_hash": ["b", "c"]})
    m = merge_runs(old, new)
    assert sorted(m["config_hash"]) == ["a", "b", "c"]
    assert m.set_index("config_hash").loc["b", "acc_unlabeled"] == 0.75  # the new run replaces the old record
    assert m.set_index("config_hash").loc["a", "noise"] == "uniform"      # old records were uniform noise


def test_merge_runs_replaces_an_unrecorded_row_by_the_rerun_of_the_same_run_and_keeps_variants():
    """A row written before settings were recorded (old config hash, no ``setting``) is superseded by a new run of
    the same method, data set, noise and seed; a recorded old row of another setting (a variant) and unrecorded
    rows of other seeds or methods stay."""
    from lgcexp.tables import merge_runs

    old = pd.DataFrame({"dataset": ["mnist"] * 4, "method": ["GFHF", "GFHF [setting=unrecorded]", "GFHF", "LGC"],
                        "noise": ["uniform"] * 4, "noise_rate": [0.15, 0.3, 0.15, 0.15], "seed": [0, 0, 1, 0],
                        "acc_unlabeled": [0.1, 0.2, 0.3, 0.4], "acc_labeled": [1.0] * 4,
                        "config_hash": ["o1", "o2", "o3", "o4"], "setting": [None, "", None, None]})
    variant = pd.DataFrame({"dataset": ["mnist"], "method": ["GFHF"], "noise": ["uniform"], "noise_rate": [0.15],
                            "seed": [0], "acc_unlabeled": [0.5], "acc_labeled": [1.0], "config_hash": ["v"],
                            "setting": ['{"algo.params.tol":1e-4}']})
    new = pd.DataFrame({"dataset": ["mnist", "mnist"], "method": ["GFHF", "GFHF"], "noise": ["uniform"] * 2,
                        "noise_rate": [0.15, 0.30000000001], "seed": [0, 0], "acc_unlabeled": [0.11, 0.22],
                        "acc_labeled": [1.0, 1.0], "config_hash": ["n1", "n2"],
                        "setting": ['{"algo.params.tol":1e-8}'] * 2})
    m = merge_runs(pd.concat([old, variant], ignore_index=True), new)
    assert sorted(m["config_hash"]) == ["n1", "n2", "o3", "o4", "v"]
    # an unrecorded new row supersedes nothing but its own hash
    m2 = merge_runs(old, new.assign(setting=None))
    assert sorted(m2["config_hash"]) == ["n1", "n2", "o1", "o2", "o3", "o4"]
    # two new settings of one run are variants: neither replaces the unrecorded row
    two = pd.concat([new.iloc[[0]], new.iloc[[0]].assign(config_hash="n3", setting='{"algo.params.tol":1e-4}')])
    assert sorted(merge_runs(old, two)["config_hash"]) == ["n1", "n3", "o1", "o2", "o3", "o4"]
    # an old table with a missing seed, a NaN noise model or no seed column: nothing raises, incomplete rows stay
    odd = old.assign(seed=[0, np.nan, 1, 0], noise=[np.nan, "uniform", "uniform", "uniform"])
    assert sorted(merge_runs(odd, new)["config_hash"]) == ["n1", "n2", "o2", "o3", "o4"]
    assert len(merge_runs(old.drop(columns="seed"), new.drop(columns="seed"))) == 6


def test_reproduce_tables_script_builds_the_tables_through_the_entry_point(tmp_path):
    """``make reproduce-tables``'s last step runs lgcexp-tables' module (a module without a ``__main__`` block
    would exit 0 having written nothing): with no sweep run and no runs folder it must fail with that entry
    point's one-line error."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "scripts" / "reproduce_tables.py"
    env = {**__import__("os").environ, "LGCEXP_RESULTS_DIR": str(tmp_path / "res")}
    out = subprocess.run([sys.executable, str(script), "--only"], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2
    assert "lgcexp-tables: error: --root" in out.stderr and "is not a directory" in out.stderr
    assert (tmp_path / "res" / "tables" / "PROVENANCE.md").is_file()


def test_reproduce_tables_keeps_the_runs_it_does_not_redo(tmp_path):
    """The committed runs.csv holds runs no reproduce experiment makes (ISOLET's pairwise table, the rerun
    baselines): the script merges the runs it finds into it instead of writing only those."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    import pandas as pd
    from helpers import make_cfg

    from lgcexp.pipeline import run

    root = Path(__file__).resolve().parents[1]
    res = tmp_path / "res"
    (res / "runs").mkdir(parents=True)
    shutil.copy(root / "results" / "runs.csv", res / "runs.csv")
    before = pd.read_csv(res / "runs.csv")
    run(make_cfg("dataset=digits", "algo=lgc", tmp=tmp_path), out_dir=res / "runs" / "digits-lgc")
    env = {**__import__("os").environ, "LGCEXP_RESULTS_DIR": str(res)}
    out = subprocess.run([sys.executable, str(root / "scripts" / "reproduce_tables.py"), "--only"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    after = pd.read_csv(res / "runs.csv")
    assert len(after) == len(before) + 1
    assert set(before["config_hash"]) < set(after["config_hash"])
