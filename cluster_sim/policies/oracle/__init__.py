"""``oracle``: a hindsight reference with Belady eviction and use-aware SSD admission
(policies.md §9.6).

**A hindsight reference, not a bound.** It reads the node's future request
stream (``needs_future``; only this policy may) and decides with it, but its
rules are heuristics on top of that knowledge (Belady is optimal for one tier of
unit-size objects with free choice of victims, not for three tiers, variable
sizes, leaf-first order, pins and a write budget), so a policy may beat it on
some metric. Report it beside the others and say so.

**Next uses.** Request ``j`` of the node is ``RequestMeta.seq − 1``. Next-use
indices are precomputed once with numpy from the future stream:

* an FA payload of chunk ``c`` is used by a future request whose path contains
  ``c`` (``policy.fa_use=path``, default), or — ``policy.fa_use=hit`` — only by
  one that would reuse it: ``c`` lies within the request's resume prefix
  defined below;
* a STATE payload of chunk ``c`` is used by a future request that would resume
  exactly there: ``c`` is on its path and is the deepest chunk of that path
  whose STATE has ever been created up to then, where "ever created" is taken
  from an unbounded-cache replay of the node's stream with the model's
  checkpoint mode (the same pass as ``miss_ratio_floor``). So each request uses
  at most one STATE, the one it would resume from with unbounded tiers
  (``policy.state_use=resume``, default). In a small cache a request may fall
  back to a shallower state than that; ``policy.state_use=path`` counts a STATE
  as used by every later request whose path passes through its chunk (keeps
  more, writes more).

After request ``j`` is matched (``on_access``) the next uses of its path's FA and
of the STATE it uses move to their following use; a payload never used again
has next use ∞.

**Eviction** in DRAM and SSD is Belady within the residency rules: the legal
candidate with the farthest next use leaves first (never-used first; ties by
larger size, then lower payload id). A FA copy may leave a tier only as a leaf of
that tier (a descendant is never used before its ancestor, so this rarely
binds), and a last copy only without resident descendants.

**SSD admission** happens at DRAM eviction. A DRAM victim is written to SSD iff
its next use comes before the time Belady eviction on the SSD would evict it,
computed against the SSD's current contents and their next uses: the free SSD
bytes (less what this eviction call already admits) plus the bytes of SSD
copies used later than the victim (which Belady evicts first) must hold it.
Future admissions are not forecast. Otherwise it is dropped; never-used victims
are dropped. A victim with a valid SSD copy, or with an HBM copy (HBM demotes it
back into DRAM later, when it is decided again), is dropped from DRAM without a
write. A victim that should be dropped but may not be (its last copy has
resident descendants, e.g. stale copies on the SSD, or the request being
processed needs it) is passed over; only if nothing else can free the bytes is
it written after all (``forced_writes``). STATE payloads go to SSD by the same rule
(simulation-model §7: "oracle when it will be hit").
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...cache.hybrid import unbounded_resume_prefix
from ...cache.lazyheap import LazyHeap
from ...cache.state import BIT, IN_DRAM, IN_SSD, chunk_of, fa_of, is_state, state_of
from ...settings import setting
from ..base import DEMOTE, DRAM, DROP, HBM, SSD, Policy, Tentative, no_victims

_TIERS = (DRAM, SSD)
FA_USE_MODES = ("path", "hit")
STATE_USE_MODES = ("resume", "path")


class _Fenwick:
    """Prefix sums of SSD bytes by next-use index (0..n)."""

    __slots__ = ("n", "t", "total")

    def __init__(self, n: int):
        self.n = n + 1
        self.t = [0] * (self.n + 1)
        self.total = 0

    def add(self, i: int, v: int) -> None:
        self.total += v
        i += 1
        t, n = self.t, self.n
        while i <= n:
            t[i] += v
            i += i & -i

    def prefix(self, i: int) -> int:
        """Sum over indices <= i."""
        s = 0
        i += 1
        t = self.t
        while i > 0:
            s += t[i]
            i -= i & -i
        return s


def next_use_tables(offsets: np.ndarray, flat: np.ndarray, n_chunks: int, model, fa_use: str = "path",
                    state_use: str = "resume"):
    """Precompute next uses from a request stream.

    Returns ``(first_fa, nxt_fa_pos, first_st, st_use, nxt_st_req, hinf)``:
    ``first_fa[c]`` = the first request using chunk ``c``'s FA (∞ = number of requests);
    ``nxt_fa_pos[i]`` = for the reference at flat position ``i``, the next request after it
    using that FA; ``st_use[j]`` = the chunk whose STATE request ``j`` uses (-1: none),
    ``nxt_st_req[j]`` its next use after ``j``, ``first_st[c]`` the first; ``hinf[j]`` the
    request's resume prefix length with unbounded tiers."""
    N = len(offsets) - 1
    INF = N
    lens = np.diff(offsets)
    T = int(offsets[-1])
    req = np.repeat(np.arange(N, dtype=np.int64), lens)
    has_state = bool(model.has_state)
    # unbounded-cache replay: resume prefix h of every request, and the STATE it resumes from
    hinf = unbounded_resume_prefix(offsets, flat, n_chunks, model)
    st_use = np.full(N, -1, dtype=np.int64)
    if has_state:
        j = np.flatnonzero(hinf > 0)
        st_use[j] = flat[offsets[j] + hinf[j] - 1]
    # FA: next use after each reference, first use of each chunk
    if fa_use == "hit":
        k = np.arange(T, dtype=np.int64) - offsets[:-1][req]
        use = k < hinf[req]
    else:
        use = np.ones(T, dtype=bool)
    first_fa, nxt_fa_pos = _next_after(flat, req, use, n_chunks, INF)
    if state_use == "path":
        # STATE: used by any later request whose path passes through the chunk (as FA with fa_use=path)
        first_st, nxt_st_pos = _next_after(flat, req, np.ones(T, dtype=bool), n_chunks, INF)
        return first_fa, nxt_fa_pos, first_st, st_use, nxt_st_pos, hinf
    # STATE: uses are (st_use[j], j)
    js = np.flatnonzero(st_use >= 0)
    cs = st_use[js]
    first_st, nxt = _next_after(cs, js, np.ones(len(js), dtype=bool), n_chunks, INF)
    nxt_st_req = np.full(N, INF, dtype=np.int64)
    nxt_st_req[js] = nxt
    return first_fa, nxt_fa_pos, first_st, st_use, nxt_st_req, hinf


