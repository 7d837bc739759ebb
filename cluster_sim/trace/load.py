"""One entry point from a workload config to the canonical table the simulator replays.

Applies, in order: read (or generate), ``time_scale`` (divides every
inter-arrival time), ``until_s`` (on the scaled clock, seconds from the first
arrival), ``limit_requests`` (the first N in arrival order).
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..errors import ConfigError, TraceError

READERS = ("synthetic", "mooncake", "parquet")


def read_workload(wl, seed: int) -> pa.Table:
    fmt = wl.format
    if fmt == "synthetic":
        from .synthetic import default_spec, generate, spec_from_dict
        from dataclasses import asdict

        knobs = dict(asdict(default_spec()))
        knobs.update(dict(wl.options.get("synthetic") or {}))
        return generate(spec_from_dict(knobs), seed)
    path = resolve_trace_path(wl.path)
    if fmt == "mooncake":
        from .mooncake import read_mooncake
        return read_mooncake(path)
    if fmt == "parquet":
        from .parquet import read_parquet
        return read_parquet(path)
    raise ConfigError("workload.format", f"format {fmt!r} is not supported yet; supported: {', '.join(READERS)}")


def project_root() -> Path:
    return Path(__file__).resolve().parents[2]


def resolve_trace_path(p: str) -> Path:
    """A relative path resolves against the current directory; if nothing is there, against
    the project root (so the bundled ``traces/default.parquet`` is found from anywhere)."""
    path = Path(p).expanduser()
    if path.exists():
        return path
    if not path.is_absolute():
        alt = project_root() / path
        if alt.exists():
            return alt
    raise ConfigError("workload.path", f"trace file not found: {p}")


def apply_filters(table: pa.Table, wl) -> pa.Table:
    arr = np.asarray(table.column("arrival_s").to_numpy(zero_copy_only=False), dtype=np.float64)
    if len(arr) and wl.time_scale != 1.0:
        a0 = arr[0]
        scaled = a0 + (arr - a0) / wl.time_scale
        table = table.set_column(table.column_names.index("arrival_s"), "arrival_s", pa.array(scaled, pa.float64()))
        arr = scaled
    if wl.until_s is not None and len(arr):
        keep = int(np.searchsorted(arr - arr[0], wl.until_s, side="right"))
        table = table.slice(0, keep)
    if wl.limit_requests is not None:
        table = table.slice(0, min(wl.limit_requests, table.num_rows))
    return table


def load_workload(wl, seed: int) -> pa.Table:
    table = apply_filters(read_workload(wl, seed), wl)
    if table.num_rows == 0:
        raise TraceError(wl.path or "<synthetic>", "no requests left after workload.until_s / limit_requests")
    return table


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
