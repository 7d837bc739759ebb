#!/usr/bin/env python
"""Policy speed: chunk references per second of each policy against ``lru`` on the same run
(printed, never asserted; issue #14 asks every policy for at least 0.3x lru's speed).

Each workload is loaded and chunked once; each policy replays it ``--repeat`` times and the
best wall time counts (the machine may be shared). Workloads: the bundled default, and
Mooncake (512-token chunks) and WEKA Claude Code (512-token chunks, first ``--weka-until-s``
seconds) at DRAM = 1% of the working set and SSD = 10x DRAM, HBM 0, when ../shared/traces
exists.

    python scripts/bench_policies.py
    python scripts/bench_policies.py --policies lru gandalf "gandalf:policy.reuse=population" --repeat 3

``--issue-run`` instead times issue #14's run (whole Mooncake, ``qwen3_next_80b_a3b``, 512-token
chunks, DRAM 26 GB, SSD 263 GB, the hardware's HBM) for ``--policies`` (``all``: every policy):

    python scripts/bench_policies.py --issue-run --policies all --repeat 3

``--weka-run`` times the issue's whole WEKA v8 three-tier hybrid run the same way (``qwen3_next_80b_a3b``,
256-token chunks, HBM 0, DRAM 74 GB, SSD 738 GB; the whole trace):

    python scripts/bench_policies.py --weka-run --policies lru gandalf --repeat 1

Beside each policy's speed it prints the bytes of simulator state it holds per tracked chunk
after the whole replay, on the compiled engine (``CompiledNode.state_bytes``: the engine's
per-chunk arrays, chunk table, touch log and heaps, plus the policy's own arrays), measured on
one more replay of the same stream.

``--study-points`` times points of the paper's study (conf/experiment/paper_points) once each on
its main whole-WEKA setting (``experiment=paper_weka``: Poisson arrivals, Kimi Linear, 512-token
chunks, DRAM 1% and SSD 10% of the working set, the whole trace), the trace loaded once, and
prints each point's ``sim_wall_s`` and their sum (what the study's points cost, before Ray's):

    python scripts/bench_policies.py --study-points lru g1 gp1 mar0 oadm
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import cluster_sim
from cluster_sim.api import prepare
from cluster_sim.config import SimConfig
from cluster_sim.locations import shared_trace
from cluster_sim.study import working_set

PATHS = {name: shared_trace(name) for name in ("mooncake", "claude_code")}


def workloads(weka_until: float):
    yield "default", ["workload=default"]
    common = ["cache.engine=numba", "model=qwen3_next_80b_a3b", "cache.chunk_tokens=512", "hardware=h100_8x", "hardware.hbm_cache_bytes=0"]
    if PATHS["mooncake"].exists():
        yield "mooncake", ["workload=mooncake", f"workload.path={PATHS['mooncake']}", *common]
    else:
        print(f"(skipping Mooncake: {PATHS['mooncake']} not found)")
    if PATHS["claude_code"].exists():
        yield f"weka({weka_until:.0f}s)", ["workload=claude_code", f"workload.path={PATHS['claude_code']}",
                                           f"workload.until_s={weka_until}", *common]
    else:
        print(f"(skipping WEKA: {PATHS['claude_code']} not found)")


ISSUE_RUN = ["cache.engine=numba", "model=qwen3_next_80b_a3b", "cache.chunk_tokens=512", "hardware.dram_bytes=26GB",
             "hardware.ssd_bytes=263GB"]
WEKA_RUN = ["cache.engine=numba", "model=qwen3_next_80b_a3b", "cache.chunk_tokens=256", "hardware.hbm_cache_bytes=0",
            "hardware.dram_bytes=74GB", "hardware.ssd_bytes=738GB"]
ALL = ["lru", "gandalf", "lru_k", "hot_prefix", "marconi", "workload_aware", "dynamic_random", "oracle",
       "oracle_admission", "write_through", "write_through_selective"]


def replays(summary) -> int:
    """How many times the run replayed the node's stream: ``oracle_admission`` replays it once per
    pass to reach its fixed point (docs/decisions.md 140), and ``sim_wall_s`` counts every pass."""
    return max(int(n.get("policy.oracle_admission.passes", 1)) for n in summary.nodes)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policies", nargs="*", default=["lru", "gandalf", "gandalf:policy.reuse=population"])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--weka-until-s", type=float, default=600.0)
    ap.add_argument("--issue-run", action="store_true", help="only issue #14's whole-Mooncake run")
    ap.add_argument("--weka-run", action="store_true", help="only issue #14's whole WEKA v8 three-tier run")
    ap.add_argument("--study-points", nargs="+", metavar="POINT",
                    help="time these points of the paper's study on whole WEKA (paper_weka, 1%%:10%% of W)")
    args = ap.parse_args()
    if args.study_points:
        return study_points(args.study_points)
    if args.policies == ["all"]:
        args.policies = ALL
    if args.issue_run:
        if not PATHS["mooncake"].exists():
            raise SystemExit(f"bench_policies: {PATHS['mooncake']} not found (the issue's run needs Mooncake)")
        runs = [("mooncake (whole, issue #14's run)", ["workload=mooncake", f"workload.path={PATHS['mooncake']}",
                                                       *ISSUE_RUN])]
    elif args.weka_run:
        if not PATHS["claude_code"].exists():
            raise SystemExit(f"bench_policies: {PATHS['claude_code']} not found (the WEKA run needs it)")
        runs = [("WEKA v8 (whole, issue #14's three-tier run)", ["workload=claude_code",
                                                                 f"workload.path={PATHS['claude_code']}", *WEKA_RUN])]
    else:
        runs = workloads(args.weka_until_s)
    for label, base in runs:
        if label not in ("default",) and not (args.issue_run or args.weka_run):
            w = working_set(base)
            base = base + [f"hardware.dram_bytes={int(w * 0.01)}", f"hardware.ssd_bytes={int(w * 0.1)}"]
        trace, _, _ = prepare(SimConfig.from_mapping(cluster_sim.compose(base)))
        print(f"\n{label}: {trace.n_requests:,} requests, {trace.chunk_refs:,} chunk references")
        ref = None
        for spec in args.policies:
            name, _, params = spec.partition(":")
            cfg = cluster_sim.compose(base + [f"policy={name}"] + [p for p in params.split(",") if p])
            best = None
            for _ in range(args.repeat):
                t = time.perf_counter()
                s = cluster_sim.run(cfg, trace=trace, write=False)
                wall = time.perf_counter() - t
                rate = s.fleet["sim_chunk_refs_per_s"]
                if best is None or rate > best[0]:
                    best = (rate, wall, s.fleet["chunk_miss_ratio"], replays(s))
            if name == "lru" and not params:
                ref = best[0]
            ratio = f"{best[0] / ref:5.2f}x lru" if ref else ""
            if best[3] > 1 and ref:     # a hindsight construction: its time covers every replay
                ratio += f"  ({best[3]} replays: {best[0] * best[3] / ref:4.2f}x lru per replay)"
            print(f"  {spec:40s} {best[0]:>10,.0f} refs/s  (run {best[1]:6.1f} s, miss {best[2]:.4f}, "
                  f"{state_per_chunk(trace, cfg)})  {ratio}")


def state_per_chunk(trace, cfg) -> str:
    """The compiled node's simulator state per tracked chunk after replaying the whole stream on one
    node: the engine's part and the policy's own arrays, in bytes ("" on the interpreted engine)."""
    from cluster_sim.fleet import NodeRunner

    runner = NodeRunner(trace, SimConfig.from_mapping(cfg), 0, future_idx=np.arange(trace.n_requests))
    if runner.engine != "numba":
        return "state: interpreted engine"
    runner.run(np.arange(trace.n_requests))
    b = runner.node.state_bytes()
    n = max(b["chunks"], 1)
    eng = b["per_chunk_arrays"] + b["chunk_table"] + b["touch_log"] + b["heaps"]
    return f"state {eng / n:.0f} + {b['policy_arrays'] / n:.0f} B/chunk"


def study_points(points):
    """Each point's ``sim_wall_s`` on the study's main whole-WEKA setting (one run each)."""
    if not PATHS["claude_code"].exists():
        raise SystemExit(f"bench_policies: {PATHS['claude_code']} not found (the study's points need WEKA)")
    base = ["experiment=paper_weka", f"workload.path={PATHS['claude_code']}"]
    w = working_set(base)
    base += [f"hardware.dram_bytes={int(w * 0.01)}", f"hardware.ssd_bytes={int(w * 0.1)}"]
    trace, _, _ = prepare(SimConfig.from_mapping(cluster_sim.compose(base)))
    print(f"whole WEKA (paper_weka, W = {w / 1e9:,.1f} GB, DRAM 1%, SSD 10%): {trace.n_requests:,} requests, "
          f"{trace.chunk_refs:,} chunk references")
    total = 0.0
    for point in points:
        s = cluster_sim.run(cluster_sim.compose(base + [f"+experiment/paper_points={point}"]), trace=trace,
                            write=False)
        wall = s.fleet["sim_wall_s"]
        total += wall
        print(f"  {point:10s} sim_wall {wall:7.1f} s  engine {s.run['engine']:6s}  miss {s.fleet['chunk_miss_ratio']:.4f}",
              flush=True)
    print(f"  {'sum':10s} sim_wall {total:7.1f} s")


if __name__ == "__main__":
    main()
