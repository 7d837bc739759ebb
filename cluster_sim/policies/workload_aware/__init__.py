"""``workload_aware``: workload-aware eviction (Wang et al., "KVCache Cache in the Wild",
USENIX ATC'25; policies.md §6, a reconstruction [recon]).

Requests fall into categories ``w`` (default: request type × turn, e.g. ``text_1``,
``agent_3``; a request without a type is of type ``none``). Within a category
the time between two references to a chunk is fitted by an exponential
distribution, refreshed periodically from a sliding window of recent requests:

* ``P_w`` = reuse observations whose earlier reference lies in the window /
  references of category ``w`` in the window (the share of blocks reused);
* ``λ_w`` = 1 / mean reuse interval (the exponential MLE);
* lifespan ``L_w`` = the ``lifespan_q`` quantile of the observed intervals
  (``policy.lifespan=quantile``, default), or ``lifespan_c / λ_w``
  (``policy.lifespan=mean_multiple``), or none.

A reuse interval is attributed to the category of the *earlier* reference (the
block's category when it was cached). A category with fewer than
``min_samples`` intervals in the window uses the fit pooled over all
categories; before any fit every category shares a prior (``P = 1``,
``λ = 1/600 s``, no lifespan), which makes the policy LRU by last-touch time.

The score of a block (FA or STATE payload) of category ``w`` idle for
``Δ = now − t_last`` seconds, with look-ahead window ``H`` (``horizon_s``), is its
predicted reuse probability within the window::

    score = 0                                         if Δ > L_w   (dead)
          = P_w · e^{−λ_w Δ} · (1 − e^{−λ_w H})       otherwise

A payload's category is that of the last request that touched it (or created
it). Each tier keeps one LRU queue (by the logical clock) per category; within
a category the score falls with idle time, so only the queue heads are
compared: the victim is the head with the lowest score, then the larger offset
(chunk depth: tail blocks first), then the least recent, then the lower id.
Heads that may not leave now (pinned, or an FA copy with descendants in the
tier — leaf-first, §6.3) are skipped for this call.

Tiering (§6.3): the score orders DRAM evictions and SSD evictions; SSD
admission is write-back of every DRAM victim (FA and STATE), or with
``policy.admit_threshold=θ`` only of victims whose score exceeds θ (the others
are dropped when the residency rules allow it).

Refits happen in ``tick`` every ``refit_s`` seconds; until one refit period has
passed since the first request they are spaced exponentially (``first_fit_s``,
then doubling), so short traces get a fit too.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from ...cache.lazyheap import LazyHeap
from ...cache.state import BIT, chunk_of, fa_of, is_state, twin_state
from ...settings import setting
from ..base import DEMOTE, DRAM, DROP, HBM, SSD, Policy, Tentative, no_victims

_TIERS = (DRAM, SSD)
_PRIOR_RATE = 1.0 / 600.0
CATEGORY_MODES = ("type_turn", "type", "first_later", "none")
LIFESPAN_MODES = ("quantile", "mean_multiple", "none")


@dataclass(frozen=True)
class WorkloadAwareParams:
    horizon_s: float = setting(60.0, lo=0, lo_open=True, unit="s", doc="look-ahead window H")
    fit_window_s: float = setting(3600.0, lo=0, lo_open=True, unit="s", doc="sliding window the fits use")
    refit_s: float = setting(3600.0, lo=0, lo_open=True, unit="s",
                             doc="refit period (exponentially spaced from first_fit_s until then)")
    first_fit_s: float = setting(60.0, lo=0, lo_open=True, unit="s")
    lifespan: str = setting("quantile", "choice", choices=LIFESPAN_MODES)
    lifespan_q: float = setting(0.9, lo=0, lo_open=True, hi=1)
    lifespan_c: float = setting(4.0, lo=0, lo_open=True, doc="lifespan = c / lambda with lifespan=mean_multiple")
    categories: str = setting("type_turn", "choice", choices=CATEGORY_MODES)
    max_turn: int = setting(4, lo=1, integer=True, doc="turns above this share a category")
    min_samples: int = setting(20, lo=1, integer=True,
                               doc="fewer reuse intervals in the window: use the pooled fit")
    admit_threshold: float | None = setting(None, lo=0, allow_none=True,
                                            doc="write-back only victims scoring above this (null: all)")


class ReuseFits:
    """The reuse statistics of ``workload_aware``: request categories (ids in first-seen order),
    the chunks' reference history, the sliding window of records and the periodic exponential
    fits. A function of the request stream alone (never of the cache), so the compiled engine's
    wrapper runs this very code beside its kernel (docs/decisions.md 130) and the policy inherits it."""

    @classmethod
    def for_stream(cls, params: WorkloadAwareParams, n_chunks: int) -> "ReuseFits":
        """The statistics alone, for a stream over ``n_chunks`` chunks (the compiled engine's wrapper)."""
        f = cls.__new__(cls)
        f._init_params(params)
        f._init_stream(n_chunks)
        return f

    def _init_params(self, p: WorkloadAwareParams) -> None:
        self.H = p.horizon_s
        self.window = p.fit_window_s
        self.refit = p.refit_s
        self.first_fit = p.first_fit_s
        self.lifespan = p.lifespan
        self.q = p.lifespan_q
        self.lc = p.lifespan_c
        self.cat_mode = p.categories
        self.max_turn = p.max_turn
        self.min_samples = p.min_samples

    def _init_stream(self, n_chunks: int) -> None:
        self.ref_t = np.full(n_chunks, -1.0, dtype=np.float64)     # chunk reference history (reuse statistics)
        self.ref_cat = np.full(n_chunks, -1, dtype=np.int32)
        self.cat_ids: dict[str, int] = {}
        self.cat_names: list[str] = []
        # fits, per category id: (P, lambda, lifespan)
        self.fit: list[tuple[float, float, float]] = []
        self.pooled = (1.0, _PRIOR_RATE, math.inf)
        self.fitted = False
        self.records: deque = deque()     # (t, cat, refs, intervals, prev_cats)
        self.t0 = None
        self.next_fit = None
        self.n_fits = 0

    # ---- categories ----------------------------------------------------------
    def category_of(self, meta) -> str:
        return self.category_name(meta.category, meta.turn)

    def category_name(self, category, turn) -> str:
        typ = category if category is not None else "none"
        mode = self.cat_mode
        if mode == "none":
            return "all"
        if mode == "type":
            return str(typ)
        turn = int(turn) if turn is not None else 0
        if mode == "first_later":
            return f"{typ}_{'first' if turn <= 1 else 'later'}"
        return f"{typ}_{min(turn, self.max_turn)}"

    def _cat_id(self, name: str) -> int:
        i = self.cat_ids.get(name)
        if i is None:
            i = len(self.cat_names)
            self.cat_ids[name] = i
            self.cat_names.append(name)
            self.fit.append(self.pooled)
            self._new_category()
        return i

    def _new_category(self) -> None:
        """A category was just registered (the policy gives it its queues)."""

    # ---- the stream ----------------------------------------------------------
    def refit_due(self, now: float) -> bool:
        """Whether :meth:`tick` at ``now`` refits."""
        return self.t0 is not None and now >= self.next_fit

    def tick(self, now: float) -> None:
        if self.t0 is None:
            self.t0 = now
            self.next_fit = now + min(self.first_fit, self.refit)
        elif now >= self.next_fit:
            self._refit(now)
            age = now - self.t0
            self.next_fit = now + min(self.refit, max(self.first_fit, 2.0 * age))

    def _observe(self, path: np.ndarray, now: float, cat: int) -> None:
        """A request of category ``cat`` referenced ``path`` at ``now``: its reuse record."""
        if len(path):
            prev = self.ref_t[path]
            seen = prev >= 0
            if seen.any():
                iv = now - prev[seen]
                pc = self.ref_cat[path][seen]
            else:
                iv = np.zeros(0)
                pc = np.zeros(0, dtype=np.int32)
            self.records.append((now, cat, len(path), iv, pc))
            self.ref_t[path] = now
            self.ref_cat[path] = cat

    # ---- fitting -------------------------------------------------------------
    def _refit(self, now: float) -> None:
        lo = now - self.window
        rec = self.records
        while rec and rec[0][0] < lo:
            rec.popleft()
        n = len(self.cat_names)
        refs = np.zeros(n, dtype=np.float64)
        ivs, pcs = [], []
        for t, cat, m, iv, pc in rec:
            refs[cat] += m
            if len(iv):
                keep = iv <= t - lo          # the earlier reference lies in the window
                ivs.append(iv[keep])
                pcs.append(pc[keep])
        iv = np.concatenate(ivs) if ivs else np.zeros(0)
        pc = np.concatenate(pcs) if pcs else np.zeros(0, dtype=np.int32)
        self.pooled = self._fit_one(iv, refs.sum()) if len(iv) >= self.min_samples else (1.0, _PRIOR_RATE, math.inf)
        fits = []
        order = np.argsort(pc, kind="stable")
        pcs_sorted = pc[order]
        bounds = np.searchsorted(pcs_sorted, np.arange(n + 1))
        for w in range(n):
            sel = iv[order[bounds[w]:bounds[w + 1]]]
            fits.append(self._fit_one(sel, refs[w]) if len(sel) >= self.min_samples else self.pooled)
        self.fit = fits
        self.fitted = True
        self.n_fits += 1

    def _fit_one(self, iv: np.ndarray, refs: float) -> tuple[float, float, float]:
        P = min(1.0, len(iv) / float(refs)) if refs > 0 else 1.0
        mean = max(float(iv.mean()), 1e-3)
        lam = 1.0 / mean
        if self.lifespan == "quantile":
            L = float(np.quantile(iv, self.q))
        elif self.lifespan == "mean_multiple":
            L = self.lc * mean
        else:
            L = math.inf
        return P, lam, L

    def fit_counters(self) -> dict:
        """The counters of the fits (``categories``, ``refits``, the pooled fit once there is one)."""
        d = {"categories": len(self.cat_names), "refits": self.n_fits}
        if self.fitted:
            P, lam, L = self.pooled
            d["pooled_reuse_prob"] = float(P)
            d["pooled_mean_reuse_s"] = float(1.0 / lam)
            d["pooled_lifespan_s"] = float(L) if math.isfinite(L) else -1.0
        return d


class WorkloadAwarePolicy(ReuseFits, Policy):
    name = "workload_aware"
    Params = WorkloadAwareParams
    wants_residency_events = True
    leaf_event_tiers = ()          # no on_leaf

    def __init__(self, params=None, /, **kw):
        super().__init__(params, **kw)
        self._init_params(self.params)
        self.theta = self.params.admit_threshold

    # ------------------------------------------------------------------
    def bind(self, ctx) -> None:
        super().bind(ctx)
        st = self.st
        U = st.n_chunks
        self.queues: dict[int, list[LazyHeap]] = {t: [] for t in _TIERS}
        self._init_stream(U)
        self.ssd_on = st.cap[SSD] > 0
        self.pcat = np.full(2 * U, -1, dtype=np.int32)      # category of the last request touching the payload
        self.last_t = np.zeros(2 * U, dtype=np.float64)      # its time (seconds)
        self.qcat = {t: np.full(2 * U, -1, dtype=np.int32) for t in _TIERS}
        # chunks c_1..c_r of the request being processed: their last copy is never dropped (the node
        # pins only c_1..c_h; it places c_{r+1}.. and the STATE at c_r or c_m assuming c_1..c_r stay)
        self.guard = np.full(U, -1, dtype=np.int64)
        self.cur_cat = 0
        self.c = {"dram_victims_demoted": 0, "dram_victims_dropped": 0, "ssd_evictions": 0, "dead_victims": 0,
                  "heads_scored": 0, "requeued": 0, "failed_selects": 0}

    def _new_category(self) -> None:
        for t in _TIERS:
            self.queues[t].append(LazyHeap())

    # ---- requests ----------------------------------------------------------
    def on_access(self, payloads, now, meta) -> None:
        self.guard[meta.path[:meta.resident_chunks]] = meta.seq
        cat = self._cat_id(self.category_of(meta))
        self.cur_cat = cat
        self._recategorise(payloads, cat)
        self.last_t[payloads] = now
        self._observe(meta.path, now, cat)

    def on_insert(self, payloads, now) -> None:
        self._recategorise(payloads, self.cur_cat)
        self.last_t[payloads] = now

    def _recategorise(self, payloads, cat: int) -> None:
        """Give ``payloads`` category ``cat``, moving the queued ones to that category's queues now
        (so a queue holds exactly its category's payloads; stamps only grow within a queue)."""
        old = self.pcat[payloads]
        self.pcat[payloads] = cat
        moved = payloads[old != cat]
        if not len(moved):
            return
        stamp = self.st.stamp
        for t in _TIERS:
            qc = self.qcat[t]
            qs = self.queues[t]
            for p in moved[qc[moved] >= 0].tolist():
                qs[int(qc[p])].discard(p)
                qs[cat].push(p, int(stamp[p]), p)
                qc[p] = cat

    # ---- residency events ------------------------------------------------
    def on_enter(self, tier: int, p: int) -> None:
        if tier == HBM:
            return
        cat = int(self.pcat[p])
        if cat < 0:
            cat = self.cur_cat
            self.pcat[p] = cat
        self.queues[tier][cat].push(p, int(self.st.stamp[p]), p)
        self.qcat[tier][p] = cat

    def on_leave(self, tier: int, p: int) -> None:
        if tier == HBM:
            return
        cat = int(self.qcat[tier][p])
        if cat >= 0:
            self.queues[tier][cat].discard(p)
            self.qcat[tier][p] = -1

    def score(self, p: int, cat: int, now: float) -> float:
        P, lam, L = self.fit[cat]
        d = now - float(self.last_t[p])
        if d > L:
            return 0.0
        return P * math.exp(-lam * max(d, 0.0)) * (1.0 - math.exp(-lam * self.H))

    # ---- selection ---------------------------------------------------------
    def select_victims(self, tier, bytes_needed, now):
        if tier not in _TIERS:
            return []
        st = self.st
        bit = BIT[tier]
        cur = st.cur
        stamp, res, pin, size, depth = st.stamp, st.res, st.pin, st.size, st.depth
        queues = self.queues[tier]
        guard = self.guard
        tent = Tentative(st, tier)
        demote_ok = tier == DRAM and self.ssd_on
        chosen: set[int] = set()
        held: list[tuple[int, int, int]] = []      # (cat, key, p) popped and to be pushed back
        skipped: dict[int, tuple[int, int]] = {}   # p -> (cat, key): heads that may not leave now
        heads: dict[int, tuple | None] = {}
        out: list[tuple[int, int]] = []
        freed = 0

        def may_leave(p, action_drop):
            if pin[p] == cur or p in chosen:
                return False
            if not is_state(p):
                c = chunk_of(p)
                if not tent.is_leaf(c):
                    return False
                if action_drop and int(res[p]) == bit:
                    if not tent.may_drop_last(c):
                        return False
                    if (res[twin_state(p)] and pin[twin_state(p)] == cur) or guard[c] == cur:
                        return False       # a pinned STATE would go along / the request needs c_1..c_r
            return True

        def head(cat):
            q = queues[cat]
            while True:
                e = q.peek()
                if e is None:
                    return None
                key, _, p = e
                if int(stamp[p]) != key:                     # touched since: re-key (stamps only grow)
                    q.push(p, int(stamp[p]), p)
                    self.c["requeued"] += 1
                    continue
                if not may_leave(p, not demote_ok):
                    q.pop()
                    skipped[p] = (cat, key)
                    continue
                sc = self.score(p, cat, now)
                self.c["heads_scored"] += 1
                return (sc, -int(depth[chunk_of(p)]), key, p)

        while freed < bytes_needed:
            best = None
            for cat in range(len(queues)):
                if cat not in heads:
                    heads[cat] = head(cat)
                h = heads[cat]
                if h is not None and (best is None or h < best[1]):
                    best = (cat, h)
            if best is None:
                for cat, key, p in held:
                    queues[cat].push(p, key, p)
                for p, (cat, key) in skipped.items():
                    queues[cat].push(p, key, p)
                self.c["failed_selects"] += 1
                return no_victims(bytes_needed - freed)   # lets the node trim the right amount at once
            cat, (sc, _, key, p) = best
            queues[cat].pop()
            held.append((cat, key, p))
            heads.pop(cat, None)
            if tier == SSD:
                action = DROP
            elif not demote_ok:
                action = DROP
            elif self.theta is not None and sc <= self.theta and may_leave(p, True):
                action = DROP
            else:
                action = DEMOTE
            dropping = action == DROP or tier == SSD
            if not is_state(p):
                c = chunk_of(p)
                tent.choose(c, dropping and int(res[p]) == bit)
                # its nearest ancestor in the tier may now leave: reconsider it if it was skipped
                par = int(st.parent[c])
                if par >= 0:
                    y = st.nearest_in_tier(c, bit)
                    if y >= 0 and fa_of(y) in skipped:
                        ycat, ykey = skipped.pop(fa_of(y))
                        queues[ycat].push(fa_of(y), ykey, fa_of(y))
                        heads.pop(ycat, None)
            chosen.add(p)
            out.append((p, action))
            freed += int(size[p])
            if sc == 0.0:
                self.c["dead_victims"] += 1
        for p, (cat, key) in skipped.items():
            queues[cat].push(p, key, p)
        for p, a in out:
            if tier == SSD:
                self.c["ssd_evictions"] += 1
            elif a == DEMOTE:
                self.c["dram_victims_demoted"] += 1
            else:
                self.c["dram_victims_dropped"] += 1
        return out

    def counters(self):
        return {**self.c, **self.fit_counters()}
