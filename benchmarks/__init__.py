"""lgcexp's benchmarks: how fast and how well the code does, measured against baselines in the same run.
Not part of the installed package and not tests; run from the repository root:

    python -m benchmarks --list              # every benchmark, one line each
    python -m benchmarks NAME [options]      # one benchmark (NAME --help: its options)
    make bench                               # python -m benchmarks report: the speed figures

One module per benchmark, each with ``main(argv)``; what they share (timing, the report header, writing
figures under results/bench/, the paper's graphs and data sets, the worker-count rule) is
:mod:`benchmarks.common`. Figures go to files under ``results/bench/`` (git-ignored).
"""
from __future__ import annotations

import ast
import pkgutil
from pathlib import Path

#: modules of the package that are not benchmarks
NOT_BENCHMARKS = ("common",)


def names() -> list[str]:
    """Every benchmark module's name, sorted (found on disk, none imported)."""
    return sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)])
                  if not m.name.startswith("_") and m.name not in NOT_BENCHMARKS)


def summary(name: str) -> str:
    """The first sentence of a benchmark module's docstring (read from its source, not imported)."""
    doc = ast.get_docstring(ast.parse((Path(__file__).parent / f"{name}.py").read_text())) or ""
    first = " ".join(doc.strip().split("\n\n")[0].split())
    return first.split(". ")[0].rstrip(".") + "."
