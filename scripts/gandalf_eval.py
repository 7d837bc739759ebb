#!/usr/bin/env python
"""Gandalf against every baseline and both hindsight references, on whole traces.

For each (workload, model): DRAM = 1% of the working set W, SSD = 10x DRAM, HBM 0 (the
paper's sizing), every policy of ``POLICIES`` on the whole trace (no time cut), and the
tables of ``docs/gandalf-eval.md``:

* raw lifetime and miss ratio, and the steady state: the same run with the fill excluded, from
  the run's per-epoch table (60 s epochs). The fill ends, for every policy of a (workload,
  model), when lru's cumulative SSD writes first reach the SSD's capacity: the same requests
  are counted for every policy, and none of them meets an SSD that is still empty;
* every policy's lifetime as a share of ``oracle_admission``'s;
* for every Gandalf row: whether a baseline dominates it (lower miss and longer life), its
  lifetime at iso-miss over the longest-lived baseline whose miss is at most its own + 0.01,
  and its lifetime as a share of ``oracle_admission``'s.

Results are cached per run as JSON under ``--out`` (re-running reuses them; ``--fresh``
forgets). Nothing is asserted.

    python scripts/gandalf_eval.py --jobs 2                       # the whole matrix, then the doc
    python scripts/gandalf_eval.py --only mooncake:qwen3_next_80b_a3b --jobs 2
    python scripts/gandalf_eval.py --report-only                  # rewrite the doc from the cache
"""
from __future__ import annotations

import argparse
import hashlib
import json
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import cluster_sim
from cluster_sim.study import shared_trace_overrides, working_set

ROOT = Path(__file__).resolve().parents[1]

WORKLOADS = {
    "claude_code": {"label": "WEKA Claude Code v8 (whole, Poisson 0.2 sessions/s)", "chunk": 256, "set": []},
    "mooncake": {"label": "Mooncake conversation (whole)", "chunk": 512, "set": []},
    "synthetic_claude_code": {"label": "synthetic_claude_code, seed 7, sessions every 10 s (never used for tuning)",
                              "chunk": 256, "set": ["seed=7", "workload.synthetic.session_rate_per_s=0.1",
                                                    "workload.synthetic.agent_think_time_s=60"]},
}
MODELS = ("qwen3_next_80b_a3b", "kimi_linear_48b_a3b")
BASELINES = ["lru", "write_through", "write_through_selective", "lru_k", "lru_k:policy.k=3", "hot_prefix",
             "hot_prefix:policy.f=10", "marconi", "workload_aware", "dynamic_random"]
ORACLES = ["oracle", "oracle_admission"]
GANDALF = ["gandalf", "gandalf:policy.alpha=0.5", "gandalf:policy.alpha=4", "gandalf:policy.reuse=learned",
           "gandalf_paper", "gandalf_paper:policy.tau_s=60", "gandalf:policy.reuse=population"]
POLICIES = BASELINES + ORACLES + GANDALF
KEYS = ("chunk_miss_ratio", "ssd_lifetime_years", "ssd_bytes_written", "ssd_bytes_written_fa",
        "ssd_bytes_written_state", "ssd_write_hit_fraction", "trace_span_s", "sim_wall_s", "sim_chunk_refs_per_s",
        "hits_dram_fa", "hits_ssd_fa", "hits_dram_state", "hits_ssd_state")


def is_gandalf(spec):
    return spec.startswith("gandalf")


def base_overrides(workload, model):
    w = WORKLOADS[workload]
    ov = [f"workload={workload}", f"model={model}", f"cache.chunk_tokens={w['chunk']}",
          "hardware.hbm_cache_bytes=0", "tracking.enabled=false", *w["set"], *shared_trace_overrides(workload)]
    return ov


def sized(workload, model, cache):
    key = f"{workload}:{model}"
    if key not in cache:
        ov = base_overrides(workload, model)
        cache[key] = int(working_set(ov))
    W = cache[key]
    dram = int(W * 0.01)
    return base_overrides(workload, model) + [f"hardware.dram_bytes={dram}", f"hardware.ssd_bytes={10 * dram}"], W


def run_one(args):
    overrides, spec = args
    name, _, params = spec.partition(":")
    ov = overrides + [f"policy={name}"] + [p for p in params.split(",") if p]
    t = time.perf_counter()
    s = cluster_sim.run(cluster_sim.compose(ov), write=False)
    f = s.fleet
    out = {k: f[k] for k in KEYS}
    out.update({k: v for k, v in f.items() if k.startswith("policy.")})
    # the per-epoch series, for the steady state of the report (after the fill)
    et = s.epoch_table.to_pydict()
    out["epochs"] = {"t": et["t_start_s"], "chunks": et["chunks"], "misses": et["chunk_misses"],
                     "written": et["ssd_bytes_written"]}
    out["wall_s"] = time.perf_counter() - t
    return spec, out


