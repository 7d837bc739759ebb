#!/usr/bin/env python
"""Peak memory of loading and replaying a large synthetic workload (issue 15), printed, never asserted.

    python scripts/bench_memory.py --sessions 275000        # about 1 M requests (1.02 M)
    python scripts/bench_memory.py --sessions 2750000       # about 10 M requests

Each measurement runs in a fresh child process, so its peak RSS
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``: the whole process, Python,
numpy, Arrow and numba included) belongs to that run alone. The child
composes ``workload=synthetic`` with ``workload.synthetic.num_sessions`` set
(the other knobs at ``default_spec()``: about 3.7 requests per session), a
single node and ``policy=lru``, then

* ``load``:   generates and chunks the trace (``cluster_sim.api.prepare``: streamed, the
  block-hash column never built, docs/decisions.md 107-110);
* ``replay``: replays it (``cluster_sim.run(..., trace=..., write=False)``).

Printed: requests, tracked chunks, chunk references, peak RSS after each
phase, and peak RSS per tracked chunk (the whole process divided by the
chunks, so it includes the fixed cost of the interpreter and libraries,
which is also printed: the RSS of the child before it loads anything).
``--no-replay`` stops after loading (a 10 M run replays for a long time).
The target: 1 M requests within 1.5 GB peak RSS; 10 M within 8 GB.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time


def _peak() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024   # Linux: KiB


def _current() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _child(args) -> None:
    out = {"base_rss": _current()}
    import cluster_sim
    from cluster_sim.api import prepare
    from cluster_sim.config import SimConfig

    overrides = ["workload=synthetic", f"+workload.synthetic.num_sessions={args.sessions}", "policy=lru",
                 f"seed={args.seed}"] + list(args.override)
    m = cluster_sim.compose(overrides)
    cfg = SimConfig.from_mapping(m)
    out["import_rss"] = _current()
    t0 = time.perf_counter()
    trace = prepare(cfg)[0]
    out["load_s"] = time.perf_counter() - t0
    out["load_peak"] = _peak()
    out["load_rss"] = _current()
    out["requests"] = trace.n_requests
    out["chunks"] = trace.n_chunks
    out["refs"] = trace.chunk_refs
    out["trace_bytes"] = sum(getattr(trace, k).nbytes for k in (
        "arrival_s", "request_id", "session_id", "turn", "input_tokens", "output_tokens", "offsets", "flat",
        "parent", "depth", "anchor", "chunk_hash", "counted", "stop_reason", "think_time_s", "api_time_s",
        "agent"))
    if not args.no_replay:
        t0 = time.perf_counter()
        s = cluster_sim.run(m, trace=trace, write=False)
        out["replay_s"] = time.perf_counter() - t0
        out["miss"] = s.fleet["token_miss_ratio"]
    out["peak"] = _peak()
    print("RESULT " + json.dumps(out), flush=True)


def _gb(b) -> str:
    return f"{b / 1e9:.2f} GB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=275_000, help="workload.synthetic.num_sessions")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-replay", action="store_true", help="stop after loading and chunking")
    ap.add_argument("--override", action="append", default=[], help="one more Hydra override (repeatable)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args)
        return
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--sessions", str(args.sessions),
           "--seed", str(args.seed)] + (["--no-replay"] if args.no_replay else [])
    for o in args.override:
        cmd += ["--override", o]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if p.returncode != 0 or line is None:
        print(p.stdout + p.stderr, file=sys.stderr)
        print(f"bench_memory: the child failed (exit {p.returncode})", file=sys.stderr)
        sys.exit(1)
    r = json.loads(line[len("RESULT "):])
    print(f"sessions             {args.sessions:,}")
    print(f"requests             {r['requests']:,}")
    print(f"tracked chunks       {r['chunks']:,}")
    print(f"chunk references     {r['refs']:,}")
    print(f"RSS after imports    {_gb(r['import_rss'])}")
    print(f"load (gen+chunk)     {r['load_s']:.1f} s, peak RSS {_gb(r['load_peak'])}, "
          f"RSS after {_gb(r['load_rss'])}")
    print(f"ChunkedTrace arrays  {_gb(r['trace_bytes'])} "
          f"({r['trace_bytes'] / max(r['chunks'], 1):.0f} B per tracked chunk)")
    if "replay_s" in r:
        print(f"replay               {r['replay_s']:.1f} s (token miss ratio {r['miss']:.6f})")
    print(f"peak RSS             {_gb(r['peak'])}  "
          f"({r['peak'] / max(r['chunks'], 1):.0f} B per tracked chunk, whole process; "
          f"{(r['peak'] - r['import_rss']) / max(r['chunks'], 1):.0f} B above the imports)")
    print(f"wall                 {wall:.1f} s")


if __name__ == "__main__":
    main()
