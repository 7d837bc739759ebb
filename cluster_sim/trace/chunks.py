"""From a canonical trace table to the simulator's chunk stream.

Block hashes are cut into chunks of ``chunk_tokens`` (a whole multiple of the
trace's ``block_tokens``); a chunk is named by the hash of its last block, so
it names the whole prefix. Chunk hashes are interned to dense integer ids in
order of first appearance, and the prefix tree is stored as a ``parent``
array. Everything is vectorised: no per-chunk Python.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..errors import ConfigError, TraceError


def resolve_chunk_tokens(chunk_tokens, block_tokens: int) -> int:
    """``auto`` = the smallest multiple of block_tokens that is >= 256 (simulation-model §2)."""
    if chunk_tokens == "auto":
        return block_tokens * max(1, -(-256 // block_tokens))
    ct = int(chunk_tokens)
    if ct % block_tokens != 0:
        raise ConfigError("cache.chunk_tokens",
                          f"{ct} is not a whole multiple of the trace's block size ({block_tokens} tokens)")
    return ct


@dataclass
class ChunkedTrace:
    """The request stream as the simulator consumes it (one entry per request).

    ``flat[offsets[i]:offsets[i+1]]`` are the interned chunk ids ``c_1..c_m`` of
    request ``i``. ``parent[c]`` is ``-1`` for a first chunk; ``depth[c]`` is the
    1-based position; ``anchor[c]`` is an offset into ``flat`` where ``c``'s
    ancestors stand: ``flat[anchor[c] : anchor[c] + depth[c] - 1]``.
    """

    chunk_tokens: int
    block_tokens: int
    source: str
    arrival_s: np.ndarray        # float64, after time_scale
    request_id: np.ndarray       # int64
    session_id: np.ndarray       # int64, -1 where the trace has none
    category: list | None        # per-request strings or None
    turn: np.ndarray             # int32, 0 where unknown
    input_tokens: np.ndarray     # int64
    output_tokens: np.ndarray    # int64
    offsets: np.ndarray          # int64, len n+1
    flat: np.ndarray             # chunk ids, id_dtype(chunk_refs): int32 unless the trace is huge
    parent: np.ndarray           # id dtype, per chunk (exact length, as the next three)
    depth: np.ndarray            # id dtype, per chunk
    anchor: np.ndarray           # id dtype, per chunk
    chunk_hash: np.ndarray       # uint64, per chunk (the trace's hash of the chunk's last block)
    counted: np.ndarray          # bool, per request: counted in metrics (after warm-up)
    # request-level signals (simulation-model §1), per request; unknown where the trace has none
    stop_reason: np.ndarray | None = None    # int8 codes into schema.STOP_REASONS (0 = unknown)
    think_time_s: np.ndarray | None = None   # float64, NaN = unknown
    api_time_s: np.ndarray | None = None     # float64, NaN = unknown
    agent: np.ndarray | None = None          # int32: 0 = the session's own, k >= 1 its k-th sub-agent, -1 unknown

    def __post_init__(self):
        n = len(self.arrival_s)
        if self.stop_reason is None:
            self.stop_reason = np.zeros(n, dtype=np.int8)
        if self.think_time_s is None:
            self.think_time_s = np.full(n, np.nan)
        if self.api_time_s is None:
            self.api_time_s = np.full(n, np.nan)
        if self.agent is None:
            self.agent = np.full(n, -1, dtype=np.int32)

    @property
    def n_requests(self) -> int:
        return len(self.arrival_s)

    @property
    def n_chunks(self) -> int:
        return len(self.parent)

    @property
    def chunk_refs(self) -> int:
        return int(self.offsets[-1])

    def path(self, i: int) -> np.ndarray:
        return self.flat[self.offsets[i]:self.offsets[i + 1]]

    def stream(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(offsets, flat)`` of the requests ``idx`` (in that order), over the same chunk ids."""
        idx = np.asarray(idx, dtype=np.int64)
        lens = (self.offsets[1:] - self.offsets[:-1])[idx]
        offs = np.zeros(len(idx) + 1, dtype=np.int64)
        np.cumsum(lens, out=offs[1:])
        if len(idx):
            starts = self.offsets[idx]
            gather = np.repeat(starts - offs[:-1], lens) + np.arange(offs[-1], dtype=np.int64)
            flat = self.flat[gather]
        else:
            flat = self.flat[:0]
        return offs, flat

    def subset(self, idx: np.ndarray) -> "ChunkedTrace":
        """The requests ``idx`` (in that order) over the same chunk id space."""
        idx = np.asarray(idx, dtype=np.int64)
        offs, flat = self.stream(idx)
        anchor = _anchors(offs, flat, self.n_chunks, self.anchor.dtype)
        return self._requests(idx, offs, flat, self.parent, self.depth, anchor, self.chunk_hash)

    def localize(self, idx: np.ndarray) -> tuple["ChunkedTrace", np.ndarray]:
        """The requests ``idx`` (in that order) over their own chunks only, and each local chunk's
        id in this trace (``gids``, ascending). Local ids keep the order of the trace's ids, so
        every comparison of two ids, and every table sized by the chunks, reads the same: a node
        that replays its share on the local trace gives the results it gives on the whole one,
        with chunk tables sized to its own chunks rather than the fleet's (decision 146). Every
        chunk's parent is in the share (a request names its whole prefix)."""
        idx = np.asarray(idx, dtype=np.int64)
        offs, flat = self.stream(idx)
        seen = np.zeros(self.n_chunks, dtype=bool)
        seen[flat] = True
        gids = np.flatnonzero(seen)
        dt = self.flat.dtype
        local = np.cumsum(seen, dtype=np.int64) - 1            # global id -> local id (where seen)
        del seen
        par = self.parent[gids]
        lpar = np.where(par >= 0, local[np.maximum(par, 0)], -1).astype(self.parent.dtype)
        lflat = local[flat].astype(dt)
        del local
        anchor = _anchors(offs, lflat, len(gids), self.anchor.dtype)
        return self._requests(idx, offs, lflat, lpar, self.depth[gids], anchor, self.chunk_hash[gids]), gids

    def _requests(self, idx, offs, flat, parent, depth, anchor, chunk_hash) -> "ChunkedTrace":
        """The requests ``idx`` with the given stream and chunk table."""
        return ChunkedTrace(
            chunk_tokens=self.chunk_tokens, block_tokens=self.block_tokens, source=self.source,
            arrival_s=self.arrival_s[idx], request_id=self.request_id[idx], session_id=self.session_id[idx],
            category=None if self.category is None else [self.category[i] for i in idx],
            turn=self.turn[idx], input_tokens=self.input_tokens[idx], output_tokens=self.output_tokens[idx],
            offsets=offs, flat=flat, parent=parent, depth=depth, anchor=anchor,
            chunk_hash=chunk_hash, counted=self.counted[idx], stop_reason=self.stop_reason[idx],
            think_time_s=self.think_time_s[idx], api_time_s=self.api_time_s[idx], agent=self.agent[idx],
        )


