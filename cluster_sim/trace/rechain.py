"""Chaining block hashes that are not prefix-chained (simulation-model.md §1, ``workload.rechain``).

The simulator needs *chained* block hashes: hash ``k`` of a request names the
whole prefix up to and including block ``k``, so equal hash means equal
prefix. Some sources give a hash of each block's *content*, or ids shared
across sessions; one hash then follows different prefixes (``[A, B]`` and
``[X, B]`` both hold ``B``) and caching by it would reuse a block after the
wrong prefix. Such a trace is chained here, as vLLM chains its block hashes:
a block's identity is its parent's identity combined with its own hash.

* **Detection** (:func:`find_conflict`, exact, linear time): a trace is
  prefix-chained when every hash has one parent, i.e. every occurrence of a
  hash follows the same hash (or starts its request). Arrow's hash-based
  dictionary encoding numbers the hashes in order of first appearance; each
  reference's parent is compared with the parent at the hash's first
  appearance. A converted trace (the trace cache) carries its verdict, and a
  ``true`` one is trusted for any placement and cut (:func:`with_chained_verdict`).
* **Chaining** (:func:`chain_hashes`, exact): position by position, the pair
  (parent's new id, own hash) is interned to a dense new id (position 0: the
  hash alone). Two references get the same new id exactly when their whole
  hash sequences up to them are equal: no hashing, so no collision. New ids
  are numbered in order of first appearance, position by position.
* On a trace that is already chained, chaining changes the ids but not which
  references are equal, so every simulated figure is the same
  (``tests/test_rechain.py``).

``workload.rechain``: ``auto`` (default) detects and chains when needed,
``always`` chains without detecting, ``never`` takes the hashes as they are
(a hash that follows two prefixes at the chunk level is then an error).
"""
from __future__ import annotations

import sys

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["MODES", "NO_PARENT", "RECHAINED_KEY", "CHAINED_KEY", "with_chained_verdict", "pop_chained_verdict", "find_conflict", "pairs_chained", "chain_hashes", "chain_table", "was_rechained"]

MODES = ("auto", "always", "never")
#: schema metadata key set to ``true`` on a table whose hashes were chained here
RECHAINED_KEY = b"block_hashes_rechained"
#: schema metadata key of a converted trace (the trace cache): whether its hashes are prefix-chained
CHAINED_KEY = b"block_hashes_chained"


def with_chained_verdict(table: pa.Table) -> pa.Table:
    """``table`` with :data:`CHAINED_KEY` set to whether its hashes are prefix-chained
    (:func:`_chained`), so that the trace cache keeps the verdict with the converted trace.

    Whether a trace is chained is a property of the set of its (hash, parent) pairs, not of the
    requests' order, and every subset of a chained trace is chained. So a ``true`` verdict holds
    for the trace after any placement of its sessions and any cut (``until_s``,
    ``limit_requests``), and :func:`chain_table` need not look again; ``false`` says nothing
    about a cut, which is checked as before (decision 127)."""
    verdict = _chained(table.column("block_hashes")) if table.num_rows else True
    meta = dict(table.schema.metadata or {})
    meta[CHAINED_KEY] = b"true" if verdict else b"false"
    return table.replace_schema_metadata(meta)


def pop_chained_verdict(table: pa.Table) -> tuple[pa.Table, bool]:
    """(``table`` without :data:`CHAINED_KEY`, whether it said the hashes are chained)."""
    meta = dict(table.schema.metadata or {})
    if CHAINED_KEY not in meta:
        return table, False
    known = meta.pop(CHAINED_KEY) == b"true"
    return table.replace_schema_metadata(meta), known


