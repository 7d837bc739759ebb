#!/usr/bin/env python
"""Load the full WEKA Claude Code v8 trace and print wall time, peak RSS and the counts.

    python scripts/bench_load.py [--path TRACE] [--placement poisson|lanes] [--lanes N]

Runs each measurement in a fresh process (peak RSS, ``resource.getrusage``,
is per process) with a private, initially empty cache folder:

* ``convert``: ``read_claude_code`` alone (JSON → Arrow, unplaced);
* ``cold``:    ``read_workload`` with an empty cache (convert, write the cache entry, place);
* ``warm``:    ``read_workload`` again (read the cache, place);
* ``prepare``: ``cluster_sim.api.prepare`` of ``experiment=paper_weka`` twice in one process: all a
  run does before replaying (read, place, chain, chunk), then the trace the process kept
  (docs/decisions.md 119), as a sweep's second point in a Ray worker sees it.

The budget is < 60 s and < 4 GiB RSS for the cold load on a 2-core machine.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cluster_sim.locations import shared_trace

DEFAULT = shared_trace("claude_code")


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def _phase(args) -> None:
    from cluster_sim.config import WorkloadConfig
    from cluster_sim.trace.claude_code import read_claude_code
    from cluster_sim.trace.load import read_workload

    if args.phase == "prepare":
        import cluster_sim
        from cluster_sim.api import prepare
        from cluster_sim.config import SimConfig

        cfg = SimConfig.from_mapping(cluster_sim.compose(["experiment=paper_weka", f"workload.path={args.path}",
                                                          "tracking.enabled=false"]))
        t0 = time.perf_counter()
        trace = prepare(cfg)[0]
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        again = prepare(cfg)[0]
        second = time.perf_counter() - t0
        assert again is trace
        print(json.dumps({"phase": "prepare", "wall_s": round(first, 2), "again_s": round(second, 4),
                          "peak_rss_gib": round(_peak_rss_bytes() / 2**30, 3), "requests": trace.n_requests,
                          "chunk_refs": trace.chunk_refs}))
        return
    t0 = time.perf_counter()
    if args.phase == "convert":
        table = read_claude_code(args.path)
    else:
        m = {"format": "claude_code", "path": args.path, "placement": args.placement}
        if args.placement == "lanes":
            m["lanes"] = args.lanes
        table = read_workload(WorkloadConfig.from_mapping(m), seed=0)
    wall = time.perf_counter() - t0
    import pyarrow.compute as pc

    refs = int(pc.sum(pc.list_value_length(table.column("block_hashes"))).as_py() or 0)
    meta = table.schema.metadata
    arr = table.column("arrival_s")
    print(json.dumps({
        "phase": args.phase,
        "wall_s": round(wall, 2),
        "peak_rss_gib": round(_peak_rss_bytes() / 2**30, 3),
        "requests": table.num_rows,
        "sessions": int(pc.count_distinct(table.column("session_id")).as_py()),
        "block_references": refs,
        "duplicates_dropped": int(meta[b"duplicates_dropped"]),
        "span_s": round(float(pc.max(arr).as_py() - pc.min(arr).as_py()), 1) if table.num_rows else 0.0,
    }))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--path", default=str(DEFAULT))
    ap.add_argument("--placement", default="poisson", choices=("poisson", "lanes"))
    ap.add_argument("--lanes", type=int, default=32)
    ap.add_argument("--phase", choices=("convert", "cold", "warm", "prepare"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.phase:
        _phase(args)
        return 0
    if not Path(args.path).exists():
        print(f"bench_load: no trace at {args.path}", file=sys.stderr)
        return 2
    print(f"trace: {args.path}  ({os.cpu_count()} CPUs)")
    with tempfile.TemporaryDirectory(prefix="cluster_sim_bench_cache_") as cache:
        env = dict(os.environ, CLUSTER_SIM_CACHE=cache)
        for phase in ("convert", "cold", "warm", "prepare"):
            cmd = [sys.executable, __file__, "--phase", phase, "--path", args.path, "--placement", args.placement,
                   "--lanes", str(args.lanes)]
            p = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if p.returncode:
                print(p.stderr, file=sys.stderr)
                return p.returncode
            r = json.loads(p.stdout.strip().splitlines()[-1])
            if phase == "prepare":
                print(f"{phase:8s} {r['wall_s']:7.2f} s  then {r['again_s']:.4f} s for the kept trace  "
                      f"peak RSS {r['peak_rss_gib']:.2f} GiB  requests {r['requests']:,}  "
                      f"chunk refs {r['chunk_refs']:,} (paper_weka, 512-token chunks)")
                continue
            print(f"{phase:8s} {r['wall_s']:7.2f} s  peak RSS {r['peak_rss_gib']:.2f} GiB  "
                  f"requests {r['requests']:,}  sessions {r['sessions']:,}  "
                  f"block refs {r['block_references']:,}  duplicates dropped {r['duplicates_dropped']}  "
                  f"span {r['span_s']:,.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
