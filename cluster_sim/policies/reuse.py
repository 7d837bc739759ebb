"""Reuse estimators for Gandalf beyond the paper: ``reuse=hints`` and ``reuse=learned``.

Both estimate, for every cached payload, ``E = P(the payload is demanded again within H)``,
where the horizon ``H`` is how long a copy written to the SSD now would survive there (the
SSD's characteristic time, measured by Gandalf from the ages of the copies it evicts; before
the SSD has evicted anything, "ever"). That is the question an admission decision asks
("will this copy be hit from the SSD before it is evicted there?", the label of
``oracle_admission``), and, per byte and weighted by what a hit saves, the order in which
the SSD should give copies up. Gandalf's cost model is unchanged; only ``E_hits`` differs.

**References.** Every touch of a payload starts a *reference* of a class fixed by what the
node knows at that moment; it ends when the payload is touched again (an event, after a
gap) or, for an FA chunk of a session, when the session's next request passes it by (the
chunk is *superseded*: a censored end, and a new reference of a superseded class starts).
A request *touches* the FA chunks of its path; a STATE is touched when it is created and
when a request demands it (the deepest checkpoint ever created on its path:
policy-independent demand, as for the paper's estimator), so neither estimator's statistics
depend on the policy's own decisions.

**hints** (session-aware). Classes: payload kind × stop reason of the touching request's
response (``tool_use``, ``end_turn``, ``max_tokens``, other, unknown) × sub-agent × (FA) touches
so far (1, 2, 3+) × (FA) superseded. Per class, the distribution of the time to the next
touch is learned online as a Kaplan-Meier survival curve over log2-spaced bins (1 s … 48
days), every open reference counted as censored at its current age, so sessions that never
come back make the curve level off instead of being ignored; classes with few references
lean on the curve of all classes of their kind (4 pseudo-references per bin). Then
``E = 1 − S(Δ + H) / S(Δ)`` for a reference of age ``Δ``: after a tool call the next request
comes within seconds, so ``E`` is high while ``Δ`` is short and collapses once the
continuation is overdue (the session is dead); after ``end_turn`` it follows the learned
human think time, and its long tail. On a trace without sessions or stop reasons (Mooncake)
the classes reduce to kind × touches, a chunk-level reuse-time model.

**learned** (an online logistic model). The same references and horizon; ``E`` is predicted
from features a serving node has: kind, stop reason, sub-agent, superseded, touches, the
reference's age (binned, and crossed with the stop reason), log depth, log distance from the
touching request's tail, log turn, log think and API time of the touching request. Labels
are what a real system observes after the fact: a sampled reference is labelled 1 if the
payload is demanded again within ``L = min(H, label_cap_s)`` of the sample (30 minutes by
default: one day), 0 once ``L`` has passed without
(a ghost list of sampled hashes; no future is read). The model is refit every
``refit_requests`` requests by a few Newton (IRLS) steps with L2 regularisation on the last
``window`` resolved samples, warm-started: plain numpy, deterministic, no new dependency
(docs/decisions.md 45).

**Keeping keys current.** ``E`` changes only at events: a touch, a supersession, a
re-evaluation at the reference's ages 1 s, 4 s, 16 s, … (4^k, up to 48 days; scheduled per
group of payloads touched together, at most one pending event per group; in between ``E``
is the value at the last re-evaluation), and a refit. Each returns the payloads whose ``E``
went *down*, which Gandalf re-pushes into its lazy heaps (a rise needs nothing: stored keys
are lower bounds, re-scored at pop).
"""
from __future__ import annotations

import heapq
import math

import numpy as np

from .. import libm
from ..cache.state import chunk_of, fa_of, is_state

_NB = 24                                    # bins: [0,1), [1,2), [2,4), ..., [2^22, inf)
_EDGES = np.r_[0.0, 2.0 ** np.arange(0, _NB - 1)]
_LAST_REVISIT = 11                          # estimates are re-evaluated at ages 4^k, k <= 11 (48 days)
_STOPS = 5
_TB = 3                                     # FA touches so far: 1, 2, 3+


