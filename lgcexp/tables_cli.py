"""The ``lgcexp-tables`` entry point: the tables (:mod:`lgcexp.tables`) and, beside them, the figures and
REPORT.md (:mod:`lgcexp.report`, which builds on the tables). Apart from both so that neither imports the
other in a circle.

A file it cannot write (a read-only ``--out``, a full disk) ends it with one line and exit code 2; every file
is written atomically (:func:`lgcexp.cache.atomic_write_text`), so nothing partial is left."""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from .config import WRITE_ERRNOS
    from .report import write_report
    from .tables import main as tables_main

    try:
        return tables_main(argv, report_writer=write_report)
    except OSError as exc:
        if exc.errno not in WRITE_ERRNOS:
            raise
        print(f"lgcexp-tables: error: cannot write {exc.filename or 'the output'} ({exc.strerror or exc}); "
              "choose a writable --out (and --runs-csv)", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
