"""Figures beside the tables and ``REPORT.md``, the page a reader opens first (written by ``lgcexp-tables``).

For each dataset of the paper's tables and each noise model in the runs (the paper's tables: uniform noise):

- ``fig_accuracy_<dataset>[_<model>].png``: accuracy against the noise rate, unlabelled and labelled panels;
  per method our mean over seeds with a band of ± sd (population sd, as in the tables), the paper's reported
  values as hollow diamonds with their sd as error bars, and the values the paper quotes from other papers
  (Gong et al. 2017, Lu et al. 2015) as grey markers of their own shape;
- ``fig_seeds_<dataset>[_<model>].png``: every seed's accuracy per cell as a strip plot (rows: unlabelled,
  labelled; columns: noise rates), our mean as a black bar, the paper's mean ± sd beside it;
- ``fig_detection_<dataset>[_<model>].png``: ROC and precision-recall curves of label-issue detection per
  method and noise rate, from the runs' ``label_issues.csv`` (score ``1 - label_quality`` against
  ``is_flipped``; curves pooled over seeds, AUC and average precision per seed in the legend); drawn only
  when such files exist under the runs root;
- ``fig_figure2.png``: the paper's Figure 2 (AutoD's losses and accuracies against x, alpha = 2^(-1/x)) from
  ``autod_curves.csv`` when it is in the output folder (the run's own ``figure2.png`` stays as written).

``REPORT.md`` shows each figure with the table(s) it summarises and two sentences computed from the same
numbers, plus the provenance line. Every method has one colour in every figure (Okabe & Ito's colour-blind
safe palette). Each PNG carries the values it plots as JSON in its ``lgcexp-values`` text chunk
(:func:`plotted_values`), so a test can compare the committed figures with the committed tables.
A method the paper reports but the runs lack is left out of the figures, with a note in ``REPORT.md``.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .cache import atomic_write_text
from .tables import METHOD_NAMES, PAPER_NOISE, SOURCES, aggregate, compare, noise_models

#: one colour per method in every figure: Okabe & Ito (2008), safe for the common colour-vision deficiencies
METHOD_COLORS = {
    "LGC": "#0072B2",                   # blue
    "SIIS": "#009E73",                  # bluish green
    "LGC_LVO_AutoL (MSE)": "#E69F00",   # orange
    "LGC_LVO_AutoL (XENT)": "#D55E00",  # vermillion
    "LGC_LVO_AutoD": "#CC79A7",         # reddish purple
    "GFHF": "#56B4E9",                  # sky blue
    "LGC_LVO_AutoL (CE)": "#000000",    # black
    "LGC_LVO_AutoL (MAE)": "#B8A000",   # Okabe-Ito yellow, darkened to read on white
}
#: colours for methods outside the list above (Paul Tol's muted scheme, also colour-blind safe)
EXTRA_COLORS = ["#332288", "#882255", "#44AA99", "#999933", "#AA4499", "#117733", "#88CCEE", "#DDCC77"]
#: values quoted from other papers: one grey, a marker shape per method
OTHERS_COLOR = "#555555"
OTHERS_MARKERS = ["s", "^", "v", "P", "X", "<", ">", "*", "h"]
#: the Figure-2 curves (not methods): Okabe-Ito colours in the order of the paper's (orange, blue, green, red,
#: purple), with vermillion and reddish purple for the accuracies so that no red-green pair is needed
CURVE_STYLE = {
    "mae": ("MAE", "#E69F00", "-"),
    "mse": ("MSE", "#0072B2", "-"),
    "ce": ("cross-entropy", "#009E73", "-"),
    "loo_acc": ("labelled acc. (LOO in (a), in-sample in (b))", "#D55E00", "--"),
    "unl_acc": ("unlabelled acc. (spectral)", "#CC79A7", "--"),
}
METRICS = (("unlabeled", "unlabelled examples"), ("labeled", "labelled examples (after label correction)"))
#: the PNG text chunk holding the plotted values
VALUES_KEY = "lgcexp-values"
DPI = 130
LABEL_ISSUES_FILE = "label_issues.csv"
FIGURE2_CSV = "autod_curves.csv"
REPORT_FILE = "REPORT.md"


def method_colors(methods: list[str]) -> dict[str, str]:
    """The fixed colour of each method; methods outside :data:`METHOD_COLORS` get the extra colours in the
    order given (the same methods in the same order get the same colours in every figure)."""
    out, extra = {}, iter(EXTRA_COLORS * 4)
    for m in methods:
        out[m] = METHOD_COLORS.get(m) or next(extra)
    return out


def _order(methods) -> list[str]:
    order = list(METHOD_NAMES.values())
    return sorted(set(methods), key=lambda m: (order.index(m) if m in order else len(order), m))


def short_name(method: str) -> str:
    """``LGC_LVO_AutoL (XENT)`` -> ``AutoL (XENT)``: for crowded axes."""
    return method.replace("LGC_LVO_", "")


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 10.5, "axes.titlesize": 11.5, "axes.labelsize": 10.5,
                         "legend.fontsize": 9.5, "xtick.labelsize": 9.5, "ytick.labelsize": 9.5,
                         "figure.titlesize": 13, "axes.spines.top": False, "axes.spines.right": False})
    return plt


def _save(fig, path: Path, values: list[dict[str, Any]]) -> None:
    """Write the PNG atomically, with the plotted values as JSON in its text chunk."""
    import os
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".png", dir=path.parent)
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=DPI, metadata={VALUES_KEY: json.dumps(values, separators=(",", ":")),
                                             "Software": "lgcexp.report"})
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def plotted_values(png: str | Path) -> list[dict[str, Any]]:
    """The values a figure of this module plots, read back from its PNG."""
    from PIL import Image

    with Image.open(png) as im:
        return json.loads(im.text[VALUES_KEY])


# ------------------------------------------------------------------------------------------------------------
# data: what each figure draws
# ------------------------------------------------------------------------------------------------------------

def _num(v) -> float | None:
    v = float(v)
    return v if np.isfinite(v) else None


def accuracy_values(agg: pd.DataFrame, reported: pd.DataFrame, dataset: str, model: str) -> pd.DataFrame:
    """Rows (kind, metric, method, source, noise, mean, sd) of one accuracy figure: ``ours`` from the
    aggregated runs; for the paper's noise model also ``paper`` (its own numbers, for the methods we ran) and
    ``others`` (the values it quotes from other papers)."""
    ours = agg[(agg["dataset"] == dataset) & (agg["noise_model"] == model)]
    rows = []
    for metric, _ in METRICS:
        for r in ours.itertuples():
            rows.append({"kind": "ours", "metric": metric, "method": r.method, "source": "ours", "noise": int(r.noise),
                         "mean": _num(getattr(r, f"{metric}_mean")), "sd": _num(getattr(r, f"{metric}_sd")),
                         "n_seeds": int(r.n_seeds)})
        if model != PAPER_NOISE:
            continue
        rep = reported[reported["dataset"] == dataset]
        for r in rep.itertuples():
            mean = _num(getattr(r, f"{metric}_mean"))
            if mean is None:
                continue
            kind = "paper" if r.source == "paper" else "others"
            if kind == "paper" and r.method not in set(ours["method"]):
                continue  # a method the runs lack: left out (noted in REPORT.md)
            rows.append({"kind": kind, "metric": metric, "method": r.method, "source": r.source, "noise": int(r.noise),
                         "mean": mean, "sd": _num(getattr(r, f"{metric}_sd")), "n_seeds": None})
    return pd.DataFrame(rows, columns=["kind", "metric", "method", "source", "noise", "mean", "sd", "n_seeds"])


def seed_values(runs: pd.DataFrame, dataset: str, model: str) -> pd.DataFrame:
    """Every run's accuracies in percent (metric, method, noise, seed, value) for one strip plot."""
    r = runs[(runs["dataset"].str.upper() == dataset) & (noise_models(runs) == model)]
    rows = []
    for metric, _ in METRICS:
        for x in r.itertuples():
            rows.append({"metric": metric, "method": x.method, "noise": int(round(100 * float(x.noise_rate))),
                         "seed": int(x.seed) if "seed" in r else None,
                         "value": 100 * float(getattr(x, f"acc_{metric}"))})
    return pd.DataFrame(rows, columns=["metric", "method", "noise", "seed", "value"])


