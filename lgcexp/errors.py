"""User-facing errors: bad input that must stop a run with one clear line."""


class UserError(ValueError):
    """A bad value from the user (config, data file, CLI). Printed as one line, no traceback."""
