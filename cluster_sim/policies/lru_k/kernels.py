"""lru_k's compiled hooks (cluster_sim.engine.hooks) and kernels: the last K references of each
payload in PX (HIST(p, 1..K) and its record's fields, from M_O_LK), a ghost history of gone payloads,
and keyed candidate heaps in the tier's heap arrays: an entry (key, payload) with the key
(HIST(p, K) + 1) << 32 | (HIST(p, 1) + 1), so entries order as the reference's tuples. The DRAM victims
go down a gated walk that admits payloads with K references and looks at those referenced by the
current request (the correlated-reference period) last."""
import numpy as np
from numba import njit

from ...engine._jit import (
    DRAM,
    GATE,
    HBM,
    K_HEAP_COMPACTIONS,
    M_SEQ,
    _bit,
    _heap_pop,
    _heap_push,
    inserted_payload,
)
from .layout import (
    FX_CRP,
    FX_LT0,
    FX_NOW,
    LK_CAN1,
    LK_CAN2,
    LK_GNEXT,
    LK_GPREV,
    LK_LS,
    LK_LSTAMP,
    M_CAPP,
    M_CAP_PEND,
    M_GHEAD,
    M_GHOST_F,
    M_GN,
    M_GTAIL,
    M_LK_K,
    M_LK_Q,
    M_LK_SECONDS,
    M_NRES,
    M_O_LK,
    M_O_PEND,
    M_PENDN,
    PK_FORGOTTEN,
    PK_GHOST_HITS,
    PK_REFS,
    PK_UNCORRELATED,
    ST_GHOST,
    ST_MINE,
    ST_NONE,
)


@njit(cache=True, inline="always")
def _lk(S, p):
    """Where payload ``p``'s lru_k record starts in PX (its HIST(p, 1..K) first)."""
    return S.M[M_O_LK] + p * S.M[M_LK_Q]


@njit(cache=True, inline="always")
def _lkf(S, p):
    """Where the fields after the history start in ``p``'s record (LK_LS, LK_GPREV, ...)."""
    return S.M[M_O_LK] + p * S.M[M_LK_Q] + S.M[M_LK_K]


@njit(cache=True, inline="always")
def _lk_st(PX, f):
    """The residency status in the record whose fields start at ``f`` (ST_*)."""
    return PX[f + LK_LS] & 3


@njit(cache=True, inline="always")
def _lk_set_st(PX, f, st):
    PX[f + LK_LS] = (PX[f + LK_LS] & ~np.int64(3)) | st


@njit(cache=True, inline="always")
def _lk_key(S, p):
    b = _lk(S, p)
    return ((S.PX[b + S.M[M_LK_K] - 1] + 1) << 32) | (S.PX[b] + 1)


@njit(cache=True)
def _kpop(S, t):
    """``KeyedTierHeap.pop``: the least valid entry (key, payload) of tier ``t``, or (-1, -1)."""
    bit = _bit(t)
    can = LK_CAN1 if t == DRAM else LK_CAN2
    while S.hn[t] > 0:
        s, p = _heap_pop(S, t)
        f = _lkf(S, p)
        if S.PX[f + can] != s or (S.res[p] & bit) == 0:
            continue
        k = _lk_key(S, p)
        if k != s:
            S.PX[f + can] = k
            _heap_push(S, t, k, p)
            continue
        return s, p
    return np.int64(-1), np.int64(-1)


@njit(cache=True)
def _kheap_compact(S, t, o, n):
    """``KeyedTierHeap._rebuild``: keep the canonical entries of resident payloads (duplicates too:
    the reference keeps them), sorted by (key, payload)."""
    hs = S.heap_s[o:o + n]
    hp = S.heap_p[o:o + n]
    bit = _bit(t)
    can = LK_CAN1 if t == DRAM else LK_CAN2
    ks = np.empty(n, dtype=np.int64)
    kp = np.empty(n, dtype=np.int64)
    k = 0
    for i in range(n):
        s = hs[i]
        p = hp[i]
        if (S.res[p] & bit) != 0 and S.PX[_lkf(S, p) + can] == s:
            ks[k] = s
            kp[k] = p
            k += 1
    o1 = np.argsort(kp[:k], kind="mergesort")
    o2 = np.argsort(ks[:k][o1], kind="mergesort")     # stable: by (key, payload)
    for i in range(k):
        j = o1[o2[i]]
        hs[i] = ks[j]
        hp[i] = kp[j]
    S.hn[t] = k
    S.K[K_HEAP_COMPACTIONS] += 1