def cache_path(out_dir, overrides, spec):
    h = hashlib.sha256(json.dumps([overrides, spec, "epochs-v2"]).encode()).hexdigest()[:16]
    return out_dir / f"{h}.json"


def fill_end_s(rows, ssd_bytes):
    """The start of the first epoch after lru's cumulative SSD writes reach ``ssd_bytes``."""
    e = rows.get("lru", {}).get("epochs")
    if not e:
        return None
    acc = 0
    for i, w in enumerate(e["written"]):
        acc += w
        if acc >= ssd_bytes:
            return e["t"][i + 1] if i + 1 < len(e["t"]) else None
    return None


def add_steady(r, t_cut):
    """steady_miss / steady_life_y / steady_written of run ``r`` over the epochs from ``t_cut`` on."""
    e, span = r["epochs"], r["trace_span_s"]
    keep = [i for i, t0 in enumerate(e["t"]) if t0 >= t_cut]
    w_all, w_after = sum(e["written"]), sum(e["written"][i] for i in keep)
    chunks = sum(e["chunks"][i] for i in keep)
    r["steady_miss"] = sum(e["misses"][i] for i in keep) / chunks if chunks else 0.0
    r["steady_written"] = w_after
    if w_after > 0 and w_all > 0 and span > t_cut:
        r["steady_life_y"] = min(1000.0, r["ssd_lifetime_years"] * (w_all / w_after) * ((span - t_cut) / span))
    else:
        r["steady_life_y"] = 1000.0
    r["steady_chunk_share"] = chunks / sum(e["chunks"]) if sum(e["chunks"]) else 0.0


def compare(rows, miss="chunk_miss_ratio", life="ssd_lifetime_years", written="ssd_bytes_written"):
    """Per Gandalf row: (dominated by, iso-miss baseline, ratio, share of oracle_admission)."""
    base = [(s, r) for s, r in rows.items() if not is_gandalf(s) and not s.startswith("oracle")]
    oa = rows.get("oracle_admission")
    out = {}
    for s, r in rows.items():
        if not is_gandalf(s):
            continue
        m, lf = r[miss], r[life]
        dom = [b for b, g in base if g[miss] < m and g[life] > lf]
        ok = [(b, g) for b, g in base if g[miss] <= m + 0.01 and g[written] > 0]
        if ok:
            b, g = max(ok, key=lambda x: x[1][life])
            iso = (b, lf / g[life] if r[written] else None)
        else:
            iso = (None, None)
        share = None
        if oa and oa[written] and r[written]:
            share = lf / oa[life]
        out[s] = {"dominated_by": dom, "iso": iso, "oa_share": share,
                  "oa_miss_within": bool(oa and oa[miss] <= m + 0.01)}
    return out


def life_str(x):
    if x >= 999:
        return "cap (no writes)"
    if x < 1:
        return f"{x * 365:.0f} d" if x * 365 >= 1 else f"{x * 365 * 24:.1f} h"
    return f"{x:.2f} y"


