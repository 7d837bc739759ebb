"""Typed, validated configuration. No side effects: nothing here touches disk
except reading a model's published config fields when the model is given by name.

The Hydra app composes ``conf/`` into a plain mapping and hands it to
:func:`SimConfig.from_mapping`; notebooks can do the same with
``cluster_sim.compose([...])``. Every validation error is a
:class:`~cluster_sim.errors.ConfigError` naming the dotted key.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Mapping

from . import settings as _settings
from .errors import ConfigError
from .ftl import FTL_MODES, STREAM_MODES, auto_erase_block_bytes, check_geometry
from .settings import setting
from .engine import ENGINES
from .router import ROUTERS as ROUTER_CLASSES
from .trace.load import READERS
from .trace.rechain import MODES as RECHAIN_CHOICES
from .units import parse_bytes, parse_number, parse_rate

WORKLOAD_FORMATS = READERS          # the trace readers' names (trace.load) are the formats
ROUTERS = tuple(ROUTER_CLASSES)       # the routers' registry (router.ROUTERS)
BACKENDS = ("inprocess", "ray")
SYNC_MODES = ("none", "kv_events")
RECHAIN_MODES = RECHAIN_CHOICES        # workload.rechain


def _num(m: Mapping, key: str, prefix: str, default=None, *, lo=None, hi=None, integer=False, allow_none=False,
         lo_open=False):
    return parse_number(f"{prefix}.{key}" if prefix else key, m.get(key, default), lo=lo, hi=hi,
                        integer=integer, allow_none=allow_none, lo_open=lo_open)


@dataclass(frozen=True)
class SSDConfig:
    """The node's SSDs: endurance, price and the flash translation layer (``hardware.ssd``)."""
    dwpd: float = setting(1.0, lo=0, lo_open=True, unit="drive writes per day", doc="rated endurance")
    warranty_years: float = setting(5.0, lo=0, lo_open=True, unit="years")
    waf: float = setting(1.0, lo=1.0, doc="assumed write amplification of ftl=ideal (ftl=greedy measures it)")
    usd_per_tb: float = setting(330.0, lo=0, unit="$/TB", doc="planning price (models-hardware.md §3.2)")
    ftl: str = setting("ideal", "choice", choices=FTL_MODES,
                       doc="flash translation layer (cluster_sim/ftl.py, decision 44): ideal = WAF is waf; "
                           "greedy = measured")
    overprovision: float = setting(0.127, lo=0, lo_open=True, hi=1, hi_open=True, unit="share of raw NAND",
                                   doc="hidden from the host (greedy only): 15.36 TB (1 DWPD TLC) on 16 TiB of NAND")
    erase_block_bytes: int | str = setting("auto", "bytes", words=("auto",), lo_open=True, unit="bytes",
                                           doc="the GC unit; auto = user capacity / 293.6 (PM9D3a: 13.08 GB "
                                               "reclaim units, 3.84 TB)")
    streams: str = setting("none", "choice", choices=STREAM_MODES,
                           doc="by_kind: FA and STATE in separate erase blocks (NVMe streams / FDP)")

    def check(self, prefix: str) -> None:
        if self.ftl == "greedy" and self.waf != 1.0:
            raise ConfigError(f"{prefix}.waf", f"is the assumed write amplification of ftl=ideal; with ftl=greedy "
                                               f"it is measured, so leave it at 1 (got {self.waf!r})")