def age_bin(x) -> np.ndarray:
    """Bin index of ages ``x`` (seconds): 0 for [0, 1), k for [2^(k-1), 2^k), capped."""
    x = np.asarray(x, dtype=np.float64)
    _, e = np.frexp(x)                      # x = m * 2^e, m in [0.5, 1): floor(log2 x) = e - 1
    return np.clip(np.where(x >= 1.0, e, 0), 0, _NB - 1).astype(np.int64)


def thread_key(session, agent):
    """A request's thread: its session and agent (unknown: the session's own), for ints or arrays."""
    return session * 65536 + np.maximum(agent, 0)


class _EventReuse:
    """References, groups, scheduled bin crossings and refits shared by both estimators."""

    def __init__(self, n2: int, depth: np.ndarray, refit_requests: int = 500):
        self.n2 = n2
        self.depth = depth
        self.E = np.ones(n2, dtype=np.float64)      # optimistic until the first refit
        self.start = np.full(n2, np.nan)            # start of the payload's open reference
        self.cls = np.zeros(n2, dtype=np.int32)
        self.grp = np.full(n2, -1, dtype=np.int32)  # group ids: below 2^31 (about two a request; renumbered compiled)
        self.touches = np.zeros(n2, dtype=np.int32)
        self.sup = np.zeros(n2, dtype=bool)
        self.stop = np.zeros(n2, dtype=np.int8)
        self.sub = np.zeros(n2, dtype=bool)
        self.tail = np.zeros(n2, dtype=np.int32)    # chunks between the payload and its request's tail
        self.turn = np.zeros(n2, dtype=np.int32)
        self.think = np.zeros(n2, dtype=np.float32)
        self.api = np.zeros(n2, dtype=np.float32)
        self.groups: dict[int, tuple[np.ndarray, float]] = {}
        self.events: list[tuple[float, int, int]] = []   # (time, group, bin to re-evaluate at)
        self.next_gid = 0
        self.threads: dict[int, int] = {}           # thread key -> group of its last request's FA
        self.H = math.inf
        self.refit_requests = int(refit_requests)
        self.seen = 0
        self.first_refit = min(200, self.refit_requests)

    # -- classes (hints overrides the layout; learned keeps one class per kind for the counts)
    def fa_class(self, stop, sub, touches, sup, turn):
        return np.zeros(len(touches), dtype=np.int32)

    def st_class(self, stop, sub, demanded, turn):
        return 1

    # -- the estimator proper
    def value(self, ps: np.ndarray, now: float) -> np.ndarray:
        raise NotImplementedError

    def on_event(self, ps, gaps, now) -> None:
        """References of ``ps`` ended by a touch at ``now``, after ``gaps`` seconds."""

    def on_censor(self, ps, ages) -> None:
        """References of ``ps`` ended without a touch (superseded) at ``ages``."""

    def on_start(self, ps, now) -> None:
        """New references of ``ps`` started at ``now``."""

    def refit(self, now: float) -> None:
        pass

    # -- bookkeeping -----------------------------------------------------------
    def _group(self, ps: np.ndarray, now: float) -> int:
        g = self.next_gid
        self.next_gid += 1
        self.grp[ps] = g
        self.groups[g] = (ps, now)
        heapq.heappush(self.events, (now + 1.0, g, 0))
        return g

    def _begin(self, ps: np.ndarray, now: float, cls: np.ndarray) -> int:
        self.start[ps] = now
        self.cls[ps] = cls
        self.on_start(ps, now)
        return self._group(ps, now)

    def _lowered(self, ps: np.ndarray, now: float) -> np.ndarray:
        """Recompute E for ``ps``; the payloads whose E went down."""
        if not len(ps):
            return ps
        old = self.E[ps]
        new = self.value(ps, now)
        self.E[ps] = new
        return ps[new < old]

    def access(self, path: np.ndarray, state: int, now: float, meta) -> np.ndarray:
        """A request touched the FA chunks of ``path`` (root first) and demanded ``state``
        (-1: none). Returns the payloads whose E went down."""
        self.seen += 1
        out = []
        stop = int(meta.stop_reason)
        sub = bool(meta.subagent)
        m = len(path)
        if m:
            fa = fa_of(path)
            seen = ~np.isnan(self.start[fa])
            if seen.any():
                self.on_event(fa[seen], now - self.start[fa[seen]], now)
            self.touches[fa] += 1
            self.sup[fa] = False
            self.stop[fa] = stop
            self.sub[fa] = sub
            self.tail[fa] = np.arange(m - 1, -1, -1, dtype=np.int32)
            self.turn[fa] = meta.turn
            self.think[fa] = 0.0 if meta.think_time_s != meta.think_time_s else meta.think_time_s
            self.api[fa] = 0.0 if meta.api_time_s != meta.api_time_s else meta.api_time_s
            g = self._begin(fa, now, self.fa_class(stop, sub, self.touches[fa], False, meta.turn))
            out.append(self._lowered(fa, now))
            # the session's previous request: what this one did not touch is superseded
            if meta.session_id >= 0:
                key = int(thread_key(int(meta.session_id), int(meta.agent)))
                prev = self.threads.get(key)
                self.threads[key] = g
                if prev is not None and prev in self.groups:
                    ps = self.groups[prev][0]
                    left = ps[self.grp[ps] == prev]
                    if len(left):
                        self.on_censor(left, now - self.start[left])
                        self.sup[left] = True
                        self._begin(left, now, self.fa_class(self.stop[left], self.sub[left],
                                                             self.touches[left], True, self.turn[left]))
                        out.append(self._lowered(left, now))
        if state >= 0:
            q = np.asarray([state], dtype=np.int64)
            if not np.isnan(self.start[state]):
                self.on_event(q, now - self.start[q], now)
            self.touches[q] += 1
            self.stop[q] = stop
            self.sub[q] = sub
            self.tail[q] = 0
            self.turn[q] = meta.turn
            self._begin(q, now, np.asarray([self.st_class(stop, sub, True, meta.turn)], dtype=np.int32))
            out.append(self._lowered(q, now))
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)

    def created_states(self, qs: np.ndarray, now: float, meta) -> np.ndarray:
        """STATE checkpoints created (or created again) by the request being processed: a fresh
        reference each; an open one (a state dropped earlier and made again) ends untouched."""
        if not len(qs):
            return qs
        old = qs[~np.isnan(self.start[qs])]
        if len(old):
            self.on_censor(old, now - self.start[old])
        stop = int(meta.stop_reason) if meta is not None else 0
        sub = bool(meta.subagent) if meta is not None else False
        self.touches[qs] = 1
        self.stop[qs] = stop
        self.sub[qs] = sub
        self.tail[qs] = 0
        self.turn[qs] = meta.turn if meta is not None else 0
        self._begin(qs, now, np.full(len(qs), self.st_class(stop, sub, False, self.turn[qs[0]]), dtype=np.int32))
        return self._lowered(qs, now)

    def _refit_due(self) -> bool:
        """A refit is due at this request (once every ``refit_requests``, after the first ones)."""
        return self.seen >= self.first_refit and (self.seen - self.first_refit) % self.refit_requests == 0 \
            and self.seen != getattr(self, "_last_refit", -1)

    def _revalue_live(self, now: float, res: np.ndarray) -> None:
        """After a refit: E of every open reference still cached."""
        live = np.flatnonzero(~np.isnan(self.start) & (res != 0))
        if len(live):
            self.E[live] = self.value(live, now)

    def tick(self, now: float, res: np.ndarray) -> np.ndarray | None:
        """Due bin crossings and refits (``res``: residency per payload). Returns payloads whose
        E went down, or ``None`` when every resident payload was re-evaluated (a refit: the
        caller re-keys everything)."""
        if self._refit_due():
            self._last_refit = self.seen
            self.refit(now)
            self._revalue_live(now, res)
            return None
        ev = self.events
        if not ev or ev[0][0] > now:
            return np.zeros(0, dtype=np.int64)
        due = []
        while ev and ev[0][0] <= now:
            _, g, b = heapq.heappop(ev)
            item = self.groups.get(g)
            if item is None:
                continue
            ps, t0 = item
            # a member touched since belongs to a newer group; one no longer cached can only come
            # back through a request, which starts a new reference: both leave the group for good
            cur = ps[(self.grp[ps] == g) & (res[ps] != 0)]
            if not len(cur):
                del self.groups[g]
                continue
            if len(cur) < len(ps):
                self.groups[g] = (cur, t0)
            due.append(cur)
            # the next re-evaluation: the next age 4^k (1 s, 4 s, 16 s, ... 48 days)
            k = b + 1
            while k <= _LAST_REVISIT and t0 + 4.0 ** k <= now:
                k += 1
            if k <= _LAST_REVISIT:
                heapq.heappush(ev, (t0 + 4.0 ** k, g, k))
            else:
                del self.groups[g]
        if not due:
            return np.zeros(0, dtype=np.int64)
        cur = np.concatenate(due)
        self.revisit(cur, now)
        return self._lowered(cur, now)

    def revisit(self, ps, now) -> None:
        """References of ``ps`` (still open) crossed an age-bin edge at ``now``."""