def _next_after(keys: np.ndarray, when: np.ndarray, use: np.ndarray, n_keys: int, INF: int):
    """For events (keys[i], when[i]) in non-decreasing ``when`` order: the ``when`` of the next
    event with the same key and ``use`` True after each event, and the first such per key."""
    n = len(keys)
    first = np.full(n_keys, INF, dtype=np.int64)
    nxt = np.full(n, INF, dtype=np.int64)
    if not n:
        return first, nxt
    order = np.argsort(keys, kind="stable")
    ks = keys[order]
    ws = when[order]
    up = np.flatnonzero(use[order])
    if len(up):
        pos = np.searchsorted(up, np.arange(n), side="right")
        ok = pos < len(up)
        cand = np.where(ok, up[np.minimum(pos, len(up) - 1)], 0)
        ok &= ks[cand] == ks
        nxt[order] = np.where(ok, ws[cand], INF)
        starts = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
        pos0 = np.searchsorted(up, starts, side="left")
        ok0 = pos0 < len(up)
        cand0 = np.where(ok0, up[np.minimum(pos0, len(up) - 1)], 0)
        ok0 &= ks[cand0] == ks[starts]
        first[ks[starts]] = np.where(ok0, ws[cand0], INF)
    return first, nxt


@dataclass(frozen=True)
class OracleParams:
    fa_use: str = setting("path", "choice", choices=FA_USE_MODES,
                          doc="path: an FA is used by a later request whose path contains it; hit: only within "
                              "its resume prefix")
    state_use: str = setting("resume", "choice", choices=STATE_USE_MODES,
                             doc="resume: a STATE is used where a later request would resume (unbounded replay); "
                                 "path: wherever a path passes")


