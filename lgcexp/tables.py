"""Collect run records and render the paper's tables (Tables 1-2: ISOLET and MNIST, unlabelled and
labelled accuracy) with the paper's reported numbers beside ours.

``lgcexp-tables --root results/runs`` reads every ``result.json`` (and ``error.json``) below the root,
writes ``results/tables/`` (Markdown, CSV, LaTeX per table) and ``runs.csv`` (one row per run) beside it.
``lgcexp-tables --from-csv results/runs.csv`` rebuilds the tables from that one-row-per-run table instead
(a clone has the committed ``runs.csv`` but not the run directories).
Means and standard deviations are over seeds, population sd (ddof=0) as the paper's authors computed them,
in percent with two decimals. The paper's reported numbers ship inside the package
(``lgcexp/resources/paper_reported.csv``, read by :func:`load_reported`).

Runs are grouped by noise model (the runs table's ``noise`` column; ``uniform`` where a record or an older
runs table lacks it) as well as by noise rate: the paper's tables hold uniform-noise runs only, and each
other model, and each other data set, gets its own table pair with no paper column (:func:`table_specs`).
A table column is a method plus, in brackets, whatever its runs' recorded configs differ in besides seed and
noise rate (``LGC [alpha=0.5]``, ``LGC [graph=knn_approx]``; :func:`label_methods`), so a cell never averages
two settings. After the tables,
:func:`main` writes the figures and ``REPORT.md`` (:mod:`lgcexp.report`) unless ``--no-report``.
"""
from __future__ import annotations

import argparse
import json
import platform
import re
import sys
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .cache import _canonical, atomic_write_text, stable_hash
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
    ("auto", None): "LGC_LVO_Auto",
    # the methods the paper quotes from Gong et al. (2017) and Lu et al. (2015), rerun by lgcexp under the
    # paper's protocol: named as the paper's columns, so each rerun lands beside the quoted value
    ("eigenfunction", None): "Eigenfunction*",
    ("gtf", None): "GTF",
    ("lssc", None): "LSSC",
}

#: (algo, graph builder) -> the column name, for methods whose paper column is named by its graph
GRAPH_METHOD_NAMES = {("lgc", "anchor"): "LGC* (anchor graph)"}

#: (algo, parameter, value) -> the column name of a variant run with that parameter
VARIANT_METHOD_NAMES = {("gfhf", "cmn", True): "GFHF + CMN"}

#: (dataset, our column) -> the name under which the quoted value is listed in paper_reported.csv, where it
#: differs (Lu et al.'s MNIST LSSC carries the paper's star)
REPORTED_ALIASES = {("MNIST", "LSSC"): "LSSC*"}

#: the paper's tables: (file stem, dataset, metric, caption)
PAPER_TABLES = [
    ("table1a_isolet_unlabeled", "ISOLET", "unlabeled", "ISOLET (1040/7797 labels): accuracy on unlabelled examples"),
    ("table1b_isolet_labeled", "ISOLET", "labeled",
     "ISOLET (1040/7797 labels): accuracy on labelled examples after label correction"),
    ("table2a_mnist_unlabeled", "MNIST", "unlabeled", "MNIST (100/70000 labels): accuracy on unlabelled examples"),
    ("table2b_mnist_labeled", "MNIST", "labeled",
     "MNIST (100/70000 labels): accuracy on labelled examples after label correction"),
]

#: the data sets of the paper's tables (every other data set gets tables of ours only)
PAPER_DATASETS = tuple(dict.fromkeys(d for _, d, _, _ in PAPER_TABLES))

#: the paper's reported numbers, inside the package (``lgcexp/resources/paper_reported.csv``)
REPORTED_RESOURCE = ("resources", "paper_reported.csv")

#: ``source`` values of the reported numbers -> who published them (the paper quotes them)
SOURCES = {"paper": "the paper", "gong2017": "Gong et al. (2017)", "lu2015": "Lu et al. (2015)"}

#: what the paper's ``*`` stands for, per source: the paper (Table 2) puts it, without defining it, on exactly
#: the methods whose numbers it quotes from that source
STAR_NOTES = {
    "lu2015": "Lu et al. (2015); those were computed on an anchor graph with graph parameters tuned by "
              "cross-validation (paper, Experiment 2), not on the kNN graph used here. A starred column with "
              "cells of ours is lgcexp's rerun of that method on the graph it names (anchor graph, numerical "
              "eigenfunctions), seeds 0-19, one setting chosen on held-out seeds 100-104 (docs/fidelity.md#rerun)",
}

