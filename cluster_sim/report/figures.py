"""The figure sets: those of one run (``run_figures``: single runs and each sweep point) and the
comparison figures of a sweep (``sweep_figures``); the figures themselves are in tradeoffs, wear,
serving and timeline."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ._common import _h
from .records import Group, Record, groups, short_key, short_label
from .serving import hit_sources, latency_cdf
from .timeline import tiers_over_time, timeseries
from .tradeoffs import alpha_plot, frontier, miss_vs_capacity
from .wear import lifetime_per_node, ssd_written_per_node


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
