"""workload_aware's compiled hooks and kernels: one candidate heap per request category and tier
(heap index WA_H0 + 2 w + (t - 1)), keyed by the category's fitted reuse score; its own walk takes
the least-scored category heads first."""
import math
import numpy as np
from numba import njit

from ...engine._jit import (
    DECIDE,
    DEMOTE,
    DRAM,
    DROP,
    F_WCH,
    F_WSK,
    HBM,
    M_CAP2,
    M_LO,
    M_GROW,
    M_O_A,
    M_O_G,
    M_SEQ,
    M_SHORT,
    M_USED0,
    M_USED1,
    M_USED2,
    SSD,
    _bit,
    _chain_credit_a,
    _heap_compact,
    _heap_pop_a,
    _heap_push_a,
    _heap_rebuild,
    _psize_a,
    inserted_payload,
)
from .layout import (
    FXW_LT,
    FXW_NOW,
    FXW_THETA,
    GROW_WAH,
    M_O_WC,
    M_O_WK,
    M_O_WQ,
    M_WA_CAT,
    M_WA_FIT,
    M_WA_NCAT,
    M_WA_ROOM1,
    M_WA_ROOM2,
    M_WA_THETA,
    PK_WA_DEAD,
    PK_WA_DEMOTED,
    PK_WA_DROPPED,
    PK_WA_FAILED,
    PK_WA_REQUEUED,
    PK_WA_SCORED,
    PK_WA_SSD_EV,
    WA_H0,
)


@njit(cache=True, inline="always")
def _wa_heap(t, w):
    return WA_H0 + 2 * w + (t - 1)


@njit(cache=True, inline="always")
def _wa_slot(S, t, p):
    """Where payload ``p``'s entries for tier ``t`` are in segments WQ and WK (from their starts)."""
    return (t - 1) * len(S.res) + p


@njit(cache=True, inline="always")
def _wa_push(S, t, w, p, key):
    """``queues[t][w].push(p, key, p)`` with ``qcat[t][p] = w``."""
    i0 = (t - 1) * len(S.res)
    _wa_push_a(S.heap_s, S.heap_p, S.hn, S.hcap, S.hoff, S.PX, S.M[M_O_WQ] + i0, S.M[M_O_WK] + i0, t, w, p, key)


@njit(cache=True, inline="always")
def _wa_push_a(hs, hp, hn, hcap, hoff, PX, oq, ok, t, w, p, key):
    """:func:`_wa_push` on the arrays (``oq`` / ``ok``: tier ``t``'s part of segments WQ / WK)."""
    PX[oq + p] = w
    PX[ok + p] = key
    h = _wa_heap(t, w)
    _heap_push_a(hs, hp, hn, hcap, hoff[h], h, key, p)


@njit(cache=True, inline="always")
def _wa_top_a(hs, hp, hn, hoff, PX, oq, ok, t, w):
    """``queues[t][w].peek()``: its least valid entry (key, payload), or (-1, -1); stale entries on
    top are popped."""
    h = _wa_heap(t, w)
    o = hoff[h]
    while hn[h] > 0:
        s = hs[o]
        p = hp[o]
        if PX[oq + p] == w and PX[ok + p] == s:
            return s, p
        _heap_pop_a(hs, hp, hn, o, h)
    return np.int64(-1), np.int64(-1)


@njit(cache=True)
def _wa_heap_compact(S, h, o, n):
    """Keep the valid entries of a category queue, once each, sorted by (key, payload)."""
    t = 1 + ((h - WA_H0) & 1)
    w = (h - WA_H0) >> 1
    i0 = (t - 1) * len(S.res)
    oq = S.M[M_O_WQ] + i0
    ok = S.M[M_O_WK] + i0
    keep = np.empty(n, dtype=np.bool_)
    for i in range(n):
        p = S.heap_p[o + i]
        keep[i] = S.PX[oq + p] == w and S.PX[ok + p] == S.heap_s[o + i]
    _heap_rebuild(S, h, o, n, keep)


@njit(cache=True)
def _wa_enter(S, t, p):
    """``WorkloadAwarePolicy.on_enter``: filed under its category (the request's if it has none)."""
    if t == HBM:
        return
    o = S.M[M_O_A] + p
    w = S.PX[o]
    if w < 0:
        w = S.M[M_WA_CAT]
        S.PX[o] = w
    _wa_push(S, t, w, p, S.stamp[p])


