"""The canonical trace table (simulation-model.md §1).

Every reader and the synthetic generator produce one Arrow table with the
columns of :data:`TRACE_SCHEMA` (more columns are allowed after them). The
table's schema metadata carries ``block_tokens`` (tokens per trace block, a
decimal string) and ``source`` (where the trace came from).

``block_hashes`` holds, per request, the chained prefix-block hashes of the
prompt: hash ``k`` names the whole prefix up to and including block ``k``.
Every hash the source gives is kept, a final partial block's included, so a
request has at least ``floor(input_tokens / block_tokens)`` hashes; only those
full blocks are cacheable.

Everything here is vectorised: validating a 50k-request table with ~10^8
hashes takes about a second.
"""
from __future__ import annotations

from itertools import chain
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cluster_sim.errors import TraceError

__all__ = [
    "TRACE_SCHEMA",
    "MAX_ARRIVAL_S",
    "BLOCK_TOKENS_KEY",
    "SOURCE_KEY",
    "build_table",
    "block_tokens",
    "source",
    "validate_table",
    "conform_table",
    "trace_stats",
    "reuse_counts",
    "SIGNAL_FIELDS",
    "CANONICAL_SCHEMA",
    "STOP_REASONS",
    "stop_reason_codes",
]

BLOCK_TOKENS_KEY = b"block_tokens"
SOURCE_KEY = b"source"

TRACE_SCHEMA = pa.schema(
    [
        pa.field("arrival_s", pa.float64(), nullable=False),
        pa.field("request_id", pa.int64(), nullable=False),
        pa.field("session_id", pa.int64(), nullable=True),
        pa.field("category", pa.dictionary(pa.int32(), pa.string()), nullable=True),
        pa.field("turn", pa.int32(), nullable=True),
        pa.field("input_tokens", pa.int32(), nullable=False),
        pa.field("output_tokens", pa.int32(), nullable=False),
        pa.field("block_hashes", pa.list_(pa.uint64()), nullable=False),
    ]
)

# Request-level signals (simulation-model §1): what a serving system knows when a request
# completes. Optional canonical columns: a table without them (an older Parquet trace, a
# source that has none) is conformed with all-null columns, which mean "unknown".
SIGNAL_FIELDS = pa.schema(
    [
        pa.field("stop_reason", pa.dictionary(pa.int32(), pa.string()), nullable=True),
        pa.field("think_time_s", pa.float64(), nullable=True),
        pa.field("api_time_s", pa.float64(), nullable=True),
        pa.field("agent", pa.int32(), nullable=True),
    ]
)
# every column a canonical table has after build_table / conform_table, in order
CANONICAL_SCHEMA = pa.schema(list(TRACE_SCHEMA) + list(SIGNAL_FIELDS))
# stop-reason codes the simulator uses (RequestMeta.stop_reason): 0 = unknown (null or empty)
STOP_REASONS = ("unknown", "tool_use", "end_turn", "max_tokens", "other")

_INT32_MAX = np.iinfo(np.int32).max
#: arrival times (seconds) beyond this are refused: 10^12 s is about 31,700 years, far past any
#: trace, and keeps every time difference the simulator forms exact to well under a millisecond
MAX_ARRIVAL_S = 1e12


