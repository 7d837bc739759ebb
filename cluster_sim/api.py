"""``cluster_sim.run(config) -> Summary``: the one path every entry point takes.

The command line composes ``conf/`` with Hydra and calls :func:`run`; a
notebook or a benchmark does the same with ``cluster_sim.compose([...])`` or a
plain mapping. Trace loading, config validation and output writing are timed
apart from the replay (``sim_wall_s`` covers routing, nodes and metric
accumulation only).
"""
from __future__ import annotations

import json
import math
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np
import pyarrow as pa

from ._version import __version__
from .config import SimConfig
from .errors import ConfigError
from .metrics import derive, fleet_metrics
from .units import lifetime_text


@dataclass
class Summary:
    fleet: dict
    nodes: list[dict]
    config: dict
    run: dict
    node_table: pa.Table | None = field(default=None, repr=False)
    epoch_table: pa.Table | None = field(default=None, repr=False)
    request_table: pa.Table | None = field(default=None, repr=False)   # output.requests=true

    def to_dict(self) -> dict:
        return {"fleet": self.fleet, "nodes": self.nodes, "config": self.config, "run": self.run}

    def to_json(self) -> str:
        return json.dumps(_strict(self.to_dict()), indent=2, sort_keys=False, allow_nan=False)

    def write(self, path: str | os.PathLike, *, key: str = "output.summary_path") -> Path:
        """Write ``summary.json`` (and ``nodes.parquet`` / ``epochs.parquet`` beside it).

        Each file is written under a temporary name and renamed into place, so a failed
        write leaves no partial file; it raises :class:`ConfigError` naming ``key``."""
        import pyarrow.parquet as pq

        p = Path(path)
        text = self.to_json() + "\n"
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            _atomic(p, lambda tmp: Path(tmp).write_text(text))
            if self.node_table is not None:
                _atomic(p.parent / "nodes.parquet", lambda tmp: pq.write_table(self.node_table, tmp))
            if self.epoch_table is not None:
                _atomic(p.parent / "epochs.parquet", lambda tmp: pq.write_table(self.epoch_table, tmp))
            if self.request_table is not None:
                _atomic(p.parent / "requests.parquet", lambda tmp: pq.write_table(self.request_table, tmp))
        except (OSError, pa.ArrowException) as e:
            raise ConfigError(key, f"cannot write the run's results beside {p}: "
                                   f"{getattr(e, 'strerror', None) or e}") from None
        return p

    def table(self) -> str:
        """A readable summary for a terminal."""
        f = self.fleet
        r = self.run
        c = self.config
        lines = [
            f"cluster_sim {r['version']}  policy={r.get('policy_label')}  model={c.get('model', {}).get('name')}  "
            f"nodes={len(self.nodes)}  trace={r['trace_path']}",
            "",
        ]
        rows = [
            ("requests", f"{f['requests']:,}"),
            ("trace span", f"{f['trace_span_s']:.1f} s"),
            ("chunk miss ratio", f"{f['chunk_miss_ratio']:.4f}  (floor {f['miss_ratio_floor']:.4f})"),
            ("token miss ratio", f"{f['token_miss_ratio']:.4f}"),
            ("hits hbm / dram / ssd (FA)", f"{f['hits_hbm_fa']:,} / {f['hits_dram_fa']:,} / {f['hits_ssd_fa']:,}"),
            ("hits hbm / dram / ssd (STATE)",
             f"{f['hits_hbm_state']:,} / {f['hits_dram_state']:,} / {f['hits_ssd_state']:,}"),
            ("SSD bytes written (FA + STATE)", f"{_h(f['ssd_bytes_written'])} = {_h(f['ssd_bytes_written_fa'])} + "
                                               f"{_h(f['ssd_bytes_written_state'])}"),
            ("SSD writes per day", f"{_h(f['ssd_bytes_written_per_day'])}/day"),
            ("SSD NAND bytes written", f"{_h(f['ssd_bytes_written_nand'])}  (WAF {f['ssd_waf']:.3f}, "
                                       f"{_waf_source(c)})"),
            ("SSD write hit fraction", f"{f['ssd_write_hit_fraction']:.3f}"),
            ("SSD lifetime (first drive)", lifetime_text(f['ssd_lifetime_years'])),
            ("load latency mean / p50 / p99",
             f"{f['load_latency_mean_s'] * 1e3:.2f} / {f['load_latency_p50_s'] * 1e3:.2f} / "
             f"{f['load_latency_p99_s'] * 1e3:.2f} ms"),
            ("TTFT mean / p99", f"{f['ttft_mean_s'] * 1e3:.2f} / {f['ttft_p99_s'] * 1e3:.2f} ms"),
            ("recompute GPU-seconds", f"{f['recompute_gpu_seconds']:.1f}  (floor {f['recompute_gpu_seconds_floor']:.1f})"),
            ("cost per 1k requests", f"${f['cost_per_1k_requests_usd']:.4f}  (recompute "
                                     f"${f['cost_per_1k_requests_recompute_usd']:.4f} + wear "
                                     f"${f['cost_per_1k_requests_wear_usd']:.4f})"),
            ("insert skipped", _h(f["insert_skipped_bytes"])),
            ("simulation", f"{f['sim_wall_s']:.2f} s wall, {f['sim_chunk_refs_per_s']:,.0f} chunk refs/s"
                           + (f"  (+ {r['jit_compile_s']:.1f} s compiling kernels, once; not counted)"
                              if r.get("jit_compile_s", 0) >= 0.05 else "")),
        ]
        w = max(len(k) for k, _ in rows)
        lines += [f"  {k:<{w}}  {v}" for k, v in rows]
        return "\n".join(lines)