@njit(cache=True)
def _ghost_unlink(S, p, f):
    PX = S.PX
    a = PX[f + LK_GPREV]
    b = PX[f + LK_GNEXT]
    if a >= 0:
        PX[_lkf(S, a) + LK_GNEXT] = b
    else:
        S.M[M_GHEAD] = b
    if b >= 0:
        PX[_lkf(S, b) + LK_GPREV] = a
    else:
        S.M[M_GTAIL] = a
    PX[f + LK_GPREV] = -1
    PX[f + LK_GNEXT] = -1
    S.M[M_GN] -= 1


@njit(cache=True)
def _ghost_append(S, p, f):
    """``ghosts[p] = None``: ``p`` goes last unless it is a ghost already (then it keeps its place)."""
    PX = S.PX
    if _lk_st(PX, f) == ST_GHOST:
        return
    _lk_set_st(PX, f, ST_GHOST)
    tail = S.M[M_GTAIL]
    PX[f + LK_GPREV] = tail
    PX[f + LK_GNEXT] = -1
    if tail >= 0:
        PX[_lkf(S, tail) + LK_GNEXT] = p
    else:
        S.M[M_GHEAD] = p
    S.M[M_GTAIL] = p
    S.M[M_GN] += 1


@njit(cache=True)
def _ghost_trim(S):
    """``LRUKPolicy._trim_ghosts``: forget the oldest ghosts while they number more than
    ``ghost * max(resident payloads, the tiers' capacity in FA chunks)``."""
    M = S.M
    g = M[M_GHOST_F:M_GHOST_F + 1].view(np.float64)[0]
    x = M[M_NRES] if M[M_NRES] > M[M_CAPP] else M[M_CAPP]
    cap = g * x
    K = M[M_LK_K]
    while M[M_GN] > cap:
        p = M[M_GHEAD]
        f = _lkf(S, p)
        _ghost_unlink(S, p, f)
        b = f - K
        for i in range(K):
            S.PX[b + i] = -1
        S.PX[f + LK_LS] = ST_NONE        # LAST's request 0, status none
        if M[M_LK_SECONDS] != 0:
            S.PX[f + LK_LSTAMP] = -1
            S.FX[FX_LT0 + p] = -np.inf
        S.K[PK_FORGOTTEN] += 1


@njit(cache=True)
def _lk_enter(S, t, p):
    """``LRUKPolicy.on_enter``."""
    f = _lkf(S, p)
    st = _lk_st(S.PX, f)
    if st != ST_MINE:
        if st == ST_GHOST:
            _ghost_unlink(S, p, f)
        _lk_set_st(S.PX, f, ST_MINE)
        S.M[M_NRES] += 1
    if t != HBM:
        k = _lk_key(S, p)
        S.PX[f + (LK_CAN1 if t == DRAM else LK_CAN2)] = k
        _heap_push(S, t, k, p)


@njit(cache=True)
def _lk_gone(S, p):
    """``LRUKPolicy.on_leave`` for a payload that is no longer resident anywhere: it becomes a ghost."""
    f = _lkf(S, p)
    if _lk_st(S.PX, f) == ST_MINE:
        S.M[M_NRES] -= 1
        _lk_set_st(S.PX, f, ST_NONE)
        _ghost_append(S, p, f)
        _ghost_trim(S)


@njit(cache=True)
def _lk_reference(S, p, seq):
    """``LRUKPolicy._reference`` of one payload. With crp = request a reference in a new request is
    uncorrelated: it shifts the history and sets HIST(p, 1) to the payload's stamp. With crp in
    seconds one more than crp seconds after LAST is, and the older stamps shift by the correlated
    span (LAST's stamp - HIST(p, 1)). Every reference sets LAST."""
    b = _lk(S, p)
    K = S.M[M_LK_K]
    f = b + K
    if S.M[M_LK_SECONDS] == 0:
        if (S.PX[f + LK_LS] >> 2) != seq:
            for i in range(K - 1, 0, -1):
                S.PX[b + i] = S.PX[b + i - 1]
            S.PX[b] = S.stamp[p]
            S.K[PK_UNCORRELATED] += 1
    else:
        now = S.FX[FX_NOW]
        if (now - S.FX[FX_LT0 + p]) > S.FX[FX_CRP]:
            h1 = S.PX[b]
            shift = S.PX[f + LK_LSTAMP] - h1 if h1 >= 0 else 0
            for i in range(K - 1, 0, -1):
                x = S.PX[b + i - 1]
                S.PX[b + i] = x + shift if x >= 0 else -1
            S.PX[b] = S.stamp[p]
            S.K[PK_UNCORRELATED] += 1
        S.PX[f + LK_LSTAMP] = S.stamp[p]
        S.FX[FX_LT0 + p] = now
    S.K[PK_REFS] += 1
    S.PX[f + LK_LS] = (seq << 2) | (S.PX[f + LK_LS] & 3)


