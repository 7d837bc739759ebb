"""User-facing errors.

Every error a user can cause with a typo or a bad file is one of these. The
command line turns them into one clear line on stderr and exit status 2;
anything else is a bug and keeps its traceback.
"""
from __future__ import annotations


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines included) as one space."""
    return " ".join(str(text).split())


class UserError(Exception):
    """An error caused by user input (config or data), reported as one line."""

    exit_code = 2


class ConfigError(UserError):
    """A configuration key has a bad value. ``key`` is the dotted Hydra key."""

    def __init__(self, key: str, message: str):
        self.key = key
        self.message = one_line(message)
        super().__init__(one_line(f"{key}: {message}"))


class TraceError(UserError):
    """A trace file is malformed. Names the file, the 1-based line (or row) and the field."""

    def __init__(self, path: str, message: str, line: int | None = None, field: str | None = None):
        self.path = str(path)
        self.line = line
        self.field = field
        self.message = one_line(message)
        where = self.path
        if line is not None:
            where += f":{line}"
        if field is not None:
            where += f": field '{field}'"
        super().__init__(one_line(f"{where}: {message}"))


class TrackingError(Exception):
    """The MLflow store could not be reached or written. Never costs results: the run's files
    are written anyway, the command line prints one warning line and exits with status 3."""

    exit_code = 3

    def __init__(self, uri: str, message: str):
        self.uri = uri
        self.message = one_line(message)
        super().__init__(one_line(f"MLflow tracking failed ({uri}): {message}"))
