"""``oracle_admission``: LRU in every tier, SSD admission in hindsight (policies.md §9.7).

**What it is.** Eviction is exactly :mod:`lru`'s (the same walkers, leaf-first and pin
rules, the same victims in the same order), so any difference from ``lru`` comes from
admission alone. At a DRAM eviction a payload without a valid SSD copy is written to the
SSD only if that copy will serve at least one reuse from the SSD before LRU evicts it
there; otherwise it is dropped. It is the reference for what an admission policy can
reach with LRU eviction: report other policies' lifetimes as a share of its lifetime at
iso-miss. Like ``oracle``, a hindsight *reference*, not a proven bound.

**Construction (passes to a fixed point).** "Before LRU evicts it" depends on the SSD's
own future, which depends on the admission rule itself, so the rule is found by replaying
the node's request stream several times (``policy.passes``, default 4; the node runner does
this before the counted replay, and it counts in ``sim_wall_s``). An *admission event* is
the pair (payload, index of the request that uses it next after the eviction): the same
event in two passes is the same decision about the same future reuse.

* Pass 1 admits every DRAM victim (it is ``lru``) and records, for each admission event,
  whether the copy served a reuse from the SSD before it left the SSD.
* Pass k admits an event unless an earlier pass admitted it and saw it unused; events no
  pass has seen are admitted. It records the outcome of each event it admitted.
* Passes stop early once a pass admitted nothing that went unused (a fixed point); the
  counted replay (the last pass) then has an SSD write-hit fraction of exactly 1.0.
  Otherwise the counted replay is pass ``passes``, and its write-hit fraction says how
  close it came (``policy.oracle_admission.converged`` is 0).

The set of admitted events only shrinks from pass to pass, so the construction always
terminates. It is conservative: an event rejected because it went unused in a crowded
early pass is not retried, although with fewer writes the SSD might have kept it long
enough. Payloads never used again are never written; a victim whose drop would break
prefix closure (its last copy has resident descendants, so it may not be dropped) is
written anyway, as ``lru`` would (``forced_writes``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...cache.state import IN_SSD, chunk_of, fa_of, is_state
from ...settings import setting
from ..base import DEMOTE, DRAM, DROP, SSD, Policy, lru_select
from ..oracle import next_use_tables


@dataclass(frozen=True)
class OracleAdmissionParams:
    passes: int = setting(4, lo=1, integer=True,
                          doc="replays of the node's stream, the counted one included (1 = lru)")


class OracleAdmissionPolicy(Policy):
    name = "oracle_admission"
    Params = OracleAdmissionParams
    needs_future = True
    wants_residency_events = True
    leaf_event_tiers = ()            # only on_enter / on_leave of SSD copies are used

    def __init__(self, params=None, /, **kw):
        super().__init__(params, **kw)
        self.passes = self.params.passes
        self.hindsight_passes = self.passes
        self.labels: dict[int, bool] | None = None     # from the earlier passes (None: admit all)

    def bind(self, ctx) -> None:
        super().bind(ctx)
        st = self.st
        fut = ctx.future
        if fut is None:
            raise ValueError("oracle_admission needs the node's future request stream")
        self.fut = fut
        self.N = len(fut.offsets) - 1
        (self.next_fa, self.nxt_fa_pos, self.next_st, _, self.nxt_st_pos,
         _) = next_use_tables(fut.offsets, fut.flat, st.n_chunks, ctx.model, "path", "path")
        self.walkers = {DRAM: st.new_lru(DRAM), SSD: st.new_lru(SSD)}
        n2 = len(st.res)
        self.adm_key = np.full(n2, -1, dtype=np.int64)   # admission event of each SSD copy (-1: none)
        self.copy_hit = np.zeros(n2, dtype=bool)
        self.outcomes: dict[int, bool] = {}               # this pass: admission event -> used from SSD
        self.c = {"admitted": 0, "rejected_never_used": 0, "rejected_unused_before": 0, "forced_writes": 0}
        self.has_ssd = st.cap[SSD] > 0

    # ---- next uses ---------------------------------------------------------
    def _next_use(self, p: int) -> int:
        c = chunk_of(p)
        return int(self.next_st[c] if is_state(p) else self.next_fa[c])

    def _event(self, p: int) -> int:
        return p * (self.N + 1) + self._next_use(p)

    def on_access(self, payloads, now, meta) -> None:
        j = meta.seq - 1
        a, b = int(self.fut.offsets[j]), int(self.fut.offsets[j + 1])
        path = meta.path
        st = self.st
        # SSD copies that serve this request (the fastest tier holding them is the SSD)
        h = meta.hit_chunks
        if h:
            fa = fa_of(path)[:h]
            served = fa[(st.res[fa] & 7) == 4]
            self.copy_hit[served] = True
            if len(payloads) > len(path):
                q = int(payloads[-1])
                if st.res[q] & 7 == 4:
                    self.copy_hit[q] = True
        if len(path):
            # a payload's next use: the next request whose path passes through its chunk (a
            # STATE too: a request that falls back to a shallower state in a small cache uses
            # it); which of those uses really come from the SSD is what the passes find out
            self.next_fa[path] = self.nxt_fa_pos[a:b]
            self.next_st[path] = self.nxt_st_pos[a:b]

    # ---- SSD copies: admission events and their outcome ----------------------
    def on_enter(self, tier, p) -> None:
        if tier == SSD:
            self.adm_key[p] = self._event(p)
            self.copy_hit[p] = False

    def on_leave(self, tier, p) -> None:
        if tier == SSD and self.adm_key[p] >= 0:
            self.outcomes[int(self.adm_key[p])] = bool(self.copy_hit[p])
            self.adm_key[p] = -1

    def hindsight_outcomes(self) -> dict[int, bool]:
        """Every admission event of this pass and whether its copy served a reuse from the SSD
        (copies still resident count as they stand, as the write-hit fraction does)."""
        out = dict(self.outcomes)
        live = np.flatnonzero(self.adm_key >= 0)
        for p in live.tolist():
            out[int(self.adm_key[p])] = bool(self.copy_hit[p])
        return out

    # ---- decisions -----------------------------------------------------------
    def _why_not(self, p: int) -> str | None:
        """Why DRAM victim ``p`` should not be written (None: write it)."""
        if self.st.res[p] & IN_SSD:
            return None                   # a valid SSD copy: demoting writes nothing
        if self._next_use(p) >= self.N:
            return "rejected_never_used"
        if self.labels is not None and self.labels.get(self._event(p), True) is False:
            return "rejected_unused_before"
        return None

    def _action(self, p: int) -> int:
        return DEMOTE if self._why_not(p) is None else DROP

    def select_victims(self, tier, bytes_needed, now):
        if tier == SSD:
            return lru_select(self.st, self.walkers[SSD], SSD, bytes_needed, DROP)
        if not self.has_ssd:
            return lru_select(self.st, self.walkers[DRAM], DRAM, bytes_needed, DROP)
        out = lru_select(self.st, self.walkers[DRAM], DRAM, bytes_needed, self._action, drop_fallback=DEMOTE)
        res = self.st.res
        for p, a in out:
            if res[p] & IN_SSD:
                continue
            why = self._why_not(p)
            if a == DROP:
                self.c[why] += 1
            else:
                self.c["admitted" if why is None else "forced_writes"] += 1
        return out

    def counters(self):
        return dict(self.c)
