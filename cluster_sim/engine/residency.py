"""Residency: copies entering and leaving tiers, the descendant counts, the SSD's admission accounting, and the policy's hooks that hear them.

Part of the compiled engine (:mod:`cluster_sim.engine._jit`, whose docstring describes the state ``S``)."""
from __future__ import annotations

import numpy as np
from numba import njit

from . import hooks as H
from .layout import (
    EV_REMOVED,
    EV_STORED,
    F_ADM,
    F_HIT,
    HBM,
    K_ADM_FA,
    K_ADM_HIT_FA,
    K_ADM_HIT_STATE,
    K_ADM_STATE,
    K_WR_FA,
    K_WR_STATE,
    M_AQN,
    M_CAP_AQ,
    M_COUNTING,
    M_ENTN0,
    M_FTL,
    M_KEV,
    M_LEFT0,
    M_LEFTN0,
    M_O_AQ,
    M_O_B,
    M_O_NFA,
    M_O_NST,
    M_SEQ,
    M_USED0,
    M_WR,
    OP_TRIM,
    OP_WRITE,
    OP_WRITE_UNCOUNTED,
    PK_REQUESTED,
    SSD,
    _bit,
    _psize,
    _psize_a,
    log_event,
)
from .queue import (
    _heap_push,
    _note_enter,
)


@njit(cache=True, inline="always")
def _next_use(S, p):
    """The hindsight facility (a policy with the node's future stream): the next request of the node's stream
    using payload ``p`` (M_NFUT: none)."""
    return S.PX[S.M[M_O_NST if p & 1 else M_O_NFA] + (p >> 1)]


@njit(cache=True, inline="always")
def _request_write(S, p):
    """``ctx.request_ssd_admission(p)`` once per request step (pending: ``pseq[p]`` = this request)."""
    seq = S.M[M_SEQ]
    o = S.M[M_O_B] + p
    if S.PX[o] != seq:
        S.PX[o] = seq
        S.K[PK_REQUESTED] += 1
        n = S.M[M_AQN]
        if n == S.M[M_CAP_AQ]:   # room is made before each request (replay): never in the hot path
            raise RuntimeError("cluster_sim engine: admission queue full")
        S.PX[S.M[M_O_AQ] + n] = p
        S.M[M_AQN] = n + 1


@njit(cache=True, inline="always")
def inserted_payload(path, r, states, k):
    """The ``k``-th payload a request created (new FA ``c_{r+1} .. c_m``, then its new STATEs): the
    order in which a policy's ``on_insert`` hears them (those still resident)."""
    return 2 * path[r + k] if k < len(path) - r else states[k - (len(path) - r)]


@njit(cache=True)
def _enter_many(S, t, ps):
    """The policy's ``enter`` of each payload of ``ps`` (distinct, new in ``t``), in order (a policy
    may take them in one batch: its ``enter_many`` hook)."""
    if len(ps) == 0:
        return
    H.enter_many(S, t, ps)


@njit(cache=True, inline="always")
def _add_copy(S, t, p):
    """A copy of ``p`` in tier ``t`` (not there yet)."""
    bit = _bit(t)
    was = S.res[p]
    S.res[p] = was | bit
    S.M[M_USED0 + t] += _psize(S, p)
    S.M[M_ENTN0 + t] += 1
    if (p & 1) == 0:
        c = p >> 1
        if was == 0:
            _kv_event(S, EV_STORED, c)
        a = S.anchor[c]
        e = a + S.depth[c] - 1
        for i in range(a, e):
            y = S.flat[i]
            S.dcnt[t, y] += 1
            if was == 0:
                S.dany[y] += 1
    _note_enter(S, t, p)
    H.enter(S, t, p)


@njit(cache=True, inline="always")
def _close_ssd(S, p):
    f = S.flags[p]
    if (f & F_ADM) != 0 and (f & F_HIT) != 0:
        if p & 1:
            S.K[K_ADM_HIT_STATE] += 1
        else:
            S.K[K_ADM_HIT_FA] += 1
    S.flags[p] = 0


@njit(cache=True, inline="always")
def _kv_event(S, op, c):
    """A KV-aware router's event (fleet.sync=kv_events): chunk ``c`` stored / removed."""
    if S.M[M_KEV] != 0:
        log_event(S.M, S.elog, op, c, 0, 0)


@njit(cache=True, inline="always")
def _ftl_trim(S, p):
    """The FTL's trim of ``p``'s SSD copy (the interpreted node's ``ftl.trim``), when it has one."""
    if S.M[M_FTL] != 0:
        log_event(S.M, S.elog, OP_TRIM, p, 0, 0)


