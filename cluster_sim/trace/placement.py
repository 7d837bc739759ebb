"""Putting sessions on one clock (trace formats whose sessions have no absolute times).

A Claude Code trace (:mod:`cluster_sim.trace.claude_code`) gives each
session's requests as times from the session's start. Before replay, session
``k`` (source order) gets a start time ``start[k]`` on a shared clock, every
request's arrival becomes ``start[session] + time within the session``, and
the requests of all sessions are merged in arrival order (stable: ties keep
session order, then turn order), numbered ``request_id = 0 … N-1``.

Placements (``workload.placement``):

``poisson`` (default)
    Session starts form a Poisson process of rate ``workload.session_rate_per_s``
    (default 0.2/s): the first session starts at 0, the gaps are exponential
    with mean ``1 / rate``, drawn from ``numpy.random.default_rng([seed,
    0x504C4143])`` where ``seed`` is the run's root seed (same seed ⇒ same starts).
``arrivals``
    Session ``k`` starts at the ``k``-th arrival of the arrival-only trace
    ``workload.arrivals`` (an Azure CSV, :func:`cluster_sim.trace.azure.read_azure_arrivals`;
    times from its first arrival). Fewer arrivals than sessions is a
    :class:`ConfigError` on ``workload.arrivals`` (no cycling: repeating an
    arrival pattern would invent a load the trace does not have); extra
    arrivals are unused.
``lanes``
    ``workload.lanes`` = N concurrent lanes (think: N users) run sessions back
    to back. Sessions are handed out in source order to the lane that becomes
    free first (ties: the lowest lane); all lanes start at 0. A lane is busy
    with a session from its start until the session's end (``session_end_s``
    in the table's metadata: its latest request's ``t + api_time``) plus
    ``workload.lane_gap_s`` (default 0). Sessions of one lane never overlap.

The table's schema metadata records the placement as JSON under
``placement`` (the trace's span, and so SSD lifetime, depends on it).
"""
from __future__ import annotations

import heapq
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from cluster_sim.errors import ConfigError
from cluster_sim.trace.files import resolve_path, source_sha256

__all__ = [
    "PLACEMENTS",
    "PLACEMENT_KEYS",
    "Placement",
    "placement_from_options",
    "poisson_starts",
    "arrival_starts",
    "lane_starts",
    "session_starts",
    "place_sessions",
    "session_count",
]

PLACEMENTS = ("poisson", "arrivals", "lanes")
PLACEMENT_KEYS = ("placement", "session_rate_per_s", "arrivals", "lanes", "lane_gap_s")
DEFAULT_SESSION_RATE_PER_S = 0.2
_RNG_TAG = 0x504C4143  # "PLAC"


@dataclass(frozen=True)
class Placement:
    kind: str = "poisson"
    session_rate_per_s: float = DEFAULT_SESSION_RATE_PER_S
    arrivals: str | None = None
    lanes: int | None = None
    lane_gap_s: float = 0.0
    seed: int = 0


def _number(options: dict, key: str, default, *, integer: bool = False, positive: bool = True):
    v = options.get(key, default)
    full = f"workload.{key}"
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        if isinstance(v, str):
            try:
                v = int(v) if integer else float(v)
            except ValueError:
                raise ConfigError(full, f"expected a number, got {v!r}") from None
        else:
            raise ConfigError(full, f"expected a number, got {v!r}")
    if integer:
        if isinstance(v, float) and not v.is_integer():
            raise ConfigError(full, f"expected a whole number, got {v!r}")
        v = int(v)
    elif not math.isfinite(v):
        raise ConfigError(full, f"must be finite, got {v!r}")
    if positive and not v > 0:
        raise ConfigError(full, f"must be > 0, got {v!r}")
    if not positive and v < 0:
        raise ConfigError(full, f"must be >= 0, got {v!r}")
    return int(v) if integer else float(v)


