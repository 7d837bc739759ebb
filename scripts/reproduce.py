#!/usr/bin/env python
"""The paper's evaluation (Gandalf §5.2-5.8, plus a fleet study), reproduced on the real traces.

One command regenerates every number and figure of ``docs/results.md``:

    python scripts/reproduce.py                 # the full study (several hours on 2 cores: whole WEKA), writes docs/
    python scripts/reproduce.py --quick         # a reduced study (< 10 min), writes study_runs/quick/
    python scripts/reproduce.py --quick --docs  # ... and puts its tables/figures into docs/
    python -m pytest -m study                   # the quick study as a test (tests/test_study.py)

Traces (``../shared/traces``, never copied): Mooncake conversation (whole, 59 min), WEKA Claude
Code v8 with Poisson session starts (the whole 5.1-day trace), and (fewer points) the same
sessions started at the Azure 2023 conversation arrivals, cut at 300 s. Setup: ``conf/experiment/
paper_*.yaml`` (Kimi Linear 48B-A3B, 512-token chunks, no HBM cache, 1 DWPD, 5 y, WAF 1). DRAM and
SSD are sized from the working set W of the (trace, model) (``working_set_bytes`` of the trace
statistics): DRAM = 1% W, SSD = 10% W ("1:10", the paper's 100 GB : 1 TB) or 40% W ("1:40",
100 GB : 4 TB); the paper's absolute 100 GB : 1 TB / 4 TB are run too.

Every point is a Ray task (2 workers); the chunked trace of each workload goes into the object
store once. The point list is printed first, then each point's wall time as it finishes. Results
are cached as JSON per point under ``study_runs/<mode>/points/`` (``--resume`` reuses them; the
default reruns everything); ``study_runs/<mode>/results.json`` holds all points and the derived
tables. With ``--docs`` (the default of the full mode) the figures go to ``docs/figures/`` and the
generated sections of ``docs/results.md`` (between ``<!-- BEGIN GENERATED: x -->`` and
``<!-- END GENERATED: x -->``) are rewritten; the prose around them is left alone.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SHARED = ROOT.parent / "shared" / "traces"
MOONCAKE = SHARED / "mooncake-fast25" / "conversation_trace.jsonl.gz"
WEKA = SHARED / "weka-claude-code-v8" / "traces_v8.jsonl.gz"
AZURE = SHARED / "azure-llm-2023" / "AzureLLMInferenceTrace_conv.csv.gz"

MAIN_MODEL = "kimi_linear_48b_a3b"
MODELS = ["nemotron_h_8b", "gemma3_27b", "qwen3_5_27b", MAIN_MODEL]
ROUTERS = ["round_robin", "random", "session_affinity", "least_loaded", "kv_aware"]
GB, TB = 10**9, 10**12
SLOW_WEKA_S = 150.0
CAP_Y = 1000.0   # metrics.lifetime_cap_years: a policy that writes nothing "lives" this long

# --------------------------------------------------------------------------- policies

# key -> (family, parameter label, overrides)
POLICIES: dict[str, tuple[str, str, list[str]]] = {
    "lru": ("LRU", "", ["policy=lru"]),
    "lruk1": ("LRU-K", "K=1", ["policy=lru_k", "policy.k=1"]),
    "lruk2": ("LRU-K", "K=2", ["policy=lru_k", "policy.k=2"]),
    "lruk3": ("LRU-K", "K=3", ["policy=lru_k", "policy.k=3"]),
    "hp1": ("HotPrefix", "F=1", ["policy=hot_prefix", "policy.f=1"]),
    "hp2": ("HotPrefix", "F=2", ["policy=hot_prefix", "policy.f=2"]),
    "hp10": ("HotPrefix", "F=10", ["policy=hot_prefix", "policy.f=10"]),
    "mar0": ("Marconi", "α=0", ["policy=marconi", "policy.alpha=0"]),
    "mar1": ("Marconi", "α=1", ["policy=marconi", "policy.alpha=1"]),
    "marA": ("Marconi", "α=auto", ["policy=marconi", "policy.alpha=auto"]),
    "wa": ("Workload-aware", "", ["policy=workload_aware"]),
    "dr": ("DynamicRandom", "", ["policy=dynamic_random"]),
    "oracle": ("oracle", "", ["policy=oracle"]),
}
for _a in (0, 1, 4, 16, 64):
    POLICIES[f"g{_a}"] = ("gandalf", f"α={_a}", ["policy=gandalf_paper", f"policy.alpha={_a}"])
    POLICIES[f"gp{_a}"] = ("gandalf (population)", f"α={_a}",
                           ["policy=gandalf_paper", f"policy.alpha={_a}", "policy.reuse=population"])
for _t in (60, 3600):
    POLICIES[f"g1t{_t}"] = ("gandalf", f"α=1, τ={_t}s", ["policy=gandalf_paper", "policy.alpha=1", f"policy.tau_s={_t}"])

# §5 investigation of where the reconstruction falls short: one knob of gandalf α=1 changed at a time
VARIANTS = {
    "gobjc": ("objective=chunks (cost in chunks, not dollars)", ["policy.objective=chunks"]),
    "gstrict": ("placement=strict (states never on SSD)", ["policy.placement=strict"]),
    "gbudget": ("wear_price=budget_pressure", ["policy.wear_price=budget_pressure"]),
    "gshadow": ("victim_loss=shadow_price", ["policy.victim_loss=shadow_price"]),
    "gpobjc": ("population + objective=chunks", ["policy.reuse=population", "policy.objective=chunks"]),
}
for _k, (_lab, _ov) in VARIANTS.items():
    POLICIES[_k] = ("gandalf (variant)", _lab, ["policy=gandalf_paper", "policy.alpha=1", *_ov])

SHORT = {"gobjc": "chunks", "gstrict": "strict", "gbudget": "budget", "gshadow": "shadow", "gpobjc": "pop+chunks",
         "g1t60": "τ=60", "g1t3600": "τ=3600"}

BASELINE_FAMILIES = ("LRU", "LRU-K", "HotPrefix", "Marconi", "Workload-aware", "DynamicRandom")


def family(pol: str) -> str:
    return POLICIES[pol][0]


def is_gandalf(pol: str) -> bool:
    return family(pol).startswith("gandalf")


def is_baseline(pol: str) -> bool:
    return family(pol) in BASELINE_FAMILIES


def label(pol: str) -> str:
    f, p, _ = POLICIES[pol]
    return f"{f} {p}".strip()


def alpha_of(pol: str) -> float | None:
    m = re.match(r"gp?(\d+)$", pol)
    return float(m.group(1)) if m else None


# --------------------------------------------------------------------------- traces

@dataclass(frozen=True)
class TraceSpec:
    key: str
    title: str
    experiment: str
    overrides: tuple
    cost: float      # relative cost of one LRU run (Mooncake = 1)


def trace_specs(quick: bool) -> dict[str, TraceSpec]:
    if quick:
        return {
            "moon": TraceSpec("moon", "Mooncake (first 4,000 requests)", "paper_mooncake",
                              (f"workload.path={MOONCAKE}", "workload.limit_requests=4000"), 0.35),
            "weka": TraceSpec("weka", "WEKA Claude Code, Poisson 0.2/s, 300 s", "paper_weka",
                              (f"workload.path={WEKA}", "workload.until_s=300"), 0.5),
        }
    return {
        "moon": TraceSpec("moon", "Mooncake conversation (59 min)", "paper_mooncake",
                          (f"workload.path={MOONCAKE}",), 1.0),
        # the whole trace (5.1 days): the 1,200 s cut this study used until 2026-12 hid Gandalf's
        # long-span regression (docs/decisions.md 45); it makes the study several hours long
        "weka": TraceSpec("weka", "WEKA Claude Code, Poisson 0.2/s, whole trace", "paper_weka",
                          (f"workload.path={WEKA}",), 50.0),
        "weka_az": TraceSpec("weka_az", "WEKA Claude Code, Azure arrivals, 300 s", "paper_weka_azure",
                             (f"workload.path={WEKA}", f"workload.arrivals={AZURE}"), 3.0),
    }


# --------------------------------------------------------------------------- points

@dataclass
class Point:
    trace: str
    model: str
    pol: str
    sizing: tuple            # ("rel", dram_frac_of_W, ssd_frac_of_W) | ("abs", dram_bytes, ssd_bytes)
    warmup_s: float = 0.0
    nodes: int = 1
    router: str = ""
    exps: set = field(default_factory=set)
    # filled in by the driver
    overrides: list = field(default_factory=list)
    result: dict | None = None

    @property
    def key(self) -> str:
        sz = ":".join(f"{x:g}" if isinstance(x, float) else str(x) for x in self.sizing)
        r = f"|n{self.nodes}:{self.router}" if self.nodes > 1 else ""
        w = f"|w{self.warmup_s:g}" if self.warmup_s else ""
        return f"{self.trace}|{self.model}|{sz}{w}{r}|{self.pol}"

    @property
    def fid(self) -> str:
        return re.sub(r"[^A-Za-z0-9_.=-]+", "_", self.key)[:120] + "-" + hashlib.sha1(self.key.encode()).hexdigest()[:6]

    def cost(self, specs) -> float:
        f = family(self.pol)
        c = {"LRU": 1.0, "gandalf": 5.0, "gandalf (population)": 5.0, "Marconi": 3.5, "oracle": 1.6}.get(f, 2.0)
        return specs[self.trace].cost * c * (1.3 if self.nodes > 1 else 1.0)


R10 = ("rel", 0.01, 0.10)
R40 = ("rel", 0.01, 0.40)
A10 = ("abs", 100 * GB, 1 * TB)
A40 = ("abs", 100 * GB, 4 * TB)
SIZING_NAMES = {R10: "DRAM 1% W : SSD 10% W", R40: "DRAM 1% W : SSD 40% W",
                A10: "DRAM 100 GB : SSD 1 TB", A40: "DRAM 100 GB : SSD 4 TB"}
CAP_TOTAL = 0.41       # §5.3: DRAM + SSD fixed at 41% W (the 100 GB + 4 TB total, scaled to W)
CAP_DRAM = (0.01, 0.02, 0.04, 0.08, 0.16)
WARMUP = {"moon": 600.0, "weka": 300.0, "weka_az": 60.0}


def sizing_name(sz) -> str:
    if sz in SIZING_NAMES:
        return SIZING_NAMES[sz]
    return f"DRAM {sz[1] * 100:g}% W : SSD {sz[2] * 100:g}% W"


def plan(quick: bool) -> list[Point]:
    pts: dict[str, Point] = {}

    def add(exp, trace, pols, sizing=R10, model=MAIN_MODEL, warmup=0.0, nodes=1, router=""):
        for pol in pols:
            p = Point(trace, model, pol, sizing, warmup, nodes, router)
            pts.setdefault(p.key, p).exps.add(exp)

    if quick:
        e2e = ["lru", "lruk2", "hp2", "hp10", "mar0", "oracle", "g0", "g1", "g16", "gp1"]
        for t in ("moon", "weka"):
            add("e2e", t, e2e if t == "moon" else ["lru", "lruk2", "hp2", "oracle", "g1", "g16", "gp1"])
        add("e2e", "moon", ["lru", "lruk2", "g1"], R40)
        add("warmup", "moon", ["lru", "lruk2", "g1"], warmup=300.0)
        for d in (0.01, 0.08):
            add("capacity", "moon", ["lru", "lruk2", "g1"], ("rel", d, round(CAP_TOTAL - d, 4)))
        add("models", "moon", ["lruk2", "hp2", "g1"], model="nemotron_h_8b")
        add("models", "moon", ["lruk2", "hp2", "g1"])
        return list(pts.values())

    full_base = ["lru", "lruk1", "lruk2", "lruk3", "hp1", "hp2", "hp10", "mar0", "mar1", "marA", "wa", "dr", "oracle"]
    g_moon = ["g0", "g1", "g4", "g16", "g64", "g1t60", "g1t3600", "gp0", "gp1", "gp4", "gp16", "gp64"]
    g_weka = ["g0", "g1", "g4", "g16", "g64", "g1t60", "g1t3600", "gp1", "gp16"]
    for t, gs in (("moon", g_moon), ("weka", g_weka)):
        add("e2e", t, full_base + gs)                                           # §5.2, §5.4, §5.6, §5.8
        add("e2e", t, ["lru", "lruk2", "lruk3", "hp2", "hp10", "mar0", "oracle", "g0", "g1", "g4", "g16", "g64",
                       "gp1"], R40)
        for sz in (A10, A40):
            add("e2e", t, ["lru", "lruk2", "hp2", "hp10", "oracle", "g1", "g16", "gp1"], sz)
        add("warmup", t, ["lru", "lruk2", "hp2", "hp10", "mar0", "oracle", "g0", "g1", "g16", "gp1"],
            warmup=WARMUP[t])
        for d in CAP_DRAM:                                                      # §5.3
            add("capacity", t, ["lru", "lruk2", "hp2", "oracle", "g1", "gp1"], ("rel", d, round(CAP_TOTAL - d, 4)))
        for m in MODELS:                                                        # §5.5
            add("models", t, ["lru", "lruk2", "hp2", "g1", "gp1"], model=m)
        add("investigate", t, list(VARIANTS) if t == "moon" else ["gobjc", "gstrict", "gpobjc"])
    add("e2e", "weka_az", ["lru", "lruk2", "hp2", "hp10", "oracle", "g1", "g16", "gp1"])
    return list(pts.values())


def fleet_points(trace: str, best_baseline: str, quick: bool) -> list[Point]:
    """§7 (beyond the paper): 8 nodes, every router, gandalf α=1 vs the best baseline. The fleet's
    total DRAM and SSD equal the single node's 1:10 sizing (each node 1/8 of it)."""
    out = []
    routers = ["session_affinity", "kv_aware"] if quick else ROUTERS
    for r in routers:
        for pol in dict.fromkeys(["g1", best_baseline]):
            p = Point(trace, MAIN_MODEL, pol, ("rel", 0.01 / 8, 0.10 / 8), 0.0, 8, r)
            p.exps.add("fleet")
            out.append(p)
    return out