def _lists(table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, values) of the table's ``block_hashes``; offsets start at 0."""
    col = table.column("block_hashes")
    lists = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    offsets = np.asarray(lists.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
    offsets = offsets - offsets[0]
    values = lists.flatten().to_numpy(zero_copy_only=False)
    return offsets, np.asarray(values, dtype=np.uint64)


def _codes(keys: pa.Array) -> tuple[np.ndarray, int]:
    """Dense codes of ``keys`` in order of first appearance, and how many distinct keys."""
    enc = pc.dictionary_encode(keys)
    return enc.indices.to_numpy(zero_copy_only=False), len(enc.dictionary)


#: block references checked per batch by :func:`find_conflict` (docs/decisions.md #75): at least
#: this many, and at most :data:`MAX_BATCHES` batches (the table of first parents is merged once
#: per batch)
BATCH_VALUES = 1 << 20
MAX_BATCHES = 32
#: passes over a large column by :func:`_chained`, each holding 1/PASSES of the distinct hashes
PASSES = 4
_NONE = np.uint64(0xFFFFFFFFFFFFFFFF)   # "starts its request" as a parent (a hash equal to it: whole-array check)
NO_PARENT = _NONE
#: (hash, parent) pairs sorted at a time by :func:`pairs_chained` (about 40 bytes each)
PAIRS_PER_PASS = 1 << 24


def pairs_chained(pairs, n_pairs: int, per_pass: int | None = None) -> bool:
    """Whether every hash of the ``(hash, parent)`` pairs has one parent (:data:`NO_PARENT`:
    the hash starts its request): :func:`find_conflict` finds nothing in a column whose
    references have exactly these pairs, repeats included (docs/decisions.md #110).

    ``pairs()`` yields the pairs as uint64 array couples and is called once per pass; a pass
    sorts the pairs whose hash's top bits name it, about ``per_pass`` of ``n_pairs``. False
    also when a hash equals :data:`NO_PARENT` (the whole-array check decides that case)."""
    per_pass = max(1, int(per_pass or PAIRS_PER_PASS))
    bits = 0
    while (n_pairs >> bits) > per_pass and bits < 16:
        bits += 1
    passes = 1 << bits
    for q in range(passes):
        hs, ps = [], []
        for h, par in pairs():
            if bits:
                sel = (h >> np.uint64(64 - bits)) == np.uint64(q)
                h, par = h[sel], par[sel]
            hs.append(h)
            ps.append(par)
        h = np.concatenate(hs) if hs else np.zeros(0, np.uint64)
        par = np.concatenate(ps) if ps else np.zeros(0, np.uint64)
        del hs, ps
        if bool(np.any(h == _NONE)):
            return False
        order = np.argsort(h)
        h = h[order]
        par = par[order]
        del order
        if bool(np.any((h[1:] == h[:-1]) & (par[1:] != par[:-1]))):
            return False
    return True


class _FirstParents:
    """Every hash seen so far with the hash it followed at its first appearance (16 bytes per
    distinct hash), fed request batches in order. Kept in :data:`BUCKETS` sorted arrays by a mix
    of the hash, so that learning a batch re-allocates one small array at a time."""

    BUCKETS = 64

    def __init__(self):
        self.keys = [np.zeros(0, np.uint64) for _ in range(self.BUCKETS)]
        self.par = [np.zeros(0, np.uint64) for _ in range(self.BUCKETS)]

    def feed(self, offsets: np.ndarray, values: np.ndarray, part: int = 0, parts: int = 1) -> int | None:
        """The first index into ``values`` (whole requests; ``offsets`` from 0) whose hash follows
        another hash than at its first appearance, or None (and the batch's hashes are learnt).

        With ``parts > 1`` only the hashes of share ``part`` (by a mix of the hash) are looked at,
        and the index is the first such conflict among them."""
        from .synthetic import splitmix64

        n = len(values)
        par = np.empty(n, dtype=np.uint64)
        par[1:] = values[:-1]
        counts = np.diff(offsets)
        par[offsets[:-1][counts > 0]] = _NONE
        where = None
        if parts > 1:
            where = np.flatnonzero((splitmix64(values) & np.uint64(0xFF)).astype(np.int64) % parts == part)
            values, par = values[where], par[where]
        uniq, first_idx, inv = np.unique(values, return_index=True, return_inverse=True)
        expect = par[first_idx]
        del first_idx
        bucket = (splitmix64(uniq) >> np.uint64(58)).astype(np.int64)
        by_bucket = np.argsort(bucket, kind="stable")      # sorted by hash within a bucket
        bounds = np.searchsorted(bucket[by_bucket], np.arange(self.BUCKETS + 1))
        del bucket
        learn = []
        for b in range(self.BUCKETS):
            sel = by_bucket[bounds[b]:bounds[b + 1]]
            if not len(sel):
                continue
            u = uniq[sel]
            keys = self.keys[b]
            pos = np.searchsorted(keys, u)
            found = np.zeros(len(u), dtype=bool)
            inside = pos < len(keys)
            found[inside] = keys[pos[inside]] == u[inside]
            expect[sel[found]] = self.par[b][pos[found]]
            new = ~found
            if new.any():
                learn.append((b, pos[new], u[new], sel[new]))
        bad = expect[inv.reshape(-1)] != par
        if bad.any():
            i = int(np.argmax(bad))
            return i if where is None else int(where[i])
        for b, pos, u, sel in learn:
            self.keys[b] = np.insert(self.keys[b], pos, u)
            self.par[b] = np.insert(self.par[b], pos, expect[sel])
        return None


def find_conflict(offsets: np.ndarray, values: np.ndarray, *, batch: int | None = None) -> tuple[int, int] | None:
    """The first reference whose hash follows another prefix than where that hash first appears.

    Returns ``(reference index, index of the hash's first appearance)`` (flat
    indices into ``values``) or None when the hashes are prefix-chained: every
    occurrence of a hash follows the same hash, or every one starts its request.

    Reads whole requests of about ``batch`` references at a time, keeping each distinct
    hash with its first parent; the same answer as :func:`_find_conflict_whole`.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    n = len(values)
    if n == 0:
        return None
    batch = batch or max(BATCH_VALUES, -(-n // MAX_BATCHES))
    if n <= batch or bool(np.any(values == _NONE)):
        return _find_conflict_whole(offsets, values)
    seen = _FirstParents()
    nreq = len(offsets) - 1
    i0 = 0
    while i0 < nreq:
        i1 = min(max(int(np.searchsorted(offsets, offsets[i0] + batch, side="right")) - 1, i0 + 1), nreq)
        v0 = int(offsets[i0])
        bad = seen.feed(offsets[i0:i1 + 1] - v0, values[v0:int(offsets[i1])])
        if bad is not None:
            i = v0 + bad
            return i, int(np.argmax(values[:i + 1] == values[i]))
        i0 = i1
    return None


def _chained(col: pa.ChunkedArray, batch: int | None = None, passes: int | None = None) -> bool:
    """Whether :func:`find_conflict` finds nothing in the ``block_hashes`` column, read a column
    chunk and a batch of requests at a time (the hashes are not copied). A large column is read
    :data:`PASSES` times, each pass checking a share of the distinct hashes (by a mix of the
    hash), so the table of first parents holds a share of them at a time."""
    total = sum(len(c.flatten()) for c in col.chunks)
    batch = batch or max(BATCH_VALUES, -(-total // MAX_BATCHES))
    parts = passes or (PASSES if total > PASSES * batch else 1)
    for part in range(parts):
        seen = _FirstParents()
        for chunk in col.chunks:
            offsets = np.asarray(chunk.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
            values = np.asarray(chunk.flatten().to_numpy(zero_copy_only=False), dtype=np.uint64)
            offsets = offsets - offsets[0]
            if len(values) and bool(np.any(values == _NONE)):
                offsets, values = _lists(pa.table({"block_hashes": col}))
                return _find_conflict_whole(offsets, values) is None
            nreq = len(offsets) - 1
            i0 = 0
            while i0 < nreq:
                i1 = min(max(int(np.searchsorted(offsets, offsets[i0] + batch, side="right")) - 1, i0 + 1), nreq)
                v0 = int(offsets[i0])
                if seen.feed(offsets[i0:i1 + 1] - v0, values[v0:int(offsets[i1])], part, parts) is not None:
                    return False
                i0 = i1
    return True


def _find_conflict_whole(offsets: np.ndarray, values: np.ndarray) -> tuple[int, int] | None:
    """:func:`find_conflict` on the whole array at once (Arrow's dictionary codes)."""
    n = len(values)
    if n == 0:
        return None
    codes, _ = _codes(pa.array(values, type=pa.uint64()))
    parent = np.empty(n, dtype=codes.dtype)
    parent[0] = -1
    parent[1:] = codes[:-1]
    counts = np.diff(offsets)
    parent[offsets[:-1][counts > 0]] = -1
    runmax = np.maximum.accumulate(codes)
    first = np.empty(n, dtype=bool)
    first[0] = True
    np.greater(runmax[1:], runmax[:-1], out=first[1:])
    del runmax
    first_pos = np.flatnonzero(first)          # the first appearance of code c is first_pos[c]
    del first
    bad = parent != parent[first_pos][codes]
    if not bad.any():
        return None
    i = int(np.argmax(bad))
    return i, int(first_pos[codes[i]])


def chain_hashes(offsets: np.ndarray, values: np.ndarray) -> np.ndarray:
    """New uint64 ids: equal exactly where the whole hash sequence up to the block is equal."""
    n_req = len(offsets) - 1
    out = np.empty(len(values), dtype=np.uint64)
    if len(values) == 0:
        return out
    counts = np.diff(offsets)
    order = np.argsort(-counts, kind="stable")      # longest first: the active rows of a position are a prefix
    neg_sorted = -counts[order]
    starts = offsets[:-1][order]
    parent = np.zeros(0, dtype=np.uint64)
    next_id = 0
    for k in range(int(counts.max()) if n_req else 0):
        active = int(np.searchsorted(neg_sorted, -k, side="left"))   # rows with more than k hashes
        pos = starts[:active] + k
        own = values[pos]
        if k == 0:
            keys = pa.array(own, type=pa.uint64())
        else:
            pair = np.empty((active, 2), dtype=np.uint64)
            pair[:, 0] = parent[:active]
            pair[:, 1] = own
            keys = pa.FixedSizeBinaryArray.from_buffers(pa.binary(16), active, [None, pa.py_buffer(pair)])
        codes, distinct = _codes(keys)
        ids = codes.astype(np.uint64) + np.uint64(next_id)
        next_id += distinct
        out[pos] = ids
        parent = ids
    return out


def was_rechained(table: pa.Table) -> bool:
    return (table.schema.metadata or {}).get(RECHAINED_KEY) == b"true"


def chain_table(table: pa.Table, mode: str, where: str, *, say=None, known_chained: bool = False) -> pa.Table:
    """``table`` with prefix-chained ``block_hashes`` (``mode`` = ``workload.rechain``).

    ``where`` names the trace in the one-line notice (stderr, or ``say(line)``)
    printed when a trace is chained. The table's schema metadata then records
    ``block_hashes_rechained = true``. ``known_chained``: the converted trace's cached verdict
    said chained (:func:`with_chained_verdict`), so ``auto`` takes the hashes without looking.
    """
    if mode not in MODES:
        from cluster_sim.errors import ConfigError
        raise ConfigError("workload.rechain", f"must be one of {', '.join(MODES)}; got {mode!r}")
    if mode == "never" or table.num_rows == 0:
        return table
    if mode == "auto":
        if known_chained or _chained(table.column("block_hashes")):   # chunk by chunk: no copy of the hashes
            return table
        offsets, values = _lists(table)
        conflict = find_conflict(offsets, values)
        i, j = conflict
        row = int(np.searchsorted(offsets, i, side="right"))
        row0 = int(np.searchsorted(offsets, j, side="right"))
        why = (f"block hash {int(values[i])} of row {row} follows another prefix than in row {row0}; "
               "chaining them (a block's identity = its parent's identity + its own hash; workload.rechain=auto)")
    else:
        offsets, values = _lists(table)
        why = "chaining the block hashes (workload.rechain=always)"
    line = f"cluster_sim: {where}: block hashes are not prefix-chained: {why}" if mode == "auto" \
        else f"cluster_sim: {where}: {why}"
    (say or (lambda s: print(s, file=sys.stderr)))(line)
    new = chain_hashes(offsets, values)
    lists = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(new, type=pa.uint64()),
                                     type=table.schema.field("block_hashes").type)
    i = table.column_names.index("block_hashes")
    out = table.set_column(i, table.schema.field("block_hashes"), lists)
    meta = dict(table.schema.metadata or {})
    meta[RECHAINED_KEY] = b"true"
    return out.replace_schema_metadata(meta)
