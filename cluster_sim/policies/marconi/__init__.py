"""``marconi``: Marconi(α) FLOP-aware eviction (Pan et al., MLSys'25; policies.md §5).

Marconi is a single-tier prefix cache for hybrid models. Following policies.md
§0.5 / §5.6, its eviction rule orders both the DRAM evictions and the SSD
evictions; SSD admission is write-back of evicted FA KV, and STATE payloads are
dropped on DRAM eviction (never written to SSD, simulation-model §7).

**Nodes in the chunk tree.** A Marconi radix node holds the KV of its edge and
one state at its end; here a chunk carries an FA payload and possibly a STATE.
Candidates are Marconi's "nodes with at most one child", within the residency
rules of the tier ``t`` being freed (each tier is ordered as its own
single-tier cache, so children are counted per tier):

* a *leaf* node ends at a chunk ``c`` whose FA has no descendant FA in ``t``.
  Evicting it takes the leaf's FA copy and its STATE copy in ``t`` (a leaf frees
  its state) **and the rest of its edge**: the chunks above ``c`` whose FA is in
  ``t``, that hold no STATE in any tier and that are left without descendants in
  ``t`` (Marconi's edge KV; a stateless chunk is no node of its own). A leaf
  chunk without any STATE (e.g. under ``state_checkpoints=last``, or after its
  state was dropped) is an edge that saves no FLOPs: efficiency 0;
* a *single-child internal node* is a chunk whose STATE is in ``t`` and that
  has at most one child chunk with FA in ``t`` (and is not a leaf of ``t``):
  evicting it drops that STATE only; its KV stays, merged into the child's edge.

Branch points (≥ 2 children in the tier) keep their states, as in Marconi.

**Score** (§5.3): ``S = norm(recency) + α·norm(eff)``, min-max over the scored
candidates (every value 1 if all are equal or there is ≤ 1 candidate); the
minimum is evicted, ties by least recent, then lower payload id. Recency is
``1 / (clock − t_last)`` on the contract's logical clock (simulation-model §5),
``t_last`` = the latest stamp among the node's payloads in the tier (the leaf
chunk's FA and STATE; a STATE only). A STATE is stamped only when created or
resumed from, which is Marconi's "v2" rule (only the deepest matched node is
refreshed). FLOP efficiency of the node ending at chunk ``c`` (depth ``d``; ``p`` =
the depth of the nearest ancestor holding a STATE in any tier — Marconi's
parent node, where a request would resume without this node)::

    flops = model.prefill_flops(p·B, d·B)     # SSM + attention + MLP of the edge, given the prefix
    mem   = STATE bytes at c + d·B·kv_bytes_per_token_full   # KV of the whole prefix, as the reference
    eff   = flops / mem

For a model without STATE every chunk is a node (``p = d − 1``, no state bytes).
Efficiency keys are exact at all times: a STATE appearing or vanishing at a
chunk re-keys the nodes whose edge runs through it (the stateless resident
subtree below it), so the candidate sets depend only on the cache's state.

``policy.candidates`` (default 256) scores a sample: the 128 least recent and
the 128 least efficient candidates, each the smallest entries of a lazy heap
(the smallest ``k`` are held in a small pool re-keyed in bulk at each call),
extended by the same amount from the heaps when none of them may leave.
``policy.candidates=all`` scores every candidate at every step, as the
reference implementation's full rescan.

``policy.bug_compatible=true`` reproduces the reference code's two quirks
(§5.3): the MLP term subtracts the parent's *attention* FLOPs (in Marconi's own
FLOP forms, ``F_mlp(L) = 16·L·d²`` and ``F_attn(L) = 8·L·d² + 4·L²·d`` per layer,
every layer with an MLP, hidden size ``d`` estimated from the active parameters
as ``12·d²`` per layer), and the bytes credited for an evicted leaf are those of
the last candidate visited in the scoring loop (candidates scanned by payload
id). The selection stops once both the credited and the actual bytes reach the
need: a call must free what it is asked (the contract), so only the quirk's
over-eviction side shows.

**Admission** of states (Marconi's "judicious checkpointing": at the last token
and at the branch point found by speculative insertion) is the node's
``model.state_checkpoints`` mode; Marconi's rule is ``last_and_branch``: the last
*input* chunk (outputs are not cached in this simulator) and, when the
request's overlap with the cache runs past its last usable state
(``h < r < m``), the deepest chunk whose FA is resident — where Marconi's insert
would split an edge. A shared prefix is therefore hit from its third
occurrence, as in the paper.

**α tuning** (``policy.alpha=auto``, the default, §5.4): α = 0 until the first
eviction, when ``R0`` = requests seen so far; once ``bootstrap_multiplier · R0``
requests have been seen, the policy replays all of them, from an empty cache,
on a small single-tier model of itself (:class:`SingleTierMarconi`: one tier of
HBM + DRAM bytes holding FA and STATE, the node's hit, pin, insert and
checkpoint rules, Marconi eviction scoring every candidate at every step, a leaf
taking its edge) for each α in {0, 0.1, …, 2.0}, and adopts the α that saves the
most prefill FLOPs (ties: the smallest α). Tuning runs once, as in the
reference code. The replays run compiled (:mod:`._marconi_jit`, the same floats as
:meth:`SingleTierMarconi.run`, which stays the reference) when numba imports and the
model's FLOP fields are floats.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from ...cache.hybrid import checkpoint_positions
from ...cache.lazyheap import LazyHeap
from ...cache.state import BIT, DEMOTE, DRAM, DROP, HBM, SSD, chunk_of, fa_of, is_state, state_of
from ...settings import setting
from ..base import Policy, Tentative, no_victims

ALPHA_GRID = tuple(round(0.1 * i, 1) for i in range(21))
_TIERS = (DRAM, SSD)


def _minmax(v: np.ndarray) -> np.ndarray:
    lo = v.min()
    hi = v.max()
    if hi == lo:
        return np.ones_like(v)
    return (v - lo) / (hi - lo)


class _FlopModel:
    """Marconi's FLOP efficiency of a node (memoised by (parent depth, depth) in chunks)."""

    def __init__(self, model, chunk_tokens: int, bug: bool):
        self.m = model
        self.ct = int(chunk_tokens)
        self.bug = bug
        self.has_state = bool(model.has_state)
        self.kvpt = float(model.kv_bytes_per_token_full)
        n_layers = model.n_full_layers + model.n_linear_layers + model.n_swa_layers
        self.n_mlp = max(n_layers, 1)
        # hidden size for the bug-compatible MLP term: a dense layer holds ~12·d² parameters
        self.d_hidden = math.sqrt(model.flops_per_token / (24.0 * self.n_mlp)) if model.flops_per_token > 0 else 0.0
        self.memo: dict[tuple[int, int], float] = {}

    def eff(self, lp: int, d: int) -> float:
        key = (lp, d)
        v = self.memo.get(key)
        if v is not None:
            return v
        ct = self.ct
        m = self.m
        flops = m.prefill_flops(lp * ct, d * ct)
        if self.bug:
            L = float(lp * ct)
            dh = self.d_hidden
            flops += self.n_mlp * (8.0 * L * dh * dh - 4.0 * L * L * dh)   # F_mlp(L_par) − F_attn(L_par)
        mem = d * ct * self.kvpt
        if self.has_state:
            mem += float(m.state_bytes(d * ct))
        v = flops / mem if mem > 0 else 0.0
        self.memo[key] = v
        return v


