#!/usr/bin/env python
"""SSD write amplification measured by the flash translation layer (``hardware.ssd.ftl=greedy``)
for several policies on whole real traces, and how it changes their lifetime ratios (issue #19).
Printed; ``--docs`` also rewrites the generated table in docs/results.md ("SSD write
amplification measured"). Never asserted.

Each trace is loaded and chunked once; every policy replays it once per FTL setting (the FTL only
observes, so the cache and its host writes are identical across the settings of one policy):
over-provisioning 7%, 12.7% (the default) and 28% with one write stream, and 12.7% with FA and
STATE in separate streams (``streams=by_kind``).

    python scripts/ftl_study.py                                   # lru, lru_k, gandalf on Mooncake and WEKA
    python scripts/ftl_study.py --policies lru lru_k gandalf oracle_admission --docs
    python scripts/ftl_study.py --traces mooncake --policies lru "lru_k:policy.k=3"
    python scripts/ftl_study.py --json study.json ... ; python scripts/ftl_study.py --from-json study.json --docs
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

import cluster_sim
from cluster_sim.api import prepare
from cluster_sim.config import SimConfig
from cluster_sim.study import FTL_TRACES, policy_overrides, shared_trace_overrides

# the configurations (whole traces: no workload.until_s): cluster_sim.study.FTL_TRACES
# FTL settings: (label, overrides); the first is the reference for the lifetime ratios
SETTINGS = [
    ("op12.7", ["hardware.ssd.ftl=greedy", "hardware.ssd.overprovision=0.127"]),
    ("op7", ["hardware.ssd.ftl=greedy", "hardware.ssd.overprovision=0.07"]),
    ("op28", ["hardware.ssd.ftl=greedy", "hardware.ssd.overprovision=0.28"]),
    ("op12.7_by_kind", ["hardware.ssd.ftl=greedy", "hardware.ssd.overprovision=0.127",
                        "hardware.ssd.streams=by_kind"]),
]
DOC = ROOT / "docs" / "results.md"


def base_overrides(trace: str) -> list[str]:
    reader, base = FTL_TRACES[trace]
    return base + shared_trace_overrides(reader, "ftl_study")


def run_point(trace_obj, overrides: list[str]) -> dict:
    t = time.perf_counter()
    s = cluster_sim.run(cluster_sim.compose(overrides), trace=trace_obj, write=False)
    f = dict(s.fleet)
    f["wall_s"] = time.perf_counter() - t
    return f


def life_waf1(f: dict, cap: float) -> float:
    """The lifetime this run would report with WAF = 1: the measured one times ``ssd_waf``
    (simulation-model §6: with the FTL on, lifetime = WAF-1 lifetime / ssd_waf)."""
    return cap if f["ssd_bytes_written"] == 0 else min(f["ssd_lifetime_years"] * f["ssd_waf"], cap)


def study(traces: list[str], policies: list[str], settings) -> dict:
    from cluster_sim.api import git_sha
    out = {"policies": policies, "settings": [s for s, _ in settings], "traces": {}, "git_sha": git_sha()}
    for tname in traces:
        base = base_overrides(tname)
        cfg = SimConfig.from_mapping(cluster_sim.compose(base))
        trace_obj, _, _ = prepare(cfg)
        cap = cfg.lifetime_cap_years
        print(f"\n== {tname}: {trace_obj.n_requests:,} requests, {trace_obj.chunk_refs:,} chunk refs; "
              f"{' '.join(base)}", flush=True)
        rows = {}
        for spec in policies:
            pts = {}
            for label, ov in settings:
                f = run_point(trace_obj, base + policy_overrides(spec) + ov)
                pts[label] = f
                print(f"  {spec:28s} {label:15s} miss {f['chunk_miss_ratio']:.4f}  host "
                      f"{f['ssd_bytes_written'] / 1e12:7.3f} TB  WAF {f['ssd_waf']:.4f}  life "
                      f"{f['ssd_lifetime_years']:.4g} y (WAF 1: {life_waf1(f, cap):.4g} y)  "
                      f"erases {f['ssd_blocks_erased']:,}  ({f['wall_s']:.0f} s)", flush=True)
            ref = pts[settings[0][0]]
            rows[spec] = {"points": pts, "life_waf1": life_waf1(ref, cap)}
        out["traces"][tname] = {"overrides": base, "requests": trace_obj.n_requests, "rows": rows}
    return out


def table(res: dict) -> str:
    """The markdown table: per trace and policy, host bytes, WAF per setting, lifetimes with WAF 1
    and measured, and each lifetime relative to the first policy's."""
    pols = res["policies"]
    ref_label = res["settings"][0]
    lines = []
    for tname, t in res["traces"].items():
        rows = t["rows"]
        first = rows[pols[0]]
        lines += [f"**{tname}** ({t['requests']:,} requests): `{' '.join(o for o in t['overrides'] if not o.startswith('workload.path'))}`",
                  "",
                  "| policy | chunk miss | host writes (TB) | WAF 7% / 12.7% / 28% OP | WAF 12.7%, by_kind | "
                  f"lifetime WAF 1 (y) | lifetime measured, 12.7% (y) | vs {pols[0]}: WAF 1 → measured |",
                  "|---|---|---|---|---|---|---|---|"]
        for spec in pols:
            r = rows[spec]
            p = r["points"]
            ref = p[ref_label]
            waf = " / ".join(f"{p[k]['ssd_waf']:.3f}" for k in ("op7", "op12.7", "op28") if k in p)
            bk = f"{p['op12.7_by_kind']['ssd_waf']:.3f}" if "op12.7_by_kind" in p else "—"
            r1 = r["life_waf1"] / first["life_waf1"]
            rm = ref["ssd_lifetime_years"] / first["points"][ref_label]["ssd_lifetime_years"]
            lines.append(f"| {spec} | {ref['chunk_miss_ratio']:.4f} | {ref['ssd_bytes_written'] / 1e12:.3f} | {waf} | "
                         f"{bk} | {r['life_waf1']:.3g} | {ref['ssd_lifetime_years']:.3g} | {r1:.2f}× → {rm:.2f}× |")
        lines.append("")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policies", nargs="+", default=["lru", "lru_k", "gandalf"],
                    help="names, or name:key=value,... (the first is the reference of the ratios)")
    ap.add_argument("--traces", nargs="+", default=list(FTL_TRACES), choices=list(FTL_TRACES))
    ap.add_argument("--json", default=None, help="also write every point's fleet metrics here")
    ap.add_argument("--docs", action="store_true", help="rewrite the generated table in docs/results.md")
    ap.add_argument("--from-json", default=None, help="no runs: tables from a file an earlier --json wrote")
    args = ap.parse_args()
    if args.from_json:
        res = json.loads(Path(args.from_json).read_text())
        args.policies, args.traces = res["policies"], list(res["traces"])
    else:
        t0 = time.perf_counter()
        res = study(args.traces, args.policies, SETTINGS)
        res["wall_s"] = time.perf_counter() - t0
    md = table(res)
    print("\n" + md)
    print(f"({res['wall_s'] / 60:.1f} min)")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1, default=float))
    if args.docs:
        from cluster_sim.report import write_sections
        cmd = "python scripts/ftl_study.py --policies " + " ".join(f'"{p}"' if ":" in p else p for p in args.policies)
        if args.traces != list(FTL_TRACES):
            cmd += " --traces " + " ".join(args.traces)
        write_sections(DOC, {"ftl": f"Generated by `{cmd} --docs` at git sha `{res.get('git_sha', '?')[:10]}` "
                                    f"({res['wall_s'] / 60:.0f} min of runs on this machine, 2 shared cores).\n\n{md}"})
        print(f"wrote the 'ftl' section of {DOC}")


if __name__ == "__main__":
    main()