def _anchors(offs: np.ndarray, flat: np.ndarray, n_chunks: int, dtype) -> np.ndarray:
    """``anchor`` of a stream (``ChunkedTrace``): where each chunk's ancestors stand in ``flat``,
    from its first appearance; -1 for a chunk the stream never names."""
    lens = np.diff(offs)
    anchor = np.full(n_chunks, -1, dtype=dtype)
    pos = np.arange(len(flat), dtype=np.int64)
    req = np.repeat(np.arange(len(lens), dtype=np.int64), lens)
    k = pos - offs[:-1][req] if len(flat) else pos
    first = np.full(n_chunks, len(flat), dtype=np.int64)
    np.minimum.at(first, flat, pos)
    seen = first < len(flat)
    anchor[seen] = first[seen] - k[first[seen]]
    return anchor


def _grouping(table: pa.Table, chunk_tokens: int) -> tuple[int, int, np.ndarray]:
    """(block tokens, blocks per chunk, every request's input tokens) of ``table``; one line
    naming ``cache.chunk_tokens`` when a chunk is not a whole number of the trace's blocks."""
    from .schema import block_tokens

    bt = block_tokens(table)
    if chunk_tokens % bt:
        raise ConfigError("cache.chunk_tokens",
                          f"{chunk_tokens} is not a whole multiple of the trace's block size ({bt} tokens)")
    inp = np.asarray(table.column("input_tokens").to_numpy(zero_copy_only=False), dtype=np.int64)
    return bt, chunk_tokens // bt, inp


