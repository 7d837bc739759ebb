"""The compiled engine holds no copy of the trace's chunk table (decision 96).

A node of the compiled engine reads ``parent``, ``depth``, ``anchor`` and ``flat`` from the
trace itself: int32 where the trace stores them so, through read-only views, shared by every
node of a process. A copy per node (or a widening to int64) would cost 24 B per tracked chunk
and 8 B per chunk reference on every node, the largest part of a replay's memory."""
from __future__ import annotations

import numpy as np
import pytest

import cluster_sim
from cluster_sim.api import prepare
from cluster_sim.config import SimConfig
from cluster_sim.engine import CompiledNode
from cluster_sim.fleet import NodeRunner
from cluster_sim.policies.gandalf import layout as GL
from cluster_sim.policies.gandalf.engine import CapacityAware as GandalfAdapter


def _trace_and_cfg():
    cfg = SimConfig.from_mapping(cluster_sim.compose(["policy=lru", "cache.engine=numba", "fleet.nodes=2"]))
    return prepare(cfg)[0], cfg


def test_nodes_share_the_trace_chunk_table_without_copies():
    trace, cfg = _trace_and_cfg()
    assert trace.flat.dtype == np.int32            # the bundled trace fits int32 ids
    nodes = [NodeRunner(trace, cfg, k).node for k in range(2)]
    for node in nodes:
        assert isinstance(node, CompiledNode)
        for name in ("parent", "depth", "anchor", "flat"):
            mine, theirs = getattr(node.S, name), getattr(trace, name)
            assert mine.dtype == theirs.dtype, name
            assert np.shares_memory(mine, theirs), f"node holds a copy of trace.{name}"
            assert not mine.flags.writeable, name
    assert nodes[0].state_bytes()["chunk_table"] == sum(getattr(trace, k).nbytes for k in ("parent", "depth", "anchor")) \
        + nodes[0].S.sb.nbytes                        # STATE bytes by depth (decision 121)


def test_a_read_only_trace_replays_like_a_writable_one():
    """Ray hands workers read-only arrays: the same results as the driver's writable ones."""
    trace, cfg = _trace_and_cfg()
    model, hw = cfg.model, cfg.hardware_for_node(0)
    idx = np.arange(trace.n_requests, dtype=np.int64)
    ro = {k: getattr(trace, k).copy() for k in ("parent", "depth", "anchor", "flat", "offsets")}
    for a in ro.values():
        a.flags.writeable = False
    a = CompiledNode(trace.parent, trace.depth, trace.anchor, trace.flat, trace.chunk_tokens, model, hw, "lru")
    b = CompiledNode(ro["parent"], ro["depth"], ro["anchor"], ro["flat"], trace.chunk_tokens, model, hw, "lru")
    ra = a.replay_raw(trace.offsets, idx, trace.counted)
    rb = b.replay_raw(ro["offsets"], idx, trace.counted)
    assert np.array_equal(ra, rb)
    assert np.array_equal(a.residency(), b.residency())
    assert ra[:, 0].sum() > 0                      # something was hit: the comparison means something


def test_a_node_holds_52_bytes_per_chunk_and_state_sizes_by_depth():
    """Decision 121: pins are int32 and a STATE's bytes are looked up by the chunk's depth, so a
    node's per-chunk state is res, stamp, pin, flags per payload (2 x 14 B) and dcnt x 3, dany,
    cred, cred_any per chunk (24 B)."""
    trace, cfg = _trace_and_cfg()
    assert cfg.model.has_state
    node = NodeRunner(trace, cfg, 0).node
    b = node.state_bytes()
    assert b["per_chunk_arrays"] == 52 * trace.n_chunks
    assert node.S.pin.dtype == np.int32
    assert len(node.S.sb) == int(trace.depth.max()) + 1
    want = cfg.model.state_bytes_array(trace.depth.astype(np.int64) * trace.chunk_tokens)
    assert np.array_equal(node.S.sb[trace.depth], want)


def test_marconi_keeps_its_segments_narrow_and_under_200_bytes_per_chunk():
    """Decision 149: marconi's ids, positions, counts and request numbers are int32, its marks uint8
    flags (no generation stamps), so its arrays are 120 B per tracked chunk (21 int32 and 4 flags
    per chunk, 4 efficiency keys as float64) and what the node keeps per chunk, engine included, stays
    under 200 B (the touch log and the heaps are sized by activity, not by chunks: on this small trace
    their first allocation alone is most of 200 B per chunk; on whole Mooncake they are 2 B)."""
    cfg = SimConfig.from_mapping(cluster_sim.compose(["policy=marconi", "cache.engine=numba", "hardware.ssd_bytes=4GB"]))
    trace = prepare(cfg)[0]
    assert cfg.model.has_state
    runner = NodeRunner(trace, cfg, 0)
    runner.run(np.arange(trace.n_requests))
    b = runner.node.state_bytes()
    U = trace.n_chunks
    assert b["chunks"] == U
    assert 120 * U <= b["policy_arrays"] <= 120 * U + 2048      # + the header and the FLOP parameters
    assert b["per_chunk_arrays"] + b["chunk_table"] + b["policy_arrays"] < 200 * U - 2048
    # the run selected victims in both tiers: the narrow segments were exercised
    c = runner.node.counters()
    assert c["dram_select_calls"] > 0 and c["ssd_select_calls"] > 0


