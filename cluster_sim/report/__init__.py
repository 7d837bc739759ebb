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

The package, by table and figure family (every name is importable from ``cluster_sim.report``):

* ``records``: a finished run (``Record``, ``load_dir``), runs grouped by seed (``Group``, ``groups``),
  mean ± 95% CI; ``_common``: what the figure modules share;
* ``tradeoffs`` (frontier, α, miss ratio vs capacity), ``wear`` (per node), ``serving`` (hit
  sources, latency CDFs), ``timeline`` (a run over time); ``figures``: the sets of a run and a sweep;
* ``study`` (a study's manifest, points and comparisons), ``study_figures``, ``tables`` (markdown),
  ``results`` (``results.md`` / ``results.json``);
* ``cli``: ``cluster-sim-report`` (``main``).
"""
from .records import (
    _SKIP_TOP, _T95, Group, Record, _flat, _fmt, _natural, _sim_flat, groups, load_dir, mean_ci, short_key, short_label,
    t95, varying_keys,
)
from ._common import (
    CAPACITY_KEYS, KINDS, TIERS, TIER_COLORS, _bytes_of, _bytes_unit, _h, _log_if_decades, _plt, _seed_note,
    _series_by_policy, _wrap,
)
from .tradeoffs import _alpha, _point_label, alpha_plot, capacity_key, frontier, miss_vs_capacity
from .wear import lifetime_per_node, ssd_written_per_node
from .serving import _ecdf, hit_sources, latency_cdf
from .timeline import _bins, _capacity, tiers_over_time, timeseries
from .figures import group_label, run_figures, sweep_figures
from .study import (
    GB, MODEL_POLS, Study, StudyPoint, _choice, analyse, best_baseline_for, iso_miss, load_study, oadm_row, oadm_share,
    rows_of, select, where_rows,
)
from .study_figures import (
    FAM_STYLE, _life_axis, _plt_study, _save, _style, fig_alpha, fig_capacity, fig_fleet, fig_frontier,
    fig_latency_cost, fig_models, fig_where,
)
from .tables import (
    _f, _warm, headline, md_capacity, md_e2e, md_fleet, md_investigate, md_models, md_points, md_side_by_side, md_where,
)
from .results import SKELETON, study_report, write_sections
from .cli import PROG, _err, main

# the public names of the module this package was (cluster_sim/report.py); the private ones above
# stay importable too (tests use some)
__all__ = [
    "PROG", "TIERS", "KINDS", "TIER_COLORS", "t95", "mean_ci", "Record", "load_dir", "varying_keys", "short_key",
    "Group", "groups", "frontier", "alpha_plot", "ssd_written_per_node", "hit_sources", "timeseries", "short_label",
    "run_figures", "sweep_figures", "CAPACITY_KEYS", "tiers_over_time", "lifetime_per_node", "group_label",
    "latency_cdf", "capacity_key", "miss_vs_capacity", "GB", "StudyPoint", "Study", "load_study", "best_baseline_for",
    "oadm_row", "oadm_share", "iso_miss", "select", "rows_of", "analyse", "FAM_STYLE", "fig_frontier", "fig_alpha",
    "fig_capacity", "MODEL_POLS", "fig_models", "where_rows", "fig_where", "fig_latency_cost", "fig_fleet", "md_e2e",
    "headline", "md_side_by_side", "md_capacity", "md_models", "md_where", "md_fleet", "md_investigate", "md_points",
    "SKELETON", "write_sections", "study_report", "main",
]
