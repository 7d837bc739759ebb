"""Figures from finished runs (matplotlib, Agg backend; no MLflow import here).

``cluster-sim-report`` draws them for any finished sweep, read from its output folder
(``multirun/<date>/<time>``, every ``summary.json`` below it) or from MLflow (the
latest sweep of an experiment, or a given parent run), and the sweep driver draws
them at the end of every sweep:

* ``frontier.png``: SSD lifetime vs chunk miss ratio, one point per configuration,
  one series per policy (the paper's Figures 6/7; better is up and to the left:
  longer life at a lower miss ratio),
* ``alpha.png``: lifetime and miss ratio vs the policy's α (when α varies),
* ``ssd_written_per_node.png``: SSD bytes written per node (wear imbalance),
* ``hit_sources.png``: reused payloads by the tier that served them and payload kind.

Per run (single runs and each sweep point): ``ssd_written_per_node.png``,
``hit_sources.png`` and ``timeseries.png`` (SSD bytes written and chunk hit ratio over
simulated time, per node).

Runs that differ only in ``seed`` are one configuration: the figures draw their mean
and, with two or more seeds, a 95% confidence interval (Student t).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

PROG = "cluster-sim-report"

TIERS = ("hbm", "dram", "ssd")
KINDS = ("fa", "state")
TIER_COLORS = {"hbm": ("#1b7837", "#7fbf7b"), "dram": ("#2166ac", "#92c5de"), "ssd": ("#b2182b", "#f4a582")}

# two-sided 95% Student t quantiles, df = 1..30
_T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
        2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
        2.045, 2.042]


def t95(df: int) -> float:
    return _T95[df - 1] if 1 <= df <= len(_T95) else 1.96


def mean_ci(values: Sequence[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% confidence interval (0 with fewer than two values)."""
    v = np.asarray(values, dtype=float)
    if len(v) == 0:
        return float("nan"), 0.0
    m = float(v.mean())
    if len(v) < 2:
        return m, 0.0
    return m, float(t95(len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v)))


@dataclass
class Record:
    """One finished run: its summary (``summary.json`` as a dict) and per-epoch table."""
    summary: dict
    epochs: Any = None           # pyarrow.Table or None
    source: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def config(self) -> dict:
        return self.summary.get("config") or {}

    @property
    def fleet(self) -> dict:
        return self.summary.get("fleet") or {}

    @property
    def policy(self) -> str:
        p = self.config.get("policy")
        return p.get("name") if isinstance(p, dict) else str(p)


# --------------------------------------------------------------------------- loading

def load_dir(path: str | Path) -> list[Record]:
    """Every ``summary.json`` below ``path`` (a sweep folder, or one run's folder)."""
    import pyarrow.parquet as pq

    recs = []
    for s in sorted(Path(path).rglob("summary.json"), key=lambda p: _natural(str(p))):
        try:
            data = json.loads(s.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or "fleet" not in data:
            continue
        ep = s.parent / "epochs.parquet"
        rq = s.parent / "requests.parquet"     # output.requests=true
        rec = Record(data, pq.read_table(ep) if ep.exists() else None, str(s.parent),
                     {"requests": pq.read_table(rq)} if rq.exists() else {})
        ov = s.parent / "overrides.yaml"      # the sweep point's own overrides (cluster_sim.sweep)
        if ov.exists():
            import yaml
            try:
                rec.extra["overrides"] = [str(x) for x in (yaml.safe_load(ov.read_text()) or [])]
            except yaml.YAMLError:
                pass
        recs.append(rec)
    return recs


def _natural(s: str):
    import re
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]


# --------------------------------------------------------------------------- grouping and labels

def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = json.dumps(v, sort_keys=True, default=str) if isinstance(v, (dict, list)) else v
    return out


_SKIP_TOP = ("tracking", "sweep", "ray", "output", "report", "hydra")


def _sim_flat(rec: Record) -> dict:
    c = {k: v for k, v in rec.config.items() if k not in _SKIP_TOP}
    if isinstance(c.get("model"), dict):
        c["model"] = {k: v for k, v in c["model"].items() if k != "derived"}
    return _flat(c)


def varying_keys(recs: Sequence[Record]) -> list[str]:
    """Config keys (dotted) whose value differs between the records, seed excluded."""
    flats = [_sim_flat(r) for r in recs]
    keys = sorted(set().union(*flats)) if flats else []
    out = []
    for k in keys:
        if k == "seed":
            continue
        vals = {json.dumps(f.get(k), default=str) for f in flats}
        if len(vals) > 1:
            out.append(k)
    # a group choice (model.name) makes every key of that group vary: keep the choice only
    # (a key of such a group stays when it varies between runs of the same choice: policy.alpha)
    chosen = {k.rsplit(".", 1)[0] for k in out if k.endswith(".name")}

    def varies_within_choice(k: str) -> bool:
        g = k.split(".")[0]
        by_choice: dict = {}
        for f in flats:
            by_choice.setdefault(json.dumps(f.get(f"{g}.name"), default=str), set()).add(
                json.dumps(f.get(k), default=str))
        return any(len(v) > 1 for v in by_choice.values())

    out = [k for k in out if k.endswith(".name") or k.split(".")[0] not in chosen or varies_within_choice(k)]
    return sorted(out, key=lambda k: (k != "policy.name", not k.endswith(".name"), k))


def short_key(k: str) -> str:
    if k.endswith(".name"):
        return k[:-5]
    return k.split(".")[-1]


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


@dataclass
class Group:
    """Runs with the same configuration but for ``seed``."""
    recs: list[Record]
    label: str
    policy: str
    values: dict           # varying key -> value

    def stat(self, key: str, scope: str = "fleet") -> tuple[float, float]:
        return mean_ci([float(r.fleet.get(key, 0.0)) for r in self.recs])

    def node_stat(self, key: str) -> list[tuple[float, float]]:
        n = min(len(r.summary.get("nodes") or []) for r in self.recs)
        return [mean_ci([float(r.summary["nodes"][i].get(key, 0.0)) for r in self.recs]) for i in range(n)]

    @property
    def seeds(self) -> int:
        return len(self.recs)


def groups(recs: Sequence[Record]) -> list[Group]:
    keys = varying_keys(recs)
    out: dict[str, Group] = {}
    for r in recs:
        f = _sim_flat(r)
        vals = {k: f.get(k) for k in keys if k in f}
        gk = json.dumps({k: v for k, v in f.items() if k != "seed"}, sort_keys=True, default=str)
        if gk not in out:
            label = ", ".join(f"{short_key(k)}={_fmt(v)}" for k, v in vals.items()) or \
                (r.summary.get("run") or {}).get("policy_label") or r.policy
            out[gk] = Group([], label, r.policy, vals)
        out[gk].recs.append(r)
    return list(out.values())


# --------------------------------------------------------------------------- figures

def _plt():
    import logging

    import matplotlib
    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    return plt