def _gandalf_node(cfg, trace):
    node = NodeRunner(trace, cfg, 0).node
    assert node.adapter.GJ is not None
    return node


def test_gandalf_keeps_counts_flags_and_generations_narrow():
    """Decision 150: Gandalf's per-chunk counts, ids and generations are int32 and its flags one byte
    (its estimator's arrays of their own types), which takes its arrays from 524 to 329 B per tracked
    chunk on whole Mooncake; on this small trace its tables of fixed size add about 30 B (all int64,
    they came to more than 550 B); the segments Python reads keep their values."""
    cfg = SimConfig.from_mapping(cluster_sim.compose(["policy=gandalf", "cache.engine=numba", "hardware.ssd_bytes=4GB"]))
    trace = prepare(cfg)[0]
    node = _gandalf_node(cfg, trace)
    node.replay_raw(trace.offsets, np.arange(trace.n_requests, dtype=np.int64), trace.counted, trace.arrival_s)
    U = trace.n_chunks
    want = {"HITS": np.int32, "CMEM": np.uint8, "SMEM": np.uint8, "TD0": np.int32, "TS4": np.uint16, "TD3": np.uint16,
            "CKPT": np.bool_, "KINDS": np.int8, "NODES": np.int32, "G": np.int64, "SBX": np.int64,
            "RGRP": np.int32, "RBUF": np.int32, "MGEN": np.int32, "PLAN": np.int32}
    for name, dt in want.items():
        assert node.adapter.gseg(name).dtype == dt, name
    # decision 151: no sizes per payload, a STATE's bytes by depth then the FA bytes
    sbx = node.adapter.gseg("SBX")
    assert len(sbx) == int(trace.depth.max()) + 2
    assert np.array_equal(sbx[:-1][trace.depth], node.S.sb[trace.depth]) and sbx[-1] == node.S.M[node.J.M_FAB]
    assert len(node.adapter.gseg("CMEM")) == 2 * U and len(node.adapter.gseg("TD0")) == U
    assert node.adapter.gseg("CMEM").max() == 1                          # written through the views
    # decision 152: under reuse=hints (the default) no kernel reads first touches or hit counts, so
    # none are kept; a STATE's demands are counted up to 2 (its readers ask 0, 1 or at least 2)
    assert len(node.adapter.gseg("HITS")) == len(node.adapter.gseg("TF")) == 1
    assert node.adapter.gseg("SDEM").dtype == np.uint8 and node.adapter.gseg("SDEM").max() == 2
    assert node.counters()["states_demanded_twice"] > 0
    assert node.state_bytes()["policy_arrays"] < 400 * U