class HintsReuse(_EventReuse):
    """``reuse=hints``: Kaplan-Meier time-to-next-touch per class of reference."""

    # class layout: FA: (((sup * 5 + stop) * 2 + sub) * 3 + touches bucket) * 3 + turn bucket; then
    # STATE: ((demanded * 5 + stop) * 2 + sub) * 3 + turn bucket. Turn buckets: the session's
    # first request (or unknown), its 2nd to 9th, its 10th and later (a session that has come
    # back before is likelier to come back again)
    N_FA = 2 * _STOPS * 2 * _TB * 3
    N_ST = 2 * _STOPS * 2 * 3

    def __init__(self, n2: int, depth: np.ndarray, refit_requests: int = 500, pseudo: float = 4.0):
        super().__init__(n2, depth, refit_requests)
        K = self.N_FA + self.N_ST
        self.K = K
        self.D = np.zeros((K, _NB))      # touches ending a reference, by class and age bin
        self.C = np.zeros((K, _NB))      # references ended untouched (superseded), by age bin
        self.Q = np.ones((K, _NB))       # E by class and age bin (current H)
        self.pseudo = float(pseudo)

    @staticmethod
    def _turn_bucket(turn):
        t = np.asarray(turn, dtype=np.int64)
        return np.where(t <= 1, 0, np.where(t < 10, 1, 2))

    def fa_class(self, stop, sub, touches, sup, turn):
        tb = np.minimum(np.asarray(touches), _TB) - 1
        k = ((int(sup) * _STOPS + np.asarray(stop, dtype=np.int64)) * 2 + np.asarray(sub, dtype=np.int64)) * _TB + tb
        return (k * 3 + self._turn_bucket(turn)).astype(np.int32)

    def st_class(self, stop, sub, demanded, turn):
        k = (int(demanded) * _STOPS + int(stop)) * 2 + int(sub)
        return self.N_FA + k * 3 + int(self._turn_bucket(turn))

    def on_event(self, ps, gaps, now):
        np.add.at(self.D, (self.cls[ps], age_bin(gaps)), 1.0)

    def on_censor(self, ps, ages):
        np.add.at(self.C, (self.cls[ps], age_bin(ages)), 1.0)

    def refit(self, now):
        K = self.K
        O = self._open_counts(now)
        D = self.D
        ended = D + self.C + O
        at_risk = np.cumsum(ended[:, ::-1], axis=1)[:, ::-1]        # references of age >= bin start
        haz = np.zeros((K, _NB))
        for lo, hi in ((0, self.N_FA), (self.N_FA, K)):            # pooled prior per kind
            pool = D[lo:hi].sum(0) / np.maximum(at_risk[lo:hi].sum(0), 1.0)
            den = at_risk[lo:hi] + self.pseudo
            haz[lo:hi] = np.divide(D[lo:hi] + self.pseudo * pool, den, out=np.zeros_like(den), where=den > 0)
        haz = np.clip(haz, 0.0, 1.0)
        self.haz = haz
        S = np.ones((K, _NB + 1))
        S[:, 1:] = np.cumprod(1.0 - haz, axis=1)
        self.S = S
        self.Q = self._q_table(self.H)

    def _open_counts(self, now):
        """The open references (not ended yet) by class and age bin."""
        K = self.K
        open_ = np.flatnonzero(~np.isnan(self.start))
        O = np.zeros((K, _NB))
        if len(open_):
            # a count per (class, bin): np.add.at of 1.0 each, as one bincount (exact: integers)
            flat = self.cls[open_].astype(np.int64) * _NB + age_bin(now - self.start[open_])
            O += np.bincount(flat, minlength=K * _NB).reshape(K, _NB)
        return O

    def _surv(self, k, t):
        """S_k(t) at ages ``t`` (arrays), geometric within a bin."""
        b = age_bin(t)
        lo = _EDGES[b]
        hi = np.where(b + 1 < _NB, _EDGES[np.minimum(b + 1, _NB - 1)], np.inf)
        width = np.where(np.isfinite(hi), hi - lo, 1.0)
        frac = np.where(np.isfinite(hi), (t - lo) / width, 0.0)
        h = self.haz[k, b]
        return self.S[k, b] * libm.power(1.0 - h, frac)

    def _q_table(self, H):
        K = self.K
        k = np.repeat(np.arange(K), _NB)
        t = np.tile(_EDGES, K)
        s0 = self._surv(k, t)
        if math.isinf(H):
            s1 = self.S[k, _NB]
        else:
            s1 = self._surv(k, t + H)
        with np.errstate(invalid="ignore", divide="ignore"):
            q = np.where(s0 > 0, 1.0 - s1 / s0, 0.0)
        return np.clip(q, 0.0, 1.0).reshape(K, _NB)

    def value(self, ps, now):
        # evaluated at twice the age: between re-evaluations (ages 4^k) a reference ages up to 4x,
        # so this is the geometric middle of the span the value stands for
        return self.Q[self.cls[ps], age_bin(2.0 * (now - self.start[ps]))]


