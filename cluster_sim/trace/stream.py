"""A synthetic workload chunked as it is written out: the block-hash column is never built.

The canonical table of a synthetic workload holds every request's block hashes (about 86 per
request of the default workload, 0.7 GB per million requests), and :func:`cluster_sim.api.prepare`
used to hold that column whole while it checked and chunked it. A request's block hashes are a
prefix of its stream's full blocks plus at most one partial tail (:class:`.synthetic.Plan`), so
everything the run needs can be read from the stream-level hashes (about 1/3.4 of the column):

* **the trace's sha256** (``run.trace_sha256``, decision 74): the table's IPC stream is written
  with a placeholder for the hash values (an anonymous mapping that is never touched, so it
  takes no memory) into a digest that, where the placeholder's bytes come, hashes the real
  values instead, gathered a batch of requests at a time: the same bytes, so the same sha256
  (docs/decisions.md #109);
* **the rechain check** (``workload.rechain=auto``): a hash follows two prefixes exactly when two
  of the (hash, parent) pairs of the stream-level blocks the kept requests reference disagree
  (:func:`.rechain.pairs_chained`, decision #110);
* **the chunks**: a chunk is named by its last block, always a full block, so the chunker reads
  each stream's chunk-boundary hashes (1/g of its full blocks) through
  :func:`.chunks.chunk_requests`, with the same ids as :func:`.chunks.chunk_trace` of the
  whole table (decision #108).

Where the whole table is needed (``workload.rechain=always``, hashes that need chaining, an
empty trace, an IPC layout the digest does not recognise) :func:`prepare_synthetic` returns
None and the caller takes the whole-table path, whose results these equal.
"""
from __future__ import annotations

import hashlib
import mmap

import numpy as np
import pyarrow as pa

__all__ = ["prepare_synthetic", "table_sha256"]

#: block hashes gathered per batch of requests for the digest, and stream blocks per batch for
#: the rechain check and the chunk-boundary hashes (tests force small ones)
BATCH_VALUES = 1 << 22


class _Digest:
    """A write-only file whose bytes go into a sha256 as written: no copy of the table.

    With ``region = (address, nbytes)`` and ``fill``, a buffer the writer passes from inside
    that memory range is not read: ``fill(lo, hi)`` yields the real bytes of offsets ``[lo,
    hi)`` of the region instead (``filled`` counts them)."""

    closed = False

    def __init__(self, region: tuple[int, int] | None = None, fill=None):
        self.h = hashlib.sha256()
        self.region = region
        self.fill = fill
        self.filled = 0

    def write(self, b):
        if isinstance(b, pa.Buffer):
            n = b.size
            if self.region is not None and self.region[0] <= b.address < self.region[0] + self.region[1]:
                lo = b.address - self.region[0]
                if lo + n > self.region[1]:
                    raise _Layout("a buffer crosses the placeholder's end")
                for piece in self.fill(lo, lo + n):
                    self.h.update(piece)
                self.filled += n
                return n
        else:
            n = len(b)
        self.h.update(b)
        return n

    def flush(self):
        pass

    def close(self):
        self.closed = True


class _Layout(Exception):
    """The IPC writer did not pass the placeholder as the digest expects (whole-table path)."""


def table_sha256(table: pa.Table, digest: _Digest | None = None) -> str:
    """sha256 of ``table``'s Arrow IPC stream (``run.trace_sha256`` of a generated trace,
    decision 74), streamed into the hash as written."""
    d = digest or _Digest()
    with pa.ipc.new_stream(pa.PythonFile(d, mode="w"), table.schema) as w:
        w.write_table(table)
    return d.h.hexdigest()


def _placeholder(n: int) -> tuple[np.ndarray, mmap.mmap | None]:
    """A uint64 array of ``n`` entries over an anonymous mapping that nothing reads or writes:
    its pages are never touched, so it costs address space, not memory."""
    if n == 0:
        return np.zeros(0, np.uint64), None
    mm = mmap.mmap(-1, 8 * n)
    return np.frombuffer(mm, dtype=np.uint64), mm


def _streamed_sha(template: pa.Table, placeholder: np.ndarray, values, batch: int) -> str:
    """:func:`table_sha256` of ``template`` with the placeholder's values replaced by the real
    ones: ``values(j0, j1)`` gives those of requests ``[j0, j1)``, whose offsets into the
    values are ``offsets``."""
    offsets = values.__self__.offsets
    counts = np.diff(offsets)

    def fill(lo: int, hi: int):
        if lo % 8 or hi % 8:
            raise _Layout("the placeholder is not written in whole values")
        v0, v1 = lo // 8, hi // 8
        j0 = int(np.searchsorted(offsets, v0, side="left"))
        j1 = int(np.searchsorted(offsets, v1, side="left"))
        if offsets[j0] != v0 or offsets[j1] != v1:
            raise _Layout("the placeholder is not written in whole requests")
        from .synthetic import _cuts

        for a, b in _cuts(counts[j0:j1], batch):
            yield values(j0 + a, j0 + b)

    if not len(placeholder):
        return table_sha256(template)
    d = _Digest((placeholder.ctypes.data, placeholder.nbytes), fill)
    sha = table_sha256(template, d)
    col = template.column("block_hashes")
    expect = 8 * sum(int(c.offsets[-1].as_py()) - int(c.offsets[0].as_py()) for c in col.chunks)
    if d.filled != expect:
        raise _Layout(f"the digest replaced {d.filled} placeholder bytes, expected {expect}")
    return sha