@dataclass(frozen=True)
class HardwareConfig:
    """One serving node. Bytes and bytes/s, node aggregates. The defaults are an 8x H100 SXM node with
    8 PCIe 5.0 TLC drives (PM1743 class: 13.0 / 6.6 GB/s each), ../shared/reference/models-hardware.md
    §2-3; the capacities default to 0 (no such tier)."""
    name: str = setting("custom", "text")
    hbm_cache_bytes: int = setting(0, "bytes", unit="bytes", doc="KV share of HBM after weights and activations")
    dram_bytes: int = setting(0, "bytes", unit="bytes")
    ssd_bytes: int = setting(0, "bytes", unit="bytes")
    gpus_per_node: int = setting(8, lo=1, integer=True)
    gpu_flops: float = setting(989e12, lo=0, lo_open=True, unit="FLOP/s per GPU", doc="dense BF16 (H100 SXM)")
    mfu: float = setting(0.4, lo=0, lo_open=True, hi=1, doc="prefill model FLOPs utilisation")
    gpu_usd_per_hour: float = setting(3.0, lo=0, unit="$ per GPU-hour", doc="planning default (H100)")
    host_link_bytes_per_s: float = setting(400e9, "rate", unit="bytes/s",
                                           doc="node aggregate, 8 x PCIe Gen5 x16 (~50 GB/s each)")
    ssd_read_bytes_per_s: float = setting(104e9, "rate", unit="bytes/s", doc="node aggregate: 8 drives x 13 GB/s")
    ssd_read_latency_s: float = setting(100e-6, lo=0, unit="s")
    ssd_write_bytes_per_s: float = setting(52.8e9, "rate", unit="bytes/s", doc="node aggregate: 8 drives x 6.6 GB/s")
    ssd: SSDConfig = setting(kind="section", section=SSDConfig, default_factory=SSDConfig)

    @property
    def tbw_bytes(self) -> float:
        return self.ssd.dwpd * self.ssd_bytes * 365.0 * self.ssd.warranty_years

    @property
    def ssd_price_usd(self) -> float:
        return self.ssd.usd_per_tb * self.ssd_bytes / 1e12

    def check(self, prefix: str) -> None:
        """With ``ftl=greedy`` the drive must have enough spare erase blocks for garbage collection to
        always free one (cluster_sim/ftl.py)."""
        s = self.ssd
        if s.ftl == "greedy" and self.ssd_bytes > 0:
            eb = auto_erase_block_bytes(self.ssd_bytes) if s.erase_block_bytes == "auto" else s.erase_block_bytes
            check_geometry(self.ssd_bytes, s.overprovision, eb, s.streams, prefix + ".ssd")

    @classmethod
    def from_mapping(cls, m: Mapping, prefix: str = "hardware") -> "HardwareConfig":
        return _settings.parse(cls, m, prefix)


@dataclass(frozen=True)
class WorkloadConfig:
    """The request stream (``workload``); reader / generator options of the format go to ``options``
    (checked by :func:`cluster_sim.trace.load.check_workload_options`)."""
    format: str = setting("parquet", "choice", choices=WORKLOAD_FORMATS)
    path: str | None = setting(None, "text", allow_none=True, doc="the trace file (every format but synthetic)")
    limit_requests: int | None = setting(None, lo=1, integer=True, allow_none=True, doc="first N requests")
    until_s: float | None = setting(None, lo=0, allow_none=True, unit="s", doc="requests arriving before this")
    warmup_s: float = setting(0.0, lo=0, unit="s", doc="requests before this are replayed but not counted")
    time_scale: float = setting(1.0, lo=0, lo_open=True, doc="arrival times are multiplied by this")
    replays_per_day_scale: float = setting(1.0, lo=0, lo_open=True,
                                           doc="simulated seconds x this = wall seconds of wear")
    rechain: str = setting("auto", "choice", choices=RECHAIN_MODES,
                           doc="chain block hashes that are not prefix-chained (cluster_sim.trace.rechain)")
    options: dict = setting(kind="any", default_factory=dict)   # reader / generator specific keys

    @classmethod
    def from_mapping(cls, m: Mapping, prefix: str = "workload") -> "WorkloadConfig":
        core = {f.name for f in fields(cls)} - {"options"}
        fmt = _settings.check_value(f"{prefix}.format", _settings.spec_of(fields(cls)[0]), m.get("format", "parquet"))
        if fmt != "synthetic" and not m.get("path"):
            raise ConfigError(f"{prefix}.path", f"workload.format={fmt} needs a trace file path")
        wl = _settings.parse(cls, {k: v for k, v in m.items() if k in core}, prefix)
        wl = replace(wl, options={k: v for k, v in m.items() if k not in core})
        from .trace.load import check_workload_options   # reader options, checked before any work
        check_workload_options(wl)
        return wl


