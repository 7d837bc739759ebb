"""Per-node statistics that merge exactly, and the derived metrics of
simulation-model §6 (names are part of the contract).

Counters are plain ints/floats; latency samples are kept exactly (float64
arrays) so fleet quantiles are computed over the concatenated samples and never
averaged. Derived figures (lifetime, cost) are computed once, from merged
counters, by :func:`derive`.
"""
from __future__ import annotations

import math
import dataclasses
from dataclasses import dataclass, field

import numpy as np

from .cost import CostModel

TIERS = ("hbm", "dram", "ssd")
KINDS = ("fa", "state")
FTL_COUNTERS = ("ssd_bytes_written_nand", "ssd_bytes_relocated_fa", "ssd_bytes_relocated_state",
                "ssd_blocks_erased")


@dataclass
class NodeStats:
    requests: int = 0
    chunks_requested: int = 0
    chunk_misses: int = 0
    prompt_tokens: int = 0
    recomputed_tokens: int = 0
    recompute_gpu_seconds: float = 0.0
    ssd_bytes_written_fa: int = 0
    ssd_bytes_written_state: int = 0
    ssd_admissions_fa: int = 0
    ssd_admissions_state: int = 0
    ssd_admissions_hit_fa: int = 0
    ssd_admissions_hit_state: int = 0
    insert_skipped_bytes: int = 0
    # the flash translation layer (hardware.ssd.ftl=greedy; 0 with ideal): NAND bytes written
    # (host + garbage-collection relocations), relocated bytes by payload kind, blocks erased
    ssd_bytes_written_nand: int = 0
    ssd_bytes_relocated_fa: int = 0
    ssd_bytes_relocated_state: int = 0
    ssd_blocks_erased: int = 0
    hits: dict = field(default_factory=lambda: {f"hits_{t}_{k}": 0 for t in TIERS for k in KINDS})
    first_arrival_s: float = math.inf
    last_arrival_s: float = -math.inf
    # per counted request, seconds, in request order: appended to while a node replays, a float64
    # array once it has finished
    load_latency: list | np.ndarray = field(default_factory=list)
    ttft: list | np.ndarray = field(default_factory=list)
    policy: dict = field(default_factory=dict)         # policy.<name>.<key> counters

    def __eq__(self, other) -> bool:
        """Field by field, exactly; the per-request samples (a list while replaying, an array once
        finished) compare element by element, so a list and an array of the same floats are equal."""
        if not isinstance(other, NodeStats):
            return NotImplemented
        for f in dataclasses.fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if f.name in ("load_latency", "ttft"):
                if not np.array_equal(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)):
                    return False
            elif a != b:
                return False
        return True

    __hash__ = None

    def set_ftl(self, c: dict) -> None:
        """Take a :class:`~cluster_sim.ftl.GreedyFTL`'s counted figures (kind 0 = FA, 1 = STATE)."""
        self.ssd_bytes_written_nand = c["nand_bytes"]
        self.ssd_bytes_relocated_fa = c["relocated_bytes_kind0"]
        self.ssd_bytes_relocated_state = c["relocated_bytes_kind1"]
        self.ssd_blocks_erased = c["erases"]


def merge(stats: list["NodeStats"]) -> "NodeStats":
    """Exact merge in node-index order."""
    out = NodeStats()
    lat, ttft = [], []
    for s in stats:
        for name in ("requests", "chunks_requested", "chunk_misses", "prompt_tokens", "recomputed_tokens",
                     "recompute_gpu_seconds", "ssd_bytes_written_fa", "ssd_bytes_written_state",
                     "ssd_admissions_fa", "ssd_admissions_state", "ssd_admissions_hit_fa",
                     "ssd_admissions_hit_state", "insert_skipped_bytes", *FTL_COUNTERS):
            setattr(out, name, getattr(out, name) + getattr(s, name))
        for k, v in s.hits.items():
            out.hits[k] += v
        out.first_arrival_s = min(out.first_arrival_s, s.first_arrival_s)
        out.last_arrival_s = max(out.last_arrival_s, s.last_arrival_s)
        lat.append(np.asarray(s.load_latency, dtype=np.float64))
        ttft.append(np.asarray(s.ttft, dtype=np.float64))
        for k, v in s.policy.items():
            out.policy[k] = out.policy.get(k, 0) + v
    out.load_latency = np.concatenate(lat) if lat else np.zeros(0)
    out.ttft = np.concatenate(ttft) if ttft else np.zeros(0)
    return out


