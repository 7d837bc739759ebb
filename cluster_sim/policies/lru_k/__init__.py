"""``lru_k``: LRU-K (O'Neil, O'Neil & Weikum, SIGMOD'93) on three tiers (policies.md §4).

Per payload: ``HIST(p, 1..K)``, the logical times of its last K uncorrelated
references, and ``LAST(p)``, its most recent reference. A reference at ``t`` is
uncorrelated when ``t - LAST(p) > CRP``; it then shifts the history by the
correlated span (``HIST(p, i) = HIST(p, i-1) + LAST(p) - HIST(p, 1)``) and sets
``HIST(p, 1) = t``; any reference sets ``LAST(p) = t``.

* Time: ``HIST`` and ``LAST`` are logical stamps (simulation-model §5: a request
  references ``c_m .. c_1``, then its hit STATE; a STATE it creates is referenced
  when created), so K = 1 orders exactly as ``lru``. ``policy.crp``: ``request``
  (default; one reference per request) or seconds, compared with ``now``.
* Eviction in DRAM and in the SSD: the leaf (any STATE) with the largest backward
  K-distance ``t - HIST(p, K)``, i.e. the smallest ``HIST(p, K)``; payloads with
  fewer than K references (infinite distance) first, ties by LRU on ``HIST(p, 1)``,
  then by id. Payloads referenced within the CRP (with ``request``: by the request
  being processed) are taken only when nothing else can be.
* SSD admission: a DRAM victim is written to the SSD iff it has K uncorrelated
  references (ghost history included); otherwise it is dropped (write-back
  otherwise, as ``lru``). K = 1 is ``lru``.
* Ghost history (retained information): the history of a payload that left every
  tier is kept, oldest-departed forgotten first, while the ghosts number at most
  ``policy.ghost`` times the payloads the cache holds: the resident payloads, or,
  while fewer are resident, the tiers' capacity in FA chunks
  (``(HBM + DRAM + SSD bytes) // FA chunk bytes``). Bounding by the residents alone
  starves the filter: while it admits little the SSD stays nearly empty, the ghosts
  cover only the DRAM's turnover, and a chunk reused after a longer gap is never seen
  twice (on Mooncake at DRAM 1% of the working set, LRU-2 then wrote nothing at all).

Keys only grow while a payload stays resident, so each tier keeps a lazy heap
re-keyed when an outdated entry reaches the top (:class:`KeyedTierHeap`).
"""
from __future__ import annotations

import heapq
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from ...cache.state import BIT, is_state
from ...settings import setting
from ..base import DRAM, HBM, SSD, Policy
from ..write_through import VictimTally, select_gated

__all__ = ["LRUKPolicy", "KeyedTierHeap"]


class KeyedTierHeap:
    """Least-key-first walk over the payloads resident in one tier.

    ``key(p) -> (k1, k2)`` must never decrease while ``p`` stays in the tier. Every
    entry into the tier pushes ``(k1, k2, p)`` with the current key (the payload's
    canonical entry); an entry that is not canonical or whose payload left the tier
    is stale; a canonical entry whose key has grown is re-pushed with its new key
    when it reaches the top. Same interface as :class:`~cluster_sim.cache.state.TierLRU`
    (``pop`` / ``push_back``) so :func:`~.write_through.gated_select` walks either.
    """

    __slots__ = ("st", "bit", "key", "h", "canon", "slack")

    def __init__(self, st, tier: int, key, slack: int = 4096):
        self.st = st
        self.bit = BIT[tier]
        self.key = key
        self.h: list[tuple] = []
        self.canon: dict[int, tuple] = {}
        self.slack = slack

    def enter(self, p: int) -> None:
        k = self.key(p)
        self.canon[p] = k
        heapq.heappush(self.h, (k[0], k[1], p))
        if len(self.h) > 2 * len(self.canon) + self.slack:
            self._rebuild()

    def push_back(self, e) -> None:
        heapq.heappush(self.h, e)

    def pop(self):
        h = self.h
        canon = self.canon
        res = self.st.res
        bit = self.bit
        key = self.key
        while h:
            e = heapq.heappop(h)
            p = e[2]
            c = canon.get(p)
            if c is None or c[0] != e[0] or c[1] != e[1]:
                continue
            if not res[p] & bit:
                del canon[p]
                continue
            k = key(p)
            if k != c:
                canon[p] = k
                heapq.heappush(h, (k[0], k[1], p))
                continue
            return e
        return None

    def _rebuild(self) -> None:
        res = self.st.res
        bit = self.bit
        canon = {p: k for p, k in self.canon.items() if res[p] & bit}
        self.canon = canon
        self.h = [e for e in self.h if canon.get(e[2]) == (e[0], e[1])]
        heapq.heapify(self.h)


@dataclass(frozen=True)
class LRUKParams:
    k: int = setting(2, lo=1, hi=16, integer=True, doc="1 = lru")
    crp: float | str = setting("request", words=("request",), lo=0, unit="s",
                               expect="'request' or a number of seconds >= 0",
                               doc="correlated-reference period: 'request' (one reference per request) or seconds")
    ghost: float = setting(1.0, lo=0, doc="ghost histories kept, as a multiple of the resident payloads")


