"""``lru``: LRU leaf-first in every tier, write-back to SSD (policies.md §3).

DRAM victims are the least recent DRAM leaves (FA) or STATE payloads, demoted
to SSD (written unless a valid SSD copy exists) when the node has an SSD,
dropped otherwise. The SSD evicts its least recent copies within the residency
rules. Equivalent to LRU-1 / HotPrefix(F=1).
"""
from __future__ import annotations

from ..base import DEMOTE, DRAM, DROP, SSD, Policy, lru_select


class LRUPolicy(Policy):
    name = "lru"

    def bind(self, ctx) -> None:
        super().bind(ctx)
        self.walkers = {DRAM: self.st.new_lru(DRAM), SSD: self.st.new_lru(SSD)}
        self.n_demoted = 0
        self.n_dropped = 0

    def select_victims(self, tier, bytes_needed, now):
        if tier == DRAM:
            action = DEMOTE if self.st.cap[SSD] > 0 else DROP
        else:
            action = DROP
        out = lru_select(self.st, self.walkers[tier], tier, bytes_needed, action)
        if tier == DRAM:
            if action == DEMOTE:
                self.n_demoted += len(out)
            else:
                self.n_dropped += len(out)
        return out

    def counters(self):
        return {"dram_victims_demoted": self.n_demoted, "dram_victims_dropped": self.n_dropped}