class CompiledHintsReuse(HintsReuse):
    """``reuse=hints`` with its per-request work compiled (:mod:`cluster_sim.policies._reuse_jit`):
    the same estimates, classes and counts as :class:`HintsReuse`, which stays the executable
    reference (Gandalf's ``policy.engine=python``). Groups, scheduled re-evaluations and threads
    are flat arrays; the refit is the interpreted one (docs/decisions.md 123) but for its two passes
    over every payload, compiled (decision 151)."""

    def __init__(self, n2: int, depth: np.ndarray, refit_requests: int = 500, pseudo: float = 4.0):
        super().__init__(n2, depth, refit_requests, pseudo)
        from . import _reuse_jit as J
        self.J = J
        self.groups = self.events = self.next_gid = None     # kept in the arrays below instead
        maxd = int(np.max(depth)) if len(depth) else 1
        self._room_need = 2 * maxd + 4             # the most one call adds to the member buffer
        self.gbuf = np.zeros(max(1024, 4 * self._room_need), dtype=np.int32)   # payload ids
        self.gs = np.zeros(1024, dtype=np.int64)
        self.gn = np.full(1024, -1, dtype=np.int64)
        self.gt0 = np.zeros(1024, dtype=np.float64)
        self.evt = np.zeros(1024, dtype=np.float64)
        self.evg = np.zeros(1024, dtype=np.int64)
        self.evb = np.zeros(1024, dtype=np.int64)
        self.GM = np.zeros(J.N_GM, dtype=np.int64)
        self.tids: dict[int, int] = {}         # thread key -> dense id (its index in thr)
        self.thr = np.full(64, -1, dtype=np.int64)    # a thread's last group (-1: none)
        self._room_groups = 4      # the most groups (and re-evaluations) one call adds
        self._gmin = 1024          # the least length of the group and re-evaluation arrays
        self.gid_base = 0          # groups forgotten by _renumber: groups made = gid_base + GM[G_NEXT]

    def _room(self) -> None:
        """Room for one more call: members, groups and scheduled re-evaluations."""
        J, GM = self.J, self.GM
        if GM[J.G_USED] + self._room_need > len(self.gbuf):
            self._compact()
        ng = int(GM[J.G_NEXT])
        rg = self._room_groups
        if ng + rg > len(self.gs) and 2 * int(np.count_nonzero(self.gn[:ng] >= 0)) <= ng:
            self._renumber()
            ng = int(GM[J.G_NEXT])
        if ng + rg > len(self.gs):
            n = 2 * len(self.gs)
            self.gs = np.concatenate([self.gs, np.zeros(n - len(self.gs), dtype=np.int64)])
            self.gn = np.concatenate([self.gn, np.full(n - len(self.gn), -1, dtype=np.int64)])
            self.gt0 = np.concatenate([self.gt0, np.zeros(n - len(self.gt0))])
        while GM[J.G_EVN] + rg > len(self.evt):
            n = len(self.evt)
            self.evt = np.concatenate([self.evt, np.zeros(n)])
            self.evg = np.concatenate([self.evg, np.zeros(n, dtype=np.int64)])
            self.evb = np.concatenate([self.evb, np.zeros(n, dtype=np.int64)])

    def _compact(self) -> None:
        """Move the live groups' members to the front of a buffer with room to spare (their order
        kept); a group's id and members do not change."""
        J, GM = self.J, self.GM
        ng = int(GM[J.G_NEXT])
        live = np.flatnonzero(self.gn[:ng] > 0)
        lens = self.gn[live]
        total = int(lens.sum())
        new_off = np.zeros(len(live), dtype=np.int64)
        if len(live):
            np.cumsum(lens[:-1], out=new_off[1:])
        src = np.repeat(self.gs[live] - new_off, lens) + np.arange(total, dtype=np.int64)
        buf = np.zeros(max(1024, 2 * (total + self._room_need)), dtype=np.int32)
        buf[:total] = self.gbuf[src]
        self.gbuf = buf
        self.gs[live] = new_off
        GM[J.G_USED] = total

    def _renumber(self) -> None:
        """Give the live groups the ids 0, 1, ... in their order, and forget the gone ones (their
        ids, scheduled re-evaluations and threads), so that the group arrays hold the live
        groups, not every group ever made. Every use of an id compares it with a live group's or
        orders re-evaluations by it, and the renumbering keeps the order: the estimates and the
        order of re-evaluations are unchanged (tests/test_reuse_jit.py)."""
        J, GM = self.J, self.GM
        ng = int(GM[J.G_NEXT])
        alive = self.gn[:ng] >= 0
        live = np.flatnonzero(alive)
        k = len(live)
        remap = np.full(ng, -1, dtype=np.int64)
        remap[live] = np.arange(k, dtype=np.int64)
        g = self.grp
        m = g >= 0
        new = remap[g[m]]
        g[m] = np.where(new >= 0, new, -2)            # -2: a reference whose group is gone
        ne = int(GM[J.G_EVN])
        eg = self.evg[:ne]
        keep = alive[eg]
        t, eg, eb = self.evt[:ne][keep], remap[eg[keep]], self.evb[:ne][keep]
        order = np.lexsort((eb, eg, t))               # a sorted array is a heap, popping in the same order
        cap = max(self._gmin, 2 * (len(t) + 4))
        self.evt, self.evg, self.evb = (np.zeros(cap), np.zeros(cap, dtype=np.int64),
                                        np.zeros(cap, dtype=np.int64))
        self.evt[:len(t)], self.evg[:len(t)], self.evb[:len(t)] = t[order], eg[order], eb[order]
        cap = max(self._gmin, 2 * (k + 4))
        gs, gn, gt0 = np.zeros(cap, dtype=np.int64), np.full(cap, -1, dtype=np.int64), np.zeros(cap)
        gs[:k], gn[:k], gt0[:k] = self.gs[live], self.gn[live], self.gt0[live]
        self.gs, self.gn, self.gt0 = gs, gn, gt0
        thr = self.thr
        known = thr >= 0
        thr[known] = remap[thr[known]]            # a thread whose group is gone: none (-1)
        self.gid_base += ng - k
        GM[J.G_NEXT] = k
        GM[J.G_EVN] = len(t)

    def access(self, path, state, now, meta):
        self.seen += 1
        self._room()
        key = -1
        if meta.session_id >= 0:
            key = self.tids.setdefault(int(thread_key(int(meta.session_id), int(meta.agent))), len(self.tids))
            if key >= len(self.thr):
                self.thr = np.concatenate([self.thr, np.full(len(self.thr), -1, dtype=np.int64)])
        return self.J.access(self.E, self.start, self.cls, self.grp, self.touches, self.sup, self.stop, self.sub,
                             self.turn, self.D, self.C, self.Q, self.gbuf, self.gs, self.gn, self.gt0, self.evt,
                             self.evg, self.evb, self.GM, self.thr, path, int(state), float(now),
                             int(meta.stop_reason), int(bool(meta.subagent)), key, int(meta.turn))

    def created_states(self, qs, now, meta):
        if not len(qs):
            return qs
        self._room()
        stop = int(meta.stop_reason) if meta is not None else 0
        sub = int(bool(meta.subagent)) if meta is not None else 0
        turn = int(meta.turn) if meta is not None else 0
        return self.J.created(self.E, self.start, self.cls, self.grp, self.touches, self.sup, self.stop, self.sub,
                              self.turn, self.D, self.C, self.Q, self.gbuf, self.gs, self.gn, self.gt0, self.evt,
                              self.evg, self.evb, self.GM, np.asarray(qs, dtype=np.int64), float(now), stop, sub,
                              turn)

    def _open_counts(self, now):
        O = np.zeros((self.K, _NB))
        self.J.open_counts(self.start, self.cls, float(now), O)
        return O

    def _revalue_live(self, now, res):
        self.J.revalue_live(self.start, self.cls, self.Q, res, float(now), self.E)

    def tick(self, now, res):
        if self._refit_due():
            return super().tick(now, res)           # the refit: interpreted but its two passes over
            #                                         every payload (_open_counts, _revalue_live)
        return self.J.tick(self.E, self.start, self.cls, self.grp, self.Q, self.gbuf, self.gs, self.gn, self.gt0,
                           self.evt, self.evg, self.evb, self.GM, res, float(now))


