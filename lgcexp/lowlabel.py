"""The low-label experiments' runs table, tables and figure (``lgcexp-tables --lowlabel``; docs/poisson.md).

The experiments are ordinary sweeps (``conf/experiment/lowlabel_*.yaml``) whose runs land under
``results/lowlabel/runs/<experiment>/``. :func:`collect` turns their ``result.json`` files into one compact row
per run (:data:`LOWLABEL_COLUMNS`: ``results/lowlabel/runs.csv``, committed), and :func:`write_lowlabel_tables`
renders the tables from those rows alone, so a committed table is rebuilt and checked without rerunning:

- an experiment without noise (every rate 0): one table ``<experiment>.md`` / ``.csv``, a row per labels-per-class
  and method: trials, mean ± population sd of the unlabelled accuracy, its standard error, GraphLearning's published
  figure where one exists (:data:`PUBLISHED`) and the mixing-rule step count of Poisson learning (mean, min-max);
- an experiment with noise: per labels-per-class value, ``<experiment>_k<k>.md`` / ``.csv``, a row per noise
  setting, a column per method, then PoissonL's paired differences with Poisson and AutoL, and PoissonL-MBO's with
  Poisson-MBO where the experiment ran it (mean ± standard error over the trials both ran, trials where the first
  is higher), and one figure ``<experiment>_k<k>.png``
  (accuracy against the noise rate, a panel per noise model); where judging methods recorded the labels they flag,
  ``<experiment>_k<k>_flags.md`` / ``.csv`` (:func:`flags_table`: F1, average precision and count of the flags).

The tables carry no date or machine (provenance goes to PROVENANCE.md), so the same rows give the same bytes.
``--docs FILE`` copies each table into the blocks of FILE marked ``<!-- lowlabel-table: NAME.md -->`` ...
``<!-- /lowlabel-table -->`` (:func:`sync_docs`; tests/test_lowlabel.py checks docs/poisson.md's blocks).
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .cache import atomic_write_text
from .records import RESULT_FILE, replace_rows

#: one compact row per run (results/lowlabel/runs.csv)
LOWLABEL_COLUMNS = ["experiment", "dataset", "features", "features_key", "algo", "per_class", "noise", "noise_rate",
                    "seed", "n_labeled", "n_flipped", "acc_unlabeled", "solver_iterations", "n_dropped",
                    "n_label_issues", "detect_estimated_issues", "detect_f1", "detect_ap", "seconds_total",
                    "config_hash"]


#: the order of method columns (others follow alphabetically)
METHOD_ORDER = ["gfhf", "lgc", "wnll", "properly", "meanshift", "poisson", "poissonMBO", "cutssl", "autoL", "auto",
                "poissonL", "poissonLMBO", "poissonBayes"]

#: GraphLearning's published MNIST figures (Calder, Cook, Thorpe & Slepčev, ICML 2020, Table 1; 100 trials on VAE
#: codes): (dataset, features, algo) -> {labels per class: accuracy %}
PUBLISHED = {("mnist", "vae", "poisson"): {1: 90.2, 3: 94.5, 5: 95.3},
             ("mnist", "vae", "poissonMBO"): {1: 96.5, 3: 97.2, 5: 97.2}}

#: the paired differences of the noise tables: (method, baseline, column title)
PAIRED = [("poissonL", "poisson", "PoissonL - Poisson (s.e., wins)"),
          ("poissonL", "autoL", "PoissonL - AutoL (s.e., wins)"),
          ("poissonLMBO", "poissonMBO", "PoissonL-MBO - Poisson-MBO (s.e., wins)"),
          ("poissonBayes", "poisson", "PoissonBayes - Poisson (s.e., wins)")]

_MARK = re.compile(r"(<!-- lowlabel-table: (?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- /lowlabel-table -->)", re.S)


def run_row(record: dict[str, Any], experiment: str) -> dict[str, Any]:
    """The compact row of one ``result.json`` (:data:`LOWLABEL_COLUMNS`)."""
    labels = (record.get("config") or {}).get("labels") or {}
    feats = record.get("features") or {}
    row = {k: record.get(k) for k in LOWLABEL_COLUMNS}
    row.update(experiment=experiment, per_class=labels.get("per_class"), features=feats.get("name", "raw"),
               features_key=feats.get("key"), noise=record.get("noise") or "none",
               seconds_total=round(float(record.get("seconds_total") or
                                         sum((record.get("stage_seconds") or {}).values())), 3))
    return row


def collect(root: Path) -> pd.DataFrame:
    """One row per run under ``root`` (``<root>/<experiment>/.../result.json``), in :data:`LOWLABEL_COLUMNS`."""
    rows = []
    for path in sorted(Path(root).rglob(RESULT_FILE)):
        experiment = path.relative_to(root).parts[0]
        rows.append(run_row(json.loads(path.read_text()), experiment))
    return tidy(pd.DataFrame(rows, columns=LOWLABEL_COLUMNS))


def tidy(runs: pd.DataFrame) -> pd.DataFrame:
    """The columns in their order, the rows sorted (experiment, algo, labels per class, noise, rate, seed)."""
    runs = runs.reindex(columns=LOWLABEL_COLUMNS)
    keys = ["experiment", "algo", "per_class", "noise", "noise_rate", "seed"]
    return runs.sort_values(keys, kind="mergesort").reset_index(drop=True)


#: a run's place in its experiment: a rerun of the same place replaces it, whatever its config hash (a method's
#: new default parameter changes the hash, not the place)
RUN_KEY = ["experiment", "algo", "per_class", "noise", "noise_rate", "seed"]


def check_unique_places(runs: pd.DataFrame, where: str) -> None:
    """Raise ValueError (one line) where two runs of ``runs`` hold one place (:data:`RUN_KEY`): a variant run into
    an experiment's own sweep directory, which a table would average with the default's run."""
    dup = runs[runs.duplicated(RUN_KEY, keep=False)]
    if len(dup):
        first = dup.iloc[0]
        place = ", ".join(f"{k}={first[k]}" for k in RUN_KEY)
        hashes = ", ".join(sorted(set(dup[(dup[RUN_KEY] == first[RUN_KEY]).all(axis=1)]["config_hash"].astype(str))))
        raise ValueError(f"{where}: {len(dup)} runs share a place of a table ({place}: config hashes {hashes}); "
                         f"move the variant out (a scratch hydra.sweep.dir) and run again")


def merge(old: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """``old`` with the runs of ``new`` added; a run in both (:data:`RUN_KEY`) is ``new``'s."""
    if not len(old):
        return tidy(new)
    return tidy(replace_rows(old, new, RUN_KEY))