def stop_reason_codes(values) -> np.ndarray:
    """Per-request stop-reason codes (indices into :data:`STOP_REASONS`, int8) from a
    ``stop_reason`` column or list: null and ``""`` are unknown, names outside the list other."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        values = values.cast(pa.string()).to_pylist() if len(values) else []
    table = {name: i for i, name in enumerate(STOP_REASONS)}
    out = np.empty(len(values), dtype=np.int8)
    cache: dict = {}
    for i, v in enumerate(values):
        c = cache.get(v)
        if c is None:
            c = 0 if v is None or v == "" else table.get(v, STOP_REASONS.index("other"))
            cache[v] = c
        out[i] = c
    return out


# --------------------------------------------------------------------------- #
# construction


def build_table(
    *,
    arrival_s: Any,
    input_tokens: Any,
    output_tokens: Any,
    block_hashes: Any,
    block_tokens: int,
    source: str,
    request_id: Any = None,
    session_id: Any = None,
    category: Any = None,
    turn: Any = None,
    stop_reason: Any = None,
    think_time_s: Any = None,
    api_time_s: Any = None,
    agent: Any = None,
) -> pa.Table:
    """Assemble a canonical trace table from column data.

    ``arrival_s``, ``input_tokens``, ``output_tokens`` are 1-d array-likes of
    one length ``n``. ``request_id`` defaults to ``0 … n-1``. ``session_id``,
    ``category`` and ``turn`` default to all-null; each may be an array-like
    (``None`` entries are nulls) and ``category`` may also be one string for
    every row. ``block_hashes`` is either

    * a sequence of ``n`` sequences of non-negative integers, or
    * a pair ``(offsets, values)`` of numpy arrays (the fast path): ``offsets``
      has ``n + 1`` non-decreasing entries starting at 0 and ``values`` holds
      the concatenated hashes (converted to uint64), or
    * an Arrow list array of ``n`` lists.

    The request-level signals (``stop_reason`` strings, ``think_time_s`` and ``api_time_s``
    in seconds, ``agent`` = 0 for a session's own requests and k >= 1 for its k-th sub-agent)
    default to all-null (unknown); ``None`` or NaN entries are nulls.

    The table is not validated here; call :func:`validate_table`.
    """
    arrival = np.asarray(arrival_s, dtype=np.float64)
    if arrival.ndim != 1:
        raise ValueError("arrival_s must be one-dimensional")
    n = len(arrival)

    def _ints(name: str, values: Any, dtype: Any) -> np.ndarray:
        arr = np.asarray(values)
        if arr.shape != (n,):
            raise ValueError(f"{name} has shape {arr.shape}, expected ({n},)")
        if arr.dtype.kind == "f":
            if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
                raise ValueError(f"{name} must hold integers")
        info = np.iinfo(dtype)
        if arr.size and (arr.min() < info.min or arr.max() > info.max):
            raise ValueError(f"{name} out of range for {np.dtype(dtype).name}")
        return arr.astype(dtype, copy=False)

    def _nullable_ints(name: str, values: Any, arrow_type: pa.DataType) -> pa.Array:
        if values is None:
            return pa.nulls(n, type=arrow_type)
        if isinstance(values, (pa.Array, pa.ChunkedArray)):
            arr = values.cast(arrow_type)
            if isinstance(arr, pa.ChunkedArray):
                arr = arr.combine_chunks()
        elif isinstance(values, np.ndarray) and values.dtype.kind in "iu":
            # np.dtype("int64"), not arrow_type.to_pandas_dtype(): pyarrow imports pandas for that,
            # which a plain install (mlflow-skinny) does not bring (decision 125)
            arr = pa.array(_ints(name, values, np.dtype(str(arrow_type))), type=arrow_type)
        else:
            arr = pa.array(list(values), type=arrow_type)
        if len(arr) != n:
            raise ValueError(f"{name} has length {len(arr)}, expected {n}")
        return arr

    in_tok = _ints("input_tokens", input_tokens, np.int32)
    out_tok = _ints("output_tokens", output_tokens, np.int32)
    if request_id is None:
        req = np.arange(n, dtype=np.int64)
    else:
        req = _ints("request_id", request_id, np.int64)

    if category is None:
        cat = pa.DictionaryArray.from_arrays(
            pa.nulls(n, type=pa.int32()), pa.array([], type=pa.string())
        )
    else:
        if isinstance(category, str):
            cat = pa.DictionaryArray.from_arrays(
                pa.array(np.zeros(n, dtype=np.int32)), pa.array([category], type=pa.string())
            )
        else:
            plain = pa.array(category if isinstance(category, (pa.Array, pa.ChunkedArray)) else list(category))
            if isinstance(plain, pa.ChunkedArray):
                plain = plain.combine_chunks()
            if pa.types.is_dictionary(plain.type):
                plain = plain.dictionary_decode()
            plain = plain.cast(pa.string())
            cat = plain.dictionary_encode()
            if len(cat) != n:
                raise ValueError(f"category has length {len(cat)}, expected {n}")
        cat = cat.cast(TRACE_SCHEMA.field("category").type)

    hashes = _list_array(block_hashes, n)

    columns = [
        pa.array(arrival, type=pa.float64()),
        pa.array(req, type=pa.int64()),
        _nullable_ints("session_id", session_id, pa.int64()),
        cat,
        _nullable_ints("turn", turn, pa.int32()),
        pa.array(in_tok, type=pa.int32()),
        pa.array(out_tok, type=pa.int32()),
        hashes,
    ]
    columns += [
        _strings("stop_reason", stop_reason, n),
        _nullable_floats("think_time_s", think_time_s, n),
        _nullable_floats("api_time_s", api_time_s, n),
        _nullable_ints("agent", agent, pa.int32()),
    ]
    bt = int(block_tokens)
    if bt <= 0:
        raise ValueError(f"block_tokens must be positive, got {bt}")
    metadata = {BLOCK_TOKENS_KEY: str(bt).encode(), SOURCE_KEY: str(source).encode()}
    schema = CANONICAL_SCHEMA.with_metadata(metadata)
    return pa.Table.from_arrays(columns, schema=schema)


def _strings(name: str, values: Any, n: int) -> pa.Array:
    """A nullable dictionary<int32, string> column."""
    target = SIGNAL_FIELDS.field(name).type
    if values is None:
        return pa.DictionaryArray.from_arrays(pa.nulls(n, type=pa.int32()), pa.array([], type=pa.string()))
    plain = values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(list(values), type=pa.string())
    if isinstance(plain, pa.ChunkedArray):
        plain = plain.combine_chunks()
    if pa.types.is_dictionary(plain.type):
        plain = plain.dictionary_decode()
    if len(plain) != n:
        raise ValueError(f"{name} has length {len(plain)}, expected {n}")
    return plain.cast(pa.string()).dictionary_encode().cast(target)


def _nullable_floats(name: str, values: Any, n: int) -> pa.Array:
    if values is None:
        return pa.nulls(n, type=pa.float64())
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        arr = values.cast(pa.float64())
        return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    a = np.asarray([np.nan if v is None else v for v in values] if not isinstance(values, np.ndarray) else values,
                   dtype=np.float64)
    if a.shape != (n,):
        raise ValueError(f"{name} has shape {a.shape}, expected ({n},)")
    return pa.array(a, type=pa.float64(), mask=np.isnan(a))


def _list_array(block_hashes: Any, n: int) -> pa.Array:
    target = TRACE_SCHEMA.field("block_hashes").type
    if isinstance(block_hashes, (pa.Array, pa.ChunkedArray)):
        arr = block_hashes
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        arr = arr.cast(target)
    elif (
        isinstance(block_hashes, tuple)
        and len(block_hashes) == 2
        and all(isinstance(x, np.ndarray) for x in block_hashes)
    ):
        offsets, values = block_hashes
        offsets = np.asarray(offsets)
        if offsets.shape != (n + 1,):
            raise ValueError(f"block_hashes offsets have shape {offsets.shape}, expected ({n + 1},)")
        if n and (offsets[0] != 0 or offsets[-1] != len(values) or np.any(np.diff(offsets) < 0)):
            raise ValueError("block_hashes offsets must start at 0, be non-decreasing and end at len(values)")
        if offsets[-1] > _INT32_MAX:
            raise ValueError("more than 2^31-1 block hashes in one table")
        values = np.asarray(values)
        if values.dtype.kind == "i" and values.size and values.min() < 0:
            raise ValueError("block hashes must be non-negative")
        arr = pa.ListArray.from_arrays(
            pa.array(offsets.astype(np.int32, copy=False)),
            pa.array(values.astype(np.uint64, copy=False), type=pa.uint64()),
            type=target,
        )
    else:
        seqs = list(block_hashes)
        counts = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
        offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        if len(seqs) and any(isinstance(s, np.ndarray) for s in seqs):
            values = (
                np.concatenate([np.asarray(s, dtype=np.uint64) for s in seqs])
                if offsets[-1]
                else np.zeros(0, dtype=np.uint64)
            )
        else:
            values = np.fromiter(chain.from_iterable(seqs), dtype=np.uint64, count=int(offsets[-1]))
        if len(seqs) != n:
            raise ValueError(f"block_hashes has length {len(seqs)}, expected {n}")
        return _list_array((offsets, values), n)
    if len(arr) != n:
        raise ValueError(f"block_hashes has length {len(arr)}, expected {n}")
    return arr


# --------------------------------------------------------------------------- #
# metadata


def block_tokens(table: pa.Table) -> int:
    """Tokens per trace block, from the table's schema metadata."""
    meta = table.schema.metadata or {}
    if BLOCK_TOKENS_KEY not in meta:
        raise KeyError("trace table has no 'block_tokens' metadata")
    return int(meta[BLOCK_TOKENS_KEY].decode())


def source(table: pa.Table) -> str:
    """The trace's source as recorded in the schema metadata ('' when absent)."""
    meta = table.schema.metadata or {}
    return meta.get(SOURCE_KEY, b"").decode()


# --------------------------------------------------------------------------- #
# validation


def _type_ok(name: str, actual: pa.DataType) -> bool:
    expected = TRACE_SCHEMA.field(name).type
    if name == "category":
        # any integer index width, string values (the canonical form is int32)
        return pa.types.is_dictionary(actual) and actual.value_type == pa.string()
    if name == "block_hashes":
        # the list's child field name is not significant (Parquet calls it 'element')
        return pa.types.is_list(actual) and actual.value_type == pa.uint64()
    return actual == expected


def _flat(column: pa.ChunkedArray) -> pa.Array:
    if column.num_chunks == 1:
        return column.chunk(0)
    return column.combine_chunks()


def _np(column: pa.ChunkedArray) -> np.ndarray:
    return _flat(column).to_numpy(zero_copy_only=False)


def validate_table(table: pa.Table, path: str | object = "<table>", *,
                   max_arrival_s: float | None = MAX_ARRIVAL_S) -> None:
    """Check that ``table`` is a well-formed canonical trace; raise TraceError if not.

    ``path`` is only used in the error message. Row numbers in errors are
    1-based (row 1 is the first request). Checks: every canonical column is
    present with its type; no nulls in non-nullable columns; ``block_tokens``
    metadata is a positive integer; ``arrival_s`` finite, ``>= 0`` and
    non-decreasing and at most ``max_arrival_s``; ``request_id`` unique; token
    counts ``>= 0``; ``turn >= 1`` where given; no null hash; at least
    ``floor(input_tokens / block_tokens)`` and at most
    ``ceil(input_tokens / block_tokens)`` hashes per request (a hash names a
    block of at least one token); ``block_tokens`` at most 2^31 - 1.
    """
    path = str(path)
    names = set(table.column_names)
    for field in TRACE_SCHEMA:
        if field.name not in names:
            raise TraceError(path, "missing column", field=field.name)
        actual = table.schema.field(field.name).type
        if not _type_ok(field.name, actual):
            raise TraceError(path, f"wrong type {actual}, expected {field.type}", field=field.name)
        if not field.nullable:
            col = table.column(field.name)
            if col.null_count:
                row = int(np.flatnonzero(_np(col.is_null()))[0])
                raise TraceError(path, "null value in a non-nullable column", line=row + 1, field=field.name)

    for field in SIGNAL_FIELDS:
        if field.name in names:
            actual = table.schema.field(field.name).type
            ok = (pa.types.is_dictionary(actual) and actual.value_type == pa.string()) \
                if field.name == "stop_reason" else (actual == field.type or
                                                      (field.name == "agent" and pa.types.is_integer(actual)))
            if not ok:
                raise TraceError(path, f"wrong type {actual}, expected {field.type}", field=field.name)

    meta = table.schema.metadata or {}
    if BLOCK_TOKENS_KEY not in meta:
        raise TraceError(path, "schema metadata has no 'block_tokens'", field="block_tokens")
    try:
        bt = int(meta[BLOCK_TOKENS_KEY].decode())
    except ValueError:
        bt = 0
    if bt > _INT32_MAX:
        raise TraceError(path, f"schema metadata 'block_tokens' is too large ({bt} > {_INT32_MAX})",
                         field="block_tokens")
    if bt <= 0:
        raise TraceError(
            path, f"schema metadata 'block_tokens' must be a positive integer, got {meta[BLOCK_TOKENS_KEY]!r}",
            field="block_tokens",
        )

    if table.num_rows == 0:
        return

    def fail(mask: np.ndarray, field: str, what: str) -> None:
        bad = np.flatnonzero(mask)
        if bad.size:
            row = int(bad[0])
            raise TraceError(path, f"{what} (row {row + 1}; {bad.size} bad rows)", line=row + 1, field=field)

    arrival = _np(table.column("arrival_s"))
    fail(~np.isfinite(arrival), "arrival_s", "not a finite number")
    fail(arrival < 0, "arrival_s", "negative arrival time")
    if max_arrival_s is not None:
        fail(arrival > max_arrival_s, "arrival_s", f"arrival time beyond {max_arrival_s:g} s")
    decreasing = np.zeros(len(arrival), dtype=bool)
    decreasing[1:] = arrival[1:] < arrival[:-1]
    fail(decreasing, "arrival_s", "arrival time decreases (must be non-decreasing)")

    req = _np(table.column("request_id"))
    order = np.argsort(req, kind="stable")
    dup_sorted = np.zeros(len(req), dtype=bool)
    dup_sorted[1:] = req[order[1:]] == req[order[:-1]]
    if dup_sorted.any():
        dup_rows = np.sort(order[dup_sorted])
        row = int(dup_rows[0])
        raise TraceError(path, f"duplicate request_id {int(req[row])} (row {row + 1})", line=row + 1, field="request_id")

    in_tok = _np(table.column("input_tokens"))
    out_tok = _np(table.column("output_tokens"))
    fail(in_tok < 0, "input_tokens", "negative token count")
    fail(out_tok < 0, "output_tokens", "negative token count")

    turn = table.column("turn")
    if turn.null_count < len(turn):
        t = _flat(turn).fill_null(1).to_numpy()
        fail(t < 1, "turn", "turn must be >= 1")

    for name in ("think_time_s", "api_time_s"):
        if name in names:
            v = _flat(table.column(name)).fill_null(0.0).to_numpy(zero_copy_only=False)
            fail(~np.isfinite(v), name, "not a finite number of seconds")
            fail(v < 0, name, "negative time")
    if "agent" in names:
        v = _flat(table.column("agent")).fill_null(0).to_numpy(zero_copy_only=False)
        fail(v < 0, "agent", "agent must be >= 0 (0 = the session's own requests)")

    hashes = _flat(table.column("block_hashes"))
    flat_hashes = hashes.flatten()
    if flat_hashes.null_count:
        parents = pc.list_parent_indices(hashes).to_numpy()
        nulls = flat_hashes.is_null().to_numpy(zero_copy_only=False)
        row = int(parents[np.flatnonzero(nulls)[0]])
        raise TraceError(path, f"null hash (row {row + 1})", line=row + 1, field="block_hashes")
    counts = pc.list_value_length(hashes).to_numpy(zero_copy_only=False)
    fail(
        counts < in_tok // bt,
        "block_hashes",
        f"fewer hashes than full blocks (floor(input_tokens / {bt}))",
    )
    fail(
        counts > (in_tok.astype(np.int64) + (bt - 1)) // bt,
        "block_hashes",
        f"more hashes than the prompt has blocks (ceil(input_tokens / {bt}))",
    )


def conform_table(table: pa.Table) -> pa.Table:
    """Cast a table that passed :func:`validate_table` to the exact canonical types.

    Canonical columns come first, in schema order, then the request-level signals
    (:data:`SIGNAL_FIELDS`, all-null where the table has none), followed by any extra
    columns; the schema metadata is kept.
    """
    columns = []
    fields = []
    for field in TRACE_SCHEMA:
        col = table.column(field.name)
        if col.type != field.type:
            col = col.cast(field.type)
        columns.append(col)
        fields.append(field)
    n = table.num_rows
    for field in SIGNAL_FIELDS:
        if field.name in table.column_names:
            col = table.column(field.name)
            if col.type != field.type:
                col = col.cast(field.type)
        elif field.name == "stop_reason":
            col = _strings(field.name, None, n)
        else:
            col = pa.nulls(n, type=field.type)
        columns.append(col)
        fields.append(field)
    for name in table.column_names:
        if TRACE_SCHEMA.get_field_index(name) < 0 and SIGNAL_FIELDS.get_field_index(name) < 0:
            columns.append(table.column(name))
            fields.append(table.schema.field(name))
    schema = pa.schema(fields, metadata=table.schema.metadata)
    return pa.Table.from_arrays(columns, schema=schema)


# --------------------------------------------------------------------------- #
# statistics used by the default-trace script and the tests


def reuse_counts(values: np.ndarray, request_of_ref: np.ndarray) -> tuple[int, int]:
    """``(unique ids, reused references)`` of a reference stream.

    ``values[i]`` is the id referenced by reference ``i`` and
    ``request_of_ref[i]`` its request, non-decreasing (references in replay
    order). A reference is *reused* when an earlier request referenced the
    same id; a repeat inside one request is not a reuse.

    Linear time: Arrow's hash-based dictionary encoding numbers the ids in
    order of first appearance, so a reference is a first appearance exactly
    where the running maximum of the codes grows.
    """
    if values.size == 0:
        return 0, 0
    codes = pc.dictionary_encode(pa.array(values)).indices.to_numpy(zero_copy_only=False)
    runmax = np.maximum.accumulate(codes)
    first = np.empty(codes.size, dtype=bool)
    first[0] = True
    np.greater(runmax[1:], runmax[:-1], out=first[1:])
    del runmax
    first_req = request_of_ref[first]  # indexed by code
    return int(first_req.size), int(np.count_nonzero(request_of_ref > first_req[codes]))


def trace_stats(table: pa.Table) -> dict[str, Any]:
    """Basic trace statistics as ``../shared/traces/README.md`` defines them.

    ``reuse_fraction`` is the share of block references whose hash was
    referenced by an *earlier* request (replay order = row order): the hit
    ratio of an infinite, never-evicting block cache.
    """
    n = table.num_rows
    hashes = _flat(table.column("block_hashes"))
    values = hashes.flatten().to_numpy(zero_copy_only=False)
    counts = pc.list_value_length(hashes).to_numpy(zero_copy_only=False).astype(np.int64)
    request_of_ref = np.repeat(np.arange(n, dtype=np.int64), counts)
    unique_blocks, reused = reuse_counts(values, request_of_ref)
    reuse = reused / values.size if values.size else 0.0
    arrival = _np(table.column("arrival_s")) if n else np.zeros(0)
    in_tok = _np(table.column("input_tokens")) if n else np.zeros(0)
    sessions = table.column("session_id")
    return {
        "requests": n,
        "sessions": int(pc.count_distinct(sessions, mode="only_valid").as_py()) if n else 0,
        "span_s": float(arrival[-1] - arrival[0]) if n else 0.0,
        "block_tokens": block_tokens(table),
        "block_references": int(values.size),
        "unique_blocks": unique_blocks,
        "reuse_fraction": reuse,
        "input_tokens_p50": float(np.median(in_tok)) if n else 0.0,
        "input_tokens_mean": float(np.mean(in_tok)) if n else 0.0,
        "output_tokens_mean": float(np.mean(_np(table.column("output_tokens")))) if n else 0.0,
    }

