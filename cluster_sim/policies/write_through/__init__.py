"""``write_through`` and ``write_through_selective`` (policies.md §8), and the
gated write-back selection shared by the admission-filtered baselines.

Write-through (LMCache's default, SGLang HiCache's ``write_through``): every
payload is written to the SSD when it enters DRAM (HBM victims, or new payloads
when HBM is absent), once; DRAM and SSD evict LRU leaf-first. A DRAM victim
whose SSD copy is valid is demoted for free (the DRAM copy goes, the SSD copy
stays).

Write-through-selective (HiCache's ``write_through_selective``,
``policy.threshold``, default 2): a payload's ``hit_count`` is 1 when it is
created (HiCache increments it on insert) plus 1 per request that reuses it
(FA of ``c_1..c_h`` and the STATE at ``c_h``, ``RequestMeta.hit_chunks``); it is
written to the SSD when it is in DRAM without a valid SSD copy and its count is
at least the threshold: on entering DRAM, or on the hit that brings it there.
``threshold = 1`` is ``write_through``.

DRAM victims of both, as in HiCache's eviction: a copy backed up on the SSD is
demoted for free; one whose write is still queued (it entered DRAM in the same
request step) is demoted, which is that write; anything else -- never admitted,
or admitted once but since evicted from the SSD -- is dropped.

:func:`gated_select` is the victim walk of every write-back policy that filters
SSD admissions (``lru_k``, ``hot_prefix``, ``dynamic_random``, the selective
variant here): DEMOTE when the payload has a valid SSD copy or ``admit(p)``,
DROP otherwise. A drop of an FA's last copy needs no descendant resident
anywhere (prefix closure). A rejected candidate that fails that is written anyway
when a descendant lives on the SSD (that admitted copy needs its prefix); when its
descendants are only in HBM it is skipped for now, and only if DRAM cannot be freed
otherwise does a second pass write it. Such writes are "forced" and counted.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from ...cache.state import BIT, IN_DRAM, IN_SSD, chunk_of, fa_of, is_state
from ...settings import setting
from ..base import DEMOTE, DRAM, DROP, SSD, NoParams, Policy, no_victims

__all__ = ["WriteThroughPolicy", "WriteThroughSelectivePolicy", "gated_select", "select_gated",
           "VictimTally", "renotify_inserted"]


# ---- gated write-back victim walk ---------------------------------------------
def gated_select(st, src, tier: int, need: int, admit=None, defer=None, force: bool = False,
                 forced: list | None = None) -> list[tuple[int, int]]:
    """Victims in ``tier`` (DRAM or SSD) freeing at least ``need`` bytes, least first from ``src``.

    ``src`` has ``pop() -> entry | None`` (least first; ``entry[-1]`` is the payload) and
    ``push_back(entry)`` (:class:`~cluster_sim.cache.state.TierLRU` or a keyed heap).
    In DRAM with an SSD present a victim is DEMOTE when it has a valid SSD copy or
    ``admit(p)`` says so, else DROP; without an SSD, and in the SSD, every victim is DROP.
    Rules: never pinned; FA leaf-first in the tier; a dropped last copy of an FA needs no
    descendant resident anywhere. A rejected DRAM candidate that fails this is demoted anyway
    (a "forced" write, appended to ``forced``) when a descendant lives on the SSD -- that
    copy was admitted and needs its prefix, and only SSD eviction would remove it -- and
    skipped otherwise (its descendants are in HBM and will come down through DRAM), or
    demoted too with ``force``. ``defer(p)`` true: the candidate is considered only once
    every other candidate has been. A candidate skipped because of descendants chosen
    later in the same walk is retried as soon as they are. Atomic: returns an empty
    selection and pushes every entry back if ``need`` cannot be freed (with its shortfall,
    as :func:`~.base.lru_select` does, so the node trims the right amount at once).
    """
    bit = BIT[tier]
    gate = tier == DRAM and st.cap[SSD] > 0
    out: list[tuple[int, int]] = []
    taken: list = []
    skipped: dict[int, tuple] = {}
    waiting: dict[int, int] = {}       # chunk -> its FA payload, skipped for descendants
    ready: list = []                   # skipped entries whose descendants got chosen: retried first
    later: list = []                   # deferred entries, in walk order
    li = 0
    phase = 0
    chosen: set[int] = set()
    cred: dict[int, int] = {}
    cred_any: dict[int, int] = {}
    dcnt = st.dcnt[tier]
    dssd = st.dcnt[SSD]
    dany = st.dany
    res = st.res
    parent = st.parent
    pin = st.pin
    cur = st.cur
    size = st.size
    pop = src.pop
    freed = 0
    while freed < need:
        if ready:
            e = heapq.heappop(ready)
        else:
            e = None
            if phase == 0:
                e = pop()
                if e is None:
                    phase = 1
            if e is None:
                if li >= len(later):
                    break
                e = later[li]
                li += 1
        p = e[-1]
        if p in chosen or p in skipped:
            continue                    # a duplicate entry
        if pin[p] == cur:
            skipped[p] = e
            continue
        if phase == 0 and defer is not None and defer(p):
            later.append(e)
            continue
        r = int(res[p])
        if not is_state(p):
            c = chunk_of(p)
            d = int(dcnt[c])
            if d and d != cred.get(c, 0):
                skipped[p] = e
                waiting[c] = p
                continue
        if gate and not r & IN_SSD and admit is not None and not admit(p):
            act = DROP
        elif gate:
            act = DEMOTE
        else:
            act = DROP
        if not is_state(p):
            drop_last = act == DROP and r == bit
            if drop_last:
                da = int(dany[c])
                if da and da != cred_any.get(c, 0):
                    if gate and (force or dssd[c]):
                        act = DEMOTE
                        drop_last = False
                        if forced is not None:
                            forced.append(p)
                    else:
                        skipped[p] = e
                        waiting[c] = p
                        continue
            par = int(parent[c])
            if par >= 0:
                # credit the nearest ancestor in the tier with this chunk's whole tier-subtree
                y = par if res[fa_of(par)] & bit else st.nearest_in_tier(c, bit)
                if y >= 0:
                    cred[y] = cred.get(y, 0) + 1 + d
                    if y in waiting:
                        q = waiting.pop(y)
                        heapq.heappush(ready, skipped.pop(q))
                if drop_last:
                    cred_any[par] = cred_any.get(par, 0) + 1 + int(dany[c])
                    if par in waiting:
                        q = waiting.pop(par)
                        heapq.heappush(ready, skipped.pop(q))
        chosen.add(p)
        taken.append(e)
        out.append((p, act))
        freed += int(size[p])
    push = src.push_back
    for e in skipped.values():
        push(e)
    for e in ready:
        push(e)
    for e in later[li:]:
        push(e)
    if freed < need:
        for e in taken:
            push(e)
        if forced:
            forced.clear()
        return no_victims(need - freed)     # lets the node trim the right amount in one step
    return out


def renotify_inserted(walkers: dict, st, payloads) -> None:
    """Show a policy's :class:`TierLRU` walkers the payloads a request has just created.

    Their touches were logged at the start of the request; if a walker read that part of the
    log while the request's loads made room (before the inserts), it found them not resident
    and passed them, and ``add_path_fa`` does not notify walkers. ``note_enter`` pushes them
    back exactly when the walker has passed their stamp (see the report on ``state.py``)."""
    res = st.res
    for t, w in walkers.items():
        bit = BIT[t]
        for p in payloads.tolist():
            if res[p] & bit:
                w.note_enter(p)


class VictimTally:
    """Counts of DRAM victim decisions (the policies' ``counters()``)."""

    __slots__ = ("written", "written_bytes", "free", "dropped", "dropped_bytes", "forced", "forced_bytes",
                 "ssd_evicted")

    def __init__(self):
        self.written = self.written_bytes = self.free = self.dropped = self.dropped_bytes = 0
        self.forced = self.forced_bytes = self.ssd_evicted = 0

    def add(self, st, tier: int, out, forced=()) -> int:
        """Tally ``out`` (before the node executes it); returns the bytes it will write."""
        if tier != DRAM:
            self.ssd_evicted += len(out)
            return 0
        res = st.res
        size = st.size
        wrote = 0
        fset = set(forced) if forced else ()
        for p, a in out:
            s = int(size[p])
            if a == DEMOTE and st.cap[SSD] > 0:
                if res[p] & IN_SSD:
                    self.free += 1
                elif p in fset:
                    self.forced += 1
                    self.forced_bytes += s
                    wrote += s
                else:
                    self.written += 1
                    self.written_bytes += s
                    wrote += s
            else:
                self.dropped += 1
                self.dropped_bytes += s
        return wrote

    def as_dict(self) -> dict:
        return {"dram_victims_written": self.written, "dram_victims_written_bytes": self.written_bytes,
                "dram_victims_on_ssd": self.free, "dram_victims_dropped": self.dropped,
                "dram_victims_dropped_bytes": self.dropped_bytes, "forced_writes": self.forced,
                "forced_write_bytes": self.forced_bytes, "ssd_victims": self.ssd_evicted}


def select_gated(policy, src, tier: int, need: int, admit=None, defer=None) -> list[tuple[int, int]]:
    """:func:`gated_select`, then the forced pass if the strict one cannot free ``need``; tallied."""
    st = policy.st
    forced: list[int] = []
    out = gated_select(st, src, tier, need, admit, defer, forced=forced)
    if not out and tier == DRAM and st.cap[SSD] > 0:
        out = gated_select(st, src, tier, need, admit, defer, force=True, forced=forced)
    policy.tally.add(st, tier, out, forced)
    return out


# ---- the policies -------------------------------------------------------------------
@dataclass(frozen=True)
class WriteThroughSelectiveParams:
    threshold: int = setting(2, lo=1, integer=True, unit="hits",
                             doc="written to the SSD once its hit_count (1 at creation + 1 per reusing request) "
                                 "reaches this while in DRAM")


class WriteThroughSelectivePolicy(Policy):
    """HiCache ``write_through_selective`` on the DRAM -> SSD edge (see the module docstring)."""

    name = "write_through_selective"
    Params = WriteThroughSelectiveParams
    wants_residency_events = True

    def __init__(self, params=None, /, **kw):
        super().__init__(params, **kw)
        self.threshold = self.params.threshold

    def bind(self, ctx) -> None:
        super().bind(ctx)
        st = self.st
        self.walkers = {DRAM: st.new_lru(DRAM), SSD: st.new_lru(SSD)}
        self.count = np.zeros(2 * st.n_chunks, dtype=np.int64)   # HiCache hit_count
        self.pending: set[int] = set()    # SSD writes requested in this request step, not yet done
        self.tally = VictimTally()
        self.n_requested = 0
        self.n_hits_counted = 0
        self.has_ssd = st.cap[SSD] > 0
        self.has_dram = st.cap[DRAM] > 0

    def _request(self, p: int) -> None:
        if p not in self.pending:
            self.pending.add(p)
            self.n_requested += 1
            self.ctx.request_ssd_admission(p)

    # residency events: creation sets hit_count to 1; entering DRAM may trigger the write
    def on_enter(self, tier: int, p: int) -> None:
        r = int(self.st.res[p])
        if r == BIT[tier]:
            self.count[p] = 1
        if tier == DRAM:
            if not r & IN_SSD and self.has_ssd and self.count[p] >= self.threshold:
                self._request(p)
        elif tier == SSD:
            self.pending.discard(p)

    def on_access(self, payloads, now, meta) -> None:
        h = meta.hit_chunks
        hits = payloads[:h]
        if len(payloads) > len(meta.path):       # the hit STATE is last
            hits = np.append(hits, payloads[-1])
        if not len(hits):
            return
        self.count[hits] += 1
        self.n_hits_counted += len(hits)
        if self.has_ssd and self.has_dram:
            res = self.st.res[hits]
            sel = hits[(self.count[hits] >= self.threshold) & ((res & (IN_DRAM | IN_SSD)) == IN_DRAM)]
            for p in sel.tolist():
                self._request(p)

    def on_insert(self, payloads, now) -> None:
        renotify_inserted(self.walkers, self.st, payloads)

    def tick(self, now) -> None:
        if self.pending:
            self.pending.clear()

    def _admit(self, p: int) -> bool:
        return p in self.pending

    def select_victims(self, tier, bytes_needed, now):
        return select_gated(self, self.walkers[tier], tier, bytes_needed, self._admit if tier == DRAM else None)

    def counters(self):
        d = {"ssd_writes_requested": self.n_requested, "hits_counted": self.n_hits_counted}
        d.update(self.tally.as_dict())
        return d


class WriteThroughPolicy(WriteThroughSelectivePolicy):
    """LMCache / HiCache ``write_through``: written on entering DRAM (threshold 1)."""

    name = "write_through"
    Params = NoParams

    def __init__(self, params=None, /, **kw):
        Policy.__init__(self, params, **kw)
        self.threshold = 1
