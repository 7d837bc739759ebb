#!/usr/bin/env python
"""Every policy (or those named) on one workload, side by side: the tables of the
policy issues' notes. Printed, never asserted.

DRAM and SSD can be sized from the workload's working set W (the
``working_set_bytes`` of ``cluster-sim-trace stats --model M``): ``--dram-frac 0.01``
gives DRAM = 1% of W and ``--ssd-over-dram 10`` an SSD ten times the DRAM (the
paper's 100 GB : 1 TB).

    python scripts/compare_policies.py --workload mooncake --chunk-tokens 512 --model qwen3_next_80b_a3b
    python scripts/compare_policies.py --workload claude_code --dram-frac 0.01 --ssd-over-dram 10 \\
        --policies lru gandalf "gandalf:policy.tau_s=60" oracle
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import cluster_sim  # noqa: E402
from cluster_sim.api import prepare  # noqa: E402
from cluster_sim.config import SimConfig  # noqa: E402
from cluster_sim.policies.base import known_policies  # noqa: E402

SHARED = ROOT.parent / "shared" / "traces"
PATHS = {"mooncake": SHARED / "mooncake-fast25" / "conversation_trace.jsonl.gz",
         "claude_code": SHARED / "weka-claude-code-v8" / "traces_v8.jsonl.gz"}


def working_set(overrides) -> int:
    from cluster_sim.trace.load import load_workload
    from cluster_sim.trace.stats import trace_statistics

    cfg = SimConfig.from_mapping(cluster_sim.compose(overrides))
    table = load_workload(cfg.workload, cfg.seed)
    ct = cfg.chunk_tokens
    return int(trace_statistics(table, chunk_tokens=ct, model=cfg.model)["working_set_bytes"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", default="default")
    ap.add_argument("--model", default="qwen3_next_80b_a3b")
    ap.add_argument("--chunk-tokens", default="auto")
    ap.add_argument("--hardware", default="h100_8x")
    ap.add_argument("--dram-frac", type=float, default=None, help="DRAM as a fraction of the working set")
    ap.add_argument("--ssd-over-dram", type=float, default=10.0)
    ap.add_argument("--hbm", default="0")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--policies", nargs="*", default=None,
                    help="names, or name:key=value,key=value for parameters (default: every registered policy)")
    ap.add_argument("--set", nargs="*", default=[], help="extra Hydra overrides for every run")
    args = ap.parse_args()
    base = [f"workload={args.workload}", f"model={args.model}", f"cache.chunk_tokens={args.chunk_tokens}",
            f"hardware={args.hardware}", f"hardware.hbm_cache_bytes={args.hbm}", *args.set]
    if args.workload in PATHS:
        if not PATHS[args.workload].exists():
            sys.exit(f"{PATHS[args.workload]} not found")
        base.append(f"workload.path={PATHS[args.workload]}")
    if args.limit:
        base.append(f"workload.limit_requests={args.limit}")
    if args.dram_frac is not None:
        w = working_set(base)
        dram = int(w * args.dram_frac)
        ssd = int(dram * args.ssd_over_dram)
        base += [f"hardware.dram_bytes={dram}", f"hardware.ssd_bytes={ssd}"]
        print(f"working set W = {w / 1e9:.1f} GB -> DRAM {dram / 1e9:.2f} GB, SSD {ssd / 1e9:.1f} GB")
    cfg0 = SimConfig.from_mapping(cluster_sim.compose(base))
    trace, _, _ = prepare(cfg0)
    specs = args.policies or known_policies()
    head = (f"{'policy':34s} {'life_y':>8s} {'miss':>7s} {'floor':>7s} {'wr_FA_GB':>9s} {'wr_ST_GB':>9s} "
            f"{'whit':>6s} {'whitFA':>6s} {'whitST':>6s} {'hits hbm/dram/ssd FA':>22s} {'hits dram/ssd ST':>17s} "
            f"{'refs/s':>9s}")
    print(head)
    for spec in specs:
        name, _, params = spec.partition(":")
        ov = [f"policy={name}"] + [p for p in params.split(",") if p]
        t = time.perf_counter()
        try:
            s = cluster_sim.run(cluster_sim.compose(base + ov), trace=trace, write=False)
        except Exception as e:  # noqa: BLE001 - keep the table going
            print(f"{spec:34s} failed: {e}")
            continue
        f = s.fleet
        label = s.run["policy_label"] if params else name
        print(f"{label[:34]:34s} {f['ssd_lifetime_years']:8.2f} {f['chunk_miss_ratio']:7.4f} "
              f"{f['miss_ratio_floor']:7.4f} {f['ssd_bytes_written_fa'] / 1e9:9.1f} "
              f"{f['ssd_bytes_written_state'] / 1e9:9.1f} {f['ssd_write_hit_fraction']:6.3f} "
              f"{f['ssd_write_hit_fraction_fa']:6.3f} {f['ssd_write_hit_fraction_state']:6.3f} "
              f"{f['hits_hbm_fa']:>7,}/{f['hits_dram_fa']:>7,}/{f['hits_ssd_fa']:>6,} "
              f"{f['hits_dram_state']:>8,}/{f['hits_ssd_state']:>7,} {f['sim_chunk_refs_per_s']:9,.0f}"
              f"   ({time.perf_counter() - t:.1f} s)")


if __name__ == "__main__":
    main()
