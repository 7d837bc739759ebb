#!/usr/bin/env python
"""Regenerate tests/golden/*.json after a deliberate change of simulation results.

Each golden file pins the fleet metrics of one policy on the bundled default trace
(default config otherwise). Review the diff before committing it.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

import cluster_sim

GOLDEN = ROOT / "tests" / "golden"
KEYS = ["requests", "chunk_miss_ratio", "token_miss_ratio", "miss_ratio_floor", "ssd_bytes_written_fa",
        "ssd_bytes_written_state", "ssd_write_hit_fraction", "hits_hbm_fa", "hits_hbm_state", "hits_dram_fa",
        "hits_dram_state", "hits_ssd_fa", "hits_ssd_state", "insert_skipped_bytes", "load_latency_mean_s",
        "ttft_p99_s", "recompute_gpu_seconds"]
from cluster_sim.policies.base import known_policies  # noqa: E402

# every registered policy at its defaults (tests/test_registry.py checks each has its golden), then
# the variants that pin other code paths
CASES = {
    "default_lru": [],
    **{f"default_{name}": [f"policy={name}"] for name in known_policies() if name != "lru"},
    "default_gandalf_strict": ["policy=gandalf", "policy.placement=strict"],
    "default_gandalf_paper": ["policy=gandalf_paper"],
    "default_gandalf_learned": ["policy=gandalf", "policy.reuse=learned"],
    "default_lru_tiny": ["hardware.hbm_cache_bytes=1GB", "hardware.dram_bytes=4GB",
                         "hardware.ssd_bytes=100GB", "model.state_checkpoints=every_chunk"],
}


def compute(overrides):
    f = cluster_sim.run(cluster_sim.compose(overrides), write=False).fleet
    out = {k: f[k] for k in KEYS}
    out.update({k: v for k, v in f.items() if k.startswith("policy.")})   # decision counters too
    return out


def main():
    GOLDEN.mkdir(parents=True, exist_ok=True)
    only = set(sys.argv[1:])
    for name, ov in CASES.items():
        if only and name not in only:
            continue
        out = {"overrides": ov, "fleet": compute(ov)}
        (GOLDEN / f"{name}.json").write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {name}: {out['fleet']}")


if __name__ == "__main__":
    main()
