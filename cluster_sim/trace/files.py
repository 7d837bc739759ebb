"""Where trace files are and what they hold: path resolution and content hashes.

The bottom of the ``trace`` package: every reader, the converted-trace cache, the session
placement and the run record resolve paths and hash sources here, and this module imports
nothing of cluster_sim but :mod:`cluster_sim.errors`.

A source is hashed once per process for a given (path, size, mtime): a run that converts a
trace (cache key) and then records it (``trace_sha256``) reads its bytes once.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from ..errors import ConfigError
from ..locations import data_root

__all__ = ["project_root", "resolve_path", "resolve_trace_path", "session_files", "source_sha256"]

_DIR_TAG = b"cluster_sim directory v1\0"     # keeps directory digests apart from file digests
_BLOCK = 1 << 20
_memo: dict[tuple[str, int, int], str] = {}


def project_root() -> Path:
    """Where relative trace paths fall back to: the folder holding the bundled ``traces/`` (the
    checkout, or the installed package)."""
    return data_root()


def resolve_path(p, key: str) -> Path:
    """An existing path for the path-valued setting ``key``: as given (relative to the current
    directory), else relative to :func:`project_root`; a ConfigError names ``key`` otherwise."""
    path = Path(str(p)).expanduser()
    if path.exists():
        return path
    if not path.is_absolute():
        alt = project_root() / path
        if alt.exists():
            return alt
    raise ConfigError(key, f"file not found: {p}")


def resolve_trace_path(p: str) -> Path:
    """``workload.path`` resolved like :func:`resolve_path` (so the bundled
    ``traces/default.parquet`` is found from anywhere).

    The path must be a regular file or a directory: a trace is read more than once (its
    checksum, the converted-trace cache, the reader), which a pipe (``<(zcat ...)``), a FIFO
    or a device cannot give."""
    path = Path(p).expanduser()
    if not path.exists() and not path.is_absolute() and (project_root() / path).exists():
        path = project_root() / path
    if not path.exists():
        raise ConfigError("workload.path", f"trace file not found: {p}")
    if not (path.is_file() or path.is_dir()):
        raise ConfigError("workload.path", f"{p} is not a regular file (a pipe, FIFO or device?); the trace is "
                                           "read more than once, so give a file (gzip is read directly)")
    return path


def session_files(directory: Path) -> list[Path]:
    """The session files of a directory, in sorted name order: ``*.json`` and ``*.json.gz``."""
    return sorted(f for f in Path(directory).iterdir()
                  if f.is_file() and (f.name.endswith(".json") or f.name.endswith(".json.gz")))


def _update(h, path: Path):
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_BLOCK), b""):
            h.update(block)


def source_sha256(path: str | Path) -> str:
    """sha256 of a file's bytes; for a directory, of its session files' names, sizes and bytes
    (sorted by name). Memoised per (path, size, mtime) within the process."""
    p = Path(path)
    st = p.stat()
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    if not p.is_dir() and key in _memo:
        return _memo[key]
    if not p.is_dir():
        h = hashlib.sha256()
        _update(h, p)
        _memo[key] = digest = h.hexdigest()
        return digest
    h = hashlib.sha256(_DIR_TAG)
    for f in session_files(p):
        h.update(f.name.encode() + b"\0" + str(f.stat().st_size).encode() + b"\0")
        _update(h, f)
    return h.hexdigest()