# --------------------------------------------------------------------------- the Ray task

def _task(cfg: dict, trace, warmup_s: float) -> dict:
    import cluster_sim

    t0 = time.perf_counter()
    if warmup_s:
        a0 = float(trace.arrival_s[0])
        trace = dataclasses.replace(trace, counted=trace.arrival_s >= a0 + warmup_s)
    s = cluster_sim.run(cfg, trace=trace, write=False)
    return {"fleet": s.fleet, "nodes": s.nodes, "wall_s": time.perf_counter() - t0, "pid": os.getpid()}


# --------------------------------------------------------------------------- driver

def compose(overrides):
    import cluster_sim
    return cluster_sim.compose(list(overrides))


class Traces:
    """Per workload: the chunked trace (prepared once, put into the object store) and W per model."""

    def __init__(self, specs, ray):
        self.specs, self.ray = specs, ray
        self.refs, self.tables, self.ws, self.spans = {}, {}, {}, {}

    def base(self, t: str, model: str) -> list[str]:
        s = self.specs[t]
        return [f"experiment={s.experiment}", *s.overrides, f"model={model}", "tracking.enabled=false"]

    def ref(self, t: str):
        if t not in self.refs:
            from cluster_sim.api import prepare
            from cluster_sim.config import SimConfig
            t0 = time.perf_counter()
            trace, _, _ = prepare(SimConfig.from_mapping(compose(self.base(t, MAIN_MODEL))))
            self.spans[t] = float(trace.arrival_s[-1] - trace.arrival_s[0])
            self.refs[t] = self.ray.put(trace)
            print(f"  trace {t}: {trace.n_requests:,} requests, {trace.chunk_refs:,} chunk refs, "
                  f"span {self.spans[t]:.0f} s (prepared in {time.perf_counter() - t0:.1f} s)", flush=True)
        return self.refs[t]

    def w(self, t: str, model: str) -> int:
        if (t, model) not in self.ws:
            from cluster_sim.config import SimConfig
            from cluster_sim.trace.load import load_workload
            from cluster_sim.trace.stats import trace_statistics
            cfg = SimConfig.from_mapping(compose(self.base(t, model)))
            if t not in self.tables:
                self.tables[t] = load_workload(cfg.workload, cfg.seed)
            st = trace_statistics(self.tables[t], chunk_tokens=cfg.chunk_tokens, model=cfg.model)
            self.ws[(t, model)] = int(st["working_set_bytes"])
        return self.ws[(t, model)]


def overrides_for(p: Point, traces: Traces) -> list[str]:
    ov = traces.base(p.trace, p.model)
    if p.sizing[0] == "rel":
        w = traces.w(p.trace, p.model)
        dram, ssd = int(w * p.sizing[1]), int(w * p.sizing[2])
    else:
        dram, ssd = int(p.sizing[1]), int(p.sizing[2])
    ov += [f"hardware.dram_bytes={dram}", f"hardware.ssd_bytes={ssd}"]
    if p.warmup_s:
        ov.append(f"workload.warmup_s={p.warmup_s:g}")
    if p.nodes > 1:
        ov += [f"fleet.nodes={p.nodes}", f"fleet.router={p.router}"]
    return ov + POLICIES[p.pol][2]


