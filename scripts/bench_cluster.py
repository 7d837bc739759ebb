#!/usr/bin/env python
"""Figures for the 1,000-node plan of docs/cluster.md (printed, never asserted).

On one machine it measures what a multi-machine fleet is made of, and prints them:

* the trace the object store holds once (bytes), and the epochs: requests and active nodes per
  epoch, so the bytes the driver ships per epoch (an int64 index per request, one call per
  active node) follow;
* the router's cost per request (driver side, no Ray) at 64 and 1,000 nodes, per router;
* Ray's cost per actor call on this machine (a no-op round trip, calls pipelined);
* the memory of a node actor: unique (USS) and resident (RSS) bytes of the actor processes after
  a replay, hosting 1 and 8 nodes each, so the cost of a node and of the process follow.

    python scripts/bench_cluster.py [--limit 200000] [--set key=value ...]

WEKA Claude Code v8 when ../shared/traces has it, else the bundled default trace.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

import cluster_sim
from cluster_sim.api import prepare
from cluster_sim.config import SimConfig
from cluster_sim.locations import shared_trace

WEKA = shared_trace("claude_code")
MB = 2**20


def _mem(pid: int) -> tuple[int, int]:
    """(USS, RSS) bytes of a process from /proc/<pid>/smaps_rollup."""
    vals = {}
    with open(f"/proc/{pid}/smaps_rollup") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) >= 2 and parts[0].endswith(":") and parts[1].isdigit():
                vals[parts[0][:-1]] = int(parts[1]) * 1024
    return vals.get("Private_Clean", 0) + vals.get("Private_Dirty", 0), vals.get("Rss", 0)


def trace_bytes(trace) -> int:
    return int(sum(v.nbytes for v in vars(trace).values() if isinstance(v, np.ndarray)))


def router_cost(trace, base: list[str], nodes: int, router: str) -> float:
    from cluster_sim.router import make_router

    cfg = SimConfig.from_mapping(cluster_sim.compose(base + [f"fleet.nodes={nodes}", f"fleet.router={router}"]))
    hw = [cfg.hardware_for_node(i) for i in range(nodes)]
    r = make_router(trace, cfg.fleet, cfg.seed, cfg.model, hw)
    n = trace.n_requests
    t = time.perf_counter()
    for i in range(n):
        r.dispatched(i, r.route(i))
    return (time.perf_counter() - t) / n


def share_chunks(trace, base: list[str], nodes: int) -> np.ndarray:
    """Chunks each node's share touches under ``fleet.sync=none`` routing (what a node sizes its
    state to on the compiled engine, decision 146)."""
    from cluster_sim.router import make_router

    cfg = SimConfig.from_mapping(cluster_sim.compose(base + [f"fleet.nodes={nodes}"]))
    hw = [cfg.hardware_for_node(i) for i in range(nodes)]
    assign = make_router(trace, cfg.fleet, cfg.seed, cfg.model, hw).route_ahead()
    out = np.zeros(nodes, dtype=np.int64)
    for k in range(nodes):
        share = np.flatnonzero(assign == k)
        if len(share):
            out[k] = len(np.unique(trace.stream(share)[1]))
    return out


def call_cost(calls: int = 3000) -> float:
    from cluster_sim.distributed import ensure_ray

    ray = ensure_ray("local")

    @ray.remote(num_cpus=0)
    class Echo:
        def run(self, idx):
            return None

    a = Echo.remote()
    ray.get(a.run.remote(np.zeros(8, dtype=np.int64)))
    idx = np.arange(40, dtype=np.int64)
    t = time.perf_counter()
    ray.get([a.run.remote(idx) for _ in range(calls)])
    dt = (time.perf_counter() - t) / calls
    ray.kill(a)
    return dt


def actor_memory(trace, base: list[str], nodes: int, workers: int) -> tuple[float, float, float]:
    """Mean USS and RSS of the actor processes after the replay, and the replay's wall time."""
    from cluster_sim import distributed
    from cluster_sim.fleet import run_fleet

    seen: list[tuple[int, int]] = []

    class Measured(distributed.RayNodes):
        def finish(self):
            pids = self.ray.get([a.pid.remote() for a in self.actors])
            seen.extend(_mem(p) for p in pids)
            return super().finish()

    cfg = SimConfig.from_mapping(cluster_sim.compose(base + [f"fleet.nodes={nodes}", "fleet.backend=ray",
                                                            f"fleet.ray_workers={workers}"]))
    raw = run_fleet(trace, cfg, Measured.factory(cfg))
    return (float(np.mean([u for u, _ in seen])), float(np.mean([r for _, r in seen])), raw["sim_wall_s"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=200_000, help="workload.limit_requests (0: the whole trace)")
    ap.add_argument("--set", nargs="*", default=[])
    args = ap.parse_args()
    base = ["fleet.router=session_affinity", "hardware=h100_8x", "cache.chunk_tokens=256", "tracking.enabled=false",
            *args.set]
    if WEKA.exists():
        base += ["workload=claude_code", f"workload.path={WEKA}"]
    else:
        print(f"({WEKA} not found: using the bundled default trace)")
    if args.limit:
        base.append(f"workload.limit_requests={args.limit}")
    cfg0 = SimConfig.from_mapping(cluster_sim.compose(base))
    trace, _, _ = prepare(cfg0)
    n = trace.n_requests
    tb = trace_bytes(trace)
    print("overrides:", " ".join(base))
    print(f"trace: {n:,} requests, {trace.chunk_refs:,} chunk refs, {trace.n_chunks:,} chunks; "
          f"{tb / MB:.1f} MiB of arrays ({tb / max(n, 1):.0f} B per request), put in the object store once")

    from cluster_sim.fleet import epochs_of
    ep = epochs_of(trace, cfg0.fleet.epoch_s)
    _, per_epoch = np.unique(ep, return_counts=True)
    span_h = float(trace.arrival_s[-1] - trace.arrival_s[0]) / 3600 if n else 0.0
    print(f"epochs ({cfg0.fleet.epoch_s:g} s): {len(per_epoch):,} non-empty over {span_h:.1f} h; requests per epoch "
          f"mean {per_epoch.mean():.1f}, p99 {np.percentile(per_epoch, 99):.0f}, max {per_epoch.max()}; "
          f"index bytes shipped per epoch mean {8 * per_epoch.mean():.0f} B")
    for k in (64, 1000):
        active = np.minimum(per_epoch, k)          # at most one call per node with requests in the epoch
        print(f"  {k:5d} nodes: at most {active.mean():.1f} calls per epoch on average "
              f"({int(active.sum()):,} calls for the trace)")

    for router in ("round_robin", "session_affinity", "least_loaded", "kv_aware"):
        costs = [router_cost(trace, base, k, router) for k in (64, 1000)]
        print(f"router {router:17s} {costs[0] * 1e6:8.2f} us/request at 64 nodes, {costs[1] * 1e6:8.2f} at 1,000")

    for k in (16, 64, 1000):
        c = share_chunks(trace, base, k)
        print(f"chunks of a node's share ({cfg0.fleet.router}, {k} nodes): median {np.median(c):,.0f}, "
              f"max {c.max():,}, sum over nodes {c.sum():,} ({c.sum() / max(trace.n_chunks, 1):.2f}x the trace's)")

    dt = call_cost()
    print(f"ray actor call (40 int64 indices, result None): {dt * 1e6:.0f} us per call, pipelined, on this machine")

    for nodes, workers in ((2, 2), (16, 2)):
        uss, rss, wall = actor_memory(trace, base, nodes, workers)
        print(f"node actors: {nodes // workers} node(s) per actor process: USS {uss / MB:.0f} MiB, RSS {rss / MB:.0f} MiB "
              f"per process (replay {wall:.1f} s, {nodes} nodes on {workers} processes)")


if __name__ == "__main__":
    os.environ.setdefault("CI", "1")
    main()
