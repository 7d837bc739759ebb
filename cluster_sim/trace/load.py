"""One entry point from a workload config to the canonical table the simulator replays.

Applies, in order: read (or generate), ``time_scale`` (divides every
inter-arrival time), ``until_s`` (on the scaled clock, seconds from the first
arrival), ``limit_requests`` (the first N in arrival order).
"""
from __future__ import annotations


import numpy as np
import pyarrow as pa

from ..errors import ConfigError, TraceError

from .files import resolve_trace_path
from .schema import MAX_ARRIVAL_S

READERS = ("synthetic", "mooncake", "claude_code", "azure", "parquet")

# reader / generator options (``workload.<key>`` beyond the core keys) accepted per format
FORMAT_OPTIONS = {
    "synthetic": ("synthetic",),
    "mooncake": ("cache",),
    "claude_code": ("placement", "session_rate_per_s", "arrivals", "lanes", "lane_gap_s",
                    "hash_id_scope_override", "cache"),
    "azure": ("synthetic",),
    "parquet": (),
}


def check_workload_options(wl) -> None:
    """Reject a ``workload.<key>`` the format does not use (ConfigError naming the key)."""
    allowed = FORMAT_OPTIONS.get(wl.format)
    if allowed is None:
        raise ConfigError("workload.format", f"format {wl.format!r} is not supported; supported: {', '.join(READERS)}")
    for key in sorted(wl.options or {}):
        if key not in allowed:
            known = ", ".join(allowed) if allowed else "none"
            raise ConfigError(f"workload.{key}", f"unknown option for workload.format={wl.format} "
                                                 f"(options of this format: {known})")
    if "cache" in (wl.options or {}) and not isinstance(wl.options["cache"], bool):
        raise ConfigError("workload.cache", f"expected true or false, got {wl.options['cache']!r}")


def read_workload(wl, seed: int) -> pa.Table:
    """The canonical table of a workload config, before the §1 filters (:func:`apply_filters`).

    ``synthetic``: the seeded generator (``workload.synthetic.*`` knobs).
    ``mooncake``: the JSONL reader, through the converted-trace cache (:mod:`.cache`).
    ``claude_code``: the session reader (through the cache, which holds the
    unplaced sessions), then session placement (:mod:`.placement`).
    ``azure``: the generator with one session per arrival of the CSV (:mod:`.azure`).
    ``parquet``: a canonical table on disk.
    ``workload.cache: false`` turns the cache off for one run.
    """
    check_workload_options(wl)
    fmt = wl.format
    opts = dict(wl.options or {})
    if fmt == "synthetic":
        from .synthetic import generate

        return generate(synthetic_spec(wl), seed)
    path = resolve_trace_path(wl.path)
    if fmt == "mooncake":
        from .cache import cached_table
        from .mooncake import read_mooncake
        from .schema import conform_table, validate_table

        from .rechain import with_chained_verdict

        return conform_table(cached_table("mooncake", path, {}, lambda: with_chained_verdict(read_mooncake(path)),
                                          validate=validate_table, enabled=opts.get("cache", True)))
    if fmt == "claude_code":
        from .cache import cached_table
        from .claude_code import read_claude_code, validate_table_unplaced
        from .placement import place_sessions, placement_from_options
        from .rechain import with_chained_verdict
        from .schema import conform_table

        placement = placement_from_options(opts, seed)   # validate before the slow read
        scope = opts.get("hash_id_scope_override")
        if scope is not None and scope not in ("local", "global"):
            raise ConfigError("workload.hash_id_scope_override", f"must be local, global or null; got {scope!r}")
        unplaced = cached_table("claude_code", path, {"hash_id_scope_override": scope},
                                lambda: with_chained_verdict(read_claude_code(path, hash_id_scope_override=scope)),
                                validate=validate_table_unplaced, enabled=opts.get("cache", True))
        return place_sessions(conform_table(unplaced), placement)
    if fmt == "azure":
        from .azure import read_azure_workload

        return read_azure_workload(path, opts.get("synthetic"), seed)
    if fmt == "parquet":
        from .parquet import read_parquet
        return read_parquet(path)
    raise ConfigError("workload.format", f"format {fmt!r} is not supported yet; supported: {', '.join(READERS)}")


def synthetic_spec(wl):
    """The generator's spec of a ``synthetic`` workload: ``default_spec()`` with the
    ``workload.synthetic.*`` knobs over it."""
    from dataclasses import asdict

    from .synthetic import default_spec, spec_from_dict

    knobs = dict(asdict(default_spec()))
    knobs.update(dict((wl.options or {}).get("synthetic") or {}))
    return spec_from_dict(knobs)


def apply_filters(table: pa.Table, wl) -> pa.Table:
    arr = np.asarray(table.column("arrival_s").to_numpy(zero_copy_only=False), dtype=np.float64)
    if len(arr) and wl.time_scale != 1.0:
        a0 = arr[0]
        with np.errstate(over="ignore"):
            scaled = a0 + (arr - a0) / wl.time_scale
        if not np.isfinite(scaled[-1]) or scaled[-1] > MAX_ARRIVAL_S:
            raise ConfigError("workload.time_scale", f"{wl.time_scale!r} stretches the trace's "
                              f"{float(arr[-1] - a0):g} s beyond {MAX_ARRIVAL_S:g} s of arrivals")
        table = table.set_column(table.column_names.index("arrival_s"), "arrival_s", pa.array(scaled, pa.float64()))
        arr = scaled
    if wl.until_s is not None and len(arr):
        keep = int(np.searchsorted(arr - arr[0], wl.until_s, side="right"))
        table = table.slice(0, keep)
    if wl.limit_requests is not None:
        table = table.slice(0, min(wl.limit_requests, table.num_rows))
    return table


def load_workload(wl, seed: int) -> pa.Table:
    """Read, filter (§1) and, where the hashes are not prefix-chained, chain them (``workload.rechain``)."""
    from .rechain import chain_table, pop_chained_verdict

    # a converted trace carries the cache's verdict on its hashes (taken off: the table is then
    # exactly what it was before the verdict was cached)
    table, known_chained = pop_chained_verdict(read_workload(wl, seed))
    if table.num_rows == 0:
        raise TraceError(wl.path or "<synthetic>", "the trace has no requests")
    table = apply_filters(table, wl)
    if table.num_rows == 0:
        raise TraceError(wl.path or "<synthetic>", "no requests left after workload.until_s / limit_requests")
    return chain_table(table, getattr(wl, "rechain", "auto"), wl.path or "<synthetic>", known_chained=known_chained)
