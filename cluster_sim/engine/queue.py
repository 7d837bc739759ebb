"""The touch log and the candidate heaps: a tier's resident payloads in increasing key order (LRU's key: the stamp of the last touch), validity checked lazily.

Part of the compiled engine (:mod:`cluster_sim.engine._jit`, whose docstring describes the state ``S``)."""
from __future__ import annotations

import numpy as np
from numba import njit

from . import hooks as H
from .layout import (
    HBM,
    K_HEAP_COMPACTIONS,
    K_LOG_COMPACTIONS,
    M_CAP0,
    M_CLOCK,
    M_KEYED,
    M_LOGN,
    _bit,
)


@njit(cache=True)
def _compact_log(S):
    """Drop log entries every active walker has passed, and stale ones (a later touch)."""
    M = S.M
    n = M[M_LOGN]
    front = M[M_CLOCK]
    for t in range(3):
        if M[M_CAP0 + t] > 0 and S.wfront[t] < front and (t == HBM or M[M_KEYED] == 0):
            front = S.wfront[t]
    lp, ls, stamp = S.log_p, S.log_s, S.stamp
    k = 0
    for i in range(n):
        s = ls[i]
        p = lp[i]
        if s > front and stamp[p] == s:
            lp[k] = p
            ls[k] = s
            k += 1
    M[M_LOGN] = k
    for t in range(3):
        S.wpos[t] = np.searchsorted(ls[:k], S.wfront[t], side="right")
    S.K[K_LOG_COMPACTIONS] += 1


@njit(cache=True, inline="always")
def _touch(S, p):
    M = S.M
    s = M[M_CLOCK]
    S.stamp[p] = s
    M[M_CLOCK] = s + 1
    n = M[M_LOGN]
    if n == len(S.log_p):      # room is made before each request (replay): never in the hot path
        raise RuntimeError("cluster_sim engine: touch log full")
    S.log_p[n] = p
    S.log_s[n] = s
    M[M_LOGN] = n + 1


@njit(cache=True)
def _heap_compact(S, t):
    """Keep the valid entries of tier ``t``'s heap, once each, sorted (a sorted array is a heap)."""
    o = S.hoff[t]
    n = S.hn[t]
    if H.compact_heap(S, t, o, n):       # a policy's own queues (keyed heaps)
        return
    hs = S.heap_s[o:o + n]
    hp = S.heap_p[o:o + n]
    bit = _bit(t)
    order = np.argsort(hs, kind="mergesort")
    ks = np.empty(n, dtype=np.int64)
    kp = np.empty(n, dtype=np.int64)
    k = 0
    last = -1
    for i in range(n):
        s = hs[order[i]]
        p = hp[order[i]]
        if s == last:
            continue
        if S.stamp[p] == s and (S.res[p] & bit) != 0:
            ks[k] = s
            kp[k] = p
            k += 1
            last = s
    hs[:k] = ks[:k]
    hp[:k] = kp[:k]
    S.hn[t] = k
    S.K[K_HEAP_COMPACTIONS] += 1


@njit(cache=True, inline="always")
def _heap_push(S, t, s, p):
    """Push (key ``s``, payload ``p``) on tier ``t``'s heap, ordered by (key, payload): the touch
    log's keys (stamps) are unique, a keyed queue's ties are broken by the payload as a heap of tuples breaks them."""
    _heap_push_a(S.heap_s, S.heap_p, S.hn, S.hcap, S.hoff[t], t, s, p)


@njit(cache=True, inline="always")
def _heap_push_a(hs, hp, hn, hcap, o, t, s, p):
    """:func:`_heap_push` on the heap's arrays (``o``: heap ``t``'s offset; see :func:`_heap_pop_a`)."""
    if hn[t] == hcap[t]:   # room is made before each request (replay): never in the hot path
        raise RuntimeError("cluster_sim engine: candidate heap full")
    i = hn[t]
    hn[t] = i + 1
    while i > 0:
        par = (i - 1) >> 1
        a = hs[o + par]
        if a < s or (a == s and hp[o + par] <= p):
            break
        hs[o + i] = a
        hp[o + i] = hp[o + par]
        i = par
    hs[o + i] = s
    hp[o + i] = p


