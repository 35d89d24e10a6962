"""Write lgcexp's labelled sets to an .npz that ``labels.sets=`` reads back (one row per trial, row = seed).

    python scripts/label_sets.py dataset=mnist --per-class 5 --trials 100 --out mnist_5pc.npz

Overrides (``dataset=...``, ``dataset.path=...``) compose the data set as the CLI does; ``--per-class k``
draws exactly k per class (``labels.per_class``), ``--n m`` a stratified m (``labels.n``). Seeds 0..trials-1.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from hydra import compose, initialize_config_dir

from lgcexp.config import plan, to_container
from lgcexp.labels import write_label_sets

CONF = str(Path(__file__).resolve().parents[1] / "conf")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("overrides", nargs="*")
    ap.add_argument("--per-class", type=int, default=None)
    ap.add_argument("--n", type=int, default=None)
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    if (a.per_class is None) == (a.n is None):
        ap.error("give exactly one of --per-class and --n")
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose(config_name="config", overrides=a.overrides)
    p = plan(to_container(cfg))
    paths = p.config.get("paths") or {}
    data = p.source.load(data_dir=paths.get("data_dir"), download=bool(paths.get("download", True)))
    rows = write_label_sets(a.out, data.y, range(a.trials), per_class=a.per_class, n_labels=a.n)
    print(f"wrote {a.out}: {rows.shape[0]} labelled sets of {rows.shape[1]} points ({data.name})")


if __name__ == "__main__":
    main()
