"""Gandalf before/after equivalence: run the same Gandalf variants with two source trees and
compare their summary.json figure by figure (everything but ``sim_*`` wall-clock figures and
run metadata must be equal, bit for bit).

    python scripts/gandalf_equivalence.py BASE_TREE NEW_TREE [--out DIR] [--only default|mooncake]

``BASE_TREE`` / ``NEW_TREE`` are source trees of cluster_sim (e.g. ``git archive <commit>``
unpacked, or a worktree); each run uses ``PYTHONPATH=<tree>`` from inside the tree. Runs are
sequential (a single core each). Exit status 1 if any figure differs.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from cluster_sim.locations import traces_root

# the bundled default trace on a node small enough that every tier (and the SSD's evictions) works
DEFAULT = ["tracking.enabled=false", "report.figures=false", "hardware.hbm_cache_bytes=0",
           "hardware.dram_bytes=2GB", "hardware.ssd_bytes=12GB"]
MOONCAKE = ["workload=mooncake", "model=llama3_1_70b", "cache.chunk_tokens=512", "tracking.enabled=false",
            "report.figures=false", "hardware.hbm_cache_bytes=0", "hardware.dram_bytes=40GB",
            "hardware.ssd_bytes=400GB"]
VARIANTS = {
    "hints": ["policy=gandalf"],
    "paper": ["policy=gandalf_paper"],
    "population": ["policy=gandalf", "policy.reuse=population", "policy.objective=chunks"],
    "rate_chunks": ["policy=gandalf", "policy.reuse=rate", "policy.objective=chunks"],
    "learned": ["policy=gandalf", "policy.reuse=learned"],
    "shadow": ["policy=gandalf", "policy.victim_loss=shadow_price", "policy.victim_peek=8"],
    "budget": ["policy=gandalf_paper", "policy.wear_price=budget_pressure", "policy.tau_s=60"],
    "alpha0": ["policy=gandalf", "policy.alpha=0"],
    "alpha_inf": ["policy=gandalf_paper", "policy.alpha=inf"],
    "root_side": ["policy=gandalf", "policy.moveset=root_side"],
    "strict": ["policy=gandalf", "policy.placement=strict"],
}
IGNORE = ("sim_", "run.git_sha", "run.jit_compile_s", "run.floor_wall_s", "config.output.dir")


def flat(d, pre=""):
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flat(v, f"{pre}{k}."))
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            for i, x in enumerate(v):
                out.update(flat(x, f"{pre}{k}[{i}]."))
        else:
            out[pre + k] = v
    return out


def compare(a: Path, b: Path) -> list[tuple[str, object, object]]:
    fa, fb = flat(json.loads(a.read_text())), flat(json.loads(b.read_text()))
    keys = sorted(k for k in set(fa) | set(fb) if not any(x in k for x in IGNORE))
    return [(k, fa.get(k, "<missing>"), fb.get(k, "<missing>")) for k in keys if fa.get(k, "<m>") != fb.get(k, "<m>")]


def run(tree: Path, args: list[str], out: Path) -> float:
    # both trees read the same shared traces: this checkout's root (CLUSTER_SIM_TRACES or its default)
    env = dict(os.environ, PYTHONPATH=str(tree), CLUSTER_SIM_TRACES=str(traces_root().resolve()))
    cmd = [sys.executable, "-m", "cluster_sim.cli", *args, f"hydra.run.dir={out}"]
    p = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}")
    return json.loads((out / "summary.json").read_text())["fleet"].get("sim_wall_s", float("nan"))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("base", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--out", type=Path, default=Path("/tmp/gandalf_equivalence"))
    ap.add_argument("--only", choices=("default", "mooncake"), default=None)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    a = ap.parse_args()
    bad = 0
    for wname, wargs in (("default", DEFAULT), ("mooncake", MOONCAKE)):
        if a.only and a.only != wname:
            continue
        for v in a.variants.split(","):
            args = wargs + VARIANTS[v]
            ob, on = a.out / "base" / f"{wname}_{v}", a.out / "new" / f"{wname}_{v}"
            tb = run(a.base.resolve(), args, ob)
            tn = run(a.new.resolve(), args, on)
            diff = compare(ob / "summary.json", on / "summary.json")
            n = len([k for k in flat(json.loads((ob / "summary.json").read_text())) if not any(x in k for x in IGNORE)])
            print(f"{wname:9s} {v:11s} {'IDENTICAL' if not diff else f'{len(diff)} DIFFER'} ({n} figures)  "
                  f"sim wall {tb:7.2f} s -> {tn:7.2f} s", flush=True)
            for d in diff[:10]:
                print("    ", d)
            bad += bool(diff)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
