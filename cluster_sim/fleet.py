"""Runs a fleet of nodes over one request stream, in this process.

Routing happens ahead of the nodes (a router knows only its own dispatch
history), so each node's stream is fixed before replay and the nodes are
independent: this is what lets the Ray backend (``distributed.py``) run them in
parallel and still give bit-identical results.
"""
from __future__ import annotations

import time
import zlib

import numpy as np

from .errors import ConfigError
from .metrics import NodeStats
from .node import NodeSim, floor_pass
from .policies.base import make_policy


def node_rng(seed: int, node_index: int) -> np.random.Generator:
    """Per-node stream derived from the root seed (identical in every backend)."""
    return np.random.default_rng(np.random.SeedSequence([seed, 1, node_index]))


def route(trace, fleet, seed: int) -> np.ndarray:
    """Node index of every request."""
    n = trace.n_requests
    k = fleet.nodes
    if k == 1:
        return np.zeros(n, dtype=np.int64)
    if fleet.router == "round_robin":
        return np.arange(n, dtype=np.int64) % k
    if fleet.router == "random":
        return np.random.default_rng(np.random.SeedSequence([seed, 2])).integers(0, k, size=n)
    if fleet.router == "session_affinity":
        out = np.empty(n, dtype=np.int64)
        for i in range(n):
            sid = int(trace.session_id[i])
            if sid >= 0:
                key = b"s" + sid.to_bytes(8, "little", signed=True)
            else:
                p = trace.path(i)[:fleet.affinity_chunks]
                key = b"c" + np.asarray(trace.chunk_hash[p], dtype=np.uint64).tobytes()
            out[i] = zlib.crc32(key) % k
        return out
    raise ConfigError("fleet.router", f"router {fleet.router!r} is not available yet in this version; "
                      "available: round_robin, random, session_affinity")


def run_node(trace, idx: np.ndarray, cfg, node_index: int) -> tuple[NodeStats, dict]:
    """Replay the requests ``idx`` on one node. Returns its stats and per-request series."""
    hw = cfg.hardware_for_node(node_index)
    policy = make_policy(cfg.policy.name, cfg.policy.params)
    future = None
    if policy.needs_future:
        from .policies.base import FutureStream
        sub = trace.subset(idx)
        future = FutureStream(offsets=sub.offsets, flat=sub.flat, arrival_s=sub.arrival_s)
    node = NodeSim(trace.parent, trace.depth, trace.anchor, trace.flat, trace.chunk_tokens, cfg.model, hw,
                   policy, node_index=node_index, rng=node_rng(cfg.seed, node_index), future=future)
    off = trace.offsets
    flat = trace.flat
    arr = trace.arrival_s[idx].tolist()
    inp = trace.input_tokens[idx].tolist()
    out_t = trace.output_tokens[idx].tolist()
    cnt = trace.counted[idx].tolist()
    sid = trace.session_id[idx].tolist()
    turn = trace.turn[idx].tolist()
    cats = trace.category
    idx_l = idx.tolist()
    hs = np.zeros(len(idx), dtype=np.int64)
    ms = np.zeros(len(idx), dtype=np.int64)
    wr = np.zeros(len(idx), dtype=np.int64)
    s = node.stats
    for j, i in enumerate(idx_l):
        before = s.ssd_bytes_written_fa + s.ssd_bytes_written_state
        rec = node.process(flat[off[i]:off[i + 1]], inp[j], arr[j], counted=cnt[j], session_id=sid[j],
                           category=None if cats is None else cats[i], turn=turn[j], output_tokens=out_t[j])
        hs[j] = rec["h"]
        ms[j] = rec["m"]
        wr[j] = s.ssd_bytes_written_fa + s.ssd_bytes_written_state - before
    stats = node.finish()
    series = {"h": hs, "m": ms, "ssd_bytes_written": wr}
    return stats, series


def run_inprocess(trace, cfg) -> dict:
    """Route and replay every node here. Returns raw results for :mod:`cluster_sim.api`."""
    t0 = time.perf_counter()
    assign = route(trace, cfg.fleet, cfg.seed)
    results = []
    for k in range(cfg.fleet.nodes):
        idx = np.flatnonzero(assign == k)
        results.append(run_node(trace, idx, cfg, k))
    wall = time.perf_counter() - t0
    return {"assign": assign, "results": results, "sim_wall_s": wall, "actor_processes": 0}


def floors(trace, cfg, assign) -> tuple[list[tuple[float, float]], tuple[float, float]]:
    """Per-node floors on each node's own stream and the fleet floor on the whole stream."""
    out = []
    for k in range(cfg.fleet.nodes):
        hw = cfg.hardware_for_node(k)
        rate = hw.gpus_per_node * hw.gpu_flops * hw.mfu
        idx = np.flatnonzero(assign == k)
        sub = trace.subset(idx) if cfg.fleet.nodes > 1 else trace
        out.append(floor_pass(sub.offsets, sub.flat, sub.n_chunks, sub.input_tokens, sub.counted, cfg.model,
                              trace.chunk_tokens, rate, hw.gpus_per_node))
    if cfg.fleet.nodes == 1:
        return out, out[0]
    hw = cfg.hardware
    rate = hw.gpus_per_node * hw.gpu_flops * hw.mfu
    whole = floor_pass(trace.offsets, trace.flat, trace.n_chunks, trace.input_tokens, trace.counted, cfg.model,
                       trace.chunk_tokens, rate, hw.gpus_per_node)
    return out, whole