def _chunk_trace_whole(table: pa.Table, chunk_tokens: int, *, warmup_s: float = 0.0,
                       source_path: str = "") -> ChunkedTrace:
    """The whole-table cut (every chunk reference at once, int64 ids): the reference that
    :func:`chunk_trace` must equal, and the one that words its error for a trace whose hashes
    follow two prefixes (so the message and its row are those it always gave)."""
    from .schema import source as _src, stop_reason_codes

    bt, g, inp = _grouping(table, chunk_tokens)
    n = table.num_rows
    lists = table.column("block_hashes").combine_chunks()
    boff = np.asarray(lists.offsets.to_numpy(), dtype=np.int64)
    if lists.offset:
        boff = boff  # offsets are absolute into values() below
    values = np.asarray(lists.values.to_numpy(zero_copy_only=False), dtype=np.uint64) if len(lists.values) else np.zeros(0, np.uint64)
    nblocks = boff[1:] - boff[:-1]
    m = inp // chunk_tokens
    if np.any(m * g > nblocks):
        bad = int(np.flatnonzero(m * g > nblocks)[0])
        raise TraceError(source_path or _src(table), f"request has {int(nblocks[bad])} block hashes but "
                         f"{int(inp[bad])} input tokens need {int(m[bad] * g)} full blocks", line=bad + 1,
                         field="block_hashes")
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(m, out=offsets[1:])
    total = int(offsets[-1])
    req = np.repeat(np.arange(n, dtype=np.int64), m)
    k = np.arange(total, dtype=np.int64) - offsets[:-1][req]
    hashes = values[boff[:-1][req] + (k + 1) * g - 1] if total else np.zeros(0, np.uint64)
    # intern in order of first appearance
    if total:
        uniq, first_idx, inv = np.unique(hashes, return_index=True, return_inverse=True)
        order = np.argsort(first_idx, kind="stable")
        rank = np.empty(len(uniq), dtype=np.int64)
        rank[order] = np.arange(len(uniq), dtype=np.int64)
        flat = rank[inv.reshape(-1)]
        chunk_hash = uniq[order]
        first_pos = first_idx[order]
    else:
        flat = np.zeros(0, np.int64)
        chunk_hash = np.zeros(0, np.uint64)
        first_pos = np.zeros(0, np.int64)
    U = len(chunk_hash)
    par_of_ref = np.where(k > 0, np.roll(flat, 1), -1) if total else flat
    parent = np.full(U, -1, dtype=np.int64)
    parent[flat] = par_of_ref
    if total and not np.array_equal(parent[flat], par_of_ref):
        bad_ref = int(np.flatnonzero(parent[flat] != par_of_ref)[0])
        raise TraceError(source_path or _src(table),
                         f"block hash {int(hashes[bad_ref])} follows two different prefixes: the trace's hashes "
                         "are not prefix-chained (workload.rechain=auto chains them)", line=int(req[bad_ref]) + 1, field="block_hashes")
    depth = np.zeros(U, dtype=np.int64)
    depth[flat] = k + 1
    anchor = first_pos - k[first_pos] if total else first_pos
    arrival = np.asarray(table.column("arrival_s").to_numpy(zero_copy_only=False), dtype=np.float64)

    def col(name, dtype, fill):
        if name not in table.column_names:
            return np.full(n, fill, dtype=dtype)
        c = table.column(name)
        return np.asarray(c.fill_null(fill).to_numpy(zero_copy_only=False), dtype=dtype)

    cat = None
    if "category" in table.column_names and table.column("category").null_count < n:
        cat = table.column("category").cast(pa.string()).to_pylist()
    stop = None
    if "stop_reason" in table.column_names and table.column("stop_reason").null_count < n:
        stop = stop_reason_codes(table.column("stop_reason"))
    return ChunkedTrace(
        chunk_tokens=chunk_tokens, block_tokens=bt, source=_src(table),
        arrival_s=arrival, request_id=col("request_id", np.int64, 0), session_id=col("session_id", np.int64, -1),
        category=cat, turn=col("turn", np.int32, 0), input_tokens=inp, output_tokens=col("output_tokens", np.int64, 0),
        offsets=offsets, flat=flat, parent=parent, depth=depth, anchor=anchor, chunk_hash=chunk_hash,
        counted=arrival >= warmup_s, stop_reason=stop, think_time_s=col("think_time_s", np.float64, np.nan),
        api_time_s=col("api_time_s", np.float64, np.nan), agent=col("agent", np.int32, -1),
    )


