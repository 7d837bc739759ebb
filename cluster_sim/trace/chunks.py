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
    flat: np.ndarray             # int64 chunk ids
    parent: np.ndarray           # int64, per chunk
    depth: np.ndarray            # int64, per chunk
    anchor: np.ndarray           # int64, per chunk
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

    def subset(self, idx: np.ndarray) -> "ChunkedTrace":
        """The requests ``idx`` (in that order) over the same chunk id space."""
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
        # anchors must point into the new flat: recompute from the subset's own first appearances
        anchor = np.full(self.n_chunks, -1, dtype=np.int64)
        pos = np.arange(len(flat), dtype=np.int64)
        req = np.repeat(np.arange(len(idx), dtype=np.int64), lens)
        k = pos - offs[:-1][req] if len(flat) else pos
        first = np.full(self.n_chunks, len(flat), dtype=np.int64)
        np.minimum.at(first, flat, pos)
        seen = first < len(flat)
        anchor[seen] = first[seen] - k[first[seen]]
        return ChunkedTrace(
            chunk_tokens=self.chunk_tokens, block_tokens=self.block_tokens, source=self.source,
            arrival_s=self.arrival_s[idx], request_id=self.request_id[idx], session_id=self.session_id[idx],
            category=None if self.category is None else [self.category[i] for i in idx],
            turn=self.turn[idx], input_tokens=self.input_tokens[idx], output_tokens=self.output_tokens[idx],
            offsets=offs, flat=flat, parent=self.parent, depth=self.depth, anchor=anchor,
            chunk_hash=self.chunk_hash, counted=self.counted[idx], stop_reason=self.stop_reason[idx],
            think_time_s=self.think_time_s[idx], api_time_s=self.api_time_s[idx], agent=self.agent[idx],
        )


def chunk_trace(table: pa.Table, chunk_tokens: int, *, warmup_s: float = 0.0, source_path: str = "") -> ChunkedTrace:
    """Cut ``table`` (canonical schema, already filtered and time-scaled) into chunks."""
    from .schema import block_tokens as _bt, source as _src, stop_reason_codes

    bt = _bt(table)
    if chunk_tokens % bt:
        raise ConfigError("cache.chunk_tokens",
                          f"{chunk_tokens} is not a whole multiple of the trace's block size ({bt} tokens)")
    g = chunk_tokens // bt
    n = table.num_rows
    inp = np.asarray(table.column("input_tokens").to_numpy(zero_copy_only=False), dtype=np.int64)
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