@njit(cache=True)
def _ftl_batch_trims(S, t, ps):
    """Log the FTL's trims of the SSD copies a batch removal of ``ps`` from tier ``t`` is about to
    close, in the order of the interpreted ``CacheState.remove_copies``: the batch's own copies by
    payload, then the STATEs of the FAs that lose their last copy, by chunk. (The engine's removals
    hear a batch in its own order; only the FTL's result depends on the order of its trims.)"""
    res = S.res
    bit = _bit(t)
    arr = np.empty(len(ps), dtype=np.int64)
    for k in range(len(ps)):
        arr[k] = ps[k]
    arr = np.unique(arr)
    M, elog = S.M, S.elog
    if t == SSD:
        for p in arr:
            if (res[p] & bit) != 0:
                log_event(M, elog, OP_TRIM, p, 0, 0)
    for p in arr:
        r = res[p]
        if (p & 1) == 0 and (r & bit) != 0 and (r & ~bit) == 0 and (res[p | 1] & 4) != 0:
            q = p | 1
            if t == SSD:
                i = np.searchsorted(arr, q)
                if i < len(arr) and arr[i] == q:
                    continue          # a copy of the batch itself, closed above
            log_event(M, elog, OP_TRIM, q, 0, 0)


@njit(cache=True, inline="always")
def _count_ssd_write(S, p):
    _count_ssd_write_a(S.M, S.K, S.flags, S.sb, S.depth, S.elog, p)


@njit(cache=True, inline="always")
def _count_ssd_write_a(M, K, flags, sb, depth, elog, p):
    counting = M[M_COUNTING] != 0
    if M[M_FTL] != 0:
        log_event(M, elog, OP_WRITE if counting else OP_WRITE_UNCOUNTED, p, _psize_a(M, sb, depth, p), p & 1)
    flags[p] = F_ADM if counting else 0
    if counting:
        sz = _psize_a(M, sb, depth, p)
        M[M_WR] += sz
        if p & 1:
            K[K_WR_STATE] += sz
            K[K_ADM_STATE] += 1
        else:
            K[K_WR_FA] += sz
            K[K_ADM_FA] += 1


@njit(cache=True, inline="always")
def _remove(S, t, p, close):
    """Remove ``p``'s copy from tier ``t`` (and, if that was the FA's last copy, its STATE from
    every tier). Returns the bytes that left tier ``t``. ``close``: SSD copies leaving are closed
    (admission hit accounting)."""
    bit = _bit(t)
    r = S.res[p]
    if (r & bit) == 0:
        return 0
    now = r & ~bit
    S.res[p] = now
    sz = _psize(S, p)
    S.M[M_USED0 + t] -= sz
    S.M[M_LEFT0 + t] += sz
    S.M[M_LEFTN0 + t] += 1
    freed = sz
    hooks = H.has_leave(S)
    if hooks:
        H.leave(S, t, p)
    if t == SSD:
        H.ssd_leave(S, p)
        if close:
            _ftl_trim(S, p)
            _close_ssd(S, p)
    if (p & 1) == 0:
        c = p >> 1
        a = S.anchor[c]
        e = a + S.depth[c] - 1
        for i in range(a, e):
            y = S.flat[i]
            S.dcnt[t, y] -= 1
            if now == 0:
                S.dany[y] -= 1
        if now == 0:
            q = p | 1
            sr = S.res[q]
            if sr != 0:
                qs = _psize(S, q)
                for tt in range(3):
                    if (sr & _bit(tt)) != 0:
                        S.M[M_USED0 + tt] -= qs
                        S.M[M_LEFT0 + tt] += qs
                        S.M[M_LEFTN0 + tt] += 1
                        if tt == t:
                            freed += qs
                        if hooks:
                            H.leave_state(S, tt, q, sr)
                        if tt == SSD:
                            H.ssd_leave(S, q)
                            if close:
                                _ftl_trim(S, q)
                                _close_ssd(S, q)
                S.res[q] = 0
            _kv_event(S, EV_REMOVED, c)
        H.leaf(S, t, c, now == 0)
    if now == 0:
        H.lost(S, p)
    return freed


@njit(cache=True)
def _batch_anc(S, t, cs, born, sign):
    """``dcnt[t, a] += sign`` for every strict ancestor ``a`` of each chunk of ``cs`` (distinct),
    and ``dany[a] += sign`` for those with ``born`` set. Victims form a few root-ward chains:
    each chain is one walk from its deepest chunk, counting the chunks of ``cs`` met on the way
    (marked in ``cred``, which is zero outside a walk), so the cost is per chain, not per chunk."""
    n = len(cs)
    cred, flat, anchor, depth = S.cred, S.flat, S.anchor, S.depth
    for k in range(n):
        cred[cs[k]] = 2 if born[k] else 1
    d = np.empty(n, dtype=np.int64)
    for k in range(n):
        d[k] = -depth[cs[k]]
    order = np.argsort(d)
    for k in order:
        c = cs[k]
        if cred[c] == 0:
            continue
        a = anchor[c]
        cnt = 0
        cnta = 0
        for i in range(a + depth[c] - 1, a - 1, -1):
            y = flat[i]
            if cnt:
                S.dcnt[t, y] += sign * cnt
            if cnta:
                S.dany[y] += sign * cnta
            f = cred[y]
            if f:
                cnt += 1
                if f == 2:
                    cnta += 1
                cred[y] = 0