def run_points(points: list[Point], args, specs) -> list[Point]:
    from cluster_sim.distributed import ensure_ray

    out_dir = Path(args.out) / "points"
    out_dir.mkdir(parents=True, exist_ok=True)
    ray = ensure_ray("local")
    if __name__ != "__main__" and __name__ in sys.modules:   # imported (tests): ship _task by value
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    traces = Traces(specs, ray)
    remote = ray.remote(num_cpus=1, max_retries=0)(_task)

    def describe(p: Point) -> str:
        extra = f"  warmup {p.warmup_s:g}s" if p.warmup_s else ""
        extra += f"  {p.nodes} nodes/{p.router}" if p.nodes > 1 else ""
        return f"{p.trace:8s} {p.model:20s} {sizing_name(p.sizing):24s} {label(p.pol):30s}{extra}"

    print(f"study: {len(points)} points (+ fleet points once each trace's end-to-end points are done), "
          f"{args.workers} Ray workers", flush=True)
    for i, p in enumerate(points):
        print(f"  #{i:<3d} [{','.join(sorted(p.exps))}] {describe(p)}", flush=True)
    print("preparing traces and working sets ...", flush=True)
    for t in specs:
        if any(p.trace == t for p in points):
            traces.ref(t)
    for p in points:
        p.overrides = overrides_for(p, traces)
    for (t, m), w in sorted(traces.ws.items()):
        print(f"  W[{t}, {m}] = {w / GB:,.1f} GB", flush=True)

    done: list[Point] = []
    all_pts = list(points)
    queue = sorted(points, key=lambda p: -p.cost(specs))
    pending: dict = {}
    fleet_added: set = set()
    t_start = time.perf_counter()
    n = 0

    def finish(p: Point, res: dict, cached: bool):
        nonlocal n
        n += 1
        p.result = res
        done.append(p)
        f = res["fleet"]
        slow = "  <-- SLOW (> 150 s on WEKA)" if p.trace.startswith("weka") and res["wall_s"] > SLOW_WEKA_S else ""
        print(f"[{n:3d}/{len(all_pts)} {time.perf_counter() - t_start:6.0f}s] {res['wall_s']:6.1f}s"
              f"{' (cached)' if cached else ''}  {describe(p)}  miss {f['chunk_miss_ratio']:.4f}  "
              f"life {f['ssd_lifetime_years']:.3g} y{slow}", flush=True)

    def maybe_fleet():
        for t in specs:
            if t in fleet_added or t == "weka_az" or not any(p.trace == t for p in all_pts):
                continue
            mine = [p for p in all_pts if p.trace == t and "e2e" in p.exps and p.sizing == R10 and p.warmup_s == 0
                    and p.model == MAIN_MODEL and p.nodes == 1]
            if mine and all(p.result for p in mine):
                fleet_added.add(t)
                best = best_baseline_for([(p.pol, p.result["fleet"]) for p in mine], "g1")
                new = fleet_points(t, best, args.quick)
                for q in new:
                    q.overrides = overrides_for(q, traces)
                print(f"fleet points for {t}: gandalf α=1 vs {label(best)} (the best baseline at iso-miss), "
                      f"{len(new)} points:", flush=True)
                for q in new:
                    print(f"  [fleet] {describe(q)}", flush=True)
                all_pts.extend(new)
                queue.extend(new)
                queue.sort(key=lambda p: -p.cost(specs))

    def submit_or_cache(p: Point) -> bool:
        path = out_dir / f"{p.fid}.json"
        if args.resume and path.exists():
            data = json.loads(path.read_text())
            if data.get("overrides") == p.overrides:
                finish(p, data["result"], True)
                return False
        pending[remote.remote(compose(p.overrides), traces.ref(p.trace), p.warmup_s)] = p
        return True

    try:
        while queue or pending:
            while queue and len(pending) < args.workers:
                submit_or_cache(queue.pop(0))
                maybe_fleet()
            if not pending:
                continue
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                p = pending.pop(ref)
                res = ray.get(ref)
                (out_dir / f"{p.fid}.json").write_text(json.dumps(
                    {"key": p.key, "overrides": p.overrides, "result": res}, indent=1, default=float))
                finish(p, res, False)
            maybe_fleet()
    except BaseException:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise
    print(f"all {len(done)} points in {time.perf_counter() - t_start:.0f} s wall "
          f"({sum(p.result['wall_s'] for p in done):.0f} s of point time)", flush=True)
    traces_info = {t: {"span_s": traces.spans.get(t), "title": specs[t].title} for t in specs}
    ws = {f"{t}|{m}": w for (t, m), w in traces.ws.items()}
    return done, traces_info, ws


# --------------------------------------------------------------------------- analysis

def best_baseline_for(rows, gpol: str) -> str:
    """The longest-lived baseline whose miss ratio is at most gandalf(gpol)'s + 0.01 (else the
    lowest-miss baseline)."""
    g = dict(rows).get(gpol)
    base = [(p, f) for p, f in rows if is_baseline(p)]
    if g is not None:
        ok = [(p, f) for p, f in base if f["chunk_miss_ratio"] <= g["chunk_miss_ratio"] + 0.01]
        if ok:
            return max(ok, key=lambda x: (x[1]["ssd_lifetime_years"], -x[1]["chunk_miss_ratio"]))[0]
    return min(base, key=lambda x: x[1]["chunk_miss_ratio"])[0]


def iso_miss(rows, slack=0.01):
    """For each gandalf row: (pol, f, baseline pol or None, ratio)."""
    base = [(p, f) for p, f in rows if is_baseline(p)]
    out = []
    for p, f in rows:
        if not is_gandalf(p):
            continue
        ok = [(b, g) for b, g in base if g["chunk_miss_ratio"] <= f["chunk_miss_ratio"] + slack]
        if not ok:
            out.append((p, f, None, None))
            continue
        b, g = max(ok, key=lambda x: (x[1]["ssd_lifetime_years"], -x[1]["chunk_miss_ratio"]))
        out.append((p, f, b, f["ssd_lifetime_years"] / g["ssd_lifetime_years"]))
    return out


def select(done, **kw):
    out = []
    for p in done:
        if all((kw[k] in p.exps) if k == "exp" else getattr(p, k) == v for k, v in kw.items()):
            out.append(p)
    return out


def rows_of(pts):
    return [(p.pol, p.result["fleet"]) for p in pts]


def analyse(done, traces_info, ws):
    A: dict = {"traces": traces_info, "working_sets_bytes": ws, "groups": {}}
    for t in traces_info:
        for sz in (R10, R40, A10, A40):
            for wu in sorted({p.warmup_s for p in done if p.trace == t}):
                pts = select(done, trace=t, sizing=sz, warmup_s=wu, model=MAIN_MODEL, nodes=1)
                if not pts:
                    continue
                rows = rows_of(pts)
                iso = iso_miss(rows)
                gl = [(p, f) for p, f in rows if family(p) == "gandalf"]
                bl = [(p, f) for p, f in rows if is_baseline(p)]
                low = None
                if gl and bl:   # the paper's "at its lowest miss ratio ... over the lowest-miss baseline"
                    gp, gf = min(gl, key=lambda x: x[1]["chunk_miss_ratio"])
                    bp, bf = min(bl, key=lambda x: x[1]["chunk_miss_ratio"])
                    low = {"gandalf": gp, "baseline": bp, "ratio": gf["ssd_lifetime_years"] / bf["ssd_lifetime_years"],
                           "miss_g": gf["chunk_miss_ratio"], "miss_b": bf["chunk_miss_ratio"]}
                A["groups"][f"{t}|{sizing_name(sz)}|w{wu:g}"] = {
                    "trace": t, "sizing": sizing_name(sz), "warmup_s": wu,
                    "rows": {p: f for p, f in rows},
                    "iso": [{"gandalf": g, "baseline": b, "ratio": r, "miss": f["chunk_miss_ratio"],
                             "life": f["ssd_lifetime_years"]} for g, f, b, r in iso],
                    "lowest_miss": low,
                }
    return A


# --------------------------------------------------------------------------- figures

def _plt():
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    plt.rcParams.update({"font.size": 9, "axes.titlesize": 10, "legend.fontsize": 7.5})
    return plt


