"""Digests of the compiled engine's results, one per policy setting, to show that a structural
change (a move of kernels, a new dispatch) changed no result.

    python scripts/engine_digests.py --out /tmp/before.json          # before the change
    python scripts/engine_digests.py --out /tmp/after.json --compare /tmp/before.json

Each digest is the SHA-1 of a run's per-request rows (output.requests) and of its fleet and node
summaries without the timing fields (``sim_*``, ``jit_*``, wall times). Workloads: the bundled
default trace (every setting) and, when ``../shared/traces`` is there, whole Mooncake (``--mooncake``).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

SETTINGS = [
    ["policy=lru"], ["policy=lru_k"], ["policy=hot_prefix"], ["policy=dynamic_random"], ["policy=oracle"],
    ["policy=oracle_admission"], ["policy=write_through"], ["policy=write_through_selective"],
    ["policy=workload_aware"], ["policy=marconi"], ["policy=gandalf"], ["policy=gandalf", "policy.placement=strict"],
    ["policy=gandalf", "policy.reuse=rate"], ["policy=gandalf", "policy.reuse=population"],
]
BASE = ["cache.engine=numba", "tracking.enabled=false", "output.requests=true"]
MOONCAKE = ["workload=mooncake", "model=qwen3_next_80b_a3b", "cache.chunk_tokens=512", "hardware.dram_bytes=26GB",
            "hardware.ssd_bytes=263GB"]
_TIMING = ("sim_", "jit_", "wall", "elapsed", "_s_per", "refs_per_s", "seconds")


def _clean(d):
    if isinstance(d, dict):
        return {k: _clean(v) for k, v in sorted(d.items()) if not any(x in k for x in _TIMING)}
    if isinstance(d, list):
        return [_clean(v) for v in d]
    return d


def digest(overrides: list[str]) -> tuple[str, float]:
    import cluster_sim
    t0 = time.perf_counter()
    s = cluster_sim.run(cluster_sim.compose(overrides), write=False)
    h = hashlib.sha1(json.dumps(_clean({"fleet": s.fleet, "nodes": s.nodes}), sort_keys=True,
                                default=str).encode())
    if s.request_table is not None:
        for col in s.request_table.columns:
            h.update(col.to_numpy(zero_copy_only=False).tobytes())
    return h.hexdigest()[:16], time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--compare", type=Path)
    ap.add_argument("--mooncake", action="store_true", help="also whole Mooncake (../shared/traces)")
    ap.add_argument("--only", nargs="*", help="policy names to run (default: every setting)")
    a = ap.parse_args()
    runs = [("default", s) for s in SETTINGS]
    if a.mooncake:
        runs += [("mooncake", MOONCAKE + s) for s in SETTINGS]
    out = {}
    for wl, s in runs:
        setting = s if wl == "default" else s[len(MOONCAKE):]
        if a.only and setting[0].split("=")[1] not in a.only:
            continue
        key = f"{wl}:{' '.join(setting)}"
        d, sec = digest(BASE + s)
        out[key] = d
        print(f"{key:60s} {d}  {sec:7.1f} s", flush=True)
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    if a.compare:
        ref = json.loads(a.compare.read_text())
        bad = [k for k in out if k in ref and ref[k] != out[k]]
        for k in bad:
            print(f"DIFFERS {k}: {ref[k]} -> {out[k]}")
        print(f"{len(out) - len(bad)} same, {len(bad)} differ, {len([k for k in out if k not in ref])} new")
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
