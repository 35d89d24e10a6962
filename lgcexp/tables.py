"""Collect run records and render the paper's tables (Tables 1-2: ISOLET and MNIST, unlabelled and
labelled accuracy) with the paper's reported numbers beside ours.

``lgcexp-tables --root results/runs`` reads every ``result.json`` (and ``error.json``) below the root,
writes ``results/runs.csv`` (one row per run) and ``results/tables/`` (Markdown, CSV, LaTeX per table).
``lgcexp-tables --from-csv results/runs.csv`` rebuilds the tables from that one-row-per-run table instead
(a clone has the committed ``runs.csv`` but not the run directories).
Means and standard deviations are over seeds, population sd (ddof=0) as the paper's authors computed them,
in percent with two decimals. The paper's reported numbers ship inside the package
(``lgcexp/resources/paper_reported.csv``, read by :func:`load_reported`).
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .cache import atomic_write_text
from .records import ERROR_FILE, RESULT_FILE

#: (algo, loss) -> the method's name in the paper's tables
METHOD_NAMES = {
    ("lgc", None): "LGC",
    ("gfhf", None): "GFHF",
    ("siis", None): "SIIS",
    ("autoD", None): "LGC_LVO_AutoD",
    ("autoL", "mse"): "LGC_LVO_AutoL (MSE)",
    ("autoL", "xent"): "LGC_LVO_AutoL (XENT)",
    ("autoL", "ce"): "LGC_LVO_AutoL (CE)",
    ("autoL", "mae"): "LGC_LVO_AutoL (MAE)",
}

#: the paper's tables: (file stem, dataset, metric, caption)
PAPER_TABLES = [
    ("table1a_isolet_unlabeled", "ISOLET", "unlabeled", "ISOLET (1040/7797 labels): accuracy on unlabelled examples"),
    ("table1b_isolet_labeled", "ISOLET", "labeled", "ISOLET (1040/7797 labels): accuracy on labelled examples after label correction"),
    ("table2a_mnist_unlabeled", "MNIST", "unlabeled", "MNIST (100/70000 labels): accuracy on unlabelled examples"),
    ("table2b_mnist_labeled", "MNIST", "labeled", "MNIST (100/70000 labels): accuracy on labelled examples after label correction"),
]

#: the paper's reported numbers, inside the package (``lgcexp/resources/paper_reported.csv``)
REPORTED_RESOURCE = ("resources", "paper_reported.csv")

#: ``source`` values of the reported numbers -> who published them (the paper quotes them)
SOURCES = {"paper": "the paper", "gong2017": "Gong et al. (2017)", "lu2015": "Lu et al. (2015)"}

#: what the paper's ``*`` stands for, per source: the paper (Table 2) puts it, without defining it, on exactly
#: the methods whose numbers it quotes from that source
STAR_NOTES = {
    "lu2015": "Lu et al. (2015); those were computed on an anchor graph with graph parameters tuned by "
              "cross-validation (paper, Experiment 2), not on the kNN graph used here",
}

RUN_COLUMNS = ["dataset", "algo", "loss", "method", "noise_rate", "seed", "n", "n_labeled", "n_flipped",
               "acc_unlabeled", "acc_labeled", "acc_labeled_lgc", "n_dropped", "detect_precision", "detect_recall",
               "detect_f1", "detect_auc", "detect_ap", "detect_precision_at_k", "n_label_issues", "detect_false_alarms",
               "detect_suggest_acc", "chosen_alpha", "seconds_total", "config_hash", "run_dir"]


def load_reported(path: str | Path | None = None) -> pd.DataFrame:
    """The paper's reported numbers: the CSV shipped in the package, or ``path`` when given."""
    if path is not None:
        return pd.read_csv(path)
    folder, name = REPORTED_RESOURCE
    with (resources.files("lgcexp") / folder / name).open("r", encoding="utf-8") as fh:
        return pd.read_csv(fh)


def method_name(algo: str, loss: str | None) -> str:
    loss = None if (loss is None or (isinstance(loss, float) and np.isnan(loss))) else loss
    return METHOD_NAMES.get((algo, loss), f"{algo}({loss})" if loss else algo)