@njit(cache=True)
def _leave_events(S, ev, hooks, close):
    """The copies a batch removal (:func:`_remove_many`) took out, in its order, each event
    ``4 * payload + tier``: the policy's ``on_leave`` of each (``hooks``: a policy keeping queues of
    its own; never for HBM), then, for each SSD copy, the policy's ``ssd_leave`` and the admission-hit
    close (:func:`_remove`'s events, in the same order per kind: a policy's leave and the SSD's close
    touch disjoint state)."""
    if hooks:
        H.leave_many(S, ev)
    for e in ev:
        if (e & 3) == SSD:
            p = e >> 2
            H.ssd_leave(S, p)
            if close:
                _close_ssd(S, p)


@njit(cache=True)
def _remove_many(S, t, ps, close):
    """Remove the tier-``t`` copies of ``ps`` (as one by one with :func:`_remove`)."""
    if len(ps) == 1:
        _remove(S, t, ps[0], close)
        return
    cs = [np.int64(0) for _ in range(0)]
    lost = [False for _ in range(0)]
    if close and S.M[M_FTL] != 0:
        _ftl_batch_trims(S, t, ps)        # before the removal: the FTL hears nothing else in between
    was_in = H.remove_many_begin(S, t, ps)
    if not H.remove_many(S, t, ps, close, cs, lost):
        hooks = H.has_leave(S)
        # the steps on the arrays alone (an inlined helper taking S costs each victim a reference count
        # of every array of S); the copies that left a tier, in order, as events 4 * payload + tier for
        # the policy's on_leave and the SSD's close, handed to _leave_events after the loop (neither
        # reads what the loop writes, nor the loop what they write)
        M, res, sb, depth = S.M, S.res, S.sb, S.depth
        bit = _bit(t)
        ev = np.empty(4 * len(ps), dtype=np.int64)
        ne = 0
        for p in ps:
            r = res[p]
            if (r & bit) == 0:
                continue
            now = r & ~bit
            res[p] = now
            c = p >> 1
            sz = _psize_a(M, sb, depth, p)
            M[M_USED0 + t] -= sz
            M[M_LEFT0 + t] += sz
            M[M_LEFTN0 + t] += 1
            if t == SSD or (hooks and t != HBM):
                ev[ne] = 4 * p + t
                ne += 1
            if p & 1:
                continue
            cs.append(c)
            lost.append(now == 0)
            if now == 0:
                q = p | 1
                sr = res[q]
                if sr != 0:
                    qs = _psize_a(M, sb, depth, q)
                    for tt in range(3):
                        if (sr & _bit(tt)) != 0:
                            M[M_USED0 + tt] -= qs
                            M[M_LEFT0 + tt] += qs
                            M[M_LEFTN0 + tt] += 1
                            if tt == SSD or (hooks and tt != HBM):
                                ev[ne] = 4 * q + tt
                                ne += 1
                    res[q] = 0
        if ne:
            _leave_events(S, ev[:ne], hooks, close)
    if S.M[M_KEV] != 0:
        for k in range(len(cs)):
            if lost[k]:
                log_event(S.M, S.elog, EV_REMOVED, cs[k], 0, 0)
    if len(cs):
        _batch_anc(S, t, cs, lost, np.int64(-1))
        H.leaf_many(S, t, cs, lost)
    H.remove_many_end(S, t, was_in)


@njit(cache=True)
def _add_many(S, t, ps):
    """Tier-``t`` copies of ``ps`` (none in ``t`` yet), as one by one with :func:`_add_copy`."""
    if len(ps) == 1:
        _add_copy(S, t, ps[0])
        return
    bit = _bit(t)
    cs = [np.int64(0) for _ in range(0)]
    born = [False for _ in range(0)]
    M, res, sb, depth = S.M, S.res, S.sb, S.depth
    M[M_ENTN0 + t] += len(ps)
    for p in ps:
        was = res[p]
        res[p] = was | bit
        M[M_USED0 + t] += _psize_a(M, sb, depth, p)
        if (p & 1) == 0:
            cs.append(p >> 1)
            born.append(was == 0)
    if len(cs):
        _batch_anc(S, t, cs, born, np.int64(1))
        if M[M_KEV] != 0:
            for k in range(len(cs)):
                if born[k]:
                    log_event(M, S.elog, EV_STORED, cs[k], 0, 0)
    stamp, wfront = S.stamp, S.wfront
    for p in ps:        # _note_enter, the state passed only to push
        s = stamp[p]
        if 0 <= s <= wfront[t]:
            _heap_push(S, t, s, p)
    if H.has_enter(S):
        _enter_many(S, t, ps)


@njit(cache=True, inline="always")
def _nearest_in_tier(S, c, bit):
    return _nearest_in_tier_a(S.res, S.anchor, S.depth, S.flat, c, bit)


@njit(cache=True, inline="always")
def _nearest_in_tier_a(res, anchor, depth, flat, c, bit):
    """The nearest strict ancestor of chunk ``c`` whose FA is in the tier of ``bit`` (-1: none)."""
    a = anchor[c]
    for i in range(a + depth[c] - 2, a - 1, -1):
        y = flat[i]
        if (res[2 * y] & bit) != 0:
            return y
    return -1
