#!/usr/bin/env python
"""Fleet scaling benchmark (printed, never asserted).

Wall time of a 16-node fleet on the WEKA Claude Code v8 trace (or the bundled default
when ../shared/traces is absent), in-process vs Ray with 1 and 2 actor processes, and
the parallel efficiency (in-process time / (Ray time × workers)). On a 2-core machine
expect at most 2× speed-up.

    python scripts/bench_fleet.py [--nodes 16] [--limit N] [--repeat 3] [--set key=value ...]
    python scripts/bench_fleet.py --set hardware.dram_bytes=50GB hardware.ssd_bytes=500GB fleet.epoch_s=600
"""
from __future__ import annotations

import argparse
import time


import cluster_sim
from cluster_sim.api import prepare
from cluster_sim.config import SimConfig
from cluster_sim.locations import shared_trace

WEKA = shared_trace("claude_code")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=16)
    ap.add_argument("--limit", type=int, default=None, help="workload.limit_requests")
    ap.add_argument("--chunk-tokens", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of each backend; the best sim_wall_s of them is compared (a run of "
                         "about a second varies by tens of percent on a shared 2-core machine)")
    ap.add_argument("--set", nargs="*", default=[],
                    help="extra Hydra overrides, e.g. hardware.dram_bytes=50GB fleet.epoch_s=600 policy=gandalf")
    args = ap.parse_args()
    base = [f"fleet.nodes={args.nodes}", "fleet.router=session_affinity", "hardware=h100_8x",
            f"cache.chunk_tokens={args.chunk_tokens}", *args.set]
    if WEKA.exists():
        base += ["workload=claude_code", f"workload.path={WEKA}"]
    else:
        print(f"({WEKA} not found: using the bundled default trace)")
    if args.limit:
        base.append(f"workload.limit_requests={args.limit}")
    cfg0 = SimConfig.from_mapping(cluster_sim.compose(base))
    t = time.perf_counter()
    trace, _, _ = prepare(cfg0)
    print("overrides:", " ".join(base))
    print(f"trace: {trace.n_requests:,} requests, {trace.chunk_refs:,} chunk refs, {trace.n_chunks:,} chunks "
          f"(loaded and chunked in {time.perf_counter() - t:.1f} s)")
    rows = []
    for label, extra in [("in-process", []), ("ray, 1 worker", ["fleet.backend=ray", "fleet.ray_workers=1"]),
                         ("ray, 2 workers", ["fleet.backend=ray", "fleet.ray_workers=2"])]:
        cfg = SimConfig.from_mapping(cluster_sim.compose(base + extra))
        walls, outs = [], []
        for _ in range(max(1, args.repeat)):
            t = time.perf_counter()
            s = cluster_sim.run(cfg, trace=trace, write=False)
            outs.append(time.perf_counter() - t)
            walls.append(s.fleet["sim_wall_s"])
        rows.append((label, min(walls), min(outs), s.run["actor_processes"], s.fleet["chunk_miss_ratio"]))
        print(f"{label:16s} sim_wall_s {min(walls):8.2f} (best of {len(walls)}: "
              f"{', '.join(f'{w:.2f}' for w in walls)})  run() {min(outs):8.2f} s  "
              f"actor processes {s.run['actor_processes']}  chunk_miss_ratio {s.fleet['chunk_miss_ratio']:.4f}")
    base_t = rows[0][1]
    for label, wall, _, procs, _ in rows[1:]:
        w = max(1, procs)
        print(f"{label:16s} speed-up vs in-process {base_t / wall:.2f}x, parallel efficiency {base_t / (wall * w):.2f}")
    assert len({r[4] for r in rows}) == 1, "backends disagree"


if __name__ == "__main__":
    main()
