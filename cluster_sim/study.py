"""Helpers the scripts share (scripts/ import the installed package, never each other).

* :func:`shared_trace_overrides`: ``workload.path=...`` for a workload read from the shared
  traces (:mod:`cluster_sim.locations`), or one line and exit status 2 when they are absent;
* :func:`policy_overrides`: ``name:key=value,...`` as Hydra overrides;
* :func:`working_set`: the working set W (bytes) of a composed (workload, model, chunking),
  which the studies size DRAM and SSD from;
* :data:`FTL_TRACES`: the FTL study's two configurations (scripts/ftl_study.py, bench_ftl.py).

Nothing here imports Ray, MLflow or Hydra at import time (``working_set`` composes through
:func:`cluster_sim.compose`).
"""
from __future__ import annotations

import sys

from .locations import TRACE_FILES, missing, shared_trace


def shared_trace_overrides(workload: str, prog: str = "") -> list[str]:
    """``["workload.path=<root>/<file>"]`` for a workload whose trace is shared (mooncake,
    claude_code, azure); ``[]`` for the others (default, synthetic). When the file is absent the
    process exits with status 2 and one line naming the path and the setting."""
    if workload not in TRACE_FILES:
        return []
    why = missing(workload)
    if why:
        print(f"{prog or 'cluster_sim'}: error: {why}", file=sys.stderr)
        raise SystemExit(2)
    return [f"workload.path={shared_trace(workload)}"]


def policy_overrides(spec: str) -> list[str]:
    """``name`` or ``name:override,override`` (e.g. ``gandalf:policy.tau_s=60``) ->
    ``["policy=name", "policy.tau_s=60"]``."""
    name, _, params = spec.partition(":")
    return [f"policy={name}"] + [p for p in params.split(",") if p]


def working_set(overrides: list[str]) -> int:
    """W in bytes (``working_set_bytes`` of ``cluster-sim-trace stats``) of the composed config."""
    from . import compose
    from .config import SimConfig
    from .trace.load import load_workload
    from .trace.stats import trace_statistics

    cfg = SimConfig.from_mapping(compose(list(overrides)))
    table = load_workload(cfg.workload, cfg.seed)
    return int(trace_statistics(table, chunk_tokens=cfg.chunk_tokens, model=cfg.model)["working_set_bytes"])


#: the FTL study's configurations (whole traces), by name: (workload format, overrides)
FTL_TRACES = {
    "mooncake": ("mooncake", ["workload=mooncake", "model=qwen3_next_80b_a3b", "cache.chunk_tokens=512",
                              "hardware.hbm_cache_bytes=0", "hardware.dram_bytes=26GB", "hardware.ssd_bytes=263GB"]),
    "weka": ("claude_code", ["workload=claude_code", "model=qwen3_next_80b_a3b", "cache.chunk_tokens=256",
                             "hardware.hbm_cache_bytes=0", "hardware.dram_bytes=74GB", "hardware.ssd_bytes=738GB"]),
}