def _atomic(dst: Path, write) -> None:
    """``write(tmp)`` to a temporary file beside ``dst``, then rename it to ``dst``."""
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=f".{dst.name}.", suffix=".tmp", dir=dst.parent)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, dst)
        tmp = None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _waf_source(config: dict) -> str:
    ssd = ((config.get("hardware") or {}).get("ssd") or {})
    if ssd.get("ftl") == "greedy":
        return f"measured: greedy FTL, {float(ssd.get('overprovision', 0)) * 100:g}% over-provisioning"
    return "assumed: hardware.ssd.waf"


def _h(b: float) -> str:
    b = float(b)
    for unit in ("B", "kB", "MB", "GB", "TB", "PB"):
        if abs(b) < 1000 or unit == "PB":
            return f"{b:.1f} {unit}" if unit != "B" else f"{int(b)} B"
        b /= 1000.0
    return f"{b:.1f} PB"


def _strict(x):
    """JSON-safe: numpy scalars to Python, non-finite floats to 0 (ratios) — never NaN/Infinity."""
    if isinstance(x, dict):
        return {str(k): _strict(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_strict(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return 0.0
    return x


def git_sha() -> str:
    from .locations import checkout_root

    root = checkout_root()     # an installed wheel is no checkout (and may sit inside someone else's)
    if root is None:
        return "unknown"
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                             text=True, timeout=5)
        return out.stdout.strip() if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def prepare(cfg: SimConfig):
    """Load and chunk the workload. Returns (chunked trace, trace path, trace sha256)."""
    return _prepare(cfg)[:3]


#: the last trace prepared in this process: (key, (trace, path, sha256, rechained)); see _prepare_key
_PREPARED: list = []


def _fingerprints(v, out: list) -> None:
    """(path, size, mtime) of every string in ``v`` (a reader option, nested) naming an existing file."""
    if isinstance(v, Mapping):
        for k in sorted(v, key=str):
            _fingerprints(v[k], out)
    elif isinstance(v, (list, tuple)):
        for x in v:
            _fingerprints(x, out)
    elif isinstance(v, str) and v:
        from .trace.files import resolve_path
        try:
            st = resolve_path(v, "").resolve().stat()
        except (ConfigError, OSError, ValueError):
            return
        out.append([v, st.st_size, st.st_mtime_ns])


def _prepare_key(cfg: SimConfig, stream: bool) -> str | None:
    """What a prepared trace depends on: the workload settings (but the wear scale), the seed, the
    chunk size, the source's resolved path and sha256, and the size and mtime of any other file a reader option names
    (Azure arrivals). None when it cannot be told (the source is missing: the reader says so)."""
    from dataclasses import asdict

    wl = {k: v for k, v in asdict(cfg.workload).items() if k != "replays_per_day_scale"}
    extra: list = []
    _fingerprints(wl.get("options") or {}, extra)
    src = None
    if cfg.workload.format != "synthetic":
        from .trace.files import resolve_trace_path, source_sha256
        try:
            rp = resolve_trace_path(cfg.workload.path)
            src = [str(rp.resolve()), source_sha256(rp)]
        except (ConfigError, OSError):
            return None
    try:
        return json.dumps([wl, cfg.seed, cfg.chunk_tokens, bool(stream), src, extra], sort_keys=True, default=repr)
    except (TypeError, ValueError):
        return None


def _prepare(cfg: SimConfig, *, stream: bool = True):
    """:func:`_prepare_uncached`, reusing the trace the last call in this process prepared when
    nothing it depends on changed (:func:`_prepare_key`). A sweep's points in one Ray worker, or
    a notebook's runs, load, place, chain and chunk a trace once (whole WEKA: 10-26 s each
    time). One trace is kept; the simulation never writes into it (docs/decisions.md 119)."""
    key = _prepare_key(cfg, stream)
    if key is not None and _PREPARED and _PREPARED[0][0] == key:
        got = _PREPARED[0][1]
    else:
        _PREPARED.clear()          # the old trace goes before the new one is built (peak memory)
        got = _prepare_uncached(cfg, stream=stream)
        if key is not None:
            _PREPARED.append((key, got))
    _check_against_trace(cfg, got[0])      # reads settings the key leaves out (fleet.epoch_s)
    return got


def clear_prepared() -> None:
    """Forget the trace kept by :func:`_prepare` (frees its memory)."""
    _PREPARED.clear()


def _prepare_uncached(cfg: SimConfig, *, stream: bool = True):
    """:func:`prepare` and whether the block hashes were chained (``workload.rechain``).

    A synthetic workload is chunked as it is written out, without its block-hash column
    (:mod:`cluster_sim.trace.stream`, docs/decisions.md #107), unless ``stream`` is false or
    the case needs the whole table; the results are the same."""
    from .trace.chunks import chunk_trace, resolve_chunk_tokens
    from .trace.files import resolve_trace_path, source_sha256
    from .trace.load import load_workload
    from .trace.rechain import was_rechained
    from .trace.schema import block_tokens

    if stream and cfg.workload.format == "synthetic":
        from .trace.stream import prepare_synthetic

        got = prepare_synthetic(cfg.workload, cfg.seed, cfg.chunk_tokens)
        if got is not None:
            trace, sha = got
            return trace, "synthetic", sha, False
    table = load_workload(cfg.workload, cfg.seed)
    rechained = was_rechained(table)
    ct = resolve_chunk_tokens(cfg.chunk_tokens, block_tokens(table))
    a0 = float(table.column("arrival_s")[0].as_py())
    trace = chunk_trace(table, ct, warmup_s=a0 + cfg.workload.warmup_s, source_path=cfg.workload.path or "")
    if cfg.workload.format == "synthetic":
        tpath = "synthetic"
        sha = _table_sha(table)
    else:
        rp = resolve_trace_path(cfg.workload.path)
        tpath = str(rp)
        sha = source_sha256(rp)
    # the table is no longer needed: hand what Arrow's pool keeps of it back to the OS now, before
    # the replay allocates (the pool returns freed pages only after a delay otherwise)
    del table
    pa.default_memory_pool().release_unused()
    return trace, tpath, sha, rechained


def _check_against_trace(cfg: SimConfig, trace) -> None:
    """Settings that only the trace shows to be meaningless (ConfigError naming the key)."""
    if trace.n_requests == 0:
        return
    if cfg.chunk_tokens != "auto" and trace.chunk_refs == 0:
        longest = int(trace.input_tokens.max())
        if longest < trace.chunk_tokens:
            raise ConfigError("cache.chunk_tokens", f"{trace.chunk_tokens} tokens is longer than every prompt of "
                                                    f"the trace (longest: {longest} tokens): no request has a full "
                                                    "chunk, so there is nothing to cache")
    span = float(trace.arrival_s[-1] - trace.arrival_s[0])
    if span / cfg.fleet.epoch_s >= 2.0**53:
        raise ConfigError("fleet.epoch_s", f"{cfg.fleet.epoch_s!r} s cuts the trace's {span:g} s into more than "
                                           "2^53 epochs")


def _table_sha(table: pa.Table) -> str:
    """sha256 of a generated table's Arrow IPC stream (``run.trace_sha256``, decision 74)."""
    from .trace.stream import table_sha256

    return table_sha256(table)


def run(config: Mapping | SimConfig, *, trace=None, write: bool = True, progress=None) -> Summary:
    """Run one simulation. ``config`` is a composed mapping (``cluster_sim.compose``) or a
    :class:`SimConfig`. ``trace`` may pass an already chunked trace (benchmarks).
    ``progress(done, total)`` is called as requests are replayed (epoch by epoch)."""
    import time

    from .fleet import floors, run_fleet

    from . import capacity

    found = {} if isinstance(config, SimConfig) else capacity.shares(config)   # hardware.dram_bytes=1%W
    cfg = config if isinstance(config, SimConfig) else \
        SimConfig.from_mapping(capacity.stand_in(config) if found else config)
    path = None
    if write:
        path = cfg.summary_path or (Path(cfg.output_dir) / "summary.json" if cfg.output_dir else None)
        if path:   # before any work: a path that cannot be written fails now, not after the replay
            from .outputs import check_summary_path
            check_summary_path(path, "output.summary_path" if cfg.summary_path else "output.dir")
    rechained = False
    if trace is None:
        trace, tpath, sha, rechained = _prepare(cfg)
    else:
        tpath, sha = getattr(trace, "source", "given"), ""
    wset = None
    if found:   # the shares of the working set, now that the trace says what W is
        wset = capacity.working_set_bytes(trace, cfg.model)
        cfg = SimConfig.from_mapping(capacity.substitute(config, found, lambda f: int(round(f * wset))))
    if cfg.fleet.backend == "ray":
        from .distributed import RayNodes
        raw = run_fleet(trace, cfg, RayNodes.factory(cfg), progress=progress)
    else:
        raw = run_fleet(trace, cfg, progress=progress)
    t1 = time.perf_counter()
    node_floors, fleet_floor = floors(trace, cfg, raw["assign"])
    floor_wall = time.perf_counter() - t1

    counted = trace.counted
    arr = trace.arrival_s[counted]
    span = float(arr[-1] - arr[0]) if len(arr) else 0.0
    wl = cfg.workload
    per_node = []
    stats = []
    hws = []
    for k, (st, _series) in enumerate(raw["results"]):
        hw = cfg.hardware_for_node(k)
        d = derive(st, hw, span_s=span, replays_per_day_scale=wl.replays_per_day_scale,
                   cap_years=cfg.lifetime_cap_years, floor_ratio=node_floors[k][0], floor_gpu_s=node_floors[k][1])
        d["hardware"] = hw.name          # which hardware this node ran on (fleet.node_overrides)
        per_node.append(d)
        stats.append(st)
        hws.append(hw)
    fleet = fleet_metrics(per_node, stats, hws, span_s=span, replays_per_day_scale=wl.replays_per_day_scale,
                          cap_years=cfg.lifetime_cap_years, floor_ratio=fleet_floor[0], floor_gpu_s=fleet_floor[1])
    wall = raw["sim_wall_s"]
    refs = int(sum(s.chunks_requested for s in stats))
    all_refs = trace.chunk_refs
    fleet["sim_wall_s"] = float(wall)
    fleet["sim_chunk_refs_per_s"] = float(all_refs / wall) if wall > 0 else 0.0
    for d, (st, _s) in zip(per_node, raw["results"]):
        d["sim_wall_s"] = float(wall)
        d["sim_chunk_refs_per_s"] = float(all_refs / wall) if wall > 0 else 0.0
    run_info = {
        "version": __version__,
        "git_sha": git_sha(),
        "trace_path": tpath,
        "trace_sha256": sha,
        "seed": cfg.seed,
        "backend": cfg.fleet.backend,
        "engine": raw.get("engine", "python"),
        "ray_workers": raw.get("ray_workers", 0),
        "actor_processes": raw.get("actor_processes", 0),
        "policy_label": cfg.policy.label(),
        "chunk_tokens": trace.chunk_tokens,
        "block_tokens": trace.block_tokens,
        "chunks_tracked": trace.n_chunks,
        "counted_chunk_refs": refs,
        "floor_wall_s": floor_wall,
        "jit_compile_s": float(raw.get("jit_compile_s", 0.0)),
        **({"working_set_bytes": wset, "capacity_shares": {k: t for k, (t, _f) in found.items()}} if found else {}),   # numba compiling (first run), not in sim_wall_s
        "block_hashes_rechained": bool(rechained),
    }
    summary = Summary(fleet=fleet, nodes=per_node, config=_resolved_config(cfg), run=run_info)
    summary.node_table = _node_table(per_node)
    summary.epoch_table = _epoch_table(trace, raw, cfg)
    if _wants_requests(cfg):
        summary.request_table = _request_table(trace, raw)
    if write and path:
        summary.write(path, key="output.summary_path" if cfg.summary_path else "output.dir")
        summary.run["summary_path"] = str(path)
    return summary


def _resolved_config(cfg: SimConfig) -> dict:
    raw = dict(cfg.raw)
    model = dict(raw.get("model") or {}) if isinstance(raw.get("model"), Mapping) else {"name": raw.get("model")}
    model["derived"] = cfg.model.to_dict()
    raw["model"] = model
    return _strict(raw)


def _node_table(per_node: list[dict]) -> pa.Table:
    keys = [k for k, v in per_node[0].items() if isinstance(v, (int, float))]
    cols = {"node": pa.array(list(range(len(per_node))), pa.int32())}
    for k in keys:
        cols[k] = pa.array([float(n.get(k, 0)) for n in per_node], pa.float64())
    return pa.table(cols)


def _epoch_table(trace, raw, cfg) -> pa.Table:
    """Per node and per epoch (``fleet.epoch_s``): requests, chunk misses, SSD bytes written."""
    epoch_s = cfg.fleet.epoch_s
    a0 = float(trace.arrival_s[0]) if trace.n_requests else 0.0
    from .fleet import SNAP

    rows = {"node": [], "epoch": [], "t_start_s": [], "requests": [], "chunks": [], "chunk_misses": [],
            "ssd_bytes_written": []}
    # per tier over time (docs/decisions.md 63): occupancy at the epoch's last request, and what
    # happened during the epoch (bytes and SSD copies evicted, SSD admissions, admissions whose
    # copy had served a hit when it was evicted, hits by tier)
    levels = ("hbm_used_bytes", "dram_used_bytes", "ssd_used_bytes")
    flows = {"hbm_left_bytes": "hbm_evicted_bytes", "dram_left_bytes": "dram_evicted_bytes",
             "ssd_left_bytes": "ssd_evicted_bytes", "ssd_copies_left": "ssd_copies_evicted",
             "ssd_admissions": "ssd_admissions", "ssd_admissions_hit": "ssd_admissions_hit",
             "hits_hbm": "hits_hbm", "hits_dram": "hits_dram", "hits_ssd": "hits_ssd"}
    for name in (*levels, *flows.values()):
        rows[name] = []
    for k, (_st, series) in enumerate(raw["results"]):
        idx = series["idx"]
        cnt = trace.counted[idx]
        if not cnt.any():
            continue
        ep = np.floor((trace.arrival_s[idx] - a0) / epoch_s).astype(np.int64)[cnt]
        m = series["m"][cnt]
        miss = (series["m"] - series["h"])[cnt]
        w = series["ssd_bytes_written"][cnt]
        snap = series.get("snap")
        if snap is None or len(snap) != len(idx):
            snap = np.zeros((len(idx), len(SNAP)), dtype=np.int64)
        col = {name: i for i, name in enumerate(SNAP)}
        pos = np.flatnonzero(cnt)
        if not all(a.dtype.kind in "iu" for a in (m, miss, w, snap)):
            delta = np.diff(snap, axis=0, prepend=np.zeros((1, snap.shape[1]), dtype=snap.dtype))[cnt]
            _epoch_rows_loop(rows, k, ep, epoch_s, m, miss, w, snap[cnt], delta, col, levels, flows)
            continue
        # one pass over the node's requests grouped by epoch (integer sums: exact in any order);
        # a loop over epochs with a mask each was O(epochs x requests), hours for 10 M requests
        # (docs/decisions.md #111)
        runs = bool(np.all(ep[1:] >= ep[:-1])) and (len(pos) == 0 or int(pos[-1] - pos[0]) == len(pos) - 1)
        order = None if runs else np.argsort(ep, kind="stable")
        eps, start = np.unique(ep if runs else ep[order], return_index=True)
        count = np.diff(np.append(start, len(ep)))
        last = start + count - 1 if runs else order[start + count - 1]   # the epoch's last request

        def sums(x):
            return np.add.reduceat(x if runs else x[order], start, axis=0).tolist()

        rows["node"] += [k] * len(eps)
        rows["epoch"] += eps.tolist()
        rows["t_start_s"] += [float(e * epoch_s) for e in eps.tolist()]
        rows["requests"] += count.tolist()
        rows["chunks"] += sums(m)
        rows["chunk_misses"] += sums(miss)
        rows["ssd_bytes_written"] += sums(w)
        end = pos[last]                    # rows of the whole series
        for name in levels:
            rows[name] += snap[end, col[name]].tolist()
        if runs:   # each epoch is a run of the series: its changes sum to the change across it
            before = pos[start] - 1
            for src, name in flows.items():
                c = snap[:, col[src]]
                rows[name] += (c[end] - np.where(before >= 0, c[np.maximum(before, 0)], 0)).tolist()
        else:
            delta = np.diff(snap, axis=0, prepend=np.zeros((1, snap.shape[1]), dtype=snap.dtype))[cnt]
            flow = np.add.reduceat(delta[order], start, axis=0)
            for src, name in flows.items():
                rows[name] += flow[:, col[src]].tolist()
    return pa.table(rows)


def _epoch_rows_loop(rows, k, ep, epoch_s, m, miss, w, snap, delta, col, levels, flows) -> None:
    """:func:`_epoch_table`'s rows of one node, an epoch at a time (series that are not integers)."""
    for e in np.unique(ep):
        sel = ep == e
        last = int(np.flatnonzero(sel)[-1])
        rows["node"].append(k)
        rows["epoch"].append(int(e))
        rows["t_start_s"].append(float(e * epoch_s))
        rows["requests"].append(int(sel.sum()))
        rows["chunks"].append(int(m[sel].sum()))
        rows["chunk_misses"].append(int(miss[sel].sum()))
        rows["ssd_bytes_written"].append(int(w[sel].sum()))
        for name in levels:
            rows[name].append(int(snap[last, col[name]]))
        for src, name in flows.items():
            rows[name].append(int(delta[sel, col[src]].sum()))


def _wants_requests(cfg: SimConfig) -> bool:
    return bool(cfg.output_requests)


def _request_table(trace, raw) -> pa.Table:
    """One row per counted request (``output.requests=true``: ``requests.parquet``): where it ran,
    when it arrived, its chunks, hits and misses, SSD bytes it caused to be written, its load
    latency and TTFT (the figures' CDFs)."""
    cols = {"request": [], "node": [], "arrival_s": [], "session_id": [], "chunks": [], "chunk_hits": [],
            "chunk_misses": [], "ssd_bytes_written": [], "load_latency_s": [], "ttft_s": []}
    parts = []
    for k, (_st, series) in enumerate(raw["results"]):
        idx = series["idx"]
        cnt = trace.counted[idx]
        i = idx[cnt]
        lat = series.get("load_latency_s")
        ttft = series.get("ttft_s")
        n = len(i)
        parts.append({"request": i, "node": np.full(n, k, dtype=np.int64), "arrival_s": trace.arrival_s[i],
                      "session_id": trace.session_id[i], "chunks": series["m"][cnt],
                      "chunk_hits": series["h"][cnt], "chunk_misses": (series["m"] - series["h"])[cnt],
                      "ssd_bytes_written": series["ssd_bytes_written"][cnt],
                      "load_latency_s": lat[cnt] if lat is not None else np.full(n, np.nan),
                      "ttft_s": ttft[cnt] if ttft is not None else np.full(n, np.nan)})
    if not parts:
        return pa.table({c: pa.array([], type=pa.float64()) for c in cols})
    out = {c: np.concatenate([p[c] for p in parts]) for c in cols}
    order = np.argsort(out["request"], kind="stable")
    return pa.table({c: v[order] for c, v in out.items()})
