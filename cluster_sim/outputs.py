"""Checks of output paths before any work is done (no Hydra, no MLflow).

A run's folders and files are checked before the trace is read, so a path that
cannot be written fails in one line naming its key, and never after the
simulation has run. A path that does not exist yet is fine when its nearest
existing ancestor is a writable directory.
"""
from __future__ import annotations

import os
from pathlib import Path

from .errors import ConfigError

__all__ = ["check_dir", "check_file", "check_summary_path", "SUMMARY_SIBLINGS"]

#: files :meth:`cluster_sim.api.Summary.write` puts beside ``summary.json``
SUMMARY_SIBLINGS = ("nodes.parquet", "epochs.parquet")


def _creatable(p: Path, key: str, what: str) -> None:
    anc = p
    while not anc.exists():
        if anc.parent == anc:
            break
        anc = anc.parent
    if not anc.is_dir():
        raise ConfigError(key, f"cannot create {what} {p}: {anc} is not a directory")
    if not os.access(anc, os.W_OK | os.X_OK):
        raise ConfigError(key, f"cannot create {what} {p}: {anc} is not writable")


def check_dir(path: str | os.PathLike, key: str) -> Path:
    """``path`` is, or can be created as, a writable directory."""
    p = Path(os.path.abspath(os.path.expanduser(str(path))))
    if p.exists():
        if not p.is_dir():
            raise ConfigError(key, f"{path} exists and is not a directory")
        if not os.access(p, os.W_OK | os.X_OK):
            raise ConfigError(key, f"directory {path} is not writable")
        return p
    _creatable(p, key, "directory")
    return p


def check_file(path: str | os.PathLike, key: str) -> Path:
    """``path`` can be written as a file (it is not a directory; its folder can be created)."""
    p = Path(os.path.abspath(os.path.expanduser(str(path))))
    if p.is_dir():
        raise ConfigError(key, f"{path} is a directory, expected a file path")
    if p.exists() and not os.access(p, os.W_OK):
        raise ConfigError(key, f"file {path} is not writable")
    if not p.exists():
        _creatable(p, key, "file")
    return p


def check_summary_path(path: str | os.PathLike, key: str, *, figures: bool = False) -> Path:
    """``summary.json`` at ``path`` and the files written beside it (``figures/`` too when asked)."""
    p = check_file(path, key)
    for name in SUMMARY_SIBLINGS:
        q = p.parent / name
        if q.is_dir():
            raise ConfigError(key, f"{q} (written beside the summary) is a directory")
        if q.exists() and not os.access(q, os.W_OK):
            raise ConfigError(key, f"{q} (written beside the summary) is not writable")
    if figures:
        f = p.parent / "figures"
        if f.exists() and not f.is_dir():
            raise ConfigError(key, f"{f} (the run's figures folder) exists and is not a directory")
    return p
