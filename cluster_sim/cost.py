"""One cost model: what time and money a node's work costs (simulation-model §4, §6).

Built once per node from the model's geometry (:class:`~cluster_sim.model.ModelSpec`) and the
node's hardware (:class:`~cluster_sim.config.HardwareConfig`, read by attribute so the core
does not import the settings). The node's request step, Gandalf's scores, the router's backlog
estimate, the fleet's floors and the metrics all price work here, so a policy optimises
exactly what the metrics measure.

Units: seconds, bytes, bytes/s, FLOP, US dollars.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["CostModel"]


@dataclass(frozen=True)
class CostModel:
    model: Any                        # ModelSpec: prefill_flops(start, end), prefill_flops_array
    compute_rate: float               # FLOP/s of one node: gpus x peak FLOP/s x MFU
    gpus: int                         # GPUs per node
    usd_per_gpu_s: float              # a GPU-second of recompute
    usd_per_node_s: float             # a node-second (every GPU of the node busy)
    host_link_bytes_per_s: float      # DRAM -> GPU (and SSD -> GPU after the SSD read)
    ssd_read_bytes_per_s: float
    ssd_read_latency_s: float         # once per request that reads the SSD
    tbw_bytes: float                  # the SSD's rated endurance: DWPD x capacity x 365 x warranty years
    ssd_price_usd: float
    waf: float                        # assumed write amplification (hardware.ssd.waf)

    @classmethod
    def of(cls, model, hw) -> "CostModel":
        """The cost model of a node with hardware ``hw`` serving ``model``."""
        return cls(model=model,
                   compute_rate=hw.gpus_per_node * hw.gpu_flops * hw.mfu,
                   gpus=int(hw.gpus_per_node),
                   usd_per_gpu_s=hw.gpu_usd_per_hour / 3600.0,
                   usd_per_node_s=hw.gpu_usd_per_hour * hw.gpus_per_node / 3600.0,
                   host_link_bytes_per_s=hw.host_link_bytes_per_s,
                   ssd_read_bytes_per_s=hw.ssd_read_bytes_per_s,
                   ssd_read_latency_s=hw.ssd_read_latency_s,
                   tbw_bytes=hw.tbw_bytes,
                   ssd_price_usd=hw.ssd_price_usd,
                   waf=hw.ssd.waf)

    # ---- compute
    def prefill_s(self, start_tok: int, end_tok: int) -> float:
        """Node-seconds to prefill tokens ``start_tok .. end_tok`` given the prefix before them."""
        return self.model.prefill_flops(start_tok, end_tok) / self.compute_rate

    def request_recompute(self, reused_tokens: int, input_tokens: int) -> tuple[float, int]:
        """``(FLOPs, tokens)`` a request recomputes after reusing ``reused_tokens`` of its
        ``input_tokens``; a whole reuse still computes the last token (no tokens counted)."""
        if reused_tokens < input_tokens:
            return self.model.prefill_flops(reused_tokens, input_tokens), input_tokens - reused_tokens
        return (self.model.prefill_flops(input_tokens - 1, input_tokens) if input_tokens > 0 else 0.0), 0

    def request_recompute_array(self, reused_tokens: np.ndarray, input_tokens: np.ndarray
                                ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`request_recompute` of many requests (float64 FLOPs, int64 tokens), element for
        element the same numbers."""
        reused = np.asarray(reused_tokens, dtype=np.int64)
        inp = np.asarray(input_tokens, dtype=np.int64)
        part = reused < inp
        flops = self.model.prefill_flops_array(np.where(part, reused, np.maximum(inp - 1, 0)), inp)
        flops[~part & (inp <= 0)] = 0.0
        return flops, np.where(part, inp - reused, 0)

    def gpu_seconds(self, flops: float) -> float:
        """GPU-seconds of ``flops`` on this node (every GPU busy for the node-seconds)."""
        return flops / self.compute_rate * self.gpus

    # ---- loads
    def dram_load_s(self, nbytes: float) -> float:
        """Seconds to bring ``nbytes`` from host DRAM to the GPUs."""
        return nbytes / self.host_link_bytes_per_s

    def ssd_load_s(self, nbytes: float) -> float:
        """Seconds to bring ``nbytes`` from the SSD to the GPUs (one read latency, the read, the link)."""
        return self.ssd_read_latency_s + nbytes / self.ssd_read_bytes_per_s + nbytes / self.host_link_bytes_per_s

    def serve_latency_s(self, dram_bytes: int, ssd_bytes: int, rec_flops: float) -> float:
        """A request's load latency: DRAM loads, recompute, then the SSD loads if any (§4)."""
        latency = self.dram_load_s(dram_bytes) + rec_flops / self.compute_rate
        if ssd_bytes:
            latency += ssd_bytes / self.ssd_read_bytes_per_s + ssd_bytes / self.host_link_bytes_per_s \
                + self.ssd_read_latency_s
        return latency

    def serve_latency_array(self, dram_bytes: np.ndarray, ssd_bytes: np.ndarray, rec_flops: np.ndarray) -> np.ndarray:
        """:meth:`serve_latency_s` of many requests, element for element the same numbers."""
        lat = np.asarray(dram_bytes) / self.host_link_bytes_per_s + np.asarray(rec_flops) / self.compute_rate
        ssd_bytes = np.asarray(ssd_bytes)
        on = ssd_bytes != 0
        b = ssd_bytes[on]
        lat[on] += b / self.ssd_read_bytes_per_s + b / self.host_link_bytes_per_s + self.ssd_read_latency_s
        return lat

    # ---- wear
    @property
    def wear_usd_per_byte(self) -> float:
        """Dollars of SSD endurance one written (NAND) byte consumes: price / TBW (0 without SSD)."""
        return self.ssd_price_usd / self.tbw_bytes if self.tbw_bytes > 0 else 0.0

    def wear_usd(self, nand_bytes: float) -> float:
        """Dollars of endurance ``nand_bytes`` of NAND writes consume."""
        return nand_bytes * self.ssd_price_usd / self.tbw_bytes if self.tbw_bytes > 0 else 0.0

    def lifetime_years(self, nand_bytes_per_day: float) -> float:
        """Years until the rated endurance is spent at ``nand_bytes_per_day`` (uncapped; > 0 rate)."""
        return self.tbw_bytes / nand_bytes_per_day / 365.0
