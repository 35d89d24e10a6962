"""lgcexp's version, in a module of its own so that the pipeline can record it without importing the package
root (which is a front end: ``lgcexp.find_label_issues``; docs/architecture.md's layer table)."""

__version__ = "0.1.0"