def test_gandalf_generation_reset_changes_nothing():
    """Its tentatives keep selection stamps as uint16 (cleared when a generation would pass
    ``STAMP_MAX``, in the kernel) and its heaps their versions as int32 (renumbered in order when one
    reaches ``GD_GEN_LIMIT``): both resets, forced half-way through a run, leave every later decision
    and counter as it was."""
    cfg = SimConfig.from_mapping(cluster_sim.compose(["policy=gandalf", "cache.engine=numba", "hardware.ssd_bytes=4GB"]))
    trace = prepare(cfg)[0]
    a, b = _gandalf_node(cfg, trace), _gandalf_node(cfg, trace)
    half = trace.n_requests // 2
    first = np.arange(half, dtype=np.int64)
    second = np.arange(half, trace.n_requests, dtype=np.int64)
    ra1 = a.replay_raw(trace.offsets, first, trace.counted, trace.arrival_s)
    rb1 = b.replay_raw(trace.offsets, first, trace.counted, trace.arrival_s)
    assert np.array_equal(ra1, rb1)
    from cluster_sim.policies import _gandalf_jit as GJ
    G = b.adapter.gseg("G")
    assert G[0] > 0 and b.adapter.gseg("TD1").max() > 0 and b.adapter.gseg("TD1").dtype == np.uint16   # stamps to lose
    G[:] = GJ.STAMP_MAX                  # the next selection of each kind clears its stamps
    before = [int(b.adapter.gseg(m)[GJ.M_NEXT]) for m in ("CMETA", "SMETA")]
    b.adapter.gens_guard(limit=1)
    # the heaps' versions renumbered 1..n in their order (decision 151): fewer than were handed out
    assert before[0] > 0                                       # the DRAM heap was used
    for m, v0, kv in zip(("CMETA", "SMETA"), before, ("CKV", "SKV")):
        meta = b.adapter.gseg(m)
        if v0:
            assert meta[GJ.M_NEXT] == meta[GJ.M_LEN] < v0
        assert b.adapter.gseg(kv).max() <= meta[GJ.M_LEN]
    # and the kernel asks for the same at the first request that finds a version at the limit
    b.adapter.gseg("CMETA")[GJ.M_NEXT] = GL.GD_GEN_LIMIT
    ra2 = a.replay_raw(trace.offsets, second, trace.counted, trace.arrival_s)
    rb2 = b.replay_raw(trace.offsets, second, trace.counted, trace.arrival_s)
    assert 0 < b.adapter.gseg("CMETA")[GJ.M_NEXT] < GL.GD_GEN_LIMIT
    assert 0 < b.adapter.gseg("G")[0] < a.adapter.gseg("G")[0]                # the stamps started over
    assert np.array_equal(ra2, rb2)
    assert np.array_equal(a.residency(), b.residency())
    assert a.counters() == b.counters()


def test_gandalf_plan_and_leaf_buffers_are_sized_by_residents_and_grow_before_they_could_fill():
    """Decision 152: the SSD plan and the leaf-event buffer hold resident payloads only, so they are
    sized by what the tiers hold (not by every payload), and the check before each request grows
    them when the residents could outgrow them: a node whose buffers were cut to a few entries
    makes every decision of one that kept them, and ends with them grown. The heaps keep no key
    per payload (their undo never needs one). DRAM is small, so that moves to the SSD are planned
    and the SSD evicts."""
    cfg = SimConfig.from_mapping(cluster_sim.compose(["policy=gandalf", "cache.engine=numba", "hardware.ssd_bytes=4GB",
                                                      "hardware.dram_bytes=2GB"]))
    trace = prepare(cfg)[0]
    a, b = _gandalf_node(cfg, trace), _gandalf_node(cfg, trace)
    assert "CKK" not in GL.GF_SEGMENTS and "SKK" not in GL.GF_SEGMENTS
    held = len(a.adapter.gseg("PLAN"))
    assert held < 2 * trace.n_chunks and len(a.adapter.gseg("KINDS")) == len(a.adapter.gseg("NODES")) == 2 * held
    b.adapter.repack({"PLAN": np.zeros(2, dtype=np.int64), "KINDS": np.zeros(2, dtype=np.int64),
                  "NODES": np.zeros(2, dtype=np.int64)})
    # the leaf memo's int32 stamps start over at the limit (it only saves work)
    b.adapter.gseg("GX")[GL.GX_MEMO] = GL.GD_GEN_LIMIT
    idx = np.arange(trace.n_requests, dtype=np.int64)
    ra = a.replay_raw(trace.offsets, idx, trace.counted, trace.arrival_s)
    rb = b.replay_raw(trace.offsets, idx, trace.counted, trace.arrival_s)
    assert np.array_equal(ra, rb)
    assert np.array_equal(a.residency(), b.residency())
    assert a.counters() == b.counters()
    assert a.counters()["ssd_evictions"] > 0 and a.counters()["moves_fa"] > 0    # plans were made and taken
    assert len(b.adapter.gseg("PLAN")) > 2 and len(b.adapter.gseg("KINDS")) == len(b.adapter.gseg("NODES")) > 2
    assert 0 < b.adapter.gseg("GX")[GL.GX_MEMO] < GL.GD_GEN_LIMIT


def test_a_gandalf_value_too_wide_for_its_segment_is_refused_not_truncated():
    cfg = SimConfig.from_mapping(cluster_sim.compose(["policy=gandalf", "cache.engine=numba"]))
    trace = prepare(cfg)[0]
    node = _gandalf_node(cfg, trace)
    hits = np.zeros(2 * trace.n_chunks, dtype=np.int64)
    hits[3] = 2**40
    with pytest.raises(OverflowError, match="does not fit"):
        node.adapter.repack({"HITS": hits})
    hits[3] = 7
    node.adapter.repack({"HITS": hits})
    assert node.adapter.gseg("HITS")[3] == 7 and node.adapter.gseg("HITS").dtype == np.int32


