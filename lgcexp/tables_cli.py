"""The ``lgcexp-tables`` entry point: the tables (:mod:`lgcexp.tables`) and, beside them, the figures and
REPORT.md (:mod:`lgcexp.report`, which builds on the tables). Apart from both so that neither imports the
other in a circle."""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from .report import write_report
    from .tables import main as tables_main

    return tables_main(argv, report_writer=write_report)


if __name__ == "__main__":
    sys.exit(main())