def _bytes_unit(maxval: float) -> tuple[float, str]:
    for div, unit in ((1e15, "PB"), (1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if maxval >= div:
            return div, unit
    return 1.0, "B"


def _log_if_decades(ax, values, axis="y"):
    v = np.asarray([x for x in values if x is not None and np.isfinite(x) and x > 0], dtype=float)
    if len(v) and v.max() / v.min() >= 10:
        (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
        return True
    return False


def _seed_note(gs: Sequence[Group]) -> str:
    n = sorted({g.seeds for g in gs})
    if n and n[-1] > 1:
        return f" — mean ± 95% CI over {n[0]}" + (f"–{n[-1]}" if len(n) > 1 else "") + " seeds"
    return ""


def _series_by_policy(gs: Sequence[Group]) -> dict[str, list[Group]]:
    out: dict[str, list[Group]] = {}
    for g in gs:
        out.setdefault(g.policy, []).append(g)
    return out


def _point_label(g: Group) -> str:
    return ", ".join(f"{short_key(k)}={_fmt(v)}" for k, v in g.values.items() if k != "policy.name")


def frontier(gs: Sequence[Group], path: Path) -> Path:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 5.2))
    ys = []
    series = _series_by_policy(gs)
    annotate = len(gs) <= 16
    for i, (pol, members) in enumerate(sorted(series.items())):
        pts = []
        for g in members:
            x, xe = g.stat("chunk_miss_ratio")
            y, ye = g.stat("ssd_lifetime_years")
            pts.append((x, y, xe, ye, g))
            ys.append(y)
        pts.sort(key=lambda p: p[0])
        c = f"C{i % 10}"
        ax.errorbar([p[0] for p in pts], [p[1] for p in pts], xerr=[p[2] for p in pts], yerr=[p[3] for p in pts],
                    fmt="o-", color=c, label=pol, capsize=3, ms=6, lw=1.2, alpha=0.9)
        if annotate:   # points that coincide share one label
            at: dict[tuple, list[str]] = {}
            for x, y, _, _, g in pts:
                lab = _point_label(g)
                if lab:
                    at.setdefault((round(x, 6), round(y, 6)), []).append(lab)
            for (x, y), labs in at.items():
                ax.annotate(" | ".join(labs), (x, y), textcoords="offset points", xytext=(5, 4), fontsize=7, color=c)
    _log_if_decades(ax, ys)
    ax.set_xlabel("chunk miss ratio (fraction of requested full chunks)")
    ax.set_ylabel("SSD lifetime (years, first drive to wear out)")
    ax.set_title("SSD lifetime vs chunk miss ratio" + _seed_note(gs), fontsize=11)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(title="policy", fontsize=9, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _alpha(g: Group) -> float | None:
    p = g.recs[0].config.get("policy")
    if isinstance(p, dict) and "alpha" in p:
        try:
            return float(p["alpha"])
        except (TypeError, ValueError):
            return None
    return None


def alpha_plot(gs: Sequence[Group], path: Path) -> Path | None:
    with_a = [g for g in gs if _alpha(g) is not None and math.isfinite(_alpha(g))]
    if len({_alpha(g) for g in with_a}) < 2:
        return None
    plt = _plt()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.6), sharex=True)
    series: dict[str, list[Group]] = {}
    for g in with_a:
        rest = ", ".join(f"{short_key(k)}={_fmt(v)}" for k, v in g.values.items() if not k.endswith(".alpha"))
        series.setdefault(rest or g.policy, []).append(g)
    ys, xs = [], []
    for i, (name, members) in enumerate(sorted(series.items())):
        members.sort(key=_alpha)
        x = [_alpha(g) for g in members]
        xs += x
        life = [g.stat("ssd_lifetime_years") for g in members]
        miss = [g.stat("chunk_miss_ratio") for g in members]
        ys += [m for m, _ in life]
        c = f"C{i % 10}"
        ax1.errorbar(x, [m for m, _ in life], yerr=[e for _, e in life], fmt="o-", color=c, capsize=3, label=name)
        ax2.errorbar(x, [m for m, _ in miss], yerr=[e for _, e in miss], fmt="o-", color=c, capsize=3, label=name)
    if min(xs) > 0:
        _log_if_decades(ax1, xs, axis="x")
    _log_if_decades(ax1, ys)
    ax1.set_ylabel("SSD lifetime (years, first drive to wear out)")
    ax2.set_ylabel("chunk miss ratio (fraction of requested full chunks)")
    for ax in (ax1, ax2):
        ax.set_xlabel("α (write-fee multiplier, dimensionless)")
        ax.grid(True, which="both", alpha=0.3)
    ax1.set_title("lifetime vs α" + _seed_note(with_a), fontsize=11)
    ax2.set_title("miss ratio vs α", fontsize=11)
    ax2.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _wrap(label: str, width: int = 22) -> str:
    import textwrap
    return "\n".join(textwrap.wrap(label, width)) or label