@dataclass(frozen=True)
class PolicyConfig:
    """``policy``: the registered policy ``name`` and its parameters. ``params`` holds the keys as
    given (for labels and logs); ``settings`` is the policy's typed parameter dataclass, validated
    once here (:func:`cluster_sim.policies.base.parse_params`)."""
    name: str = "lru"
    params: dict = field(default_factory=dict)
    settings: Any = None

    @classmethod
    def from_mapping(cls, m: Mapping | str, prefix: str = "policy") -> "PolicyConfig":
        from .policies.base import parse_params

        if isinstance(m, str):
            m = {"name": m}
        name = m.get("name")
        if not name:
            raise ConfigError(f"{prefix}.name", "is required")
        if m.get("_target_") is not None:           # a class of the user's own, by its import path
            from .policies.base import register_target
            register_target(str(name), m["_target_"])
        params = {k: v for k, v in m.items() if k not in ("name", "_target_")}
        return cls(name=str(name), params=params, settings=parse_params(str(name), params))

    def label(self) -> str:
        """A short run label carrying the key parameters, e.g. ``lru_k(k=2)``."""
        if not self.params:
            return self.name
        inner = ",".join(f"{k}={v}" for k, v in sorted(self.params.items()) if not isinstance(v, (dict, list)))
        return f"{self.name}({inner})" if inner else self.name


@dataclass(frozen=True)
class FleetConfig:
    """``fleet``: the nodes, the router in front of them and where they run (simulation-model §8)."""
    nodes: int = setting(1, lo=1, integer=True, doc="model replicas, each on hardware.gpus_per_node GPUs")
    router: str = setting("round_robin", "choice", choices=ROUTERS)
    backend: str = setting("inprocess", "choice", choices=BACKENDS, doc="inprocess | ray (nodes as Ray actors)")
    ray_workers: int | None = setting(None, lo=1, integer=True, allow_none=True,
                                      doc="Ray actor processes the nodes are packed into (default: one per node)")
    ray_address: str = setting("local", "text", doc="local | auto | host:port")
    sync: str = setting("none", "choice", choices=SYNC_MODES,
                        doc="kv_events: routers see nodes' stored/removed chunks at barriers")
    epoch_s: float = setting(60.0, lo=0, lo_open=True, unit="s", doc="simulated seconds between barriers")
    affinity_chunks: int = setting(2, lo=1, integer=True,
                                   doc="session_affinity without sessions: hash of the first N full chunks")
    node_overrides: dict = setting(kind="mapping", default_factory=dict,
                                   doc="{<i>: {hardware keys}} makes node i differ")
    kv_balance: float = setting(1.0, lo=0, doc="kv_aware: weight of backlog seconds against recompute saved")
    kv_threshold: float = setting(0.5, lo=0, hi=1,
                                  doc="kv_aware: least share of the prompt's chunks a node must hold to be preferred")
    kv_max_work_ratio: float = setting(1.2, lo=1,
                                       doc="kv_aware: nodes above this x mean dispatched work lose affinity")
    inject_failure: dict | None = setting(None, "any",
                                          doc="{node: i, epoch: e}: the node dies at that epoch (failure tests)")

    @classmethod
    def from_mapping(cls, m: Mapping, prefix: str = "fleet") -> "FleetConfig":
        m = dict(m)
        if m.get("ray_address", "local") is None:
            m["ray_address"] = "local"
        if m.get("node_overrides") is None:
            m.pop("node_overrides", None)
        fl = _settings.parse(cls, m, prefix)
        return replace(fl, node_overrides=_node_overrides(fl.node_overrides, fl.nodes, prefix),
                       inject_failure=_failure(fl.inject_failure, fl.nodes, prefix))


