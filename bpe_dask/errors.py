"""User-facing errors: what the CLI turns into one line and a non-zero exit."""


class BpeDaskError(Exception):
    """A problem with the user's input or options, explained in one line."""