# ---------------------------------------------------------------------------- bounded-memory cut
#: chunk references cut and interned per batch: the working memory of :func:`chunk_trace` is a
#: few tens of bytes per reference of one batch, beside the result (docs/decisions.md #73)
BATCH_REFS = 1 << 20
#: at most this many batches: the interning table is merged once per batch (O(chunks) each)
MAX_BATCHES = 32


def id_dtype(chunk_refs: int) -> np.dtype:
    """The dtype of chunk ids and of offsets into ``flat`` for a trace of ``chunk_refs`` references.

    int32 while the node's payload handles (``2 c + 1``, :mod:`cluster_sim.cache.state`) of every
    possible chunk fit in int32 (there are never more chunks than references), else int64."""
    return np.dtype(np.int32) if 2 * int(chunk_refs) + 1 <= np.iinfo(np.int32).max else np.dtype(np.int64)


class _Grow:
    """An array that grows by doubling; :meth:`final` gives it at its exact length."""

    def __init__(self, dtype, cap: int = 1 << 16):
        self.a = np.empty(cap, dtype=dtype)
        self.n = 0

    def extend(self, v: np.ndarray) -> None:
        need = self.n + len(v)
        if need > len(self.a):
            bigger = np.empty(max(need, 2 * len(self.a)), dtype=self.a.dtype)
            bigger[:self.n] = self.a[:self.n]
            self.a = bigger
        self.a[self.n:need] = v
        self.n = need

    def final(self) -> np.ndarray:
        out = self.a[:self.n].copy() if self.n != len(self.a) else self.a
        self.a = None
        return out


