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
        recs.append(Record(data, pq.read_table(ep) if ep.exists() else None, str(s.parent),
                           {"requests": pq.read_table(rq)} if rq.exists() else {}))
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
    from . import report_tiers as rt
    multi = len(rec.summary.get("nodes") or []) > 1      # one bar for one node says nothing the table does not
    paths = ([ssd_written_per_node(g, out / "ssd_written_per_node.png")] if multi else []) + \
        [hit_sources(g, out / "hit_sources.png")]
    ts = timeseries(rec, out / "timeseries.png")
    more = [rt.tiers_over_time(rec, out / "tiers.png"), rt.lifetime_per_node(g, out / "lifetime_per_node.png"),
            rt.latency_cdf([(short_label(rec), rec.extra.get("requests"))], out / "latency_cdf.png")]
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
    from . import report_tiers as rt   # issue #16: lifetime per node, miss vs capacity, latency CDFs
    paths += [p for p in (rt.lifetime_per_node(gs, out / "lifetime_per_node.png"),
                          rt.miss_vs_capacity(gs, out / "miss_vs_capacity.png"),
                          rt.latency_cdf([(rt.group_label(g), g.recs[0].extra.get("requests")) for g in gs]
                                         if all(r.extra.get("requests") is not None for r in recs) else [],
                                         out / "latency_cdf.png")) if p]
    return paths


# --------------------------------------------------------------------------- command line

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=PROG, description="Draw the comparison figures of a finished sweep.")
    ap.add_argument("path", nargs="?", help="a sweep's output folder (every summary.json below it is one run)")
    ap.add_argument("--experiment", help="read from MLflow instead: the experiment (default: its latest sweep)")
    ap.add_argument("--run", dest="parent", help="with --experiment: the sweep's parent run id")
    ap.add_argument("--uri", default=None, help="MLflow tracking URI (default sqlite:///mlflow_runs/mlflow.db)")
    ap.add_argument("--out", help="where to write the figures (default: PATH/report, or reports/<parent run>)")
    ap.add_argument("--log", action="store_true", help="with --experiment: also log the figures to the parent run")
    a = ap.parse_args(argv)
    try:
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
