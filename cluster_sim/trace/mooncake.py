"""Reader for Mooncake JSONL traces (``../shared/traces/README.md`` §1).

One JSON object per line::

    {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, ...]}

``timestamp`` is milliseconds from trace start, ``hash_ids`` are global
prefix-block ids of 512-token blocks, the final partial block included. The
file may be plain or gzip-compressed (recognised by its magic bytes or a
``.gz`` suffix).

Mapping to the canonical table: ``arrival_s = timestamp / 1000``;
``request_id`` = 0-based index of the record (the 0-based line index when
the file has no blank lines; blank lines are the only thing skipped); ``session_id``, ``category`` and
``turn`` are null (the trace has no sessions); ``block_tokens = 512``.
"""
from __future__ import annotations

import gzip
import math
import zlib
from itertools import chain
from pathlib import Path

import numpy as np
import pyarrow as pa

from cluster_sim.errors import TraceError
from cluster_sim.trace._json import loads
from cluster_sim.trace.schema import MAX_ARRIVAL_S, build_table, validate_table

__all__ = ["read_mooncake", "MOONCAKE_BLOCK_TOKENS"]

MOONCAKE_BLOCK_TOKENS = 512

_GZIP_MAGIC = b"\x1f\x8b"
_INT32_MAX = 2**31 - 1
_UINT64_MAX = 2**64 - 1
_MAX_TIMESTAMP_MS = MAX_ARRIVAL_S * 1000.0


def _is_gzip(path: Path) -> bool:
    if path.suffix == ".gz":
        return True
    with open(path, "rb") as fh:
        return fh.read(2) == _GZIP_MAGIC


def _int_field(record: dict, key: str, path: str, line: int, *, upper: int = _INT32_MAX) -> int:
    if key not in record:
        raise TraceError(path, "missing field", line=line, field=key)
    value = record[key]
    if type(value) is not int:  # bool is an int subclass; reject it too
        raise TraceError(path, f"expected an integer, got {type(value).__name__} {value!r}", line=line, field=key)
    if value < 0:
        raise TraceError(path, f"must be >= 0, got {value}", line=line, field=key)
    if value > upper:
        raise TraceError(path, f"too large ({value} > {upper})", line=line, field=key)
    return value


def read_mooncake(path: str | Path) -> pa.Table:
    """Read a Mooncake JSONL(.gz) trace into the canonical table.

    Raises :class:`TraceError` naming the file, the 1-based line and the field
    for a missing file, invalid or truncated JSON, a missing field, a value of
    the wrong type, a negative length, a decreasing timestamp, or fewer
    ``hash_ids`` than the prompt's full 512-token blocks.
    """
    p = Path(path)
    spath = str(path)
    if not p.is_file():
        raise TraceError(spath, "no such file" if not p.exists() else "not a regular file")

    timestamps: list[float] = []
    input_lengths: list[int] = []
    output_lengths: list[int] = []
    hash_lists: list[list[int]] = []
    last_ts = -math.inf
    lineno = 0

    opener = gzip.open if _is_gzip(p) else open
    try:
        with opener(p, "rb") as fh:
            for lineno, raw in enumerate(fh, start=1):
                if not raw.strip():
                    continue
                record = loads(raw, spath, lineno)
                if type(record) is not dict:
                    raise TraceError(spath, f"expected a JSON object, got {type(record).__name__}", line=lineno)

                if "timestamp" not in record:
                    raise TraceError(spath, "missing field", line=lineno, field="timestamp")
                ts = record["timestamp"]
                if type(ts) not in (int, float) or not math.isfinite(ts):
                    raise TraceError(spath, f"expected a number of milliseconds, got {ts!r}", line=lineno, field="timestamp")
                if ts < 0:
                    raise TraceError(spath, f"must be >= 0, got {ts}", line=lineno, field="timestamp")
                if ts > _MAX_TIMESTAMP_MS:
                    raise TraceError(spath, f"too large ({ts!r} ms > {_MAX_TIMESTAMP_MS:g} ms, about 31,700 years)",
                                     line=lineno, field="timestamp")
                if ts < last_ts:
                    raise TraceError(
                        spath, f"timestamp decreases ({ts} after {last_ts}); the trace must be sorted by time",
                        line=lineno, field="timestamp",
                    )
                last_ts = ts

                n_in = _int_field(record, "input_length", spath, lineno)
                n_out = _int_field(record, "output_length", spath, lineno)

                if "hash_ids" not in record:
                    raise TraceError(spath, "missing field", line=lineno, field="hash_ids")
                ids = record["hash_ids"]
                if type(ids) is not list:
                    raise TraceError(spath, f"expected a list of integers, got {type(ids).__name__}", line=lineno, field="hash_ids")
                if ids:
                    if not all(type(h) is int for h in ids):
                        bad = next(h for h in ids if type(h) is not int)
                        raise TraceError(spath, f"expected integer hash ids, got {bad!r}", line=lineno, field="hash_ids")
                    if min(ids) < 0 or max(ids) > _UINT64_MAX:
                        raise TraceError(spath, "hash ids must be in [0, 2^64)", line=lineno, field="hash_ids")
                if len(ids) < n_in // MOONCAKE_BLOCK_TOKENS:
                    raise TraceError(
                        spath,
                        f"{len(ids)} hash ids for input_length {n_in} "
                        f"(needs at least {n_in // MOONCAKE_BLOCK_TOKENS} full {MOONCAKE_BLOCK_TOKENS}-token blocks)",
                        line=lineno, field="hash_ids",
                    )

                timestamps.append(ts)
                input_lengths.append(n_in)
                output_lengths.append(n_out)
                hash_lists.append(ids)
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise TraceError(spath, f"corrupt or truncated gzip stream ({exc})", line=lineno + 1) from None
    except OSError as exc:
        raise TraceError(spath, f"cannot read file ({exc})") from None

    n = len(timestamps)
    counts = np.fromiter((len(h) for h in hash_lists), dtype=np.int64, count=n)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    values = np.fromiter(chain.from_iterable(hash_lists), dtype=np.uint64, count=int(offsets[-1]))

    table = build_table(
        arrival_s=np.asarray(timestamps, dtype=np.float64) / 1000.0,
        input_tokens=np.asarray(input_lengths, dtype=np.int32),
        output_tokens=np.asarray(output_lengths, dtype=np.int32),
        block_hashes=(offsets, values),
        block_tokens=MOONCAKE_BLOCK_TOKENS,
        source=f"mooncake:{p.name}",
    )
    validate_table(table, spath)
    return table