class _Interner:
    """Dense ids for uint64 hashes in order of first appearance, fed batch by batch.

    Holds the hashes seen so far sorted (``keys``) with their ids (``ids``): 12 bytes per
    chunk with int32 ids."""

    def __init__(self, idt: np.dtype):
        self.idt = idt
        self.keys = np.zeros(0, np.uint64)
        self.ids = np.zeros(0, idt)
        self.n = 0

    def intern(self, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ids of ``hashes``, the new hashes in id order, their first index in ``hashes``)."""
        uniq, first_idx, inv = np.unique(hashes, return_index=True, return_inverse=True)
        pos = np.searchsorted(self.keys, uniq)
        found = np.zeros(len(uniq), dtype=bool)
        inside = pos < len(self.keys)
        found[inside] = self.keys[pos[inside]] == uniq[inside]
        uid = np.empty(len(uniq), dtype=self.idt)
        uid[found] = self.ids[pos[found]]
        new = np.flatnonzero(~found)
        order = new[np.argsort(first_idx[new], kind="stable")]   # new hashes by first appearance
        uid[order] = np.arange(self.n, self.n + len(order), dtype=self.idt)
        self.n += len(order)
        if len(new):   # uniq is sorted, so its new hashes go in at sorted positions
            self.keys = np.insert(self.keys, pos[new], uniq[new])
            self.ids = np.insert(self.ids, pos[new], uid[new])
        return uid[inv.reshape(-1)], uniq[order], first_idx[order]


def _batches(offsets: np.ndarray, per_batch: int) -> list[tuple[int, int]]:
    """Request ranges ``[i0, i1)`` of about ``per_batch`` references each (at least one request)."""
    n = len(offsets) - 1
    out = []
    i0 = 0
    while i0 < n:
        i1 = int(np.searchsorted(offsets, offsets[i0] + per_batch, side="right")) - 1
        i1 = min(max(i1, i0 + 1), n)
        out.append((i0, i1))
        i0 = i1
    return out


def _category(table: pa.Table, n: int) -> list | None:
    """Per-request category strings (None where null), one str object per distinct category."""
    if "category" not in table.column_names or table.column("category").null_count == n:
        return None
    enc = table.column("category").cast(pa.string()).combine_chunks().dictionary_encode()
    names = enc.dictionary.to_pylist()
    codes = enc.indices.fill_null(-1).to_numpy(zero_copy_only=False)
    names.append(None)   # code -1: null
    return [names[c] for c in codes.tolist()]


class _TwoPrefixes(Exception):
    """A chunk hash follows two different prefixes (the caller words the error)."""


def _per_batch(total: int, batch_refs: int | None) -> int:
    return max(1, int(batch_refs)) if batch_refs is not None else max(BATCH_REFS, -(-total // MAX_BATCHES))


def _cut(offsets: np.ndarray, per_batch: int, hashes_of) -> tuple[np.ndarray, ...]:
    """``(flat, parent, depth, anchor, chunk_hash)`` of the requests whose chunk references are
    ``offsets`` (from 0), cut in batches of about ``per_batch`` references.

    ``hashes_of(i0, i1, k, req)`` gives the chunk hashes (uint64) of requests ``[i0, i1)``, whose
    references are at depths ``k`` (0-based) of requests ``i0 + req``; raises :class:`_TwoPrefixes` when a hash follows
    two prefixes."""
    total = int(offsets[-1])
    idt = id_dtype(total)
    flat = np.empty(total, dtype=idt)
    interner = _Interner(idt)
    parent, depth, anchor, chunk_hash = _Grow(idt), _Grow(idt), _Grow(idt), _Grow(np.uint64)
    for i0, i1 in _batches(offsets, per_batch) if total else ():
        r0, r1 = int(offsets[i0]), int(offsets[i1])
        if r1 == r0:
            continue
        mb = offsets[i0 + 1:i1 + 1] - offsets[i0:i1]
        req = np.repeat(np.arange(i1 - i0, dtype=np.int64), mb)
        k = np.arange(r1 - r0, dtype=np.int64) - (offsets[i0:i1] - r0)[req]
        hashes = hashes_of(i0, i1, k, req)
        del req
        ids, new_hashes, new_first = interner.intern(hashes)
        del hashes
        flat[r0:r1] = ids
        par_of_ref = np.roll(ids, 1)
        par_of_ref[k == 0] = -1
        kf = k[new_first]
        parent.extend(par_of_ref[new_first])
        depth.extend(kf + 1)
        anchor.extend(r0 + new_first - kf)
        chunk_hash.extend(new_hashes)
        if not np.array_equal(parent.a[ids], par_of_ref):
            raise _TwoPrefixes()
        del ids, par_of_ref, k, kf
    out = flat, parent.final(), depth.final(), anchor.final(), chunk_hash.final()
    del interner
    _release_freed_heap()
    return out


def _request_columns(table: pa.Table, n: int) -> dict:
    """The per-request fields of a :class:`ChunkedTrace` from the table's columns (all but the
    block hashes, which the table need not hold)."""
    from .schema import stop_reason_codes

    def column(name, dtype, fill):
        if name not in table.column_names:
            return np.full(n, fill, dtype=dtype)
        c = table.column(name)
        return np.asarray(c.fill_null(fill).to_numpy(zero_copy_only=False), dtype=dtype)

    stop = None
    if "stop_reason" in table.column_names and table.column("stop_reason").null_count < n:
        stop = stop_reason_codes(table.column("stop_reason"))
    return dict(
        arrival_s=np.asarray(table.column("arrival_s").to_numpy(zero_copy_only=False), dtype=np.float64),
        request_id=column("request_id", np.int64, 0), session_id=column("session_id", np.int64, -1),
        category=_category(table, n), turn=column("turn", np.int32, 0),
        output_tokens=column("output_tokens", np.int64, 0), stop_reason=stop,
        think_time_s=column("think_time_s", np.float64, np.nan), api_time_s=column("api_time_s", np.float64, np.nan),
        agent=column("agent", np.int32, -1))


def _check_blocks(inp: np.ndarray, nblocks: np.ndarray, m: np.ndarray, g: int, where: str) -> None:
    if np.any(m * g > nblocks):
        bad = int(np.flatnonzero(m * g > nblocks)[0])
        raise TraceError(where, f"request has {int(nblocks[bad])} block hashes but "
                         f"{int(inp[bad])} input tokens need {int(m[bad] * g)} full blocks", line=bad + 1,
                         field="block_hashes")


def chunk_trace(table: pa.Table, chunk_tokens: int, *, warmup_s: float = 0.0, source_path: str = "",
                batch_refs: int | None = None) -> ChunkedTrace:
    """Cut ``table`` (canonical schema, already filtered and time-scaled) into chunks.

    Requests are cut in batches of about ``batch_refs`` chunk references (default
    :data:`BATCH_REFS`, or a 1/:data:`MAX_BATCHES` share of a larger trace), so no array of
    the whole trace's block references is made: the block hashes are read in place from the
    table, and the result's arrays are allocated at their exact length, chunk ids and
    ``anchor`` in :func:`id_dtype`. Chunk ids, parents, depths and anchors equal those of the
    whole-table cut (:func:`_chunk_trace_whole`), batch boundaries included.
    """
    from .schema import source as _src
    import pyarrow.compute as pc

    bt, g, inp = _grouping(table, chunk_tokens)
    n = table.num_rows
    col = table.column("block_hashes")
    nblocks = np.asarray(pc.list_value_length(col).to_numpy(zero_copy_only=False), dtype=np.int64) if n \
        else np.zeros(0, np.int64)
    m = inp // chunk_tokens
    _check_blocks(inp, nblocks, m, g, source_path or _src(table))
    del nblocks
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(m, out=offsets[1:])

    def hashes_of(i0, i1, k, req):
        part = col.slice(i0, i1 - i0)
        lists = part.chunk(0) if part.num_chunks == 1 else part.combine_chunks()   # copies only a boundary batch
        boff = np.asarray(lists.offsets.to_numpy(), dtype=np.int64)   # absolute into lists.values
        values = lists.values.to_numpy(zero_copy_only=False)
        return np.asarray(values[boff[:-1][req] + (k + 1) * g - 1], dtype=np.uint64)

    try:
        flat, parent, depth, anchor, chunk_hash = _cut(offsets, _per_batch(int(offsets[-1]), batch_refs), hashes_of)
    except _TwoPrefixes:
        # a hash follows two prefixes: the whole-table cut words the error as it always has
        _chunk_trace_whole(table, chunk_tokens, warmup_s=warmup_s, source_path=source_path)
        raise AssertionError("chunk_trace: the batched and whole-table cuts disagree") from None  # pragma: no cover
    cols = _request_columns(table, n)
    return ChunkedTrace(
        chunk_tokens=chunk_tokens, block_tokens=bt, source=_src(table), input_tokens=inp,
        offsets=offsets, flat=flat, parent=parent, depth=depth, anchor=anchor, chunk_hash=chunk_hash,
        counted=cols["arrival_s"] >= warmup_s, **cols)


def chunk_requests(table: pa.Table, chunk_tokens: int, nblocks: np.ndarray, hashes_of, *, warmup_s: float = 0.0,
                   batch_refs: int | None = None) -> ChunkedTrace:
    """:func:`chunk_trace` of a table whose block hashes are not in it: ``table`` holds the other
    columns, ``nblocks`` every request's number of block hashes, and ``hashes_of(i0, i1, k, req)``
    gives the chunk hashes of requests ``[i0, i1)``, per reference: request ``i0 + req``'s block
    ``(k + 1) · g - 1`` (``g = chunk_tokens / block_tokens``), requests in order. The
    same result as :func:`chunk_trace` of the whole table (docs/decisions.md #108); raises
    :class:`_TwoPrefixes` where that would raise its error."""
    from .schema import source as _src

    bt, g, inp = _grouping(table, chunk_tokens)
    n = table.num_rows
    m = inp // chunk_tokens
    _check_blocks(inp, np.asarray(nblocks, dtype=np.int64), m, g, _src(table))
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(m, out=offsets[1:])
    flat, parent, depth, anchor, chunk_hash = _cut(offsets, _per_batch(int(offsets[-1]), batch_refs), hashes_of)
    cols = _request_columns(table, n)
    return ChunkedTrace(
        chunk_tokens=chunk_tokens, block_tokens=bt, source=_src(table), input_tokens=inp,
        offsets=offsets, flat=flat, parent=parent, depth=depth, anchor=anchor, chunk_hash=chunk_hash,
        counted=cols["arrival_s"] >= warmup_s, **cols)


def _release_freed_heap() -> None:
    """Give the heap pages freed by the batches back to the OS (glibc ``malloc_trim``; a no-op
    elsewhere). Batch buffers under glibc's mmap threshold (32 MB) live on the heap, and what
    they leave free would otherwise stay resident beside the replay (docs/decisions.md #73)."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        pass


_WIDE: dict[int, tuple] = {}


def wide(a: np.ndarray) -> np.ndarray:
    """``a`` as int64, converted once per array and shared (by every node of a process).

    For compiled kernels typed for int64 ids (:mod:`cluster_sim.policies._gandalf_jit`): an int32
    trace would otherwise compile a second set of specialisations."""
    if a.dtype == np.int64:
        return a
    import weakref

    key = id(a)
    hit = _WIDE.get(key)
    if hit is not None and hit[0]() is a:
        return hit[1]
    out = a.astype(np.int64)
    _WIDE[key] = (weakref.ref(a, lambda _r, key=key: _WIDE.pop(key, None)), out)
    return out