def collect(root: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(runs, failures) under ``root``; a run directory with both files counts as done."""
    rows, fails = [], []
    for path in sorted(Path(root).rglob(RESULT_FILE)):
        r = json.loads(path.read_text())
        row: dict[str, Any] = {k: r.get(k) for k in RUN_COLUMNS if k in r}
        row["method"] = method_name(r["algo"], r.get("loss"))
        row["seconds_total"] = round(sum((r.get("stage_seconds") or {}).values()), 3)
        row["run_dir"] = str(path.parent.relative_to(root))
        rows.append(row)
    for path in sorted(Path(root).rglob(ERROR_FILE)):
        if (path.parent / RESULT_FILE).exists():
            continue
        e = json.loads(path.read_text())
        fails.append({"run_dir": str(path.parent.relative_to(root)), "error": e.get("error"), "type": e.get("type")})
    runs = pd.DataFrame(rows, columns=[c for c in RUN_COLUMNS if any(c in r for r in rows)] or RUN_COLUMNS)
    if len(runs):
        runs = runs.drop_duplicates("config_hash").sort_values(["dataset", "method", "noise_rate", "seed"])
    return runs.reset_index(drop=True), pd.DataFrame(fails, columns=["run_dir", "error", "type"])


def aggregate(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean and population sd over seeds, in percent, per dataset, noise level and method."""
    df = runs.copy()
    df["noise"] = (100 * df["noise_rate"].astype(float)).round().astype(int)
    df["DATASET"] = df["dataset"].str.upper()
    out = []
    for (ds, noise, method), g in df.groupby(["DATASET", "noise", "method"], sort=True):
        row = {"dataset": ds, "noise": noise, "method": method, "n_seeds": len(g)}
        for metric in ("unlabeled", "labeled"):
            v = 100 * g[f"acc_{metric}"].astype(float).to_numpy()
            row[f"{metric}_mean"] = float(np.mean(v))
            row[f"{metric}_sd"] = float(np.std(v, ddof=0))
        out.append(row)
    return pd.DataFrame(out)


def compare(agg: pd.DataFrame, reported: pd.DataFrame, dataset: str, metric: str) -> pd.DataFrame:
    """Tidy comparison for one paper table: our cells beside the paper's own numbers."""
    ours = agg[agg["dataset"] == dataset]
    paper = reported[(reported["dataset"] == dataset) & (reported["source"] == "paper")]
    rows = []
    keys = sorted(set(zip(ours["noise"], ours["method"])) | set(zip(paper["noise"], paper["method"])))
    for noise, method in keys:
        o = ours[(ours["noise"] == noise) & (ours["method"] == method)]
        p = paper[(paper["noise"] == noise) & (paper["method"] == method)]
        om = float(o[f"{metric}_mean"].iloc[0]) if len(o) else np.nan
        osd = float(o[f"{metric}_sd"].iloc[0]) if len(o) else np.nan
        pm = float(p[f"{metric}_mean"].iloc[0]) if len(p) else np.nan
        psd = float(p[f"{metric}_sd"].iloc[0]) if len(p) else np.nan
        diff = om - pm
        tol = max(1.0, psd) if np.isfinite(psd) else 1.0  # no sd quoted: one point
        rows.append({"noise": noise, "method": method, "n_seeds": int(o["n_seeds"].iloc[0]) if len(o) else 0,
                     "ours_mean": om, "ours_sd": osd, "paper_mean": pm, "paper_sd": psd, "diff": diff,
                     "tolerance": tol, "within": bool(abs(diff) <= tol) if np.isfinite(diff) else None})
    return pd.DataFrame(rows)


def _pm(m: float, s: float) -> str:
    """``mean ± sd``; the mean alone when no sd is known (NaN), so a quoted 0.00 sd stays visible."""
    if not np.isfinite(m):
        return "—"
    return f"{m:.2f} ± {s:.2f}" if np.isfinite(s) else f"{m:.2f}"


def _pm_tex(m: float, s: float) -> str:
    return rf"${m:.2f} \pm {s:.2f}$" if np.isfinite(s) else rf"${m:.2f}$"


def star_legend(methods: list[str], reported: pd.DataFrame) -> str:
    """One line saying what ``*`` means, for the starred methods shown (empty when none is shown)."""
    starred = [m for m in methods if "*" in m]
    if not starred:
        return ""
    sources = list(dict.fromkeys(reported.loc[reported["method"].isin(starred), "source"]))
    what = "; ".join(STAR_NOTES.get(src, SOURCES.get(src, src)) for src in sources)
    return (f"`*` ({', '.join(starred)}): kept from the paper, which puts it, without defining it, on exactly the "
            f"methods whose numbers it quotes from {what}.")


def _method_order(methods: list[str]) -> list[str]:
    order = list(METHOD_NAMES.values())
    return sorted(methods, key=lambda m: (order.index(m) if m in order else len(order), m))


def render_markdown(cmp: pd.DataFrame, others: pd.DataFrame, caption: str, metric: str) -> str:
    """Rows = noise levels, columns = methods; each cell: ours, the paper's value, the difference."""
    methods = _method_order(list(cmp["method"].unique()))
    lines = [f"### {caption}", "", "Ours: mean ± sd over seeds (population sd). Paper: its reported value. "
             "Δ = ours − paper; ✓ when |Δ| ≤ max(1, paper sd).", ""]
    lines.append("| Noise | " + " | ".join(methods) + " |")
    lines.append("|---|" + "---|" * len(methods))
    for noise in sorted(cmp["noise"].unique()):
        cells = []
        for m in methods:
            r = cmp[(cmp["noise"] == noise) & (cmp["method"] == m)]
            if not len(r):
                cells.append("")
                continue
            r = r.iloc[0]
            cell = _pm(r.ours_mean, r.ours_sd) + (f" (n={r.n_seeds})" if r.n_seeds else "")
            if np.isfinite(r.paper_mean):
                mark = "" if r.within is None else (" ✓" if r.within else " ✗")
                cell += f"<br>paper {_pm(r.paper_mean, r.paper_sd)}"
                if np.isfinite(r["diff"]):
                    cell += f"<br>Δ {r['diff']:+.2f}{mark}"
            cells.append(cell)
        lines.append(f"| {noise}% | " + " | ".join(cells) + " |")
    # others' values for this metric only: a source that reports none (Lu et al.: no labelled accuracy) is left out
    others = others[np.isfinite(others[f"{metric}_mean"].astype(float))] if len(others) else others
    if len(others):
        who = ", ".join(SOURCES.get(s, s) for s in dict.fromkeys(others["source"]))
        lines += ["", f"Reported by others (quoted in the paper from {who}; not rerun here):", ""]
        om = list(dict.fromkeys(others["method"]))
        lines.append("| Noise | " + " | ".join(om) + " |")
        lines.append("|---|" + "---|" * len(om))
        for noise in sorted(others["noise"].unique()):
            cells = []
            for m in om:
                r = others[(others["noise"] == noise) & (others["method"] == m)]
                v = r[f"{metric}_mean"].iloc[0] if len(r) else np.nan
                s = r[f"{metric}_sd"].iloc[0] if len(r) else np.nan
                cells.append(_pm(float(v), float(s)) if np.isfinite(v) else "")
            lines.append(f"| {noise}% | " + " | ".join(cells) + " |")
        legend = star_legend(om, others)
        if legend:
            lines += ["", legend]
    return "\n".join(lines) + "\n"


def render_latex(cmp: pd.DataFrame, caption: str) -> str:
    methods = _method_order(list(cmp["method"].unique()))
    esc = lambda s: s.replace("_", r"\_").replace("%", r"\%")  # noqa: E731
    out = [r"\begin{table}[!h]", r"\centering", r"\scriptsize", rf"\caption{{{esc(caption)}}}",
           r"\begin{tabular}{l" + "l" * len(methods) + "}", r"\hline",
           "Noise & " + " & ".join(esc(m) for m in methods) + r" \\ \hline"]
    for noise in sorted(cmp["noise"].unique()):
        cells = []
        for m in methods:
            r = cmp[(cmp["noise"] == noise) & (cmp["method"] == m)]
            if not len(r) or not np.isfinite(r.iloc[0].ours_mean):
                cells.append("")
                continue
            r = r.iloc[0]
            c = _pm_tex(r.ours_mean, r.ours_sd)
            if np.isfinite(r.paper_mean):
                c = rf"\makecell{{{c} \\ \tiny paper {_pm_tex(r.paper_mean, r.paper_sd)}}}"
            cells.append(c)
        out.append(rf"{noise}\% & " + " & ".join(cells) + r" \\")
    out += [r"\hline", r"\end{tabular}", r"\end{table}"]
    return "\n".join(out) + "\n"


def write_tables(runs: pd.DataFrame, reported: pd.DataFrame, out_dir: Path, provenance: str = "") -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    agg = aggregate(runs) if len(runs) else pd.DataFrame(columns=["dataset", "noise", "method"])
    written = []
    index = ["# Reproduced tables", "", provenance, ""]
    for stem, ds, metric, caption in PAPER_TABLES:
        if not (agg["dataset"] == ds).any():
            continue
        cmp = compare(agg, reported, ds, metric)
        others = reported[(reported["dataset"] == ds) & (reported["source"] != "paper")]
        md = render_markdown(cmp, others, caption, metric)
        for suffix, text in ((".md", md), (".csv", cmp.round(4).to_csv(index=False)), (".tex", render_latex(cmp, caption))):
            path = out_dir / f"{stem}{suffix}"
            atomic_write_text(path, text)
            written.append(path)
        index += [md, ""]
    if len(agg):
        atomic_write_text(out_dir / "summary.csv", agg.round(4).to_csv(index=False))
        atomic_write_text(out_dir / "README.md", "\n".join(index))
        written += [out_dir / "summary.csv", out_dir / "README.md"]
    return written


def provenance_line(command: str | None = None, runs_csv: str | None = None) -> str:
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    import os

    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    cmd = command or "lgcexp-tables"
    line = f"Produced by `{cmd}` on {now} ({machine})."
    if runs_csv:
        line += f" The runs were read from `{runs_csv}` (see PROVENANCE.md for how they were produced)."
    return line


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="lgcexp-tables", description=__doc__.splitlines()[0])
    ap.add_argument("--root", default="results/runs", help="directory holding run directories (result.json)")
    ap.add_argument("--out", default="results/tables", help="where to write the tables")
    ap.add_argument("--runs-csv", default="results/runs.csv", help="the tidy one-row-per-run table (written)")
    ap.add_argument("--from-csv", default=None, metavar="RUNS_CSV",
                    help="build the tables from this one-row-per-run table (e.g. results/runs.csv) instead of --root")
    ap.add_argument("--reported", default=None,
                    help="the paper's reported numbers (CSV); default: the copy shipped in the package")
    ap.add_argument("--command", default=None, help="the command to quote as provenance")
    a = ap.parse_args(argv)
    reported = load_reported(a.reported)
    if a.from_csv is not None:
        src = Path(a.from_csv)
        if not src.is_file():
            print(f"lgcexp-tables: error: --from-csv {src} is not a file", file=sys.stderr)
            return 2
        runs = pd.read_csv(src)
        missing = [c for c in ("dataset", "method", "noise_rate", "acc_unlabeled", "acc_labeled") if c not in runs]
        if missing:
            print(f"lgcexp-tables: error: --from-csv {src} lacks the column(s) {', '.join(missing)}", file=sys.stderr)
            return 2
        command = a.command or f"lgcexp-tables --from-csv {src}"
        written = write_tables(runs, reported, Path(a.out), provenance_line(command, str(src)))
        print(f"lgcexp-tables: {len(runs)} runs read from {src}; wrote {len(written)} files in {a.out}")
        return 0
    root = Path(a.root)
    if not root.is_dir():
        print(f"lgcexp-tables: error: --root {root} is not a directory (run a sweep first, or use --from-csv)",
              file=sys.stderr)
        return 2
    runs, fails = collect(root)
    atomic_write_text(Path(a.runs_csv), runs.to_csv(index=False))
    written = write_tables(runs, reported, Path(a.out), provenance_line(a.command))
    print(f"lgcexp-tables: {len(runs)} runs, {len(fails)} failed; wrote {a.runs_csv} and {len(written)} files in {a.out}")
    for _, f in fails.iterrows():
        print(f"  FAILED {f.run_dir}: {f.error}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