FAM_STYLE = {"LRU": ("C0", "s"), "LRU-K": ("C1", "^"), "HotPrefix": ("C2", "v"), "Marconi": ("C4", "D"),
             "Workload-aware": ("C5", "P"), "DynamicRandom": ("C7", "X"), "oracle": ("k", "*"),
             "gandalf": ("C3", "o"), "gandalf (population)": ("C6", "o"), "gandalf (variant)": ("C9", "h")}


def _life_axis(ax, values):
    v = [x for x in values if x and x > 0]
    if v and max(v) / min(v) >= 10:
        ax.set_yscale("log")
    ax.set_ylabel("SSD lifetime (years, log)" if ax.get_yscale() == "log" else "SSD lifetime (years)")


def _save(fig, path):
    """PNG at 90 dpi, quantised to a 96-colour palette (keeps every figure well under 150 kB)."""
    import io

    import matplotlib.pyplot as plt
    from PIL import Image
    buf = io.BytesIO()
    fig.savefig(buf, dpi=90, format="png")
    plt.close(fig)
    buf.seek(0)
    Image.open(buf).convert("RGB").quantize(colors=96, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
    return path


def fig_frontier(done, t, title, path, sizings=(R10, R40)):
    plt = _plt()
    sizings = [sz for sz in sizings if select(done, trace=t, sizing=sz, warmup_s=0.0, model=MAIN_MODEL, nodes=1)]
    if not sizings:
        return None
    fig, axes = plt.subplots(1, len(sizings), figsize=(6.2 * len(sizings), 4.6), squeeze=False)
    for ax, sz in zip(axes[0], sizings):
        pts = select(done, trace=t, sizing=sz, warmup_s=0.0, model=MAIN_MODEL, nodes=1)
        by: dict = {}
        for p in pts:
            by.setdefault(family(p.pol), []).append(p)
        lifes = []
        for fam, ps in by.items():
            c, m = FAM_STYLE[fam]
            ps.sort(key=lambda p: p.result["fleet"]["chunk_miss_ratio"])
            x = [p.result["fleet"]["chunk_miss_ratio"] for p in ps]
            y = [p.result["fleet"]["ssd_lifetime_years"] for p in ps]
            lifes += y
            ls = "-" if fam in ("gandalf", "gandalf (population)") else "none"
            ax.plot(x, y, marker=m, ls=ls, color=c, ms=9 if fam == "oracle" else 6, label=fam, lw=1, alpha=0.9)
            for p, xi, yi in zip(ps, x, y):
                lab = SHORT.get(p.pol, POLICIES[p.pol][1])
                if lab:
                    ax.annotate(lab, (xi, yi), textcoords="offset points", xytext=(4, 3), fontsize=6.5, color=c)
        _life_axis(ax, lifes)
        ax.set_xlabel("chunk miss ratio (fraction of requested full chunks)")
        ax.set_title(f"{sizing_name(sz)}", fontsize=9.5)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="best", ncol=2)
    fig.suptitle(f"SSD lifetime vs miss ratio — {title} (up and left is better)", fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def fig_alpha(done, tinfo, path):
    plt = _plt()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
    lifes, any_ = [], False
    for i, t in enumerate(tinfo):
        for sz, ls in ((R10, "-"), (R40, "--")):
            for fam in ("gandalf", "gandalf (population)"):
                ps = [p for p in select(done, trace=t, sizing=sz, warmup_s=0.0, model=MAIN_MODEL, nodes=1)
                      if family(p.pol) == fam and alpha_of(p.pol) is not None]
                if len(ps) < 2:
                    continue
                any_ = True
                ps.sort(key=lambda p: alpha_of(p.pol))
                x = [max(alpha_of(p.pol), 0.25) for p in ps]   # α=0 drawn at 0.25 on the log axis
                life = [p.result["fleet"]["ssd_lifetime_years"] for p in ps]
                miss = [p.result["fleet"]["chunk_miss_ratio"] for p in ps]
                lifes += life
                lab = f"{t}, {'1:10' if sz == R10 else '1:40'}, {'rate' if fam == 'gandalf' else 'population'}"
                mk = "o" if fam == "gandalf" else "s"
                a1.plot(x, life, ls=ls, marker=mk, color=f"C{i}", label=lab, alpha=0.9 if fam == "gandalf" else 0.6)
                a2.plot(x, miss, ls=ls, marker=mk, color=f"C{i}", label=lab, alpha=0.9 if fam == "gandalf" else 0.6)
    if not any_:
        plt.close(fig)
        return None
    for ax in (a1, a2):
        ax.set_xscale("log")
        ax.minorticks_off()
        ax.set_xticks([0.25, 1, 4, 16, 64])
        ax.set_xticklabels(["0", "1", "4", "16", "64"])
        ax.set_xlabel("α (write-fee multiplier, log; α=0 drawn at 0.25)")
        ax.grid(True, which="both", alpha=0.3)
    _life_axis(a1, lifes)
    a2.set_ylabel("chunk miss ratio")
    a1.set_title("lifetime vs α")
    a2.set_title("miss ratio vs α")
    a2.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return _save(fig, path)


def fig_capacity(done, tinfo, path):
    plt = _plt()
    ts = [t for t in tinfo if select(done, trace=t, exp="capacity")]
    if not ts:
        return None
    fig, axes = plt.subplots(len(ts), 2, figsize=(11, 3.7 * len(ts)), squeeze=False)
    for row, t in zip(axes, ts):
        pts = select(done, trace=t, exp="capacity")
        by: dict = {}
        for p in pts:
            by.setdefault(p.pol, []).append(p)
        lifes = []
        for pol, ps in by.items():
            ps.sort(key=lambda p: p.sizing[1])
            x = [p.sizing[1] / CAP_TOTAL * 100 for p in ps]
            c, m = FAM_STYLE[family(pol)]
            if pol.startswith("gp"):
                c = FAM_STYLE["gandalf (population)"][0]
            life = [p.result["fleet"]["ssd_lifetime_years"] for p in ps]
            lifes += life
            row[0].plot(x, [p.result["fleet"]["chunk_miss_ratio"] for p in ps], marker=m, color=c, label=label(pol))
            row[1].plot(x, life, marker=m, color=c, label=label(pol))
        ticks = sorted({p.sizing[1] / CAP_TOTAL * 100 for p in pts})
        for ax in row:
            ax.set_xscale("log")
            ax.minorticks_off()
            ax.set_xticks(ticks)
            ax.set_xticklabels([f"{v:.2g}" for v in ticks])
            ax.set_xlabel("DRAM share of DRAM+SSD (%, log; DRAM+SSD fixed at 41% W)")
            ax.grid(True, which="both", alpha=0.3)
        row[0].set_ylabel("chunk miss ratio")
        _life_axis(row[1], lifes)
        row[0].set_title(f"{t}: miss ratio vs DRAM/SSD split")
        row[1].set_title(f"{t}: lifetime vs DRAM/SSD split")
        row[0].legend(loc="best")
    fig.tight_layout()
    return _save(fig, path)


def fig_models(done, tinfo, path):
    plt = _plt()
    import numpy as np
    ts = [t for t in tinfo if select(done, trace=t, exp="models")]
    if not ts:
        return None
    fig, axes = plt.subplots(len(ts), 2, figsize=(11, 3.8 * len(ts)), squeeze=False)
    for row, t in zip(axes, ts):
        pts = select(done, trace=t, exp="models")
        models = [m for m in MODELS if any(p.model == m for p in pts)]
        pols = [q for q in ("lru", "lruk2", "hp2", "g1", "gp1") if any(p.pol == q for p in pts)]
        wbar = 0.8 / max(len(pols), 1)
        lifes = []
        for j, pol in enumerate(pols):
            c, _ = FAM_STYLE[family(pol)]
            life, miss = [], []
            for m in models:
                q = [p for p in pts if p.model == m and p.pol == pol]
                life.append(q[0].result["fleet"]["ssd_lifetime_years"] if q else np.nan)
                miss.append(q[0].result["fleet"]["chunk_miss_ratio"] if q else np.nan)
            lifes += life
            x = np.arange(len(models)) + (j - (len(pols) - 1) / 2) * wbar
            row[0].bar(x, life, wbar, color=c, label=label(pol), alpha=0.6 if pol == "gp1" else 0.9,
                       hatch="//" if pol == "gp1" else None)
            row[1].bar(x, miss, wbar, color=c, label=label(pol), alpha=0.6 if pol == "gp1" else 0.9,
                       hatch="//" if pol == "gp1" else None)
        for ax in row:
            ax.set_xticks(range(len(models)))
            ax.set_xticklabels(models, fontsize=7.5)
            ax.grid(True, axis="y", which="both", alpha=0.3)
        _life_axis(row[0], [x for x in lifes if x == x])
        row[1].set_ylabel("chunk miss ratio")
        row[0].set_title(f"{t}: lifetime by model (DRAM 1% W : SSD 10% W of each model)")
        row[1].set_title(f"{t}: miss ratio by model")
        row[1].legend(loc="lower right")
    fig.tight_layout()
    return _save(fig, path)


WHERE_POLS = ("lruk1", "lruk2", "hp2", "g1", "gp1", "oracle")


def where_rows(done, t, model_derived):
    out = []
    pts = select(done, trace=t, sizing=R10, warmup_s=0.0, model=MAIN_MODEL, nodes=1)
    fa_chunk = model_derived["kv_bytes_per_token_full"] * 512
    st = model_derived["linear_state_bytes"]
    for pol in WHERE_POLS:
        q = [p for p in pts if p.pol == pol]
        if not q:
            continue
        f = q[0].result["fleet"]
        ns = f["ssd_bytes_written_state"] / st if st else 0
        nf = f["ssd_bytes_written_fa"] / fa_chunk
        hits_fa = f["hits_hbm_fa"] + f["hits_dram_fa"] + f["hits_ssd_fa"]
        hits_st = f["hits_hbm_state"] + f["hits_dram_state"] + f["hits_ssd_state"]
        out.append({"pol": pol, "states_written": ns, "state_hit_frac": f["ssd_write_hit_fraction_state"],
                    "fa_written": nf, "fa_hit_frac": f["ssd_write_hit_fraction_fa"],
                    "fa_hits_ssd_share": f["hits_ssd_fa"] / hits_fa if hits_fa else 0.0,
                    "state_hits_dram_share": f["hits_dram_state"] / hits_st if hits_st else 0.0,
                    "hits": {k: f[k] for k in ("hits_dram_fa", "hits_ssd_fa", "hits_dram_state", "hits_ssd_state")}})
    return out


def fig_where(done, tinfo, derived, path):
    plt = _plt()
    import numpy as np
    ts = [t for t in tinfo if where_rows(done, t, derived)]
    if not ts:
        return None
    fig, axes = plt.subplots(len(ts), 3, figsize=(14, 3.9 * len(ts)), squeeze=False)
    for row, t in zip(axes, ts):
        rows = where_rows(done, t, derived)
        names = [label(r["pol"]).replace("gandalf (population)", "gandalf pop.") for r in rows]
        x = np.arange(len(rows))
        for ax, key, hk, ttl in ((row[0], "states_written", "state_hit_frac", "linear states written to SSD"),
                                 (row[1], "fa_written", "fa_hit_frac", "FA chunks written to SSD")):
            vals = [r[key] for r in rows]
            ax.bar(x, vals, color=[FAM_STYLE[family(r["pol"])][0] for r in rows])
            for xi, v, r in zip(x, vals, rows):
                ax.annotate(f"{r[hk] * 100:.0f}% hit", (xi, v), ha="center", va="bottom", fontsize=7)
            if max(vals) > 0 and min(v for v in vals if v > 0) * 30 < max(vals) if any(v > 0 for v in vals) else False:
                ax.set_yscale("log")
            ax.set_ylabel("count (payloads)")
            ax.set_title(f"{t}: {ttl} (label: share later hit on SSD)", fontsize=8.5)
            ax.set_xticks(x)
            ax.set_xticklabels(names, rotation=25, ha="right", fontsize=7)
            ax.grid(True, axis="y", which="both", alpha=0.3)
        ax = row[2]
        bottom = np.zeros(len(rows))
        for k, c, lab in (("hits_dram_fa", "#2166ac", "FA from DRAM"), ("hits_ssd_fa", "#b2182b", "FA from SSD"),
                          ("hits_dram_state", "#92c5de", "STATE from DRAM"),
                          ("hits_ssd_state", "#f4a582", "STATE from SSD")):
            v = np.array([r["hits"][k] for r in rows], dtype=float)
            ax.bar(x, v, bottom=bottom, color=c, label=lab)
            bottom += v
        ax.set_ylabel("hits (payloads reused)")
        ax.set_title(f"{t}: hits by tier and payload kind", fontsize=8.5)
        ax.set_xticks(x)
        ax.set_xticklabels(names, rotation=25, ha="right", fontsize=7)
        ax.legend(fontsize=7)
        ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    return _save(fig, path)


def fig_latency_cost(done, tinfo, path):
    plt = _plt()
    import numpy as np
    ts = [t for t in tinfo if select(done, trace=t, sizing=R10, warmup_s=0.0, model=MAIN_MODEL, nodes=1)]
    if not ts:
        return None
    fig, axes = plt.subplots(len(ts), 2, figsize=(12, 4.0 * len(ts)), squeeze=False)
    for row, t in zip(axes, ts):
        pts = select(done, trace=t, sizing=R10, warmup_s=0.0, model=MAIN_MODEL, nodes=1)
        lifes = []
        seen = set()
        for p in sorted(pts, key=lambda p: p.pol):
            f = p.result["fleet"]
            c, m = FAM_STYLE[family(p.pol)]
            fam = family(p.pol)
            row[0].plot(f["load_latency_mean_s"] * 1e3, f["ssd_lifetime_years"], marker=m, color=c, ls="none",
                        label=None if fam in seen else fam)
            seen.add(fam)
            lifes.append(f["ssd_lifetime_years"])
            if POLICIES[p.pol][1]:
                row[0].annotate(SHORT.get(p.pol, POLICIES[p.pol][1]), (f["load_latency_mean_s"] * 1e3, f["ssd_lifetime_years"]),
                                textcoords="offset points", xytext=(3, 3), fontsize=6, color=c)
        _life_axis(row[0], lifes)
        row[0].set_xlabel("mean cache load latency per request (ms: DRAM/SSD load + recompute of misses)")
        row[0].set_title(f"{t}: lifetime vs cache load latency")
        row[0].grid(True, which="both", alpha=0.3)
        row[0].legend(fontsize=7, ncol=2)
        ps = sorted(pts, key=lambda p: p.result["fleet"]["cost_per_1k_requests_usd"])
        x = np.arange(len(ps))
        rec = [p.result["fleet"]["cost_per_1k_requests_recompute_usd"] for p in ps]
        wear = [p.result["fleet"]["cost_per_1k_requests_wear_usd"] for p in ps]
        row[1].bar(x, rec, color="#4575b4", label="recompute (GPU time of misses)")
        row[1].bar(x, wear, bottom=rec, color="#d73027", label="SSD wear")
        row[1].set_xticks(x)
        row[1].set_xticklabels([label(p.pol).replace("gandalf (population)", "gandalf pop.") for p in ps],
                               rotation=60, ha="right", fontsize=6.5)
        row[1].set_ylabel("cost per 1k requests (USD)")
        row[1].set_title(f"{t}: cost per 1k requests (sorted)")
        row[1].legend(fontsize=7)
        row[1].grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    return _save(fig, path)


def fig_fleet(done, tinfo, path):
    plt = _plt()
    import numpy as np
    ts = [t for t in tinfo if select(done, trace=t, exp="fleet")]
    if not ts:
        return None
    fig, axes = plt.subplots(len(ts), 3, figsize=(14, 3.6 * len(ts)), squeeze=False)
    for row, t in zip(axes, ts):
        pts = select(done, trace=t, exp="fleet")
        routers = [r for r in ROUTERS if any(p.router == r for p in pts)]
        pols = list(dict.fromkeys(p.pol for p in sorted(pts, key=lambda p: not is_gandalf(p.pol))))
        w = 0.8 / len(pols)
        for j, pol in enumerate(pols):
            c, _ = FAM_STYLE[family(pol)]
            get = {p.router: p.result["fleet"] for p in pts if p.pol == pol}
            x = np.arange(len(routers)) + (j - (len(pols) - 1) / 2) * w
            for ax, k in zip(row, ("fleet_ssd_replacement_usd_per_year", "wear_imbalance", "chunk_miss_ratio")):
                ax.bar(x, [get.get(r, {}).get(k, np.nan) for r in routers], w, color=c, label=label(pol))
        for ax, yl in zip(row, ("fleet SSD replacement (USD / year)", "wear imbalance (max / mean node bytes)",
                                "chunk miss ratio")):
            ax.set_xticks(range(len(routers)))
            ax.set_xticklabels(routers, rotation=20, fontsize=7.5)
            ax.set_ylabel(yl)
            ax.grid(True, axis="y", which="both", alpha=0.3)
        vals = [p.result["fleet"]["fleet_ssd_replacement_usd_per_year"] for p in pts]
        if vals and min(vals) > 0 and max(vals) / min(vals) >= 10:
            row[0].set_yscale("log")
        row[0].set_title(f"{t}: 8 nodes, SSD replacement $/year")
        row[1].set_title(f"{t}: wear imbalance")
        row[2].set_title(f"{t}: miss ratio")
        row[0].legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, path)