def roc_pr(suspicion: np.ndarray, positive: np.ndarray) -> dict[str, Any]:
    """ROC and precision-recall curves of ``suspicion`` (higher = more likely an issue) against ``positive``.

    Thresholds at every distinct score (ties move together). ROC AUC by the trapezoid rule; average
    precision as ``sum (R_k - R_{k-1}) P_k`` (scikit-learn's definition). None for AUC/AP when a class is
    absent."""
    s = np.asarray(suspicion, dtype=float)
    y = np.asarray(positive, dtype=bool)
    order = np.argsort(-s, kind="mergesort")
    s, y = s[order], y[order]
    last = np.r_[np.flatnonzero(np.diff(s) != 0), s.size - 1] if s.size else np.array([], dtype=int)
    tps = np.cumsum(y)[last]
    fps = np.cumsum(~y)[last]
    P, N = int(y.sum()), int((~y).sum())
    out: dict[str, Any] = {"P": P, "N": N, "auc": None, "ap": None}
    if P and N:
        fpr = np.r_[0.0, fps / N]
        tpr = np.r_[0.0, tps / P]
        out.update(fpr=fpr, tpr=tpr, auc=float(np.trapezoid(tpr, fpr) if hasattr(np, "trapezoid")
                                               else np.trapz(tpr, fpr)))
    if P:
        precision = tps / np.maximum(tps + fps, 1)
        recall = tps / P
        out.update(precision=np.r_[1.0, precision], recall=np.r_[0.0, recall],
                   ap=float(np.sum(np.diff(np.r_[0.0, recall]) * precision)))
    return out


def read_label_issues(path: Path) -> pd.DataFrame:
    """One run's ``label_issues.csv`` (index, given_label, suggested_label, label_quality in [0, 1], higher =
    more trustworthy, is_label_issue, is_flipped): the columns the curves need, checked."""
    df = pd.read_csv(path)
    missing = [c for c in ("label_quality", "is_flipped") if c not in df]
    if missing:
        raise ValueError(f"{path}: no column(s) {', '.join(missing)}")
    q = df["label_quality"].astype(float)
    if not np.isfinite(q).all() or (q < 0).any() or (q > 1).any():
        raise ValueError(f"{path}: label_quality must be finite and within [0, 1]")
    flipped = df["is_flipped"]
    if flipped.isna().any():
        raise ValueError(f"{path}: is_flipped is empty for some labels (no clean labels to score against)")
    if flipped.dtype == object:
        flipped = flipped.astype(str).str.lower().map({"true": True, "false": False, "1": True, "0": False})
        if flipped.isna().any():
            raise ValueError(f"{path}: is_flipped must be true/false")
    return pd.DataFrame({"label_quality": q, "is_flipped": flipped.astype(bool)})