@njit(cache=True, inline="always")
def _wa_leave(S, t, p):
    """``WorkloadAwarePolicy.on_leave``."""
    if t == HBM:
        return
    i = _wa_slot(S, t, p)
    S.PX[S.M[M_O_WQ] + i] = -1
    S.PX[S.M[M_O_WK] + i] = -1


@njit(cache=True)
def _wa_touch(S, p, w, now):
    """``_recategorise`` of one payload to category ``w`` (a filed one moves to ``w``'s queue with its
    stamp), then ``last_t[p] = now``."""
    o = S.M[M_O_A] + p
    if S.PX[o] != w:
        S.PX[o] = w
        for t in range(DRAM, SSD + 1):
            if S.PX[S.M[M_O_WQ] + _wa_slot(S, t, p)] >= 0:
                _wa_push(S, t, w, p, S.stamp[p])
    S.FX[FXW_LT + p] = now


@njit(cache=True)
def _wa_access(S, path, r, q):
    """``WorkloadAwarePolicy.on_access`` (its statistics are the wrapper's): guard the resident path,
    recategorise the payloads and stamp their time."""
    M = S.M
    seq = M[M_SEQ]
    og = M[M_O_G]
    for k in range(r):
        S.PX[og + path[k]] = seq
    w = M[M_WA_CAT]
    now = S.FX[FXW_NOW]
    for k in range(len(path)):
        _wa_touch(S, 2 * path[k], w, now)
    if q >= 0:
        _wa_touch(S, q, w, now)


@njit(cache=True, inline="always")
def _wa_score_a(FX, f, p, now):
    """``WorkloadAwarePolicy.score`` (the reference's arithmetic, in its order; ``f``: the fit of the
    payload's category in FX)."""
    d = now - FX[FXW_LT + p]
    if d > FX[f + 2]:
        return 0.0
    x = 0.0 if 0.0 > d else d            # max(d, 0.0)
    return FX[f] * math.exp(-FX[f + 1] * x) * FX[f + 3]


@njit(cache=True, inline="always")
def _wa_may_leave_a(pin, flags, dcnt, cred, res, dany, cred_any, PX, og, t, p, action_drop, seq, bit):
    """``select_victims``' ``may_leave``: not pinned nor chosen; an FA copy a tentative leaf of the
    tier and, when its last copy would go, without resident descendants, pinned STATE or guard
    (``og``: segment G, the request's guard)."""
    if pin[p] == seq or (flags[p] & F_WCH) != 0:
        return False
    if (p & 1) == 0:
        c = p >> 1
        d = dcnt[t, c]
        if d != 0 and d != cred[c]:
            return False
        if action_drop and res[p] == bit:
            da = dany[c]
            if da != 0 and da != cred_any[c]:
                return False
            q = p | 1
            if (res[q] != 0 and pin[q] == seq) or PX[og + c] == seq:
                return False
    return True