# --------------------------------------------------------------------------- tables (markdown)

def _f(x, nd=3):
    if x is None:
        return "—"
    if isinstance(x, float) and (math.isinf(x) or math.isnan(x)):
        return "—"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.{nd}g}" if abs(x) < 1 else f"{x:.{nd}g}"


def md_e2e(A, t):
    out = []
    for gk, g in A["groups"].items():
        if g["trace"] != t:
            continue
        wl = f", warm-up {g['warmup_s']:g} s excluded" if g["warmup_s"] else ""
        out.append(f"\n**{t}, {g['sizing']}{wl}**\n")
        out.append("| policy | lifetime (y) | chunk miss | SSD written FA / STATE (GB) | SSD write-hit frac. | "
                   "load latency (ms) | $/1k req (recompute + wear) |")
        out.append("|---|---|---|---|---|---|---|")
        for pol in POLICIES:
            f = g["rows"].get(pol)
            if f is None:
                continue
            life = "cap (writes nothing)" if f["ssd_lifetime_years"] >= CAP_Y else _f(f["ssd_lifetime_years"])
            out.append(f"| {label(pol)} | {life} | {f['chunk_miss_ratio']:.4f} | "
                       f"{f['ssd_bytes_written_fa'] / GB:,.1f} / {f['ssd_bytes_written_state'] / GB:,.1f} | "
                       f"{f['ssd_write_hit_fraction']:.3f} | {f['load_latency_mean_s'] * 1e3:.1f} | "
                       f"{f['cost_per_1k_requests_usd']:.3f} ({f['cost_per_1k_requests_recompute_usd']:.3f} + "
                       f"{f['cost_per_1k_requests_wear_usd']:.3f}) |")
        if g["rows"]:
            fl = next(iter(g["rows"].values()))["miss_ratio_floor"]
            out.append(f"\nInfinite-cache miss floor: {fl:.4f}.")
        iso = [x for x in g["iso"]]
        if iso:
            out.append("\nLifetime ratio at iso-miss (gandalf over the longest-lived baseline with miss ≤ "
                       "gandalf's + 0.01):\n")
            out.append("| gandalf point | miss | lifetime (y) | vs baseline | ratio |")
            out.append("|---|---|---|---|---|")
            for x in iso:
                out.append(f"| {label(x['gandalf'])} | {x['miss']:.4f} | {_f(x['life'])} | "
                           f"{label(x['baseline']) if x['baseline'] else 'none within +0.01'} | "
                           f"{_f(x['ratio']) + '×' if x['ratio'] is not None else '—'} |")
        if g["lowest_miss"]:
            lm = g["lowest_miss"]
            out.append(f"\nAt the lowest miss ratio: {label(lm['gandalf'])} (miss {lm['miss_g']:.4f}) vs "
                       f"{label(lm['baseline'])} (miss {lm['miss_b']:.4f}): lifetime ×{_f(lm['ratio'])}.")
    return "\n".join(out)