def table(rows, W, ssd_bytes, label, model):
    t_cut = fill_end_s(rows, ssd_bytes)
    steady = t_cut is not None and all("epochs" in r for r in rows.values())
    if steady:
        for r in rows.values():
            add_steady(r, t_cut)
    oa = rows.get("oracle_admission")
    lines = [f"### {label}, `{model}`", "",
             f"W = {W / 1e9:,.0f} GB, DRAM {W * 0.01 / 1e9:,.1f} GB, SSD {ssd_bytes / 1e9:,.0f} GB. "
             + (f"Steady state: from t = {t_cut:,.0f} s of {rows['lru']['trace_span_s']:,.0f} s (lru's SSD first "
                f"full), {rows['lru']['steady_chunk_share']:.0%} of the chunk references."
                if steady else "No steady state (lru's SSD never fills, or runs without epochs)."), "",
             "| policy | miss | life | life / oracle_admission | steady miss | steady life | written FA / STATE TB "
             "| write-hit | run s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for s in POLICIES:
        r = rows.get(s)
        if r is None:
            continue
        share = (f"{r['ssd_lifetime_years'] / oa['ssd_lifetime_years']:.2f}"
                 if oa and oa["ssd_bytes_written"] and r["ssd_bytes_written"] else "n/a")
        st = (f"{r['steady_miss']:.4f} | {life_str(r['steady_life_y'])}" if steady else "n/a | n/a")
        lines.append(f"| {s} | {r['chunk_miss_ratio']:.4f} | {life_str(r['ssd_lifetime_years'])} | {share} | {st} | "
                     f"{r['ssd_bytes_written_fa'] / 1e12:.2f} / {r['ssd_bytes_written_state'] / 1e12:.2f} | "
                     f"{r['ssd_write_hit_fraction']:.3f} | {r['wall_s']:.0f} |")
    views = [("whole trace", compare(rows))]
    if steady:
        views.append(("steady state", compare(rows, "steady_miss", "steady_life_y", "steady_written")))
    lines += ["", "| Gandalf point | view | dominated by | iso-miss baseline | lifetime ratio "
              "| share of oracle_admission |", "|---|---|---|---|---|---|"]
    for s in POLICIES:
        for view, cmp in views:
            if s not in cmp:
                continue
            c = cmp[s]
            b, ratio = c["iso"]
            iso = "none within +0.01" if b is None else b
            rs = "n/a" if ratio is None else f"{ratio:.2f}x"
            sh = "n/a" if c["oa_share"] is None else f"{c['oa_share']:.2f}" + (
                "" if c["oa_miss_within"] else " (oracle_admission misses more)")
            lines.append(f"| {s} | {view} | {', '.join(c['dominated_by']) or 'none'} | {iso} | {rs} | {sh} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", nargs="*", default=None, help="workload:model pairs")
    ap.add_argument("--policies", nargs="*", default=None)
    ap.add_argument("--out", type=Path, default=ROOT / "study_runs" / "gandalf_eval")
    ap.add_argument("--fresh", action="store_true")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--doc", type=Path, default=None, help="rewrite the generated tables of this markdown file")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    pairs = [tuple(p.split(":")) for p in args.only] if args.only else \
        [(w, m) for w in ("claude_code", "mooncake") for m in MODELS] + [("synthetic_claude_code", MODELS[0])]
    specs = args.policies or POLICIES
    sizes_file = args.out / "working_sets.json"
    sizes = json.loads(sizes_file.read_text()) if sizes_file.exists() else {}
    todo = []
    plan = {}
    for w, m in pairs:
        ov, W = sized(w, m, sizes)
        sizes_file.write_text(json.dumps(sizes))
        plan[(w, m)] = (ov, W)
        for s in specs:
            p = cache_path(args.out, ov, s)
            if args.fresh and p.exists():
                p.unlink()
            if not p.exists() and not args.report_only:
                todo.append((w, m, ov, s, p))
    print(f"{len(todo)} runs to do", flush=True)
    if todo:
        with ProcessPoolExecutor(args.jobs) as ex:
            futs = {ex.submit(run_one, (ov, s)): (w, m, s, p) for w, m, ov, s, p in todo}
            for fut in futs:
                w, m, s, p = futs[fut]
                try:
                    spec, r = fut.result()
                except Exception as e:  # noqa: BLE001 - report and go on
                    print(f"{w} {m} {s}: failed: {e}", flush=True)
                    continue
                p.write_text(json.dumps(r))
                print(f"{w:22s} {m:20s} {s:40s} miss {r['chunk_miss_ratio']:.4f} life "
                      f"{r['ssd_lifetime_years']:.3f} y ({r['wall_s']:.0f} s)", flush=True)
    parts = []
    for (w, m), (ov, W) in plan.items():
        rows = {}
        for s in POLICIES:
            p = cache_path(args.out, ov, s)
            if p.exists():
                rows[s] = json.loads(p.read_text())
        if rows:
            parts.append(table(rows, W, 10 * int(W * 0.01), WORKLOADS[w]["label"], m))
    text = "\n".join(parts)
    print(text)
    if args.doc:
        write_doc(args.doc, text)


BEGIN, END = "<!-- BEGIN GENERATED: tables -->", "<!-- END GENERATED: tables -->"


def write_doc(path: Path, text: str) -> None:
    """Rewrite the tables between the markers of ``path`` (the prose around them is left
    alone); a file without the markers gets the tables alone, between markers."""
    block = f"{BEGIN}\n{text}\n{END}"
    old = path.read_text() if path.exists() else ""
    if BEGIN in old and END in old:
        head, rest = old.split(BEGIN, 1)
        path.write_text(head + block + rest.split(END, 1)[1])
    else:
        path.write_text(block + "\n")


if __name__ == "__main__":
    main()