def ssd_written_per_node(gs: Sequence[Group], path: Path) -> Path:
    """Host bytes written per node (filled bars) and, where they exceed them, the NAND bytes a
    flash translation layer measured or the assumed WAF implies (hatched outlines behind)."""
    plt = _plt()
    nodes = max(len(g.node_stat("ssd_bytes_written")) for g in gs)
    stats = [g.node_stat("ssd_bytes_written") for g in gs]
    nand = [g.node_stat("ssd_bytes_written_nand") for g in gs]
    show_nand = any(m > h[0] * (1 + 1e-9) for sn, sh in zip(nand, stats) for (m, _), h in zip(sn, sh))
    tops = [m + e for s in (stats + nand if show_nand else stats) for m, e in s]
    div, unit = _bytes_unit(max(tops + [1.0]))
    fig, ax = plt.subplots(figsize=(max(6.5, 1.0 + 0.55 * len(gs) * max(1, nodes) ** 0.5), 4.8))
    width = 0.8 / max(nodes, 1)
    x = np.arange(len(gs))
    for k in range(nodes):
        pos = x - 0.4 + (k + 0.5) * width
        if show_nand:
            mn = [s[k][0] / div if k < len(s) else 0 for s in nand]
            ax.bar(pos, mn, width, fill=False, edgecolor=f"C{k % 10}", hatch="//", linewidth=0.8,
                   label="NAND (host + GC relocations)" if k == 0 else None)
        m = [s[k][0] / div if k < len(s) else 0 for s in stats]
        e = [s[k][1] / div if k < len(s) else 0 for s in stats]
        ax.bar(pos, m, width, yerr=e if any(e) else None, capsize=2, label=f"node {k}", color=f"C{k % 10}")
    for i, g in enumerate(gs):
        wi, _ = g.stat("wear_imbalance")
        waf, _ = g.stat("ssd_waf")
        top = max(max((s[0] + s[1]) / div for s in stats[i]) if stats[i] else 0,
                  max((s[0] / div for s in nand[i]), default=0) if show_nand else 0)
        notes = ([f"max/mean {wi:.2f}"] if nodes > 1 else []) + ([f"WAF {waf:.2f}"] if show_nand else [])
        if notes:
            ax.annotate(", ".join(notes) if top > 0 else "nothing written", (x[i], top), textcoords="offset points",
                        xytext=(0, 3), ha="center", fontsize=7)
    ax.set_xticks(x, [_wrap(g.label) for g in gs], fontsize=8, rotation=30 if len(gs) > 4 else 0,
                  ha="right" if len(gs) > 4 else "center")
    ax.set_ylabel(f"SSD bytes written ({unit}; filled: host" + (", hatched: NAND)" if show_nand else ")"))
    ax.set_title("SSD bytes written per node (wear imbalance" + (", write amplification)" if show_nand else ")")
                 + _seed_note(gs), fontsize=11)
    ax.grid(True, axis="y", alpha=0.3)
    if show_nand:
        ax.set_ylim(0, max(tops + [1.0]) / div * 1.3)     # room for the labels and the legend
        ax.legend(fontsize=8, ncol=1 if nodes < 4 else min(nodes + 1, 4), loc="upper right")
    elif nodes > 1:   # beside the axes: inside, it hid the bars' labels (issue #16); room for the labels
        ax.set_ylim(0, max(tops + [1.0]) / div * 1.15)
        ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def hit_sources(gs: Sequence[Group], path: Path) -> Path:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, max(3.0, 1.2 + 0.45 * len(gs))))
    y = np.arange(len(gs))
    left = np.zeros(len(gs))
    for t in TIERS:
        for j, kind in enumerate(KINDS):
            key = f"hits_{t}_{kind}"
            vals = np.array([g.stat(key)[0] for g in gs])
            ax.barh(y, vals, left=left, color=TIER_COLORS[t][j], edgecolor="white", linewidth=0.5,
                    label=f"{t.upper()} {'FA' if kind == 'fa' else 'STATE'}")
            left += vals
    ax.set_yticks(y, [_wrap(g.label, 34) for g in gs], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("reused payloads served (count)")
    ax.set_title("Hit sources by tier and payload kind" + _seed_note(gs), fontsize=11)
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False, title="served from")
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def timeseries(rec: Record, path: Path) -> Path | None:
    """SSD bytes written and chunk hit ratio per time bin, per node (one run)."""
    t = rec.epochs
    if t is None or t.num_rows == 0:
        return None
    plt = _plt()
    ts = t.column("t_start_s").to_numpy()
    span_h = (ts.max() - ts.min()) / 3600.0
    bin_s = 3600.0 if span_h >= 6 else float(np.diff(np.unique(ts)).min()) if len(np.unique(ts)) > 1 else 3600.0
    bins = np.floor(ts / bin_s).astype(np.int64)
    node = t.column("node").to_numpy()
    w = t.column("ssd_bytes_written").to_numpy().astype(float)
    ch = t.column("chunks").to_numpy().astype(float)
    miss = t.column("chunk_misses").to_numpy().astype(float)
    ub = np.unique(bins)
    minutes = span_h < 2
    hours = ub * bin_s / (60.0 if minutes else 3600.0)
    div, unit = _bytes_unit(max(1.0, max(w[bins == b].sum() for b in ub)))
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(8, 5.6), sharex=True)
    nodes = np.unique(node)
    for k in nodes:
        wk = [w[(bins == b) & (node == k)].sum() / div for b in ub]
        ax1.plot(hours, wk, "-", lw=1.2, label=f"node {k}", color=f"C{k % 10}")
        hk = []
        for b in ub:
            sel = (bins == b) & (node == k)
            c = ch[sel].sum()
            hk.append(1 - miss[sel].sum() / c if c > 0 else np.nan)
        ax2.plot(hours, hk, "-", lw=1.2, color=f"C{k % 10}")
    per = "hour" if bin_s == 3600 else f"{bin_s / 60:g} min"
    ax1.set_ylabel(f"SSD bytes written\n({unit} per {per})")
    ax2.set_ylabel("chunk hit ratio\n(fraction)")
    ax2.set_xlabel(f"simulated time since first arrival ({'minutes' if minutes else 'hours'})")
    ax2.set_ylim(0, 1)
    for ax in (ax1, ax2):
        ax.grid(True, alpha=0.3)
    if len(nodes) > 1:
        ax1.legend(fontsize=8, ncol=min(len(nodes), 4))
    ax1.set_title(f"{short_label(rec)}: SSD writes and hit ratio over time", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def short_label(rec: Record) -> str:
    """``gandalf(α=1)``, ``lru_k(k=2)``, ``lru``: the policy with its main knob, not every parameter."""
    p = rec.config.get("policy")
    if not isinstance(p, dict):
        return rec.policy
    for key, sym in (("alpha", "α"), ("k", "k"), ("f", "f")):
        if key in p:
            return f"{rec.policy}({sym}={_fmt(p[key])})"
    return rec.policy


def run_figures(rec: Record, out_dir: str | Path) -> list[Path]:
    """The figures of one run (single runs and each sweep point)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    g = groups([rec])
    g[0].label = short_label(rec)
    multi = len(rec.summary.get("nodes") or []) > 1      # one bar for one node says nothing the table does not
    paths = ([ssd_written_per_node(g, out / "ssd_written_per_node.png")] if multi else []) + \
        [hit_sources(g, out / "hit_sources.png")]
    ts = timeseries(rec, out / "timeseries.png")
    more = [tiers_over_time(rec, out / "tiers.png"), lifetime_per_node(g, out / "lifetime_per_node.png"),
            latency_cdf([(short_label(rec), rec.extra.get("requests"))], out / "latency_cdf.png")]
    return paths + ([ts] if ts else []) + [p for p in more if p]


def sweep_figures(recs: Sequence[Record], out_dir: str | Path) -> list[Path]:
    """The comparison figures of a sweep (any set of finished runs)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if not recs:
        return []
    gs = groups(recs)      # in sweep order (job number), which is the order the user wrote
    paths = [frontier(gs, out / "frontier.png")]
    a = alpha_plot(gs, out / "alpha.png")
    if a:
        paths.append(a)
    paths += [ssd_written_per_node(gs, out / "ssd_written_per_node.png"), hit_sources(gs, out / "hit_sources.png")]
    paths += [p for p in (lifetime_per_node(gs, out / "lifetime_per_node.png"),
                          miss_vs_capacity(gs, out / "miss_vs_capacity.png"),
                          latency_cdf([(group_label(g), g.recs[0].extra.get("requests")) for g in gs]
                                         if all(r.extra.get("requests") is not None for r in recs) else [],
                                         out / "latency_cdf.png")) if p]
    return paths


# =========================================================================== tiers, nodes, latency, capacity
#
# Figures a cache or SSD person expects (issue #16), from what every run records:
#
# * ``tiers.png`` (a run): per tier over simulated time — occupancy as a share of capacity, bytes
#   written to and evicted from each tier, hits served by each tier, and the SSD's write-hit
#   fraction (of the SSD copies given up in a time bin, the share that had served a hit; the
#   paper's Fig. 10), from the per-epoch columns of ``epochs.parquet``;
# * ``lifetime_per_node.png`` (a run of several nodes, and a sweep): SSD lifetime of each node;
# * ``latency_cdf.png`` (a run with ``output.requests=true``, and a sweep whose points all have
#   it): CDFs of TTFT and of KV load latency, from ``requests.parquet``;
# * ``miss_vs_capacity.png`` (a sweep over a tier's capacity): chunk miss ratio against the
#   capacity, one line per policy, as a share of the working set when the sizes were given so.
#
# :mod:`cluster_sim.report` calls these from ``run_figures`` and ``sweep_figures``.

CAPACITY_KEYS = {"hbm": "hbm_cache_bytes", "dram": "dram_bytes", "ssd": "ssd_bytes"}


def _bytes_of(value) -> float:
    from .errors import ConfigError
    from .units import parse_bytes

    try:
        return float(parse_bytes(value, "size"))
    except ConfigError:
        return float("nan")


def _capacity(rec: Record, tier: str) -> float:
    """The fleet's capacity of ``tier`` (bytes), per-node overrides included."""
    cfg = rec.config
    hw = cfg.get("hardware") or {}
    nodes = len(rec.summary.get("nodes") or []) or 1
    over = ((cfg.get("fleet") or {}).get("node_overrides") or {})
    total = 0.0
    for i in range(nodes):
        o = over.get(str(i), over.get(i, {})) if isinstance(over, dict) else {}
        total += _bytes_of((o or {}).get(CAPACITY_KEYS[tier], hw.get(CAPACITY_KEYS[tier], 0)))
    return total


def _bins(ts: np.ndarray) -> tuple[np.ndarray, float, bool]:
    span_h = (ts.max() - ts.min()) / 3600.0 if len(ts) else 0.0
    uniq = np.unique(ts)
    bin_s = 3600.0 if span_h >= 6 else (float(np.diff(uniq).min()) if len(uniq) > 1 else 60.0)
    return np.floor(ts / bin_s).astype(np.int64), bin_s, span_h < 2


def tiers_over_time(rec: Record, path: Path) -> Path | None:
    t = rec.epochs
    if t is None or t.num_rows == 0 or "ssd_used_bytes" not in t.schema.names:
        return None
    plt = _plt()
    col = {n: t.column(n).to_numpy() for n in t.schema.names}
    bins, bin_s, minutes = _bins(col["t_start_s"].astype(float))
    ub = np.unique(bins)
    x = ub * bin_s / (60.0 if minutes else 3600.0)
    nodes = np.unique(col["node"])

    def total(name, how="sum"):
        if how == "level":   # each node's level at the end of the bin (kept from its last epoch), summed
            out = np.zeros(len(ub))
            for k in nodes:
                last = 0.0
                for i, b in enumerate(ub):
                    s = (bins == b) & (col["node"] == k)
                    if s.any():
                        last = float(col[name][np.flatnonzero(s)[-1]])
                    out[i] += last
            return out
        return np.asarray([float(col[name][bins == b].sum()) for b in ub])

    fig, axes = plt.subplots(4, 1, figsize=(8.5, 9.6), sharex=True)
    ax = axes[0]
    for tier in TIERS:
        cap = _capacity(rec, tier)
        if cap > 0:
            ax.plot(x, 100 * total(f"{tier}_used_bytes", "level") / cap, lw=1.4, color=TIER_COLORS[tier][0],
                    label=f"{tier.upper()} ({_h(cap)})")
    ax.set_ylabel("occupancy\n(% of capacity)")
    ax.set_ylim(0, 105)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)

    ax = axes[1]
    w = total("ssd_bytes_written")
    ev = {tier: total(f"{tier}_evicted_bytes") for tier in TIERS}
    div, unit = _bytes_unit(max([w.max(initial=0)] + [v.max(initial=0) for v in ev.values()] + [1.0]))
    ax.plot(x, w / div, lw=1.6, color="black", label="written to SSD")
    for tier in TIERS:
        if ev[tier].any():
            ax.plot(x, ev[tier] / div, lw=1.1, ls="--", color=TIER_COLORS[tier][0], label=f"evicted from {tier.upper()}")
    per = "hour" if bin_s == 3600 else f"{bin_s / 60:g} min"
    ax.set_ylabel(f"bytes\n({unit} per {per})")
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)

    ax = axes[2]
    for tier in TIERS:
        ax.plot(x, total(f"hits_{tier}"), lw=1.3, color=TIER_COLORS[tier][0], label=f"{tier.upper()}")
    ax.set_yscale("symlog", linthresh=10)    # SSD and DRAM hits are often 100x fewer than HBM's
    ax.set_ylabel(f"hits served\n(payloads per {per})")
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False, title="tier")

    ax = axes[3]
    hit, closed = total("ssd_admissions_hit"), total("ssd_copies_evicted")
    frac = np.where(closed > 0, hit / np.maximum(closed, 1), np.nan)
    ax.plot(x, frac, lw=1.4, color=TIER_COLORS["ssd"][0], marker="." if len(x) < 40 else None,
            label="SSD copies evicted in the bin that were hit")
    final = rec.fleet.get("ssd_write_hit_fraction")
    if final is not None:
        ax.axhline(float(final), color="gray", ls=":", lw=1.2, label=f"whole run: {float(final):.3f}")
    top = np.nanmax(np.append(frac, [float(final or 0.0)])) if np.isfinite(frac).any() else 1.0
    ax.set_ylim(0, min(1.0, max(0.05, 1.25 * float(top))))
    ax.set_ylabel("SSD write-hit\nfraction")
    ax.set_xlabel(f"simulated time since first arrival ({'minutes' if minutes else 'hours'})")
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    if not np.isfinite(frac).any():
        ax.text(0.5, 0.5, "no SSD copy was evicted", transform=ax.transAxes, ha="center", fontsize=9, color="gray")
    for a in axes:
        a.grid(True, alpha=0.3)
    n = len(nodes)
    axes[0].set_title(f"{short_label(rec)}: tiers over time" + (f" (sum of {n} nodes)" if n > 1 else ""), fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


def _h(b: float) -> str:
    div, unit = _bytes_unit(b)
    return f"{b / div:.3g} {unit}"


def lifetime_per_node(gs: Sequence[Group], path: Path) -> Path | None:
    """SSD lifetime of each node, for each configuration (years, log scale when they span decades)."""
    from .units import lifetime_text

    nodes = max((len(g.node_stat("ssd_lifetime_years")) for g in gs), default=0)
    if nodes < 2 or not any("ssd_lifetime_years" in n for g in gs for r in g.recs for n in r.summary.get("nodes") or []):
        return None
    plt = _plt()
    stats = [g.node_stat("ssd_lifetime_years") for g in gs]
    top = max((m for s in stats for m, _ in s), default=1.0)
    scale, unit = (1.0, "years") if top >= 1 else (12.0, "months") if top >= 1 / 6 else (365.0, "days")
    stats = [[(m * scale, e * scale) for m, e in s] for s in stats]
    fig, ax = plt.subplots(figsize=(max(6.5, 1.5 + 0.5 * len(gs) * nodes ** 0.5), 4.8))
    width = 0.8 / nodes
    x = np.arange(len(gs))
    vals = []
    for k in range(nodes):
        pos = x - 0.4 + (k + 0.5) * width
        m = [s[k][0] if k < len(s) else 0.0 for s in stats]
        e = [s[k][1] if k < len(s) else 0.0 for s in stats]
        vals += m
        ax.bar(pos, m, width, yerr=e if any(e) else None, capsize=2, color=f"C{k % 10}", label=f"node {k}")
        if len(gs) * nodes <= 16:
            for p_, v in zip(pos, m):
                ax.annotate(lifetime_text(v / scale), (p_, v), textcoords="offset points", xytext=(0, 2), ha="center",
                            fontsize=6, rotation=90 if nodes > 2 else 0, va="bottom")
    pos_vals = [v for v in vals if v > 0]
    if pos_vals and max(pos_vals) / min(pos_vals) >= 10:
        ax.set_yscale("log")
    else:
        ax.set_ylim(0, max(vals + [1e-9]) * 1.3)
    ax.set_xticks(x, [_wrap(g.label) for g in gs], fontsize=8, rotation=30 if len(gs) > 4 else 0,
                  ha="right" if len(gs) > 4 else "center")
    ax.set_ylabel(f"SSD lifetime ({unit}, first drive to wear out)")
    ax.set_title("SSD lifetime per node" + _seed_note(gs), fontsize=11)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


def group_label(g: Group) -> str:
    """A group's label with sizes readable: ``1%W`` as given, else ``1.75 GB``; the policy first."""
    shares = (g.recs[0].summary.get("run") or {}).get("capacity_shares") or {}
    parts = []
    for k, v in g.values.items():
        if k in shares:
            v = shares[k]
        elif k.endswith("_bytes") and isinstance(v, (int, float)):
            v = _h(float(v))
        parts.append(f"{v}" if k == "policy.name" else f"{short_key(k)}={v}")
    return ", ".join(parts) or g.label


def _ecdf(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    v = np.sort(v[np.isfinite(v)])
    return v, np.arange(1, len(v) + 1) / max(len(v), 1)


def latency_cdf(series: Sequence[tuple[str, object]], path: Path) -> Path | None:
    """CDFs of TTFT and KV load latency; ``series`` is (label, requests table) pairs."""
    series = [(lab, t) for lab, t in series if t is not None and t.num_rows > 0]
    if not series:
        return None
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2 + 0.22 * len(series)), sharey=True)
    for ax, col, title in ((axes[0], "ttft_s", "time to first token"), (axes[1], "load_latency_s", "KV load latency")):
        for i, (lab, t) in enumerate(series):
            v, p = _ecdf(t.column(col).to_numpy().astype(float) * 1e3)
            if not len(v):
                continue
            v = np.maximum(v, 1e-3)
            ax.step(v, p, where="post", lw=1.3, color=f"C{i % 10}",
                    label=f"{lab}: p50 {np.percentile(v, 50):.3g}, p99 {np.percentile(v, 99):.3g} ms")
        ax.set_xscale("log")
        ax.set_xlabel(f"{title} (ms, log scale)")
        ax.set_title(title, fontsize=11)
        ax.grid(True, which="both", alpha=0.3)
        ax.axhline(0.99, color="gray", ls=":", lw=0.8)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), frameon=False)
    axes[0].set_ylabel("fraction of requests")
    axes[0].set_ylim(0, 1.01)
    fig.tight_layout()
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