def placement_from_options(options: dict, seed: int) -> Placement:
    """Validate the placement keys of ``workload.*`` (others are ignored here)."""
    kind = options.get("placement", "poisson")
    if kind is None:
        kind = "poisson"
    if kind not in PLACEMENTS:
        raise ConfigError("workload.placement", f"must be one of {', '.join(PLACEMENTS)}; got {kind!r}")
    rate = _number(options, "session_rate_per_s", DEFAULT_SESSION_RATE_PER_S)
    if rate is None:
        rate = DEFAULT_SESSION_RATE_PER_S
    lanes = _number(options, "lanes", None, integer=True)
    gap = _number(options, "lane_gap_s", 0.0, positive=False) or 0.0
    arrivals = options.get("arrivals")
    if arrivals is not None and not isinstance(arrivals, (str, Path)):
        raise ConfigError("workload.arrivals", f"expected a file path, got {arrivals!r}")
    if kind == "arrivals" and not arrivals:
        raise ConfigError("workload.arrivals", "workload.placement=arrivals needs an arrival trace path "
                                               "(an Azure CSV, e.g. ../shared/traces/azure-llm-2023/"
                                               "AzureLLMInferenceTrace_conv.csv.gz)")
    if arrivals and kind != "arrivals":
        raise ConfigError("workload.arrivals", f"is only used with workload.placement=arrivals (placement is {kind})")
    if kind == "lanes" and lanes is None:
        raise ConfigError("workload.lanes", "workload.placement=lanes needs the number of lanes (a positive integer)")
    if lanes is not None and kind != "lanes":
        raise ConfigError("workload.lanes", f"is only used with workload.placement=lanes (placement is {kind})")
    return Placement(kind=kind, session_rate_per_s=rate, arrivals=None if not arrivals else str(arrivals),
                     lanes=lanes, lane_gap_s=gap, seed=int(seed))


# --------------------------------------------------------------------------- #
# start times


def poisson_starts(n: int, rate_per_s: float, seed: int) -> np.ndarray:
    """``n`` Poisson session starts of rate ``rate_per_s``, the first at 0."""
    rng = np.random.default_rng([int(seed), _RNG_TAG])
    gaps = rng.exponential(1.0 / rate_per_s, max(n - 1, 0))
    return np.concatenate([[0.0], np.cumsum(gaps)])[:n]


def arrival_starts(n: int, arrival_s: np.ndarray, what: str = "the arrival trace") -> np.ndarray:
    """Session ``k`` starts at ``arrival_s[k]``; fewer arrivals than sessions is a ConfigError."""
    arrival_s = np.asarray(arrival_s, dtype=np.float64)
    if len(arrival_s) < n:
        raise ConfigError("workload.arrivals", f"{what} has {len(arrival_s)} arrivals but the trace has {n} sessions "
                                               "(each session needs one arrival; no cycling)")
    return arrival_s[:n].copy()