class LRUKPolicy(Policy):
    name = "lru_k"
    Params = LRUKParams
    wants_residency_events = True
    leaf_event_tiers = ()          # no on_leaf

    def __init__(self, params=None, /, **kw):
        super().__init__(params, **kw)
        p = self.params
        self.K = p.k
        self.crp = None if p.crp == "request" else p.crp
        self.ghost = p.ghost

    def bind(self, ctx) -> None:
        super().bind(ctx)
        st = self.st
        n2 = 2 * st.n_chunks
        self.hist = np.full((n2, self.K), -1, dtype=np.int64)
        self.last_stamp = np.full(n2, -1, dtype=np.int64)
        self.last_seq = np.zeros(n2, dtype=np.int64)          # request of LAST (crp=request)
        self.last_t = np.full(n2, -np.inf)                    # time of LAST (crp in seconds)
        self.mine = bytearray(n2)                              # resident somewhere
        self.n_res = 0
        self.cap_payloads = sum(st.cap) // max(st.fa_bytes, 1)   # the tiers' capacity in FA chunks
        self.ghosts: OrderedDict[int, None] = OrderedDict()
        self.pending: list[int] = []                           # referenced while not resident
        self.seq = 0
        self.now = 0.0
        self.heaps = {DRAM: KeyedTierHeap(st, DRAM, self._key), SSD: KeyedTierHeap(st, SSD, self._key)}
        self.tally = VictimTally()
        self.n_refs = 0
        self.n_uncorrelated = 0
        self.n_ghost_hits = 0
        self.n_forgotten = 0

    # ---- history ---------------------------------------------------------------
    def _key(self, p: int) -> tuple[int, int]:
        row = self.hist[p]
        return int(row[-1]), int(row[0])

    def _reference(self, P: np.ndarray, now: float, seq: int) -> None:
        S = self.st.stamp[P]
        if self.crp is None:
            unc = self.last_seq[P] != seq
        else:
            unc = (now - self.last_t[P]) > self.crp
        U = P[unc] if not unc.all() else P
        if len(U):
            if self.K > 1:
                H = self.hist[U]
                older = H[:, :-1]
                if self.crp is not None:
                    shift = self.last_stamp[U] - H[:, 0]
                    shift[H[:, 0] < 0] = 0
                    older = np.where(older >= 0, older + shift[:, None], -1)
                self.hist[U, 1:] = older
            self.hist[U, 0] = S[unc] if len(U) != len(P) else S
            self.n_uncorrelated += len(U)
        self.n_refs += len(P)
        self.last_stamp[P] = S
        self.last_seq[P] = seq
        self.last_t[P] = now

    def _forget(self, p: int) -> None:
        self.hist[p] = -1
        self.last_stamp[p] = -1
        self.last_seq[p] = 0
        self.last_t[p] = -np.inf
        self.n_forgotten += 1

    def _trim_ghosts(self) -> None:
        cap = self.ghost * max(self.n_res, self.cap_payloads)
        g = self.ghosts
        while len(g) > cap:
            p, _ = g.popitem(last=False)
            self._forget(p)

    # ---- policy calls ------------------------------------------------------------
    def tick(self, now) -> None:
        self.now = now
        if self.pending:
            mine = self.mine
            g = self.ghosts
            for p in self.pending:
                if not mine[p]:
                    g[p] = None
            self.pending = []
            self._trim_ghosts()

    def on_access(self, payloads, now, meta) -> None:
        self.seq = meta.seq
        self.now = now
        res = self.st.res[payloads]
        absent = payloads[res == 0]
        if len(absent):
            self.n_ghost_hits += int((self.hist[absent, 0] >= 0).sum())
            g = self.ghosts
            for p in absent.tolist():
                g.pop(p, None)
                self.pending.append(p)
        self._reference(payloads, now, meta.seq)

    def on_insert(self, payloads, now) -> None:
        self._reference(payloads, now, self.seq)   # new STATEs; new FA were referenced in on_access

    def on_enter(self, tier: int, p: int) -> None:
        if not self.mine[p]:
            self.mine[p] = 1
            self.n_res += 1
            self.ghosts.pop(p, None)
        if tier != HBM:
            self.heaps[tier].enter(p)

    def on_leave(self, tier: int, p: int) -> None:
        if self.mine[p]:
            res = self.st.res
            if res[p] == 0 or (is_state(p) and res[p ^ 1] == 0):
                self.mine[p] = 0
                self.n_res -= 1
                self.ghosts[p] = None
                self._trim_ghosts()

    def _admit(self, p: int) -> bool:
        return self.hist[p, -1] >= 0

    def _defer(self, p: int) -> bool:
        if self.crp is None:
            return self.last_seq[p] == self.seq
        return self.now - self.last_t[p] <= self.crp

    def select_victims(self, tier, bytes_needed, now):
        self.now = now
        return select_gated(self, self.heaps[tier], tier, bytes_needed,
                            self._admit if tier == DRAM else None, self._defer)

    def counters(self):
        d = {"references": self.n_refs, "uncorrelated_references": self.n_uncorrelated,
             "ghost_hits": self.n_ghost_hits, "ghosts": len(self.ghosts), "histories_forgotten": self.n_forgotten}
        d.update(self.tally.as_dict())
        return d
