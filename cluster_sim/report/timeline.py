"""One run over simulated time: ``timeseries.png`` (SSD bytes written and chunk hit ratio per node)
and ``tiers.png`` (occupancy, bytes written and evicted, hits and the SSD's write-hit fraction,
per tier), from the per-epoch table ``epochs.parquet``."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ._common import CAPACITY_KEYS, TIER_COLORS, TIERS, _bytes_of, _bytes_unit, _h, _plt
from .records import Record, short_label


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
