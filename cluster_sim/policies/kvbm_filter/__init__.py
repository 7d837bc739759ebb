"""``kvbm_filter``: NVIDIA Dynamo KVBM's disk-offload frequency filter (policies.md §9.8).

LRU leaf-first in every tier, as ``lru``; only the DRAM -> SSD offload is filtered. Each chunk
(a KVBM block: its sequence hash) has a count in a map:

* a request that references the chunk (``c_1 .. c_m``: hits and the chunks it computes alike,
  once per request) sets its count to 1 when the chunk is not in the map, and doubles it otherwise;
* every ``decay_s`` seconds of trace time (ticks at ``k * decay_s`` from the trace's clock origin)
  every count falls by 1, and counts reaching 0 leave the map;
* when a request leaves more than ``max_entries`` chunks in the map, every count falls by 1 as many
  times as it takes to bring the map to at most ``max_entries`` (upstream's oversize prune, which
  removes the lowest counts first), and the decay clock restarts from that request's time;
* a DRAM victim (an FA copy, or a STATE, by its chunk's count) is written to the SSD iff its chunk's
  count is at least ``threshold``; otherwise it is dropped (the gated walk of the admission-filtered
  baselines, :func:`~cluster_sim.policies.write_through.select_gated`, forced writes included).

Upstream ``FrequencyFilter`` (``lib/llm/src/block_manager/offload/filter.rs``) doubles an i64 that
wraps after 63 doublings; here a count saturates at 2^60 (docs/decisions.md 162). The decay is kept
lazily and exactly: a chunk stores the decay round at which its count reaches 0 (``expiry``), so a
round costs nothing and a count is ``expiry - rounds``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...settings import setting
from ..base import DRAM, HBM, SSD, Policy
from ..write_through import VictimTally, renotify_inserted, select_gated

__all__ = ["KvbmFilterPolicy", "COUNT_CAP"]

#: a count saturates here (upstream's i64 would wrap): 2^60, so that ``rounds + count`` stays in int64
COUNT_CAP = 1 << 60


@dataclass(frozen=True)
class KvbmFilterParams:
    threshold: int = setting(2, lo=1, integer=True, unit="count",
                             doc="a DRAM victim is written to the SSD iff its chunk's count is >= this")
    decay_s: float = setting(600.0, lo=0, lo_open=True, unit="s", doc="every count falls by 1 this often")
    max_entries: int = setting(1_000_000, lo=1, integer=True, unit="chunks",
                               doc="most chunks the count map holds; beyond, every count falls until it fits")


class KvbmFilterPolicy(Policy):
    name = "kvbm_filter"
    Params = KvbmFilterParams
    leaf_event_tiers = ()

    def __init__(self, params=None, /, **kw):
        super().__init__(params, **kw)
        p = self.params
        self.threshold = int(p.threshold)
        self.decay_s = float(p.decay_s)
        self.max_entries = int(p.max_entries)

    def bind(self, ctx) -> None:
        super().bind(ctx)
        st = self.st
        self.src = {DRAM: st.new_lru(DRAM), SSD: st.new_lru(SSD)}
        self.expiry = np.zeros(st.n_chunks, dtype=np.int64)   # the round at which the count reaches 0
        self.rounds = 0                 # decay rounds so far (periodic and oversize)
        self.next_tick = self.decay_s   # the next periodic round, in trace seconds
        self.live_ub = 0                # at least the chunks in the map (exact after each check)
        self.prunes = 0
        self.tally = VictimTally()

    def count(self, c: int) -> int:
        """Chunk ``c``'s count now (0: not in the map)."""
        return max(int(self.expiry[c]) - self.rounds, 0)

    def _clock(self, now: float) -> None:
        while now >= self.next_tick:
            self.rounds += 1
            self.next_tick += self.decay_s

    def on_access(self, payloads, now, meta) -> None:
        self._clock(now)
        D = self.rounds
        chunks = payloads[(payloads & 1) == 0] >> 1
        v = self.expiry[chunks] - D
        new = v <= 0
        v = np.where(new, 1, np.minimum(2 * v, COUNT_CAP))
        self.expiry[chunks] = D + v
        self.live_ub += int(new.sum())
        if self.live_ub > self.max_entries:
            self._oversize(now)

    def _oversize(self, now: float) -> None:
        v = self.expiry - self.rounds
        live = np.sort(v[v > 0])
        if len(live) > self.max_entries:
            k = int(live[len(live) - 1 - self.max_entries])    # rounds until at most max_entries remain
            self.rounds += k
            self.next_tick = now + self.decay_s
            self.prunes += 1
            self.live_ub = int((live > k).sum())
        else:
            self.live_ub = len(live)

    def on_insert(self, payloads, now) -> None:
        renotify_inserted(self.src, self.st, payloads)

    def on_enter(self, tier: int, p: int) -> None:
        if tier != HBM:
            self.src[tier].enter(p)

    def _admit(self, p: int) -> bool:
        return int(self.expiry[p >> 1]) - self.rounds >= self.threshold

    def select_victims(self, tier, bytes_needed, now):
        return select_gated(self, self.src[tier], tier, bytes_needed, self._admit if tier == DRAM else None)

    def counters(self):
        return {**self.tally.as_dict(), "decay_rounds": self.rounds, "oversize_prunes": self.prunes}