def test_every_gandalf_segment_is_read_as_the_type_it_is_packed_as():
    """A segment's type is named twice: in the gandalf layout's ``GI_DTYPES`` (how its adapter packs it) and at each
    ``_gt(S, GI_X, dtype)`` / ``_gi(S, GI_X)`` that reads it in the kernels. A mismatch would read the
    bytes as another type without any error, so every read is checked against the table here."""
    import re
    from pathlib import Path

    from cluster_sim.engine import _jit as J
    from cluster_sim.policies.gandalf import kernels as GK
    src = "".join((Path(J.__file__).parent / f"{m}.py").read_text() for m in ("layout", "queue", "residency", "walk", "cascade", "step")) + Path(GK.__file__).read_text()
    names = {"np.int64": "int64", "np.int32": "int32", "np.int8": "int8", "np.uint8": "uint8", "np.bool_": "bool",
             "np.uint16": "uint16", "i4": "int32", "u2": "uint16"}
    reads = [(m, names[t]) for m, t in re.findall(r"_gt\(S, GI_(\w+), ([\w.]+)\)", src)]
    reads += [(m, "int64") for m in re.findall(r"_gi\(S, GI_(\w+)\)", src)]
    assert len(reads) > 60
    for seg, dt in reads:
        assert GL.GI_DTYPES.get(seg, "int64") == dt, f"GI_{seg} is read as {dt}, packed as {GL.GI_DTYPES.get(seg, 'int64')}"
    read = {seg for seg, _ in reads}
    assert set(GL.GI_DTYPES) <= read


def test_gandalf_sizes_by_depth_give_every_payloads_bytes_and_refuse_what_depth_cannot_give():
    """Decision 151: the kernels read a payload's bytes from a table by depth (``psize``), so no
    array of sizes per payload is kept; the table holds exactly the per-payload sizes, and sizes that
    do not follow from depth are refused rather than priced wrong."""
    from cluster_sim.policies._gandalf_jit import psize
    from cluster_sim.policies.gandalf import sizes_by_depth

    depth = np.array([1, 2, 3, 2, 3, 4])
    size = np.empty(12, dtype=np.int64)
    size[0::2] = 4096
    size[1::2] = 100 * depth + 7
    sbx = sizes_by_depth(size, depth)
    C = (np.zeros(1), np.zeros(1), sbx, np.zeros(1), depth)
    assert [psize(C, p) for p in range(12)] == size.tolist()
    size[3] += 1                                   # chunk 1 (depth 2) unlike chunk 3 (depth 2)
    with pytest.raises(ValueError, match="depth"):
        sizes_by_depth(size, depth)


def test_gandalf_heap_tables_are_sized_by_their_own_tiers():
    """Decision 155: the DRAM heap holds DRAM residents only, so its table is sized by the HBM and
    DRAM (their payloads, plus a request's own), not by the SSD; the SSD heap's by every tier. A
    node with a hundred times the SSD keeps the same DRAM table, and both tables hold every entry
    their heaps reach (the run completes, with the same decisions as a node whose tables start at
    one row and grow a quarter past their room)."""
    def run(ssd, rows=None):
        cfg = SimConfig.from_mapping(cluster_sim.compose(["policy=gandalf", "cache.engine=numba", "hardware.dram_bytes=2GB",
                                                          f"hardware.ssd_bytes={ssd}"]))
        trace = prepare(cfg)[0]
        saved = GandalfAdapter.rows
        if rows is not None:
            GandalfAdapter.rows = rows
        try:
            node = _gandalf_node(cfg, trace)
        finally:
            GandalfAdapter.rows = saved
        idx = np.arange(trace.n_requests, dtype=np.int64)
        out = node.replay_raw(trace.offsets, idx, trace.counted, trace.arrival_s)
        return node, out

    small, _ = run("4GB")
    big, out = run("400GB")
    from cluster_sim.policies import _gandalf_jit as GJ
    rows = {n: {t: len(node.adapter.gseg(t)) // 3 for t in ("CST", "SST")} for n, node in (("small", small), ("big", big))}
    assert rows["small"]["CST"] == rows["big"]["CST"] < rows["big"]["SST"]
    for node in (small, big):
        for t, m in (("CST", "CMETA"), ("SST", "SMETA")):
            meta = node.adapter.gseg(m)
            assert 0 < meta[GJ.M_LIVE] and 2 * meta[GJ.M_LIVE] <= len(node.adapter.gseg(t)) // 3
    grown, out1 = run("400GB", rows=1)
    assert np.array_equal(out, out1) and big.counters() == grown.counters()
    for t, room in (("CST", GL.M_GD_CROOM), ("SST", GL.M_GD_ROOM)):
        assert len(grown.adapter.gseg(t)) // 3 >= int(grown.S.M[room]) > 66      # grown, and room for the last request