@njit(cache=True)
def _wa_walk(S, t, need, out, acts):
    """``WorkloadAwarePolicy.select_victims`` of tier ``t`` (DRAM or SSD): the victim is the head
    (over the category queues) with the least (score, -depth, key, payload); a head that may not
    leave now is skipped for this call (and reconsidered when a victim credits it); a head whose key
    is stale is re-filed under its stamp (``requeued``). Appends the victims and their actions; or,
    atomically, returns False with nothing chosen and the shortfall in ``M[M_SHORT]`` (the counts of
    heads scored, re-filed and dead victims stay, as the reference's do). Chain credits as in
    :func:`_walk` (zero between walks)."""
    M, K = S.M, S.K
    bit = _bit(t)
    seq = M[M_SEQ]
    now = S.FX[FXW_NOW]
    ncat = M[M_WA_NCAT]
    demote_ok = t == DRAM and M[M_CAP2] > 0
    theta_on = M[M_WA_THETA] != 0
    theta = S.FX[FXW_THETA]
    res, flags, parent, depth, stamp = S.res, S.flags, S.parent, S.depth, S.stamp
    # the state's arrays bound once: no helper taking S in the loop (decision 141)
    hs_, hp_, hn, hcap, hoff, PX, FX = S.heap_s, S.heap_p, S.hn, S.hcap, S.hoff, S.PX, S.FX
    pin, dcnt, dany, cred, cred_any, anchor, flat, sb = S.pin, S.dcnt, S.dany, S.cred, S.cred_any, S.anchor, S.flat, S.sb
    i0 = (t - 1) * len(res)
    oq = M[M_O_WQ] + i0
    ok_ = M[M_O_WK] + i0
    og = M[M_O_G]
    fit = M[M_WA_FIT]
    hst = np.zeros(ncat, dtype=np.int64)          # heads: 0 not computed, 1 none, 2 (hsc, hdep, hkey, hp)
    hsc = np.zeros(ncat, dtype=np.float64)
    hdep = np.zeros(ncat, dtype=np.int64)
    hkey = np.zeros(ncat, dtype=np.int64)
    hp = np.zeros(ncat, dtype=np.int64)
    held_w = [np.int64(0) for _ in range(0)]
    held_s = [np.int64(0) for _ in range(0)]
    sk_w = [np.int64(0) for _ in range(0)]
    sk_s = [np.int64(0) for _ in range(0)]
    sk_p = [np.int64(0) for _ in range(0)]
    credited = [np.int64(0) for _ in range(0)]
    credited_any = [np.int64(0) for _ in range(0)]
    start = len(out)
    freed = 0
    ok = True
    while freed < need:
        bi = -1
        for w in range(ncat):
            if hst[w] == 0:
                hst[w] = 1
                while True:
                    s, p = _wa_top_a(hs_, hp_, hn, hoff, PX, oq, ok_, t, w)
                    if p < 0:
                        break
                    h = _wa_heap(t, w)
                    if stamp[p] != s:                 # touched since: re-key (stamps only grow)
                        _heap_pop_a(hs_, hp_, hn, hoff[h], h)
                        _wa_push_a(hs_, hp_, hn, hcap, hoff, PX, oq, ok_, t, w, p, stamp[p])
                        K[PK_WA_REQUEUED] += 1
                        continue
                    if not _wa_may_leave_a(pin, flags, dcnt, cred, res, dany, cred_any, PX, og, t, p,
                                           not demote_ok, seq, bit):
                        _heap_pop_a(hs_, hp_, hn, hoff[h], h)     # _wa_take
                        PX[ok_ + p] = -1
                        flags[p] |= F_WSK
                        sk_w.append(w)
                        sk_s.append(s)
                        sk_p.append(p)
                        continue
                    hsc[w] = _wa_score_a(FX, fit + 4 * w, p, now)
                    K[PK_WA_SCORED] += 1
                    hdep[w] = -depth[p >> 1]
                    hkey[w] = s
                    hp[w] = p
                    hst[w] = 2
                    break
            if hst[w] == 2:
                if bi < 0:
                    bi = w
                elif hsc[w] != hsc[bi]:
                    if hsc[w] < hsc[bi]:
                        bi = w
                elif hdep[w] != hdep[bi]:
                    if hdep[w] < hdep[bi]:
                        bi = w
                elif hkey[w] != hkey[bi]:
                    if hkey[w] < hkey[bi]:
                        bi = w
                elif hp[w] < hp[bi]:
                    bi = w
        if bi < 0:
            ok = False
            break
        w = bi
        s = hkey[w]
        p = hp[w]
        sc = hsc[w]
        h = _wa_heap(t, w)
        _heap_pop_a(hs_, hp_, hn, hoff[h], h)                 # _wa_take
        PX[ok_ + p] = -1
        held_w.append(w)
        held_s.append(s)
        hst[w] = 0
        if not demote_ok:
            a = DROP
        elif theta_on and sc <= theta and _wa_may_leave_a(pin, flags, dcnt, cred, res, dany, cred_any, PX, og, t,
                                                          p, np.bool_(True), seq, bit):
            a = DROP
        else:
            a = DEMOTE
        if (p & 1) == 0:
            c = p >> 1
            if parent[c] >= 0:
                y = _chain_credit_a(res, parent, anchor, depth, flat, dcnt, dany, cred, cred_any, t, c, bit,
                                    (a == DROP or t == SSD) and res[p] == bit, credited, credited_any)
                if y >= 0:
                    f = 2 * y
                    if (flags[f] & F_WSK) != 0:       # skipped: reconsidered now that it may be a leaf
                        flags[f] &= ~np.uint8(F_WSK)
                        for i in range(len(sk_p) - 1, -1, -1):
                            if sk_p[i] == f:
                                _wa_push_a(hs_, hp_, hn, hcap, hoff, PX, oq, ok_, t, sk_w[i], f, sk_s[i])
                                hst[sk_w[i]] = 0
                                break
        flags[p] |= F_WCH
        out.append(p)
        acts.append(a)
        freed += _psize_a(M, sb, depth, p)
        if sc == 0.0:
            K[PK_WA_DEAD] += 1
    for x in credited:
        cred[x] = 0
    for x in credited_any:
        cred_any[x] = 0
    for i in range(len(sk_p) - 1, -1, -1):            # the latest skip of each payload still skipped
        x = sk_p[i]
        if (flags[x] & F_WSK) != 0:
            flags[x] &= ~np.uint8(F_WSK)
            _wa_push_a(hs_, hp_, hn, hcap, hoff, PX, oq, ok_, t, sk_w[i], x, sk_s[i])
    for i in range(start, len(out)):
        flags[out[i]] &= ~np.uint8(F_WCH)
    if not ok:
        for i in range(len(held_w)):
            _wa_push_a(hs_, hp_, hn, hcap, hoff, PX, oq, ok_, t, held_w[i], out[start + i], held_s[i])
        while len(out) > start:
            out.pop()
            acts.pop()
        K[PK_WA_FAILED] += 1
        M[M_SHORT] = need - freed
        return False
    for i in range(start, len(out)):
        if t == SSD:
            K[PK_WA_SSD_EV] += 1
        elif acts[i] == DEMOTE:
            K[PK_WA_DEMOTED] += 1
        else:
            K[PK_WA_DROPPED] += 1
    return True


