"""Cold and warm build time of the compiled engine, per policy (#47 item 4).

    python scripts/bench_compile.py                      # every kernel set, one at a time
    python scripts/bench_compile.py lru gandalf --top 15 # these, with the 15 slowest functions

Each setting is built in a fresh process against an empty numba cache (``$NUMBA_CACHE_DIR`` in a new
temporary folder): *cold* is what a new install waits for before its first run of that policy;
*warm* is a second fresh process loading what the first one built. ``--top N`` prints the functions
whose compilation took longest (numba's ``numba:compile`` events, nested time included)."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import json, sys, time
import numba.core.event as ev
from cluster_sim import engine as E
policy, params = sys.argv[1], json.loads(sys.argv[2])
top = {}
stack = []
class T(ev.Listener):
    def on_start(self, event):
        stack.append(time.perf_counter())
    def on_end(self, event):
        d = event.data["dispatcher"]
        name = str(d.py_func.__module__ or "?").replace("cluster_sim.", "") + "." + d.py_func.__qualname__
        top[name] = top.get(name, 0.0) + time.perf_counter() - stack.pop()
ev.register("numba:compile", T())
t0 = time.perf_counter()
E.ensure_compiled(settings=[(policy, params or None)])
print(json.dumps({"s": time.perf_counter() - t0, "top": sorted(top.items(), key=lambda x: -x[1])}))
"""


def build(policy: str, params: dict | None, cache: str) -> dict:
    env = dict(os.environ, NUMBA_CACHE_DIR=cache)
    out = subprocess.run([sys.executable, "-c", CHILD, policy, json.dumps(params or {})], env=env,
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{policy}: build failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    from cluster_sim.engine import compiled_settings, kernels_of
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("policies", nargs="*", help="policy names (default: every compiled setting)")
    ap.add_argument("--top", type=int, default=0, help="print the N slowest functions of each cold build")
    a = ap.parse_args()
    todo, seen = [], set()
    for p, s in compiled_settings():          # one setting per kernel set: the others share its build
        if (not a.policies or p in a.policies) and kernels_of(p, s).name not in seen:
            seen.add(kernels_of(p, s).name)
            todo.append((p, s))
    print(f"{'setting':44s} {'cold s':>8s} {'warm s':>8s}")
    total = 0.0
    for policy, params in todo:
        with tempfile.TemporaryDirectory(prefix="cs-numba-") as cache:
            t0 = time.perf_counter()
            cold = build(policy, params, cache)
            wall = time.perf_counter() - t0
            warm = build(policy, params, cache)
        total += wall
        label = policy + ("" if not params else " " + " ".join(f"{k}={v}" for k, v in params.items()))
        print(f"{label:44s} {cold['s']:8.1f} {warm['s']:8.2f}   (process wall {wall:.1f} s)", flush=True)
        for name, s in cold["top"][:a.top]:
            print(f"    {s:7.1f} s  {name}")
    print(f"total cold process wall: {total:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
