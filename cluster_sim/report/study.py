"""A study (many sweeps): its manifest and finished points (:class:`Study`, ``load_study``), and
the comparisons its tables and figures draw on (iso-miss, best baseline, share of oracle_admission,
where the SSD writes went)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from .records import load_dir


# =========================================================================== a study (many sweeps)
#
# A study is a folder of sweeps (each one ``cluster-sim -m`` run, ``hydra.sweep.dir`` below the
# folder) and a ``study.json`` manifest naming, per sweep folder, its trace, model, sizing and the
# experiments (tables) each of its points belongs to; a point is told apart by its choice of
# ``point_group`` in its ``overrides.yaml`` (scripts/reproduce.py writes the manifest; its points
# are conf/experiment/paper_points). The manifest also names the policy families and labels. The
# tables and figures below are the paper study's (docs/results.md); ``cluster-sim-report --study
# DIR [--docs FILE]`` draws them.

GB = 10**9


@dataclass
class StudyPoint:
    """One finished point of a study: where it sits in the plan, and its summary."""
    trace: str
    model: str
    pol: str
    sizing: tuple            # ("rel", DRAM fraction of W, SSD fraction of W) | ("abs", DRAM bytes, SSD bytes)
    warmup_s: float = 0.0
    nodes: int = 1
    router: str = ""
    exps: set = field(default_factory=set)
    result: dict = field(default_factory=dict)     # {"fleet": ..., "wall_s": ...}
    overrides: list = field(default_factory=list)
    source: str = ""

    @property
    def key(self) -> str:
        sz = ":".join(f"{x:g}" if isinstance(x, float) else str(x) for x in self.sizing)
        r = f"|n{self.nodes}:{self.router}" if self.nodes > 1 else ""
        w = f"|w{self.warmup_s:g}" if self.warmup_s else ""
        return f"{self.trace}|{self.model}|{sz}{w}{r}|{self.pol}"


class Study:
    """The manifest of a study and its finished points (iterating gives the points)."""

    def __init__(self, manifest: dict, points: Sequence[StudyPoint]):
        self.manifest = manifest
        self.points = list(points)
        m = manifest
        self.traces = dict(m.get("traces") or {})
        self.main_model = m["main_model"]
        self.models = list(m.get("models") or [self.main_model])
        self.routers = list(m.get("routers") or [])
        sz = {k: tuple(v) for k, v in (m.get("sizings") or {}).items()}
        self.sizings = sz
        self.r10, self.r40 = sz.get("r10"), sz.get("r40")
        self.a10, self.a40 = sz.get("a10"), sz.get("a40")
        self._names = {tuple(sz[k]): n for k, n in (m.get("sizing_names") or {}).items() if k in sz}
        cap = m.get("capacity") or {}
        self.cap_total = float(cap.get("total", 0.41))
        self.cap_dram = tuple(cap.get("dram") or ())
        self.cap_years = float(m.get("lifetime_cap_years", 1000.0))
        self.labels = {k: tuple(v) for k, v in (m.get("labels") or {}).items()}   # key -> (family, parameter label)
        self.order = list(self.labels)
        self.short = dict(m.get("short") or {})
        self.variants = list(m.get("variants") or [])
        self.where_pols = tuple(m.get("where_pols") or ())
        self.baseline_families = tuple(m.get("baseline_families") or ())
        self.candidate_prefix = str(m.get("candidate_prefix", "gandalf"))
        self.alphas = {k: float(v) for k, v in (m.get("alphas") or {}).items()}
        self.chunk_tokens = int(m.get("chunk_tokens", 512))

    def __iter__(self):
        return iter(self.points)

    def __len__(self):
        return len(self.points)

    def family(self, pol: str) -> str:
        return self.labels.get(pol, (pol, ""))[0]

    def param_label(self, pol: str) -> str:
        return self.labels.get(pol, (pol, ""))[1]

    def label(self, pol: str) -> str:
        f, p = self.labels.get(pol, (pol, ""))
        return f"{f} {p}".strip()

    def is_gandalf(self, pol: str) -> bool:
        return self.family(pol).startswith(self.candidate_prefix)

    def is_baseline(self, pol: str) -> bool:
        return self.family(pol) in self.baseline_families

    def alpha_of(self, pol: str) -> float | None:
        return self.alphas.get(pol)

    def sizing_name(self, sz) -> str:
        sz = tuple(sz)
        if sz in self._names:
            return self._names[sz]
        if sz and sz[0] == "rel":
            return f"DRAM {sz[1] * 100:g}% W : SSD {sz[2] * 100:g}% W"
        return f"DRAM {sz[1] / GB:g} GB : SSD {sz[2] / GB:g} GB"


def _choice(overrides: Sequence[str], group: str) -> str | None:
    for o in overrides:
        k, _, v = o.partition("=")
        if k.lstrip("+~") == group:
            return v
    return None


def load_study(path: str | Path) -> Study:
    """The manifest ``study.json`` of a study folder and every finished point of its sweeps."""
    root = Path(path)
    mf = root / "study.json"
    if not mf.is_file():
        from ..errors import UserError
        raise UserError(f"{root}: not a study folder (no study.json; scripts/reproduce.py writes it)")
    manifest = json.loads(mf.read_text())
    group = manifest.get("point_group", "experiment/paper_points")
    pts: list[StudyPoint] = []
    for s in manifest.get("settings") or []:
        for rec in load_dir(root / s["dir"]):
            ov = rec.extra.get("overrides") or []
            pol = _choice(ov, group)
            if pol is None:
                continue
            cfg = rec.config
            fl = cfg.get("fleet") or {}
            nodes = int(fl.get("nodes") or 1)
            exps = set((s.get("exps") or {}).get(pol) or s.get("all_exps") or [])
            run = rec.summary.get("run") or {}
            wall = float(rec.fleet.get("sim_wall_s", 0.0)) + float(run.get("floor_wall_s", 0.0))
            pts.append(StudyPoint(s["trace"], s["model"], pol, tuple(s["sizing"]),
                                  float((cfg.get("workload") or {}).get("warmup_s") or 0.0), nodes,
                                  str(fl.get("router") or "") if nodes > 1 else "", exps,
                                  {"fleet": rec.fleet, "wall_s": wall}, list(ov), rec.source))
    return Study(manifest, pts)



def best_baseline_for(st, rows, gpol: str) -> str:
    """The longest-lived baseline whose miss ratio is at most gandalf(gpol)'s + 0.01 (else the
    lowest-miss baseline)."""
    g = dict(rows).get(gpol)
    base = [(p, f) for p, f in rows if st.is_baseline(p)]
    if g is not None:
        ok = [(p, f) for p, f in base if f["chunk_miss_ratio"] <= g["chunk_miss_ratio"] + 0.01]
        if ok:
            return max(ok, key=lambda x: (x[1]["ssd_lifetime_years"], -x[1]["chunk_miss_ratio"]))[0]
    return min(base, key=lambda x: x[1]["chunk_miss_ratio"])[0]


def oadm_row(st, rows) -> dict | None:
    """The fleet figures of the ``oracle_admission`` row of a group, if it was run."""
    return next((f for p, f in dict(rows).items() if st.family(p) == "oracle_admission"), None)


def oadm_share(f: dict, ref: dict, cap_years: float, slack: float = 0.01) -> str:
    """A policy's lifetime as a share of oracle_admission's; † when the reference misses more than
    the policy + ``slack``, ‡ when the policy misses more than the reference + ``slack`` (either
    way not iso-miss: ‡ buys lifetime with misses); "cap" when either writes nothing."""
    a, b = f["ssd_lifetime_years"], ref["ssd_lifetime_years"]
    if a >= cap_years or b >= cap_years or b <= 0:
        return "cap"
    flag = " †" if ref["chunk_miss_ratio"] > f["chunk_miss_ratio"] + slack else (
        " ‡" if f["chunk_miss_ratio"] > ref["chunk_miss_ratio"] + slack else "")
    return f"{a / b:.2f}{flag}"


def iso_miss(st, rows, slack=0.01):
    """For each gandalf row: (pol, f, baseline pol or None, ratio)."""
    base = [(p, f) for p, f in rows if st.is_baseline(p)]
    out = []
    for p, f in rows:
        if not st.is_gandalf(p):
            continue
        ok = [(b, g) for b, g in base if g["chunk_miss_ratio"] <= f["chunk_miss_ratio"] + slack]
        if not ok:
            out.append((p, f, None, None))
            continue
        b, g = max(ok, key=lambda x: (x[1]["ssd_lifetime_years"], -x[1]["chunk_miss_ratio"]))
        out.append((p, f, b, f["ssd_lifetime_years"] / g["ssd_lifetime_years"]))
    return out


def select(st, **kw):
    out = []
    for p in st:
        if all((kw[k] in p.exps) if k == "exp" else getattr(p, k) == v for k, v in kw.items()):
            out.append(p)
    return out


def rows_of(pts):
    return [(p.pol, p.result["fleet"]) for p in pts]


def analyse(st, traces_info, ws):
    A: dict = {"traces": traces_info, "working_sets_bytes": ws, "groups": {}}
    for t in traces_info:
        for sz in (st.r10, st.r40, st.a10, st.a40):
            for wu in sorted({p.warmup_s for p in st if p.trace == t}):
                pts = select(st, trace=t, sizing=sz, warmup_s=wu, model=st.main_model, nodes=1)
                if not pts:
                    continue
                rows = rows_of(pts)
                iso = iso_miss(st, rows)
                gl = [(p, f) for p, f in rows if st.family(p) == "gandalf"]
                bl = [(p, f) for p, f in rows if st.is_baseline(p)]
                low = None
                if gl and bl:   # the paper's "at its lowest miss ratio ... over the lowest-miss baseline"
                    gp, gf = min(gl, key=lambda x: x[1]["chunk_miss_ratio"])
                    bp, bf = min(bl, key=lambda x: x[1]["chunk_miss_ratio"])
                    low = {"gandalf": gp, "baseline": bp, "ratio": gf["ssd_lifetime_years"] / bf["ssd_lifetime_years"],
                           "miss_g": gf["chunk_miss_ratio"], "miss_b": bf["chunk_miss_ratio"]}
                A["groups"][f"{t}|{st.sizing_name(sz)}|w{wu:g}"] = {
                    "trace": t, "sizing": st.sizing_name(sz), "warmup_s": wu,
                    "rows": {p: f for p, f in rows},
                    "iso": [{"gandalf": g, "baseline": b, "ratio": r, "miss": f["chunk_miss_ratio"],
                             "life": f["ssd_lifetime_years"]} for g, f, b, r in iso],
                    "lowest_miss": low,
                }
    return A


#: the policies of the model study's table and figure, in column order ("—" where a trace lacks one)
MODEL_POLS = ("lru", "lruk2", "hp2", "gd", "g1", "gp1")


def where_rows(st, t, model_derived):
    out = []
    pts = select(st, trace=t, sizing=st.r10, warmup_s=0.0, model=st.main_model, nodes=1)
    fa_chunk = model_derived["kv_bytes_per_token_full"] * st.chunk_tokens
    state_b = model_derived["linear_state_bytes"]
    for pol in st.where_pols:
        q = [p for p in pts if p.pol == pol]
        if not q:
            continue
        f = q[0].result["fleet"]
        ns = f["ssd_bytes_written_state"] / state_b if state_b else 0
        nf = f["ssd_bytes_written_fa"] / fa_chunk
        hits_fa = f["hits_hbm_fa"] + f["hits_dram_fa"] + f["hits_ssd_fa"]
        hits_st = f["hits_hbm_state"] + f["hits_dram_state"] + f["hits_ssd_state"]
        out.append({"pol": pol, "states_written": ns, "state_hit_frac": f["ssd_write_hit_fraction_state"],
                    "fa_written": nf, "fa_hit_frac": f["ssd_write_hit_fraction_fa"],
                    "fa_hits_ssd_share": f["hits_ssd_fa"] / hits_fa if hits_fa else 0.0,
                    "state_hits_dram_share": f["hits_dram_state"] / hits_st if hits_st else 0.0,
                    "hits": {k: f[k] for k in ("hits_dram_fa", "hits_ssd_fa", "hits_dram_state", "hits_ssd_state")}})
    return out
