"""How much each representation (features=raw|pca|vae|oof) moves LGC's accuracy and its label-issue scores,
the paper's protocol: labels sampled (digits 100, ISOLET 1040, MNIST 100), uniform noise (rate 0.2 by
default), LGC with its defaults, the graph with the data set's k and (raw) its paper sigma, sigma=mean
for the learned features. Not a test.

For every data set, seed and representation one pipeline run (lgcexp.pipeline.run): unlabelled accuracy,
the detector's F1 and ROC AUC against the flipped labels, and the features' seconds (computed once per
data set for pca/vae, whose key does not depend on the labels; per seed for oof). Differences against raw
are paired by seed, in the same run.

    nice python -m benchmarks features [--datasets digits,isolet,mnist] [--seeds 3] [--rate 0.2]
        # writes results/bench/features.json and results/bench/features.md
    nice python -m benchmarks features --datasets mnist --features raw,vae --learned features.epochs=50
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from benchmarks.common import OUT, compose

FEATURES = ("raw", "pca", "vae", "oof")


def one_run(dataset: str, feature: str, seed: int, rate: float, extra: list[str]) -> dict:
    from lgcexp.config import to_container
    from lgcexp.pipeline import run

    ov = [f"dataset={dataset}", f"features={feature}", f"seed={seed}", f"noise.rate={rate}", "progress=false", *extra]
    c = to_container(compose(ov))
    c.pop("hydra", None)
    t0 = time.perf_counter()
    r = run(c)
    f = r.get("features") or {}
    return {"dataset": dataset, "features": feature, "seed": seed, "rate": rate,
            "acc_unlabeled": r["acc_unlabeled"], "detect_f1": r.get("detect_f1"), "detect_auc": r.get("detect_auc"),
            "dim": f.get("dim", None), "features_s": r["stage_seconds"]["features"],
            "features_cache_hit": f.get("cache_hit"), "graph_s": r["stage_seconds"]["graph"],
            "graph_cache_hit": r["graph"]["cache_hit"], "sigma": r["graph"]["sigma"],
            "wall_s": time.perf_counter() - t0,
            "features_info": {k: v for k, v in f.items() if k not in ("key",)}}


def summarise(rows: list[dict]) -> list[dict]:
    out = []
    for ds in dict.fromkeys(r["dataset"] for r in rows):
        base = {r["seed"]: r for r in rows if r["dataset"] == ds and r["features"] == "raw"}
        for feat in FEATURES:
            rs = [r for r in rows if r["dataset"] == ds and r["features"] == feat]
            if not rs:
                continue
            s = {"dataset": ds, "features": feat, "seeds": len(rs), "dim": rs[0]["dim"],
                 "features_s_first": max(r["features_s"] for r in rs)}
            for m in ("acc_unlabeled", "detect_f1", "detect_auc"):
                v = np.array([r[m] for r in rs if r[m] is not None], dtype=float)
                s[m] = float(v.mean()) if v.size else None
                s[m + "_sd"] = float(v.std(ddof=1)) if v.size > 1 else None
                d = np.array([r[m] - base[r["seed"]][m] for r in rs
                              if r["seed"] in base and r[m] is not None and base[r["seed"]][m] is not None])
                s[m + "_diff"] = float(d.mean()) if d.size else None
                s[m + "_diff_sd"] = float(d.std(ddof=1)) if d.size > 1 else None
            b = np.mean([base[r["seed"]]["acc_unlabeled"] for r in rs if r["seed"] in base]) if base else np.nan
            err, err_b = 1 - s["acc_unlabeled"], 1 - b
            s["error_ratio"] = float(err / err_b) if err_b > 0 else None
            out.append(s)
    return out


def markdown(summary: list[dict], meta: dict) -> str:
    lines = [f"LGC, sampled labels, uniform noise {meta['rate']}, {meta['seeds']} seeds; differences paired by seed "
             "against raw in the same run (mean +- sd over seeds).", "",
             "| data | features | dim | unlabelled acc | diff vs raw | error ratio | detect F1 | diff | ROC AUC | diff "
             "| features s (first) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]

    def f(v, fmt="{:.4f}"):
        return "-" if v is None else fmt.format(v)

    for s in summary:
        lines.append(
            f"| {s['dataset']} | {s['features']} | {s['dim'] or 'raw'} "
            f"| {f(s['acc_unlabeled'])} +- {f(s['acc_unlabeled_sd'])} "
            f"| {f(s['acc_unlabeled_diff'], '{:+.4f}')} | {f(s['error_ratio'], '{:.3f}')} | {f(s['detect_f1'])} "
            f"| {f(s['detect_f1_diff'], '{:+.4f}')} | {f(s['detect_auc'])} | {f(s['detect_auc_diff'], '{:+.4f}')} "
            f"| {s['features_s_first']:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="digits,isolet,mnist")
    ap.add_argument("--features", default=",".join(FEATURES))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--rate", type=float, default=0.2)
    ap.add_argument("--out", default=str(OUT / "features"))
    ap.add_argument("extra", nargs="*", help="more overrides for every run")
    ap.add_argument("--learned", default="", help="comma-separated overrides for the runs other than raw "
                    "(e.g. features.epochs=50)")
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    t0 = time.perf_counter()
    for ds in a.datasets.split(","):
        for seed in range(a.seeds):
            for feat in a.features.split(","):
                more = [o for o in a.learned.split(",") if o] if feat != "raw" else []
                rows.append(one_run(ds, feat, seed, a.rate, [*a.extra, *more]))
                r = rows[-1]
                print(f"{ds} {feat} seed={seed}: acc {r['acc_unlabeled']:.4f} F1 {r['detect_f1']} "
                      f"AUC {r['detect_auc']} "
                      f"features {r['features_s']:.1f}s graph {r['graph_s']:.1f}s", flush=True)
                meta = {"rate": a.rate, "seeds": a.seeds, "extra": a.extra, "learned": a.learned,
                        "load_avg": os.getloadavg(),
                        "wall_s": time.perf_counter() - t0}
                summary = summarise(rows)
                (out.with_suffix(".json")).write_text(json.dumps({"meta": meta, "summary": summary, "runs": rows},
                                                                 indent=1))
                (out.with_suffix(".md")).write_text(markdown(summary, meta))
    print(markdown(summarise(rows), {"rate": a.rate, "seeds": a.seeds}))