def headline(A, t, sizing=R10, warm=0.0, fam="gandalf"):
    g = A["groups"].get(f"{t}|{sizing_name(sizing)}|w{warm:g}")
    if not g:
        return None
    iso = [x for x in g["iso"] if x["ratio"] is not None and family(x["gandalf"]) == fam and x["life"] < CAP_Y]
    best = max(iso, key=lambda x: x["ratio"], default=None)
    a1 = next((x for x in g["iso"] if x["gandalf"] == ("g1" if fam == "gandalf" else "gp1")), None)
    return {"best": best, "alpha1": a1, "lowest": g["lowest_miss"]}


def _warm(done, t) -> float:
    return max((p.warmup_s for p in done if p.trace == t), default=0.0)


def md_side_by_side(A, done, derived):
    L = ["| claim (paper §) | paper | ours: " + " | ours: ".join(A["traces"]) + " |",
         "|---|---|" + "---|" * len(A["traces"])]

    def cell(fn):
        return " | ".join(fn(t) for t in A["traces"])

    def iso_best(t, fam="gandalf", sz=R10, w=0.0):
        h = headline(A, t, sz, w, fam)
        if not h or not h["best"]:
            return "—" if not h else "no baseline within +0.01"
        b = h["best"]
        return f"{b['ratio']:.2f}× ({label(b['gandalf'])} vs {label(b['baseline'])}, miss {b['miss']:.3f})"

    def iso_a1(t, fam="gandalf"):
        h = headline(A, t, fam=fam)
        if not h or not h["alpha1"]:
            return "—"
        a = h["alpha1"]
        return (f"{a['ratio']:.2f}× vs {label(a['baseline'])}" if a["ratio"] is not None else
                "no baseline within +0.01") + f" (miss {a['miss']:.3f}, {a['life']:.3g} y)"

    def lowest(t):
        h = headline(A, t)
        if not h or not h["lowest"]:
            return "—"
        lm = h["lowest"]
        return f"{lm['ratio']:.2f}× ({lm['miss_g']:.3f} vs {lm['miss_b']:.3f})"

    L.append(f"| lifetime at iso-miss, best gandalf point that writes to the SSD, 1:10 (§5.2, §7) | 2–7.3× (7.3× mean) | "
             f"{cell(iso_best)} |")
    L.append(f"| ... gandalf (population), 1:10 | — (ours) | {cell(lambda t: iso_best(t, 'gandalf (population)'))} |")
    L.append(f"| ... best gandalf point, 1:40 (100 GB : 4 TB) | 2–7.3× | {cell(lambda t: iso_best(t, sz=R40))} |")
    L.append(f"| ... best gandalf point, 1:10, warm-up excluded | — | "
             f"{cell(lambda t: iso_best(t, w=_warm(done, t)) if _warm(done, t) else '—')} |")
    L.append(f"| gandalf α=1 at iso-miss, 1:10 | 4.2× vs LRU (§5.8), 7.6× vs HotPrefix F=1 (§5.7) | "
             f"{cell(iso_a1)} |")
    L.append(f"| lowest-miss gandalf vs lowest-miss baseline | 2× TraceA, 3.3× ClaudeCode | {cell(lowest)} |")

    def alpha_span(t):
        g = A["groups"].get(f"{t}|{sizing_name(R10)}|w0")
        if not g or "g1" not in g["rows"] or "g64" not in g["rows"]:
            return "—"
        a, b = g["rows"]["g1"], g["rows"]["g64"]
        capped = " (α=64 writes nothing: lifetime at the 1000-y cap)" if b["ssd_lifetime_years"] >= CAP_Y else ""
        return (f"{b['ssd_lifetime_years'] / a['ssd_lifetime_years']:.3g}×, "
                f"miss {b['chunk_miss_ratio'] - a['chunk_miss_ratio']:+.3f}{capped}")
    L.append(f"| α 1 → 64: lifetime gain, miss change (§5.4) | 6.5× / +0.016 TraceA; 2.3× / +0.071 ClaudeCode | "
             f"{cell(alpha_span)} |")

    def states(t):
        rows = {r["pol"]: r for r in where_rows(done, t, derived)}
        if "lruk1" not in rows or "g1" not in rows:
            return "—"
        a, b = rows["lruk1"], rows["g1"]
        ratio = a["states_written"] / b["states_written"] if b["states_written"] else float("inf")
        more = f"{ratio:.1f}× fewer" if ratio >= 1 else f"{1 / ratio:.2f}× more"
        return (f"{more} ({b['states_written']:,.0f} vs {a['states_written']:,.0f}); "
                f"{b['state_hit_frac'] * 100:.0f}% vs {a['state_hit_frac'] * 100:.0f}% hit on SSD")
    L.append(f"| linear states written, gandalf α=1 vs LRU-K K=1 (§5.6) | 8.8× fewer; 57% vs 21% hit | "
             f"{cell(states)} |")

    def fa(t):
        rows = {r["pol"]: r for r in where_rows(done, t, derived)}
        if "lruk1" not in rows or "g1" not in rows:
            return "—"
        a, b = rows["lruk1"], rows["g1"]
        if not a["fa_written"]:
            return "—"
        d = (1 - b["fa_written"] / a["fa_written"]) * 100
        return f"{d:.0f}% fewer" if d >= 0 else f"{-d:.0f}% more"
    L.append(f"| FA chunks written, gandalf vs LRU-K K=1 (§5.6) | 33% fewer | {cell(fa)} |")

    def tiers(t):
        rows = {r["pol"]: r for r in where_rows(done, t, derived)}
        if "g1" not in rows or "lruk2" not in rows:
            return "—"
        g, k = rows["g1"], rows["lruk2"]
        return (f"{g['fa_hits_ssd_share'] * 100:.0f}% / {g['state_hits_dram_share'] * 100:.0f}% vs "
                f"{k['fa_hits_ssd_share'] * 100:.0f}% / {k['state_hits_dram_share'] * 100:.0f}%")
    L.append(f"| FA hits from SSD / STATE hits from DRAM, gandalf vs LRU-K (§5.6) | 87% / 90% vs 74% / 67% | "
             f"{cell(tiers)} |")

    def cost(t):
        g = A["groups"].get(f"{t}|{sizing_name(R10)}|w0")
        if not g or "g1" not in g["rows"]:
            return "—"
        base = [(p, f) for p, f in g["rows"].items() if is_baseline(p)]
        bp, bf = min(base, key=lambda x: x[1]["cost_per_1k_requests_usd"])
        gf = g["rows"]["g1"]
        return (f"${gf['cost_per_1k_requests_usd']:.3f} vs ${bf['cost_per_1k_requests_usd']:.3f} ({label(bp)}); "
                f"wear ${gf['cost_per_1k_requests_wear_usd']:.3f} vs ${bf['cost_per_1k_requests_wear_usd']:.3f}")
    L.append(f"| cost per 1k requests, gandalf α=1 vs cheapest baseline (§5.8) | $0.30 vs $0.74 (LRU-K K=2); "
             f"wear $0.16 vs $0.49–0.73 | {cell(cost)} |")

    def lat(t):
        g = A["groups"].get(f"{t}|{sizing_name(R10)}|w0")
        if not g or "g1" not in g["rows"] or "lru" not in g["rows"]:
            return "—"
        a, b = g["rows"]["g1"], g["rows"]["lru"]
        return (f"{a['load_latency_mean_s'] * 1e3:.0f} ms vs {b['load_latency_mean_s'] * 1e3:.0f} ms; lifetime "
                f"{a['ssd_lifetime_years'] / b['ssd_lifetime_years']:.1f}×")
    L.append(f"| load latency, gandalf α=1 vs LRU (§5.8) | 0.78 s vs 0.66 s; 4.2× lifetime | {cell(lat)} |")

    def models(t):
        out = []
        for m in MODELS:
            ps = {p.pol: p.result["fleet"] for p in select(done, trace=t, exp="models") if p.model == m}
            if "g1" in ps and "lruk2" in ps and "hp2" in ps:
                out.append(f"{m.split('_')[0]} {ps['g1']['ssd_lifetime_years'] / ps['hp2']['ssd_lifetime_years']:.2g}"
                           f"/{ps['g1']['ssd_lifetime_years'] / ps['lruk2']['ssd_lifetime_years']:.2g}")
        return "; ".join(out) or "—"
    L.append(f"| lifetime vs HotPrefix / vs LRU-K across 4 models (§5.5) | 3.6–7.1× / 3.6–6.6× | {cell(models)} |")
    return "\n".join(L)


