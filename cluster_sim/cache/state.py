"""Residency of payloads in one node's tiers, with exact byte accounting.

Payload handles are plain ints: ``p = 2*c`` is chunk ``c``'s FA payload and
``p = 2*c + 1`` its STATE payload. Per-payload data lives in numpy arrays
indexed by handle, so a request's work is a handful of vectorised operations
along its chunk path rather than per-chunk Python objects.

Residency rules (simulation-model §3) are kept with exact per-tier descendant
counts: ``dcnt[t, c]`` is the number of strict descendants of ``c`` whose FA
is resident in tier ``t``; ``dany[c]`` the number resident in any tier. A copy
of FA ``c`` may leave tier ``t`` towards a lower tier only when
``dcnt[t, c] == 0`` (leaf-first within each tier); a last copy may be dropped
only when ``dany[c] == 0`` (prefix closure). Ancestors of a chunk are read as a
slice of the trace's flat chunk array (``anchor``), so an update is one numpy
fancy-indexed add.

Recency is a logical clock (simulation-model §5): every touch takes the next
stamp and is appended to a touch log. :class:`TierLRU` walks that log (sorted by
construction) plus a small heap for payloads that entered a tier without a
touch (demotions), giving least-recent-first candidates in amortised O(1).
"""
from __future__ import annotations

import heapq

import numpy as np

from ._lazy import LazyKernel

HBM, DRAM, SSD = 0, 1, 2
NO_TIER = -1
TIER_NAMES = ("hbm", "dram", "ssd")
BIT = (1, 2, 4)                  # BIT[tier]: the bit of ``res[p]`` saying "resident in that tier"
IN_HBM, IN_DRAM, IN_SSD = BIT
DROP, DEMOTE = 0, 1


# Payload handles (ints or int64 arrays alike): FA of chunk c is 2c, its STATE 2c + 1.
def fa_of(c):
    """The FA handle(s) of chunk(s) ``c``."""
    return 2 * c


def state_of(c):
    """The STATE handle(s) of chunk(s) ``c``."""
    return 2 * c + 1


def chunk_of(p):
    """The chunk(s) of handle(s) ``p``."""
    return p >> 1


def is_state(p):
    """Non-zero for a STATE handle (``p & 1``; an array gives a 0/1 array)."""
    return p & 1


def twin_state(p):
    """The STATE handle of the chunk of handle ``p`` (``p`` itself for a STATE handle)."""
    return p | 1


