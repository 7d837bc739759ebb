"""``type_aware_lru``: LRU order in every tier; a DRAM victim that is full-attention KV goes down to
the SSD (when the node has one), a linear-attention STATE is dropped instead of written.

This is the interpreted policy: the reference the compiled hooks in ``kernels.py`` must match, run
by ``cache.engine=python`` (and by ``auto`` for small runs). It subclasses the built-in LRU, so it
keeps LRU's walkers and counters, changes one decision (the action of each DRAM victim) and adds one
counter, the bytes of STATE it dropped (``engine.py`` reports the compiled one).
(Gandalf's ``policy.placement=strict`` is the full version of this rule, with write-through.)
"""
from __future__ import annotations

from cluster_sim.policies.base import DEMOTE, DRAM, DROP, SSD, lru_select
from cluster_sim.policies.lru import LRUPolicy


class TypeAwareLRU(LRUPolicy):
    name = "type_aware_lru"
    # no parameters (a policy with some declares a frozen dataclass as ``Params``: see
    # cluster_sim/policies/lru_k for one; every ``policy.<key>`` is then checked like a built-in's)

    @staticmethod
    def _action(p: int) -> int:
        # payload handles: 2c is chunk c's full-attention KV, 2c + 1 its linear-attention STATE
        return DROP if p & 1 else DEMOTE

    def bind(self, ctx) -> None:
        super().bind(ctx)
        self.state_bytes_dropped = 0

    def select_victims(self, tier, bytes_needed, now):
        if tier != DRAM or self.st.cap[SSD] == 0:
            out = super().select_victims(tier, bytes_needed, now)
        else:
            out = lru_select(self.st, self.walkers[DRAM], DRAM, bytes_needed, self._action)
            for _, a in out:
                if a == DEMOTE:
                    self.n_demoted += 1
                else:
                    self.n_dropped += 1
        if tier == DRAM:
            self.state_bytes_dropped += sum(int(self.st.size[p]) for p, a in out if a == DROP and p & 1)
        return out

    def counters(self):
        return {**super().counters(), "state_bytes_dropped": self.state_bytes_dropped}