def _node_overrides(over: Mapping, nodes: int, prefix: str) -> dict:
    """``fleet.node_overrides`` by node: a key is a node index (``3``) or an inclusive range of them
    (``32-63``), so a heterogeneous fleet of many nodes is a few lines. A node an index names takes
    the keys of a range covering it and then its own on top; two ranges may not overlap (which
    one wins would be a guess) (decision 81)."""
    key = f"{prefix}.node_overrides"
    spans, singles = [], {}
    for k, v in over.items():
        text = str(k).strip()
        lo_s, dash, hi_s = text.partition("-")
        try:
            lo, hi = (int(lo_s), int(hi_s)) if dash else (int(text), int(text))
        except (TypeError, ValueError):
            raise ConfigError(key, f"keys must be node indices or ranges like 32-63, got {k!r}") from None
        if not 0 <= lo <= hi < nodes:
            raise ConfigError(f"{key}.{k}", f"node index out of range 0..{nodes - 1}" if not dash else
                              f"range {text} is not within 0..{nodes - 1} (low end first)")
        if not isinstance(v, Mapping) and v is not None:
            raise ConfigError(f"{key}.{k}", f"expected a mapping of hardware keys, got {v!r}")
        if dash:
            for a, b, other in spans:
                if lo <= b and a <= hi:
                    raise ConfigError(f"{key}.{k}", f"overlaps the range {other}; give each node one range")
            spans.append((lo, hi, text))
        else:
            singles[lo] = dict(v or {})
    out: dict[int, dict] = {}
    for k, v in over.items():
        if "-" in str(k):
            lo, hi = (int(x) for x in str(k).split("-", 1))
            for i in range(lo, hi + 1):
                out[i] = dict(v or {})
    for i, v in singles.items():
        base = out.get(i, {})
        ssd = {**(base.get("ssd") or {}), **(v.get("ssd") or {})}
        out[i] = {**base, **v, **({"ssd": ssd} if ssd else {})}
    return dict(sorted(out.items()))


def _failure(v, nodes: int, prefix: str):
    if v in (None, {}):
        return None
    if not isinstance(v, Mapping) or set(v) != {"node", "epoch"}:
        raise ConfigError(f"{prefix}.inject_failure", "expected {node: <index>, epoch: <index>} or null")
    node = _num(v, "node", f"{prefix}.inject_failure", lo=0, hi=nodes - 1, integer=True)
    epoch = _num(v, "epoch", f"{prefix}.inject_failure", lo=0, integer=True)
    return {"node": node, "epoch": epoch}


@dataclass(frozen=True)
class CacheSettings:
    """``cache``: how prompts are cut into chunks."""
    chunk_tokens: int | str = setting("auto", words=("auto",), lo=1, hi=2**31 - 1, integer=True, unit="tokens",
                                      doc="auto = the smallest multiple of the block size >= 256, or a whole "
                                          "multiple of the trace's block size (at most int32: a prompt never is "
                                          "longer)")
    engine: str = setting("auto", "choice", choices=ENGINES,
                          doc="the request-step engine: numba (compiled), python (the interpreted reference), "
                              "auto = numba where the policy and settings are supported (decisions 67, 68)")


@dataclass(frozen=True)
class OutputSettings:
    """``output``: where a run's files go."""
    summary_path: str | None = setting(None, "text", allow_none=True, doc="default: <run output dir>/summary.json")
    dir: str | None = setting(None, "text", allow_none=True, doc="default: Hydra's run directory")
    requests: bool = setting(False, "bool", doc="true: requests.parquet, one row per request (latency and TTFT CDFs)")


@dataclass(frozen=True)
class MetricsSettings:
    """``metrics``."""
    lifetime_cap_years: float = setting(1000.0, lo=0, lo_open=True, unit="years",
                                        doc="an SSD lifetime longer than this is reported as this")


@dataclass(frozen=True)
class TrackingSettings:
    """``tracking``: MLflow (cluster_sim.tracking checks the store before a run)."""
    enabled: bool = setting(True, "bool", doc="the command line logs to MLflow (cluster_sim.run never does)")
    uri: str = setting("sqlite:///mlflow_runs/mlflow.db", "text", doc="relative to the directory the command runs from")
    experiment: str = setting("cluster_sim", "text", doc="one experiment per study: the experiment configs set it")
    artifact_root: str | None = setting(None, "text", allow_none=True,
                                        doc="default: artifacts/ beside a SQLite database")