def detection_data(runs: pd.DataFrame, root: Path | None, dataset: str, model: str,
                   problems: list[str] | None = None) -> dict[tuple[str, int], dict]:
    """(method, noise %) -> {"suspicion", "flipped", "per_seed": [(auc, ap), ...], "files"} from the
    ``label_issues.csv`` of the runs of ``dataset`` and ``model`` under ``root``. Runs with no file, and runs
    whose labels are all clean or all flipped (no curve: e.g. 0 % noise), are skipped; a file that cannot be
    read is skipped and named in ``problems``."""
    if root is None or "run_dir" not in runs or not Path(root).is_dir():
        return {}
    r = runs[(runs["dataset"].str.upper() == dataset) & (noise_models(runs) == model)]
    out: dict[tuple[str, int], dict] = {}
    for x in r.itertuples():
        path = Path(root) / str(x.run_dir) / LABEL_ISSUES_FILE
        if not path.is_file():
            continue
        try:
            df = read_label_issues(path)
        except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
            if problems is not None:
                problems.append(str(e))
            continue
        if df["is_flipped"].all() or not df["is_flipped"].any():
            continue
        key = (x.method, int(round(100 * float(x.noise_rate))))
        d = out.setdefault(key, {"suspicion": [], "flipped": [], "per_seed": [], "files": 0})
        susp = 1.0 - df["label_quality"].to_numpy()
        d["suspicion"].append(susp)
        d["flipped"].append(df["is_flipped"].to_numpy())
        c = roc_pr(susp, df["is_flipped"].to_numpy())
        d["per_seed"].append((c["auc"], c["ap"]))
        d["files"] += 1
    return out


def figure2_values(csv: Path) -> pd.DataFrame:
    return pd.read_csv(csv)


# ------------------------------------------------------------------------------------------------------------
# figures
# ------------------------------------------------------------------------------------------------------------

#: height of one legend row below the axes, in inches
LEGEND_ROW_IN = 0.29


