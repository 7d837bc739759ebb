"""The canonical trace table on disk: Parquet (zstd), schema metadata kept."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from cluster_sim.errors import TraceError
from cluster_sim.trace.schema import conform_table, validate_table

__all__ = ["write_parquet", "read_parquet"]


def write_parquet(table: pa.Table, path: str | Path) -> None:
    """Validate ``table`` and write it to ``path`` (zstd; parent folders are created).

    The schema metadata (``block_tokens``, ``source``) travels with the file.
    """
    p = Path(path)
    validate_table(table, str(p))
    p.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, p, compression="zstd")


def read_parquet(path: str | Path) -> pa.Table:
    """Read a canonical trace from Parquet, validate it and return it with the canonical types.

    A missing or unreadable file, or a table that fails
    :func:`~cluster_sim.trace.schema.validate_table`, raises :class:`TraceError`
    naming the path (and, for a bad row, the 1-based row and the column).
    """
    p = Path(path)
    spath = str(path)
    if not p.exists():
        raise TraceError(spath, "no such file")
    if not p.is_file():
        raise TraceError(spath, "not a regular file")
    try:
        table = pq.read_table(p, memory_map=True)   # row groups decoded from the mapped file, no read buffer
    except (pa.ArrowInvalid, pa.ArrowIOError, OSError) as exc:
        raise TraceError(spath, f"cannot read as Parquet ({exc})") from None
    validate_table(table, spath)
    return conform_table(table)
