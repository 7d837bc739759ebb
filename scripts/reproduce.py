#!/usr/bin/env python
"""The paper's evaluation (Gandalf §5.2-5.8, plus a fleet study) on the real traces, as sweeps.

    python scripts/reproduce.py                  # the full study (whole traces: ~11 min on 2 cores) -> docs/
    python scripts/reproduce.py --quick          # a reduced study (< 10 min) -> study_runs/quick/
    python scripts/reproduce.py --quick --docs   # ... and its tables/figures into docs/results.md
    python scripts/reproduce.py --resume         # rerun: points already FINISHED are fetched, not run
    python scripts/reproduce.py --list           # print the sweeps (cluster-sim -m command lines) and stop
    python scripts/reproduce.py --tiny           # 2 points on the bundled default trace (the pipeline's test)

This file only plans. Each setting (trace, model, DRAM/SSD sizing, warm-up, fleet) is ONE
``cluster-sim -m`` sweep of the study's named points (``+experiment/paper_points=lru,lruk2,g1,...``,
conf/experiment/paper_points/*.yaml) over an experiment config (conf/experiment/paper_*.yaml:
Kimi Linear 48B-A3B, 512-token chunks, no HBM cache, 1 DWPD, 5 y, WAF 1), written to
``study_runs/<mode>/<setting>/`` (``hydra.sweep.dir``), logged to MLflow in
``study_runs/<mode>/mlflow.db`` so that ``sweep.resume=true`` can skip finished points. DRAM and SSD
are sized from the working set W of the (trace, model): DRAM = 1% W, SSD = 10% W ("1:10", the
paper's 100 GB : 1 TB) or 40% W ("1:40"); the paper's absolute 100 GB : 1 TB / 4 TB run too. The
fleet sweeps (8 nodes, every router) follow once a trace's main setting is done (gandalf α=1 against
the best baseline at iso-miss). ``study.json`` names every setting; then

    cluster-sim-report --study study_runs/<mode> [--docs docs/results.md]

draws every table and figure (cluster_sim/report/; this script calls it at the end).
Traces: the shared folder (``CLUSTER_SIM_TRACES``, default ../shared/traces; never copied).
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from cluster_sim import cli, report
from cluster_sim.api import git_sha
from cluster_sim.locations import missing, shared_trace
from cluster_sim.study import working_set
from cluster_sim.router import ROUTERS as ROUTER_CLASSES

ROOT = Path(__file__).resolve().parents[1]       # docs/ and study_runs/ of this checkout
GROUP = "experiment/paper_points"                # conf/experiment/paper_points/<point>.yaml
GB, TB = 10**9, 10**12

MAIN_MODEL = "kimi_linear_48b_a3b"
MODELS = ["nemotron_h_8b", "gemma3_27b", "qwen3_5_27b", MAIN_MODEL]
ROUTERS = list(ROUTER_CLASSES)

# point -> (family, parameter label); the overrides are conf/experiment/paper_points/<point>.yaml
LABELS: dict[str, tuple[str, str]] = {
    "lru": ("LRU", ""), "lruk1": ("LRU-K", "K=1"), "lruk2": ("LRU-K", "K=2"), "lruk3": ("LRU-K", "K=3"),
    "hp1": ("HotPrefix", "F=1"), "hp2": ("HotPrefix", "F=2"), "hp10": ("HotPrefix", "F=10"),
    "mar0": ("Marconi", "α=0"), "mar1": ("Marconi", "α=1"), "marA": ("Marconi", "α=auto"),
    "wa": ("Workload-aware", ""), "dr": ("DynamicRandom", ""), "oracle": ("oracle", ""),
    "oadm": ("oracle_admission", ""), "kvbm": ("KVBM filter", "count ≥ 2"),
    # the product's default gandalf (reuse=hints, objective=chunks); the g* points are the paper's
    "gd": ("gandalf (default)", "α=1, hints"),
}
ALPHAS = (0, 1, 4, 16, 64)
for _a in ALPHAS:
    LABELS[f"g{_a}"] = ("gandalf", f"α={_a}")
    LABELS[f"gp{_a}"] = ("gandalf (population)", f"α={_a}")
for _t in (60, 3600):
    LABELS[f"g1t{_t}"] = ("gandalf", f"α=1, τ={_t}s")
VARIANTS = {"gobjc": "objective=chunks (cost in chunks, not dollars)", "gstrict": "placement=strict (states never on SSD)",
            "gbudget": "wear_price=budget_pressure", "gshadow": "victim_loss=shadow_price",
            "gpobjc": "population + objective=chunks"}
for _k, _lab in VARIANTS.items():
    LABELS[_k] = ("gandalf (variant)", _lab)
SHORT = {"gobjc": "chunks", "gstrict": "strict", "gbudget": "budget", "gshadow": "shadow", "gpobjc": "pop+chunks",
         "g1t60": "τ=60", "g1t3600": "τ=3600"}
BASELINE_FAMILIES = ("LRU", "LRU-K", "HotPrefix", "Marconi", "Workload-aware", "DynamicRandom")

SIZINGS = {"r10": ("rel", 0.01, 0.10), "r40": ("rel", 0.01, 0.40), "a10": ("abs", 100 * GB, 1 * TB),
           "a40": ("abs", 100 * GB, 4 * TB)}
SIZING_NAMES = {"r10": "DRAM 1% W : SSD 10% W", "r40": "DRAM 1% W : SSD 40% W", "a10": "DRAM 100 GB : SSD 1 TB",
                "a40": "DRAM 100 GB : SSD 4 TB"}
CAP_TOTAL = 0.41       # §5.3: DRAM + SSD fixed at 41% W (the 100 GB + 4 TB total, scaled to W)
CAP_DRAM = (0.01, 0.02, 0.04, 0.08, 0.16)
WARMUP = {"moon": 600.0, "weka": 300.0, "weka_az": 60.0}


# --------------------------------------------------------------------------- traces and plan

def traces(mode: str) -> dict[str, dict]:
    """trace key -> title, experiment config, extra overrides, shared traces it reads."""
    if mode == "tiny":
        return {"default": {"title": "bundled default trace", "experiment": "paper_mooncake",
                            "overrides": ["workload=default"], "needs": []}}
    if mode == "quick":
        return {"moon": {"title": "Mooncake (first 4,000 requests)", "experiment": "paper_mooncake",
                         "overrides": ["workload.limit_requests=4000"], "needs": ["mooncake"]},
                "weka": {"title": "WEKA Claude Code, Poisson 0.2/s, 300 s", "experiment": "paper_weka",
                         "overrides": ["workload.until_s=300"], "needs": ["claude_code"]}}
    return {"moon": {"title": "Mooncake conversation (59 min)", "experiment": "paper_mooncake", "overrides": [],
                     "needs": ["mooncake"]},
            # the whole trace (5.1 days): a 1,200 s cut hid Gandalf's long-span regression (decision 45)
            "weka": {"title": "WEKA Claude Code, Poisson 0.2/s, whole trace", "experiment": "paper_weka",
                     "overrides": [], "needs": ["claude_code"]},
            "weka_az": {"title": "WEKA Claude Code, Azure arrivals, whole trace", "experiment": "paper_weka_azure",
                        "overrides": [], "needs": ["claude_code", "azure"]}}


def _sname(sz: tuple) -> str:
    for k, v in SIZINGS.items():
        if v == sz:
            return k
    return "d" + "_".join(f"{x:g}" for x in sz[1:])


class Plan:
    """Settings (one sweep each) keyed by (trace, model, sizing, warm-up); per setting, per point,
    the experiments (tables) it belongs to."""

    def __init__(self):
        self.settings: dict[tuple, dict] = {}

    def add(self, exp, trace, pols, sizing=SIZINGS["r10"], model=MAIN_MODEL, warmup=0.0):
        k = (trace, model, tuple(sizing), float(warmup))
        name = f"{trace}/{model}/{_sname(tuple(sizing))}" + (f"_w{warmup:g}" if warmup else "")
        s = self.settings.setdefault(k, {"dir": name, "trace": trace, "model": model, "sizing": list(sizing),
                                         "warmup_s": float(warmup), "exps": {}})
        for p in pols:
            s["exps"].setdefault(p, [])
            if exp not in s["exps"][p]:
                s["exps"][p].append(exp)


def plan(mode: str) -> Plan:
    P = Plan()
    if mode == "tiny":
        P.add("e2e", "default", ["lru", "g1"])
        return P
    if mode == "quick":
        for t in ("moon", "weka"):
            P.add("e2e", t, ["lru", "lruk2", "hp2", "hp10", "mar0", "oracle", "g0", "g1", "g16", "gp1"] if t == "moon"
                  else ["lru", "lruk2", "hp2", "oracle", "g1", "g16", "gp1"])
        P.add("e2e", "moon", ["lru", "lruk2", "g1"], SIZINGS["r40"])
        P.add("warmup", "moon", ["lru", "lruk2", "g1"], warmup=300.0)
        for d in (0.01, 0.08):
            P.add("capacity", "moon", ["lru", "lruk2", "g1"], ("rel", d, round(CAP_TOTAL - d, 4)))
        P.add("models", "moon", ["lruk2", "hp2", "g1"], model="nemotron_h_8b")
        P.add("models", "moon", ["lruk2", "hp2", "g1"])
        return P
    base = ["lru", "lruk1", "lruk2", "lruk3", "hp1", "hp2", "hp10", "mar0", "mar1", "marA", "wa", "dr", "kvbm",
            "oracle", "oadm", "gd"]
    g_moon = ["g0", "g1", "g4", "g16", "g64", "g1t60", "g1t3600", "gp0", "gp1", "gp4", "gp16", "gp64"]
    g_weka = ["g0", "g1", "g4", "g16", "g64", "g1t60", "g1t3600", "gp1", "gp16"]
    for t, gs in (("moon", g_moon), ("weka", g_weka)):
        P.add("e2e", t, base + gs)                                                 # §5.2, §5.4, §5.6, §5.8
        P.add("e2e", t, ["lru", "lruk2", "lruk3", "hp2", "hp10", "mar0", "kvbm", "oracle", "oadm", "gd", "g0", "g1", "g4",
                         "g16", "g64", "gp1"], SIZINGS["r40"])
        for sz in ("a10", "a40"):
            P.add("e2e", t, ["lru", "lruk2", "hp2", "hp10", "oracle", "g1", "g16", "gp1"], SIZINGS[sz])
        P.add("warmup", t, ["lru", "lruk2", "hp2", "hp10", "mar0", "oracle", "oadm", "gd", "g0", "g1", "g16", "gp1"],
              warmup=WARMUP[t])
        for d in CAP_DRAM:                                                          # §5.3
            P.add("capacity", t, ["lru", "lruk2", "hp2", "oracle", "g1", "gp1", "gd"], ("rel", d, round(CAP_TOTAL - d, 4)))
        for m in MODELS:                                                            # §5.5
            P.add("models", t, ["lru", "lruk2", "hp2", "g1", "gp1", "gd"], model=m)
        P.add("investigate", t, list(VARIANTS) if t == "moon" else ["gobjc", "gstrict", "gpobjc"])
    P.add("e2e", "weka_az", ["lru", "lruk2", "hp2", "hp10", "oracle", "oadm", "gd", "g1", "g16", "gp1"])
    return P


# --------------------------------------------------------------------------- running

class Runner:
    def __init__(self, args, specs):
        self.args, self.specs, self.out = args, specs, Path(args.out)
        self.ws: dict[tuple, int] = {}

    def base(self, t: str, model: str) -> list[str]:
        s = self.specs[t]
        return [f"experiment={s['experiment']}", *s["overrides"], f"model={model}"]

    def w(self, t: str, model: str) -> int:
        if (t, model) not in self.ws:
            t0 = time.perf_counter()
            self.ws[(t, model)] = working_set(self.base(t, model) + ["tracking.enabled=false"])
            print(f"  W[{t}, {model}] = {self.ws[(t, model)] / GB:,.1f} GB ({time.perf_counter() - t0:.0f} s)",
                  flush=True)
        return self.ws[(t, model)]

    def command(self, s: dict, pols: list[str], extra: list[str] = ()) -> list[str]:
        sz = s["sizing"]
        if sz[0] == "rel":
            w = self.w(s["trace"], s["model"])
            dram, ssd = int(w * sz[1]), int(w * sz[2])
        else:
            dram, ssd = int(sz[1]), int(sz[2])
        a = self.args
        ov = self.base(s["trace"], s["model"]) + [f"hardware.dram_bytes={dram}", f"hardware.ssd_bytes={ssd}"]
        if s["warmup_s"]:
            ov.append(f"workload.warmup_s={s['warmup_s']:g}")
        ov += list(extra) + [f"+{GROUP}={','.join(pols)}", f"hydra.sweep.dir={(self.out / s['dir']).resolve()}",
                             "report.figures=false", f"sweep.max_parallel={a.workers}", "sweep.progress=false"]
        if a.tracking:
            ov += ["tracking.enabled=true", f"tracking.uri=sqlite:///{(self.out / 'mlflow.db').resolve()}",
                   f"tracking.experiment=paper_study_{a.mode}", f"sweep.resume={'true' if a.resume else 'false'}"]
        else:
            ov += ["tracking.enabled=false"]
        return ["-m", *ov]

    def sweep(self, s: dict, pols: list[str], extra: list[str] = ()) -> None:
        argv = self.command(s, pols, extra)
        d = self.out / s["dir"]
        if not self.args.resume and d.exists():
            shutil.rmtree(d)
        print(f"\n== {s['dir']}: {len(pols)} points{' x routers' if extra else ''}\n   cluster-sim {' '.join(argv)}",
              flush=True)
        t0 = time.perf_counter()
        code = cli.main(argv)
        print(f"   ({time.perf_counter() - t0:.0f} s, exit status {code})", flush=True)
        if code not in (0, 1, 3):      # 1: some points failed (named above); 3: MLflow failed, files written
            raise SystemExit(f"reproduce: the sweep of {s['dir']} failed (exit status {code})")


def manifest(args, specs, P: Plan, runner: Runner, wall_s: float, fleet: list[dict]) -> dict:
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "cluster_sim", "conf"], cwd=ROOT,
                           capture_output=True, text=True).stdout.split("\n")
    how = {"full": "`python scripts/reproduce.py`", "quick": "`python scripts/reproduce.py --quick --docs`",
           "tiny": "`python scripts/reproduce.py --tiny`"}[args.mode]
    note = (f"**Numbers from the {args.mode} mode** ({how}: a reduced point list). Regenerate the full study with "
            "`python scripts/reproduce.py`." if args.mode != "full" else
            f"Numbers from the full study: {how} (regenerates every table and figure here).")
    return {"mode": args.mode, "mode_note": note, "git_sha": git_sha(), "wall_s": wall_s,
            "dirty": [ln[3:] for ln in dirty if ln.strip() and not ln.startswith("??")],
            "point_group": GROUP, "traces": {t: {"title": s["title"]} for t, s in specs.items()},
            "main_model": MAIN_MODEL, "models": MODELS, "routers": ROUTERS,
            "labels": {k: list(v) for k, v in LABELS.items()}, "short": SHORT, "variants": list(VARIANTS),
            "where_pols": ["lruk1", "lruk2", "hp2", "g1", "gp1", "oracle"], "baseline_families": BASELINE_FAMILIES,
            "candidate_prefix": "gandalf", "alphas": {k: a for k in LABELS for a in ALPHAS if k in (f"g{a}", f"gp{a}")},
            "chunk_tokens": 512, "sizings": {k: list(v) for k, v in SIZINGS.items()}, "sizing_names": SIZING_NAMES,
            "capacity": {"total": CAP_TOTAL, "dram": list(CAP_DRAM)}, "lifetime_cap_years": 1000.0,
            "working_sets_bytes": {f"{t}|{m}": w for (t, m), w in sorted(runner.ws.items())},
            "settings": list(P.settings.values()) + fleet}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", dest="mode", action="store_const", const="quick", help="the reduced study (< 10 min)")
    g.add_argument("--tiny", dest="mode", action="store_const", const="tiny",
                   help="two points on the bundled default trace (checks the pipeline end to end)")
    ap.set_defaults(mode="full")
    ap.add_argument("--out", default=None, help="the study folder (default study_runs/<mode>)")
    ap.add_argument("--docs", action="store_true", default=None,
                    help="rewrite docs/results.md and docs/figures/ (default: on for the full study)")
    ap.add_argument("--no-docs", dest="docs", action="store_false")
    ap.add_argument("--workers", type=int, default=2, help="points in flight at once (sweep.max_parallel)")
    ap.add_argument("--resume", action="store_true", help="skip points with a FINISHED run in the study's MLflow store")
    ap.add_argument("--no-tracking", dest="tracking", action="store_false",
                    help="no MLflow (then --resume cannot skip anything)")
    ap.add_argument("--list", action="store_true", help="print the sweeps and stop")
    args = ap.parse_args(argv)
    if args.resume and not args.tracking:
        ap.error("--resume needs the MLflow store (drop --no-tracking)")
    if args.docs is None:
        args.docs = args.mode == "full"
    args.out = str(Path(args.out or ROOT / "study_runs" / args.mode))
    specs = traces(args.mode)
    need = sorted({n for s in specs.values() for n in s["needs"]})
    why = missing(*need) if need else None
    if why:
        print(f"reproduce: error: {why}", file=sys.stderr)
        return 2
    P = plan(args.mode)
    runner = Runner(args, specs)
    if args.list:
        for s in P.settings.values():
            print(f"[{s['dir']}] cluster-sim {' '.join(runner.command(s, list(s['exps'])))}")
        print("... then per trace: fleet sweeps (8 nodes, every router) of gandalf α=1 and the best baseline")
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    fleet: list[dict] = []

    def write_manifest():
        (out / "study.json").write_text(json.dumps(manifest(args, specs, P, runner, time.perf_counter() - t0, fleet),
                                                   indent=1))

    print(f"study ({args.mode}): {len(P.settings)} sweeps, "
          f"{sum(len(s['exps']) for s in P.settings.values())} points (+ fleet points); traces: "
          + ", ".join(f"{t}: {s['title']}" for t, s in specs.items()), flush=True)
    mains = {t: (t, MAIN_MODEL, SIZINGS["r10"], 0.0) for t in specs}
    # each trace's main setting first: its fleet sweep waits for it
    order = [P.settings[k] for k in sorted(P.settings, key=lambda k: k not in mains.values())]
    for s in order:
        write_manifest()
        runner.sweep(s, list(s["exps"]))
        key = (s["trace"], s["model"], tuple(s["sizing"]), s["warmup_s"])
        if args.mode != "tiny" and s["trace"] != "weka_az" and key == mains[s["trace"]]:
            write_manifest()
            st = report.load_study(out)
            rows = [(p.pol, p.result["fleet"]) for p in st if p.trace == s["trace"] and "e2e" in p.exps
                    and tuple(p.sizing) == SIZINGS["r10"] and not p.warmup_s and p.model == MAIN_MODEL]
            if rows:
                best = report.best_baseline_for(st, rows, "g1")
                routers = ["session_affinity", "kv_aware"] if args.mode == "quick" else ROUTERS
                f = {"dir": f"{s['trace']}/fleet8", "trace": s["trace"], "model": MAIN_MODEL,
                     "sizing": ["rel", 0.01 / 8, 0.10 / 8], "warmup_s": 0.0,
                     "exps": {p: ["fleet"] for p in dict.fromkeys(["g1", best])}}
                fleet.append(f)
                print(f"fleet sweep for {s['trace']}: gandalf α=1 vs {st.label(best)} (best baseline at iso-miss)")
                runner.sweep(f, list(f["exps"]), ["fleet.nodes=8", f"fleet.router={','.join(routers)}"])
    write_manifest()
    docs = ROOT / "docs" / "results.md" if args.docs else None
    res = report.study_report(out, docs)
    print(f"\nstudy: {len(res['points'])} points in {time.perf_counter() - t0:.0f} s; wrote {res['markdown']}, "
          f"{out / 'results.json'}\n  (again from the folder: cluster-sim-report --study {out}"
          f"{' --docs docs/results.md' if docs else ''})")
    print("\n" + res["sections"]["side_by_side"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