#: the noise model of the paper's tables; runs recorded before ``noise`` was written used it
PAPER_NOISE = "uniform"

RUN_COLUMNS = ["dataset", "algo", "loss", "method", "noise", "noise_rate", "seed", "n", "n_labeled", "n_flipped",
               "acc_unlabeled", "acc_labeled", "acc_labeled_lgc", "n_dropped", "detect_precision", "detect_recall",
               "detect_f1", "detect_auc", "detect_ap", "detect_precision_at_k", "n_label_issues", "detect_false_alarms",
               "detect_suggest_acc", "seconds_total", "config_hash", "run_dir", "setting"]

#: config keys that a table cell averages over (a cell = one setting, its seeds, at one noise rate)
CELL_KEYS = ("seed", "noise.rate")
#: the order of config sections in a column's bracket (``LGC [graph=knn_approx, graph.k=15, alpha=0.5]``)
SECTION_ORDER = ("graph", "algo", "eig", "detect", "labels", "noise", "dataset")
#: a column name's bracket: the settings that tell it apart from the other runs of its method
_BRACKET = re.compile(r" \[.*\]$")
#: a key missing from a run's config (another graph builder's parameter)
_ABSENT = "<absent>"


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


def run_method_name(r: dict[str, Any]) -> str:
    """The table column of one result record: by (algo, loss), then by graph builder, then by variant."""
    algo = r["algo"]
    builder = (r.get("graph") or {}).get("builder")
    if (algo, builder) in GRAPH_METHOD_NAMES:
        return GRAPH_METHOD_NAMES[(algo, builder)]
    params = ((r.get("config") or {}).get("algo") or {}).get("params") or {}
    for (a, key, value), name in VARIANT_METHOD_NAMES.items():
        if a == algo and params.get(key) == value:
            return name
    return method_name(algo, r.get("loss"))