class OraclePolicy(Policy):
    name = "oracle"
    Params = OracleParams
    wants_residency_events = True
    leaf_event_tiers = (DRAM, SSD)
    needs_future = True

    def __init__(self, params=None, /, **kw):
        super().__init__(params, **kw)
        self.fa_use = self.params.fa_use
        self.state_use = self.params.state_use

    def bind(self, ctx) -> None:
        super().bind(ctx)
        fut = ctx.future
        if fut is None:
            raise ValueError("the oracle policy needs the node's future request stream (NodeSim(..., future=...))")
        st = self.st
        self.fut = fut
        self.N = len(fut.offsets) - 1
        self.INF = self.N
        (self.next_fa, self.nxt_fa_pos, self.next_st, self.st_use, self.nxt_st_req,
         self.hinf) = next_use_tables(fut.offsets, fut.flat, st.n_chunks, ctx.model, self.fa_use, self.state_use)
        self.heaps = {t: LazyHeap() for t in _TIERS}
        self.guard = np.full(st.n_chunks, -1, dtype=np.int64)
        self.fen = _Fenwick(self.N)
        self.fen_key: dict[int, int] = {}
        self.ssd_on = st.cap[SSD] > 0
        self.c = {"dram_written": 0, "dram_dropped_never_used": 0, "dram_dropped_no_room": 0,
                  "dram_dropped_other_copy": 0, "forced_writes": 0, "ssd_evictions": 0,
                  "ssd_evicted_never_used": 0, "failed_selects": 0,
                  "requests_with_state_use": int((self.st_use >= 0).sum())}

    def next_use(self, p: int) -> int:
        c = chunk_of(p)
        return int(self.next_st[c] if is_state(p) else self.next_fa[c])

    def _push(self, t: int, p: int) -> None:
        self.heaps[t].push(p, -self.next_use(p), -int(self.st.size[p]))

    # ---- events ------------------------------------------------------------
    def on_enter(self, tier: int, p: int) -> None:
        if tier == HBM:
            return
        if is_state(p) or self.st.dcnt[tier][chunk_of(p)] == 0:     # candidates: STATEs and leaf FA copies
            self._push(tier, p)
        if tier == SSD:
            k = self.next_use(p)
            self.fen.add(k, int(self.st.size[p]))
            self.fen_key[p] = k

    def on_leave(self, tier: int, p: int) -> None:
        if tier == HBM:
            return
        self.heaps[tier].discard(p)
        if tier == SSD:
            k = self.fen_key.pop(p, None)
            if k is not None:
                self.fen.add(k, -int(self.st.size[p]))

    def on_leaf(self, tier: int, c: int) -> None:
        if tier != HBM and self.st.res[fa_of(c)] & BIT[tier]:
            self._push(tier, fa_of(c))

    def on_access(self, payloads, now, meta) -> None:
        j = meta.seq - 1
        fut = self.fut
        a, b = int(fut.offsets[j]), int(fut.offsets[j + 1])
        path = meta.path
        if b - a != len(path):
            raise ValueError(f"oracle: request {j} does not match the node's future stream")
        st = self.st
        self.guard[path[:meta.resident_chunks]] = meta.seq
        if len(path):
            self.next_fa[path] = self.nxt_fa_pos[a:b]
            fa = fa_of(path)
            self._rekey(fa[(st.res[fa] & 6) != 0])
        if self.state_use == "path":
            if len(path):
                self.next_st[path] = self.nxt_st_req[a:b]
                qs = state_of(path)
                self._rekey(qs[(st.res[qs] & 6) != 0])
            return
        u = int(self.st_use[j])
        if u >= 0:
            self.next_st[u] = self.nxt_st_req[j]
            q = state_of(u)
            if st.res[q] & 6:
                self._rekey(np.asarray([q]))

    def _rekey(self, ps: np.ndarray) -> None:
        st = self.st
        for p in ps.tolist():
            r = int(st.res[p])
            if r & IN_DRAM and p in self.heaps[DRAM]:
                self._push(DRAM, p)
            if r & IN_SSD:
                if p in self.heaps[SSD]:
                    self._push(SSD, p)
                k = self.next_use(p)
                old = self.fen_key.get(p)
                if old != k:
                    sz = int(st.size[p])
                    if old is not None:
                        self.fen.add(old, -sz)
                    self.fen.add(k, sz)
                    self.fen_key[p] = k

    # ---- selection ---------------------------------------------------------
    def select_victims(self, tier, bytes_needed, now):
        if tier not in _TIERS:
            return []
        st = self.st
        bit = BIT[tier]
        cur = st.cur
        res, pin, size = st.res, st.pin, st.size
        heap = self.heaps[tier]
        tent = Tentative(st, tier)
        held: dict[int, tuple] = {}          # popped, may not leave now; pushed back at the end
        taken: list[tuple] = []              # popped and chosen; pushed back if the call fails
        out: list[tuple[int, int]] = []
        counts: dict[str, int] = {}
        freed = 0
        admitted = 0
        INF = self.INF
        forced: list[tuple] = []             # victims that could only be written, never used again
        while freed < bytes_needed:
            e = heap.pop()
            last_resort = False
            if e is None:
                if forced:                   # nothing else can free the bytes: write them after all
                    e = forced.pop(0)
                    last_resort = True
                else:
                    for key, tie, p in list(held.values()) + taken + forced:
                        heap.push(p, key, tie)
                    self.c["failed_selects"] += 1
                    return no_victims(bytes_needed - freed)   # lets the node trim the right amount at once
            key, tie, p = e
            if pin[p] == cur:
                held[p] = e
                continue
            fa = not is_state(p)
            c = chunk_of(p)
            if fa and not tent.is_leaf(c):
                continue      # not a leaf of the tier: it comes back (on_leaf, or below) once it is one
            last = int(res[p]) == bit
            # a last FA copy may go only without resident descendants, and not under a pinned STATE
            # (nor on the request's resident path c_1..c_r, which the node needs until its inserts)
            droppable = not fa or not last or (tent.may_drop_last(c) and not (res[p | 1] and pin[p | 1] == cur)
                                                and self.guard[c] != cur)
            nu = -int(key)
            if tier == SSD:
                if not droppable:
                    held[p] = e
                    continue
                action, why = DROP, "ssd_evictions"
            elif res[p] & 5:                 # a valid SSD copy, or an HBM copy that comes back later
                action, why = DROP, "dram_dropped_other_copy"
            elif nu >= INF or not self.ssd_on:
                if droppable:
                    action, why = DROP, "dram_dropped_never_used"
                elif not self.ssd_on:
                    held[p] = e
                    continue
                elif last_resort:
                    action, why = DEMOTE, "forced_writes"
                else:
                    forced.append(e)
                    continue
            else:
                sz = int(size[p])
                room = st.cap[SSD] - st.used[SSD] - admitted + (self.fen.total - self.fen.prefix(nu))
                if room >= sz:
                    action, why = DEMOTE, "dram_written"
                elif droppable:
                    action, why = DROP, "dram_dropped_no_room"
                elif last_resort:
                    action, why = DEMOTE, "forced_writes"
                else:
                    forced.append(e)
                    continue
            if action == DEMOTE:
                admitted += int(size[p])
            taken.append(e)
            out.append((p, action))
            freed += int(size[p])
            counts[why] = counts.get(why, 0) + 1
            if tier == SSD and nu >= INF:
                counts["ssd_evicted_never_used"] = counts.get("ssd_evicted_never_used", 0) + 1
            if fa:
                tent.choose(c, last and (action == DROP or tier == SSD))
                # its parent (prefix closure) and nearest ancestor in the tier (leaf-first) may now leave
                par = int(st.parent[c])
                if par >= 0:
                    ys = {par}
                    y = st.nearest_in_tier(c, bit)
                    if y >= 0:
                        ys.add(y)
                    for y in ys:
                        h = held.pop(fa_of(y), None)
                        if h is not None:
                            heap.push(h[2], h[0], h[1])
                        elif y in tent.cred and res[fa_of(y)] & bit and tent.is_leaf(y) and fa_of(y) not in heap:
                            self._push(tier, fa_of(y))      # a leaf now, counting this call's victims
        for key, tie, p in list(held.values()) + forced:
            heap.push(p, key, tie)
        for k, v in counts.items():
            self.c[k] += v
        return out

    def counters(self):
        return dict(self.c)
