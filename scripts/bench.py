#!/usr/bin/env python
"""Speed and memory of the single-node simulator (issue: the core), printed, never asserted.

For each workload it runs ``lru`` on both request-step engines (``cache.engine=python``, the
interpreted reference, and ``numba``, the compiled engine), each twice:

* as configured for the libCacheSim comparison: pure attention (llama3_1_70b), HBM 0,
  SSD 0, one node, DRAM sized to N chunks — the same chunk stream is then replayed by
  libCacheSim's LRU (``process_trace``, chunks fed deepest-first) when the ``[ref]``
  extra is installed, and the ratio of chunk references per second is printed;
* as a user runs it (the workload's default three-tier hybrid config).

``sim_chunk_refs_per_s`` (requested full chunks / ``sim_wall_s``, the contract's
definition) is checked against this script's own timing of ``cluster_sim.run`` from
outside. Memory: bytes of per-chunk simulator state per tracked chunk, and the
tracemalloc peak of a replay divided by the chunks tracked.

    python scripts/bench.py                 # default trace, and Mooncake when ../shared/traces exists
    python scripts/bench.py --repeat 3
    python scripts/bench.py --only-mooncake --weka   # the issue's Mooncake and whole-WEKA figures
                                                     # (WEKA on the compiled engine; --weka-python adds
                                                     # the interpreted one, ~75 s plus a slow tracemalloc pass)
"""
from __future__ import annotations

import argparse
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np


import cluster_sim
from cluster_sim.api import prepare
from cluster_sim.config import SimConfig
from cluster_sim.locations import shared_trace
from cluster_sim.model import load_model

MOONCAKE = shared_trace("mooncake")


def lcs_lru(trace, n_chunks: int):
    """libCacheSim LRU over the same chunk stream (deepest first per request): (refs/s, miss ratio)."""
    try:
        import libcachesim as lcs
    except ImportError:
        return None
    ids = []
    for i in range(trace.n_requests):
        ids.append(trace.path(i)[::-1])
    ids = np.concatenate(ids) if ids else np.zeros(0, np.int64)
    rec = np.zeros(len(ids), dtype=np.dtype([("t", "<u4"), ("id", "<u8"), ("sz", "<u4"), ("nx", "<i8")]))
    rec["id"] = ids.astype(np.uint64) + 1
    rec["sz"] = 1
    rec["nx"] = -1
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "chunks.oracleGeneral"
        rec.tofile(f)
        best = None
        for _ in range(3):
            reader = lcs.TraceReader(str(f), trace_type=lcs.TraceType.ORACLE_GENERAL_TRACE)
            cache = lcs.LRU(n_chunks)
            t0 = time.perf_counter()
            ratio, _ = cache.process_trace(reader)
            dt = time.perf_counter() - t0
            best = dt if best is None else min(best, dt)
    return len(ids) / best, ratio


def state_bytes_per_chunk(trace) -> float:
    """Per-chunk arrays a node and the chunk table keep (excluding the per-reference stream)."""
    from cluster_sim.config import HardwareConfig
    from cluster_sim.node import NodeSim
    from cluster_sim.policies.base import make_policy

    node = NodeSim(trace.parent, trace.depth, trace.anchor, trace.flat, trace.chunk_tokens,
                   load_model("llama3_1_70b"), HardwareConfig.from_mapping({"dram_bytes": "1TB"}),
                   make_policy("lru"))
    st = node.st
    arrays = [st.size, st.res, st.stamp, st.pin, st.dany, st.state_bytes, *st.dcnt, node.ssd_adm_counted,
              node.ssd_hit, trace.parent, trace.depth, trace.anchor, trace.chunk_hash]
    return sum(a.nbytes for a in arrays) / trace.n_chunks


def engine_state_bytes(trace, cfg) -> float:
    """Bytes of simulator state per tracked chunk of the compiled engine after a whole replay
    (per-chunk arrays, the chunk table, the touch log and candidate heaps as allocated)."""
    from cluster_sim.engine import CompiledNode

    node = CompiledNode(trace.parent, trace.depth, trace.anchor, trace.flat, trace.chunk_tokens, cfg.model,
                        cfg.hardware, "lru")
    node.replay(trace, np.arange(trace.n_requests))
    b = node.state_bytes()
    return (b["per_chunk_arrays"] + b["chunk_table"] + b["touch_log"] + b["heaps"]) / b["chunks"]


def bench(name: str, overrides: list[str], repeat: int, compare: bool, n_chunks: int | None,
          engines=("python", "numba")):
    """Both engines (cache.engine), then libCacheSim on the same chunk stream when ``compare``."""
    from cluster_sim.engine import ensure_compiled

    ensure_compiled()
    rates = {}
    for eng in engines:
        rates[eng] = _bench_one(name, overrides + [f"cache.engine={eng}"], repeat, compare and eng == engines[-1],
                                n_chunks, rates)


