"""Figures a cache or SSD person expects (issue #16), from what every run records:

* ``tiers.png`` (a run): per tier over simulated time — occupancy as a share of capacity, bytes
  written to and evicted from each tier, hits served by each tier, and the SSD's write-hit
  fraction (of the SSD copies given up in a time bin, the share that had served a hit; the
  paper's Fig. 10), from the per-epoch columns of ``epochs.parquet``;
* ``lifetime_per_node.png`` (a run of several nodes, and a sweep): SSD lifetime of each node;
* ``latency_cdf.png`` (a run with ``output.requests=true``, and a sweep whose points all have
  it): CDFs of TTFT and of KV load latency, from ``requests.parquet``;
* ``miss_vs_capacity.png`` (a sweep over a tier's capacity): chunk miss ratio against the
  capacity, one line per policy, as a share of the working set when the sizes were given so.

:mod:`cluster_sim.report` calls these from ``run_figures`` and ``sweep_figures``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from .report import TIER_COLORS, TIERS, Group, Record, _bytes_unit, _plt, _seed_note, _series_by_policy, _wrap, \
    short_key, short_label

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