# ---------------------------------------------------------------------------- the engine's hooks


@njit(cache=True, inline="always")
def before_request(S, j, i, m, arrival, R):
    M = S.M
    M[M_WA_CAT] = S.PX[M[M_O_WC] + j]
    S.FX[FXW_NOW] = arrival[i]
    # a category queue gains, within one request, an entry per payload that enters its tier,
    # moves to it or is re-filed in it: bounded by the payloads above the SSD (entering; back
    # from an undone demotion; re-filed), the tier's own (re-filed) and the request's
    above = (M[M_USED0] + M[M_USED1]) // M[M_LO]
    M[M_WA_ROOM1] = 3 * above + 8 * m + 64
    M[M_WA_ROOM2] = 3 * above + M[M_USED2] // M[M_LO] + 8 * m + 64
    for h in range(WA_H0, WA_H0 + 2 * M[M_WA_NCAT]):
        room = M[M_WA_ROOM1] if (h - WA_H0) % 2 == 0 else M[M_WA_ROOM2]
        if S.hn[h] + room > S.hcap[h] or 2 * S.hn[h] > S.hcap[h]:
            _heap_compact(S, h)
            if S.hn[h] + room > S.hcap[h] or 4 * S.hn[h] > S.hcap[h]:
                M[M_GROW] |= GROW_WAH


@njit(cache=True, inline="always")
def on_access(S, path, h, r, q):
    _wa_access(S, path, r, q)


@njit(cache=True)
def on_insert(S, path, r, states):
    for k in range(len(path) - r + len(states)):
        p = inserted_payload(path, r, states, k)
        if S.res[p] != 0:
            _wa_touch(S, p, S.M[M_WA_CAT], S.FX[FXW_NOW])


@njit(cache=True, inline="always")
def enter(S, t, p):
    _wa_enter(S, t, p)


@njit(cache=True, inline="always")
def enter_many(S, t, ps):
    if t == HBM:
        return
    # _wa_enter of each, on the arrays (decision 141)
    M, PX, stamp = S.M, S.PX, S.stamp
    oa = M[M_O_A]
    cat = M[M_WA_CAT]
    i0 = (t - 1) * len(S.res)
    oq, ok = M[M_O_WQ] + i0, M[M_O_WK] + i0
    hs, hp, hn, hcap, hoff = S.heap_s, S.heap_p, S.hn, S.hcap, S.hoff
    for p in ps:
        w = PX[oa + p]
        if w < 0:
            w = cat
            PX[oa + p] = w
        _wa_push_a(hs, hp, hn, hcap, hoff, PX, oq, ok, t, w, p, stamp[p])


@njit(cache=True, inline="always")
def leave(S, t, p):
    _wa_leave(S, t, p)


@njit(cache=True, inline="always")
def leave_many(S, ev):
    M, PX = S.M, S.PX
    nres = len(S.res)
    oq, ok = M[M_O_WQ], M[M_O_WK]
    for e in ev:                                  # _wa_leave, on the arrays
        i = ((e & 3) - 1) * nres + (e >> 2)
        PX[oq + i] = -1
        PX[ok + i] = -1


@njit(cache=True, inline="always")
def action(S, t):
    return DECIDE       # per-victim actions (its own walk, _wa_walk, decides them)


@njit(cache=True, inline="always")
def select(S, t, need, act, vict, acts):
    return _wa_walk(S, t, need, vict, acts)


@njit(cache=True, inline="always")
def compact_heap(S, t, o, n):
    if t >= WA_H0:
        _wa_heap_compact(S, t, o, n)
        return True
    return False
