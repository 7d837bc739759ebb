"""Wear per node: ``ssd_written_per_node.png`` (SSD bytes written per node, host and NAND; wear
imbalance, write amplification) and ``lifetime_per_node.png`` (SSD lifetime of each node)."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from ._common import _bytes_unit, _plt, _seed_note, _wrap
from .records import Group


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


def lifetime_per_node(gs: Sequence[Group], path: Path) -> Path | None:
    """SSD lifetime of each node, for each configuration (years, log scale when they span decades)."""
    from ..units import lifetime_text

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
