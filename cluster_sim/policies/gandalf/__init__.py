"""``gandalf``: the endurance-aware cache manager (policies.md §2, a reconstruction).

Gandalf decides, when DRAM must make room, per candidate: *drop* it or *move* it
to SSD, by comparing expected dollar costs:

* ``J_drop(n) = E_hits(n) · g · C_rc(n)`` — the expected lost recomputation
  (for a STATE, ``C_rc_lin``: the recompute from the deepest ancestor that still
  holds a state);
* ``J_move(n) = α·W(n) + L_vict(n) + E_hits(n) · g · (C_ld,S(n) − C_ld,D(n))`` —
  the write fee (zero with a valid SSD copy), the expected value of the SSD
  copies it would push out, and the slower loads.

Each step removes the (candidate, action) with the least cost per byte freed.
The SSD evicts the copy of least expected lost value per byte.

Placement (§2.2): ``capacity_aware`` (default) prices both payload kinds for
both actions; ``strict`` keeps STATE payloads off the SSD (dropped LRU), writes
every FA payload entering DRAM to SSD at once, and evicts LRU leaf-first in
every tier.

Reuse estimate (§2.3): ``E_hits = r·H·exp(−(t − t_last)/τ)`` with a smoothed
rate ``r = (hits + r0·T0)/(t_last − t_first + T0)`` (hits = later requests that
demanded the chunk: policy-independent demand). STATE payloads are
attention-type aware: a population prior (share of checkpoints ever demanded;
chance that a demanded state is demanded again) tracked over policy-independent
demand (each request demands the deepest checkpoint position ever created on its
path), the per-object rate only once a state was demanded twice. With
``reuse=population`` (our addition) an FA chunk's ``r·H`` is replaced by the measured
probability that a chunk with as many earlier touches is touched again within ``H``.

Lazy heaps (§2.6, docs/decisions.md 22–24): one heap of DRAM candidates keyed by
``log(min(J_drop, J_move without L_vict)/S) + t/τ`` and one of SSD copies keyed by
``log(lost value/S at t_last) + t_last/τ``. In that frame passing time never lowers a
key and a touch only raises it, so stored keys are lower bounds: a popped entry is
re-scored (both actions, with the SSD victims its move would push out) and re-pushed
if it drifted above the next key. A selection walks chains (choosing a leaf can open
up its parent) and journals its heap changes, undone if it cannot free enough.
"""
from __future__ import annotations

import functools
import importlib
import math
import sys
from collections import deque
from dataclasses import dataclass

import numpy as np

from ...cache.state import IN_DRAM, IN_SSD, chunk_of, fa_of, is_state, state_of
from ...cache.lazyheap import LazyHeap
from ...errors import ConfigError
from ...jit_timing import cached
from ...settings import setting
from ..base import DEMOTE, DRAM, DROP, SSD, Policy, Tentative, lru_select, no_victims

_INF = float("inf")
_NAN = float("nan")
_BUCKETS = 6          # reuse=population: earlier touches 0, 1, ..., 5, 6+
_EPS = 1e-9
_MAX_RESCORE = 8
# decision counters; the compiled engine keeps them in an array in this order (_gandalf_jit.K_*)
REUSE_MODES = ("rate", "population", "hints", "learned")
COUNTERS = ("drops_fa", "drops_state", "moves_fa", "moves_state", "moves_free", "admissions_rejected_by_fee",
            "ssd_evictions", "rescore_repushes")


@dataclass(frozen=True)
class GandalfParams:
    alpha: float = setting(1.0, lo=0, allow_inf=True,
                           doc="write-fee multiplier; 0 = flash is free, inf = never pay a write fee")
    placement: str = setting("capacity_aware", "choice", choices=("capacity_aware", "strict"),
                             doc="strict: states never on SSD, FA written at DRAM entry")
    tau_s: float = setting(600.0, lo=0, lo_open=True, unit="s", expect="a positive number of seconds",
                           doc="forgetting time constant: the main admission knob at realistic prices")
    horizon_s: float | None = setting(None, lo=0, allow_inf=True, allow_none=True, unit="s", doc="H; null = tau_s")
    prior_rate: float | None = setting(None, lo=0, allow_inf=True, allow_none=True, unit="1/s",
                                       doc="r0; null = 1 / tau_s")
    prior_window_s: float | None = setting(None, lo=0, lo_open=True, allow_inf=True, allow_none=True, unit="s",
                                           doc="T0; null = tau_s")
    wear_price: str = setting("static", "choice", choices=("static", "budget_pressure"))
    victim_loss: str = setting("exact", "choice", choices=("exact", "shadow_price"))
    victim_peek: int = setting(64, lo=1, integer=True)
    moveset: str = setting("any", "choice", choices=("any", "root_side"), doc="root_side: an ablation")
    objective: str = setting("chunks", "choice", choices=("dollars", "chunks"),
                             doc="chunks: every chunk a hit counts the same (the paper's metric); dollars: "
                                 "recompute GPU-seconds + wear")
    reuse: str = setting("hints", "choice", choices=REUSE_MODES,
                         doc="hints (session-aware survival) | learned (online logistic model) | rate (the paper's "
                             "reconstruction, policies.md §2.3) | population")
    replays_per_day_scale: float = setting(1.0, lo=0, allow_inf=True,
                                           doc="for budget_pressure: simulated seconds x this = wall seconds of wear")
    engine: str = setting("auto", "choice", choices=("auto", "numba", "python"),
                          doc="victim selection: numba (compiled, when installed) or python (the interpreted "
                              "reference); same results")
    refit_requests: int = setting(500, lo=1, integer=True, doc="hints / learned: refit every this many requests")


