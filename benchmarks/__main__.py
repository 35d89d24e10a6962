"""``python -m benchmarks NAME [options]``: run the benchmark ``benchmarks.NAME`` with those options
(``NAME --help`` lists them); ``python -m benchmarks --list``: every benchmark with its first docstring line."""
from __future__ import annotations

import importlib
import os
import sys

from benchmarks import names, summary


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    known = names()
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip() + "\n\nbenchmarks: " + ", ".join(known))
        return 0 if argv else 2
    if argv[0] == "--list":
        width = max(map(len, known))
        for name in known:
            print(f"{name:<{width}}  {summary(name)}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in known:
        print(f"python -m benchmarks: no benchmark {name!r}; choose one of {', '.join(known)}", file=sys.stderr)
        return 2
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")   # TensorFlow's start-up lines, for every benchmark
    sys.argv = [f"python -m benchmarks {name}", *rest]    # argparse's prog in each benchmark's usage line
    code = importlib.import_module(f"benchmarks.{name}").main(rest)
    return int(code or 0)


if __name__ == "__main__":
    sys.exit(main())
