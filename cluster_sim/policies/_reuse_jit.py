"""Compiled per-request work of ``reuse=hints`` (numba): the same references, groups, scheduled
re-evaluations and estimates as :class:`~cluster_sim.policies.reuse.HintsReuse`, over flat arrays.

The interpreted estimator keeps its groups in a dict of arrays, its scheduled re-evaluations in
a ``heapq`` list of tuples and a session's last group in a dict; here (docs/decisions.md 123):

* a group's members are a slice ``gbuf[gs[g]:gs[g] + gn[g]]`` of one growing buffer (``gn[g]``
  = -1: the group is gone), its start ``gt0[g]``;
* the re-evaluations are a binary heap over ``(time, group, bin)`` in three arrays, which pops in
  the total order ``heapq`` pops the tuples in;
* a thread's last group is ``thr[tid]`` (-1: none), ``tid`` the thread's dense id, given by the
  caller (one array, so that the compiled engine can keep it among its own: decision 136).

``GM`` holds the counters: the next group id, the buffer's used length, the heap's length. The
caller keeps room (:meth:`~cluster_sim.policies.reuse.CompiledHintsReuse._room`) before every
call: an access adds at most twice the deepest path plus one member and three groups. The
refit (a few array operations every ``refit_requests`` requests) stays interpreted and shared.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .._nrt import borrow as _b

NB = 24                 # age bins, as reuse._NB
LAST_REVISIT = 11
STOPS = 5
TB = 3
N_FA = 2 * STOPS * 2 * TB * 3

G_NEXT, G_USED, G_EVN = range(3)
N_GM = 3


@njit(cache=True, inline="always")
def age_bin(x):
    """reuse.age_bin of one age: 0 for [0, 1) (and NaN), k for [2^(k-1), 2^k), capped."""
    if x >= 1.0:
        e = math.frexp(x)[1]
        return e if e < NB - 1 else NB - 1
    return 0


@njit(cache=True, inline="always")
def _turn_bucket(t):
    return 0 if t <= 1 else (1 if t < 10 else 2)


@njit(cache=True, inline="always")
def fa_class(stop, sub, touches, sup, turn):
    tb = (touches if touches < TB else TB) - 1
    k = ((sup * STOPS + stop) * 2 + sub) * TB + tb
    return k * 3 + _turn_bucket(turn)


@njit(cache=True, inline="always")
def st_class(stop, sub, demanded, turn):
    k = (demanded * STOPS + stop) * 2 + sub
    return N_FA + k * 3 + _turn_bucket(turn)


# ---------------------------------------------------------------------------- the re-evaluation heap
@njit(cache=True, inline="always")
def _ev_less(t1, g1, b1, t2, g2, b2):
    if t1 != t2:
        return t1 < t2
    if g1 != g2:
        return g1 < g2
    return b1 < b2


@njit(cache=True)
def _ev_push(evt, evg, evb, GM, t, g, b):
    pos = GM[G_EVN]
    GM[G_EVN] = pos + 1
    while pos > 0:
        par = (pos - 1) >> 1
        if not _ev_less(t, g, b, evt[par], evg[par], evb[par]):
            break
        evt[pos] = evt[par]
        evg[pos] = evg[par]
        evb[pos] = evb[par]
        pos = par
    evt[pos] = t
    evg[pos] = g
    evb[pos] = b


@njit(cache=True)
def _ev_pop(evt, evg, evb, GM):
    """Remove the least entry (the caller read it at index 0)."""
    n = GM[G_EVN] - 1
    GM[G_EVN] = n
    if n == 0:
        return
    t, g, b = evt[n], evg[n], evb[n]
    pos = 0
    while True:
        ch = 2 * pos + 1
        if ch >= n:
            break
        if ch + 1 < n and _ev_less(evt[ch + 1], evg[ch + 1], evb[ch + 1], evt[ch], evg[ch], evb[ch]):
            ch += 1
        if not _ev_less(evt[ch], evg[ch], evb[ch], t, g, b):
            break
        evt[pos] = evt[ch]
        evg[pos] = evg[ch]
        evb[pos] = evb[ch]
        pos = ch
    evt[pos] = t
    evg[pos] = g
    evb[pos] = b


# ---------------------------------------------------------------------------- references
@njit(cache=True)
def _begin(A, G, ps, n, now, cls_of):
    """_EventReuse._begin + _group: a reference of class ``cls_of[i]`` for each of ``ps[:n]`` (in
    place in ``gbuf`` already), one group of them; returns the group id."""
    start, cls, grp = A[1], A[2], A[3]
    gbuf, gs, gn, gt0, evt, evg, evb, GM = G
    g = GM[G_NEXT]
    GM[G_NEXT] = g + 1
    o = GM[G_USED]
    for i in range(n):
        p = ps[i]
        start[p] = now
        cls[p] = cls_of[i]
        grp[p] = g
        gbuf[o + i] = p
    gs[g] = o
    gn[g] = n
    gt0[g] = now
    GM[G_USED] = o + n
    _ev_push(evt, evg, evb, GM, now + 1.0, g, 0)
    return g


@njit(cache=True)
def _lowered(A, Q, ps, n, now, out, k):
    """_lowered of ``ps[:n]``: new estimates; the payloads whose E went down appended to ``out``
    from ``k``; returns the new length."""
    E, start, cls = A[0], A[1], A[2]
    for i in range(n):
        p = ps[i]
        new = Q[cls[p], age_bin(2.0 * (now - start[p]))]
        if new < E[p]:
            out[k] = p
            k += 1
        E[p] = new
    return k


@njit(cache=True)
def access(E, start, cls, grp, touches, sup, stop_a, sub_a, turn_a, D, Cn, Q,
           gbuf, gs, gn, gt0, evt, evg, evb, GM, thr, path, state, now, stop, sub, key, turn):
    """HintsReuse.access (without ``seen``, which the caller counts): a request touched the FA
    chunks of ``path`` and demanded ``state`` (-1: none); ``key``: its thread's dense id (-1: no
    session), ``thr[key]`` that thread's last group (-1: none). Returns the payloads whose E went
    down, in the interpreted order."""
    A = (_b(E), _b(start), _b(cls), _b(grp))
    G = (_b(gbuf), _b(gs), _b(gn), _b(gt0), _b(evt), _b(evg), _b(evb), _b(GM))
    m = len(path)
    prev = -1
    if key >= 0:
        prev = thr[key]
    out = np.empty(m + 1 + (gn[prev] if prev >= 0 and gn[prev] > 0 else 0), dtype=np.int64)
    k = 0
    if m:
        o = GM[G_USED]
        fa = gbuf[o:o + m]                    # the group's slot, filled in place
        cl = np.empty(m, dtype=np.int32)
        for i in range(m):
            p = 2 * np.int64(path[i])
            fa[i] = p
            s0 = start[p]
            if s0 == s0:                      # a touch ends the open reference: an event
                D[cls[p], age_bin(now - s0)] += 1.0
            t = touches[p] + 1
            touches[p] = t
            sup[p] = False
            stop_a[p] = stop
            sub_a[p] = sub
            turn_a[p] = turn
            cl[i] = fa_class(stop, sub, t, 0, turn)
        g = _begin(A, G, fa, m, now, cl)
        k = _lowered(A, Q, fa, m, now, out, k)
        if key >= 0:
            thr[key] = g
            if prev >= 0 and gn[prev] >= 0:
                # the session's previous request: what this one did not touch is superseded
                po = gs[prev]
                pn = gn[prev]
                o = GM[G_USED]
                left = gbuf[o:o + pn]
                nl = 0
                for i in range(pn):
                    p = gbuf[po + i]
                    if grp[p] == prev:
                        left[nl] = p
                        nl += 1
                if nl:
                    cl = np.empty(nl, dtype=np.int32)
                    for i in range(nl):
                        p = left[i]
                        Cn[cls[p], age_bin(now - start[p])] += 1.0
                        sup[p] = True
                        cl[i] = fa_class(np.int64(stop_a[p]), np.int64(sub_a[p]), touches[p], 1, turn_a[p])
                    _begin(A, G, left, nl, now, cl)
                    k = _lowered(A, Q, left, nl, now, out, k)
    if state >= 0:
        s0 = start[state]
        if s0 == s0:
            D[cls[state], age_bin(now - s0)] += 1.0
        touches[state] += 1
        stop_a[state] = stop
        sub_a[state] = sub
        turn_a[state] = turn
        o = GM[G_USED]
        q = gbuf[o:o + 1]
        q[0] = state
        cl = np.empty(1, dtype=np.int32)
        cl[0] = st_class(stop, sub, 1, turn)
        _begin(A, G, q, 1, now, cl)
        k = _lowered(A, Q, q, 1, now, out, k)
    return out[:k]


@njit(cache=True)
def created(E, start, cls, grp, touches, sup, stop_a, sub_a, turn_a, D, Cn, Q,
            gbuf, gs, gn, gt0, evt, evg, evb, GM, qs, now, stop, sub, turn):
    """HintsReuse.created_states: a fresh reference for each STATE of ``qs``; an open one ends
    untouched. Returns the payloads whose E went down."""
    A = (_b(E), _b(start), _b(cls), _b(grp))
    G = (_b(gbuf), _b(gs), _b(gn), _b(gt0), _b(evt), _b(evg), _b(evb), _b(GM))
    n = len(qs)
    out = np.empty(n, dtype=np.int64)
    if not n:
        return out
    for i in range(n):
        q = qs[i]
        s0 = start[q]
        if s0 == s0:
            Cn[cls[q], age_bin(now - s0)] += 1.0
    o = GM[G_USED]
    ps = gbuf[o:o + n]
    cl = np.empty(n, dtype=np.int32)
    c0 = st_class(stop, sub, 0, turn)
    for i in range(n):
        q = qs[i]
        ps[i] = q
        touches[q] = 1
        stop_a[q] = stop
        sub_a[q] = sub
        turn_a[q] = turn
        cl[i] = c0
    _begin(A, G, ps, n, now, cl)
    k = _lowered(A, Q, ps, n, now, out, 0)
    return out[:k]


@njit(cache=True)
def open_counts(start, cls, now, O):
    """HintsReuse.refit's count of the open references by class and age bin, added to ``O`` (each
    count a sum of ones: exact, as the interpreted bincount's)."""
    for p in range(len(start)):
        s = start[p]
        if s == s:
            O[cls[p], age_bin(now - s)] += 1.0


