"""What the cache served and how fast: ``hit_sources.png`` (reused payloads by tier and payload
kind) and ``latency_cdf.png`` (CDFs of TTFT and KV load latency)."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from ._common import KINDS, TIER_COLORS, TIERS, _plt, _seed_note, _wrap
from .records import Group


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