@dataclass(frozen=True)
class MarconiParams:
    alpha: float | str = setting("auto", words=("auto",), lo=0.0,
                                 doc="FLOP-efficiency weight: >= 0 (0 = LRU over nodes with at most one child) "
                                     "or auto (§5.4 tuning)")
    candidates: int | str = setting(256, words=("all",), lo=2, integer=True,
                                    expect="a whole number >= 2 or 'all'",
                                    doc="scored sample per eviction (half least recent, half least efficient)")
    bug_compatible: bool = setting(False, "bool", doc="reproduce the reference code's two quirks")
    bootstrap_multiplier: float = setting(5, lo=0.0, lo_open=True,
                                          doc="alpha=auto: tune once bootstrap_multiplier x R0 requests were seen")


class MarconiPolicy(Policy):
    name = "marconi"
    Params = MarconiParams
    wants_residency_events = True
    leaf_event_tiers = (DRAM, SSD)

    def __init__(self, params=None, /, **kw):
        super().__init__(params, **kw)
        p = self.params
        self.auto = p.alpha == "auto"
        self.alpha = 0.0 if self.auto else p.alpha
        self.n_sample = None if p.candidates == "all" else p.candidates
        self.bug = p.bug_compatible
        self.boot_mult = float(p.bootstrap_multiplier)

    # ------------------------------------------------------------------
    def bind(self, ctx) -> None:
        super().bind(ctx)
        st = self.st
        U = st.n_chunks
        self.model = ctx.model
        self.ct = int(ctx.chunk_tokens)
        self.fm = _FlopModel(ctx.model, self.ct, self.bug)
        self.has_state = self.fm.has_state
        self.ssd_on = st.cap[SSD] > 0
        self.k = None if self.n_sample is None else max(self.n_sample // 2, 1)
        self.nch = {t: np.zeros(U, dtype=np.int32) for t in _TIERS}   # child chunks with FA in the tier
        # chunks c_1..c_r of the request being processed: their last copy is never dropped (the node
        # pins only c_1..c_h; it places c_{r+1}.. and the STATE at c_r or c_m assuming c_1..c_r stay)
        self.guard = np.full(U, -1, dtype=np.int64)
        self.heap_r = {t: LazyHeap() for t in _TIERS}
        self.heap_e = {t: LazyHeap() for t in _TIERS}
        self.hk_r: dict[int, dict[int, int]] = {t: {} for t in _TIERS}      # keys of items in the heaps
        self.hk_e: dict[int, dict[int, float]] = {t: {} for t in _TIERS}
        self.pool_r: dict[int, dict[int, int]] = {t: {} for t in _TIERS}    # the k smallest, out of the heaps
        self.pool_e: dict[int, dict[int, float]] = {t: {} for t in _TIERS}
        self.dirty_enter: dict[int, list[int]] = {t: [] for t in _TIERS}
        self.dirty: dict[int, list[int]] = {t: [] for t in _TIERS}
        self.transitions: list[int] = []
        if self.has_state:
            par = st.parent
            order = np.argsort(par, kind="stable")
            cnt = np.bincount(par + 1, minlength=U + 1)
            self._kid_start = np.cumsum(cnt)          # children of c: kid_order[start[c]:start[c + 1]]
            self._kid_order = order
        # α tuning
        self.n_seen = 0
        self.seen: list[tuple[np.ndarray, int]] = []
        self.r0: int | None = None
        self.tuned_at = -1
        self.tune_savings: list[float] = []
        self.c = {f"{tn}_{k}": 0 for tn in ("dram", "ssd")
                  for k in ("select_calls", "leaf_evictions", "edge_chunks_evicted", "state_only_evictions",
                            "stateless_leaf_evictions", "candidates_scored", "failed_selects")}
        self.c.update(dram_fa_demoted=0, dram_fa_dropped=0, dram_states_dropped=0, sample_extensions=0,
                      state_transitions=0)

    # ---- residency events ------------------------------------------------
    def on_enter(self, tier: int, p: int) -> None:
        c = chunk_of(p)
        if is_state(p):
            if self.st.res[p] == BIT[tier]:          # the first copy anywhere: edges below change
                self.transitions.append(c)
            if tier != HBM:
                self.dirty[tier].append(c)
        elif tier != HBM:
            par = int(self.st.parent[c])
            if par >= 0:
                self.nch[tier][par] += 1
            self.dirty_enter[tier].append(c)

    def on_leave(self, tier: int, p: int) -> None:
        c = chunk_of(p)
        if is_state(p):
            if self.st.res[p] == 0:
                self.transitions.append(c)
            if tier != HBM:
                self.dirty[tier].append(c)
        elif tier != HBM:
            par = int(self.st.parent[c])
            d = self.dirty[tier]
            d.append(c)
            if par >= 0:
                self.nch[tier][par] -= 1
                d.append(par)

    def on_leaf(self, tier: int, c: int) -> None:
        if tier != HBM:
            self.dirty[tier].append(c)

    # ---- requests ----------------------------------------------------------
    def on_access(self, payloads, now, meta) -> None:
        # the resident path c_1..c_r must stay resident until the request's inserts (see _guard)
        self.guard[meta.path[:meta.resident_chunks]] = meta.seq
        self.n_seen += 1
        if self.auto and self.tuned_at < 0:
            self.seen.append((meta.path, int(meta.input_tokens)))

    def tick(self, now: float) -> None:
        for t in _TIERS:      # a tier that rarely evicts (a large SSD) must not pile up events
            if len(self.dirty[t]) + len(self.dirty_enter[t]) > 20000:
                self._flush(t)
        if (self.auto and self.tuned_at < 0 and self.r0 is not None
                and len(self.seen) >= self.boot_mult * self.r0):
            self._tune()

    # ---- candidate status and keys ----------------------------------------
    def is_cand(self, t: int, x: int) -> bool:
        """Candidate status in tier ``t``, ignoring pins."""
        st = self.st
        bit = BIT[t]
        if not st.res[x] & bit:
            return False
        c = chunk_of(x)
        if not is_state(x):
            return st.dcnt[t][c] == 0
        if self.nch[t][c] > 1:
            return False
        return not (st.res[x - 1] & bit and st.dcnt[t][c] == 0)

    def tlast(self, t: int, x: int) -> int:
        st = self.st
        s = int(st.stamp[x])
        if not is_state(x) and st.res[x | 1] & BIT[t]:
            s = max(s, int(st.stamp[x | 1]))
        return s

    def eff(self, x: int, gone=None) -> tuple[float, int]:
        """(efficiency, chunk of the parent node: -1 for the root, -2 for a stateless leaf)."""
        st = self.st
        c = chunk_of(x)
        d = int(st.depth[c])
        parent = st.parent
        if not self.has_state:
            return self.fm.eff(d - 1, d), int(parent[c])
        res = st.res
        if not is_state(x) and (not res[x | 1] or (gone and c in gone)):
            return 0.0, -2
        a = int(parent[c])
        while a >= 0 and (not res[state_of(a)] or (gone and a in gone)):
            a = int(parent[a])
        return self.fm.eff(int(st.depth[a]) if a >= 0 else 0, d), a

    def _refresh(self, t: int, x: int) -> None:
        pr, pe = self.pool_r[t], self.pool_e[t]
        hr, he = self.hk_r[t], self.hk_e[t]
        if self.is_cand(t, x):
            tl = self.tlast(t, x)
            if x in pr:
                pr[x] = tl
            elif hr.get(x) != tl:
                self.heap_r[t].push(x, tl, x)
                hr[x] = tl
            e = self.eff(x)[0]
            if x in pe:
                pe[x] = e
            elif he.get(x) != e:
                self.heap_e[t].push(x, e, x)
                he[x] = e
        else:
            if pr.pop(x, None) is None and hr.pop(x, None) is not None:
                self.heap_r[t].discard(x)
            if pe.pop(x, None) is None and he.pop(x, None) is not None:
                self.heap_e[t].discard(x)

    def _expand_transitions(self) -> None:
        """A STATE appeared or vanished at chunk a: re-key a and the nodes whose edge runs through a."""
        tr = self.transitions
        if not tr:
            return
        self.transitions = []
        self.c["state_transitions"] += len(tr)
        st = self.st
        res = st.res
        ks, ko = self._kid_start, self._kid_order
        out: set[int] = set()
        expanded: set[int] = set()      # chunks whose children were visited
        for a in tr:
            out.add(a)
            stack = [a]
            while stack:
                u = stack.pop()
                if u in expanded:
                    continue
                expanded.add(u)
                kids = ko[ks[u]:ks[u + 1]]
                if not len(kids):
                    continue
                kids = kids[res[fa_of(kids)] != 0]
                for v in kids.tolist():
                    out.add(v)
                    if not res[state_of(v)]:       # the edge runs on below a stateless chunk
                        stack.append(v)
        for t in _TIERS:
            self.dirty[t].extend(out)

    def _flush(self, t: int) -> None:
        if self.transitions:
            self._expand_transitions()
        ent, d = self.dirty_enter[t], self.dirty[t]
        if not ent and not d:
            return
        self.dirty_enter[t] = []
        self.dirty[t] = []
        bit = BIT[t]
        parent = self.st.parent
        todo = set(d)
        for c in set(ent):
            todo.add(c)
            par = int(parent[c])
            if par >= 0:
                todo.add(par)
                y = self.st.nearest_in_tier(c, bit)
                if y >= 0:
                    todo.add(y)
        hs = self.has_state
        for c in sorted(todo):
            self._refresh(t, fa_of(c))
            if hs:
                self._refresh(t, state_of(c))

    def _fill(self, t: int) -> None:
        """Make each pool hold exactly the k smallest (key, id) candidates of its kind."""
        k = self.k
        # recency keys grow with touches, which raise no event: re-key the pool in bulk
        pr = self.pool_r[t]
        if pr:
            xs = np.fromiter(pr.keys(), dtype=np.int64, count=len(pr))
            for x, v in zip(xs.tolist(), self._tlast_vec(t, xs).tolist()):
                pr[x] = v
        for pool, heap, hk, fresh in ((pr, self.heap_r[t], self.hk_r[t], lambda x: self.tlast(t, x)),
                                      (self.pool_e[t], self.heap_e[t], self.hk_e[t], lambda x: self.eff(x)[0])):
            mx = [(-v, -x) for x, v in pool.items()]
            heapq.heapify(mx)
            while True:
                while mx and pool.get(-mx[0][1]) != -mx[0][0]:
                    heapq.heappop(mx)
                if len(pool) > k:
                    nv, nx = heapq.heappop(mx)
                    x, v = -nx, -nv
                    del pool[x]
                    heap.push(x, v, x)
                    hk[x] = v
                    continue
                top = heap.peek()
                if top is None:
                    break
                key, _, x = top
                if len(pool) >= k and (key, x) >= (-mx[0][0], -mx[0][1]):
                    break
                heap.pop()
                del hk[x]
                cur = fresh(x)
                if cur != key:                      # a touch raised its recency key
                    heap.push(x, cur, x)
                    hk[x] = cur
                    continue
                pool[x] = key
                heapq.heappush(mx, (-key, -x))

    def _tlast_vec(self, t: int, xs: np.ndarray) -> np.ndarray:
        st = self.st
        s = st.stamp[xs]
        q = xs | 1
        fa_with = ((xs & 1) == 0) & ((st.res[q] & BIT[t]) != 0)
        return np.where(fa_with, np.maximum(s, st.stamp[q]), s)

    # ---- selection ---------------------------------------------------------
    def select_victims(self, tier, bytes_needed, now):
        if tier not in _TIERS:
            return []
        tn = "dram" if tier == DRAM else "ssd"
        self.c[f"{tn}_select_calls"] += 1
        self._flush(tier)
        if self.k is not None:
            self._fill(tier)
        out = _Selection(self, tier, bytes_needed).run()
        if out:
            if self.r0 is None:
                self.r0 = max(self.n_seen, 1)
        else:
            self.c[f"{tn}_failed_selects"] += 1
        return out

    def counters(self):
        d = dict(self.c)
        d["alpha"] = self.alpha
        d["alpha_auto"] = int(self.auto)
        d["alpha_tuned_at_request"] = self.tuned_at
        d["bootstrap_r0"] = self.r0 if self.r0 is not None else -1
        d["candidates"] = -1 if self.n_sample is None else self.n_sample
        d["bug_compatible"] = int(self.bug)
        return d

    # ---- α tuning (§5.4) -----------------------------------------------------
    def tuning_capacity(self) -> int:
        cap = self.st.cap
        return cap[HBM] + cap[DRAM] if cap[HBM] + cap[DRAM] > 0 else cap[SSD]

    def _tune(self) -> None:
        sim = SingleTierMarconi(self.st, self.model, self.ct, self.tuning_capacity(), self.seen, bug=self.bug)
        self.tune_savings = sim.savings(ALPHA_GRID)
        best = max(range(len(ALPHA_GRID)), key=lambda i: (self.tune_savings[i], -i))
        self.alpha = ALPHA_GRID[best]
        self.tuned_at = len(self.seen)
        self.seen = []


class _Selection:
    """One atomic victim selection in one tier over the sampled (or full) candidate set."""

    def __init__(self, pol: MarconiPolicy, t: int, need: int):
        self.pol = pol
        self.st = pol.st
        self.t = t
        self.bit = BIT[t]
        self.need = need
        self.fa_action = DEMOTE if (t == DRAM and pol.ssd_on) else DROP
        self.dropping = self.fa_action == DROP or t == SSD
        self.tent = Tentative(self.st, t)
        self.tch: dict[int, int] = {}
        self.chosen: set[int] = set()
        self.gone: set[int] = set()          # chunks whose STATE was chosen in this call
        self.borrowed: list[tuple[int, int, float]] = []   # (heap kind, item, key) popped for an extension
        self.index: dict[int, int] = {}
        self.ids: list[int] = []
        self.tl: list[int] = []
        self.ef: list[float] = []
        self.legal: list[bool] = []

    # ---- rows --------------------------------------------------------------
    def _load(self, xs: list[int]) -> None:
        """Add candidate rows ``xs`` (current candidates, sorted) with vectorised keys and legality."""
        if not xs:
            return
        pol, st, t, bit = self.pol, self.st, self.t, self.bit
        X = np.asarray(xs, dtype=np.int64)
        tl = pol._tlast_vec(t, X)
        c = X >> 1
        res = st.res
        if self.chosen:                      # mid-call: legality counts this call's choices
            legal = [self.legal_now(x) for x in xs]
        else:
            cur = st.cur
            isfa = (X & 1) == 0
            q = X | 1
            dc = st.dcnt[t][c] == 0
            fa_ok = dc & ~(((res[q] & bit) != 0) & (st.pin[q] == cur))
            if self.dropping:
                fa_ok &= ~((res[X] == bit) & ((st.dany[c] != 0) | ((res[q] != 0) & (st.pin[q] == cur))
                                              | (pol.guard[c] == cur)))
            st_ok = (pol.nch[t][c] <= 1) & ~(((res[fa_of(c)] & bit) != 0) & dc)
            legal = ((st.pin[X] != cur) & ((res[X] & bit) != 0) & np.where(isfa, fa_ok, st_ok)).tolist()
        he, pe = pol.hk_e[t], pol.pool_e[t]
        for x in xs:
            e = pe.get(x)
            if e is None:
                e = he[x]
            if self.gone:
                e = pol.eff(x, self.gone)[0]
            self.index[x] = len(self.ids)
            self.ids.append(x)
            self.ef.append(e)
        self.tl.extend(tl.tolist())
        self.legal.extend(legal)

    def legal_now(self, x: int) -> bool:
        st = self.st
        cur = st.cur
        if x in self.chosen or st.pin[x] == cur:
            return False
        if not st.res[x] & self.bit:
            return False
        c = chunk_of(x)
        if not is_state(x):
            if not self.tent.is_leaf(c):
                return False
            q = x | 1
            if st.res[q] & self.bit and st.pin[q] == cur:
                return False
            if self.dropping and st.res[x] == self.bit:
                if not self.tent.may_drop_last(c):
                    return False
                if (st.res[q] and st.pin[q] == cur) or self.pol.guard[c] == cur:
                    return False                     # a pinned STATE would go along / the request needs it
            return True
        if self.pol.nch[self.t][c] - self.tch.get(c, 0) > 1:
            return False
        fa = x - 1
        return not (st.res[fa] & self.bit and fa not in self.chosen and self.tent.is_leaf(c))

    def add_new(self, x: int) -> None:
        """A chunk that became a candidate through this call's choices."""
        i = self.index.get(x)
        if i is not None:
            self.legal[i] = self.legal_now(x)
            return
        if not self.legal_now(x):
            return
        e = self.pol.eff(x, self.gone)[0]
        tl = self.pol.tlast(self.t, x)
        self.index[x] = len(self.ids)
        self.ids.append(x)
        self.tl.append(tl)
        self.ef.append(e)
        self.legal.append(True)

    def extend(self) -> bool:
        """Borrow up to k more candidates from each heap (returned at the end). False if none left."""
        pol, t, k = self.pol, self.t, self.pol.k
        new: set[int] = set()
        for kind, heap, hk in ((0, pol.heap_r[t], pol.hk_r[t]), (1, pol.heap_e[t], pol.hk_e[t])):
            n = 0
            while n < k:
                e = heap.pop()
                if e is None:
                    break
                key, _, x = e
                if kind == 0:
                    cur = pol.tlast(t, x)
                    if cur != key:                  # a touch raised its recency key
                        heap.push(x, cur, x)
                        hk[x] = cur
                        continue
                self.borrowed.append((kind, x, key))   # its key stays in hk until given back
                if x not in self.index:
                    new.add(x)
                n += 1
        if not new:
            return False
        self._load(sorted(new))
        return True

    def give_back(self) -> None:
        pol, t = self.pol, self.t
        for kind, x, key in self.borrowed:
            (pol.heap_r[t] if kind == 0 else pol.heap_e[t]).push(x, key, x)
        self.borrowed = []

    # ---- the loop ----------------------------------------------------------
    def run(self) -> list[tuple[int, int]]:
        pol, st, t, bit = self.pol, self.st, self.t, self.bit
        if pol.k is None:
            self._load(sorted(pol.hk_r[t]))
        else:
            self._load(sorted(set(pol.pool_r[t]) | set(pol.pool_e[t])))
        out: list[tuple[int, int]] = []
        freed = 0          # bytes the victims free
        credited = 0       # what the selection believes it freed (differs under quirk 2)
        alpha = pol.alpha
        size = st.size
        parent = st.parent
        tn = "dram" if t == DRAM else "ssd"
        cnt = {"leaf": 0, "edge": 0, "state": 0, "stateless": 0, "fa": 0, "st_drop": 0}
        while freed < self.need or credited < self.need:
            legal = np.asarray(self.legal, dtype=bool)
            if not legal.any():
                if pol.k is not None and self.extend():
                    pol.c["sample_extensions"] += 1
                    continue
                self.give_back()
                return no_victims(self.need - freed)      # lets the node trim the right amount at once
            idx = np.flatnonzero(legal)
            pol.c[f"{tn}_candidates_scored"] += len(idx)
            tl = np.asarray(self.tl, dtype=np.int64)[idx]
            score = _minmax(1.0 / (st.clock - tl).astype(np.float64))
            if alpha:
                score = score + alpha * _minmax(np.asarray(self.ef, dtype=np.float64)[idx])
            tie = np.flatnonzero(score == score.min())
            if len(tie) == 1:
                j = int(idx[tie[0]])
            else:
                ids = np.asarray(self.ids, dtype=np.int64)[idx[tie]]
                j = int(idx[tie[np.lexsort((ids, tl[tie]))[0]]])
            x = self.ids[j]
            c = chunk_of(x)
            self.legal[j] = False
            if not is_state(x):
                q = x | 1
                with_state = bool(st.res[q] & bit) and q not in self.chosen   # not already taken state-only
                victims = [(x, self.fa_action)]
                if with_state:
                    victims.append((q, DROP))
                    self.chosen.add(q)
                    self.gone.add(c)
                    if q in self.index:
                        self.legal[self.index[q]] = False
                self.tent.choose(c, self.dropping and int(st.res[x]) == bit)
                self.chosen.add(x)
                top = c
                # the rest of the edge: stateless chunks left without descendants in the tier
                if pol.has_state:
                    a = int(parent[top])
                    while a >= 0:
                        fa = fa_of(a)
                        if (not st.res[fa] & bit or st.pin[fa] == st.cur or fa in self.chosen
                                or (st.res[fa + 1] and a not in self.gone) or not self.tent.is_leaf(a)):
                            break
                        dl = self.dropping and int(st.res[fa]) == bit
                        if dl and (not self.tent.may_drop_last(a) or pol.guard[a] == st.cur):
                            break
                        self.tent.choose(a, dl)
                        self.chosen.add(fa)
                        victims.append((fa, self.fa_action))
                        if fa in self.index:
                            self.legal[self.index[fa]] = False
                        cnt["edge"] += 1
                        top = a
                        a = int(parent[a])
                z = int(parent[top])
                if z >= 0:
                    self.tch[z] = self.tch.get(z, 0) + 1
                got = sum(int(size[p]) for p, _ in victims)
                freed += got
                if pol.bug:   # quirk 2: credit the last candidate visited (scanning by payload id)
                    last = max(self.ids[i] for i in idx.tolist())
                    got = int(size[last])
                    if not last & 1 and st.res[last | 1] & bit:
                        got += int(size[last | 1])
                credited += got
                out.extend(victims)
                cnt["leaf" if with_state or not pol.has_state else "stateless"] += 1
                cnt["fa"] += len(victims) - int(with_state)
                cnt["st_drop"] += int(with_state)
                if z >= 0:
                    y = st.nearest_in_tier(top, bit)
                    for w in sorted({z, y} - {-1}):
                        self.add_new(fa_of(w))
                        if pol.has_state:
                            self.add_new(state_of(w))
                if with_state:
                    self._rescore(c)
            else:
                out.append((x, DROP))
                freed += int(size[x])
                credited += int(size[x])
                self.chosen.add(x)
                self.gone.add(c)
                cnt["state"] += 1
                cnt["st_drop"] += 1
                self._rescore(c)
        self.give_back()
        pol.c[f"{tn}_leaf_evictions"] += cnt["leaf"]
        pol.c[f"{tn}_stateless_leaf_evictions"] += cnt["stateless"]
        pol.c[f"{tn}_edge_chunks_evicted"] += cnt["edge"]
        pol.c[f"{tn}_state_only_evictions"] += cnt["state"]
        if t == DRAM:
            pol.c["dram_fa_demoted" if self.fa_action == DEMOTE else "dram_fa_dropped"] += cnt["fa"]
            pol.c["dram_states_dropped"] += cnt["st_drop"]
        return out

    def _rescore(self, a: int) -> None:
        """The STATE at chunk ``a`` is going: nodes below ``a`` whose edge reached it get a longer one."""
        st = self.st
        X = np.asarray(self.ids, dtype=np.int64)
        c = X >> 1
        da = int(st.depth[a])
        below = (st.depth[c] > da) & np.asarray(self.legal, dtype=bool)
        if not below.any():
            return
        rows = np.flatnonzero(below)
        rows = rows[st.flat[st.anchor[c[rows]] + da - 1] == a]
        for i in rows.tolist():
            self.ef[i] = self.pol.eff(self.ids[i], self.gone)[0]


#: seconds numba takes to compile the tuning replay (once per install; measured 7 s on 2 cores)
TUNE_COMPILE_S = 10
_announced: list[bool] = []


def _announce(module_file: str) -> None:
    """Once per process: a notice when the tuning replay has not been compiled yet (the compile
    time is not counted in sim_wall_s: cluster_sim.jit_timing)."""
    if _announced:
        return
    _announced.append(True)
    import sys

    from ...jit_timing import cached
    if not cached(module_file, "_marconi_jit.replay-"):
        print(f"cluster_sim: compiling Marconi's α-tuning replay (numba, once per install, about "
              f"{TUNE_COMPILE_S} s; not counted in sim_wall_s)", file=sys.stderr)


class SingleTierMarconi:
    """A small single-tier model of the policy for α tuning (§5.4).

    One tier of ``capacity`` bytes holds FA and STATE payloads; requests follow the
    node's rules (hit length, pins, new FA then checkpoints of the model's mode,
    overflow resolved after the inserts, deepest inserts trimmed when everything
    else is pinned) and Marconi(α) eviction scores every candidate at every step;
    a leaf eviction takes its edge (the stateless chunks above it). Chunk ids are
    compacted to those of the replayed requests.
    """

    def __init__(self, st, model, chunk_tokens: int, capacity: int, requests, *, bug: bool = False):
        self.cp = checkpoint_positions
        self.model = model
        self.ct = int(chunk_tokens)
        self.cap = int(capacity)
        self.fm = _FlopModel(model, self.ct, bug)
        self.bug = bug
        self.has_state = bool(model.has_state)
        self.mode = model.state_checkpoints
        paths = [p for p, _ in requests]
        allc = np.concatenate(paths) if paths else np.zeros(0, np.int64)
        g = np.unique(allc)
        self.g = g
        self.paths = [np.searchsorted(g, p) for p in paths]
        self.L = [int(L) for _, L in requests]
        gp = st.parent[g]
        self.par = np.where(gp >= 0, np.searchsorted(g, np.maximum(gp, 0)), -1).astype(np.int64)
        self.dep = st.depth[g].astype(np.int64)
        self.F = int(model.fa_bytes(self.ct))
        self.S = (model.state_bytes_array(self.dep * self.ct) if self.has_state
                  else np.zeros(len(g), dtype=np.int64)).astype(np.int64)
        self.gid2 = fa_of(g)                             # payload ids for tie-breaks
        self.anchor = st.anchor[g]
        self.flat = st.flat

    # ---- helpers -------------------------------------------------------------
    def _is_below(self, cands: np.ndarray, a: int) -> np.ndarray:
        """Which of ``cands`` have ``a`` as a strict ancestor."""
        da = int(self.dep[a])
        deeper = self.dep[cands] > da
        out = np.zeros(len(cands), dtype=bool)
        if deeper.any():
            cd = cands[deeper]
            anc_g = self.flat[self.anchor[cd] + da - 1]
            out[deeper] = anc_g == self.g[a]
        return out

    def _lp(self, c: int) -> int:
        par, sr = self.par, self.sr
        a = int(par[c])
        if not self.has_state:
            return a
        while a >= 0 and not sr[a]:
            a = int(par[a])
        return a

    def _set_eff(self, c: int) -> None:
        """Efficiency of the node ending at c (a leaf without STATE scores 0 at scoring time)."""
        a = self._lp(c)
        self.lp[c] = a
        self.ef[c] = self.fm.eff(int(self.dep[a]) if a >= 0 else 0, int(self.dep[c]))

    def _upd(self, c: int) -> None:
        """Candidate flags of chunk c (leaf node / single-child state node)."""
        leaf = bool(self.fa[c]) and self.nch[c] == 0
        stc = bool(self.sr[c]) and self.nch[c] == 1
        was = self.cl[c] or self.cs[c]
        self.cl[c] = leaf
        self.cs[c] = stc
        if (leaf or stc) and not was:
            self._set_eff(c)

    # ---- the replays ------------------------------------------------------------
    def compiled_ok(self) -> bool:
        """Whether :func:`._marconi_jit.replay` reproduces this model's FLOPs exactly: it does the
        float operations of ``prefill_flops`` and ``_FlopModel.eff`` in the same order, which are
        the same only when the model's FLOP fields are Python floats (an int field would keep
        Python's exact integer arithmetic); and numba must import."""
        m = self.model
        if not all(type(getattr(m, f)) is float for f in ("flops_per_token", "linear_mix_flops_per_token",
                                                           "attn_flops_per_ctx_token", "swa_flops_per_ctx_token")):
            return False
        try:
            import numba  # noqa: F401
        except ImportError:
            return False
        return True

    def savings(self, alphas, engine: str = "auto") -> list[float]:
        """``[self.run(a) for a in alphas]``: compiled (:mod:`._marconi_jit`) unless ``engine`` is
        ``"python"`` or :meth:`compiled_ok` says no; the same floats either way."""
        if engine == "python" or (engine == "auto" and not self.compiled_ok()):
            return [self.run(a) for a in alphas]
        return [float(v) for v in self.run_compiled(alphas)[0]]

    def run_compiled(self, alphas):
        """(saved per α, hit lengths ``hs[i, request]``) by :func:`._marconi_jit.replay`."""
        from .. import _marconi_jit as J
        _announce(J.__file__)
        m, fm = self.model, self.fm
        n = len(self.g)
        lens = np.array([len(p) for p in self.paths], dtype=np.int64)
        poff = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(lens, out=poff[1:])
        pflat = (np.concatenate(self.paths) if self.paths else np.zeros(0)).astype(np.int64)
        par = self.par.astype(np.int64)
        order = np.argsort(par, kind="stable").astype(np.int64)
        ks = np.cumsum(np.bincount(par + 1, minlength=n + 1)).astype(np.int64)
        P = np.zeros(J.N_P, dtype=np.float64)
        P[J.P_FPT_LMF] = m.flops_per_token + m.linear_mix_flops_per_token
        P[J.P_ATTN] = m.attn_flops_per_ctx_token
        P[J.P_SWA] = m.swa_flops_per_ctx_token
        P[J.P_KVPT] = fm.kvpt
        P[J.P_DH] = fm.d_hidden
        ip = np.array([self.ct, m.swa_window, fm.n_mlp, m.linear_state_bytes, m.swa_kv_bytes_per_token],
                      dtype=np.int64)
        mode = {"last": 0, "last_and_branch": 1, "every_chunk": 2}[self.mode]
        return J.replay(np.asarray(alphas, dtype=np.float64), pflat, poff, np.asarray(self.L, dtype=np.int64),
                        par, self.dep.astype(np.int64), self.S.astype(np.int64), self.gid2.astype(np.int64),
                        ks, order, int(self.F), int(self.cap), mode, P, ip, self.has_state, self.bug)

    # ---- one replay (the reference) ----------------------------------------------
    def run(self, alpha: float) -> float:
        n = len(self.g)
        self.alpha = float(alpha)
        self.fa = np.zeros(n, dtype=bool)
        self.sr = np.zeros(n, dtype=bool)
        self.nch = np.zeros(n, dtype=np.int64)
        self.stf = np.zeros(n, dtype=np.int64)
        self.sts = np.zeros(n, dtype=np.int64)
        self.pinf = np.zeros(n, dtype=np.int64)
        self.pins = np.zeros(n, dtype=np.int64)
        self.cl = np.zeros(n, dtype=bool)
        self.cs = np.zeros(n, dtype=bool)
        self.ef = np.zeros(n, dtype=np.float64)
        self.lp = np.full(n, -1, dtype=np.int64)
        self.used = 0
        self.clock = 0
        m_ = self.model
        ct = self.ct
        saved = 0.0
        for seq, (path, L) in enumerate(zip(self.paths, self.L), start=1):
            h = self._request(seq, path)
            if L > 0:
                start = h * ct
                saved += m_.prefill_flops(0, L) - (m_.prefill_flops(start, L) if start < L
                                                   else m_.prefill_flops(L - 1, L))
        return saved

    def _request(self, seq: int, path: np.ndarray) -> int:
        m = len(path)
        if not m:
            return 0
        fa, sr = self.fa, self.sr
        res = fa[path]
        r = m if res.all() else int(np.argmin(res))
        if self.has_state and r:
            w = np.flatnonzero(sr[path[:r]])
            h = int(w[-1]) + 1 if len(w) else 0
        else:
            h = r
        # touches: c_m .. c_1, then the hit state
        self.stf[path[::-1]] = np.arange(self.clock, self.clock + m)
        self.clock += m
        if self.has_state and h:
            self.sts[path[h - 1]] = self.clock
            self.clock += 1
            self.pins[path[h - 1]] = seq
        self.pinf[path[:h]] = seq
        placed: list[tuple[int, int, int]] = []     # (position, kind, chunk) for trimming
        if r < m:
            new = path[r:]
            self.pinf[new] = seq
            fa[new] = True
            self.used += self.F * len(new)
            lo = r - 1 if r else r
            self.nch[path[lo:m - 1]] += 1
            for j in range(r, m):
                placed.append((j + 1, 0, int(path[j])))
            for c in ([int(path[r - 1])] if r else []) + [int(path[m - 1])]:
                self._upd(c)
            for c in new[:-1].tolist():
                self.cl[c] = self.cs[c] = False
        if self.has_state:
            for k in self.cp(self.mode, h, r, m):
                c = int(path[k - 1])
                if not sr[c]:
                    self._add_state(c, seq)
                    placed.append((k, 1, c))
        if self.used > self.cap:
            self._resolve(seq, sorted(placed))
        return h

    def _add_state(self, c: int, seq: int) -> None:
        self.sr[c] = True
        self.used += int(self.S[c])
        self.sts[c] = self.clock
        self.clock += 1
        self.pins[c] = seq
        self._upd(c)
        # nodes below c whose edge ran through c now stop at c
        cands = np.flatnonzero(self.cl | self.cs)
        below = cands[self._is_below(cands, c)]
        for x in below.tolist():
            if self.lp[x] == -1 or self.dep[self.lp[x]] < self.dep[c]:
                self._set_eff(x)

    def _remove_state(self, c: int) -> None:
        self.sr[c] = False
        self.used -= int(self.S[c])
        self.cs[c] = False
        for x in np.flatnonzero((self.lp == c) & (self.cl | self.cs)).tolist():
            self._set_eff(x)

    def _remove_fa(self, c: int) -> None:
        self.fa[c] = False
        self.cl[c] = False
        self.used -= self.F
        p = int(self.par[c])
        if p >= 0:
            self.nch[p] -= 1

    def _resolve(self, seq: int, placed: list) -> None:
        while self.used > self.cap:
            need = self.used - self.cap
            start = self.used
            credited = 0
            progressed = False
            while credited < need or start - self.used < need:
                got = self._evict_one(seq)
                if got is None:
                    break
                credited += got
                progressed = True
            if self.used <= self.cap:
                return
            if not progressed:
                # everything else pinned: drop the deepest placed payloads (STATE before FA at a position)
                while placed and self.used > self.cap:
                    _, kind, c = placed.pop()
                    if kind == 1 and self.sr[c]:
                        self._remove_state(c)
                    elif kind == 0 and self.fa[c]:
                        if self.sr[c]:
                            self._remove_state(c)
                        self._remove_fa(c)
                        p = int(self.par[c])
                        if p >= 0:
                            self._upd(p)
                return

    def _evict_one(self, seq: int):
        pinf, pins, sr = self.pinf, self.pins, self.sr
        il = np.flatnonzero(self.cl)
        il = il[(pinf[il] != seq) & ~(sr[il] & (pins[il] == seq))]
        is_ = np.flatnonzero(self.cs)
        is_ = is_[pins[is_] != seq]
        if not len(il) and not len(is_):
            return None
        ids = np.concatenate((il, is_))
        kind = np.concatenate((np.zeros(len(il), dtype=np.int64), np.ones(len(is_), dtype=np.int64)))
        tl = np.concatenate((np.where(sr[il], np.maximum(self.stf[il], self.sts[il]), self.stf[il]), self.sts[is_]))
        score = _minmax(1.0 / (self.clock - tl).astype(np.float64))
        ef = None
        if self.alpha:
            ef = np.concatenate((np.where(sr[il] | (not self.has_state), self.ef[il], 0.0), self.ef[is_]))
            score = score + self.alpha * _minmax(ef)
        tie = np.flatnonzero(score == score.min())
        if len(tie) == 1:
            j = int(tie[0])
        else:
            pid = self.gid2[ids[tie]] + kind[tie]
            j = int(tie[np.lexsort((pid, tl[tie]))[0]])
        c = int(ids[j])
        if self.bug:      # quirk 2: credit the last candidate visited (scanning by payload id)
            jl = int(np.argmax(self.gid2[ids] + kind))
            lc, lk = int(ids[jl]), int(kind[jl])
            credit = int(self.S[lc]) if lk else self.F + (int(self.S[lc]) if sr[lc] else 0)
        if kind[j]:
            got = int(self.S[c])
            self._remove_state(c)
            return got
        before = self.used
        if sr[c]:
            self._remove_state(c)
        self._remove_fa(c)
        top = c
        if self.has_state:
            a = int(self.par[top])
            while a >= 0 and self.fa[a] and not sr[a] and self.nch[a] == 0 and pinf[a] != seq:
                self._remove_fa(a)
                top = a
                a = int(self.par[a])
        p = int(self.par[top])
        if p >= 0:
            self._upd(p)
        return credit if self.bug else before - self.used