def _ratio(a: float, b: float) -> float:
    return float(a) / float(b) if b else 0.0


def _q(samples, q: float) -> float:
    if len(samples) == 0:
        return 0.0
    return float(np.quantile(np.asarray(samples, dtype=np.float64), q))


def lifetime_years(hw, written_per_day: float, cap_years: float, nand_per_day: float | None = None) -> float:
    """``tbw / (waf * bytes_per_day) / 365``, or ``tbw / nand_bytes_per_day / 365`` when the NAND
    bytes are measured (``ftl=greedy``); capped at ``cap_years`` (also when nothing is written)."""
    if written_per_day <= 0 or hw.ssd_bytes <= 0:
        return float(cap_years)
    wear = hw.ssd.waf * written_per_day if nand_per_day is None else nand_per_day
    life = CostModel.of(None, hw).lifetime_years(wear)
    return float(min(life, cap_years))


def nand_written(s: NodeStats, hw) -> tuple[float, float | None]:
    """``(ssd_waf, measured NAND bytes)`` of one node: the FTL's figures with ``ftl=greedy``
    (WAF 0 when nothing was written), else the assumed ``hardware.ssd.waf`` and None."""
    written = s.ssd_bytes_written_fa + s.ssd_bytes_written_state
    if hw.ssd.ftl == "greedy":
        return _ratio(s.ssd_bytes_written_nand, written), float(s.ssd_bytes_written_nand)
    return float(hw.ssd.waf), None


def derive(s: NodeStats, hw, *, span_s: float, replays_per_day_scale: float, cap_years: float,
           floor_ratio: float | None = None, floor_gpu_s: float | None = None) -> dict:
    """The §6 metrics of one node (``hw`` its hardware) or of a fleet's merged stats
    (``hw`` then only used for per-node wear figures; fleet-wide wear is done in
    :func:`fleet_metrics`)."""
    written = s.ssd_bytes_written_fa + s.ssd_bytes_written_state
    per_day = _ratio(written * 86400.0, span_s) * replays_per_day_scale
    waf, nand = nand_written(s, hw)
    nand_per_day = None if nand is None else _ratio(nand * 86400.0, span_s) * replays_per_day_scale
    life = lifetime_years(hw, per_day, cap_years, nand_per_day)
    cost = CostModel.of(None, hw)
    rec_usd = s.recompute_gpu_seconds * cost.usd_per_gpu_s * _ratio(1000.0, s.requests)
    wear_bytes = written * cost.waf if nand is None else nand
    wear_usd = cost.wear_usd(wear_bytes) * _ratio(1000.0, s.requests)
    adm = s.ssd_admissions_fa + s.ssd_admissions_state
    out = {
        "requests": s.requests,
        "trace_span_s": float(span_s),
        "chunk_miss_ratio": _ratio(s.chunk_misses, s.chunks_requested),
        "token_miss_ratio": _ratio(s.recomputed_tokens, s.prompt_tokens),
        "miss_ratio_floor": float(floor_ratio) if floor_ratio is not None else 0.0,
        "ssd_bytes_written": int(written),
        "ssd_bytes_written_fa": int(s.ssd_bytes_written_fa),
        "ssd_bytes_written_state": int(s.ssd_bytes_written_state),
        "ssd_bytes_written_per_day": float(per_day),
        "ssd_write_hit_fraction": _ratio(s.ssd_admissions_hit_fa + s.ssd_admissions_hit_state, adm),
        "ssd_write_hit_fraction_fa": _ratio(s.ssd_admissions_hit_fa, s.ssd_admissions_fa),
        "ssd_write_hit_fraction_state": _ratio(s.ssd_admissions_hit_state, s.ssd_admissions_state),
        "ssd_waf": float(waf),
        "ssd_bytes_written_nand": int(round(wear_bytes)),
        "ssd_bytes_relocated_fa": int(s.ssd_bytes_relocated_fa),
        "ssd_bytes_relocated_state": int(s.ssd_bytes_relocated_state),
        "ssd_blocks_erased": int(s.ssd_blocks_erased),
        "ssd_lifetime_years": life,
        "ssd_lifetime_years_mean": life,
        **{k: int(v) for k, v in s.hits.items()},
        "load_latency_mean_s": float(np.mean(s.load_latency)) if len(s.load_latency) else 0.0,
        "load_latency_p50_s": _q(s.load_latency, 0.5),
        "load_latency_p99_s": _q(s.load_latency, 0.99),
        "ttft_mean_s": float(np.mean(s.ttft)) if len(s.ttft) else 0.0,
        "ttft_p99_s": _q(s.ttft, 0.99),
        "recompute_gpu_seconds": float(s.recompute_gpu_seconds),
        "recompute_gpu_seconds_floor": float(floor_gpu_s) if floor_gpu_s is not None else 0.0,
        "cost_per_1k_requests_usd": float(rec_usd + wear_usd),
        "cost_per_1k_requests_recompute_usd": float(rec_usd),
        "cost_per_1k_requests_wear_usd": float(wear_usd),
        "fleet_ssd_replacement_usd_per_year": _ratio(cost.ssd_price_usd, life) if hw.ssd_bytes > 0 else 0.0,
        "wear_imbalance": 1.0 if written > 0 else 0.0,
        "insert_skipped_bytes": int(s.insert_skipped_bytes),
    }
    for k, v in sorted(s.policy.items()):
        out[k] = v
    return out