@dataclass(frozen=True)
class SweepSettings:
    """``sweep``: ``cluster-sim -m`` (docs/sweeps.md)."""
    resume: bool = setting(False, "bool", doc="skip points with a FINISHED run of the same config hash")
    max_parallel: int | None = setting(None, lo=1, integer=True, allow_none=True, doc="points in flight at once")
    progress: bool | str = setting("auto", "bool", words=("auto",),
                                   doc="auto: a progress bar on a terminal, quiet in CI / when piped")


@dataclass(frozen=True)
class RaySettings:
    """``ray``: where sweep points run (fleet.ray_address is the fleet backend's own)."""
    address: str = setting("local", "text", doc="local | auto | host:port")
    task_cpus: float = setting(1, lo=0, lo_open=True, doc="CPUs Ray reserves per point")
    ship_package: bool | str = setting("auto", "bool", words=("auto",),
                                       doc="auto: ship this cluster_sim (with conf/) to a cluster joined by "
                                           "address, not to a local one (docs/cluster.md)")


@dataclass(frozen=True)
class ReportSettings:
    """``report``."""
    figures: bool = setting(True, "bool", doc="per-run figures, and the comparison figures at the end of a sweep")


@dataclass(frozen=True)
class PathsSettings:
    """``paths``: where the real traces are (cluster_sim.locations; decision 53)."""
    traces: str = setting("${oc.env:CLUSTER_SIM_TRACES,../shared/traces}", "text",
                          doc="the shared traces (never copied here): $CLUSTER_SIM_TRACES, else ../shared/traces; "
                              "the workload files interpolate ${paths.traces}")


#: top-level sections of the composed config read by a run, and their schema (None: read elsewhere)
SECTIONS = {"model": None, "hardware": HardwareConfig, "workload": WorkloadConfig, "policy": None,
            "fleet": FleetConfig, "cache": CacheSettings, "seed": None, "output": OutputSettings,
            "tracking": TrackingSettings, "sweep": SweepSettings, "ray": RaySettings, "report": ReportSettings,
            "metrics": MetricsSettings, "paths": PathsSettings}


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
    output_requests: bool = False     # output.requests: write requests.parquet
    tracking: dict = field(default_factory=dict)
    lifetime_cap_years: float = 1000.0
    raw: dict = field(default_factory=dict)   # the resolved mapping, logged as-is

    @classmethod
    def from_mapping(cls, m: Mapping) -> "SimConfig":
        from .model import load_model, model_from_config

        m = dict(m)
        for k in m:
            if k not in SECTIONS:
                raise ConfigError(str(k), f"unknown key; known keys here: {', '.join(sorted(SECTIONS))}")
        model_m = m.get("model")
        if model_m is None:
            raise ConfigError("model", "is required (e.g. model=qwen3_next_80b_a3b)")
        if isinstance(model_m, str):
            model = load_model(model_m)
        else:
            model = model_from_config(model_m)
        hardware = HardwareConfig.from_mapping(m.get("hardware") or {})
        cache = _settings.parse(CacheSettings, m.get("cache"), "cache")
        out = _settings.parse(OutputSettings, m.get("output"), "output")
        metrics = _settings.parse(MetricsSettings, m.get("metrics"), "metrics")
        for key in ("tracking", "sweep", "ray", "report"):
            _settings.parse(SECTIONS[key], m.get(key), key)
        return cls(
            model=model,
            hardware=hardware,
            workload=WorkloadConfig.from_mapping(m.get("workload") or {}),
            policy=PolicyConfig.from_mapping(m.get("policy") or "lru"),
            fleet=FleetConfig.from_mapping(m.get("fleet") or {}),
            chunk_tokens=cache.chunk_tokens,
            engine=cache.engine,
            seed=_num(m, "seed", "", 0, lo=0, integer=True),
            summary_path=out.summary_path,
            output_dir=out.dir,
            output_requests=out.requests,
            tracking=dict(m.get("tracking") or {}),
            lifetime_cap_years=metrics.lifetime_cap_years,
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