def capacity_key(gs: Sequence[Group]) -> str | None:
    """The tier capacity a sweep varies (``hardware.dram_bytes``, ...), or None."""
    keys = [k for k in (gs[0].values if gs else {}) if k.startswith("hardware.") and k.endswith("_bytes")
            and k.split(".")[-1] in CAPACITY_KEYS.values()]
    return keys[0] if keys else None


def miss_vs_capacity(gs: Sequence[Group], path: Path) -> Path | None:
    """Chunk miss ratio against the swept capacity, one line per policy (other swept keys split
    the lines too); x is the share of the working set when every run knows W."""
    key = capacity_key(gs)
    if key is None:
        return None
    plt = _plt()
    by_w = all((r.summary.get("run") or {}).get("working_set_bytes") for g in gs for r in g.recs)
    fig, ax = plt.subplots(figsize=(7.5, 5.0))
    lines: dict[str, list[tuple[float, float, float]]] = {}
    for pol, members in _series_by_policy(gs).items():
        for g in members:
            rest = ", ".join(f"{short_key(k)}={v}" for k, v in g.values.items() if k not in (key, "policy.name"))
            label = pol + (f" ({rest})" if rest else "")
            b = _bytes_of(g.values[key])
            if by_w:
                b = 100.0 * b / float(g.recs[0].summary["run"]["working_set_bytes"])
            m, e = g.stat("chunk_miss_ratio")
            lines.setdefault(label, []).append((b, m, e))
    for i, (label, pts) in enumerate(lines.items()):
        pts.sort()
        xs, ms, es = (np.asarray(v) for v in zip(*pts))
        ax.errorbar(xs, ms, yerr=es if es.any() else None, marker="o", ms=4, lw=1.4, capsize=2,
                    color=f"C{i % 10}", label=label)
    floor = gs[0].recs[0].fleet.get("miss_ratio_floor")
    xs_all = [p[0] for pts in lines.values() for p in pts if p[0] > 0]
    if xs_all and max(xs_all) / min(xs_all) >= 10:
        from matplotlib.ticker import FuncFormatter
        ax.set_xscale("log")
        ax.set_xticks(sorted(set(xs_all)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}%" if by_w else _h(v)))
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    if floor is not None:
        ax.axhline(float(floor), color="gray", ls=":", lw=1, label=f"floor (compulsory misses) {float(floor):.3f}")
    tier = key.split(".")[-1].replace("_cache_bytes", "").replace("_bytes", "").upper()
    if by_w:
        ax.set_xlabel(f"{tier} capacity (% of the working set W)")
    else:
        div, unit = _bytes_unit(max(xs_all + [1.0]))
        ax.set_xlabel(f"{tier} capacity (bytes)")
    ax.set_ylabel("chunk miss ratio")
    ax.set_ylim(0, None)
    ax.set_title(f"Miss ratio against {tier} capacity" + _seed_note(gs), fontsize=11)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


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
        from .errors import UserError
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


# --------------------------------------------------------------------------- figures

def _plt_study():
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    plt.rcParams.update({"font.size": 9, "axes.titlesize": 10, "legend.fontsize": 7.5})
    return plt


FAM_STYLE = {"LRU": ("C0", "s"), "LRU-K": ("C1", "^"), "HotPrefix": ("C2", "v"), "Marconi": ("C4", "D"),
             "Workload-aware": ("C5", "P"), "DynamicRandom": ("C7", "X"), "oracle": ("k", "*"),
             "gandalf": ("C3", "o"), "gandalf (population)": ("C6", "o"), "gandalf (variant)": ("C9", "h")}


def _style(fam: str) -> tuple[str, str]:
    """(colour, marker) of a policy family; a family the table does not know gets grey circles."""
    return FAM_STYLE.get(fam, ("C8", "o"))


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


def fig_frontier(st, t, title, path, sizings=None):
    sizings = sizings or (st.r10, st.r40)
    plt = _plt_study()
    sizings = [sz for sz in sizings if select(st, trace=t, sizing=sz, warmup_s=0.0, model=st.main_model, nodes=1)]
    if not sizings:
        return None
    fig, axes = plt.subplots(1, len(sizings), figsize=(6.2 * len(sizings), 4.6), squeeze=False)
    for ax, sz in zip(axes[0], sizings):
        pts = select(st, trace=t, sizing=sz, warmup_s=0.0, model=st.main_model, nodes=1)
        by: dict = {}
        for p in pts:
            by.setdefault(st.family(p.pol), []).append(p)
        lifes = []
        for fam, ps in by.items():
            c, m = _style(fam)
            ps.sort(key=lambda p: p.result["fleet"]["chunk_miss_ratio"])
            x = [p.result["fleet"]["chunk_miss_ratio"] for p in ps]
            y = [p.result["fleet"]["ssd_lifetime_years"] for p in ps]
            lifes += y
            ls = "-" if fam in ("gandalf", "gandalf (population)") else "none"
            ax.plot(x, y, marker=m, ls=ls, color=c, ms=9 if fam == "oracle" else 6, label=fam, lw=1, alpha=0.9)
            for p, xi, yi in zip(ps, x, y):
                lab = st.short.get(p.pol, st.param_label(p.pol))
                if lab:
                    ax.annotate(lab, (xi, yi), textcoords="offset points", xytext=(4, 3), fontsize=6.5, color=c)
        _life_axis(ax, lifes)
        ax.set_xlabel("chunk miss ratio (fraction of requested full chunks)")
        ax.set_title(f"{st.sizing_name(sz)}", fontsize=9.5)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="best", ncol=2)
    fig.suptitle(f"SSD lifetime vs miss ratio — {title} (up and left is better)", fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def fig_alpha(st, tinfo, path):
    plt = _plt_study()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
    lifes, any_ = [], False
    for i, t in enumerate(tinfo):
        for sz, ls in ((st.r10, "-"), (st.r40, "--")):
            for fam in ("gandalf", "gandalf (population)"):
                ps = [p for p in select(st, trace=t, sizing=sz, warmup_s=0.0, model=st.main_model, nodes=1)
                      if st.family(p.pol) == fam and st.alpha_of(p.pol) is not None]
                if len(ps) < 2:
                    continue
                any_ = True
                ps.sort(key=lambda p: st.alpha_of(p.pol))
                x = [max(st.alpha_of(p.pol), 0.25) for p in ps]   # α=0 drawn at 0.25 on the log axis
                life = [p.result["fleet"]["ssd_lifetime_years"] for p in ps]
                miss = [p.result["fleet"]["chunk_miss_ratio"] for p in ps]
                lifes += life
                lab = f"{t}, {'1:10' if sz == st.r10 else '1:40'}, {'rate' if fam == 'gandalf' else 'population'}"
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


def fig_capacity(st, tinfo, path):
    plt = _plt_study()
    ts = [t for t in tinfo if select(st, trace=t, exp="capacity")]
    if not ts:
        return None
    fig, axes = plt.subplots(len(ts), 2, figsize=(11, 3.7 * len(ts)), squeeze=False)
    for row, t in zip(axes, ts):
        pts = select(st, trace=t, exp="capacity")
        by: dict = {}
        for p in pts:
            by.setdefault(p.pol, []).append(p)
        lifes = []
        for pol, ps in by.items():
            ps.sort(key=lambda p: p.sizing[1])
            x = [p.sizing[1] / st.cap_total * 100 for p in ps]
            c, m = _style(st.family(pol))
            if pol.startswith("gp"):
                c = _style("gandalf (population)")[0]
            life = [p.result["fleet"]["ssd_lifetime_years"] for p in ps]
            lifes += life
            row[0].plot(x, [p.result["fleet"]["chunk_miss_ratio"] for p in ps], marker=m, color=c, label=st.label(pol))
            row[1].plot(x, life, marker=m, color=c, label=st.label(pol))
        ticks = sorted({p.sizing[1] / st.cap_total * 100 for p in pts})
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


#: the policies of the model study's table and figure, in column order ("—" where a trace lacks one)
MODEL_POLS = ("lru", "lruk2", "hp2", "gd", "g1", "gp1")


def fig_models(st, tinfo, path):
    plt = _plt_study()
    import numpy as np
    ts = [t for t in tinfo if select(st, trace=t, exp="models")]
    if not ts:
        return None
    fig, axes = plt.subplots(len(ts), 2, figsize=(11, 3.8 * len(ts)), squeeze=False)
    for row, t in zip(axes, ts):
        pts = select(st, trace=t, exp="models")
        models = [m for m in st.models if any(p.model == m for p in pts)]
        pols = [q for q in MODEL_POLS if any(p.pol == q for p in pts)]
        wbar = 0.8 / max(len(pols), 1)
        lifes = []
        for j, pol in enumerate(pols):
            c, _ = _style(st.family(pol))
            life, miss = [], []
            for m in models:
                q = [p for p in pts if p.model == m and p.pol == pol]
                life.append(q[0].result["fleet"]["ssd_lifetime_years"] if q else np.nan)
                miss.append(q[0].result["fleet"]["chunk_miss_ratio"] if q else np.nan)
            lifes += life
            x = np.arange(len(models)) + (j - (len(pols) - 1) / 2) * wbar
            row[0].bar(x, life, wbar, color=c, label=st.label(pol), alpha=0.6 if pol == "gp1" else 0.9,
                       hatch="//" if pol == "gp1" else None)
            row[1].bar(x, miss, wbar, color=c, label=st.label(pol), alpha=0.6 if pol == "gp1" else 0.9,
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


def fig_where(st, tinfo, derived, path):
    plt = _plt_study()
    import numpy as np
    ts = [t for t in tinfo if where_rows(st, t, derived)]
    if not ts:
        return None
    fig, axes = plt.subplots(len(ts), 3, figsize=(14, 3.9 * len(ts)), squeeze=False)
    for row, t in zip(axes, ts):
        rows = where_rows(st, t, derived)
        names = [st.label(r["pol"]).replace("gandalf (population)", "gandalf pop.") for r in rows]
        x = np.arange(len(rows))
        for ax, key, hk, ttl in ((row[0], "states_written", "state_hit_frac", "linear states written to SSD"),
                                 (row[1], "fa_written", "fa_hit_frac", "FA chunks written to SSD")):
            vals = [r[key] for r in rows]
            ax.bar(x, vals, color=[_style(st.family(r["pol"]))[0] for r in rows])
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


def fig_latency_cost(st, tinfo, path):
    plt = _plt_study()
    import numpy as np
    ts = [t for t in tinfo if select(st, trace=t, sizing=st.r10, warmup_s=0.0, model=st.main_model, nodes=1)]
    if not ts:
        return None
    fig, axes = plt.subplots(len(ts), 2, figsize=(12, 4.0 * len(ts)), squeeze=False)
    for row, t in zip(axes, ts):
        pts = select(st, trace=t, sizing=st.r10, warmup_s=0.0, model=st.main_model, nodes=1)
        lifes = []
        seen = set()
        for p in sorted(pts, key=lambda p: p.pol):
            f = p.result["fleet"]
            c, m = _style(st.family(p.pol))
            fam = st.family(p.pol)
            row[0].plot(f["load_latency_mean_s"] * 1e3, f["ssd_lifetime_years"], marker=m, color=c, ls="none",
                        label=None if fam in seen else fam)
            seen.add(fam)
            lifes.append(f["ssd_lifetime_years"])
            if st.param_label(p.pol):
                row[0].annotate(st.short.get(p.pol, st.param_label(p.pol)), (f["load_latency_mean_s"] * 1e3, f["ssd_lifetime_years"]),
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
        row[1].set_xticklabels([st.label(p.pol).replace("gandalf (population)", "gandalf pop.") for p in ps],
                               rotation=60, ha="right", fontsize=6.5)
        row[1].set_ylabel("cost per 1k requests (USD)")
        row[1].set_title(f"{t}: cost per 1k requests (sorted)")
        row[1].legend(fontsize=7)
        row[1].grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    return _save(fig, path)


def fig_fleet(st, tinfo, path):
    plt = _plt_study()
    import numpy as np
    ts = [t for t in tinfo if select(st, trace=t, exp="fleet")]
    if not ts:
        return None
    fig, axes = plt.subplots(len(ts), 3, figsize=(14, 3.6 * len(ts)), squeeze=False)
    for row, t in zip(axes, ts):
        pts = select(st, trace=t, exp="fleet")
        routers = [r for r in st.routers if any(p.router == r for p in pts)]
        pols = list(dict.fromkeys(p.pol for p in sorted(pts, key=lambda p: not st.is_gandalf(p.pol))))
        w = 0.8 / len(pols)
        for j, pol in enumerate(pols):
            c, _ = _style(st.family(pol))
            get = {p.router: p.result["fleet"] for p in pts if p.pol == pol}
            x = np.arange(len(routers)) + (j - (len(pols) - 1) / 2) * w
            for ax, k in zip(row, ("fleet_ssd_replacement_usd_per_year", "wear_imbalance", "chunk_miss_ratio")):
                ax.bar(x, [get.get(r, {}).get(k, np.nan) for r in routers], w, color=c, label=st.label(pol))
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


def md_e2e(st, A, t):
    out = []
    for gk, g in A["groups"].items():
        if g["trace"] != t:
            continue
        wl = f", warm-up {g['warmup_s']:g} s excluded" if g["warmup_s"] else ""
        out.append(f"\n**{t}, {g['sizing']}{wl}**\n")
        ref = oadm_row(st, g["rows"])
        out.append("| policy | lifetime (y) | chunk miss | SSD written FA / STATE (GB) | SSD write-hit frac. | "
                   "load latency (ms) | $/1k req (recompute + wear) |" + (" share of oracle_admission |" if ref else ""))
        out.append("|---|---|---|---|---|---|---|" + ("---|" if ref else ""))
        for pol in st.order:
            f = g["rows"].get(pol)
            if f is None:
                continue
            life = "cap (writes nothing)" if f["ssd_lifetime_years"] >= st.cap_years else _f(f["ssd_lifetime_years"])
            out.append(f"| {st.label(pol)} | {life} | {f['chunk_miss_ratio']:.4f} | "
                       f"{f['ssd_bytes_written_fa'] / GB:,.1f} / {f['ssd_bytes_written_state'] / GB:,.1f} | "
                       f"{f['ssd_write_hit_fraction']:.3f} | {f['load_latency_mean_s'] * 1e3:.1f} | "
                       f"{f['cost_per_1k_requests_usd']:.3f} ({f['cost_per_1k_requests_recompute_usd']:.3f} + "
                       f"{f['cost_per_1k_requests_wear_usd']:.3f}) |" + (f" {oadm_share(f, ref, st.cap_years)} |" if ref else ""))
        if ref:
            out.append("\nShare of oracle_admission: the policy's lifetime over oracle_admission's (LRU eviction, "
                       "hindsight SSD admission); † where oracle_admission misses more than the policy + 0.01, "
                       "‡ where the policy misses more than oracle_admission + 0.01 (it buys lifetime with "
                       "misses): either way the two are not at iso-miss.")
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
                out.append(f"| {st.label(x['gandalf'])} | {x['miss']:.4f} | {_f(x['life'])} | "
                           f"{st.label(x['baseline']) if x['baseline'] else 'none within +0.01'} | "
                           f"{_f(x['ratio']) + '×' if x['ratio'] is not None else '—'} |")
        if g["lowest_miss"]:
            lm = g["lowest_miss"]
            out.append(f"\nAt the lowest miss ratio: {st.label(lm['gandalf'])} (miss {lm['miss_g']:.4f}) vs "
                       f"{st.label(lm['baseline'])} (miss {lm['miss_b']:.4f}): lifetime ×{_f(lm['ratio'])}.")
    return "\n".join(out)


def headline(st, A, t, sizing=None, warm=0.0, fam="gandalf"):
    sizing = sizing or st.r10
    g = A["groups"].get(f"{t}|{st.sizing_name(sizing)}|w{warm:g}")
    if not g:
        return None
    iso = [x for x in g["iso"] if x["ratio"] is not None and st.family(x["gandalf"]) == fam and x["life"] < st.cap_years]
    best = max(iso, key=lambda x: x["ratio"], default=None)
    key = {"gandalf": "g1", "gandalf (population)": "gp1", "gandalf (default)": "gd"}.get(fam)
    a1 = next((x for x in g["iso"] if x["gandalf"] == key), None)
    return {"best": best, "alpha1": a1, "lowest": g["lowest_miss"]}


def _warm(st, t) -> float:
    return max((p.warmup_s for p in st if p.trace == t), default=0.0)


def md_side_by_side(A, st, derived):
    L = ["| claim (paper §) | paper | ours: " + " | ours: ".join(A["traces"]) + " |",
         "|---|---|" + "---|" * len(A["traces"])]

    def cell(fn):
        return " | ".join(fn(t) for t in A["traces"])

    def iso_best(t, fam="gandalf", sz=None, w=0.0):
        h = headline(st, A, t, sz, w, fam)
        if not h or not h["best"]:
            return "—" if not h else "no baseline within +0.01"
        b = h["best"]
        return f"{b['ratio']:.2f}× ({st.label(b['gandalf'])} vs {st.label(b['baseline'])}, miss {b['miss']:.3f})"

    def iso_a1(t, fam="gandalf"):
        h = headline(st, A, t, fam=fam)
        if not h or not h["alpha1"]:
            return "—"
        a = h["alpha1"]
        return (f"{a['ratio']:.2f}× vs {st.label(a['baseline'])}" if a["ratio"] is not None else
                "no baseline within +0.01") + f" (miss {a['miss']:.3f}, {a['life']:.3g} y)"

    def lowest(t):
        h = headline(st, A, t)
        if not h or not h["lowest"]:
            return "—"
        lm = h["lowest"]
        return f"{lm['ratio']:.2f}× ({lm['miss_g']:.3f} vs {lm['miss_b']:.3f})"

    L.append(f"| lifetime at iso-miss, best gandalf point that writes to the SSD, 1:10 (§5.2, §7) | 2–7.3× (7.3× mean) | "
             f"{cell(iso_best)} |")
    L.append(f"| ... gandalf (population), 1:10 | — (ours) | {cell(lambda t: iso_best(t, 'gandalf (population)'))} |")
    L.append(f"| ... best gandalf point, 1:40 (100 GB : 4 TB) | 2–7.3× | {cell(lambda t: iso_best(t, sz=st.r40))} |")
    L.append(f"| ... best gandalf point, 1:10, warm-up excluded | — | "
             f"{cell(lambda t: iso_best(t, w=_warm(st, t)) if _warm(st, t) else '—')} |")
    L.append(f"| gandalf α=1 at iso-miss, 1:10 | 4.2× vs LRU (§5.8), 7.6× vs HotPrefix F=1 (§5.7) | "
             f"{cell(iso_a1)} |")
    L.append(f"| gandalf default (reuse=hints, objective=chunks) at iso-miss, 1:10 | — (ours) | "
             f"{cell(lambda t: iso_a1(t, 'gandalf (default)'))} |")

    def shares(t):
        g = A["groups"].get(f"{t}|{st.sizing_name(st.r10)}|w0")
        ref = oadm_row(st, g["rows"]) if g else None
        if not ref:
            return "—"
        out = [f"{st.label(p)} {oadm_share(g['rows'][p], ref, st.cap_years)}" for p in ("gd", "g1", "lru")
               if p in g["rows"]]
        return "; ".join(out) or "—"
    L.append(f"| lifetime as a share of oracle_admission's, 1:10 († it misses more, ‡ it misses less) | — (ours) | "
             f"{cell(shares)} |")
    L.append(f"| lowest-miss gandalf vs lowest-miss baseline | 2× TraceA, 3.3× ClaudeCode | {cell(lowest)} |")

    def alpha_span(t):
        g = A["groups"].get(f"{t}|{st.sizing_name(st.r10)}|w0")
        if not g or "g1" not in g["rows"] or "g64" not in g["rows"]:
            return "—"
        a, b = g["rows"]["g1"], g["rows"]["g64"]
        capped = " (α=64 writes nothing: lifetime at the 1000-y cap)" if b["ssd_lifetime_years"] >= st.cap_years else ""
        return (f"{b['ssd_lifetime_years'] / a['ssd_lifetime_years']:.3g}×, "
                f"miss {b['chunk_miss_ratio'] - a['chunk_miss_ratio']:+.3f}{capped}")
    L.append(f"| α 1 → 64: lifetime gain, miss change (§5.4) | 6.5× / +0.016 TraceA; 2.3× / +0.071 ClaudeCode | "
             f"{cell(alpha_span)} |")

    def states(t):
        rows = {r["pol"]: r for r in where_rows(st, t, derived)}
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
        rows = {r["pol"]: r for r in where_rows(st, t, derived)}
        if "lruk1" not in rows or "g1" not in rows:
            return "—"
        a, b = rows["lruk1"], rows["g1"]
        if not a["fa_written"]:
            return "—"
        d = (1 - b["fa_written"] / a["fa_written"]) * 100
        return f"{d:.0f}% fewer" if d >= 0 else f"{-d:.0f}% more"
    L.append(f"| FA chunks written, gandalf vs LRU-K K=1 (§5.6) | 33% fewer | {cell(fa)} |")

    def tiers(t):
        rows = {r["pol"]: r for r in where_rows(st, t, derived)}
        if "g1" not in rows or "lruk2" not in rows:
            return "—"
        g, k = rows["g1"], rows["lruk2"]
        return (f"{g['fa_hits_ssd_share'] * 100:.0f}% / {g['state_hits_dram_share'] * 100:.0f}% vs "
                f"{k['fa_hits_ssd_share'] * 100:.0f}% / {k['state_hits_dram_share'] * 100:.0f}%")
    L.append(f"| FA hits from SSD / STATE hits from DRAM, gandalf vs LRU-K (§5.6) | 87% / 90% vs 74% / 67% | "
             f"{cell(tiers)} |")

    def cost(t):
        g = A["groups"].get(f"{t}|{st.sizing_name(st.r10)}|w0")
        if not g or "g1" not in g["rows"]:
            return "—"
        base = [(p, f) for p, f in g["rows"].items() if st.is_baseline(p)]
        bp, bf = min(base, key=lambda x: x[1]["cost_per_1k_requests_usd"])
        gf = g["rows"]["g1"]
        return (f"${gf['cost_per_1k_requests_usd']:.3f} vs ${bf['cost_per_1k_requests_usd']:.3f} ({st.label(bp)}); "
                f"wear ${gf['cost_per_1k_requests_wear_usd']:.3f} vs ${bf['cost_per_1k_requests_wear_usd']:.3f}")
    L.append(f"| cost per 1k requests, gandalf α=1 vs cheapest baseline (§5.8) | $0.30 vs $0.74 (LRU-K K=2); "
             f"wear $0.16 vs $0.49–0.73 | {cell(cost)} |")

    def lat(t):
        g = A["groups"].get(f"{t}|{st.sizing_name(st.r10)}|w0")
        if not g or "g1" not in g["rows"] or "lru" not in g["rows"]:
            return "—"
        a, b = g["rows"]["g1"], g["rows"]["lru"]
        return (f"{a['load_latency_mean_s'] * 1e3:.0f} ms vs {b['load_latency_mean_s'] * 1e3:.0f} ms; lifetime "
                f"{a['ssd_lifetime_years'] / b['ssd_lifetime_years']:.1f}×")
    L.append(f"| load latency, gandalf α=1 vs LRU (§5.8) | 0.78 s vs 0.66 s; 4.2× lifetime | {cell(lat)} |")

    def models(t):
        out = []
        for m in st.models:
            ps = {p.pol: p.result["fleet"] for p in select(st, trace=t, exp="models") if p.model == m}
            if "g1" in ps and "lruk2" in ps and "hp2" in ps:
                out.append(f"{m.split('_')[0]} {ps['g1']['ssd_lifetime_years'] / ps['hp2']['ssd_lifetime_years']:.2g}"
                           f"/{ps['g1']['ssd_lifetime_years'] / ps['lruk2']['ssd_lifetime_years']:.2g}")
        return "; ".join(out) or "—"
    L.append(f"| lifetime vs HotPrefix / vs LRU-K across 4 models (§5.5) | 3.6–7.1× / 3.6–6.6× | {cell(models)} |")
    return "\n".join(L)


def md_capacity(st, A):
    out = ["| trace | policy | " + " | ".join(f"DRAM {d * 100:g}% W" for d in st.cap_dram) + " |",
           "|---|---|" + "---|" * len(st.cap_dram)]
    for t in A["traces"]:
        pts = select(st, trace=t, exp="capacity")
        for pol in dict.fromkeys(p.pol for p in pts):
            cells = []
            for d in st.cap_dram:
                q = [p for p in pts if p.pol == pol and abs(p.sizing[1] - d) < 1e-9]
                cells.append(f"{q[0].result['fleet']['chunk_miss_ratio']:.3f} / "
                             f"{_f(q[0].result['fleet']['ssd_lifetime_years'])} y" if q else "—")
            out.append(f"| {t} | {st.label(pol)} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n\nCells: chunk miss ratio / SSD lifetime. DRAM + SSD = 41% W."


def md_models(st, A):
    out = ["| trace | model | W (GB) | " + " | ".join(st.label(q) for q in MODEL_POLS) + " |",
           "|---|---|---|" + "---|" * len(MODEL_POLS)]
    for t in A["traces"]:
        for m in st.models:
            ps = {p.pol: p.result["fleet"] for p in select(st, trace=t, exp="models") if p.model == m}
            if not ps:
                continue
            w = A["working_sets_bytes"].get(f"{t}|{m}", 0) / GB
            cells = [f"{ps[q]['chunk_miss_ratio']:.3f} / {_f(ps[q]['ssd_lifetime_years'])} y" if q in ps else "—"
                     for q in MODEL_POLS]
            out.append(f"| {t} | {m} | {w:,.0f} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n\nCells: chunk miss ratio / SSD lifetime; DRAM 1% W : SSD 10% W of each model."


def md_where(st, A, derived):
    out = ["| trace | policy | linear states written | … later hit on SSD | FA chunks written | … hit on SSD | "
           "FA hits from SSD | STATE hits from DRAM |", "|---|---|---|---|---|---|---|---|"]
    for t in A["traces"]:
        for r in where_rows(st, t, derived):
            out.append(f"| {t} | {st.label(r['pol'])} | {r['states_written']:,.0f} | {r['state_hit_frac'] * 100:.0f}% | "
                       f"{r['fa_written']:,.0f} | {r['fa_hit_frac'] * 100:.0f}% | {r['fa_hits_ssd_share'] * 100:.0f}% | "
                       f"{r['state_hits_dram_share'] * 100:.0f}% |")
    return "\n".join(out)


def md_fleet(st, A):
    out = ["| trace | router | policy | miss | min-node lifetime (y) | fleet SSD replacement ($/y) | wear imbalance |",
           "|---|---|---|---|---|---|---|"]
    for t in A["traces"]:
        for p in sorted(select(st, trace=t, exp="fleet"), key=lambda p: (st.routers.index(p.router), p.pol)):
            f = p.result["fleet"]
            out.append(f"| {t} | {p.router} | {st.label(p.pol)} | {f['chunk_miss_ratio']:.4f} | "
                       f"{_f(f['ssd_lifetime_years'])} | {f['fleet_ssd_replacement_usd_per_year']:,.2f} | "
                       f"{f['wear_imbalance']:.2f} |")
    return "\n".join(out) + ("\n\n8 nodes; each node has 1/8 of the single-node 1:10 sizing (fleet DRAM 1% W, "
                             "SSD 10% W). Best baseline = the longest-lived baseline within +0.01 miss of gandalf "
                             "α=1 on the single node.")


def md_investigate(st, A):
    out = ["| trace | gandalf α=1 with | miss | lifetime (y) | SSD written FA / STATE (GB) | write-hit frac. | "
           "iso-miss ratio (vs baseline) |", "|---|---|---|---|---|---|---|"]
    for t in A["traces"]:
        g = A["groups"].get(f"{t}|{st.sizing_name(st.r10)}|w0")
        if not g:
            continue
        iso = {x["gandalf"]: x for x in g["iso"]}
        for pol in ["g1", "gp1", *st.variants]:
            f = g["rows"].get(pol)
            if f is None:
                continue
            x = iso.get(pol)
            r = f"{x['ratio']:.2f}× ({st.label(x['baseline'])})" if x and x["ratio"] is not None else "none within +0.01"
            name = "(the reconstruction, defaults)" if pol == "g1" else (
                "reuse=population" if pol == "gp1" else st.param_label(pol))
            out.append(f"| {t} | {name} | {f['chunk_miss_ratio']:.4f} | {_f(f['ssd_lifetime_years'])} | "
                       f"{f['ssd_bytes_written_fa'] / GB:,.1f} / {f['ssd_bytes_written_state'] / GB:,.1f} | "
                       f"{f['ssd_write_hit_fraction']:.3f} | {r} |")
    return "\n".join(out)


def md_points(st, A):
    out = ["| # | trace | model | sizing | policy | extra | wall (s) |", "|---|---|---|---|---|---|---|"]
    for i, p in enumerate(st):
        extra = (f"warm-up {p.warmup_s:g} s " if p.warmup_s else "") + (f"{p.nodes} nodes, {p.router}"
                                                                        if p.nodes > 1 else "")
        out.append(f"| {i} | {p.trace} | {p.model} | {st.sizing_name(p.sizing)} | {st.label(p.pol)} | {extra} | "
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


def study_report(path: str | Path, docs: str | Path | None = None) -> dict:
    """Tables and figures of a study folder: ``results.md`` (its generated sections rewritten,
    the prose around them kept), ``results.json`` and ``figures/*.png`` in the folder, or, with
    ``docs`` (a results.md to rewrite), the figures in ``figures/`` beside that file."""
    from .model import load_model

    root = Path(path)
    st = load_study(root)
    m = st.manifest
    traces_info = st.traces
    ws = dict(m.get("working_sets_bytes") or {})
    A = analyse(st, traces_info, ws)
    spec = load_model(st.main_model)
    derived = {"kv_bytes_per_token_full": spec.kv_bytes_per_token_full, "linear_state_bytes": spec.linear_state_bytes}
    md = Path(docs) if docs else root / "results.md"
    fig_dir = md.parent / "figures"
    fig_dir.mkdir(parents=True, exist_ok=True)
    figs = {}
    for t in traces_info:
        figs[f"frontier_{t}"] = fig_frontier(st, t, traces_info[t]["title"], fig_dir / f"frontier_{t}.png")
        if st.a10 and st.a40:
            figs[f"frontier_abs_{t}"] = fig_frontier(st, t, traces_info[t]["title"] + ", paper's absolute sizes",
                                                     fig_dir / f"frontier_abs_{t}.png", (st.a10, st.a40))
    figs["alpha"] = fig_alpha(st, traces_info, fig_dir / "alpha.png")
    figs["capacity"] = fig_capacity(st, traces_info, fig_dir / "capacity.png")
    figs["models"] = fig_models(st, traces_info, fig_dir / "models.png")
    figs["where"] = fig_where(st, traces_info, derived, fig_dir / "where.png")
    figs["latency_cost"] = fig_latency_cost(st, traces_info, fig_dir / "latency_cost.png")
    figs["fleet"] = fig_fleet(st, traces_info, fig_dir / "fleet.png")
    figs = {k: v for k, v in figs.items() if v}

    def img(k, alt):
        if k not in figs:
            return ""
        return f"\n![{alt}]({os.path.relpath(figs[k], md.parent)})\n"

    wss = ", ".join(f"{k.replace('|', ' / ')} {v / GB:,.0f} GB" for k, v in sorted(ws.items()))
    dirty = m.get("dirty") or []
    dnote = (f" The working tree had uncommitted changes to {', '.join(dirty)} when it ran (the numbers are "
             "those of that tree)." if dirty else "")
    point_s = sum(p.result["wall_s"] for p in st)
    sec = {
        "provenance": f"{m.get('mode_note', '')} Git sha `{str(m.get('git_sha', 'unknown'))[:10]}`{dnote} "
                      f"{len(st)} points, {float(m.get('wall_s', 0.0)) / 60:.1f} min wall for the last invocation "
                      f"({point_s / 60:.1f} min of simulation time; points reused with `--resume` count their "
                      f"original time).\n\nWorking sets W: {wss}.",
        "side_by_side": md_side_by_side(A, st, derived),
        "e2e": "\n".join(img(f"frontier_{t}", f"frontier {t}") for t in traces_info) +
               "\n".join(img(f"frontier_abs_{t}", f"frontier abs {t}") for t in traces_info) +
               "\n".join(md_e2e(st, A, t) for t in traces_info),
        "capacity": img("capacity", "capacity") + "\n" + md_capacity(st, A),
        "alpha": img("alpha", "alpha"),
        "models": img("models", "models") + "\n" + md_models(st, A),
        "where": img("where", "where") + "\n" + md_where(st, A, derived),
        "latency_cost": img("latency_cost", "latency and cost"),
        "fleet": img("fleet", "fleet") + "\n" + md_fleet(st, A),
        "points": md_points(st, A),
        "investigate": md_investigate(st, A),
    }
    write_sections(md, sec)
    results = {"mode": m.get("mode"), "analysis": A, "figures": {k: str(v) for k, v in figs.items()},
               "points": [{"key": p.key, "exps": sorted(p.exps), "overrides": p.overrides, "wall_s": p.result["wall_s"],
                           "fleet": p.result["fleet"]} for p in st]}
    (root / "results.json").write_text(json.dumps(results, indent=1, default=float))
    results["markdown"] = str(md)
    results["sections"] = sec
    return results


# --------------------------------------------------------------------------- command line

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=PROG, description="Draw the comparison figures of a finished sweep, or the "
                                                        "tables and figures of a study (--study).")
    ap.add_argument("path", nargs="?", help="a sweep's output folder (every summary.json below it is one run)")
    ap.add_argument("--experiment", help="read from MLflow instead: the experiment (default: its latest sweep)")
    ap.add_argument("--run", dest="parent", help="with --experiment: the sweep's parent run id")
    ap.add_argument("--uri", default=None, help="MLflow tracking URI (default sqlite:///mlflow_runs/mlflow.db)")
    ap.add_argument("--out", help="where to write the figures (default: PATH/report, or reports/<parent run>)")
    ap.add_argument("--log", action="store_true", help="with --experiment: also log the figures to the parent run")
    ap.add_argument("--study", metavar="DIR", help="a study folder (study.json and its sweeps, scripts/reproduce.py): "
                                                   "its tables and figures")
    ap.add_argument("--docs", metavar="FILE", help="with --study: rewrite the generated sections of FILE (e.g. "
                                                   "docs/results.md) and put the figures in figures/ beside it")
    a = ap.parse_args(argv)
    try:
        if a.study:
            if not Path(a.study).is_dir():
                raise SystemExit(_err(f"{a.study}: no such folder"))
            res = study_report(a.study, a.docs)
            print(f"{len(res['points'])} points; wrote {res['markdown']} and {Path(a.study) / 'results.json'}")
            for k, v in res["figures"].items():
                print(f"  figure {k}: {v}")
            return 0
        if a.docs:
            raise SystemExit(_err("--docs goes with --study DIR"))
        if a.experiment:
            import tempfile

            from . import tracking
            tr = tracking.Tracker({"uri": a.uri, "experiment": a.experiment})
            parent = a.parent or tr.latest_sweep()
            if not parent:
                raise SystemExit(_err(f"experiment '{a.experiment}': no sweep (parent run) found in {tr.uri}"))
            tmp = Path(tempfile.mkdtemp(prefix="cluster_sim_report_"))
            for i, r in enumerate(tr.children(parent)):
                tr.download_point(r.info.run_id, tmp / f"{i:05d}")
            recs = load_dir(tmp)
            out = Path(a.out or Path("reports") / parent)
        elif a.path:
            if not Path(a.path).exists():
                raise SystemExit(_err(f"{a.path}: no such folder"))
            recs = load_dir(a.path)
            out = Path(a.out or Path(a.path) / "report")
        else:
            ap.print_usage(sys.stderr)
            raise SystemExit(_err("give a sweep folder or --experiment NAME"))
        if not recs:
            raise SystemExit(_err("no finished runs (summary.json) found"))
        paths = sweep_figures(recs, out)
        if a.experiment and a.log:
            tr.log_artifacts(parent, out, "report")
    except SystemExit:
        raise
    except Exception as e:  # noqa: BLE001 - one line for the user; the cause is named
        from .errors import UserError
        if isinstance(e, UserError):
            raise SystemExit(_err(str(e)))
        raise
    print(f"{len(recs)} runs; figures:")
    for p in paths:
        print(f"  {p}")
    return 0


def _err(msg: str) -> int:
    print(f"{PROG}: error: {msg}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