def _bench_one(name, overrides, repeat, compare, n_chunks, rates):
    cfg = SimConfig.from_mapping(cluster_sim.compose(overrides))
    trace, _, _ = prepare(cfg)
    best = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        s = cluster_sim.run(cfg, trace=trace, write=False)
        outside = time.perf_counter() - t0
        if best is None or s.fleet["sim_wall_s"] < best[0].fleet["sim_wall_s"]:
            best = (s, outside)
    s, outside = best
    f = s.fleet
    refs = trace.chunk_refs
    print(f"\n== {name}: {' '.join(overrides)}")
    print(f"  requests {f['requests']:,}  chunk refs {refs:,}  chunks tracked {trace.n_chunks:,}  "
          f"chunk_miss_ratio {f['chunk_miss_ratio']:.4f}")
    print(f"  sim_wall_s {f['sim_wall_s']:.3f}  sim_chunk_refs_per_s {f['sim_chunk_refs_per_s']:,.0f}")
    print(f"  run() timed from outside {outside:.3f} s (includes floors and summary) -> "
          f"{refs / outside:,.0f} refs/s; sim_wall_s / outside = {f['sim_wall_s'] / outside:.2f}")
    tracemalloc.start()
    cluster_sim.run(cfg, trace=trace, write=False)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    if cfg.engine == "numba":
        print(f"  memory (compiled engine): {engine_state_bytes(trace, cfg):.0f} B of simulator state per tracked "
              f"chunk; replay peak (tracemalloc) {peak / trace.n_chunks:.0f} B per tracked chunk")
    else:
        print(f"  memory: {state_bytes_per_chunk(trace):.0f} B/chunk of per-chunk state; "
              f"replay peak (tracemalloc) {peak / trace.n_chunks:.0f} B per tracked chunk")
    rates[cfg.engine] = f["sim_chunk_refs_per_s"]
    if compare:
        r = lcs_lru(trace, n_chunks)
        if r is None:
            print("  libCacheSim: not installed (pip install -e '.[ref]')")
        else:
            rate, ratio = r
            print(f"  libCacheSim LRU(process_trace): {rate:,.0f} refs/s, miss ratio {ratio:.4f}")
            for eng, v in rates.items():
                print(f"    cluster_sim engine={eng} / libCacheSim = {v / rate:.3f}x")
    return f["sim_chunk_refs_per_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--weka", action="store_true", help="also the whole WEKA v8 three-tier hybrid run")
    ap.add_argument("--only-mooncake", action="store_true", help="skip the bundled trace")
    ap.add_argument("--weka-python", action="store_true",
                    help="also run the whole WEKA trace on the interpreted engine (about 75 s, and many "
                         "minutes more for its tracemalloc pass)")
    args = ap.parse_args()
    llama = load_model("llama3_1_70b")
    # bundled default: 256-token chunks; DRAM of 2,000 chunks
    n = 2000
    dram = n * llama.fa_bytes(256)
    single = ["model=llama3_1_70b", "policy=lru", "hardware.hbm_cache_bytes=0", "hardware.ssd_bytes=0",
              f"hardware.dram_bytes={dram}"]
    if not args.only_mooncake:
        bench("default trace, single tier (libCacheSim setup)", single + ["cache.chunk_tokens=256"], args.repeat,
              True, n)
        bench("default trace, as configured (3 tiers, hybrid)", [], args.repeat, False, None)
    if MOONCAKE.exists():
        n = 8000                      # the setting: DRAM = 8,000 chunks
        dram = n * llama.fa_bytes(512)
        bench("Mooncake conversation, single tier (libCacheSim setup)",
              ["workload=mooncake", f"workload.path={MOONCAKE}", "model=llama3_1_70b", "policy=lru",
               "hardware.hbm_cache_bytes=0", "hardware.ssd_bytes=0", f"hardware.dram_bytes={dram}",
               "cache.chunk_tokens=512"], args.repeat, True, n)
        bench("Mooncake conversation, 3 tiers hybrid (demo hardware)",
              ["workload=mooncake", f"workload.path={MOONCAKE}", "cache.chunk_tokens=512"], args.repeat, False, None)
    else:
        print(f"\n(Mooncake skipped: {MOONCAKE} not found)")
    weka = shared_trace("claude_code")
    if args.weka and weka.exists():
        # the whole WEKA v8 three-tier hybrid run (issue 14), both engines, and libCacheSim's LRU on
        # its chunk stream (one tier of DRAM-size chunks, the nearest like-for-like it has)
        qwen = load_model("qwen3_next_80b_a3b")
        bench("WEKA v8, 3 tiers hybrid (DRAM 74 GB, SSD 738 GB)",
              ["workload=claude_code", "model=qwen3_next_80b_a3b", "cache.chunk_tokens=256",
               "hardware.hbm_cache_bytes=0", "hardware.dram_bytes=74GB", "hardware.ssd_bytes=738GB"],
              args.repeat, True, int(74e9 // qwen.fa_bytes(256)),
              engines=("python", "numba") if args.weka_python else ("numba",))
    elif args.weka:
        print(f"\n(WEKA skipped: {weka} not found)")


if __name__ == "__main__":
    main()
