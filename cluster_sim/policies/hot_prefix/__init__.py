"""``hot_prefix``: HotPrefix(F) (SIGMOD'25) as an SSD admission filter (policies.md §7).

Heat of a payload = its uncorrelated references, one per request (the request
that creates it counts; a request references ``c_1 .. c_m`` and its hit STATE; a
STATE it creates is referenced when created), optionally decayed with half-life
``policy.half_life_s`` (``heat = heat * 2^(-(t - t_upd) / T) + 1`` on access,
``null`` = no decay: a plain count). Heat belongs to the prefix-tree node, as in
SGLang's tree that HotPrefix is built on: a payload that left every tier starts
from zero when it is created again.

* SSD admission: a DRAM victim is written to the SSD iff its heat at eviction time
  is at least ``policy.f`` (default 2); otherwise it is dropped. F = 1 is ``lru``.
* Eviction in DRAM and in the SSD: ``policy.eviction=lru`` (default) is LRU
  leaf-first, as the F-threshold baseline of the Gandalf evaluation (HotPrefix(1)
  = LRU, policies.md §3); ``heat`` evicts the coldest leaf first (ties LRU), the
  eviction order of policies.md §7.2. Decayed heats compare through the
  time-invariant key ``log2(heat) + t_upd / T``.

The periodic SSD -> DRAM promotion of §7.2 is optional and not modelled (a policy
cannot move payloads up in this simulator).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ... import libm
from ...settings import setting
from ..base import DRAM, HBM, SSD, Policy
from ..lru_k import KeyedTierHeap
from ..write_through import VictimTally, renotify_inserted, select_gated

__all__ = ["HotPrefixPolicy"]


@dataclass(frozen=True)
class HotPrefixParams:
    f: float = setting(2, lo=0, unit="references", doc="a DRAM victim is written to the SSD iff its heat is >= f")
    half_life_s: float | None = setting(None, lo=0, lo_open=True, allow_none=True, unit="s",
                                        doc="heat decays with this half-life; null = plain reference count")
    eviction: str = setting("lru", "choice", choices=("lru", "heat"), doc="heat: coldest leaf first, ties LRU")


class HotPrefixPolicy(Policy):
    name = "hot_prefix"
    Params = HotPrefixParams
    leaf_event_tiers = ()          # no on_leaf

    @classmethod
    def compiled_unsupported(cls, params) -> str | None:
        if params.eviction != "lru":
            return "hot_prefix with policy.eviction=heat is not compiled"
        return super().compiled_unsupported(params)

    def __init__(self, params=None, /, **kw):
        super().__init__(params, **kw)
        p = self.params
        self.F = float(p.f)
        self.T = p.half_life_s
        self.eviction = p.eviction
        self.wants_residency_events = p.eviction == "heat"

    def bind(self, ctx) -> None:
        super().bind(ctx)
        st = self.st
        n2 = 2 * st.n_chunks
        self.heat = np.zeros(n2, dtype=np.float64)
        self.t_upd = np.zeros(n2, dtype=np.float64)
        self.last_seq = np.zeros(n2, dtype=np.int64)
        self.seq = 0
        if self.eviction == "lru":
            self.src = {DRAM: st.new_lru(DRAM), SSD: st.new_lru(SSD)}
        else:
            self.src = {DRAM: KeyedTierHeap(st, DRAM, self._key), SSD: KeyedTierHeap(st, SSD, self._key)}
        self.tally = VictimTally()
        self.now = 0.0

    # ---- heat ----------------------------------------------------------------------
    def _bump(self, P: np.ndarray, now: float) -> None:
        if self.T is None:
            self.heat[P] += 1.0
        else:
            self.heat[P] = self.heat[P] * libm.exp2(-(now - self.t_upd[P]) / self.T) + 1.0
        self.t_upd[P] = now

    def heat_at(self, p: int, now: float) -> float:
        h = float(self.heat[p])
        if self.T is not None and h:
            h *= 2.0 ** (-(now - float(self.t_upd[p])) / self.T)
        return h

    def _key(self, p: int):
        h = float(self.heat[p])
        if self.T is not None and h > 0:
            h = math.log2(h) + float(self.t_upd[p]) / self.T
        elif self.T is not None:
            h = -math.inf
        return h, int(self.st.stamp[p])

    def on_access(self, payloads, now, meta) -> None:
        self.seq = meta.seq
        self.now = now
        fresh = payloads[self.st.res[payloads] == 0]
        if len(fresh):                       # (re)created by this request: a new tree node
            self.heat[fresh] = 0.0
        self._bump(payloads, now)
        self.last_seq[payloads] = meta.seq

    def on_insert(self, payloads, now) -> None:
        if self.eviction == "lru":
            renotify_inserted(self.src, self.st, payloads)
        new = payloads[self.last_seq[payloads] != self.seq]   # STATEs created by this request
        if len(new):
            self.heat[new] = 0.0
            self._bump(new, now)
            self.last_seq[new] = self.seq
            if self.eviction == "heat":     # they entered their tier before their heat was reset
                res = self.st.res
                for q in new.tolist():
                    for t in (DRAM, SSD):
                        if res[q] & (2 if t == DRAM else 4):
                            self.src[t].enter(q)

    def on_enter(self, tier: int, p: int) -> None:
        if tier != HBM:
            self.src[tier].enter(p)

    def _admit(self, p: int) -> bool:
        return self.heat_at(p, self.now) >= self.F

    def select_victims(self, tier, bytes_needed, now):
        self.now = now
        return select_gated(self, self.src[tier], tier, bytes_needed, self._admit if tier == DRAM else None)

    def counters(self):
        return self.tally.as_dict()