def flat_config(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested config as ``{"graph.k": 10, "algo.params.alpha": 0.99, ...}`` (lists kept as JSON text)."""
    out: dict[str, Any] = {}
    for k, v in config.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flat_config(v, key + "."))
        else:
            out[key] = json.dumps(v) if isinstance(v, (list, tuple)) else v
    return out


def run_setting(r: dict[str, Any]) -> str | None:
    """A run's setting: its recorded effective config (the one its ``config_hash`` hashes) without the keys a
    table cell averages over (:data:`CELL_KEYS`), as compact JSON; None for a record without ``config``."""
    config = r.get("config")
    if not isinstance(config, dict):
        return None
    flat = flat_config(_canonical(config))
    scheduled = _set_by_noise_table(flat)
    flat = {k: (BY_NOISE if k in scheduled else v) for k, v in flat.items() if k not in CELL_KEYS}
    return json.dumps(flat, sort_keys=True, separators=(",", ":"), default=str)


#: a setting's value for a parameter read from the config's per-noise table (a column ``SIIS [lambda1=by_noise]``
#: beside ``SIIS [lambda1=300]``, where both are in one table)
BY_NOISE = "by_noise"


def _set_by_noise_table(flat: dict[str, Any]) -> set[str]:
    """The keys ``algo.params.X`` whose value is the run's entry of the config's own per-noise-rate table
    ``algo.X_by_noise`` (SIIS's lambda1 of Gong et al., conf/algo/siis.yaml): a protocol that varies with the
    cell's noise rate; the setting records it as :data:`BY_NOISE` (the table itself stays in the setting), not
    as its value at each rate. A value set otherwise (``algo.params.lambda1=300``) stays as it is.
    Limits: the recorded config cannot tell a hand-set value equal to the table's entry at that rate from
    the table's (the effective configs are the same), and a rate missing from the table takes the yaml's
    fallback (100), which the recorded config does not name: such runs keep their value."""
    rate = flat.get("noise.rate")
    if rate is None:
        return set()
    out = set()
    for key, value in flat.items():
        if not key.startswith("algo.params."):
            continue
        prefix = f"algo.{key[len('algo.params.'):]}_by_noise."
        for entry, scheduled in flat.items():
            if not entry.startswith(prefix) or scheduled != value:
                continue
            try:
                if float(entry[len(prefix):]) == float(rate):
                    out.add(key)
            except ValueError:
                pass
    return out


def _short_key(key: str) -> str:
    """``algo.params.alpha`` -> ``alpha``, ``graph.name`` -> ``graph``; other keys as typed on the command line."""
    if key.startswith("algo.params."):
        return key[len("algo.params."):]
    return key[:-len(".name")] if key.endswith(".name") else key


def _key_order(key: str) -> tuple[int, bool, str]:
    section = key.split(".", 1)[0]
    rank = SECTION_ORDER.index(section) if section in SECTION_ORDER else len(SECTION_ORDER)
    return rank, not key.endswith(".name"), key


def _fmt(v: Any) -> str:
    """A value as typed on the command line (``0.5``, ``true``, ``null``); distinct floats stay distinct."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    return repr(v) if isinstance(v, float) else str(v)


def _is_selector(key: str) -> bool:
    """``graph.name``, ``algo.name``, ...: a key that decides which other keys of its section exist."""
    return key.count(".") == 1 and key.endswith(".name")


def setting_labels(settings: list[dict[str, Any]]) -> list[str]:
    """The bracket of each run of one method in one table: every config key whose value differs between
    those runs (seed and noise rate aside), so two runs share a bracket only when their settings are equal.

    A graph builder's (or other section's) own parameters are named only where they differ between runs
    of the same builder: ``graph=knn_approx`` rather than every parameter the two builders do not share.
    Two different settings differ at a key; if they agree on every ``<section>.name`` the key differs within
    their group and is shown in both, otherwise the differing ``<section>.name`` is shown: the brackets differ."""
    keys = sorted({k for s in settings for k in s}, key=_key_order)
    value = lambda s, k: _fmt(s.get(k, _ABSENT))  # noqa: E731
    varying = [k for k in keys if len({value(s, k) for s in settings}) > 1]
    selectors = [k for k in varying if _is_selector(k)]
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for s in settings:
        groups.setdefault(tuple(value(s, k) for k in selectors), []).append(s)
    labels = []
    for s in settings:
        group = groups[tuple(value(s, k) for k in selectors)]
        shown = [k for k in varying if k in selectors or len({value(g, k) for g in group}) > 1]
        labels.append(", ".join(f"{_short_key(k)}={value(s, k)}" for k in shown))
    return labels


def base_method(names: pd.Series) -> pd.Series:
    """The method of a column name, without its bracket (``LGC [alpha=0.5]`` -> ``LGC``)."""
    return names.astype(str).str.replace(_BRACKET, "", regex=True)


def label_methods(runs: pd.DataFrame) -> pd.DataFrame:
    """``runs`` with ``method`` set to the table column of each run: the method (:func:`run_method_name`)
    plus, in brackets, everything in which its recorded setting (the ``setting`` column, :func:`run_setting`)
    differs from the other runs of the same method in the same table (dataset, noise model), e.g.
    ``LGC [alpha=0.5]`` beside ``LGC [alpha=0.99]``. Runs with equal settings keep the bare name, so the
    paper's tables keep theirs. A runs table without ``setting`` (written before it was recorded) keeps its
    names; rows without one beside rows with one are marked ``[setting=unrecorded]``. Idempotent."""
    if not len(runs) or "setting" not in runs or "method" not in runs:
        return runs
    runs = runs.copy()
    runs["method"] = base_method(runs["method"])
    raw = runs["setting"]
    known = raw.notna() & (raw.astype(str) != "")
    keys = pd.DataFrame({"ds": runs["dataset"].astype(str).str.upper(), "model": noise_models(runs),
                         "method": runs["method"]}, index=runs.index)
    for _, idx in keys.groupby(["ds", "model", "method"], sort=False).groups.items():
        k = idx[known[idx].to_numpy()]
        texts = list(dict.fromkeys(raw[k].astype(str)))
        if len(texts) + (len(k) < len(idx)) <= 1:
            continue  # one setting (or none recorded): the bare name
        labels = dict(zip(texts, setting_labels([json.loads(t) for t in texts])))
        # one recorded setting beside unrecorded rows: nothing to list, so its hash tells it apart
        labels = {t: label or f"setting={stable_hash(t, 8)}" for t, label in labels.items()}
        if len(set(labels.values())) < len(labels):  # cannot happen (see setting_labels); never average anyway
            labels = {t: f"setting={stable_hash(t, 8)}" for t in texts}
        for i in idx:
            label = labels.get(str(raw[i])) if known[i] else "setting=unrecorded"
            runs.at[i, "method"] = f"{runs.at[i, 'method']} [{label}]"
    return runs


def collect(root: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(runs, failures) under ``root``; a run directory with both files counts as done."""
    rows, fails = [], []
    for path in sorted(Path(root).rglob(RESULT_FILE)):
        r = json.loads(path.read_text())
        row: dict[str, Any] = {k: r.get(k) for k in RUN_COLUMNS if k in r}
        row["method"] = run_method_name(r)
        row["setting"] = run_setting(r)
        row["noise"] = r.get("noise") or PAPER_NOISE  # records written before the noise model was recorded
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
        runs = label_methods(runs.drop_duplicates("config_hash"))
        runs = runs.sort_values(["dataset", "method", "noise_rate", "seed"])
    return runs.reset_index(drop=True), pd.DataFrame(fails, columns=["run_dir", "error", "type"])


def noise_models(runs: pd.DataFrame) -> pd.Series:
    """The noise model of each run: the ``noise`` column, ``uniform`` where missing (older records and
    runs tables written before the column existed)."""
    if "noise" not in runs:
        return pd.Series(PAPER_NOISE, index=runs.index, dtype=object)
    return runs["noise"].where(runs["noise"].notna() & (runs["noise"].astype(str) != ""), PAPER_NOISE).astype(str)


def aggregate(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean and population sd over seeds, in percent, per dataset, noise model, noise level and method.

    ``noise`` is the noise level in percent (as in the tables), ``noise_model`` the noise model's name. The
    methods are the table columns of :func:`label_methods`: a cell never averages two settings."""
    df = label_methods(runs).copy()
    df["noise_model"] = noise_models(runs)
    df["noise"] = (100 * df["noise_rate"].astype(float)).round().astype(int)
    df["DATASET"] = df["dataset"].str.upper()
    out = []
    for (ds, model, noise, method), g in df.groupby(["DATASET", "noise_model", "noise", "method"], sort=True):
        row = {"dataset": ds, "noise": noise, "method": method, "n_seeds": len(g)}
        for metric in ("unlabeled", "labeled"):
            v = 100 * g[f"acc_{metric}"].astype(float).to_numpy()
            row[f"{metric}_mean"] = float(np.mean(v))
            row[f"{metric}_sd"] = float(np.std(v, ddof=0))
        row["noise_model"] = model
        out.append(row)
    return pd.DataFrame(out, columns=None if out else ["dataset", "noise", "method", "n_seeds", "noise_model"])


def compare(agg: pd.DataFrame, reported: pd.DataFrame, dataset: str, metric: str,
            noise_model: str = PAPER_NOISE) -> pd.DataFrame:
    """Tidy comparison for one table: our cells of ``noise_model`` beside the reported numbers.

    A column of ours is compared with the paper's own number, or, for the methods the paper quotes from
    others (Gong et al., Lu et al.) and lgcexp reruns, with the quoted one (``source`` says whose). The paper
    used uniform noise only: for another model the reported columns stay empty."""
    ours = agg[agg["dataset"] == dataset]
    if "noise_model" in ours:
        ours = ours[ours["noise_model"] == noise_model]
    rep = reported[reported["dataset"] == dataset]
    if noise_model != PAPER_NOISE:
        rep = rep.iloc[0:0]
    paper = rep[rep["source"] == "paper"]
    rows = []
    keys = sorted(set(zip(ours["noise"], ours["method"])) | set(zip(paper["noise"], paper["method"])))
    for noise, method in keys:
        o = ours[(ours["noise"] == noise) & (ours["method"] == method)]
        name = REPORTED_ALIASES.get((dataset, method), method)
        p = rep[(rep["noise"] == noise) & (rep["method"] == name)]
        p = p.sort_values("source", key=lambda s: s != "paper")  # the paper's own number first
        om = float(o[f"{metric}_mean"].iloc[0]) if len(o) else np.nan
        osd = float(o[f"{metric}_sd"].iloc[0]) if len(o) else np.nan
        pm = float(p[f"{metric}_mean"].iloc[0]) if len(p) else np.nan
        psd = float(p[f"{metric}_sd"].iloc[0]) if len(p) else np.nan
        diff = om - pm
        tol = max(1.0, psd) if np.isfinite(psd) else 1.0  # no sd quoted: one point
        rows.append({"noise": noise, "method": method, "n_seeds": int(o["n_seeds"].iloc[0]) if len(o) else 0,
                     "ours_mean": om, "ours_sd": osd, "paper_mean": pm, "paper_sd": psd, "diff": diff,
                     "tolerance": tol, "within": bool(abs(diff) <= tol) if np.isfinite(diff) else None,
                     "source": str(p["source"].iloc[0]) if len(p) and np.isfinite(pm) else ""})
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
    """The paper's order of methods; a method's settings (``LGC [alpha=0.5]``) beside it."""
    order = list(METHOD_NAMES.values())
    base = lambda m: _BRACKET.sub("", m)  # noqa: E731
    return sorted(methods, key=lambda m: (order.index(base(m)) if base(m) in order else len(order), base(m), m))


def render_markdown(cmp: pd.DataFrame, others: pd.DataFrame, caption: str, metric: str) -> str:
    """Rows = noise levels, columns = methods; each cell: ours, the paper's value, the difference."""
    methods = _method_order(list(cmp["method"].unique()))
    if cmp["paper_mean"].notna().any() or not len(cmp):
        legend = ("Ours: mean ± sd over seeds (population sd). Paper: its reported value; "
                  "quoted: the value the paper quotes from Gong et al. (2017) or Lu et al. (2015) for a method lgcexp "
                  "reruns under the paper's protocol (same graph, seeds, labelled sets and flips). "
                  "Δ = ours − reported; ✓ when |Δ| ≤ max(1, reported sd).")
    else:  # another noise model or data set than the paper's: nothing to compare with
        what = "noise model" if cmp.attrs.get("dataset", PAPER_DATASETS[0]) in PAPER_DATASETS else "data set"
        legend = f"Ours: mean ± sd over seeds (population sd). The paper reports no numbers for this {what}."
    lines = [f"### {caption}", "", legend, ""]
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
                who = "paper" if r.source == "paper" else f"quoted ({SOURCES.get(r.source, r.source)})"
                cell += f"<br>{who} {_pm(r.paper_mean, r.paper_sd)}"
                if np.isfinite(r["diff"]):
                    cell += f"<br>Δ {r['diff']:+.2f}{mark}"
            cells.append(cell)
        lines.append(f"| {noise}% | " + " | ".join(cells) + " |")
    all_others = others
    # others' values for this metric only: a source that reports none (Lu et al.: no labelled accuracy) is left out
    others = others[np.isfinite(others[f"{metric}_mean"].astype(float))] if len(others) else others
    rerun = {REPORTED_ALIASES.get((d, m), m) for d in others["dataset"].unique() for m in cmp["method"]
             if np.isfinite(cmp.loc[cmp["method"] == m, "ours_mean"]).any()} if len(others) else set()
    others = others[~others["method"].isin(rerun)] if len(others) else others
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
    else:
        om = []
    # the star's meaning, for the starred columns of the table and of the block below it
    legend = star_legend(list(dict.fromkeys(list(methods) + om)), all_others) if len(all_others) else ""
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
                who = "paper" if r.source == "paper" else "quoted"
                c = rf"\makecell{{{c} \\ \tiny {who} {_pm_tex(r.paper_mean, r.paper_sd)}}}"
            cells.append(c)
        out.append(rf"{noise}\% & " + " & ".join(cells) + r" \\")
    out += [r"\hline", r"\end{tabular}", r"\end{table}"]
    return "\n".join(out) + "\n"


#: the columns of an extra table's CSV (another noise model: no paper to compare with)
OURS_COLUMNS = ["noise", "method", "n_seeds", "ours_mean", "ours_sd"]


def table_specs(agg: pd.DataFrame) -> list[dict[str, Any]]:
    """The tables to render from ``agg``: the paper's tables (uniform noise) of each dataset present, then,
    per dataset, one pair (unlabelled, labelled) per other noise model, lettered on after the paper's
    (``table1c_isolet_pairwise_unlabeled``, ``table1d_isolet_pairwise_labeled``, ...).

    Each spec: ``stem``, ``dataset``, ``metric``, ``caption``, ``noise_model``, ``paper`` (whether the paper
    reports numbers for it)."""
    specs: list[dict[str, Any]] = []
    models = agg["noise_model"] if "noise_model" in agg else pd.Series(PAPER_NOISE, index=agg.index, dtype=object)
    for stem, ds, metric, caption in PAPER_TABLES:
        if ((agg["dataset"] == ds) & (models == PAPER_NOISE)).any():
            specs.append({"stem": stem, "dataset": ds, "metric": metric, "caption": caption,
                          "noise_model": PAPER_NOISE, "paper": True})
    for ds in PAPER_DATASETS:
        own = [t for t in PAPER_TABLES if t[1] == ds]
        number = re.match(r"table(\d+)", own[0][0]).group(1)
        letter = ord("a") + len(own)
        for model in sorted(set(models[(agg["dataset"] == ds) & (models != PAPER_NOISE)])):
            for stem, _, metric, caption in own:
                head, _, what = caption.partition(": ")
                specs.append({"stem": f"table{number}{chr(letter)}_{ds.lower()}_{model}_{metric}", "dataset": ds,
                              "metric": metric, "caption": f"{head}, {model} noise: {what}", "noise_model": model,
                              "paper": False})
                letter += 1
    # any other data set: a pair (unlabelled, labelled) per noise model, ours only
    for ds in sorted(set(agg["dataset"]) - set(PAPER_DATASETS)) if len(agg) else []:
        for model in sorted(set(models[agg["dataset"] == ds]), key=lambda m: (m != PAPER_NOISE, m)):
            tag = ds.lower() if model == PAPER_NOISE else f"{ds.lower()}_{model}"
            for metric, what in (("unlabeled", "accuracy on unlabelled examples"),
                                 ("labeled", "accuracy on labelled examples after label correction")):
                specs.append({"stem": f"table_{tag}_{metric}", "dataset": ds, "metric": metric,
                              "caption": f"{ds}, {model} noise: {what}", "noise_model": model, "paper": False})
    return specs


def write_tables(runs: pd.DataFrame, reported: pd.DataFrame, out_dir: Path, provenance: str = "") -> list[Path]:
    """The paper's tables (uniform noise) with the paper's numbers beside ours, one extra table pair per other
    noise model (ours only), ``summary.csv`` (every aggregated cell of uniform noise; another model's cells go
    to ``summary_<model>.csv``) and ``README.md`` (every table)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    agg = aggregate(runs) if len(runs) else pd.DataFrame(columns=["dataset", "noise", "method", "noise_model"])
    written = []
    index = ["# Reproduced tables", "", provenance, ""]
    for spec in table_specs(agg):
        ds, metric, caption, model = spec["dataset"], spec["metric"], spec["caption"], spec["noise_model"]
        cmp = compare(agg, reported, ds, metric, model)
        cmp.attrs["dataset"] = ds
        if spec["paper"]:
            others = reported[(reported["dataset"] == ds) & (reported["source"] != "paper")]
            csv = cmp
        else:  # the numbers others quote are for uniform noise too
            others = reported.iloc[0:0]
            csv = cmp[OURS_COLUMNS]
        md = render_markdown(cmp, others, caption, metric)
        for suffix, text in ((".md", md), (".csv", csv.round(4).to_csv(index=False)),
                             (".tex", render_latex(cmp, caption))):
            path = out_dir / f"{spec['stem']}{suffix}"
            atomic_write_text(path, text)
            written.append(path)
        index += [md, ""]
    if len(agg):
        models = agg["noise_model"]
        for model in sorted(set(models), key=lambda m: (m != PAPER_NOISE, m)):
            name = "summary.csv" if model == PAPER_NOISE else f"summary_{model}.csv"
            part = agg[models == model].drop(columns="noise_model")
            atomic_write_text(out_dir / name, part.round(4).to_csv(index=False))
            written.append(out_dir / name)
        atomic_write_text(out_dir / "README.md", "\n".join(index))
        written.append(out_dir / "README.md")
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


def _report(a: argparse.Namespace, runs: pd.DataFrame, reported: pd.DataFrame, provenance: str,
            root: Path | None) -> list[Path]:
    """The figures and REPORT.md beside the tables (``a.report_writer``: lgcexp.report.write_report, given by
    the ``lgcexp-tables`` entry point, :mod:`lgcexp.tables_cli`; report.py builds on this module), unless
    --no-report."""
    writer = getattr(a, "report_writer", None)
    if a.no_report or not len(runs) or writer is None:
        return []
    return writer(runs, reported, Path(a.out), provenance, root=root)


def _unrecorded(runs: pd.DataFrame) -> pd.Series:
    """Rows written before the ``setting`` column was recorded."""
    if "setting" not in runs:
        return pd.Series(True, index=runs.index)
    return runs["setting"].isna() | (runs["setting"].astype(str) == "")


def _run_identity(runs: pd.DataFrame) -> pd.Series:
    """(data set, noise model, method without its bracket, noise rate, seed) as one string per row; None where a row
    lacks one of them (such a row is never matched)."""
    if any(c not in runs for c in ("dataset", "method", "noise_rate", "seed")):
        return pd.Series(None, index=runs.index, dtype=object)
    noise = runs["noise"].fillna(PAPER_NOISE) if "noise" in runs else pd.Series(PAPER_NOISE, index=runs.index)
    rate = pd.to_numeric(runs["noise_rate"], errors="coerce").round(6)
    seed = pd.to_numeric(runs["seed"], errors="coerce")
    ident = (runs["dataset"].astype(str) + "|" + noise.astype(str) + "|" + base_method(runs["method"]) + "|"
             + rate.astype(str) + "|" + seed.astype("Int64").astype(str))
    complete = runs["dataset"].notna() & runs["method"].notna() & rate.notna() & seed.notna()
    return ident.where(complete, None)


def merge_runs(old: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """One row per run from two runs tables; ``new`` wins. A new run replaces the old row of its config hash,
    and also an old row of the same method, data set, noise and seed that recorded no setting (written before
    settings were recorded, its config hash computed by an older config: the same run by an older code), where
    the new runs hold one setting for that run (several would be variants: none of them replaces it). Old rows
    without a noise model were uniform noise. The number of rows replaced that way is logged."""
    if "noise" not in old:
        old = old.assign(noise="uniform")
    old = old[~old["config_hash"].isin(set(new["config_hash"]))]
    if len(old) and len(new) and "setting" in new:
        recorded = new[~_unrecorded(new)]
        ident = _run_identity(recorded)
        settings = recorded.assign(_id=ident).dropna(subset=["_id"]).groupby("_id")["setting"].nunique()
        superseded = _unrecorded(old) & _run_identity(old).isin(set(settings.index[settings == 1]))
        if superseded.any():
            import logging

            logging.getLogger("lgcexp").info("lgcexp-tables --merge: %d rows without a recorded setting replaced by "
                                             "their reruns", int(superseded.sum()))
        old = old[~superseded]
    both = pd.concat([old, new], ignore_index=True)
    cols = [c for c in RUN_COLUMNS if c in both] + [c for c in both if c not in RUN_COLUMNS]
    keys = [k for k in ("dataset", "noise", "method", "noise_rate", "seed") if k in both]
    return both[cols].sort_values(keys).reset_index(drop=True)


def main(argv: list[str] | None = None, *, report_writer: Any = None) -> int:
    """The ``lgcexp-tables`` command (entry point :func:`lgcexp.tables_cli.main`, which passes
    ``report_writer``; without it the figures and REPORT.md are left out)."""
    ap = argparse.ArgumentParser(prog="lgcexp-tables", description=__doc__.splitlines()[0])
    ap.add_argument("--root", default="results/runs", help="directory holding run directories (result.json)")
    ap.add_argument("--out", default="results/tables", help="where to write the tables")
    ap.add_argument("--runs-csv", default=None,
                    help="the tidy one-row-per-run table (written); default: runs.csv beside --out "
                         "(results/runs.csv for the default --out)")
    ap.add_argument("--from-csv", default=None, metavar="RUNS_CSV",
                    help="build the tables from this one-row-per-run table (e.g. results/runs.csv) instead of --root")
    ap.add_argument("--reported", default=None,
                    help="the paper's reported numbers (CSV); default: the copy shipped in the package")
    ap.add_argument("--command", default=None, help="the command to quote as provenance")
    ap.add_argument("--merge", action="store_true",
                    help="add the runs under --root to the existing --runs-csv (a run already there, by config hash, "
                         "is replaced) instead of overwriting it; for sweeps run in several places")
    ap.add_argument("--no-report", action="store_true",
                    help="tables only: skip the figures and REPORT.md (lgcexp/report.py)")
    ap.add_argument("--lowlabel", action="store_true",
                    help="the low-label experiments' tables instead (lgcexp/lowlabel.py): --root, --out and --runs-csv "
                         "default to results/lowlabel/runs, results/lowlabel/tables and results/lowlabel/runs.csv")
    ap.add_argument("--docs", nargs="*", default=[], metavar="FILE",
                    help="--lowlabel: also copy each table into FILE's <!-- lowlabel-table: NAME.md --> blocks")
    a = ap.parse_args(argv)
    if a.lowlabel:
        return lowlabel_main(a)
    if a.runs_csv is None:
        a.runs_csv = str(Path(a.out).parent / "runs.csv")
    a.report_writer = report_writer
    reported = load_reported(a.reported)
    if a.from_csv is not None:
        src = Path(a.from_csv)
        if not src.is_file():
            print(f"lgcexp-tables: error: --from-csv {src} is not a file", file=sys.stderr)
            return 2
        runs = label_methods(pd.read_csv(src))
        missing = [c for c in ("dataset", "method", "noise_rate", "acc_unlabeled", "acc_labeled") if c not in runs]
        if missing:
            print(f"lgcexp-tables: error: --from-csv {src} lacks the column(s) {', '.join(missing)}", file=sys.stderr)
            return 2
        command = a.command or f"lgcexp-tables --from-csv {src}"
        provenance = provenance_line(command, str(src))
        written = write_tables(runs, reported, Path(a.out), provenance)
        # the runs' own files (label_issues.csv), where the run directories are at hand
        root = Path(a.root) if Path(a.root).is_dir() else None
        written += _report(a, runs, reported, provenance, root)
        print(f"lgcexp-tables: {len(runs)} runs read from {src}; wrote {len(written)} files in {a.out}")
        return 0
    root = Path(a.root)
    if not root.is_dir():
        print(f"lgcexp-tables: error: --root {root} is not a directory (run a sweep first, or use --from-csv)",
              file=sys.stderr)
        return 2
    runs, fails = collect(root)
    if a.merge and Path(a.runs_csv).is_file():
        runs = label_methods(merge_runs(pd.read_csv(a.runs_csv), runs))  # brackets over old and new runs alike
    atomic_write_text(Path(a.runs_csv), runs.to_csv(index=False))
    provenance = provenance_line(a.command)
    written = write_tables(runs, reported, Path(a.out), provenance)
    written += _report(a, runs, reported, provenance, root)
    print(f"lgcexp-tables: {len(runs)} runs, {len(fails)} failed; "
          f"wrote {a.runs_csv} and {len(written)} files in {a.out}")
    for _, f in fails.iterrows():
        print(f"  FAILED {f.run_dir}: {f.error}")
    return 0



def lowlabel_main(a: argparse.Namespace) -> int:
    """``lgcexp-tables --lowlabel``: the runs under --root (merged into --runs-csv: a run already there, by
    experiment and config hash, is replaced; other runs are kept) or, with --from-csv, that file's rows alone,
    rendered by :func:`lgcexp.lowlabel.write_lowlabel_tables`."""
    from . import lowlabel

    out = Path("results/lowlabel/tables" if a.out == "results/tables" else a.out)
    runs_csv = Path(a.runs_csv or "results/lowlabel/runs.csv")
    if a.from_csv is not None:
        src = Path(a.from_csv)
        if not src.is_file():
            print(f"lgcexp-tables: error: --from-csv {src} is not a file", file=sys.stderr)
            return 2
        runs = lowlabel.tidy(pd.read_csv(src))
        what = f"{len(runs)} runs read from {src}"
    else:
        root = Path("results/lowlabel/runs" if a.root == "results/runs" else a.root)
        if not root.is_dir():
            print(f"lgcexp-tables: error: --root {root} is not a directory (run an experiment first, or use "
                  f"--from-csv)", file=sys.stderr)
            return 2
        new = lowlabel.collect(root)
        try:  # before anything is written
            lowlabel.check_unique_places(new, f"--root {root}")
        except ValueError as exc:
            print(f"lgcexp-tables: error: {exc}", file=sys.stderr)
            return 2
        old = pd.read_csv(runs_csv) if runs_csv.is_file() else new.iloc[0:0]
        runs = lowlabel.merge(old, new)
        runs_csv.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(runs_csv, runs.to_csv(index=False))
        what = f"{len(new)} runs under {root}, {len(runs)} in {runs_csv}"
    tables = lowlabel.write_lowlabel_tables(runs, out, figures=not a.no_report)
    for doc in a.docs:
        missing = lowlabel.sync_docs(Path(doc), tables)
        if missing:
            print(f"lgcexp-tables: {doc}: no table for the block(s) {', '.join(missing)}", file=sys.stderr)
    print(f"lgcexp-tables: {what}; wrote {len(tables)} tables in {out}")
    return 0