def fleet_metrics(per_node: list[dict], node_stats: list[NodeStats], node_hw: list, *, span_s: float,
                  replays_per_day_scale: float, cap_years: float, floor_ratio: float,
                  floor_gpu_s: float) -> dict:
    """Fleet section: counters summed, quantiles over all samples, wear per §6."""
    merged = merge(node_stats)
    base_hw = node_hw[0]
    out = derive(merged, base_hw, span_s=span_s, replays_per_day_scale=replays_per_day_scale,
                 cap_years=cap_years, floor_ratio=floor_ratio, floor_gpu_s=floor_gpu_s)
    # costs: recompute and wear priced per node (nodes may differ), summed, per 1k fleet requests
    rec = sum(n["cost_per_1k_requests_recompute_usd"] * n["requests"] for n in per_node) / 1000.0
    wear = sum(n["cost_per_1k_requests_wear_usd"] * n["requests"] for n in per_node) / 1000.0
    out["cost_per_1k_requests_recompute_usd"] = _ratio(rec * 1000.0, merged.requests)
    out["cost_per_1k_requests_wear_usd"] = _ratio(wear * 1000.0, merged.requests)
    out["cost_per_1k_requests_usd"] = out["cost_per_1k_requests_recompute_usd"] + out["cost_per_1k_requests_wear_usd"]
    out["ssd_bytes_written_per_day"] = float(sum(n["ssd_bytes_written_per_day"] for n in per_node))
    lifes = [n["ssd_lifetime_years"] for n in per_node]
    out["ssd_lifetime_years"] = float(min(lifes)) if lifes else float(cap_years)
    written = [n["ssd_bytes_written"] for n in per_node]
    mean_w = float(np.mean(written)) if written else 0.0
    mean_per_day = _ratio(mean_w * 86400.0, span_s) * replays_per_day_scale
    # NAND bytes and WAF: summed over nodes (each node's own FTL, or its assumed WAF)
    nand = [float(n["ssd_waf"]) * n["ssd_bytes_written"] if hw.ssd.ftl != "greedy" else
            float(st.ssd_bytes_written_nand) for n, st, hw in zip(per_node, node_stats, node_hw)]
    out["ssd_bytes_written_nand"] = int(round(sum(nand)))
    greedy = any(hw.ssd.ftl == "greedy" for hw in node_hw)
    if not greedy and len({hw.ssd.waf for hw in node_hw}) == 1:
        out["ssd_waf"] = float(base_hw.ssd.waf)          # ideal: the assumed WAF, exactly
    else:
        out["ssd_waf"] = _ratio(sum(nand), sum(written))
    mean_nand_per_day = None
    if greedy:
        mean_nand_per_day = _ratio(float(np.mean(nand)) * 86400.0, span_s) * replays_per_day_scale
    out["ssd_lifetime_years_mean"] = lifetime_years(base_hw, mean_per_day, cap_years, mean_nand_per_day)
    out["fleet_ssd_replacement_usd_per_year"] = float(sum(n["fleet_ssd_replacement_usd_per_year"] for n in per_node))
    out["wear_imbalance"] = _ratio(max(written), mean_w) if written else 0.0
    return out