def _legends_below(fig, groups: list[tuple[list, int, str | None]]) -> None:
    """Lay the axes out above stacked legends: ``groups`` = [(handles, ncol, title or None), ...], top first."""
    h = fig.get_size_inches()[1]
    rows = [(-(-len(hs) // ncol)) + (1 if title else 0) for hs, ncol, title in groups if hs]
    bottom = (sum(rows) * LEGEND_ROW_IN + 0.12 * len(rows) + 0.1) / h
    fig.tight_layout(rect=(0, bottom, 1, 1))
    y = bottom - 0.05 / h
    for hs, ncol, title in groups:
        if not hs:
            continue
        leg = fig.legend(handles=hs, loc="upper center", ncol=ncol, frameon=False, bbox_to_anchor=(0.5, y),
                         handlelength=2.2, columnspacing=1.6, title=title, title_fontsize=9.5)
        n = -(-len(hs) // ncol) + (1 if title else 0)
        y -= (n * LEGEND_ROW_IN + 0.12) / h
        fig.add_artist(leg)


def accuracy_figure(vals: pd.DataFrame, title: str, colors: dict[str, str], path: Path) -> None:
    """Accuracy against the noise rate: (a) unlabelled, (b) labelled examples."""
    plt = _plt()
    from matplotlib.lines import Line2D

    ours = vals[vals["kind"] == "ours"]
    others_methods = list(dict.fromkeys(vals.loc[vals["kind"] == "others", "method"]))
    markers = {m: OTHERS_MARKERS[i % len(OTHERS_MARKERS)] for i, m in enumerate(others_methods)}
    noises = sorted(set(vals["noise"]))
    step = min(np.diff(noises)) if len(noises) > 1 else 10
    fig, axes = plt.subplots(1, 2, figsize=(12.5, 6.6))
    for ax, (metric, what) in zip(axes, METRICS):
        v = vals[vals["metric"] == metric]
        for m in _order(ours["method"]):
            o = v[(v["kind"] == "ours") & (v["method"] == m)].sort_values("noise")
            x, mu, sd = o["noise"].to_numpy(float), o["mean"].to_numpy(float), o["sd"].to_numpy(float)
            ax.fill_between(x, mu - sd, mu + sd, color=colors[m], alpha=0.18, lw=0)
            ax.plot(x, mu, "-o", color=colors[m], ms=5, lw=1.8, zorder=3)
            p = v[(v["kind"] == "paper") & (v["method"] == m)].sort_values("noise")
            if len(p):
                ax.errorbar(p["noise"].to_numpy(float) + 0.06 * step, p["mean"], yerr=p["sd"].fillna(0),
                            fmt="D", mfc="white", mec=colors[m], mew=1.6, ms=6.5, ecolor=colors[m], elinewidth=1.2,
                            capsize=3, zorder=4)
        for i, m in enumerate(others_methods):
            q = v[(v["kind"] == "others") & (v["method"] == m)].sort_values("noise")
            if not len(q):
                continue
            dx = -0.06 * step * (1 + i % 3)
            ax.errorbar(q["noise"].to_numpy(float) + dx, q["mean"], yerr=q["sd"].fillna(0), fmt=markers[m] + ":",
                        color=OTHERS_COLOR, mfc=OTHERS_COLOR, ms=5.5, lw=0.9, elinewidth=0.9, capsize=2, alpha=0.7,
                        zorder=2)
        ax.set_title(f"({'ab'[metric == 'labeled']}) accuracy on {what}")
        ax.set_xlabel("label noise rate (%)")
        ax.set_ylabel("accuracy (%)")
        ax.set_xticks(noises)
        ax.set_xlim(noises[0] - 0.45 * step, noises[-1] + 0.45 * step)
        ax.grid(alpha=0.3)
    methods = [Line2D([], [], color=colors[m], marker="o", ms=5, lw=1.8, label=short_name(m))
               for m in _order(ours["method"])]
    keys = [Line2D([], [], color="0.2", marker="o", ms=5, lw=1.8, label="ours: mean, band = ± sd over seeds")]
    if (vals["kind"] == "paper").any():
        keys.append(Line2D([], [], ls="none", marker="D", mfc="white", mec="0.2", mew=1.6, ms=6.5,
                           label="the paper: reported mean ± sd"))
    quoted = []
    for m in others_methods:
        src = vals.loc[(vals["method"] == m) & (vals["kind"] == "others"), "source"].iloc[0]
        who = SOURCES.get(src, "quoted").replace(" (", " ").replace(")", "")
        quoted.append(Line2D([], [], color=OTHERS_COLOR, marker=markers[m], ls=":", ms=5.5, label=f"{m}, {who}"))
    fig.suptitle(title)
    _legends_below(fig, [(methods, min(len(methods), 5), None), (keys, len(keys), None),
                         (quoted, min(len(quoted), 4), "values the paper quotes from other papers (grey; a rerun of "
                                                       "the same method is its coloured line)")])
    _save(fig, path, _records(vals))
    plt.close(fig)


def seeds_figure(seeds: pd.DataFrame, paper: pd.DataFrame, title: str, colors: dict[str, str], path: Path) -> None:
    """Strip plot: one dot per seed, rows = metrics, columns = noise rates; black bar = our mean; hollow
    diamond = the paper's mean ± sd."""
    plt = _plt()
    from matplotlib.lines import Line2D

    noises = sorted(set(seeds["noise"]))
    methods = _order(seeds["method"])
    fig, axes = plt.subplots(2, len(noises), figsize=(max(7.5, 3.1 * len(noises) + 1.0), 7.4), squeeze=False)
    for row, (metric, what) in enumerate(METRICS):
        for col, noise in enumerate(noises):
            ax = axes[row, col]
            for j, m in enumerate(methods):
                v = seeds[(seeds["metric"] == metric) & (seeds["method"] == m) & (seeds["noise"] == noise)]
                if not len(v):
                    continue
                k = np.arange(len(v))
                jitter = ((k * 0.6180339887) % 1.0 - 0.5) * 0.42  # deterministic, evenly spread
                ax.scatter(j + jitter - 0.08, v["value"], s=15, color=colors[m], alpha=0.75, lw=0, zorder=3)
                ax.hlines(v["value"].mean(), j - 0.33, j + 0.17, color="black", lw=1.6, zorder=4)
                p = paper[(paper["metric"] == metric) & (paper["method"] == m) & (paper["noise"] == noise)]
                if len(p):
                    ax.errorbar(j + 0.3, p["mean"], yerr=p["sd"].fillna(0), fmt="D", mfc="white", mec=colors[m],
                                mew=1.5, ms=6, ecolor=colors[m], capsize=3, zorder=5)
            ax.set_xticks(range(len(methods)))
            ax.set_xticklabels([])
            ax.tick_params(axis="x", length=0)
            ax.set_xlim(-0.6, len(methods) - 0.4)
            ax.grid(axis="y", alpha=0.3)
            if row == 0:
                ax.set_title(f"{noise}% noise")
            if col == 0:
                ax.set_ylabel(f"accuracy (%)\n{what.split(' (')[0]}")
    handles = [Line2D([], [], ls="none", marker="o", color=colors[m], ms=6, label=short_name(m)) for m in methods]
    handles.append(Line2D([], [], color="black", lw=1.6, label="our mean"))
    if len(paper):
        handles.append(Line2D([], [], ls="none", marker="D", mfc="white", mec="0.2", mew=1.5, ms=6,
                              label="paper: mean ± sd"))
    fig.suptitle(title)
    _legends_below(fig, [(handles, min(len(handles), 7), None)])
    _save(fig, path, _records(seeds.assign(kind="seed")) + _records(paper.assign(kind="paper")))
    plt.close(fig)


def detection_figure(det: dict[tuple[str, int], dict], title: str, colors: dict[str, str], path: Path) -> pd.DataFrame:
    """ROC (top) and precision-recall (bottom) per noise rate; one curve per method, pooled over seeds."""
    plt = _plt()

    noises = sorted({n for _, n in det})
    methods = _order({m for m, _ in det})
    fig, axes = plt.subplots(2, len(noises), figsize=(max(7.5, 4.2 * len(noises)), 9.6), squeeze=False)
    table = detection_table(det)
    for col, noise in enumerate(noises):
        roc_ax, pr_ax = axes[0, col], axes[1, col]
        base = None
        for m in methods:
            d = det.get((m, noise))
            if d is None:
                continue
            c = roc_pr(np.concatenate(d["suspicion"]), np.concatenate(d["flipped"]))
            t = table[(table["method"] == m) & (table["noise"] == noise)].iloc[0]
            if c["auc"] is not None:
                roc_ax.plot(c["fpr"], c["tpr"], color=colors[m], lw=1.7,
                            label=f"{short_name(m)}: AUC {t.auc_mean:.3f} ± {t.auc_sd:.3f}")
            if c["ap"] is not None:
                pr_ax.plot(c["recall"], c["precision"], color=colors[m], lw=1.7, drawstyle="steps-post",
                           label=f"{short_name(m)}: AP {t.ap_mean:.3f} ± {t.ap_sd:.3f}")
                base = c["P"] / (c["P"] + c["N"])
        roc_ax.plot([0, 1], [0, 1], ls=":", color="0.5", lw=1)
        if base is not None:
            pr_ax.axhline(base, ls=":", color="0.5", lw=1, label=f"share of flipped labels: {base:.2f}")
        roc_ax.set(title=f"{noise}% noise: ROC", xlabel="false positive rate", ylabel="true positive rate",
                   xlim=(0, 1), ylim=(0, 1.01))
        pr_ax.set(title=f"{noise}% noise: precision-recall", xlabel="recall (flipped labels found)",
                  ylabel="precision", xlim=(0, 1), ylim=(0, 1.01))
        roc_ax.grid(alpha=0.3)
        pr_ax.grid(alpha=0.3)
        # ROC curves leave the lower right empty; PR curves fill the whole box: its legend goes below it
        roc_ax.legend(loc="lower right", fontsize=8.5, framealpha=0.9)
        pr_ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), fontsize=8.5, frameon=False)
    fig.suptitle(title)
    fig.tight_layout()
    _save(fig, path, _records(table))
    plt.close(fig)
    return table


def figure2(curves: pd.DataFrame, path: Path) -> dict[str, Any]:
    """Figure 2 from ``autod_curves.csv``: (a) diagonal removed, (b) kept. Dots: each loss's minimum and the
    maximum of each accuracy; dashed line: the x of the highest labelled LOO accuracy (ties: lowest
    cross-entropy, then smallest x), the rule of AutoD's default ``select=acc``."""
    plt = _plt()
    from matplotlib.lines import Line2D

    xs = curves["x"].to_numpy(float)
    facts = figure2_facts(curves)
    fig, axes = plt.subplots(1, 2, figsize=(12.5, 5.6), sharey=True)
    top = 1.03 * max(1.0, float(np.nanmax(curves.drop(columns=["x", "alpha"]).to_numpy(float))))
    for ax, sfx, name in zip(axes, ("rd", "nd"), ("(a) diagonal removed (leave-one-out)", "(b) diagonal NOT removed")):
        for k in ("mae", "mse", "ce", "loo_acc", "unl_acc"):
            col = k if k == "unl_acc" else f"{k}_{sfx}"
            if col not in curves:
                continue
            label, color, ls = CURVE_STYLE[k]
            y = curves[col].to_numpy(float)
            ax.plot(xs, y, ls, color=color, lw=1.8)
            j = int(np.argmax(y) if k.endswith("acc") else np.argmin(y))
            ax.plot(xs[j], y[j], "o", color=color, ms=6, zorder=4)
        ax.axvline(facts[sfx]["x_select"], color="0.3", ls=(0, (4, 3)), lw=1.1)
        ax.set_title(name)
        ax.set_xlabel(r"$x$   ($\alpha = 2^{-1/x}$)")
        ax.set_xlim(xs[0], xs[-1])
        ax.set_ylim(0.0, top)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("loss / accuracy (fraction)")
    handles = [Line2D([], [], color=c, ls=ls, lw=1.8, label=lab) for k, (lab, c, ls) in CURVE_STYLE.items()
               if k in curves or f"{k}_rd" in curves]
    marks = [Line2D([], [], ls="none", marker="o", color="0.3", ms=6,
                    label="minimum of a loss, maximum of an accuracy"),
             Line2D([], [], color="0.3", ls=(0, (4, 3)), lw=1.1,
                    label="x of the highest labelled accuracy (ties: lowest cross-entropy), AutoD's select=acc")]
    fig.suptitle(f"Figure 2: LGC_LVO_AutoD on MNIST without noise; with the diagonal removed it picks "
                 f"x = {facts['rd']['x_select']:g} (alpha = {facts['rd']['alpha_select']:.4f})")
    _legends_below(fig, [(handles, len(handles), None), (marks, 2, None)])
    _save(fig, path, [{"column": c, "values": [float(v) for v in curves[c]]} for c in curves.columns])
    plt.close(fig)
    return facts


def figure2_facts(curves: pd.DataFrame) -> dict[str, Any]:
    """Where each curve of Figure 2 has its optimum, per panel (``rd``: diagonal removed, ``nd``: kept)."""
    xs = curves["x"].to_numpy(float)
    out: dict[str, Any] = {}
    unl = curves["unl_acc"].to_numpy(float) if "unl_acc" in curves else None
    for sfx in ("rd", "nd"):
        acc = curves[f"loo_acc_{sfx}"].to_numpy(float)
        cand = np.flatnonzero(acc >= acc.max() - 1e-12)
        j = int(cand[np.argmin(curves[f"ce_{sfx}"].to_numpy(float)[cand])])
        f = {"x_select": float(xs[j]), "alpha_select": float(curves["alpha"].iloc[j]), "loo_acc_max": float(acc[j]),
             "loss_argmin": {k: float(xs[int(np.argmin(curves[f"{k}_{sfx}"].to_numpy(float)))])
                             for k in ("mae", "mse", "ce")}}
        if unl is not None:
            f["unl_at_select"] = float(unl[j])
            f["unl_at_loss_min"] = {k: float(unl[int(np.argmin(curves[f"{k}_{sfx}"].to_numpy(float)))])
                                    for k in ("mae", "mse", "ce")}
        out[sfx] = f
    if unl is not None:
        out["unl_max"] = float(unl.max())
        out["x_unl_max"] = float(xs[int(np.argmax(unl))])
    return out


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return json.loads(df.to_json(orient="records", double_precision=15))


# ------------------------------------------------------------------------------------------------------------
# the report
# ------------------------------------------------------------------------------------------------------------

def _table_links(dataset: str, model: str, specs: list[dict[str, Any]]) -> str:
    own = [s for s in specs if s["dataset"] == dataset and s["noise_model"] == model]
    return " and ".join(f"[`{s['stem']}`]({s['stem']}.md)" for s in own)


def accuracy_sentences(vals: pd.DataFrame, cmps: dict[str, pd.DataFrame]) -> str:
    """Two sentences: which method leads and trails at the highest noise rate (and what noise cost it), per
    metric; how our cells compare with the paper's."""
    ours = vals[vals["kind"] == "ours"]
    noises = sorted(set(ours["noise"]))
    parts = []
    for metric, what in METRICS:
        o = ours[ours["metric"] == metric]
        if not len(o):
            continue
        lo, hi = noises[0], noises[-1]
        at_hi = o[o["noise"] == hi].sort_values("mean", ascending=False)
        best, worst = at_hi.iloc[0], at_hi.iloc[-1]
        clause = (f"on {what.split(' (')[0]} {short_name(best.method)} leads with "
                  f"{best['mean']:.2f} ± {best['sd']:.2f} %")
        base = o[(o["method"] == best.method) & (o["noise"] == lo)]
        if lo != hi and len(base):
            clause += f" ({float(base['mean'].iloc[0]) - best['mean']:.1f} points below its {lo} % value)"
        if len(at_hi) > 1:
            clause += f" and {short_name(worst.method)} trails with {worst['mean']:.2f} %"
            base = o[(o["method"] == worst.method) & (o["noise"] == lo)]
            if lo != hi and len(base):
                clause += f" ({float(base['mean'].iloc[0]) - worst['mean']:.1f} below)"
        parts.append(clause)
    s1 = (f"At {noises[-1]} % noise, " + "; ".join(parts) + ".") if parts else "No runs to plot."
    cells = pd.concat([c.assign(metric=m) for m, c in cmps.items()], ignore_index=True) if cmps else pd.DataFrame()
    both = cells[cells["paper_mean"].notna() & cells["ours_mean"].notna()] if len(cells) else cells
    if len(both):
        k = int(both["within"].astype(bool).sum())
        worst = both.loc[both["diff"].abs().idxmax()]
        metric = "unlabelled" if worst.metric == "unlabeled" else "labelled"
        s2 = (f"{k} of the {len(both)} cells the paper also reports lie within max(1, paper sd) of its value; "
              f"the largest gap is {worst['diff']:+.2f} points ({short_name(worst.method)}, {int(worst.noise)} % "
              f"noise, {metric} examples).")
    else:
        s2 = "The paper reports no numbers for this noise model, so only our runs are drawn."
    return s1 + " " + s2


def seeds_sentences(seeds: pd.DataFrame, paper: pd.DataFrame) -> str:
    g = seeds.groupby(["metric", "method", "noise"])["value"]
    stats = pd.DataFrame({"lo": g.min(), "hi": g.max(), "sd": g.std(ddof=0), "n": g.size()}).reset_index()
    w = stats.loc[(stats["hi"] - stats["lo"]).idxmax()]
    n = sorted(set(stats["n"]))
    per = f"{n[0]}" if len(n) == 1 else f"{n[0]}-{n[-1]}"
    metric = "unlabelled" if w.metric == "unlabeled" else "labelled"
    s1 = (f"Each dot is one seed ({per} per cell); the widest spread is {short_name(w.method)} at {int(w.noise)} % "
          f"noise on {metric} examples, from {w.lo:.2f} to {w.hi:.2f} % (sd {w.sd:.2f}).")
    if len(paper):
        m = paper.merge(stats, on=["metric", "method", "noise"])
        inside = int(((m["mean"] >= m["lo"]) & (m["mean"] <= m["hi"])).sum())
        s2 = (f"{inside} of the paper's {len(m)} means for these cells fall inside the range of our seeds, "
              "so most of the paper's numbers are within our seed-to-seed variation." if inside > len(m) / 2 else
              f"Only {inside} of the paper's {len(m)} means for these cells fall inside the range of our seeds.")
    else:
        s2 = "The paper reports no numbers for this noise model."
    return s1 + " " + s2


def detection_sentences(table: pd.DataFrame) -> str:
    t = table.dropna(subset=["auc_mean"])
    if not len(t):
        return "No run had both flipped and clean labels, so no curve could be drawn."
    best = t.loc[t["auc_mean"].idxmax()]
    worst = t.loc[t["auc_mean"].idxmin()]
    s1 = (f"Ranking labels by 1 − label_quality, the best detector is {short_name(best.method)} at {int(best.noise)} % "
          f"noise (ROC AUC {best.auc_mean:.3f} ± {best.auc_sd:.3f} over {int(best.n_runs)} runs) and the weakest "
          f"{short_name(worst.method)} at {int(worst.noise)} % ({worst.auc_mean:.3f} ± {worst.auc_sd:.3f}).")
    bp = t.loc[t["ap_mean"].idxmax()]
    s2 = (f"In precision-recall terms the highest average precision is {bp.ap_mean:.3f} ({short_name(bp.method)}, "
          f"{int(bp.noise)} %); the dotted line is the share of flipped labels, what random ranking would reach.")
    return s1 + " " + s2


def figure2_sentences(f: dict[str, Any]) -> str:
    rd, nd = f["rd"], f["nd"]
    if "unl_max" not in f:
        return (f"With the diagonal removed the labelled leave-one-out accuracy peaks at x = {rd['x_select']:g} "
                f"(alpha = {rd['alpha_select']:.4f}); with it kept the losses are minimal at x = "
                f"{', '.join(f'{v:g}' for v in nd['loss_argmin'].values())} (MAE, MSE, cross-entropy).")
    s1 = (f"With the diagonal removed, the labelled leave-one-out accuracy peaks at x = {rd['x_select']:g} "
          f"(alpha = {rd['alpha_select']:.4f}), where the unlabelled accuracy is {100 * rd['unl_at_select']:.2f} % "
          f"(its maximum: {100 * f['unl_max']:.2f} % at x = {f['x_unl_max']:g}); the losses are minimal at "
          f"x = {rd['loss_argmin']['mae']:g}, {rd['loss_argmin']['mse']:g} and {rd['loss_argmin']['ce']:g} "
          "(MAE, MSE, cross-entropy).")
    lo = min(nd["unl_at_loss_min"].values())
    hi = max(nd["unl_at_loss_min"].values())
    rng = f"{100 * lo:.2f} %" if abs(hi - lo) < 5e-5 else f"{100 * lo:.2f}-{100 * hi:.2f} %"
    s2 = (f"With the diagonal kept, the losses reach their minima earlier, at x = {nd['loss_argmin']['mae']:g}, "
          f"{nd['loss_argmin']['mse']:g} and {nd['loss_argmin']['ce']:g}, where the unlabelled accuracy is only "
          f"{rng}, while the labelled accuracy, now measured in-sample, stays at or above "
          f"{100 * f['nd_loo_min']:.2f} % and says little about it.")
    return s1 + " " + s2


def write_report(runs: pd.DataFrame, reported: pd.DataFrame, out_dir: Path, provenance: str = "",
                 root: Path | None = None, render: bool = True) -> list[Path]:
    """The figures and ``REPORT.md`` in ``out_dir`` (the tables' folder); ``render=False`` writes only
    ``REPORT.md`` (the same text: every sentence comes from the numbers, not from the images). Returns the
    paths written."""
    from .tables import table_specs

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    agg = aggregate(runs) if len(runs) else pd.DataFrame(columns=["dataset", "noise", "method", "noise_model"])
    specs = table_specs(agg)
    colors = method_colors(_order(list(runs["method"]) if len(runs) else []))
    written: list[Path] = []
    lines = ["# Report: our runs beside the paper's numbers", "",
             provenance + (" " if provenance else "") + "Every table on one page: [README.md](README.md)"
             + ("." if "PROVENANCE.md" in provenance else "; how the runs were made: [PROVENANCE.md](PROVENANCE.md)."),
             "",
             "Every figure below is drawn from the same runs as the tables next to it (mean ± population sd over "
             "seeds, in percent). Each method has one colour in every figure (Okabe & Ito's colour-blind safe "
             "palette); the paper's own numbers are hollow diamonds in the method's colour with their sd as error "
             "bars, and the numbers the paper quotes from other papers are grey markers, one shape per method.", ""]
    notes: list[str] = []
    no_detection: list[str] = []
    unread: list[str] = []
    pairs = [(s["dataset"], s["noise_model"]) for s in specs]
    pairs = list(dict.fromkeys(pairs))
    for ds, model in pairs:
        suffix = "" if model == PAPER_NOISE else f"_{model}"
        stem = f"{ds.lower()}{suffix}"
        ours_methods = set(agg.loc[(agg["dataset"] == ds) & (agg["noise_model"] == model), "method"])
        if model == PAPER_NOISE:
            paper_methods = set(reported.loc[(reported["dataset"] == ds) & (reported["source"] == "paper"), "method"])
            for m in _order(paper_methods - ours_methods):
                notes.append(f"{ds}: the paper reports {m}, which is not in the runs; it is left out of the "
                             f"{ds} figures.")
        vals = accuracy_values(agg, reported, ds, model)
        cmps = {m: compare(agg, reported, ds, m, model) for m, _ in METRICS}
        label = f"{ds}" + ("" if model == PAPER_NOISE else f", {model} noise")
        noise_word = "uniform noise, the paper's" if model == PAPER_NOISE else f"{model} noise"
        n_seeds = sorted(set(vals.loc[vals["kind"] == "ours", "n_seeds"].dropna().astype(int)))
        seeds_txt = f"{n_seeds[0]}" if len(n_seeds) == 1 else f"{n_seeds[0]}-{n_seeds[-1]}"
        name = f"fig_accuracy_{stem}.png"
        if render:
            accuracy_figure(vals, f"{label} ({noise_word}): accuracy against the label noise rate, {seeds_txt} seeds "
                            "per cell", colors, out_dir / name)
            written.append(out_dir / name)
        lines += [f"## {label}: accuracy against the noise rate", "", f"![{label}: accuracy against noise]({name})", "",
                  f"Summarises {_table_links(ds, model, specs)}. " + accuracy_sentences(vals, cmps), ""]
        seeds = seed_values(runs, ds, model)
        paper = vals[vals["kind"] == "paper"][["metric", "method", "noise", "mean", "sd"]]
        name = f"fig_seeds_{stem}.png"
        if render:
            seeds_figure(seeds, paper, f"{label}: every seed's accuracy ({noise_word})", colors, out_dir / name)
            written.append(out_dir / name)
        lines += [f"## {label}: spread over seeds", "", f"![{label}: accuracy of every seed]({name})", "",
                  f"Summarises {_table_links(ds, model, specs)} (the spread behind their ± sd). "
                  + seeds_sentences(seeds, paper), ""]
        det = detection_data(runs, root, ds, model, unread)
        if det:
            name = f"fig_detection_{stem}.png"
            lines += [f"## {label}: finding the flipped labels", "", f"![{label}: detection curves]({name})", ""]
            if render:
                table = detection_figure(det, f"{label}: detecting flipped labels by label_quality "
                                              "(curves pooled over seeds; legend: mean ± sd per seed)",
                                         colors, out_dir / name)
                written.append(out_dir / name)
            else:
                table = detection_table(det)
            lines += [f"Summarises the runs' `{LABEL_ISSUES_FILE}` ({int(table['n_runs'].sum())} files). "
                      + detection_sentences(table), ""]
        else:
            no_detection.append(label)
    if no_detection:
        where = (f"under `{root}`" if root is not None else
                 "(the run directories are not at hand: the figures were built from a runs table)")
        notes.append(f"Detection curves (ROC and precision-recall per method and noise rate) are left out for "
                     f"{', '.join(no_detection)}: no run has a `{LABEL_ISSUES_FILE}` {where}.")
    if unread:
        shown = "; ".join(unread[:3]) + (f"; and {len(unread) - 3} more" if len(unread) > 3 else "")
        notes.append(f"{len(unread)} `{LABEL_ISSUES_FILE}` file(s) could not be used and are left out of the "
                     f"detection curves: {shown}.")
    curves_csv = out_dir / FIGURE2_CSV
    if curves_csv.is_file():
        curves = figure2_values(curves_csv)
        name = "fig_figure2.png"
        if render:
            facts = figure2(curves, out_dir / name)
            written.append(out_dir / name)
        else:
            facts = figure2_facts(curves)
        facts["nd_loo_min"] = float(curves["loo_acc_nd"].min())
        lines += ["## Figure 2: AutoD's leave-one-out losses against the diffusion rate", "",
                  f"![Figure 2]({name})", "",
                  f"Summarises [`{FIGURE2_CSV}`]({FIGURE2_CSV}) (the run's own drawing: [figure2.png](figure2.png)). "
                  + figure2_sentences(facts), ""]
    else:
        notes.append(f"Figure 2: no `{FIGURE2_CSV}` in this folder, so its curves are left out "
                     "(`lgcexp experiment=figure2` writes it; `make reproduce-tables` copies it here).")
    if notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    atomic_write_text(out_dir / REPORT_FILE, "\n".join(lines))
    written.append(out_dir / REPORT_FILE)
    return written


def detection_table(det: dict[tuple[str, int], dict]) -> pd.DataFrame:
    """The numbers of the detection legend without drawing (what :func:`detection_figure` returns)."""
    rows = []
    for (m, noise), d in sorted(det.items(), key=lambda kv: (_order([k for k, _ in det]).index(kv[0][0]), kv[0][1])):
        c = roc_pr(np.concatenate(d["suspicion"]), np.concatenate(d["flipped"]))
        aucs = [a for a, _ in d["per_seed"] if a is not None]
        aps = [p for _, p in d["per_seed"] if p is not None]
        rows.append({"method": m, "noise": noise, "n_runs": d["files"], "auc_pooled": c["auc"], "ap_pooled": c["ap"],
                     "auc_mean": float(np.mean(aucs)) if aucs else None,
                     "auc_sd": float(np.std(aucs)) if aucs else None,
                     "ap_mean": float(np.mean(aps)) if aps else None, "ap_sd": float(np.std(aps)) if aps else None})
    return pd.DataFrame(rows)