class LearnedReuse(_EventReuse):
    """``reuse=learned``: an online logistic model of "demanded again within H"."""

    N_AGE = 11                  # coarse age bins for the features: edges 10 s, 30 s, ..., 3e5 s
    AGE_EDGES = np.array([10.0, 30.0, 100.0, 300.0, 1000.0, 3000.0, 1e4, 3e4, 1e5, 3e5])

    def __init__(self, n2: int, depth: np.ndarray, refit_requests: int = 500, window: int = 200_000,
                 l2: float = 1.0, samples_per_group: int = 8, label_cap_s: float = 86400.0):
        super().__init__(n2, depth, refit_requests)
        self.window = int(window)
        self.l2 = float(l2)
        self.spg = int(samples_per_group)
        self.label_cap = float(label_cap_s)
        self.w = None                                    # weights (None: not fitted yet)
        self.pending: dict[int, list[int]] = {}          # payload -> its unresolved samples
        self.sX: list[np.ndarray] = []                   # feature rows, in sample order
        self.s_t: list[float] = []
        self.s_H: list[float] = []
        self.s_label: list[int] = []                     # -1 pending, 0 / 1 resolved
        self.rX = np.zeros((0, self.n_features()), dtype=np.float32)
        self.ry = np.zeros(0, dtype=np.float32)
        self.fits = 0

    @classmethod
    def n_features(cls):
        return 1 + 1 + _STOPS + 1 + 1 + _TB + cls.N_AGE + 3 * cls.N_AGE + 5

    def features(self, ps: np.ndarray, now: float, age_scale: float = 1.0) -> np.ndarray:
        """Feature rows of ``ps`` at ``now`` (their references' ages times ``age_scale``)."""
        n = len(ps)
        F = np.zeros((n, self.n_features()), dtype=np.float32)
        i = 0
        F[:, i] = 1.0
        i += 1
        F[:, i] = is_state(ps)
        i += 1
        stop = self.stop[ps].astype(np.int64)
        F[np.arange(n), i + stop] = 1.0
        i += _STOPS
        F[:, i] = self.sub[ps]
        i += 1
        F[:, i] = self.sup[ps]
        i += 1
        tb = np.minimum(self.touches[ps], _TB) - 1
        F[np.arange(n), i + np.maximum(tb, 0)] = 1.0
        i += _TB
        ab = np.searchsorted(self.AGE_EDGES, age_scale * (now - self.start[ps]), side="right")
        F[np.arange(n), i + ab] = 1.0
        i += self.N_AGE
        grp = np.where(stop == 1, 0, np.where(stop == 2, 1, 2))     # tool_use / end_turn / other
        F[np.arange(n), i + grp * self.N_AGE + ab] = 1.0
        i += 3 * self.N_AGE
        F[:, i] = libm.log1p(self.depth[chunk_of(ps)])
        F[:, i + 1] = libm.log1p(self.tail[ps])
        F[:, i + 2] = libm.log1p(self.turn[ps])
        F[:, i + 3] = libm.log1p(self.think[ps])
        F[:, i + 4] = libm.log1p(self.api[ps])
        return F

    def value(self, ps, now):
        if self.w is None:
            return np.ones(len(ps))
        z = self.features(ps, now, 2.0) @ self.w      # at the middle of the span it stands for (hints)
        return 1.0 / (1.0 + libm.exp(-np.clip(z, -40, 40)))

    def _sample(self, ps, now):
        """Keep a few of ``ps`` (every len/k-th) as training samples at their current age."""
        if not len(ps):
            return
        cand = ps[::max(1, len(ps) // self.spg)]
        base = len(self.s_t)
        self.sX.append(self.features(cand, now))
        H = min(self.H, self.label_cap)
        for i, p in enumerate(cand.tolist()):
            self.pending.setdefault(p, []).append(base + i)
            self.s_t.append(now)
            self.s_H.append(H)
            self.s_label.append(-1)

    def on_event(self, ps, gaps, now):
        # a demand resolves the payloads' pending samples: demanded within H of the sample?
        pend = self.pending
        if not pend:
            return
        for p in ps.tolist():
            js = pend.pop(p, None)
            if js:
                for j in js:
                    self.s_label[j] = 1 if now - self.s_t[j] <= self.s_H[j] else 0

    def on_start(self, ps, now):
        self._sample(ps, now)

    def revisit(self, ps, now):
        self._sample(ps, now)

    def refit(self, now):
        if self.s_t:
            t = np.asarray(self.s_t)
            H = np.asarray(self.s_H)
            lab = np.asarray(self.s_label, dtype=np.int8)
            expired = (lab == -1) & (now - t > H)
            if expired.any():
                lab[expired] = 0
                for p in list(self.pending):
                    js = [j for j in self.pending[p] if not expired[j]]
                    if js:
                        self.pending[p] = js
                    else:
                        del self.pending[p]
            X = np.concatenate(self.sX)
            done = lab >= 0
            if done.any():
                self.rX = np.concatenate([self.rX, X[done]])[-self.window:]
                self.ry = np.concatenate([self.ry, lab[done].astype(np.float32)])[-self.window:]
            keep = np.flatnonzero(~done)
            remap = np.full(len(lab), -1, dtype=np.int64)
            remap[keep] = np.arange(len(keep))
            self.sX = [X[keep]]
            self.s_t = t[keep].tolist()
            self.s_H = H[keep].tolist()
            self.s_label = [-1] * len(keep)
            self.pending = {p: [int(remap[j]) for j in js] for p, js in self.pending.items()}
        if len(self.ry) >= 50 and 0 < self.ry.sum() < len(self.ry):
            self._fit()

    def _fit(self):
        X = self.rX.astype(np.float64)
        y = self.ry.astype(np.float64)
        d = X.shape[1]
        w = np.zeros(d) if self.w is None else self.w.copy()
        reg = self.l2 * np.eye(d)
        reg[0, 0] = 0.0
        for _ in range(4):
            z = np.clip(X @ w, -40, 40)
            p = 1.0 / (1.0 + libm.exp(-z))
            g = X.T @ (p - y) + reg @ w
            Wt = p * (1 - p)
            Hm = (X * Wt[:, None]).T @ X + reg + 1e-9 * np.eye(d)
            w = w - np.linalg.solve(Hm, g)
        self.w = w
        self.fits += 1


def make_reuse(kind: str, n2: int, depth: np.ndarray, compiled: bool = False, **params):
    """The estimator ``kind``; ``compiled``: its per-request work in numba (hints only: learned's
    stays interpreted), with the same estimates."""
    if kind == "hints":
        return (CompiledHintsReuse if compiled else HintsReuse)(n2, depth, **params)
    if kind == "learned":
        return LearnedReuse(n2, depth, **params)
    raise ValueError(kind)