def _stream_blocks(p, kept: int, batch: int):
    """Per stream, the number of its full blocks that the first ``kept`` requests reference."""
    if kept == p.n_requests:
        return p.n_full          # every stream's last turn holds all its full blocks
    extent = np.zeros(len(p.n_full), dtype=np.int64)
    np.maximum.at(extent, p.r_sess[:kept], p.r_full[:kept])
    return extent


def _pairs(p, kept: int, extent: np.ndarray, batch: int):
    """(hash, parent) of every block the first ``kept`` requests reference, in batches (a
    stream's full blocks, then the requests' tails); parent ``2^64 - 1``: starts its request."""
    from .rechain import NO_PARENT
    from .synthetic import _cuts, _ragged_arange

    fh = p.full_hash
    for s0, s1 in _cuts(extent, batch):
        e = extent[s0:s1]
        j = _ragged_arange(e)
        idx = np.repeat(p.full_first[s0:s1], e) + j
        h = fh[idx]
        par = np.empty(len(idx), dtype=np.uint64)
        first = j == 0
        par[first] = NO_PARENT
        par[~first] = fh[idx[~first] - 1]
        del idx, j, first
        yield h, par
    for j0, j1 in _cuts(np.ones(kept, dtype=np.int64), batch):
        rt = p.r_tail[j0:j1]
        w = rt >= 0
        rf = p.r_full[j0:j1][w]
        ff = p.full_first[p.r_sess[j0:j1][w]]
        par = np.full(len(rf), NO_PARENT, dtype=np.uint64)
        has = rf > 0
        par[has] = fh[ff[has] + rf[has] - 1]
        yield p.tail_hash[rt[w]], par


def _chunk_boundaries(p, g: int, extent: np.ndarray, batch: int) -> tuple[np.ndarray, np.ndarray]:
    """(every stream's chunk hashes, each stream's first index into them): the hashes of full
    blocks ``g - 1, 2g - 1, ...`` of the stream, as many as the kept requests reference."""
    from .synthetic import _cuts, _ragged_arange

    nc = extent // g
    first = np.zeros(len(nc) + 1, dtype=np.int64)
    np.cumsum(nc, out=first[1:])
    out = np.empty(int(first[-1]), dtype=np.uint64)
    for s0, s1 in _cuts(nc, batch):
        c = nc[s0:s1]
        idx = np.repeat(p.full_first[s0:s1] + g - 1, c) + _ragged_arange(c) * g
        out[first[s0]:first[s1]] = p.full_hash[idx]
    return out, first[:-1]


def prepare_synthetic(wl, seed: int, chunk_tokens, *, batch_refs: int | None = None,
                      batch_values: int | None = None):
    """``(chunked trace, trace sha256)`` of a synthetic workload, identical to chunking and
    hashing :func:`.load.load_workload`'s table, without ever holding its block-hash column; or
    None where the caller must take that whole-table path (see the module's docstring).

    ``batch_refs`` is :func:`.chunks.chunk_trace`'s; ``batch_values`` bounds the batches of
    block hashes gathered for the digest and of stream blocks checked (tests force small ones)."""
    from .chunks import _TwoPrefixes, chunk_requests, resolve_chunk_tokens
    from .load import apply_filters, check_workload_options, synthetic_spec
    from .rechain import MODES, pairs_chained
    from .synthetic import plan

    mode = getattr(wl, "rechain", "auto")
    if mode not in MODES or mode == "always":
        return None      # chaining every hash (or the error naming a bad mode): the whole-table path
    check_workload_options(wl)
    batch = max(1, int(batch_values or BATCH_VALUES))
    p = plan(synthetic_spec(wl), seed, batch_blocks=batch_values)
    if p.n_requests == 0:
        return None
    placeholder, mm = _placeholder(int(p.offsets[-1]))
    template = apply_filters(p.table(placeholder), wl)
    kept = template.num_rows
    if kept == 0:
        return None
    extent = _stream_blocks(p, kept, batch)
    if mode == "auto":
        n_pairs = int(extent.sum()) + int(np.count_nonzero(p.r_tail[:kept] >= 0))
        if not pairs_chained(lambda: _pairs(p, kept, extent, batch), n_pairs):
            return None  # a hash follows two prefixes (or is the no-parent marker): chain_table words it
    try:
        sha = _streamed_sha(template, placeholder, p.values, batch)
    except _Layout:
        return None
    meta = template.drop_columns(["block_hashes"])
    del template, placeholder
    mm.close() if mm is not None else None
    bt = p.spec.block_tokens
    ct = resolve_chunk_tokens(chunk_tokens, bt)
    g = ct // bt
    cb, cb_first = _chunk_boundaries(p, g, extent, batch)
    r_sess = p.r_sess[:kept]
    nblocks = p.r_full[:kept] + (p.r_tail[:kept] >= 0)
    p.full_hash = p.tail_hash = None       # the stream-level hashes are no longer needed
    del p, extent

    def hashes_of(i0, i1, k, req):
        return cb[cb_first[r_sess[i0:i1]][req] + k]

    a0 = float(meta.column("arrival_s")[0].as_py())
    try:
        trace = chunk_requests(meta, ct, nblocks, hashes_of, warmup_s=a0 + wl.warmup_s, batch_refs=batch_refs)
    except _TwoPrefixes:
        return None          # chunk_trace words that error from the whole table
    del meta
    try:
        pa.default_memory_pool().release_unused()   # Arrow's pool keeps what the table's columns freed
    except AttributeError:   # pragma: no cover - older pyarrow
        pass
    return trace, sha