def method_order(methods) -> list[str]:
    return sorted(set(methods), key=lambda m: (METHOD_ORDER.index(m) if m in METHOD_ORDER else len(METHOD_ORDER), m))


def _pct(x: np.ndarray) -> tuple[float, float, float]:
    """(mean, population sd, standard error) of accuracies in points."""
    x = 100 * np.asarray(x, dtype=float)
    se = float(x.std(ddof=1) / np.sqrt(x.size)) if x.size > 1 else float("nan")
    return float(x.mean()), float(x.std()), se


def _key(r: pd.Series) -> tuple[str, str, str]:
    return str(r["dataset"]), str(r["features"]), str(r["algo"])


def protocol_table(runs: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """(cells, markdown) of a noiseless experiment: a row per labels per class and method."""
    cells = []
    for (k, algo), g in runs.groupby(["per_class", "algo"], sort=False):
        mean, sd, se = _pct(g["acc_unlabeled"])
        pub = PUBLISHED.get(_key(g.iloc[0]), {}).get(int(k), float("nan"))
        T = g["solver_iterations"].dropna() if algo == "poisson" else pd.Series(dtype=float)
        cells.append({"per_class": int(k), "method": algo, "n": len(g), "mean": mean, "sd": sd, "se": se,
                      "published": pub, "difference": mean - pub,
                      "T_mean": T.mean() if len(T) else float("nan"),
                      "T_min": T.min() if len(T) else float("nan"), "T_max": T.max() if len(T) else float("nan")})
    order = {m: i for i, m in enumerate(method_order(runs["algo"]))}
    cells = pd.DataFrame(cells).sort_values(["per_class", "method"], key=lambda s: s.map(order) if s.name == "method"
                                            else s, kind="mergesort").reset_index(drop=True)
    has_pub = bool(np.isfinite(cells["published"]).any())
    has_T = bool(np.isfinite(cells["T_mean"]).any())
    head = ["labels per class", "method", "trials", "accuracy (mean ± sd)", "s.e."]
    head += ["published", "difference"] if has_pub else []
    head += ["mixing steps T, mean (min–max)"] if has_T else []
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for r in cells.itertuples():
        line = [str(r.per_class), f"`{r.method}`", str(r.n), f"{r.mean:.2f} ± {r.sd:.2f}",
                f"{r.se:.2f}" if np.isfinite(r.se) else "–"]
        if has_pub:
            line += [f"{r.published:.1f}", f"{r.difference:+.2f}"] if np.isfinite(r.published) else ["–", "–"]
        if has_T:
            line += [f"{r.T_mean:.0f} ({r.T_min:.0f}–{r.T_max:.0f})"] if np.isfinite(r.T_mean) else ["–"]
        lines.append("| " + " | ".join(line) + " |")
    return cells, "\n".join(lines)


def noise_rows(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs with a ``setting`` column: ``none`` at rate 0 (the noise models' 0 % runs are the same draw; the
    first model's are kept, by name), else ``<model> <rate>``."""
    runs = runs.copy()
    clean = runs["noise_rate"].astype(float) == 0
    first = runs[clean].sort_values("noise", kind="mergesort").drop_duplicates(["algo", "seed"])
    runs = pd.concat([first, runs[~clean]])
    runs["setting"] = np.where(runs["noise_rate"].astype(float) == 0, "none",
                               runs["noise"].astype(str) + " " + runs["noise_rate"].astype(float).map("{:g}".format))
    return runs


def setting_parts(setting: str) -> tuple[str, float]:
    """(noise model, rate) of a :func:`noise_rows` setting (``none``: no noise)."""
    return ("none", 0.0) if setting == "none" else (setting.split()[0], float(setting.split()[1]))


def setting_order(settings) -> list[str]:
    """The settings in table order: none, then uniform, then the other models by name; rates ascending."""
    return sorted(set(settings), key=lambda s: (s != "none", setting_parts(s)[0] != "uniform", *setting_parts(s)))


def setting_label(setting: str) -> str:
    """A table row's first cell: ``none, 0 %`` or ``<model>, <rate> %``."""
    model, rate = setting_parts(setting)
    return "none, 0 %" if setting == "none" else f"{model}, {round(100 * rate)} %"


def noise_table(runs: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """(cells, markdown) of one labels-per-class value of a noisy experiment: a row per noise setting."""
    runs = noise_rows(runs)
    methods = method_order(runs["algo"])
    settings = setting_order(runs["setting"])
    cells, lines = [], []
    paired = [p for p in PAIRED if p[0] in methods and p[1] in methods]
    head = ["noise", "trials"] + [f"`{m}`" for m in methods] + [p[2] for p in paired]
    lines += ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for s in settings:
        sel = runs[runs["setting"] == s]
        n_max = int(sel.groupby("algo").size().max())
        model, rate = setting_parts(s)
        row = [setting_label(s), str(n_max)]
        for m in methods:
            acc = sel.loc[sel["algo"] == m, "acc_unlabeled"]
            if not len(acc):
                row.append("–")
                continue
            mean, sd, se = _pct(acc)
            cells.append({"noise": model, "noise_rate": rate, "method": m, "n": len(acc), "mean": mean, "sd": sd,
                          "se": se})
            row.append(f"{mean:.2f} ± {sd:.2f}" + ("" if len(acc) == n_max else f" ({len(acc)})"))
        for a, b, _ in paired:
            pa = sel[sel["algo"] == a].set_index("seed")["acc_unlabeled"]
            pb = sel[sel["algo"] == b].set_index("seed")["acc_unlabeled"]
            d = 100 * (pa - pb).dropna().to_numpy()
            if d.size > 1:
                se = d.std(ddof=1) / np.sqrt(d.size)
                row.append(f"{d.mean():+.2f} ± {se:.2f} ({int((d > 0).sum())}/{d.size})")
                cells.append({"noise": model, "noise_rate": rate, "method": f"{a}-{b}", "n": d.size,
                              "mean": float(d.mean()), "sd": float(d.std()), "se": float(se)})
            else:
                row.append("–")
        lines.append("| " + " | ".join(row) + " |")
    return pd.DataFrame(cells), "\n".join(lines)


def flags_table(runs: pd.DataFrame) -> tuple[pd.DataFrame, str] | None:
    """(cells, markdown) of the labels each judging method flags (``label_issues.csv``, the ``detect`` defaults) in
    one labels-per-class value of a noisy experiment: a row per noise setting, per method the F1 of the flags
    against the flipped labels, the average precision of its ranking (by label quality) and the flags against the
    flipped count (at 0 %: false alarms), over the runs that recorded flags (the judging methods; other methods and
    runs recorded before flags were kept are left out; a method with fewer runs than the row's most shows its count
    in brackets). None where no run recorded flags."""
    runs = flagged_runs(runs)
    if runs is None:
        return None
    methods = method_order(runs["algo"])
    settings = setting_order(runs["setting"])
    head = ["noise", "flipped (mean)"] + [f"`{m}` F1 / AP / flagged" for m in methods]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    cells = []
    for s in settings:
        sel = runs[runs["setting"] == s]
        model, rate = setting_parts(s)
        row = [setting_label(s),
               f"{sel['n_flipped'].astype(float).mean():.1f}"]
        n_max = int(sel.groupby("algo").size().max())
        for m in methods:
            g = sel[sel["algo"] == m]
            if not len(g):
                row.append("–")
                continue
            f1, ap = g["detect_f1"].astype(float), g["detect_ap"].astype(float)
            flagged = g["n_label_issues"].astype(float).mean()
            cells.append({"noise": model, "noise_rate": rate, "method": m, "n": len(g),
                          "f1": f1.mean() if rate > 0 else float("nan"), "ap": ap.mean() if rate > 0 else float("nan"),
                          "flagged": flagged, "estimated": g["detect_estimated_issues"].mean(),
                          "n_estimated": int(g["detect_estimated_issues"].notna().sum()),
                          "flipped": g["n_flipped"].astype(float).mean()})
            none_flipped = not (g["n_flipped"].astype(float) > 0).any()   # F1 and AP need a flipped label
            quality = "– / –" if none_flipped or not f1.notna().any() else \
                f"{f1.mean():.3f} / " + (f"{ap.mean():.3f}" if ap.notna().any() else "–")
            row.append(f"{quality} / {flagged:.1f}" + ("" if len(g) == n_max else f" ({len(g)})"))
        lines.append("| " + " | ".join(row) + " |")
    return pd.DataFrame(cells), "\n".join(lines)


def count_table(cells: pd.DataFrame) -> str:
    """Markdown of the count each judging method reports (``detect_estimated_issues``, mean over the runs that
    recorded one; their number in brackets where it is below the row's most runs) beside the flipped labels' mean
    over the row's runs, a row per noise setting, from :func:`flags_table`'s cells."""
    methods = method_order(cells["method"])
    head = ["noise", "flipped (mean)"] + [f"`{m}` estimated" for m in methods]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for (model, rate), g in cells.groupby(["noise", "noise_rate"], sort=False):
        by = g.set_index("method")
        n_max = int(g["n"].max())
        row = [setting_label(f"{model} {rate:g}" if rate > 0 else "none"),
               f"{np.average(g['flipped'], weights=g['n']):.1f}"]
        for m in methods:
            k = int(by.at[m, "n_estimated"]) if m in by.index else 0
            row.append("–" if not k else f"{by.at[m, 'estimated']:.1f}" + ("" if k == n_max else f" ({k})"))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def flagged_runs(runs: pd.DataFrame) -> pd.DataFrame | None:
    """The runs that recorded their flags, one per trial (:func:`noise_rows`, applied after the selection so that a
    0 % trial is kept from whichever noise model recorded flags); None where none did."""
    if "n_label_issues" not in runs or not runs["n_label_issues"].notna().any():
        return None
    return noise_rows(runs[runs["n_label_issues"].notna()])


def _flagged_head(experiment: str, runs: pd.DataFrame, k: int, what: str) -> tuple[str, pd.DataFrame, str]:
    """(caption's start, the flagged runs, their seeds as ``a–b``) of :func:`flags_caption` and
    :func:`count_caption`."""
    first = runs.iloc[0]
    runs = flagged_runs(runs)
    seeds = sorted(set(runs["seed"].astype(int)))
    return (f"**`{experiment}`, {what}**: {str(first['dataset']).upper()}, {k} labels per class", runs,
            f"{seeds[0]}–{seeds[-1]}")


def flags_caption(experiment: str, runs: pd.DataFrame, k: int) -> str:
    head, runs, seeds = _flagged_head(experiment, runs, k, "flagged labels")
    return (f"{head}, the labels each judging method flags (`label_issues.csv`, `detect` defaults) against the "
            f"flipped ones, mean over seeds {seeds} ({len(runs)} runs): F1 of the flags, average precision of the "
            f"ranking, labels flagged (at 0 %: false alarms).")


def count_caption(experiment: str, runs: pd.DataFrame, k: int) -> str:
    head, runs, seeds = _flagged_head(experiment, runs, k, "the count")
    n = int(runs["detect_estimated_issues"].notna().sum())
    return (f"{head}, the number of wrong labels each judging method estimates (`estimated_issues`, "
            f"`detect_estimated_issues` in `result.json`) against the flipped ones, mean over seeds {seeds} ({n} runs "
            f"with a count).")


def caption(experiment: str, runs: pd.DataFrame, k: int | None = None) -> str:
    first = runs.iloc[0]
    feats = "raw features" if first["features"] == "raw" else f"{first['features']} codes"
    n_lab = f", {k} labels per class" if k is not None else ""
    seeds = sorted(set(runs["seed"].astype(int)))
    return (f"**`{experiment}`**: {str(first['dataset']).upper()}, {feats}{n_lab}, unlabelled accuracy (%) over "
            f"seeds {seeds[0]}–{seeds[-1]} ({len(runs)} runs; `lgcexp experiment={experiment}`).")


def plot_noise(path: Path, runs: pd.DataFrame, title: str) -> None:
    """Accuracy against the noise rate, a panel per noise model, a line per method (error bars: s.e.)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = noise_rows(runs)
    models = sorted(set(runs.loc[runs["noise_rate"].astype(float) > 0, "noise"]), key=lambda m: (m != "uniform", m))
    fig, axes = plt.subplots(1, max(len(models), 1), figsize=(5 * max(len(models), 1), 4), sharey=True, squeeze=False)
    methods = method_order(runs["algo"])
    colours = plt.get_cmap("tab20").colors[::2] + plt.get_cmap("tab20").colors[1::2]   # 20 distinct, dark first
    markers = "os^Dv<>PXh*"
    for ax, model in zip(axes[0], models):
        for i, m in enumerate(methods):
            pts = []
            for rate in sorted(set(runs["noise_rate"].astype(float))):
                sel = runs[(runs["algo"] == m) & (runs["noise_rate"].astype(float) == rate)
                           & ((runs["noise"] == model) | (rate == 0))]
                if len(sel):
                    pts.append((100 * rate, *_pct(sel["acc_unlabeled"])))
            if pts:
                x, mean, _, se = map(np.asarray, zip(*pts))
                ax.errorbar(x, mean, yerr=np.nan_to_num(se), marker=markers[i % len(markers)], capsize=3, label=m,
                            color=colours[i % len(colours)])
        ax.set_title(f"{model} noise")
        ax.set_xlabel("flipped labels (%)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("unlabelled accuracy (%)")
    axes[0][-1].legend(fontsize=8, loc="lower left")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)


def write_lowlabel_tables(runs: pd.DataFrame, out: Path, figures: bool = True) -> dict[str, str]:
    """Every experiment's tables (``.md``, ``.csv``; figures unless ``figures=False``) and ``README.md``
    (all of them) into ``out``; returns {file name: markdown} of the tables."""
    out.mkdir(parents=True, exist_ok=True)
    tables: dict[str, str] = {}
    for experiment, g in runs.groupby("experiment", sort=True):
        if (g["noise_rate"].astype(float) == 0).all():
            cells, md = protocol_table(g)
            tables[f"{experiment}.md"] = caption(experiment, g) + "\n\n" + md + "\n"
            atomic_write_text(out / f"{experiment}.csv", cells.round(4).to_csv(index=False))
            continue
        for k, gk in g.groupby("per_class", sort=True):
            name = f"{experiment}_k{int(k)}"
            cells, md = noise_table(gk)
            tables[f"{name}.md"] = caption(experiment, gk, int(k)) + "\n\n" + md + "\n"
            atomic_write_text(out / f"{name}.csv", cells.round(4).to_csv(index=False))
            if figures:
                plot_noise(out / f"{name}.png", gk, f"{experiment}: {int(k)} labels per class")
            flags = flags_table(gk)
            if flags is not None:
                tables[f"{name}_flags.md"] = flags_caption(experiment, gk, int(k)) + "\n\n" + flags[1] + "\n"
                atomic_write_text(out / f"{name}_flags.csv", flags[0].round(4).to_csv(index=False))
                count = count_table(flags[0])
                tables[f"{name}_count.md"] = count_caption(experiment, gk, int(k)) + "\n\n" + count + "\n"
    for name, text in tables.items():
        atomic_write_text(out / name, text)
    index = ["# Low-label tables", "",
             "Made by `lgcexp-tables --lowlabel` from `results/lowlabel/runs.csv` (one row per run); "
             "`make tables-lowlabel` rebuilds them. Mean ± population sd over trials; s.e. the standard error.", ""]
    for name, text in tables.items():
        index += [f"## {name[:-3]}", "", text]
    atomic_write_text(out / "README.md", "\n".join(index))
    return tables


def sync_docs(doc: Path, tables: dict[str, str]) -> list[str]:
    """Replace each marked block of ``doc`` by its table; returns the names of blocks whose table is missing."""
    text = doc.read_text()
    missing: list[str] = []

    def sub(m: re.Match) -> str:
        name = m.group("name")
        if name not in tables:
            missing.append(name)
            return m.group(0)
        return m.group(1) + tables[name] + m.group(4)

    new = _MARK.sub(sub, text)
    if new != text:
        atomic_write_text(doc, new)
    return missing


def doc_blocks(doc: Path) -> dict[str, str]:
    """{table name: the text of its marked block} of a docs page."""
    return {m.group("name"): m.group("body") for m in _MARK.finditer(doc.read_text())}
