"""Trace statistics (simulation-model.md §10, ``cluster-sim-trace stats``).

:func:`trace_statistics` computes, from the canonical Arrow table the
simulator consumes, the statistics ``../shared/traces/README.md`` publishes
for each trace plus the figures that matter for a cache:

* **block level** (every hash of ``block_hashes``, a final partial block's
  included, as the README counts them): ``block_references``,
  ``unique_blocks``, ``reuse_fraction`` = share of block references whose hash
  was already referenced by an *earlier request* in replay (row) order — the
  hit ratio of an infinite, never-evicting block cache;
* **full blocks** (the first ``floor(input_tokens / block_tokens)`` hashes of
  each request, the blocks the simulator can cache): the same reuse
  definition restricted to them, ``full_block_reuse_fraction``. For a model
  without STATE it equals ``1 - miss_ratio_floor`` of a run with
  ``cache.chunk_tokens = block_tokens``;
* **chunks** (``chunk_tokens`` given, or implied by ``model``): the full
  chunks exactly as :func:`~cluster_sim.trace.chunks.chunk_trace` cuts them for
  the simulator: ``chunk_references``, ``unique_chunks``,
  ``chunk_reuse_fraction`` (= ``1 - miss_ratio_floor`` for a model without
  STATE);
* **working set** (``model`` given): FA bytes of the distinct full chunks plus
  one STATE per request that has a full chunk, sized at the end of its last
  full chunk (``model.state_bytes``);
* arrivals (inter-arrival gaps in row order), input / output lengths,
  sessions (``sessions`` is 0 for a trace without session ids; requests per
  session and the gaps between consecutive requests of one session, sub-agent
  requests included), request categories;
* **prefix-tree shape**, computed with networkx on the chunk tree (the
  full-block tree without ``chunk_tokens``): depth, branching, the share of
  chunk references on shared paths. Large traces are sampled (whole sessions
  at random with a fixed seed, or, without sessions, the first requests in
  replay order) so that at most ``max_tree_refs`` chunk references are fed
  to networkx; ``tree_sampled`` and ``tree_sample_requests`` say so.

Every value is a plain ``int``/``float``/``str``/``bool``/``dict`` (strict
JSON, no NaN). Statistics of an empty sample are 0.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cluster_sim.errors import ConfigError, TraceError
from cluster_sim.trace.schema import reuse_counts  # defined beside trace_stats, its other user

__all__ = ["trace_statistics", "reuse_counts", "DEFAULT_MAX_TREE_REFS", "TREE_SAMPLE_SEED", "format_table"]

#: At most this many chunk references are fed to networkx for the tree shape.
DEFAULT_MAX_TREE_REFS = 500_000
#: Seed of the session sample when the tree is sampled (fixed: the statistics are reproducible).
TREE_SAMPLE_SEED = 0

DUPLICATES_DROPPED_KEY = b"duplicates_dropped"


# --------------------------------------------------------------------------- helpers


def _np(column: pa.ChunkedArray | pa.Array, dtype=None) -> np.ndarray:
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    arr = column.to_numpy(zero_copy_only=False)
    return np.asarray(arr, dtype=dtype) if dtype is not None else arr


def _quantiles(x: np.ndarray, prefix: str, suffix: str = "", *, qs=(50, 90, 99), mean=True, maximum=False) -> dict:
    out: dict[str, float] = {}
    integral = np.asarray(x).dtype.kind in "iu"
    x = np.asarray(x, dtype=np.float64)
    if mean:
        out[f"{prefix}_mean{suffix}"] = float(x.mean()) if x.size else 0.0
    for q in qs:
        out[f"{prefix}_p{q}{suffix}"] = float(np.percentile(x, q)) if x.size else 0.0
    if maximum:
        top = x.max() if x.size else 0.0
        out[f"{prefix}_max{suffix}"] = int(top) if integral else float(top)
    return out


def _resolve_model(model):
    if model is None or not isinstance(model, str):
        return model
    from cluster_sim.model import load_model

    return load_model(model)


def _resolve_chunk_tokens(chunk_tokens, bt: int) -> int:
    if isinstance(chunk_tokens, str) and chunk_tokens != "auto":
        try:
            chunk_tokens = int(chunk_tokens)
        except ValueError:
            raise ConfigError("cache.chunk_tokens", f"must be a positive integer or 'auto', got {chunk_tokens!r}") from None
    if not isinstance(chunk_tokens, str):
        if isinstance(chunk_tokens, bool) or int(chunk_tokens) != chunk_tokens or int(chunk_tokens) <= 0:
            raise ConfigError("cache.chunk_tokens", f"must be a positive integer or 'auto', got {chunk_tokens!r}")
        chunk_tokens = int(chunk_tokens)
    from cluster_sim.trace.chunks import resolve_chunk_tokens

    return resolve_chunk_tokens(chunk_tokens, bt)


def _chunk_reuse(ct) -> tuple[int, int]:
    """(references, reused references) of a :class:`ChunkedTrace` (ids interned in first-appearance order)."""
    refs = ct.chunk_refs
    if refs == 0:
        return 0, 0
    lens = np.diff(ct.offsets)
    req = np.repeat(np.arange(ct.n_requests, dtype=np.int64), lens)
    first_ref = ct.anchor + ct.depth - 1  # flat index of each chunk's first reference
    reused = int(np.count_nonzero(req > req[first_ref][ct.flat]))
    return refs, reused


# --------------------------------------------------------------------------- tree


def _tree_sample(lens: np.ndarray, session: np.ndarray | None, max_refs: int) -> tuple[np.ndarray, str | None]:
    """Requests (sorted indices) whose chunk paths form the networkx sample, and the sampling unit.

    ``lens``: full chunks per request. No sampling while the trace has at most
    ``max_refs`` chunk references.
    """
    n = len(lens)
    if int(lens.sum()) <= max_refs:
        return np.arange(n, dtype=np.int64), None
    if session is not None and np.any(session >= 0):
        # whole sessions at random (requests without a session are units of their own)
        unit = np.where(session >= 0, session, -1 - np.arange(n, dtype=np.int64))
        uniq, inv = np.unique(unit, return_inverse=True)
        unit_refs = np.bincount(inv, weights=lens, minlength=len(uniq)).astype(np.int64)
        perm = np.random.default_rng(TREE_SAMPLE_SEED).permutation(len(uniq))
        cum = np.cumsum(unit_refs[perm])
        take = perm[: max(1, int(np.searchsorted(cum, max_refs, side="right")))]
        chosen = np.zeros(len(uniq), dtype=bool)
        chosen[take] = True
        return np.flatnonzero(chosen[inv]).astype(np.int64), "session"
    # no sessions: the first requests in replay order (reuse is local in time)
    cum = np.cumsum(lens)
    k = max(1, int(np.searchsorted(cum, max_refs, side="right")))
    return np.arange(k, dtype=np.int64), "request_prefix"


def _tree_shape(table: pa.Table, tree_tokens: int, chunked, session: np.ndarray | None,
                max_refs: int) -> dict[str, Any]:
    """Shape of the prefix tree of ``tree_tokens``-token chunks, with networkx.

    ``chunked``: the whole table already cut at ``tree_tokens`` (or None).
    The sample is cut on its own, so a large trace is never chunked whole here.
    """
    import networkx as nx

    from cluster_sim.trace.chunks import chunk_trace

    lens = _np(table.column("input_tokens"), np.int64) // tree_tokens if table.num_rows else np.zeros(0, np.int64)
    idx, unit = _tree_sample(lens, session, max_refs)
    if unit is None:
        ct = chunked if chunked is not None else chunk_trace(table, tree_tokens)
    else:
        ct = chunk_trace(table.take(pa.array(idx)), tree_tokens)
    flat = ct.flat
    out: dict[str, Any] = {
        "tree_chunk_tokens": int(tree_tokens),
        "tree_sampled": unit is not None,
        "tree_sample_unit": unit or "none",
        "tree_sample_requests": int(len(idx)),
        "tree_sample_chunk_references": int(flat.size),
    }
    if flat.size == 0:
        out.update({"tree_nodes": 0, "tree_roots": 0, "tree_leaves": 0, "tree_max_depth": 0,
                    "tree_mean_depth": 0.0, "tree_mean_leaf_depth": 0.0, "tree_internal_nodes": 0,
                    "tree_mean_branching": 0.0, "tree_shared_reference_fraction": 0.0})
        return out
    # a request references a chunk at most once (chunk_trace rejects hashes that are not prefix-chained)
    nodes, refs = np.unique(flat, return_counts=True)
    parents = ct.parent[nodes]
    root = -1  # a virtual root above every first chunk
    g = nx.DiGraph()
    g.add_nodes_from(nodes.tolist())
    g.add_edges_from(zip(np.where(parents >= 0, parents, root).tolist(), nodes.tolist()))
    depth = nx.single_source_shortest_path_length(g, root)
    node_list = nodes.tolist()
    node_depth = np.fromiter((depth[c] for c in node_list), dtype=np.int64, count=len(nodes))
    outdeg = np.fromiter((d for _, d in g.out_degree(node_list)), dtype=np.int64, count=len(nodes))
    leaves = outdeg == 0
    internal = ~leaves
    out.update({
        "tree_nodes": int(len(nodes)),
        "tree_roots": int(g.out_degree(root)),
        "tree_leaves": int(leaves.sum()),
        "tree_max_depth": int(node_depth.max()),
        "tree_mean_depth": float(node_depth.mean()),
        "tree_mean_leaf_depth": float(node_depth[leaves].mean()),
        "tree_internal_nodes": int(internal.sum()),
        "tree_mean_branching": float(outdeg[internal].mean()) if internal.any() else 0.0,
        "tree_shared_reference_fraction": float(refs[refs >= 2].sum() / refs.sum()),
    })
    return out


# --------------------------------------------------------------------------- main entry


def trace_statistics(table: pa.Table, chunk_tokens: int | str | None = None, model=None, *,
                     max_tree_refs: int = DEFAULT_MAX_TREE_REFS, tree: bool = True) -> dict[str, Any]:
    """Statistics of a canonical trace table (see the module docstring for the definitions).

    ``chunk_tokens``: an int (a whole multiple of the trace's block size) or
    ``"auto"`` (the smallest multiple of ``block_tokens`` that is >= 256); with
    it the result has the chunk keys. ``model``: a model name or a
    :class:`~cluster_sim.model.ModelSpec`; with it the result has
    ``working_set_bytes`` (and, without ``chunk_tokens``, uses ``auto``).
    ``tree=False`` skips the networkx prefix-tree shape.
    """
    from cluster_sim.trace.chunks import chunk_trace
    from cluster_sim.trace.schema import block_tokens as _block_tokens, source as _source

    bt = _block_tokens(table)
    model = _resolve_model(model)
    if model is not None and chunk_tokens is None:
        chunk_tokens = "auto"
    ct_tokens = None if chunk_tokens is None else _resolve_chunk_tokens(chunk_tokens, bt)

    n = table.num_rows
    meta = table.schema.metadata or {}
    arrival = _np(table.column("arrival_s"), np.float64) if n else np.zeros(0)
    in_tok = _np(table.column("input_tokens"), np.int64) if n else np.zeros(0, np.int64)
    out_tok = _np(table.column("output_tokens"), np.int64) if n else np.zeros(0, np.int64)
    session = None
    sess_col = table.column("session_id")
    if n and sess_col.null_count < n:
        session = _np(sess_col.fill_null(-1), np.int64)

    res: dict[str, Any] = {
        "source": _source(table),
        "requests": int(n),
        "sessions": int(len(np.unique(session[session >= 0]))) if session is not None else 0,
        "span_s": float(arrival[-1] - arrival[0]) if n else 0.0,
        "block_tokens": int(bt),
        "duplicates_dropped": int(meta.get(DUPLICATES_DROPPED_KEY, b"0").decode() or 0),
    }

    # ---- blocks: every hash ---------------------------------------------
    lists = table.column("block_hashes")
    lists = lists.combine_chunks() if lists.num_chunks != 1 else lists.chunk(0)
    counts = _np(pc.list_value_length(lists), np.int64) if n else np.zeros(0, np.int64)
    values = _np(lists.flatten(), np.uint64) if n else np.zeros(0, np.uint64)
    req_of_ref = np.repeat(np.arange(n, dtype=np.int64), counts)
    # full blocks: the first floor(input_tokens / block_tokens) hashes of each request, the
    # blocks the simulator can cache
    n_full = in_tok // bt
    if np.any(n_full > counts):
        bad = int(np.flatnonzero(n_full > counts)[0])
        raise TraceError(_source(table) or "<table>", f"request has {int(counts[bad])} block hashes but "
                         f"{int(in_tok[bad])} input tokens need {int(n_full[bad])} full blocks",
                         line=bad + 1, field="block_hashes")
    if np.array_equal(n_full, counts):  # the trace gives full blocks only
        (unique_blocks, reused) = reuse_counts(values, req_of_ref)
        n_full_refs, unique_full, f_reused = int(values.size), unique_blocks, reused
    else:
        pos = np.arange(values.size, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
        is_full = pos < n_full[req_of_ref]
        del pos
        unique_blocks, reused = reuse_counts(values, req_of_ref)
        unique_full, f_reused = reuse_counts(values[is_full], req_of_ref[is_full])
        n_full_refs = int(np.count_nonzero(is_full))
        del is_full
    res.update({
        "block_references": int(values.size),
        "unique_blocks": unique_blocks,
        "reuse_fraction": reused / values.size if values.size else 0.0,
        "unique_token_footprint": unique_blocks * bt,
        "full_block_references": n_full_refs,
        "unique_full_blocks": unique_full,
        "full_block_reuse_fraction": f_reused / n_full_refs if n_full_refs else 0.0,
    })
    del values, req_of_ref

    # ---- lengths, arrivals, sessions, categories -------------------------
    res.update(_quantiles(in_tok, "input_tokens", maximum=True))
    res["output_tokens_mean"] = float(out_tok.mean()) if n else 0.0
    res["output_tokens_p50"] = float(np.median(out_tok)) if n else 0.0
    res.update(_quantiles(np.diff(arrival), "inter_arrival", "_s"))
    if session is not None:
        has = session >= 0
        _, per = np.unique(session[has], return_counts=True)
        res.update(_quantiles(per, "requests_per_session", maximum=True))
        rows = np.flatnonzero(has)
        order = rows[np.argsort(session[rows], kind="stable")]  # rows are in arrival order
        same = session[order[1:]] == session[order[:-1]]
        gaps = (arrival[order[1:]] - arrival[order[:-1]])[same]
        res.update(_quantiles(gaps, "intra_session_gap", "_s", mean=False))
    cat = table.column("category")
    if n and cat.null_count < n:
        vc = pc.value_counts(cat.cast(pa.string()).drop_null()).to_pylist()
        res["categories"] = {d["values"]: int(d["counts"]) for d in sorted(vc, key=lambda d: d["values"])}

    # ---- chunks and working set -----------------------------------------
    chunked = None
    if ct_tokens is not None:
        chunked = chunk_trace(table, ct_tokens)
        c_refs, c_reused = _chunk_reuse(chunked)
        res.update({
            "chunk_tokens": int(ct_tokens),
            "chunk_references": c_refs,
            "unique_chunks": int(chunked.n_chunks),
            "chunk_reuse_fraction": c_reused / c_refs if c_refs else 0.0,
        })
    if model is not None:
        m = np.diff(chunked.offsets)
        fa = int(model.fa_bytes(ct_tokens)) * int(chunked.n_chunks)
        ends = m[m > 0] * ct_tokens
        state = int(model.state_bytes_array(ends).sum()) if model.has_state and ends.size else 0
        res.update({
            "model": model.name,
            "working_set_bytes": fa + state,
            "working_set_fa_bytes": fa,
            "working_set_state_bytes": state,
        })

    # ---- prefix-tree shape (networkx, sampled when large) -----------------
    if tree:
        res.update(_tree_shape(table, ct_tokens or bt, chunked, session, max_tree_refs))
    return res


# --------------------------------------------------------------------------- readable form


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if v == int(v):
            return f"{int(v):,}"
        if abs(v) >= 100:
            return f"{v:,.1f}"
        return f"{v:.4g}" if abs(v) < 1 else f"{v:,.3f}"
    return str(v)


def _bytes(b: int) -> str:
    x = float(b)
    for unit in ("B", "kB", "MB", "GB", "TB", "PB"):
        if abs(x) < 1000 or unit == "PB":
            return f"{int(b):,} B" if unit == "B" else f"{x:.2f} {unit} ({int(b):,} B)"
        x /= 1000.0
    return str(b)


def format_table(s: dict[str, Any], path: str = "") -> str:
    """The statistics as an aligned, readable table (the command's output without ``--json``)."""
    rows: list[tuple[str, str]] = []

    def row(label: str, *keys: str, sep: str = " / ", fmt=_fmt) -> None:
        present = [k for k in keys if k in s]
        if present:
            rows.append((label, sep.join(fmt(s[k]) for k in present)))

    row("source", "source")
    row("requests", "requests")
    row("sessions", "sessions")
    if "requests_per_session_mean" in s:
        row("requests per session mean / p50 / p90 / p99 / max", "requests_per_session_mean",
            "requests_per_session_p50", "requests_per_session_p90", "requests_per_session_p99",
            "requests_per_session_max")
    if "categories" in s:
        rows.append(("categories", ", ".join(f"{k} {v:,}" for k, v in s["categories"].items())))
    row("span (s)", "span_s")
    row("inter-arrival mean / p50 / p90 / p99 (s)", "inter_arrival_mean_s", "inter_arrival_p50_s",
        "inter_arrival_p90_s", "inter_arrival_p99_s")
    if "intra_session_gap_p50_s" in s:
        row("intra-session gap p50 / p90 / p99 (s)", "intra_session_gap_p50_s", "intra_session_gap_p90_s",
            "intra_session_gap_p99_s")
    row("input tokens mean / p50 / p90 / p99 / max", "input_tokens_mean", "input_tokens_p50", "input_tokens_p90",
        "input_tokens_p99", "input_tokens_max")
    row("output tokens mean / p50", "output_tokens_mean", "output_tokens_p50")
    row("duplicates dropped", "duplicates_dropped")
    row("block tokens", "block_tokens")
    row("block references", "block_references")
    row("unique blocks", "unique_blocks")
    row("reuse fraction", "reuse_fraction")
    row("unique-token footprint", "unique_token_footprint")
    row("full-block references / unique", "full_block_references", "unique_full_blocks")
    row("full-block reuse fraction", "full_block_reuse_fraction")
    row("chunk tokens", "chunk_tokens")
    row("chunk references / unique", "chunk_references", "unique_chunks")
    row("chunk reuse fraction", "chunk_reuse_fraction")
    if "working_set_bytes" in s:
        rows.append((f"working set ({s['model']})", _bytes(s["working_set_bytes"])))
        rows.append(("  FA / STATE", f"{_bytes(s['working_set_fa_bytes'])} / {_bytes(s['working_set_state_bytes'])}"))
    if "tree_nodes" in s:
        sample = (f"sampled: {s['tree_sample_requests']:,} requests by {s['tree_sample_unit']}"
                  if s["tree_sampled"] else "all requests")
        rows.append((f"prefix tree ({s['tree_chunk_tokens']}-token chunks)", sample))
        row("  nodes / roots / leaves", "tree_nodes", "tree_roots", "tree_leaves")
        row("  depth max / mean / mean leaf", "tree_max_depth", "tree_mean_depth", "tree_mean_leaf_depth")
        row("  mean branching (internal nodes)", "tree_mean_branching")
        row("  refs on shared paths", "tree_shared_reference_fraction")
    w = max(len(k) for k, _ in rows)
    head = f"trace statistics: {path}\n" if path else ""
    return head + "\n".join(f"  {k:<{w}}  {v}" for k, v in rows)