@njit(cache=True)
def _lk_tick(S):
    """``LRUKPolicy.tick``: payloads referenced while absent that stayed absent become ghosts."""
    M = S.M
    n = M[M_PENDN]
    if n == 0:
        return
    o = M[M_O_PEND]
    for i in range(n):
        p = S.PX[o + i]
        f = _lkf(S, p)
        if _lk_st(S.PX, f) != ST_MINE:
            _ghost_append(S, p, f)
    M[M_PENDN] = 0
    _ghost_trim(S)


@njit(cache=True)
def _lk_access(S, path, q):
    """``LRUKPolicy.on_access``: absent payloads leave the ghost list (counted as ghost hits when
    their history survived) and wait for the next tick; then every payload is referenced."""
    M = S.M
    seq = M[M_SEQ]
    n = len(path) + (1 if q >= 0 else 0)
    for k in range(n):
        p = 2 * path[k] if k < len(path) else q
        if S.res[p] == 0:
            b = _lk(S, p)
            if S.PX[b] >= 0:
                S.K[PK_GHOST_HITS] += 1
            f = b + M[M_LK_K]
            if _lk_st(S.PX, f) == ST_GHOST:
                _ghost_unlink(S, p, f)
                _lk_set_st(S.PX, f, ST_NONE)
            i = M[M_PENDN]
            if i == M[M_CAP_PEND]:
                raise RuntimeError("cluster_sim engine: lru_k pending list full")
            S.PX[M[M_O_PEND] + i] = p
            M[M_PENDN] = i + 1
    for k in range(n):
        p = 2 * path[k] if k < len(path) else q
        _lk_reference(S, p, seq)


@njit(cache=True)
def _lk_leave_many(S, was_in):
    """The residency events of a batch removal (``CacheState.remove_copies``) in the reference's
    order: the removed copies by payload handle, then the STATEs of the chunks that lost their
    last FA copy, by chunk; a payload left with no copy becomes a ghost."""
    was_in.sort()
    for p in was_in:
        if S.res[p] == 0:
            _lk_gone(S, p)
    for p in was_in:
        if (p & 1) == 0 and S.res[p] == 0:
            _lk_gone(S, p | 1)


# ---------------------------------------------------------------------------- the engine's hooks


@njit(cache=True, inline="always")
def tick(S, now):
    if S.M[M_LK_SECONDS] != 0:
        S.FX[FX_NOW] = now
    _lk_tick(S)


@njit(cache=True, inline="always")
def on_access(S, path, h, r, q):
    _lk_access(S, path, q)


@njit(cache=True)
def on_insert(S, path, r, states):
    seq = S.M[M_SEQ]
    for k in range(len(path) - r + len(states)):
        p = inserted_payload(path, r, states, k)
        if S.res[p] != 0:
            _lk_reference(S, p, seq)


@njit(cache=True, inline="always")
def enter(S, t, p):
    _lk_enter(S, t, p)


@njit(cache=True, inline="always")
def lost(S, p):
    _lk_gone(S, p)                  # CacheState.remove_copy's events: p, then its STATE
    if (p & 1) == 0:
        _lk_gone(S, p | 1)


@njit(cache=True, inline="always")
def remove_many_begin(S, t, ps):
    """The payloads of ``ps`` in tier ``t`` before a batch removal (their keys leave with them)."""
    was_in = np.empty(len(ps), dtype=np.int64)
    nw = 0
    bit = _bit(t)
    for p in ps:
        if (S.res[p] & bit) != 0:
            was_in[nw] = p
            nw += 1
    return was_in[:nw]


@njit(cache=True, inline="always")
def remove_many_end(S, t, was_in):
    _lk_leave_many(S, was_in)


@njit(cache=True, inline="always")
def action(S, t):
    return GATE


@njit(cache=True, inline="always")
def admit(S, t, p):
    """K references, ghost history included."""
    return S.PX[_lk(S, p) + S.M[M_LK_K] - 1] >= 0


@njit(cache=True, inline="always")
def defer(S, t, p):
    """A payload referenced within the correlated-reference period (by the request being
    processed, or with crp in seconds within crp seconds of now) is considered only once every
    other candidate has been."""
    if S.M[M_LK_SECONDS] != 0:
        return S.FX[FX_NOW] - S.FX[FX_LT0 + p] <= S.FX[FX_CRP]
    return (S.PX[_lkf(S, p) + LK_LS] >> 2) == S.M[M_SEQ]


@njit(cache=True, inline="always")
def pop(S, t):
    return _kpop(S, t)


@njit(cache=True, inline="always")
def compact_heap(S, t, o, n):
    if t != HBM:
        _kheap_compact(S, t, o, n)
        return True
    return False
