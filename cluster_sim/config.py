"""Typed, validated configuration. No side effects: nothing here touches disk
except reading a model's published config fields when the model is given by name.

The Hydra app composes ``conf/`` into a plain mapping and hands it to
:func:`SimConfig.from_mapping`; notebooks can do the same with
``cluster_sim.compose([...])``. Every validation error is a
:class:`~cluster_sim.errors.ConfigError` naming the dotted key.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Mapping

from .errors import ConfigError
from .units import parse_bytes, parse_number, parse_rate

WORKLOAD_FORMATS = ("synthetic", "mooncake", "claude_code", "azure", "parquet")
ROUTERS = ("round_robin", "random", "session_affinity", "least_loaded", "kv_aware")
BACKENDS = ("inprocess", "ray")
SYNC_MODES = ("none", "kv_events")
ENGINES = ("auto", "numba", "python")           # cache.engine (cluster_sim.engine.ENGINES)
RECHAIN_MODES = ("auto", "always", "never")   # workload.rechain (cluster_sim.trace.rechain.MODES)


def _num(m: Mapping, key: str, prefix: str, default=None, *, lo=None, hi=None, integer=False, allow_none=False,
         lo_open=False):
    return parse_number(f"{prefix}.{key}" if prefix else key, m.get(key, default), lo=lo, hi=hi,
                        integer=integer, allow_none=allow_none, lo_open=lo_open)


def _choice(m: Mapping, key: str, prefix: str, choices, default=None):
    v = m.get(key, default)
    if v not in choices:
        raise ConfigError(f"{prefix}.{key}", f"must be one of {', '.join(map(str, choices))}; got {v!r}")
    return v


def _check_keys(m: Mapping, allowed, prefix: str):
    for k in m:
        if k not in allowed:
            raise ConfigError(f"{prefix}.{k}" if prefix else str(k),
                              f"unknown key; known keys here: {', '.join(sorted(allowed))}")


@dataclass(frozen=True)
class SSDConfig:
    dwpd: float = 1.0
    warranty_years: float = 5.0
    waf: float = 1.0
    usd_per_tb: float = 330.0
    # the flash translation layer (cluster_sim/ftl.py): ideal = WAF is ``waf``; greedy = measured
    ftl: str = "ideal"
    overprovision: float = 0.127        # share of raw NAND hidden from the host (greedy only)
    erase_block_bytes: int | str = "auto"
    streams: str = "none"               # none | by_kind (FA and STATE in separate erase blocks)


@dataclass(frozen=True)
class HardwareConfig:
    """One serving node. Bytes and bytes/s, node aggregates."""
    name: str = "custom"
    hbm_cache_bytes: int = 0
    dram_bytes: int = 0
    ssd_bytes: int = 0
    gpus_per_node: int = 8
    gpu_flops: float = 989e12
    mfu: float = 0.4
    gpu_usd_per_hour: float = 3.0
    host_link_bytes_per_s: float = 400e9
    ssd_read_bytes_per_s: float = 50e9
    ssd_read_latency_s: float = 100e-6
    ssd_write_bytes_per_s: float = 25e9
    ssd: SSDConfig = field(default_factory=SSDConfig)

    @property
    def tbw_bytes(self) -> float:
        return self.ssd.dwpd * self.ssd_bytes * 365.0 * self.ssd.warranty_years

    @property
    def ssd_price_usd(self) -> float:
        return self.ssd.usd_per_tb * self.ssd_bytes / 1e12

    @classmethod
    def from_mapping(cls, m: Mapping, prefix: str = "hardware") -> "HardwareConfig":
        allowed = {f.name for f in fields(cls)}
        _check_keys(m, allowed, prefix)
        ssd = m.get("ssd") or {}
        _check_keys(ssd, {f.name for f in fields(SSDConfig)}, prefix + ".ssd")
        p = prefix
        return cls(
            name=str(m.get("name", "custom")),
            hbm_cache_bytes=parse_bytes(m.get("hbm_cache_bytes", 0), f"{p}.hbm_cache_bytes"),
            dram_bytes=parse_bytes(m.get("dram_bytes", 0), f"{p}.dram_bytes"),
            ssd_bytes=parse_bytes(m.get("ssd_bytes", 0), f"{p}.ssd_bytes"),
            gpus_per_node=_num(m, "gpus_per_node", p, 8, lo=1, integer=True),
            gpu_flops=_num(m, "gpu_flops", p, 989e12, lo=0, lo_open=True),
            mfu=_num(m, "mfu", p, 0.4, lo=0, hi=1, lo_open=True),
            gpu_usd_per_hour=_num(m, "gpu_usd_per_hour", p, 3.0, lo=0),
            host_link_bytes_per_s=parse_rate(m.get("host_link_bytes_per_s", 400e9), f"{p}.host_link_bytes_per_s"),
            ssd_read_bytes_per_s=parse_rate(m.get("ssd_read_bytes_per_s", 50e9), f"{p}.ssd_read_bytes_per_s"),
            ssd_read_latency_s=_num(m, "ssd_read_latency_s", p, 100e-6, lo=0),
            ssd_write_bytes_per_s=parse_rate(m.get("ssd_write_bytes_per_s", 25e9), f"{p}.ssd_write_bytes_per_s"),
            ssd=SSDConfig(
                dwpd=_num(ssd, "dwpd", p + ".ssd", 1.0, lo=0, lo_open=True),
                warranty_years=_num(ssd, "warranty_years", p + ".ssd", 5.0, lo=0, lo_open=True),
                waf=_num(ssd, "waf", p + ".ssd", 1.0, lo=1.0),
                usd_per_tb=_num(ssd, "usd_per_tb", p + ".ssd", 330.0, lo=0),
                **_ftl_settings(ssd, p + ".ssd", parse_bytes(m.get("ssd_bytes", 0), f"{p}.ssd_bytes")),
            ),
        )


def _ftl_settings(ssd: Mapping, prefix: str, ssd_bytes: int) -> dict:
    """``hardware.ssd.{ftl, overprovision, erase_block_bytes, streams}``, checked together: with
    ``ftl=greedy`` the WAF is measured, so ``waf`` must stay 1, and the drive must have enough
    spare erase blocks for garbage collection to always free one (cluster_sim/ftl.py)."""
    from .ftl import FTL_MODES, STREAM_MODES, auto_erase_block_bytes, check_geometry

    ftl = _choice(ssd, "ftl", prefix, FTL_MODES, "ideal")
    op = _num(ssd, "overprovision", prefix, 0.127, lo=0, hi=1, lo_open=True)
    if op >= 1:
        raise ConfigError(f"{prefix}.overprovision", f"must be < 1 (a share of the raw capacity), got {op!r}")
    eb = ssd.get("erase_block_bytes", "auto")
    if eb != "auto":
        eb = parse_bytes(eb, f"{prefix}.erase_block_bytes")
        if eb <= 0:
            raise ConfigError(f"{prefix}.erase_block_bytes", f"must be a positive size or auto, got {eb!r}")
    streams = _choice(ssd, "streams", prefix, STREAM_MODES, "none")
    if ftl == "greedy":
        waf = ssd.get("waf", 1.0)
        if parse_number(f"{prefix}.waf", waf) != 1.0:
            raise ConfigError(f"{prefix}.waf", f"is the assumed write amplification of ftl=ideal; with ftl=greedy "
                                               f"it is measured, so leave it at 1 (got {waf!r})")
        if ssd_bytes > 0:
            check_geometry(ssd_bytes, op, auto_erase_block_bytes(ssd_bytes) if eb == "auto" else eb, streams, prefix)
    return {"ftl": ftl, "overprovision": op, "erase_block_bytes": eb, "streams": streams}


@dataclass(frozen=True)
class WorkloadConfig:
    format: str = "parquet"
    path: str | None = None
    limit_requests: int | None = None
    until_s: float | None = None
    warmup_s: float = 0.0
    time_scale: float = 1.0
    replays_per_day_scale: float = 1.0
    rechain: str = "auto"                          # auto | always | never (cluster_sim.trace.rechain)
    options: dict = field(default_factory=dict)   # reader / generator specific keys

    _CORE = ("format", "path", "limit_requests", "until_s", "warmup_s", "time_scale", "replays_per_day_scale",
             "rechain")

    @classmethod
    def from_mapping(cls, m: Mapping, prefix: str = "workload") -> "WorkloadConfig":
        fmt = _choice(m, "format", prefix, WORKLOAD_FORMATS, "parquet")
        path = m.get("path")
        if fmt != "synthetic" and not path:
            raise ConfigError(f"{prefix}.path", f"workload.format={fmt} needs a trace file path")
        lim = _num(m, "limit_requests", prefix, None, lo=1, integer=True, allow_none=True)
        until = _num(m, "until_s", prefix, None, lo=0, allow_none=True)
        wl = cls(
            format=fmt, path=None if path is None else str(path), limit_requests=lim, until_s=until,
            warmup_s=_num(m, "warmup_s", prefix, 0.0, lo=0),
            time_scale=_num(m, "time_scale", prefix, 1.0, lo=0, lo_open=True),
            replays_per_day_scale=_num(m, "replays_per_day_scale", prefix, 1.0, lo=0, lo_open=True),
            rechain=_choice(m, "rechain", prefix, RECHAIN_MODES, "auto"),
            options={k: v for k, v in m.items() if k not in cls._CORE},
        )
        from .trace.load import check_workload_options   # reader options, checked before any work
        check_workload_options(wl)
        return wl


@dataclass(frozen=True)
class PolicyConfig:
    name: str = "lru"
    params: dict = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, m: Mapping | str, prefix: str = "policy") -> "PolicyConfig":
        if isinstance(m, str):
            return cls(name=m)
        name = m.get("name")
        if not name:
            raise ConfigError(f"{prefix}.name", "is required")
        return cls(name=str(name), params={k: v for k, v in m.items() if k != "name"})

    def label(self) -> str:
        """A short run label carrying the key parameters, e.g. ``lru_k(k=2)``."""
        if not self.params:
            return self.name
        inner = ",".join(f"{k}={v}" for k, v in sorted(self.params.items()) if not isinstance(v, (dict, list)))
        return f"{self.name}({inner})" if inner else self.name


@dataclass(frozen=True)
class FleetConfig:
    nodes: int = 1
    router: str = "round_robin"
    backend: str = "inprocess"
    ray_workers: int | None = None
    ray_address: str = "local"
    sync: str = "none"
    epoch_s: float = 60.0
    affinity_chunks: int = 2
    node_overrides: dict = field(default_factory=dict)
    kv_balance: float = 1.0
    kv_threshold: float = 0.5
    kv_max_work_ratio: float = 1.2
    inject_failure: dict | None = None

    @classmethod
    def from_mapping(cls, m: Mapping, prefix: str = "fleet") -> "FleetConfig":
        _check_keys(m, {f.name for f in fields(cls)}, prefix)
        nodes = _num(m, "nodes", prefix, 1, lo=1, integer=True)
        over = dict(m.get("node_overrides") or {})
        clean = {}
        for k, v in over.items():
            try:
                i = int(k)
            except (TypeError, ValueError):
                raise ConfigError(f"{prefix}.node_overrides", f"keys must be node indices, got {k!r}") from None
            if not 0 <= i < nodes:
                raise ConfigError(f"{prefix}.node_overrides.{k}", f"node index out of range 0..{nodes - 1}")
            clean[i] = dict(v or {})
        return cls(
            nodes=nodes,
            router=_choice(m, "router", prefix, ROUTERS, "round_robin"),
            backend=_choice(m, "backend", prefix, BACKENDS, "inprocess"),
            ray_workers=_num(m, "ray_workers", prefix, None, lo=1, integer=True, allow_none=True),
            ray_address=m.get("ray_address") or "local",
            sync=_choice(m, "sync", prefix, SYNC_MODES, "none"),
            epoch_s=_num(m, "epoch_s", prefix, 60.0, lo=0, lo_open=True),
            affinity_chunks=_num(m, "affinity_chunks", prefix, 2, lo=1, integer=True),
            node_overrides=clean,
            kv_balance=_num(m, "kv_balance", prefix, 1.0, lo=0),
            kv_threshold=_num(m, "kv_threshold", prefix, 0.5, lo=0, hi=1),
            kv_max_work_ratio=_num(m, "kv_max_work_ratio", prefix, 1.2, lo=1),
            inject_failure=_failure(m.get("inject_failure"), nodes, prefix),
        )


def _failure(v, nodes: int, prefix: str):
    if v in (None, {}):
        return None
    if not isinstance(v, Mapping) or set(v) != {"node", "epoch"}:
        raise ConfigError(f"{prefix}.inject_failure", "expected {node: <index>, epoch: <index>} or null")
    node = _num(v, "node", f"{prefix}.inject_failure", lo=0, hi=nodes - 1, integer=True)
    epoch = _num(v, "epoch", f"{prefix}.inject_failure", lo=0, integer=True)
    return {"node": node, "epoch": epoch}


@dataclass(frozen=True)
class SimConfig:
    model: Any                     # cluster_sim.model.ModelSpec
    hardware: HardwareConfig
    workload: WorkloadConfig
    policy: PolicyConfig
    fleet: FleetConfig
    chunk_tokens: int | str = "auto"
    engine: str = "auto"           # cache.engine: the request-step engine (cluster_sim.engine.resolve)
    seed: int = 0
    summary_path: str | None = None
    output_dir: str | None = None
    tracking: dict = field(default_factory=dict)
    lifetime_cap_years: float = 1000.0
    raw: dict = field(default_factory=dict)   # the resolved mapping, logged as-is

    @classmethod
    def from_mapping(cls, m: Mapping) -> "SimConfig":
        from .model import load_model, model_from_config

        m = dict(m)
        model_m = m.get("model")
        if model_m is None:
            raise ConfigError("model", "is required (e.g. model=qwen3_next_80b_a3b)")
        if isinstance(model_m, str):
            model = load_model(model_m)
        else:
            model = model_from_config(model_m)
        hardware = HardwareConfig.from_mapping(m.get("hardware") or {})
        cache = m.get("cache") or {}
        ct = cache.get("chunk_tokens", "auto")
        if ct != "auto":   # at most int32: a prompt (input_tokens, int32) is never longer
            ct = _num(cache, "chunk_tokens", "cache", lo=1, hi=2**31 - 1, integer=True)
        out = m.get("output") or {}
        metrics = m.get("metrics") or {}
        return cls(
            model=model,
            hardware=hardware,
            workload=WorkloadConfig.from_mapping(m.get("workload") or {}),
            policy=PolicyConfig.from_mapping(m.get("policy") or "lru"),
            fleet=FleetConfig.from_mapping(m.get("fleet") or {}),
            chunk_tokens=ct,
            engine=_choice(cache, "engine", "cache", ENGINES, "auto"),
            seed=_num(m, "seed", "", 0, lo=0, integer=True),
            summary_path=out.get("summary_path"),
            output_dir=out.get("dir"),
            tracking=dict(m.get("tracking") or {}),
            lifetime_cap_years=_num(metrics, "lifetime_cap_years", "metrics", 1000.0, lo=0, lo_open=True),
            raw=_plain(m),
        )

    def hardware_for_node(self, i: int) -> HardwareConfig:
        over = self.fleet.node_overrides.get(i)
        if not over:
            return self.hardware
        base = asdict(self.hardware)
        ssd = dict(base.pop("ssd"))
        ssd.update(over.get("ssd") or {})
        base.update({k: v for k, v in over.items() if k != "ssd"})
        base["ssd"] = ssd
        return HardwareConfig.from_mapping(base, prefix=f"fleet.node_overrides.{i}")


def _plain(x):
    if isinstance(x, Mapping):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x