def lane_starts(durations: np.ndarray, lanes: int, gap_s: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Back-to-back sessions on ``lanes`` lanes: (start per session, lane per session).

    Session ``k`` (in order) goes to the lane that is free first (ties: lowest
    lane); it occupies the lane for ``durations[k] + gap_s``.
    """
    durations = np.asarray(durations, dtype=np.float64)
    n = len(durations)
    starts = np.zeros(n, dtype=np.float64)
    lane_of = np.zeros(n, dtype=np.int64)
    heap = [(0.0, i) for i in range(int(lanes))]
    for k in range(n):
        free, lane = heapq.heappop(heap)
        starts[k] = free
        lane_of[k] = lane
        heapq.heappush(heap, (free + float(durations[k]) + gap_s, lane))
    return starts, lane_of


def session_count(table: pa.Table) -> int:
    """Sessions of an unplaced table (metadata ``sessions``; empty sessions count)."""
    meta = table.schema.metadata or {}
    if b"sessions" in meta:
        return int(meta[b"sessions"].decode())
    if table.num_rows == 0:
        return 0
    return int(np.max(table.column("session_id").to_numpy())) + 1


def session_durations(table: pa.Table) -> np.ndarray:
    """Per session: metadata ``session_end_s``, else the latest request's time within its session."""
    meta = table.schema.metadata or {}
    n = session_count(table)
    if b"session_end_s" in meta:
        d = np.asarray(json.loads(meta[b"session_end_s"].decode()), dtype=np.float64)
        if len(d) == n:
            return d
    d = np.zeros(n, dtype=np.float64)
    if table.num_rows:
        np.maximum.at(d, table.column("session_id").to_numpy(), table.column("arrival_s").to_numpy())
    return d


def session_starts(table: pa.Table, placement: Placement) -> tuple[np.ndarray, dict]:
    """Start time of every session of the unplaced ``table``, and the placement record."""
    n = session_count(table)
    record = {"placement": placement.kind, "sessions": n}
    if placement.kind == "poisson":
        starts = poisson_starts(n, placement.session_rate_per_s, placement.seed)
        record.update(session_rate_per_s=placement.session_rate_per_s, seed=placement.seed)
    elif placement.kind == "arrivals":
        from cluster_sim.trace.azure import read_azure_arrivals

        path = resolve_path(placement.arrivals, "workload.arrivals")
        arr, _ctx, _gen = read_azure_arrivals(path)
        starts = arrival_starts(n, arr, str(path))
        record.update(arrivals=str(path), arrivals_sha256=source_sha256(path), arrivals_available=int(len(arr)))
    elif placement.kind == "lanes":
        starts, _lane = lane_starts(session_durations(table), placement.lanes, placement.lane_gap_s)
        record.update(lanes=placement.lanes, lane_gap_s=placement.lane_gap_s)
    else:  # placement_from_options rejects this
        raise ConfigError("workload.placement", f"unknown placement {placement.kind!r}")
    return starts, record


def take_rows(table: pa.Table, order: np.ndarray) -> pa.Table:
    """``table.take(order)``, with list columns gathered by numpy: Arrow's take of the whole WEKA
    trace's 94 M block hashes took 6-8 s, this about 1 s. Columns with nulls go through Arrow."""
    order = np.asarray(order, dtype=np.int64)
    cols = []
    for col in table.columns:
        if pa.types.is_list(col.type) or pa.types.is_large_list(col.type):
            arr = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
            if arr.null_count == 0:
                off = arr.offsets.to_numpy()
                start = off[:-1][order]
                lens = (off[1:] - off[:-1])[order]
                new_off = np.zeros(len(order) + 1, dtype=np.int64)
                np.cumsum(lens, out=new_off[1:])
                gather = np.repeat(start - new_off[:-1], lens)
                gather += np.arange(new_off[-1], dtype=np.int64)
                values = pa.array(arr.values.to_numpy(zero_copy_only=False)[gather], type=col.type.value_type)
                cols.append(type(arr).from_arrays(pa.array(new_off.astype(off.dtype)), values, type=col.type))
                continue
        cols.append(col.take(pa.array(order)))
    return pa.Table.from_arrays(cols, schema=table.schema)


def place_sessions(table: pa.Table, placement: Placement) -> pa.Table:
    """Place the sessions of an unplaced table and merge their requests in arrival order."""
    starts, record = session_starts(table, placement)
    if table.num_rows:
        sess = table.column("session_id").to_numpy()
        absolute = starts[sess] + table.column("arrival_s").to_numpy()
        order = np.argsort(absolute, kind="stable")
        if not np.array_equal(order, np.arange(len(order))):
            table = take_rows(table, order)
            absolute = absolute[order]
    else:
        absolute = np.zeros(0, dtype=np.float64)
    table = table.set_column(table.column_names.index("arrival_s"), table.schema.field("arrival_s"),
                             pa.array(absolute, type=pa.float64()))
    table = table.set_column(table.column_names.index("request_id"), table.schema.field("request_id"),
                             pa.array(np.arange(table.num_rows, dtype=np.int64)))
    meta = dict(table.schema.metadata or {})
    meta[b"placement"] = json.dumps(record, sort_keys=True).encode()
    return table.replace_schema_metadata(meta)
