"""The trade-off figures of a sweep: ``frontier.png`` (SSD lifetime vs chunk miss ratio, one series
per policy), ``alpha.png`` (lifetime and miss ratio vs α) and ``miss_vs_capacity.png`` (miss ratio
against a swept tier capacity)."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import numpy as np

from ._common import CAPACITY_KEYS, _bytes_of, _bytes_unit, _h, _log_if_decades, _plt, _seed_note, _series_by_policy
from .records import Group, _fmt, short_key


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