def sizes_by_depth(size: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """The kernels' sizes (``_gandalf_jit.psize``): a STATE payload's bytes by its chunk's depth,
    then an FA payload's bytes, from ``size`` (bytes by payload handle), so that no array of sizes
    per payload is kept (16 B per chunk, twice over: as ints and as floats). A STATE's bytes are
    its position's (``ModelSpec.state_bytes_array``), an FA payload's the model's; anything else
    is refused here rather than priced wrong."""
    size = np.asarray(size, dtype=np.int64)
    depth = np.asarray(depth, dtype=np.int64)
    sbx = np.zeros((int(depth.max()) if len(depth) else 0) + 2, dtype=np.int64)
    if len(depth):
        sbx[depth] = size[1::2]
        sbx[-1] = size[0]
        if not (np.array_equal(sbx[depth], size[1::2]) and np.all(size[0::2] == sbx[-1])):
            raise ValueError("gandalf: a payload's bytes must follow from its chunk's depth")
    return sbx


class GandalfPolicy(Policy):
    name = "gandalf"
    Params = GandalfParams

    #: compiled in these settings (and the others its compiled_unsupported allows); the rest interpreted
    compiled_settings = ({"placement": "strict"}, {"reuse": "rate"}, {"reuse": "population"}, {})

    @classmethod
    def kernels_module(cls, params) -> str:
        """placement=strict (the paper's rule alone) has kernels of its own: no cost model."""
        return f"{__name__}.strict" if params.placement == "strict" else f"{__name__}.kernels"

    @classmethod
    def compiled_unsupported(cls, params) -> str | None:
        """Compiled: placement=strict, and the cost model with reuse=hints, rate or population and
        the static wear price (decisions 134-136); the rest runs the interpreted reference."""
        p = params
        if p.engine == "python":
            return "gandalf with policy.engine=python runs its interpreted reference"
        if p.placement == "strict":
            return None
        if p.reuse not in ("rate", "hints", "population"):
            return (f"gandalf with policy.reuse={p.reuse} is not compiled yet (only reuse=hints, rate or population, "
                    "or placement=strict)")
        if p.wear_price != "static":
            return f"gandalf with policy.wear_price={p.wear_price} is not compiled yet (only static)"
        return None
    wants_residency_events = True
    leaf_event_tiers = (DRAM,)          # SSD victims come back through on_global_leaf
    #: print the notice of its kernels' compilation (the compiled engine, which builds them as part
    #: of its own and says so, binds one with this off to derive its arrays)
    announce_compile = True

    def __init__(self, params=None, /, **kw):
        super().__init__(params, **kw)
        p = self.params
        self.alpha = p.alpha
        self.placement = p.placement
        self.tau = p.tau_s
        self.H = self.tau if p.horizon_s is None else p.horizon_s
        self.r0 = 1.0 / self.tau if p.prior_rate is None else p.prior_rate
        self.T0 = self.tau if p.prior_window_s is None else p.prior_window_s
        self.wear_price = p.wear_price
        self.victim_loss = p.victim_loss
        self.victim_peek = p.victim_peek
        self.moveset = p.moveset
        self.objective = p.objective
        self.reuse = p.reuse
        self.refit_requests = p.refit_requests
        # hints / learned: E = P(demanded again within the SSD's characteristic time), re-evaluated
        # at events (policies/reuse.py); keys then carry no time term (frame time constant ∞)
        self.ftau = _INF if p.reuse in ("hints", "learned") else self.tau
        self.rpd_scale = p.replays_per_day_scale
        self.engine = p.engine
        self.r0T0 = self.r0 * self.T0
        self.c = dict.fromkeys(COUNTERS, 0)

    # ------------------------------------------------------------------ setup
    def bind(self, ctx) -> None:
        super().bind(ctx)
        st = self.st
        n2 = len(st.res)
        U = n2 // 2
        self._jit = _load_jit(self.engine, self.announce_compile) if self.placement != "strict" else None
        if self._jit is None:
            # per-payload statistics as Python lists: scalar reads are on the hot path
            self.t_first = [_NAN] * n2
            self.t_last = [_NAN] * n2
            self.hits = [0] * n2
            self.sz = [float(x) for x in st.size.tolist()]
        else:
            # the compiled engine keeps the statistics in arrays (the kernels read them; the
            # interpreted methods read them too, with the same values as the lists)
            self._tf_a = np.full(n2, _NAN)
            self._tl_a = np.full(n2, _NAN)
            self._hits_a = np.zeros(n2, dtype=np.int64)
            self._sz_a = st.size.astype(np.float64)
            self.t_first, self.t_last, self.hits, self.sz = self._tf_a, self._tl_a, self._hits_a, self._sz_a
        self.dep = st.depth.tolist()
        self.ckpt_ever = np.zeros(U, dtype=bool)
        self.state_demands = np.zeros(U, dtype=np.int64)
        self.n_ckpt = 0
        self.n_demanded = 0
        self.n_demanded_twice = 0
        hw = ctx.hardware
        model = ctx.model
        ct = ctx.chunk_tokens
        self.cost = cost = ctx.cost
        rate = cost.compute_rate
        self.g = cost.usd_per_node_s                                       # $ per node-second
        maxd = int(st.depth.max()) if len(st.depth) else 1
        d = np.arange(1, maxd + 1, dtype=np.int64)
        crc = model.prefill_flops_array((d - 1) * ct, d * ct) / rate        # node-seconds per chunk by depth
        # objective=chunks with hints / learned: every chunk counts the same, at the mean recompute
        # cost of the chunks requested so far (updated at each refit, decision 45)
        self._crc_true_cum = np.concatenate([[0.0], np.cumsum(crc)])
        self._crc_sum = 0.0
        self._crc_n = 0
        if self.objective == "chunks":
            crc = np.full(maxd, float(crc[0]))
        self.crc = [0.0] + crc.tolist()
        self.crc_cum = np.cumsum(self.crc).tolist()
        self.host = cost.host_link_bytes_per_s
        self.ssd_read = cost.ssd_read_bytes_per_s
        self.ssd_lat = cost.ssd_read_latency_s
        self.cw = cost.wear_usd_per_byte
        self.waf = cost.waf
        self.tbw = cost.tbw_bytes
        self.warranty_s = hw.ssd.warranty_years * 365 * 86400.0
        self.has_ssd = st.cap[SSD] > 0
        self.fee_per_byte = self.alpha * self.cw * self.waf if self.alpha != _INF else _INF
        self._ssd_plan = None
        if self._jit is None:
            self.cand = LazyHeap()          # DRAM candidates: key = log(min(J_drop, J_move)/S) + t/τ
            self.ssd_heap = LazyHeap()
        else:
            self.cand = _JitHeap(self._jit, n2)
            self.ssd_heap = _JitHeap(self._jit, n2)
        self.t0 = None
        self.written = 0.0
        self.write_rate = 0.0
        self.rate_t = None
        self.now = 0.0
        # reuse=population: P(an FA chunk is touched again within H | touches so far), by bucket
        # of earlier touches, over references whose window has closed (policy-independent)
        self.pop_n = [0] * (_BUCKETS + 1)
        self.pop_r = [0] * (_BUCKETS + 1)
        self.pop_p = [0.5] * (_BUCKETS + 1)
        self._refs = deque()       # (t, bucket) of references still inside their window
        self._reuses = deque()     # (t of the reused reference, bucket) inside their window
        if self.placement == "strict":
            self.walk_dram = st.new_lru(DRAM)
            self.walk_ssd = st.new_lru(SSD)
        self.est = None
        self._meta = None
        self.log_age = None          # EWMA of log(age) of the SSD copies evicted: the SSD's characteristic time
        self.last_evict_t = 0.0
        if self.reuse in ("hints", "learned") and self.placement != "strict":     # strict is LRU walking
            from ..reuse import make_reuse
            self.est = make_reuse(self.reuse, n2, st.depth, compiled=self._jit is not None,
                                  refit_requests=self.refit_requests)
        if self._jit is not None:
            self._jit_setup()

    # ------------------------------------------------------------------ statistics
    def on_access(self, payloads, now, meta) -> None:
        self.now = now
        if self.t0 is None:
            self.t0 = now
        path = meta.path
        m = len(path)
        if not m:
            return
        tf, tl, hits = self.t_first, self.t_last, self.hits
        if self.reuse == "population":
            self._population(path, now)
        if self._jit is not None:
            ps = fa_of(path)                     # a path's chunks are distinct
            seen = self._tf_a[ps] == self._tf_a[ps]
            self._hits_a[ps[seen]] += 1          # a later request demanded it (policy-independent)
            self._tf_a[ps[~seen]] = now
            self._tl_a[ps] = now
        else:
            for c in path.tolist():
                p = fa_of(c)
                if tf[p] == tf[p]:
                    hits[p] += 1                 # a later request demanded it (policy-independent)
                else:
                    tf[p] = now
                tl[p] = now
        # STATE demand: the deepest checkpoint position ever created on the path
        w = np.flatnonzero(self.ckpt_ever[path])
        if self.est is not None:
            self._meta = meta
            if self.objective == "chunks":
                self._crc_sum += self._crc_true_cum[m]
                self._crc_n += m
            self._rekey(self.est.access(path, state_of(int(path[w[-1]])) if len(w) else -1, now, meta))
        if len(w):
            c = int(path[w[-1]])
            q = state_of(c)
            k = int(self.state_demands[c])
            self.state_demands[c] = k + 1
            if k == 0:
                self.n_demanded += 1
            elif k == 1:
                self.n_demanded_twice += 1
            if k >= 1:
                self.hits[q] += 1
            self.t_last[q] = now

    def _population(self, path, now) -> None:
        """Resolve references whose window H closed; record this request's references."""
        H = self.H
        tf, tl, hits = self.t_first, self.t_last, self.hits
        refs, reuses = self._refs, self._reuses
        if self._jit is not None:
            ps = fa_of(path)
            t0 = self._tf_a[ps]
            t1 = self._tl_a[ps]
            h = self._hits_a[ps]
            seen = t0 == t0
            b = np.where(seen, np.minimum(h + 1, _BUCKETS), 0)
            again = seen & (now - t1 <= H)
            reuses.extend(zip(t1[again].tolist(), np.minimum(h[again], _BUCKETS).tolist()))
            refs.extend(zip([now] * len(ps), b.tolist()))
        else:
            for c in path.tolist():
                p = fa_of(c)
                seen = tf[p] == tf[p]
                b = min(hits[p] + 1, _BUCKETS) if seen else 0
                if seen and now - tl[p] <= H:
                    reuses.append((tl[p], min(hits[p], _BUCKETS)))
                refs.append((now, b))
        changed = False
        while refs and refs[0][0] + H < now:
            _, b = refs.popleft()
            self.pop_n[b] += 1
            changed = True
        while reuses and reuses[0][0] + H < now:
            _, b = reuses.popleft()
            self.pop_r[b] += 1
        if changed:
            self.pop_p = [(r + 1.0) / (n + 2.0) for r, n in zip(self.pop_r, self.pop_n)]
            if self._jit is not None:
                self._popp_a[:] = self.pop_p

    def _fa_e0(self, p: int, tl: float) -> float:
        """E_hits of FA payload ``p`` at its last touch ``tl`` (before decay)."""
        if self.est is not None:
            return float(self.est.E[p])
        if self.reuse == "population":
            if tl != tl:
                return self.pop_p[0]
            return self.pop_p[min(self.hits[p], _BUCKETS)]
        if tl != tl:
            return self.r0 * self.H
        return (self.hits[p] + self.r0T0) / (tl - self.t_first[p] + self.T0) * self.H

    def on_insert(self, payloads, now) -> None:
        states = payloads[is_state(payloads) == 1]
        if len(states):
            cs = chunk_of(states)
            new = ~self.ckpt_ever[cs]
            self.n_ckpt += int(new.sum())
            self.ckpt_ever[cs] = True
            tf, tl = self.t_first, self.t_last
            if self._jit is not None:
                t0 = tf[states]
                tf[states] = np.where(t0 != t0, now, t0)
                tl[states] = now
            else:
                for q in states.tolist():
                    if tf[q] != tf[q]:
                        tf[q] = now
                    tl[q] = now
            if self.est is not None:
                self._rekey(self.est.created_states(states, now, self._meta))

    def on_enter(self, tier, p) -> None:
        if self._jit is not None:
            self.on_enter_many(tier, np.asarray([p], dtype=np.int64))
            return
        st = self.st
        if tier == SSD:
            sz = float(st.size[p])
            self.written += sz
            if self.wear_price == "budget_pressure":
                self._note_write(sz)
            if self.placement != "strict":
                self.ssd_heap.push(p, self._ssd_key(p, self.now), tie=p)
            return
        if self.placement == "strict":
            if tier == DRAM and not is_state(p) and self.has_ssd and not st.res[p] & IN_SSD:
                self.ctx.request_ssd_admission(p)
            return
        if tier == DRAM and (is_state(p) or st.dcnt[DRAM][chunk_of(p)] == 0):
            self._push_cand(p)            # an FA chunk with DRAM descendants waits for its leaf event
        if st.res[p] & IN_SSD and p not in self.ssd_heap:
            # its SSD copy is no longer the last one: evictable again
            self.ssd_heap.push(p, self._ssd_key(p, self.now), tie=p)

    def on_leave(self, tier, p) -> None:
        if tier == DRAM:
            self.cand.discard(p)
        elif tier == SSD:
            self.ssd_heap.discard(p)

    # -- batched residency events (CacheState: one call per batch; the same heap changes, in the
    #    same order, as the per-event methods; compiled with the compiled engine)
    def on_enter_many(self, tier, ps) -> None:
        if self._jit is None:
            for p in ps.tolist():
                self.on_enter(tier, p)
            return
        if tier == SSD:
            sizes = self.st.size[ps].tolist()
            if self.wear_price == "budget_pressure":
                for sz in sizes:
                    self.written += sz
                    self._note_write(float(sz))
            else:
                w = self.written
                for sz in sizes:
                    w += sz
                self.written = w
        self._jit_events(0, tier, ps, _NO_PLAN)

    def on_leave_many(self, tier, ps) -> None:
        if self._jit is None:
            for p in ps.tolist():
                self.on_leave(tier, p)
            return
        if tier == DRAM:
            self.cand.discard_many(ps)
        elif tier == SSD:
            self.ssd_heap.discard_many(ps)

    def on_leaf_events(self, tier, kinds, chunks) -> None:
        """CacheState.leaf_events: kind 0 = on_leaf(tier, chunk), 1 = on_global_leaf(chunk)."""
        if self._jit is None:
            for k, c in zip(kinds.tolist(), chunks.tolist()):
                if k == 0:
                    self.on_leaf(tier, c)
                else:
                    self.on_global_leaf(c)
            return
        self._jit_events(1, tier, kinds, chunks)

    def _note_ssd_victims(self, ps) -> None:
        """The SSD's characteristic time (Che): a geometric running mean of the ages (time since
        the last touch) of the copies the SSD gives up; ∞ until it has given one up."""
        tl = self.t_last
        now = self.now
        self.last_evict_t = now
        la = self.log_age
        for t in (tl[np.asarray(ps, dtype=np.int64)].tolist() if self._jit is not None else [tl[p] for p in ps]):
            if t == t:
                x = math.log(max(now - t, 1.0))
                la = x if la is None else 0.999 * la + 0.001 * x
        self.log_age = la

    def tick(self, now) -> None:
        if self.est is None:
            return
        self.now = now
        st = self.st
        if self.log_age is None or st.used[SSD] + st.fa_bytes <= st.cap[SSD]:
            self.est.H = _INF          # nothing given up yet, or room left: a copy written now stays
        else:
            # the SSD's characteristic time, and at least as long as nothing has been given up
            self.est.H = max(math.exp(self.log_age), now - self.last_evict_t)
        low = self.est.tick(now, self.st.res)
        if low is None:
            if self.objective == "chunks" and self._crc_n:
                self._set_chunk_value(self._crc_sum / self._crc_n)
            self._rekey_all()
        else:
            self._rekey(low)

    def _set_chunk_value(self, v: float) -> None:
        """objective=chunks: every chunk is worth ``v`` node-seconds of recompute."""
        n = len(self.crc)
        self.crc = [0.0] + [v] * (n - 1)
        self.crc_cum = (np.arange(n, dtype=np.float64) * v).tolist()
        if self._jit is not None:
            self._crc_a[1:] = v
            self._crc_cum_a[:] = np.arange(n, dtype=np.float64) * v

    def _rekey(self, ps) -> None:
        """Re-push the heap entries of payloads whose estimate went down (a stored key must
        never exceed the current one: keys are lower bounds, re-scored at pop)."""
        if not len(ps):
            return
        if self._jit is not None:
            self._jit_rekey(ps)
            return
        now = self.now
        for p in ps.tolist():
            if p in self.cand:
                self.cand.push(p, self._cand_key(p, now), tie=p)
            if p in self.ssd_heap:
                self.ssd_heap.push(p, self._ssd_key(p, now), tie=p)

    def _rekey_all(self) -> None:
        if self._jit is not None:
            members = np.flatnonzero((self.cand.mem != 0) | (self.ssd_heap.mem != 0))
        else:
            members = np.asarray(sorted(set(self.cand.items()) | set(self.ssd_heap.items())), dtype=np.int64)
        self._rekey(members)

    def on_leaf(self, tier, c) -> None:
        if self.placement == "strict":
            return
        if self._jit is not None:
            self._jit_events(1, tier, _KIND_LEAF, np.asarray([c], dtype=np.int64))
            return
        p = fa_of(c)
        if tier == DRAM and self.st.res[p] & IN_DRAM and p not in self.cand:
            # an entry already there (pushed when a selection opened it up) keeps its key: keys
            # are lower bounds that only rise, re-scored at pop
            self._push_cand(p)

    def on_global_leaf(self, c) -> None:
        if self.placement == "strict":
            return
        if self._jit is not None:
            self._jit_events(1, SSD, _KIND_GLOBAL, np.asarray([c], dtype=np.int64))
            return
        p = fa_of(c)
        r = self.st.res[p]
        if r & IN_DRAM and p not in self.cand and self.st.dcnt[DRAM][c] == 0:
            self._push_cand(p)
        if r & IN_SSD and p not in self.ssd_heap:
            self.ssd_heap.push(p, self._ssd_key(p, self.now), tie=p)

    # ------------------------------------------------------------------ estimates
    def _rate(self, p) -> float:
        tl = self.t_last[p]
        if tl != tl:  # nan: never seen
            return self.r0
        return (self.hits[p] + self.r0T0) / (tl - self.t_first[p] + self.T0)

    def e_hits(self, p: int, now: float) -> float:
        if self.est is not None:
            return float(self.est.E[p])
        tl = self.t_last[p]
        if tl != tl:
            tl = now
        decay = math.exp(-(now - tl) / self.ftau)
        if not is_state(p):
            return self._fa_e0(p, self.t_last[p]) * decay
        c = chunk_of(p)
        k = int(self.state_demands[c])
        if k == 0:
            prior = (self.n_demanded + 1.0) / (self.n_ckpt + 2.0)
            return prior * decay
        again = (self.n_demanded_twice + 1.0) / (self.n_demanded + 2.0)
        est = again * decay
        if k >= 2:
            est = max(est, self._rate(p) * self.H * decay)
        return est

    def c_rc(self, p: int) -> float:
        """Recompute cost in node-seconds of losing payload ``p`` (STATE: back to the deepest ancestor state)."""
        st = self.st
        c = chunk_of(p)
        d = self.dep[c]
        if not is_state(p):
            return self.crc[d]
        anc = st.ancestors(c)
        if len(anc):
            w = np.flatnonzero(st.res[state_of(anc)])
            dm = int(w[-1]) + 1 if len(w) else 0
        else:
            dm = 0
        return float(self.crc_cum[d] - self.crc_cum[dm])

    def _ld_dram(self, sz: float) -> float:
        return self.cost.dram_load_s(sz)

    def _ld_ssd(self, sz: float) -> float:
        return self.cost.ssd_load_s(sz)

    def _fee(self, p: int, now: float) -> float:
        """α·W(p): zero with a valid SSD copy (inclusive tiering); α = ∞ means 'never pay'."""
        if self.st.res[p] & IN_SSD:
            return 0.0
        if self.alpha == _INF:
            return _INF
        return self.alpha * self._cw(now) * self.waf * self.sz[p]

    def _cw(self, now: float) -> float:
        if self.wear_price == "static" or self.tbw <= 0:
            return self.cw
        day = 86400.0
        elapsed = (now - (self.t0 or now)) * self.rpd_scale
        budget_left = (self.tbw * (elapsed + day) / self.warranty_s - self.written) / day
        if budget_left <= 0:
            return self.cw * 1e6
        return self.cw * max(1.0, self.write_rate * self.rpd_scale / budget_left)

    def _note_write(self, sz: float) -> None:
        now = self.now
        if self.rate_t is None:
            self.rate_t = now
        dt = now - self.rate_t
        if dt > 0:
            self.write_rate *= math.exp(-dt / self.tau)
            self.rate_t = now
        self.write_rate += sz / self.tau

    def j_drop(self, p: int, now: float) -> float:
        return self.e_hits(p, now) * self.g * self.c_rc(p)

    def _drop_key(self, p: int) -> float:
        """Time-invariant drop key: log(J_drop/S at time t_last) + t_last/τ (FA); STATE keys are
        re-scored at peek, so they use the same form at the current time."""
        sz = self.sz[p]
        tl = self.t_last[p]
        if not is_state(p):
            v = self._fa_e0(p, tl) * self.g * self.crc[self.dep[chunk_of(p)]] / sz
            if tl != tl:
                tl = self.now
            return (math.log(v) if v > 0 else -1e300) + tl / self.ftau
        if tl != tl:
            tl = self.now
        v = self.e_hits(p, tl) * self.g * self.c_rc(p) / sz
        return (math.log(v) if v > 0 else -1e300) + tl / self.ftau

    def _ssd_key(self, p: int, now: float) -> float:
        """Time-invariant SSD-victim key: log(lost value per byte at t_last) + t_last/τ.

        The lost value decays as exp(−(t − t_last)/τ), so, as for drop keys, the shared
        −t/τ term never reorders entries. A copy is valued the same whether or not the
        payload also has a DRAM copy (docs/decisions.md 31): with a DRAM far smaller than
        the SSD the DRAM copy is transient, and pricing the SSD copy at the fee to write
        it again made the SSD evict exactly the copies just hit, to rewrite them at the
        next DRAM eviction (on the whole WEKA trace: 4.2 M of 5.0 M FA writes were
        rewrites)."""
        sz = self.sz[p]
        tl = self.t_last[p]
        if tl != tl:
            tl = now
        loss = max(0.0, self.e_hits(p, tl) * self.g * (self.c_rc(p) - self._ld_ssd(sz)))
        return (math.log(loss / sz) if loss > 0 else -1e300) + tl / self.ftau

    def _move_key(self, p: int, now: float) -> float:
        sz = self.sz[p]
        if self.st.res[p] & IN_SSD:
            fee = 0.0
        elif self.alpha == _INF:
            return _INF
        elif self.wear_price == "static":
            fee = self.fee_per_byte * sz
        else:
            fee = self._fee(p, now)
        if is_state(p):
            e = self.e_hits(p, now)
        else:                                 # FA: e_hits inlined (hot path)
            tl = self.t_last[p]
            e = self._fa_e0(p, tl)
            if tl == tl:
                e *= math.exp((tl - now) / self.ftau)
        # C_ld,S − C_ld,D = SSD latency + S / SSD read bandwidth
        return (fee + e * self.g * (self.ssd_lat + sz / self.ssd_read)) / sz

    def _cand_key(self, p: int, now: float) -> float:
        """A lower bound, now and later, of log(min(J_drop, J_move)/S) + t/τ.

        In this frame (costs times e^{t/τ}) the drop cost is constant between touches, the
        load part of J_move too, and its write fee grows; L_vict ≥ 0 is left out (it needs
        the SSD's state at selection time). So a stored key never exceeds the candidate's
        current one and lazy re-keying at pop stays exact (a touch only raises it)."""
        jd = self._drop_key(p)
        if not self.has_ssd:
            return jd
        jm = self._move_key(p, now)
        jm = (math.log(jm) if jm > 0 else -1e300) + now / self.ftau if jm != _INF else _INF
        return jd if jd < jm else jm

    def _push_cand(self, p: int) -> None:
        self.cand.push(p, self._cand_key(p, self.now), tie=p)

    # -- heap changes during a selection are journaled (LazyHeap.journal), so a selection that
    #    cannot free enough undoes every pop, re-key and push it made (select_victims is atomic)
    def _begin(self):
        self.cand.journal = []
        self.ssd_heap.journal = []

    def _commit(self):
        self.cand.journal = None
        self.ssd_heap.journal = None

    def _undo(self):
        self.cand.undo()
        self.ssd_heap.undo()

    # ------------------------------------------------------------------ decisions
    def select_victims(self, tier, bytes_needed, now):
        self.now = now
        if self.placement == "strict":
            if tier == DRAM:
                act = (lambda p: DROP if is_state(p) else (DEMOTE if self.has_ssd else DROP))
                out = lru_select(self.st, self.walk_dram, DRAM, bytes_needed, act)
            else:
                out = lru_select(self.st, self.walk_ssd, SSD, bytes_needed, DROP)
            for p, a in out:
                self._count(p, a, tier)
            return out
        if self._jit is not None:
            out = self._jit_select(tier, bytes_needed, now)
        elif tier == SSD:
            out = self._select_ssd(bytes_needed, now)
        else:
            out = self._select_dram(bytes_needed, now)
        if tier == SSD and out and self.est is not None:
            self._note_ssd_victims([p for p, _ in out])
        return out

    def _count(self, p, a, tier):
        if tier == SSD:
            self.c["ssd_evictions"] += 1
            return
        kind = "state" if is_state(p) else "fa"
        if a == DEMOTE:
            self.c[f"moves_{kind}"] += 1
            if self.st.res[p] & IN_SSD:
                self.c["moves_free"] += 1
        else:
            self.c[f"drops_{kind}"] += 1

    # -- tentative leaf bookkeeping shared by both selections
    class _Tent(Tentative):
        """:class:`Tentative` over payloads, remembering which were chosen."""
        __slots__ = ("chosen",)

        def __init__(self, st, tier):
            super().__init__(st, tier)
            self.chosen = set()

        def take(self, p, drop_last):
            """Record payload ``p`` as chosen; returns ``(y, par)``: the ancestor in this tier
            whose credit changed and the parent (−1 if none)."""
            self.chosen.add(p)
            if is_state(p):
                return -1, -1
            c = chunk_of(p)
            par = int(self.st.parent[c])
            if par < 0:
                return -1, -1
            return self.choose(c, drop_last), par

    def _drop_ok(self, p, tent):
        """True, "later" (blocked only by this selection), or False (not in the DropSet now)."""
        st = self.st
        if is_state(p):
            return True
        c = chunk_of(p)
        d = int(st.dcnt[DRAM][c])
        cr = tent.cred.get(c, 0)
        if d and d != cr:
            return "later" if cr else False
        if st.res[p] == IN_DRAM:                     # last copy: prefix closure
            da = int(st.dany[c])
            ca = tent.cred_any.get(c, 0)
            if da and da != ca:
                return "later" if ca else False
        return True

    def _move_ok(self, p, tent):
        st = self.st
        if is_state(p):
            return True                       # capacity_aware: states may borrow the SSD
        c = chunk_of(p)
        d = int(st.dcnt[DRAM][c])
        if d and d != tent.cred.get(c, 0):
            return "later" if tent.cred.get(c) else False
        if self.moveset == "root_side":
            par = int(st.parent[c])
            if par >= 0 and not st.res[fa_of(par)] & IN_SSD:
                return "later"
        return True

    def _open_up(self, y, tent):
        """Chunk ``y`` may have become a DRAM leaf through this selection's choices: make it a
        candidate (it left the heap, or never was in it, while it had DRAM descendants).
        Returns the key pushed, or None."""
        st = self.st
        q = fa_of(y)
        if q in self.cand or not st.res[q] & IN_DRAM or st.pin[q] == st.cur or q in tent.chosen \
                or not tent.is_leaf(y):
            return None
        k = self._cand_key(q, self.now)
        self.cand.push(q, k, tie=q)
        return k

    def _select_dram(self, need, now):
        """Free ``need`` DRAM bytes: repeatedly take the candidate whose cheaper action (drop or
        move) costs least per byte freed (policies.md §2.5), with the SSD as tentatively
        changed by the moves already taken. Atomic: a selection that cannot free enough
        undoes every heap change it made."""
        st = self.st
        heap = self.cand
        tent = self._Tent(st, DRAM)
        self._begin()
        out = []
        freed = 0
        aside = []
        ssd_free = st.cap[SSD] - st.used[SSD]
        pool = _VictimPool(self, now)
        tnow = now / self.ftau
        has_ssd = self.has_ssd
        res = st.res
        pin = st.pin
        cur = st.cur
        sz_of = self.sz
        counts = dict(self.c)
        tries = 0
        while freed < need:
            e = heap.pop()
            if e is None:
                break
            key, _, p = e
            if not res[p] & IN_DRAM:
                continue
            if pin[p] == cur or p in tent.chosen:
                aside.append((key, p))
                continue
            dok = self._drop_ok(p, tent)
            mok = self._move_ok(p, tent) if has_ssd else False
            if dok is not True and mok is not True:
                if dok == "later" or mok == "later":
                    aside.append((key, p))     # ineligible only because of this selection's choices
                continue                       # structurally ineligible: back on a leaf event
            sz = sz_of[p]
            jd = math.exp(self._drop_key(p) - tnow) if dok is True else _INF      # J_drop / S now
            jm = plan = None
            if mok is True:
                jm, plan = self._move_cost(p, now, pool, ssd_free)
            free_move = jm is not None and jm != _INF and plan[0] == 0.0 and plan[1] == 0.0
            best = jd if jm is None or jd <= jm else jm
            if not free_move and tries < _MAX_RESCORE:
                fresh = (math.log(best) if best > 0 else -1e300) + tnow if best != _INF else _INF
                if fresh > key + _EPS * max(1.0, abs(key)):
                    nxt = heap.peek()
                    if nxt is not None and fresh > nxt[0]:
                        tries += 1
                        self.c["rescore_repushes"] += 1
                        heap.push(p, fresh, tie=p)
                        continue
            tries = 0
            if best == _INF and not free_move:
                if dok == "later":             # the drop may open up later in this selection
                    aside.append((key, p))
                continue                       # neither action possible now (α = ∞, no copy; no drop)
            if free_move or (jm is not None and jm < jd):
                if not res[p] & IN_SSD:
                    ssd_free -= int(sz)
                    pool.consume(plan[2])
                    ssd_free += plan[2]
                y, _ = tent.take(p, False)
                out.append((p, DEMOTE))
            else:
                if plan is not None and plan[0] > 0:
                    self.c["admissions_rejected_by_fee"] += 1      # a paid write was declined
                y, _ = tent.take(p, res[p] == IN_DRAM and not is_state(p))
                out.append((p, DROP))
            freed += int(sz)
            if y >= 0:
                self._open_up(y, tent)
        if freed < need:
            self._undo()
            self.c.update(counts)          # a failed selection decided nothing
            return no_victims(need - freed)    # lets the node trim the right amount in one step
        self._commit()
        taken = {p for p, _ in out}
        for key, p in aside:
            if p not in taken and res[p] & IN_DRAM:
                heap.push(p, key, tie=p)
        pool.restore()
        self._ssd_plan = [q for _, _, q in pool.items[:pool.used]] or None
        for p, a in out:
            heap.discard(p)
            self._count(p, a, DRAM)
        return out

    def _move_cost(self, p, now, pool, ssd_free):
        """(J_move/S, (fee, L_vict, victim bytes)) with the SSD as tentatively changed by this selection."""
        st = self.st
        sz = self.sz[p]
        e = self.e_hits(p, now)
        load = e * self.g * (self._ld_ssd(sz) - self._ld_dram(sz))
        if st.res[p] & IN_SSD:
            return (load / sz, (0.0, 0.0, 0))
        fee = self._fee(p, now)
        if fee == _INF:
            return (_INF, (fee, 0.0, 0))
        short = int(sz) - ssd_free
        if short <= 0:
            return ((fee + load) / sz, (fee, 0.0, 0))
        lvict, vbytes = pool.cost_of(short)
        if lvict == _INF:
            return (_INF, (fee, lvict, 0))
        return ((fee + lvict + load) / sz, (fee, lvict, vbytes))

    def _select_ssd(self, need, now):
        plan, self._ssd_plan = self._ssd_plan, None
        if plan:
            out = self._take_plan(plan, need)
            if out:
                return out
        st = self.st
        tent = self._Tent(st, SSD)
        self._begin()
        heap = self.ssd_heap
        out = []
        freed = 0
        aside = []
        cur = st.cur
        counts = dict(self.c)
        while freed < need:
            e = heap.pop()
            if e is None:
                break
            key, _, p = e
            if not st.res[p] & IN_SSD or st.pin[p] == cur or p in tent.chosen:
                if st.res[p] & IN_SSD:
                    aside.append((key, p))
                continue
            if not is_state(p) and st.res[p] == IN_SSD and not tent.may_drop_last(chunk_of(p)):
                if tent.cred_any.get(chunk_of(p)):
                    aside.append((key, p))       # blocked only by this selection's own choices
                continue                          # not evictable now: back on a global-leaf event
            fresh = self._ssd_key(p, now)
            nxt = heap.peek()
            if fresh > key + _EPS * max(1.0, abs(key)) and nxt is not None and fresh > nxt[0]:
                self.c["rescore_repushes"] += 1
                heap.push(p, fresh, tie=p)
                continue
            _, par = tent.take(p, st.res[p] == IN_SSD and not is_state(p))
            out.append((p, DROP))
            freed += int(st.size[p])
            if par >= 0:
                # the parent's last copy may have become droppable through this choice
                q = fa_of(par)
                if st.res[q] == IN_SSD and q not in heap and st.pin[q] != cur and tent.may_drop_last(par):
                    heap.push(q, self._ssd_key(q, now), tie=q)
        if freed < need:
            self._undo()
            self.c.update(counts)          # a failed selection decided nothing
            return []
        self._commit()
        taken = {p for p, _ in out}
        for key, p in aside:
            if p not in taken:
                heap.push(p, key, tie=p)
        for p, _ in out:
            heap.discard(p)
        self.c["ssd_evictions"] += len(out)
        return out

    def _take_plan(self, plan, need):
        """The SSD victims the last DRAM selection priced its moves against (L_vict), in the
        order it consumed them, if they still free ``need`` bytes; else []."""
        st = self.st
        tent = self._Tent(st, SSD)
        cur = st.cur
        out = []
        freed = 0
        for p in plan:
            if freed >= need:
                break
            if not st.res[p] & IN_SSD or st.pin[p] == cur or p in tent.chosen:
                continue
            if not is_state(p) and st.res[p] == IN_SSD and not tent.may_drop_last(chunk_of(p)):
                continue
            tent.take(p, st.res[p] == IN_SSD and not is_state(p))
            out.append((p, DROP))
            freed += int(st.size[p])
        if freed < need:
            return []
        for p, _ in out:
            self.ssd_heap.discard(p)
        self.c["ssd_evictions"] += len(out)
        return out

    # -- the compiled engine (policies/_gandalf_jit.py): same decisions, arrays instead of objects
    def _jit_setup(self):
        J = self._jit
        st = self.st
        n2 = len(st.res)
        U = n2 // 2
        from ...trace.chunks import wide   # the kernels are typed for int64 ids: one shared copy of an int32 trace
        self._C = (st.res, st.pin, sizes_by_depth(st.size, st.depth), wide(st.parent), wide(st.depth), wide(st.anchor),
                   wide(st.flat),
                   st.dcnt[DRAM], st.dcnt[SSD], st.dany)
        self._crc_a = np.asarray(self.crc, dtype=np.float64)
        self._crc_cum_a = np.asarray(self.crc_cum, dtype=np.float64)
        self._P = np.zeros(J.N_PARAMS)
        self._F = np.zeros(J.N_FLAGS, dtype=np.int64)
        P, F = self._P, self._F
        P[J.A_ALPHA], P[J.A_TAU], P[J.A_H], P[J.A_R0], P[J.A_T0] = self.alpha, self.ftau, self.H, self.r0, self.T0
        P[J.A_R0T0], P[J.A_G], P[J.A_HOST], P[J.A_SSDREAD] = self.r0T0, self.g, self.host, self.ssd_read
        P[J.A_SSDLAT], P[J.A_CW], P[J.A_WAF], P[J.A_FEEPB] = self.ssd_lat, self.cw, self.waf, self.fee_per_byte
        F[J.F_POP] = self.reuse == "population"
        F[J.F_HASSSD] = bool(self.has_ssd)
        F[J.F_STATIC] = self.wear_price == "static"
        F[J.F_SHADOW] = self.victim_loss == "shadow_price"
        F[J.F_PEEK] = self.victim_peek
        F[J.F_ROOTSIDE] = self.moveset == "root_side"
        F[J.F_EST] = self.est is not None
        self._E_a = self.est.E if self.est is not None else np.zeros(1)
        self._K = np.zeros(len(COUNTERS), dtype=np.int64)
        self._G = np.zeros(2, dtype=np.int64)
        self._popp_a = np.asarray(self.pop_p, dtype=np.float64)
        # the kernels' leading arguments: arrays updated in place, so built once
        self._Stup = (self._tf_a, self._tl_a, self._hits_a, self.state_demands, self._popp_a,
                      self._crc_a, self._crc_cum_a, self._E_a)
        self._ev_args = (*self._C, *self._Stup, P, F, *self.cand.tup, *self.ssd_heap.tup)

        def tent():
            return (np.zeros(U, dtype=np.int64), np.zeros(U, dtype=np.int64), np.zeros(U, dtype=np.int64),
                    np.zeros(U, dtype=np.int64), np.zeros(n2, dtype=np.int64))
        self._TD = tent()
        self._TS = tent()

    def _jit_select(self, tier, need, now):
        J = self._jit
        st = self.st
        self.cand.flush()
        self.ssd_heap.flush()
        P, F = self._P, self._F
        P[J.A_CWNOW] = self._cw(now)
        P[J.A_NCKPT], P[J.A_NDEM], P[J.A_NDEM2] = self.n_ckpt, self.n_demanded, self.n_demanded_twice
        F[J.F_CUR] = st.cur
        S = self._S()
        if tier == SSD:
            plan, self._ssd_plan = self._ssd_plan, None
            if plan is None:
                plan = _NO_PLAN
            ps = J.select_ssd_flat(*self._C, *S, P, F, self._K, *self.ssd_heap.tup, *self._TS, self._G,
                                   int(need), float(now), plan)
            out = [(p, DROP) for p in ps.tolist()]
        else:
            ps, acts, plan, short = J.select_dram_flat(*self._C, *S, P, F, self._K, *self.cand.tup,
                                                       *self.ssd_heap.tup, *self._TD, *self._TS, self._G,
                                                       int(need), float(now), int(st.cap[SSD] - st.used[SSD]))
            if short:
                out = no_victims(int(short))
            else:
                self._ssd_plan = plan if len(plan) else None
                out = list(zip(ps.tolist(), acts.tolist()))        # actions are DROP / DEMOTE
        self.c.update(zip(COUNTERS, self._K.tolist()))
        return out

    def _S(self):
        return self._Stup

    def _jit_rekey(self, ps) -> None:
        self._jit_events(2, DRAM, np.asarray(ps, dtype=np.int64), _NO_PLAN)

    def _jit_events(self, what, tier, a, b) -> None:
        """The compiled residency events (_gandalf_jit.events_flat): 0 on_enter of ``a``, 1 leaf
        events (kinds ``a``, chunks ``b``), 2 _rekey of ``a``; the heaps' queues go first."""
        J = self._jit
        self.cand.flush()
        self.ssd_heap.flush()
        P = self._P
        P[J.A_CWNOW] = self._cw(self.now)
        P[J.A_NCKPT], P[J.A_NDEM], P[J.A_NDEM2] = self.n_ckpt, self.n_demanded, self.n_demanded_twice
        self._F[J.F_CUR] = self.st.cur
        J.events_flat(*self._ev_args, what, tier, float(self.now), a, b)

    def counters(self):
        if self._jit is not None:
            self.cand.flush()
            self.ssd_heap.flush()
        c = dict(self.c)
        c["stale_pops"] = self.cand.stale_pops + self.ssd_heap.stale_pops
        c["heap_rebuilds"] = self.cand.rebuilds + self.ssd_heap.rebuilds
        c["states_checkpointed"] = self.n_ckpt
        c["states_demanded"] = self.n_demanded
        c["states_demanded_twice"] = self.n_demanded_twice
        if self.est is not None:
            c["horizon_s"] = self.est.H if self.est.H != _INF else 0.0
            c["estimator_refits"] = getattr(self.est, "_last_refit", 0) and \
                1 + (self.est.seen - self.est.first_refit) // self.est.refit_requests
            if self.reuse == "learned":
                c["model_fits"] = self.est.fits
        return c


#: seconds a fresh install spends compiling Gandalf's kernels on its first run (measured on the 2-core
#: machine; the notice quotes it)
GANDALF_COMPILE_S = 60
_NO_PLAN = np.zeros(0, dtype=np.int64)
_KIND_LEAF = np.zeros(1, dtype=np.int64)
_KIND_GLOBAL = np.ones(1, dtype=np.int64)


def _load_jit(engine: str, announce: bool = True):
    """The compiled kernels module for ``engine`` (auto: if numba imports), or None."""
    if engine == "python":
        return None
    J, err = _import_jit_module()
    if J is not None and announce:
        _announce()
    if J is None and engine == "numba":
        raise ConfigError("policy.engine", f"numba is not available ({err}); install numba or use "
                                           "policy.engine=python")
    return J


@functools.cache
def _import_jit_module():
    """(kernels module, None) or (None, the import error); once per process."""
    try:
        return importlib.import_module("cluster_sim.policies._gandalf_jit"), None
    except ImportError as e:
        return None, e


@functools.cache
def _announce() -> None:
    """Once per process: a notice when Gandalf's kernels have not been compiled yet."""
    J, _ = _import_jit_module()
    if not (cached(J.__file__, "_gandalf_jit.select_dram_flat-") and cached(J.__file__, "_reuse_jit.tick-")):
        print(f"cluster_sim: compiling Gandalf's kernels (victim selection, reuse estimator; numba, once per "
              f"install, about {GANDALF_COMPILE_S} s; not counted in sim_wall_s)", file=sys.stderr)


class _JitHeap:
    """A lazy heap held in arrays for the compiled engine. Between selections the interpreter's
    pushes and discards are queued (membership is kept current in ``mem``) and replayed in
    order by the next kernel call, so the heap evolves exactly as a LazyHeap would."""

    __slots__ = ("J", "tup", "mem", "meta", "_ops", "_items", "_keys")

    def __init__(self, J, n: int):
        from numba.typed import List

        store = List()
        store.append(np.empty((1024, 3), dtype=np.float64))
        self.J = J
        self.mem = np.zeros(n, dtype=np.uint8)
        self.meta = np.zeros(J.N_META, dtype=np.int64)
        self.tup = (store, np.zeros(n, dtype=np.int64), self.mem, self.meta)
        self._ops: list[int] = []
        self._items: list[int] = []
        self._keys: list[float] = []

    def push(self, item: int, key: float, tie: int = 0) -> None:
        self.mem[item] = 1
        self._ops.append(1)
        self._items.append(item)
        self._keys.append(key)

    def push_many(self, items: np.ndarray, keys: np.ndarray) -> None:
        self.mem[items] = 1
        self._ops.extend([1] * len(items))
        self._items.extend(items.tolist())
        self._keys.extend(keys.tolist())

    def discard(self, item: int) -> None:
        if self.mem[item]:
            self.mem[item] = 0
            self._ops.append(0)
            self._items.append(item)
            self._keys.append(0.0)

    def discard_many(self, items: np.ndarray) -> None:
        """discard() of each of the distinct ``items``, in order."""
        items = items[self.mem[items] != 0]
        if len(items):
            self.mem[items] = 0
            self._ops.extend([0] * len(items))
            self._items.extend(items.tolist())
            self._keys.extend([0.0] * len(items))

    def __contains__(self, item: int) -> bool:
        return bool(self.mem[item])

    def flush(self) -> None:
        if self._ops:
            self.J.h_flush(*self.tup, np.asarray(self._ops, dtype=np.int64),
                           np.asarray(self._items, dtype=np.int64), np.asarray(self._keys, dtype=np.float64))
            self._ops, self._items, self._keys = [], [], []

    @property
    def stale_pops(self) -> int:
        return int(self.meta[self.J.M_STALE])

    @property
    def rebuilds(self) -> int:
        return int(self.meta[self.J.M_REBUILDS])


class _VictimPool:
    """The cheapest SSD victims (per byte), materialised lazily for one DRAM selection, so that
    successive moves in the same selection consume distinct victims (exact mode) or price
    bytes at the pool's marginal per-byte value (shadow-price mode)."""

    def __init__(self, pol: GandalfPolicy, now: float):
        self.pol = pol
        self.now = now
        self.items: list[tuple[float, int, int]] = []   # (value, bytes, payload), cheapest per byte first
        self.popped: list[tuple[float, int]] = []       # heap entries to restore
        self.used = 0                                    # victims consumed by earlier moves
        self.done = False
        self.tent = pol._Tent(pol.st, SSD)               # evicting a pool prefix may free a parent

    def _more(self) -> bool:
        if self.done or len(self.items) >= self.pol.victim_peek + self.used:
            return False
        pol = self.pol
        st = pol.st
        cur = st.cur
        while True:
            e = pol.ssd_heap.pop()
            if e is None:
                self.done = True
                return False
            key, _, p = e
            if not st.res[p] & IN_SSD:
                continue
            if not is_state(p) and st.res[p] == IN_SSD and not self.tent.may_drop_last(chunk_of(p)):
                continue            # last copy with resident descendants: back on a global-leaf event
            if st.pin[p] == cur:
                self.popped.append((key, p))
                continue
            # stored keys are lower bounds (a hit raises a key): re-key lazily, as _select_ssd does,
            # so the pool holds the truly cheapest victims
            fresh = pol._ssd_key(p, self.now)
            if fresh > key + _EPS * max(1.0, abs(key)):
                nxt = pol.ssd_heap.peek()
                if nxt is not None and fresh > nxt[0]:
                    pol.ssd_heap.push(p, fresh, tie=p)
                    continue
            self.popped.append((fresh, p))
            # the items are taken as a prefix: once this one goes, its parent's last copy on the
            # SSD may go too (a chain is evicted leaf-first), so it becomes a candidate victim
            _, par = self.tent.take(p, st.res[p] == IN_SSD and not is_state(p))
            if par >= 0:
                q = fa_of(par)
                if st.res[q] == IN_SSD and q not in pol.ssd_heap and st.pin[q] != cur \
                        and self.tent.may_drop_last(par):
                    pol.ssd_heap.push(q, pol._ssd_key(q, self.now), tie=q)
            sz = int(st.size[p])
            v = math.exp(fresh - self.now / pol.ftau) * sz if fresh > -1e299 else 0.0
            self.items.append((v, sz, p))
            return True

    def cost_of(self, short: int) -> tuple[float, int]:
        """Expected loss and bytes of the cheapest unconsumed victims covering ``short`` bytes."""
        total_b = 0
        total_v = 0.0
        i = self.used
        while total_b < short:
            if i >= len(self.items) and not self._more():
                if self.pol.victim_loss == "shadow_price" and total_b > 0:
                    # price the rest at the last seen per-byte value
                    v, b, _ = self.items[i - 1]
                    return total_v + (short - total_b) * v / b, short
                return _INF, 0
            v, b, _ = self.items[i]
            if self.pol.victim_loss == "shadow_price":
                return (v / b) * short, short
            total_b += b
            total_v += v
            i += 1
        return total_v, total_b

    def consume(self, vbytes: int) -> None:
        got = 0
        while got < vbytes and self.used < len(self.items):
            got += self.items[self.used][1]
            self.used += 1

    def restore(self) -> None:
        h = self.pol.ssd_heap
        for key, p in self.popped:
            if self.pol.st.res[p] & IN_SSD:
                h.push(p, key, tie=p)
