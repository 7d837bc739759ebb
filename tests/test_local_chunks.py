"""A node replays its share of the trace over its own chunks (decision 146).

``ChunkedTrace.localize`` gives a share of the requests its own dense chunk ids, in the order of
the trace's ids; a compiled node given its share (``NodeRunner(share=...)``, as a fleet that routes
ahead does) sizes its chunk arrays to the share's chunks, and every result must be the one it gives
on the whole trace's chunk table: per request, every counter, the policy's counters and the final
residency of every payload.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import cluster_sim
from cluster_sim.api import prepare
from cluster_sim.config import SimConfig
from cluster_sim.fleet import NodeRunner
from test_engine_policies import CASE_IDS, CASES, _cfg, _hw, assert_same_results


@pytest.fixture(scope="module")
def bundled():
    cfg = SimConfig.from_mapping(cluster_sim.compose([]))
    trace = prepare(cfg)[0]
    # a third of the sessions, as session affinity would send one node of three
    share = np.flatnonzero(trace.session_id % 3 == 1).astype(np.int64)
    return trace, cfg, share


def test_localize_keeps_the_tree_the_stream_and_the_order(bundled):
    trace, _, share = bundled
    local, gids = trace.localize(share)
    offs, flat = trace.stream(share)
    assert 0 < len(gids) < trace.n_chunks
    assert np.all(np.diff(gids) > 0)                          # ascending: comparisons of ids unchanged
    assert np.array_equal(local.offsets, offs)
    assert local.flat.dtype == trace.flat.dtype
    assert np.array_equal(gids[local.flat], flat)             # the same stream, renamed
    assert local.n_chunks == len(gids) == len(np.unique(flat))
    gpar = trace.parent[gids]
    assert np.array_equal(local.parent < 0, gpar < 0)
    has = local.parent >= 0
    assert np.array_equal(gids[local.parent[has]], gpar[has])  # every parent is in the share
    assert np.array_equal(local.depth, trace.depth[gids])
    assert np.array_equal(local.chunk_hash, trace.chunk_hash[gids])
    # each chunk's ancestors stand at its anchor in the local stream, root first
    for c in range(0, local.n_chunks, 7):
        a, d = int(local.anchor[c]), int(local.depth[c])
        chain = [c]
        while local.parent[chain[-1]] >= 0:
            chain.append(int(local.parent[chain[-1]]))
        assert local.flat[a:a + d - 1].tolist() == chain[:0:-1]
    for col in ("arrival_s", "session_id", "input_tokens", "counted", "turn", "agent"):
        assert np.array_equal(getattr(local, col), getattr(trace, col)[share]), col


def _run(trace, cfg, share, local: bool):
    r = NodeRunner(trace, cfg, 0, future_idx=share, share=share if local else None)
    assert r.engine == "numba"
    for part in np.array_split(share, 3):
        r.run(part)
    stats, series = r.finish()
    return stats, series, r


@pytest.mark.parametrize("policy,params", CASES, ids=CASE_IDS)
def test_a_node_on_its_share_gives_the_results_of_the_whole_chunk_table(bundled, policy, params):
    trace, base, share = bundled
    fa = base.model.fa_bytes(trace.chunk_tokens)
    model = dataclasses.replace(base.model, state_checkpoints="every_chunk")
    # a few dozen chunks in HBM, a few hundred in DRAM and the SSD: evictions from every tier
    cfg = _cfg(policy, params, model, _hw((40 * fa, 150 * fa, 500 * fa)), "numba")
    sa, xa, ra = _run(trace, cfg, share, local=False)
    sb, xb, rb = _run(trace, cfg, share, local=True)
    assert_same_results((sa, xa, ra), (sb, xb, rb))
    _, gids = trace.localize(share)
    whole = ra.node.residency().reshape(-1, 2)
    mine = rb.node.residency().reshape(-1, 2)
    assert np.array_equal(whole[gids], mine)
    outside = np.ones(len(whole), dtype=bool)
    outside[gids] = False
    assert not whole[outside].any()
    assert xa["snap"][-1, 4] > 0 and int(xa["h"].sum()) > 0     # DRAM evicted, and requests hit
    # the node's chunk arrays are sized to its share's chunks
    assert rb.node.state_bytes()["per_chunk_arrays"] * trace.n_chunks == \
        ra.node.state_bytes()["per_chunk_arrays"] * len(gids)


def test_a_node_refuses_requests_outside_its_share(bundled):
    trace, base, share = bundled
    cfg = _cfg("lru", {}, base.model, _hw((0, 150 * base.model.fa_bytes(trace.chunk_tokens), 0)), "numba")
    r = NodeRunner(trace, cfg, 0, share=share)
    other = np.flatnonzero(trace.session_id % 3 == 2)[:5]
    with pytest.raises(ValueError, match="outside its share"):
        r.run(other)


def test_a_node_given_the_whole_trace_keeps_its_table(bundled, monkeypatch):
    """A single node's share is every request: it replays on the trace's own table, with no
    relabelling pass (which on whole WEKA cost 0.66 s of set-up for nothing)."""
    trace, base, _ = bundled
    cfg = _cfg("lru", {}, base.model, _hw((0, 150 * base.model.fa_bytes(trace.chunk_tokens), 0)), "numba")
    calls = []
    monkeypatch.setattr(type(trace), "localize", lambda self, idx: calls.append(idx) or (self, None))
    r = NodeRunner(trace, cfg, 0, share=np.arange(trace.n_requests))
    assert r.local_trace is trace and not calls
    half = np.arange(trace.n_requests // 2)
    NodeRunner(trace, cfg, 0, share=half)
    assert len(calls) == 1
    r.run(np.arange(10))            # global indices are its own