@njit(cache=True, inline="always")
def _heap_pop(S, t):
    return _heap_pop_a(S.heap_s, S.heap_p, S.hn, S.hoff[t], t)


@njit(cache=True, inline="always")
def _heap_pop_a(hs, hp, hn, o, t):
    """:func:`_heap_pop` on the heap's arrays (``o``: tier ``t``'s offset): the hot loops pass
    arrays, not the state (an inlined helper taking the state costs a reference count of each
    of its arrays per call where numba cannot prune them)."""
    s0 = hs[o]
    p0 = hp[o]
    n = hn[t] - 1
    hn[t] = n
    if n > 0:
        s = hs[o + n]
        p = hp[o + n]
        i = 0
        while True:
            a = 2 * i + 1
            if a >= n:
                break
            b = a + 1
            if b < n and (hs[o + b] < hs[o + a] or (hs[o + b] == hs[o + a] and hp[o + b] < hp[o + a])):
                a = b
            if hs[o + a] > s or (hs[o + a] == s and hp[o + a] >= p):
                break
            hs[o + i] = hs[o + a]
            hp[o + i] = hp[o + a]
            i = a
        hs[o + i] = s
        hp[o + i] = p
    return s0, p0


@njit(cache=True, inline="always")
def _note_enter(S, t, p):
    """``p`` entered tier ``t``: a walker already past its stamp must be handed it."""
    s = S.stamp[p]
    if 0 <= s <= S.wfront[t]:
        _heap_push(S, t, s, p)


@njit(cache=True, inline="always")
def _pop(S, t):
    """The least-key valid candidate of tier ``t`` as (key, payload), or (-1, -1); forgotten
    until pushed back."""
    if t != HBM and S.M[M_KEYED] != 0:
        return H.pop(S, t)
    return _pop_log(S.M[M_LOGN], S.stamp, S.res, S.log_p, S.log_s, S.wpos, S.wfront, S.hn, S.hoff[t],
                    S.heap_s, S.heap_p, t)


@njit(cache=True, inline="always")
def _pop_log(n, stamp, res, lp, ls, wpos, wfront, hn, o, heap_s, heap_p, t):
    """:func:`_pop` of an unkeyed tier on the arrays (``n``: the touch log's length, ``o``: the
    tier's heap offset)."""
    bit = _bit(t)
    while True:
        i = wpos[t]
        s = -1
        p = -1
        while i < n:
            s = ls[i]
            p = lp[i]
            if stamp[p] == s and (res[p] & bit) != 0:
                break
            i += 1
            wfront[t] = s
            s = -1
        wpos[t] = i
        if hn[t] > 0 and (s < 0 or heap_s[o] < s):
            hs, hp = _heap_pop_a(heap_s, heap_p, hn, o, t)
            if stamp[hp] == hs and (res[hp] & bit) != 0:
                return hs, hp
            continue
        if s >= 0:
            wpos[t] = i + 1
            wfront[t] = s
            return s, p
        return -1, -1


@njit(cache=True)
def _heap_rebuild(S, t, o, n, keep):
    """Heap ``t`` (entries at ``o``, ``n`` of them) keeps the entries marked in ``keep``, once each,
    sorted by (key, payload) (a sorted array is a heap)."""
    hs = S.heap_s[o:o + n]
    hp = S.heap_p[o:o + n]
    ks = np.empty(n, dtype=np.int64)
    kp = np.empty(n, dtype=np.int64)
    k = 0
    for i in range(n):
        if keep[i]:
            ks[k] = hs[i]
            kp[k] = hp[i]
            k += 1
    o1 = np.argsort(kp[:k], kind="mergesort")
    o2 = np.argsort(ks[:k][o1], kind="mergesort")     # stable: by (key, payload)
    m = 0
    for i in range(k):
        j = o1[o2[i]]
        if m and hs[m - 1] == ks[j] and hp[m - 1] == kp[j]:
            continue                                  # the same entry twice (a re-key to the same key)
        hs[m] = ks[j]
        hp[m] = kp[j]
        m += 1
    S.hn[t] = m
    S.K[K_HEAP_COMPACTIONS] += 1