def md_capacity(done, A):
    out = ["| trace | policy | " + " | ".join(f"DRAM {d * 100:g}% W" for d in CAP_DRAM) + " |",
           "|---|---|" + "---|" * len(CAP_DRAM)]
    for t in A["traces"]:
        pts = select(done, trace=t, exp="capacity")
        for pol in dict.fromkeys(p.pol for p in pts):
            cells = []
            for d in CAP_DRAM:
                q = [p for p in pts if p.pol == pol and abs(p.sizing[1] - d) < 1e-9]
                cells.append(f"{q[0].result['fleet']['chunk_miss_ratio']:.3f} / "
                             f"{_f(q[0].result['fleet']['ssd_lifetime_years'])} y" if q else "—")
            out.append(f"| {t} | {label(pol)} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n\nCells: chunk miss ratio / SSD lifetime. DRAM + SSD = 41% W."


def md_models(done, A):
    out = ["| trace | model | W (GB) | " + " | ".join(label(q) for q in ("lru", "lruk2", "hp2", "g1", "gp1")) + " |",
           "|---|---|---|" + "---|" * 5]
    for t in A["traces"]:
        for m in MODELS:
            ps = {p.pol: p.result["fleet"] for p in select(done, trace=t, exp="models") if p.model == m}
            if not ps:
                continue
            w = A["working_sets_bytes"].get(f"{t}|{m}", 0) / GB
            cells = [f"{ps[q]['chunk_miss_ratio']:.3f} / {_f(ps[q]['ssd_lifetime_years'])} y" if q in ps else "—"
                     for q in ("lru", "lruk2", "hp2", "g1", "gp1")]
            out.append(f"| {t} | {m} | {w:,.0f} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n\nCells: chunk miss ratio / SSD lifetime; DRAM 1% W : SSD 10% W of each model."


def md_where(done, A, derived):
    out = ["| trace | policy | linear states written | … later hit on SSD | FA chunks written | … hit on SSD | "
           "FA hits from SSD | STATE hits from DRAM |", "|---|---|---|---|---|---|---|---|"]
    for t in A["traces"]:
        for r in where_rows(done, t, derived):
            out.append(f"| {t} | {label(r['pol'])} | {r['states_written']:,.0f} | {r['state_hit_frac'] * 100:.0f}% | "
                       f"{r['fa_written']:,.0f} | {r['fa_hit_frac'] * 100:.0f}% | {r['fa_hits_ssd_share'] * 100:.0f}% | "
                       f"{r['state_hits_dram_share'] * 100:.0f}% |")
    return "\n".join(out)


def md_fleet(done, A):
    out = ["| trace | router | policy | miss | min-node lifetime (y) | fleet SSD replacement ($/y) | wear imbalance |",
           "|---|---|---|---|---|---|---|"]
    for t in A["traces"]:
        for p in sorted(select(done, trace=t, exp="fleet"), key=lambda p: (ROUTERS.index(p.router), p.pol)):
            f = p.result["fleet"]
            out.append(f"| {t} | {p.router} | {label(p.pol)} | {f['chunk_miss_ratio']:.4f} | "
                       f"{_f(f['ssd_lifetime_years'])} | {f['fleet_ssd_replacement_usd_per_year']:,.2f} | "
                       f"{f['wear_imbalance']:.2f} |")
    return "\n".join(out) + ("\n\n8 nodes; each node has 1/8 of the single-node 1:10 sizing (fleet DRAM 1% W, "
                             "SSD 10% W). Best baseline = the longest-lived baseline within +0.01 miss of gandalf "
                             "α=1 on the single node.")


def md_investigate(done, A):
    out = ["| trace | gandalf α=1 with | miss | lifetime (y) | SSD written FA / STATE (GB) | write-hit frac. | "
           "iso-miss ratio (vs baseline) |", "|---|---|---|---|---|---|---|"]
    for t in A["traces"]:
        g = A["groups"].get(f"{t}|{sizing_name(R10)}|w0")
        if not g:
            continue
        iso = {x["gandalf"]: x for x in g["iso"]}
        for pol in ["g1", "gp1", *VARIANTS]:
            f = g["rows"].get(pol)
            if f is None:
                continue
            x = iso.get(pol)
            r = f"{x['ratio']:.2f}× ({label(x['baseline'])})" if x and x["ratio"] is not None else "none within +0.01"
            name = "(the reconstruction, defaults)" if pol == "g1" else (
                "reuse=population" if pol == "gp1" else POLICIES[pol][1])
            out.append(f"| {t} | {name} | {f['chunk_miss_ratio']:.4f} | {_f(f['ssd_lifetime_years'])} | "
                       f"{f['ssd_bytes_written_fa'] / GB:,.1f} / {f['ssd_bytes_written_state'] / GB:,.1f} | "
                       f"{f['ssd_write_hit_fraction']:.3f} | {r} |")
    return "\n".join(out)


def md_points(done, A):
    out = ["| # | trace | model | sizing | policy | extra | wall (s) |", "|---|---|---|---|---|---|---|"]
    for i, p in enumerate(done):
        extra = (f"warm-up {p.warmup_s:g} s " if p.warmup_s else "") + (f"{p.nodes} nodes, {p.router}"
                                                                        if p.nodes > 1 else "")
        out.append(f"| {i} | {p.trace} | {p.model} | {sizing_name(p.sizing)} | {label(p.pol)} | {extra} | "
                   f"{p.result['wall_s']:.1f} |")
    return "\n".join(out)


# --------------------------------------------------------------------------- docs

SKELETON = """# The paper's study on real traces

<!-- BEGIN GENERATED: provenance -->
<!-- END GENERATED: provenance -->

## Side by side with the paper

<!-- BEGIN GENERATED: side_by_side -->
<!-- END GENERATED: side_by_side -->

## 1. End-to-end (§5.2)

<!-- BEGIN GENERATED: e2e -->
<!-- END GENERATED: e2e -->

## 2. Capacity ratio (§5.3)

<!-- BEGIN GENERATED: capacity -->
<!-- END GENERATED: capacity -->

## 3. α sensitivity (§5.4)

<!-- BEGIN GENERATED: alpha -->
<!-- END GENERATED: alpha -->

## 4. Model sensitivity (§5.5)

<!-- BEGIN GENERATED: models -->
<!-- END GENERATED: models -->

## 5. Where the improvement comes from (§5.6)

<!-- BEGIN GENERATED: where -->
<!-- END GENERATED: where -->

## 6. Latency and cost (§5.8)

<!-- BEGIN GENERATED: latency_cost -->
<!-- END GENERATED: latency_cost -->

## Where the reconstruction falls short: one knob at a time

<!-- BEGIN GENERATED: investigate -->
<!-- END GENERATED: investigate -->

## 7. Fleet (beyond the paper)

<!-- BEGIN GENERATED: fleet -->
<!-- END GENERATED: fleet -->

## Points and timings

<!-- BEGIN GENERATED: points -->
<!-- END GENERATED: points -->
"""


def write_sections(md_path: Path, sections: dict[str, str]) -> None:
    text = md_path.read_text() if md_path.exists() else SKELETON
    for name, body in sections.items():
        pat = re.compile(rf"(<!-- BEGIN GENERATED: {name} -->\n).*?(<!-- END GENERATED: {name} -->)", re.S)
        if pat.search(text):
            text = pat.sub(lambda m: m.group(1) + body.strip() + "\n" + m.group(2), text)
        else:
            text += f"\n<!-- BEGIN GENERATED: {name} -->\n{body.strip()}\n<!-- END GENERATED: {name} -->\n"
    md_path.write_text(text)


def report(done, traces_info, ws, args, wall_s):
    import cluster_sim

    A = analyse(done, traces_info, ws)
    from cluster_sim.config import SimConfig
    spec = SimConfig.from_mapping(compose([f"model={MAIN_MODEL}"])).model
    derived = {"kv_bytes_per_token_full": spec.kv_bytes_per_token_full, "linear_state_bytes": spec.linear_state_bytes}
    out = Path(args.out)
    fig_dir = (ROOT / "docs" / "figures") if args.docs else out / "figures"
    fig_dir.mkdir(parents=True, exist_ok=True)
    figs = {}
    for t in traces_info:
        figs[f"frontier_{t}"] = fig_frontier(done, t, traces_info[t]["title"], fig_dir / f"frontier_{t}.png")
        figs[f"frontier_abs_{t}"] = fig_frontier(done, t, traces_info[t]["title"] + ", paper's absolute sizes",
                                                 fig_dir / f"frontier_abs_{t}.png", (A10, A40))
    figs["alpha"] = fig_alpha(done, traces_info, fig_dir / "alpha.png")
    figs["capacity"] = fig_capacity(done, traces_info, fig_dir / "capacity.png")
    figs["models"] = fig_models(done, traces_info, fig_dir / "models.png")
    figs["where"] = fig_where(done, traces_info, derived, fig_dir / "where.png")
    figs["latency_cost"] = fig_latency_cost(done, traces_info, fig_dir / "latency_cost.png")
    figs["fleet"] = fig_fleet(done, traces_info, fig_dir / "fleet.png")
    figs = {k: v for k, v in figs.items() if v}
    for k, v in figs.items():
        print(f"figure {k}: {v} ({Path(v).stat().st_size / 1024:.0f} kB)")

    results = {"mode": "quick" if args.quick else "full", "wall_s": wall_s, "analysis": A,
               "points": [{"key": p.key, "exps": sorted(p.exps), "overrides": p.overrides,
                           "wall_s": p.result["wall_s"], "fleet": p.result["fleet"]} for p in done],
               "figures": {k: str(v) for k, v in figs.items()}}
    (out / "results.json").write_text(json.dumps(results, indent=1, default=float))

    def img(k, alt):
        if k not in figs:
            return ""
        rel = os.path.relpath(figs[k], (ROOT / "docs") if args.docs else out)
        return f"\n![{alt}]({rel})\n"

    mode = ("**Numbers from the quick mode** (`python scripts/reproduce.py --quick --docs`: Mooncake first 4,000 "
            "requests, WEKA 300 s, a reduced point list). Regenerate the full study with "
            "`python scripts/reproduce.py`.") if args.quick else \
        "Numbers from the full study: `python scripts/reproduce.py` (regenerates every table and figure here)."
    wss = ", ".join(f"{k.replace('|', ' / ')} {v / GB:,.0f} GB" for k, v in sorted(ws.items()))
    import subprocess
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "cluster_sim", "conf"], cwd=ROOT,
                           capture_output=True, text=True).stdout.split("\n")
    dirty = [ln[3:] for ln in dirty if ln.strip() and not ln.startswith("??")]
    dnote = (f" The working tree had uncommitted changes to {', '.join(dirty)} when it ran (the numbers are "
             "those of that tree)." if dirty else "")
    sec = {
        "provenance": f"{mode} Git sha `{cluster_sim.api.git_sha()[:10]}`{dnote} {len(done)} points, "
                      f"{wall_s / 60:.1f} min wall for this invocation on {args.workers} Ray workers "
                      f"({sum(p.result['wall_s'] for p in done) / 60:.1f} min of point time; points reused from "
                      f"the cache with `--resume` count their original time).\n\nWorking sets W: {wss}.",
        "side_by_side": md_side_by_side(A, done, derived),
        "e2e": "\n".join(img(f"frontier_{t}", f"frontier {t}") for t in traces_info) +
               "\n".join(img(f"frontier_abs_{t}", f"frontier abs {t}") for t in traces_info) +
               "\n".join(md_e2e(A, t) for t in traces_info),
        "capacity": img("capacity", "capacity") + "\n" + md_capacity(done, A),
        "alpha": img("alpha", "alpha"),
        "models": img("models", "models") + "\n" + md_models(done, A),
        "where": img("where", "where") + "\n" + md_where(done, A, derived),
        "latency_cost": img("latency_cost", "latency and cost"),
        "fleet": img("fleet", "fleet") + "\n" + md_fleet(done, A),
        "points": md_points(done, A),
        "investigate": md_investigate(done, A),
    }
    md = (ROOT / "docs" / "results.md") if args.docs else out / "results.md"
    write_sections(md, sec)
    print(f"wrote {md} and {out / 'results.json'}")
    print("\n" + sec["side_by_side"])
    return results


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="the reduced study (< 10 min)")
    ap.add_argument("--out", default=None, help="results cache (default study_runs/<quick|full>)")
    ap.add_argument("--docs", action="store_true", default=None,
                    help="write docs/figures/*.png and docs/results.md (default: on for the full study)")
    ap.add_argument("--no-docs", dest="docs", action="store_false")
    ap.add_argument("--workers", type=int, default=2, help="points in parallel (Ray tasks)")
    ap.add_argument("--resume", action="store_true", help="reuse points cached under --out with the same overrides")
    ap.add_argument("--list", action="store_true", help="print the point list and exit")
    args = ap.parse_args(argv)
    if args.docs is None:
        args.docs = not args.quick
    args.out = args.out or str(ROOT / "study_runs" / ("quick" if args.quick else "full"))
    specs = trace_specs(args.quick)
    for p in (MOONCAKE, WEKA, AZURE):
        if not p.exists():
            sys.exit(f"reproduce: {p} not found (the real traces live in ../shared/traces)")
    points = plan(args.quick)
    if args.list:
        for i, p in enumerate(points):
            print(f"#{i:<3d} [{','.join(sorted(p.exps))}] {p.key}")
        return None
    t0 = time.perf_counter()
    done, tinfo, ws = run_points(points, args, specs)
    return report(done, tinfo, ws, args, time.perf_counter() - t0)


if __name__ == "__main__":
    main()