class CacheState:
    """Residency, sizes, pins and recency of every payload of one node.

    Owned by the node; policies read it and never write it (they return
    decisions, the node moves bytes).
    """

    def __init__(self, parent: np.ndarray, depth: np.ndarray, anchor: np.ndarray, flat: np.ndarray,
                 fa_bytes: int, state_bytes: np.ndarray, capacities: tuple[int, int, int]):
        U = len(parent)
        self.n_chunks = U
        self.parent = parent
        self.depth = depth
        self.anchor = anchor
        self.flat = flat
        self.fa_bytes = int(fa_bytes)
        self.state_bytes = np.asarray(state_bytes, dtype=np.int64)
        # payload sizes, indexed by handle
        self.size = np.empty(2 * U, dtype=np.int64)
        self.size[0::2] = self.fa_bytes
        self.size[1::2] = self.state_bytes
        self.res = np.zeros(2 * U, dtype=np.uint8)
        self.dcnt = [np.zeros(U, dtype=np.int32) for _ in range(3)]
        self.dany = np.zeros(U, dtype=np.int32)
        self.stamp = np.full(2 * U, -1, dtype=np.int64)
        self.pin = np.full(2 * U, -1, dtype=np.int64)
        self.cur = 0                    # sequence number of the request being processed (pins)
        self.cap = [int(c) for c in capacities]
        self.used = [0, 0, 0]
        self.left = [0, 0, 0]           # bytes that left each tier (evicted, moved down, or dropped with an FA)
        self.left_n = [0, 0, 0]         # copies that left each tier
        self.clock = 0                  # next logical stamp
        # touch log: (payload, stamp) appended in stamp order
        self._log_p = np.zeros(1 << 16, dtype=np.int64)
        self._log_s = np.zeros(1 << 16, dtype=np.int64)
        self.log_n = 0
        self.lrus: list[list[TierLRU]] = [[], [], []]
        self.listeners = []   # objects with on_enter/on_leave(tier, p), on_leaf(tier, c), on_global_leaf(c)
        self.leaf_tiers = frozenset((0, 1, 2))   # tiers whose on_leaf events some listener wants
        self._memo_end = None            # leaf_events: where climbs ended, valid when _memo_gen == _memo_g
        self._memo_gen = None
        self._memo_g = 0
        self._mark = None                # _dec_ancestors: chunks of the batch not yet counted (zero between calls)
        self.record_events = False       # stored / removed chunk events for a KV-aware router
        self.ev_stored: list = []
        self.ev_removed: list = []

    # ---- small helpers -------------------------------------------------
    def ancestors(self, c: int) -> np.ndarray:
        a = self.anchor[c]
        return self.flat[a:a + self.depth[c] - 1]

    def nearest_in_tier(self, c: int, bit: int) -> int:
        """The nearest strict ancestor of chunk ``c`` whose FA is in the tier ``bit``, or -1."""
        par = int(self.parent[c])
        if par < 0:
            return -1
        if self.res[fa_of(par)] & bit:
            return par
        anc = self.ancestors(c)
        hit = np.flatnonzero(self.res[fa_of(anc)] & bit)
        return int(anc[hit[-1]]) if len(hit) else -1

    def psize(self, p: int) -> int:
        return int(self.size[p])

    def pinned(self, p: int) -> bool:
        return self.pin[p] == self.cur

    def resident(self, p: int, t: int) -> bool:
        return bool(self.res[p] & BIT[t])

    def fastest_tier(self, p: int) -> int:
        r = int(self.res[p])
        if r & IN_HBM:
            return HBM
        if r & IN_DRAM:
            return DRAM
        if r & IN_SSD:
            return SSD
        return NO_TIER

    def is_last_copy(self, p: int, t: int) -> bool:
        return int(self.res[p]) == BIT[t]

    # ---- recency -------------------------------------------------------
    def touch(self, payloads: np.ndarray) -> None:
        """Give ``payloads`` the next stamps, in the order given (last = most recent)."""
        k = len(payloads)
        if not k:
            return
        s0 = self.clock
        stamps = np.arange(s0, s0 + k, dtype=np.int64)
        self.stamp[payloads] = stamps
        self.clock = s0 + k
        n = self.log_n
        if n + k > len(self._log_p):
            self._grow_log(n + k)
            n = self.log_n
        self._log_p[n:n + k] = payloads
        self._log_s[n:n + k] = stamps
        self.log_n = n + k

    def touch_one(self, p: int) -> None:
        s = self.clock
        self.stamp[p] = s
        self.clock = s + 1
        n = self.log_n
        if n + 1 > len(self._log_p):
            self._grow_log(n + 1)
            n = self.log_n
        self._log_p[n] = p
        self._log_s[n] = s
        self.log_n = n + 1

    def _grow_log(self, need: int) -> None:
        extra = need - self.log_n
        # first drop entries every walker has passed, and stale ones
        self.compact_log()
        if self.log_n + extra <= len(self._log_p) // 2:
            return
        new = max(self.log_n + extra, 2 * len(self._log_p))
        for name in ("_log_p", "_log_s"):
            old = getattr(self, name)
            arr = np.zeros(new, dtype=np.int64)
            arr[:self.log_n] = old[:self.log_n]
            setattr(self, name, arr)

    def compact_log(self) -> None:
        n = self.log_n
        if not n:
            return
        walkers = [w for ws in self.lrus for w in ws]
        frontier = min((w.frontier for w in walkers), default=self.clock)
        lp, ls = self._log_p[:n], self._log_s[:n]
        keep = (ls > frontier) & (self.stamp[lp] == ls)
        m = int(keep.sum())
        if m == n:
            return
        self._log_p[:m] = lp[keep]
        self._log_s[:m] = ls[keep]
        self.log_n = m
        for w in walkers:
            w.pos = int(np.searchsorted(self._log_s[:m], w.frontier, side="right"))

    def new_lru(self, tier: int) -> "TierLRU":
        w = TierLRU(self, tier)
        self.lrus[tier].append(w)
        return w

    # ---- tier moves (scalar) -------------------------------------------
    def add_copy(self, p: int, t: int) -> None:
        """Put a copy of ``p`` in tier ``t`` (caller made room)."""
        was = int(self.res[p])
        self.res[p] = was | BIT[t]
        self.used[t] += int(self.size[p])
        if not is_state(p):
            anc = self.ancestors(chunk_of(p))
            self.dcnt[t][anc] += 1
            if was == 0:
                self.dany[anc] += 1
                if self.record_events:
                    self.ev_stored.append(np.asarray([chunk_of(p)]))
        for w in self.lrus[t]:
            w.note_enter(p)
        for li in self.listeners:
            li.on_enter(t, p)

    def remove_copy(self, p: int, t: int) -> list[tuple[int, int]]:
        """Remove ``p``'s copy from tier ``t``. Returns the (payload, tier) copies removed,
        including STATE copies that lose their FA (STATE residency rule)."""
        if not self.res[p] & BIT[t]:
            return []
        removed = [(p, t)]
        now = int(self.res[p]) & ~BIT[t]
        self.res[p] = now
        self.used[t] -= int(self.size[p])
        self.left[t] += int(self.size[p])
        self.left_n[t] += 1
        for li in self.listeners:
            li.on_leave(t, p)
        if not is_state(p):
            c = chunk_of(p)
            anc = self.ancestors(c)
            self.dcnt[t][anc] -= 1
            if now == 0:
                self.dany[anc] -= 1
                if self.record_events:
                    self.ev_removed.append(np.asarray([c]))
                q = twin_state(p)
                sr = int(self.res[q])
                if sr:
                    for tt in (HBM, DRAM, SSD):
                        if sr & BIT[tt]:
                            self.res[q] &= 7 ^ BIT[tt]
                            self.used[tt] -= int(self.size[q])
                            self.left[tt] += int(self.size[q])
                            self.left_n[tt] += 1
                            removed.append((q, tt))
                            for li in self.listeners:
                                li.on_leave(tt, q)
            if self.listeners:
                if self._batch_leaf:
                    self._deliver_leaf_events(t, np.asarray([c], dtype=np.int64), np.asarray([now == 0]))
                else:
                    self._leaf_events(t, c, now == 0)
        return removed

    def _leaf_events(self, t: int, c: int, gone: bool, memo: dict | None = None) -> None:
        """After chunk ``c``'s FA left tier ``t``: tell listeners which ancestor became a
        leaf in ``t`` (its nearest ancestor in ``t``, if no descendant remains there) and,
        if ``c`` lost its last copy, whether its parent has no resident descendant left.
        ``memo`` (one batch of removals, state unchanged meanwhile) remembers where climbs
        ended, so a removed chain is climbed once, not once per chunk."""
        par = int(self.parent[c])
        if par < 0:
            return
        # every ancestor of the parent counts the parent's descendants in t too: while the
        # parent still has one there, no ancestor can have become a leaf (skips the lookup)
        dc = self.dcnt[t]
        if t in self.leaf_tiers and dc[par] == 0:
            # climb while the ancestor is outside t and has no descendant left in t
            bit = BIT[t]
            res = self.res
            parent = self.parent
            y = par
            seen = []
            while True:
                if memo is not None:
                    m = memo.get(y)
                    if m is not None:
                        y = m
                        break
                if y < 0 or res[fa_of(y)] & bit or dc[y] != 0:
                    break
                seen.append(y)
                if len(seen) == 8:
                    # a long climb (deep chains outside t): the rest at once, vectorised
                    up = self.ancestors(y)                    # root .. y's parent
                    stop = np.flatnonzero(((res[fa_of(up)] & bit) != 0) | (dc[up] != 0))
                    y = int(up[stop[-1]]) if len(stop) else -1
                    break
                y = int(parent[y])
            if memo is not None:
                for x in seen:
                    memo[x] = y
            if y >= 0 and res[fa_of(y)] & bit and dc[y] == 0:
                for li in self.listeners:
                    li.on_leaf(t, y)
        if gone and self.dany[par] == 0 and self.res[fa_of(par)]:
            for li in self.listeners:
                li.on_global_leaf(par)

    @property
    def _batch_leaf(self) -> bool:
        """Leaf events go out in batches (one call per removal) when the only listener takes them."""
        return len(self.listeners) == 1 and hasattr(self.listeners[0], "on_leaf_events")

    def leaf_events(self, t: int, cs: np.ndarray, gone: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The events :meth:`_leaf_events` gives, in the same order, for the FA copies of the
        chunks ``cs`` that left tier ``t`` (``gone``: those that lost their last copy), as arrays
        ``(kinds, chunks)``: kind 0 = ``on_leaf(t, chunk)``, 1 = ``on_global_leaf(chunk)``.
        Compiled (numba) when available: one call per removal instead of one per chunk."""
        if len(cs) == 0:
            return _NO_EVENTS, _NO_EVENTS
        if self._memo_end is None:
            self._memo_end = np.zeros(self.n_chunks, dtype=np.int64)
            self._memo_gen = np.zeros(self.n_chunks, dtype=np.int64)
        self._memo_g += 1
        cs = np.asarray(cs, dtype=np.int64)
        gone = np.asarray(gone, dtype=np.bool_)
        kinds = np.empty(2 * len(cs), dtype=np.int64)
        nodes = np.empty(2 * len(cs), dtype=np.int64)
        n = _leaf_events_kernel()(t in self.leaf_tiers, BIT[t], cs, gone, self.parent, self.res, self.dcnt[t],
                                  self.dany, self._memo_end, self._memo_gen, self._memo_g, kinds, nodes)
        return kinds[:n], nodes[:n]

    def _deliver_leaf_events(self, t: int, cs: np.ndarray, gone: np.ndarray) -> None:
        kinds, nodes = self.leaf_events(t, cs, gone)
        if len(kinds):
            self.listeners[0].on_leaf_events(t, kinds, nodes)

    def remove_copies(self, ps: list[int], t: int) -> list[tuple[int, int]]:
        """Remove the tier-``t`` copies of ``ps`` at once (same result as one by one)."""
        if len(ps) == 1:
            return self.remove_copy(ps[0], t)
        bit = BIT[t]
        arr = np.asarray(ps, dtype=np.int64)
        arr = arr[(self.res[arr] & bit) != 0]
        if not len(arr):
            return []
        arr = np.unique(arr)
        now = self.res[arr] & (7 ^ bit)
        self.res[arr] = now
        gone = int(self.size[arr].sum())
        self.used[t] -= gone
        self.left[t] += gone
        self.left_n[t] += len(arr)
        removed = [(int(p), t) for p in arr.tolist()]
        if self.listeners:
            leave_many = getattr(self.listeners[0], "on_leave_many", None) if len(self.listeners) == 1 else None
            if leave_many is not None:
                leave_many(t, arr)
            else:
                for p, _ in removed:
                    for li in self.listeners:
                        li.on_leave(t, p)
        fa_mask = is_state(arr) == 0
        if fa_mask.any():
            cs = chunk_of(arr[fa_mask])
            self._dec_ancestors(self.dcnt[t], cs)
            lostm = now[fa_mask] == 0
            lost = cs[lostm]
            if len(lost):
                self._dec_ancestors(self.dany, lost)
                if self.record_events:
                    self.ev_removed.append(lost.copy())
            if len(lost):
                qs = state_of(lost)
                sr = self.res[qs]
                qs = qs[sr != 0]
                for q in qs.tolist():
                    r = int(self.res[q])
                    for tt in (HBM, DRAM, SSD):
                        if r & BIT[tt]:
                            self.used[tt] -= int(self.size[q])
                            self.left[tt] += int(self.size[q])
                            self.left_n[tt] += 1
                            removed.append((q, tt))
                            for li in self.listeners:
                                li.on_leave(tt, q)
                    self.res[q] = 0
            if self.listeners:
                if self._batch_leaf:
                    self._deliver_leaf_events(t, cs, lostm)
                else:
                    memo: dict[int, int] = {}
                    for c, gone in zip(cs.tolist(), lostm.tolist()):
                        self._leaf_events(t, c, gone, memo)
        return removed

    def add_copies(self, ps: list[int], t: int) -> None:
        """Add tier-``t`` copies of ``ps`` (none of them in ``t`` yet) at once."""
        if not ps:
            return
        arr = np.asarray(ps, dtype=np.int64)
        was = self.res[arr]
        self.res[arr] = was | BIT[t]
        self.used[t] += int(self.size[arr].sum())
        fa = is_state(arr) == 0
        if fa.any():
            cs = chunk_of(arr[fa])
            self._dec_ancestors(self.dcnt[t], cs, -1)
            born = cs[was[fa] == 0]
            if len(born):
                self._dec_ancestors(self.dany, born, -1)
                if self.record_events:
                    self.ev_stored.append(born.copy())
        for w in self.lrus[t]:
            for p in ps:
                w.note_enter(p)
        for li in self.listeners:
            enter_many = getattr(li, "on_enter_many", None)
            if enter_many is not None:
                enter_many(t, arr)
            else:
                for p in ps:
                    li.on_enter(t, p)

    def _dec_ancestors(self, arr: np.ndarray, cs: np.ndarray, sign: int = 1) -> None:
        """``arr[a] -= sign * #{c in cs: a is a strict ancestor of c}`` for distinct chunks ``cs``.

        Victims usually form a few root-ward chains; each chain is one suffix count
        along the path of its deepest chunk, so the cost is per chain, not per chunk.
        Compiled (numba) when available; the numpy version below is the same sum."""
        if len(cs) > 1 and _dec_anc_kernel() is not None:
            if self._mark is None:
                self._mark = np.zeros(self.n_chunks, dtype=np.uint8)
            _dec_anc_kernel()(arr, np.asarray(cs, dtype=np.int64), sign, self.depth, self.anchor, self.flat,
                              self._mark)
            return
        rest = cs
        while len(rest):
            if len(rest) == 1:
                arr[self.ancestors(int(rest[0]))] -= sign
                return
            d = self.depth[rest]
            deep = int(rest[int(np.argmax(d))])
            a = self.anchor[deep]
            path = self.flat[a:a + self.depth[deep]]          # root .. deep
            on = path[d - 1] == rest
            mask = np.zeros(len(path), dtype=np.int64)
            mask[d[on] - 1] = 1
            below = np.cumsum(mask[::-1])[::-1]
            arr[path[:-1]] -= (sign * below[1:]).astype(arr.dtype)
            rest = rest[~on]

    def ancestors_many(self, cs: np.ndarray) -> np.ndarray:
        """Concatenated ancestor paths of the chunks ``cs`` (duplicates kept)."""
        lens = self.depth[cs] - 1
        total = int(lens.sum())
        if not total:
            return np.zeros(0, dtype=np.int64)
        starts = self.anchor[cs]
        ends = np.cumsum(lens)
        idx = np.repeat(starts - (ends - lens), lens) + np.arange(total, dtype=np.int64)
        return self.flat[idx]

    # ---- tier moves (vectorised along one request path) ------------------
    def add_path_fa(self, t: int, path: np.ndarray, mask: np.ndarray) -> None:
        """Add tier-``t`` copies of the FA payloads ``path[mask]`` (``path`` is a root-first
        chunk path; ``mask`` marks chunks not yet in ``t``). Fresh touches must already
        have been logged, so no walker notification is needed."""
        if not mask.any():
            return
        idx = path[mask]
        fa = fa_of(idx)
        was = self.res[fa]
        self.res[fa] = was | BIT[t]
        self.used[t] += self.fa_bytes * len(idx)
        below = _strict_suffix_count(mask)
        self.dcnt[t][path] += below
        new_any = mask.copy()
        new_any[mask] = was == 0
        if new_any.any():
            self.dany[path] += _strict_suffix_count(new_any)
            if self.record_events:
                self.ev_stored.append(path[new_any].copy())
        self._note_walkers(t, fa)
        for li in self.listeners:
            enter_many = getattr(li, "on_enter_many", None)
            if enter_many is not None:
                enter_many(t, fa)
            else:
                for p in fa.tolist():
                    li.on_enter(t, p)

    def _note_walkers(self, t: int, ps: np.ndarray) -> None:
        """Payloads entering tier ``t`` whose touch a walker of that tier already read past
        (while they were not yet in the tier) must be handed to it now."""
        for w in self.lrus[t]:
            if w.frontier >= 0:
                late = ps[self.stamp[ps] <= w.frontier]
                for p in late.tolist():
                    w.note_enter(p)

    def add_state(self, q: int, t: int) -> None:
        self.res[q] |= BIT[t]
        self.used[t] += int(self.size[q])
        for w in self.lrus[t]:
            w.note_enter(q)
        for li in self.listeners:
            li.on_enter(t, q)

    def take_events(self) -> tuple[np.ndarray, np.ndarray]:
        """Chunks whose FA became resident / non-resident since the last call (net of each other)."""
        z = np.zeros(0, dtype=np.int64)
        stored = np.concatenate(self.ev_stored) if self.ev_stored else z
        removed = np.concatenate(self.ev_removed) if self.ev_removed else z
        self.ev_stored, self.ev_removed = [], []
        fa = self.res[0::2]
        stored = np.unique(stored)
        removed = np.unique(removed)
        return stored[fa[stored] != 0], removed[fa[removed] == 0]

    # ---- invariants (tests) --------------------------------------------
    def check_invariants(self) -> None:
        """Assert prefix closure, STATE residency, byte accounting and counter consistency."""
        fa = self.res[0::2]
        st = self.res[1::2]
        par = self.parent
        has_par = par >= 0
        resident = fa != 0
        assert np.all(~resident[has_par] | resident[par[has_par]]), "prefix closure violated"
        assert np.all((st == 0) | resident), "STATE resident without its FA"
        for t in range(3):
            used = int(self.size[(self.res & BIT[t]) != 0].sum())
            assert used == self.used[t], f"tier {TIER_NAMES[t]} bytes {self.used[t]} != recount {used}"
            assert used <= self.cap[t] or self.cap[t] == 0 and used == 0, \
                f"tier {TIER_NAMES[t]} over capacity: {used} > {self.cap[t]}"
        # descendant counters
        U = self.n_chunks
        for t in range(3):
            inb = (fa & BIT[t]) != 0
            exp = np.zeros(U, dtype=np.int64)
            for c in np.flatnonzero(inb):
                exp[self.ancestors(int(c))] += 1
            assert np.array_equal(exp, self.dcnt[t]), f"dcnt[{TIER_NAMES[t]}] inconsistent"
        exp = np.zeros(U, dtype=np.int64)
        for c in np.flatnonzero(resident):
            exp[self.ancestors(int(c))] += 1
        assert np.array_equal(exp, self.dany), "dany inconsistent"


_NO_EVENTS = np.zeros(0, dtype=np.int64)


def _leaf_events_py(want_leaf, bit, cs, gone, parent, res, dc, dany, memo_end, memo_gen, g, kinds, nodes):
    """CacheState._leaf_events over a batch of removed chunks (state unchanged meanwhile), as
    arrays; ``memo_*`` remember where climbs ended (only speed depends on it). Returns the
    number of events written."""
    n = 0
    for i in range(len(cs)):
        c = cs[i]
        par = parent[c]
        if par < 0:
            continue
        if want_leaf and dc[par] == 0:
            y = par
            while True:
                if y >= 0 and memo_gen[y] == g:
                    stop = y
                    y = memo_end[y]
                    break
                if y < 0 or res[2 * y] & bit or dc[y] != 0:
                    stop = y
                    break
                y = parent[y]
            x = par
            while x != stop:
                memo_gen[x] = g
                memo_end[x] = y
                x = parent[x]
            if y >= 0 and res[2 * y] & bit and dc[y] == 0:
                kinds[n] = 0
                nodes[n] = y
                n += 1
        if gone[i] and dany[par] == 0 and res[2 * par]:
            kinds[n] = 1
            nodes[n] = par
            n += 1
    return n


#: the compiled leaf-event kernel (numba), or the interpreted one without numba
_leaf_events_kernel = LazyKernel(_leaf_events_py, _leaf_events_py)


def _dec_anc_py(arr, cs, sign, depth, anchor, flat, mark):
    """``arr[a] -= sign * #{c in cs: a is a strict ancestor of c}`` for distinct chunks ``cs``:
    one climb per root-ward chain, from its deepest chunk, counting the chunks of ``cs`` it
    meets (``mark``: 1 for a chunk of ``cs`` not yet counted; all zero again on return)."""
    n = len(cs)
    d = np.empty(n, dtype=np.int64)
    for k in range(n):
        mark[cs[k]] = 1
        d[k] = -depth[cs[k]]
    order = np.argsort(d)
    for k in order:
        c = cs[k]
        if mark[c] == 0:
            continue
        a = anchor[c]
        cnt = 0
        for i in range(a + depth[c] - 1, a - 1, -1):
            y = flat[i]
            if cnt:
                arr[y] -= sign * cnt
            if mark[y]:
                cnt += 1
                mark[y] = 0


#: the compiled ancestor-count kernel (numba), or None without numba (numpy is used then)
_dec_anc_kernel = LazyKernel(_dec_anc_py, None)


def _strict_suffix_count(mask: np.ndarray) -> np.ndarray:
    """For each position j, the number of True entries at positions > j."""
    cs = np.cumsum(mask[::-1], dtype=np.int64)[::-1]
    out = np.empty(len(mask), dtype=np.int64)
    out[:-1] = cs[1:]
    out[-1] = 0
    return out


class TierLRU:
    """Least-recent-first walk over the payloads resident in one tier.

    ``pop()`` returns the least recent valid ``(stamp, payload)`` and forgets it;
    a caller that does not evict it must ``push_back`` it. Validity (still in the
    tier, not re-touched) is checked lazily at pop time.
    """

    BLOCK = 256

    def __init__(self, state: CacheState, tier: int):
        self.st = state
        self.tier = tier
        self.bit = BIT[tier]
        self.pos = 0                  # next log index to read
        self.frontier = -1            # largest stamp read from the log
        self.buf: list[tuple[int, int]] = []   # valid-looking entries read from the log, in order
        self.bi = 0
        self.heap: list[tuple[int, int]] = []  # out-of-order entries and pushed-back ones

    def note_enter(self, p: int) -> None:
        s = int(self.st.stamp[p])
        if 0 <= s <= self.frontier:
            heapq.heappush(self.heap, (s, p))

    def push_back(self, entry: tuple[int, int]) -> None:
        heapq.heappush(self.heap, entry)

    def _valid(self, s: int, p: int) -> bool:
        st = self.st
        return st.stamp[p] == s and (st.res[p] & self.bit) != 0

    def _refill(self) -> bool:
        st = self.st
        while self.pos < st.log_n:
            a, b = self.pos, min(self.pos + self.BLOCK, st.log_n)
            lp = st._log_p[a:b]
            ls = st._log_s[a:b]
            ok = (st.stamp[lp] == ls) & ((st.res[lp] & self.bit) != 0)
            self.pos = b
            self.frontier = int(ls[-1])
            if ok.any():
                self.buf = list(zip(ls[ok].tolist(), lp[ok].tolist()))
                self.bi = 0
                return True
        return False

    def pop(self) -> tuple[int, int] | None:
        heap = self.heap
        st = self.st
        stamp = st.stamp
        res = st.res
        bit = self.bit
        while True:
            buf = self.buf
            bi = self.bi
            if bi >= len(buf):
                self.buf = []
                self.bi = 0
                self._refill()
                buf = self.buf
                bi = self.bi
            b = buf[bi] if bi < len(buf) else None
            if heap and (b is None or heap[0][0] < b[0]):
                e = heapq.heappop(heap)
            elif b is not None:
                e = b
                self.bi = bi + 1
            else:
                return None
            p = e[1]
            if stamp[p] == e[0] and res[p] & bit:
                return e