@njit(cache=True)
def revalue_live(start, cls, Q, res, now, E):
    """The refit's re-evaluation: ``E`` of every open reference still cached, from the new table."""
    for p in range(len(start)):
        s = start[p]
        if s == s and res[p] != 0:
            E[p] = Q[cls[p], age_bin(2.0 * (now - s))]


@njit(cache=True)
def tick(E, start, cls, grp, Q, gbuf, gs, gn, gt0, evt, evg, evb, GM, res, now):
    """The scheduled re-evaluations due at ``now`` (HintsReuse.tick without the refit): the
    payloads whose E went down, in the interpreted order."""
    A = (_b(E), _b(start), _b(cls), _b(grp))
    GM_ = _b(GM)
    due_n = 0
    if GM_[G_EVN] == 0 or evt[0] > now:
        return np.empty(0, dtype=np.int64)
    due = np.empty(16, dtype=np.int64)
    while GM_[G_EVN] > 0 and evt[0] <= now:
        g = evg[0]
        b = evb[0]
        _ev_pop(evt, evg, evb, GM_)
        n = gn[g]
        if n < 0:
            continue
        o = gs[g]
        j = 0
        for i in range(n):
            p = gbuf[o + i]
            if grp[p] == g and res[p] != 0:
                gbuf[o + j] = p               # the group keeps its current members, in order
                j += 1
        if j == 0:
            gn[g] = -1
            continue
        gn[g] = j
        if due_n + j > len(due):
            d2 = np.empty(2 * (due_n + j), dtype=np.int64)
            d2[:due_n] = due[:due_n]
            due = d2
        due[due_n:due_n + j] = gbuf[o:o + j]
        due_n += j
        t0 = gt0[g]
        kk = b + 1
        while kk <= LAST_REVISIT and t0 + 4.0 ** kk <= now:
            kk += 1
        if kk <= LAST_REVISIT:
            _ev_push(evt, evg, evb, GM_, t0 + 4.0 ** kk, g, kk)
        else:
            gn[g] = -1
    out = np.empty(due_n, dtype=np.int64)
    k = _lowered(A, Q, due, due_n, now, out, 0)
    return out[:k]
