"""Compiled victim selection for ``gandalf`` (numba): the same algorithm as the interpreted
methods of :class:`~cluster_sim.policies.gandalf.GandalfPolicy`, step for step.

``policy.engine=python`` runs the interpreted reference; ``numba`` (the default when numba
is installed) runs these kernels. Both make the same decisions in the same order, with the
same floating-point expressions, so results and decision counters are identical
(``tests/test_gandalf_engine.py`` compares whole runs). docs/decisions.md item 30.

Layout (no per-payload objects):

* a *heap* is ``(store, kver, mem, meta)``: ``store[0]`` the entries, one row
  ``(key, item, version)`` each (tie = item, as every Gandalf push uses), kept in a typed
  list so a push can grow it; ``kver`` the live version per payload (0 = absent; no key per
  payload: an undo re-pushes a popped entry with the key its pop journaled, and discards a
  push); ``mem`` the membership the interpreter reads between selections; ``meta`` =
  [length, last version, stale pops, rebuilds, live count]. Pops follow the total order
  of ``(key, item, version)``, as :class:`~cluster_sim.cache.lazyheap.LazyHeap`'s do, and a
  rebuild happens at the same moments (length > 2 x live + 64), so the counters agree too.
* a *tentative* (:class:`~cluster_sim.policies.base.Tentative` plus the chosen set) is
  arrays stamped with a generation: a value counts only when its stamp equals the current
  generation, so a new tentative costs nothing to clear (the stamps are cleared once every
  ``STAMP_MAX`` generations, so that they fit uint16: ``t_next``).
* the interpreter's heap changes between selections (``on_enter`` and friends) are queued
  and replayed, in order, at the start of the next kernel call.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .._nrt import borrow
from ..cache import state as _state
from ..cache.state import DEMOTE, DROP, IN_DRAM, IN_SSD

# the handle helpers of cache.state, compiled (numba cannot call the interpreted ones)
fa_of = njit(inline="always")(_state.fa_of)
state_of = njit(inline="always")(_state.state_of)
chunk_of = njit(inline="always")(_state.chunk_of)
is_state = njit(inline="always")(_state.is_state)

_INF = math.inf
_EPS = 1e-9
_MAX_RESCORE = 8
_BUCKETS = 6
_SLACK = 64

# params (float64 array P)
A_ALPHA, A_TAU, A_H, A_R0, A_T0, A_R0T0, A_G, A_HOST, A_SSDREAD, A_SSDLAT, A_CW, A_WAF, A_FEEPB, \
    A_CWNOW, A_NCKPT, A_NDEM, A_NDEM2 = range(17)
N_PARAMS = 17
# flags (int64 array F)
F_POP, F_HASSSD, F_STATIC, F_SHADOW, F_PEEK, F_ROOTSIDE, F_CUR, F_EST = range(8)
N_FLAGS = 8
# counters (int64 array K), in the order of gandalf.COUNTERS
K_DROPS_FA, K_DROPS_STATE, K_MOVES_FA, K_MOVES_STATE, K_MOVES_FREE, K_REJECTED, K_SSD_EVICTIONS, \
    K_REPUSHES = range(8)
# heap meta
M_LEN, M_NEXT, M_STALE, M_REBUILDS, M_LIVE = range(5)
N_META = 5


# ---------------------------------------------------------------------------- borrowed views
_b = borrow       # borrowed views (cluster_sim._nrt, decision 90): the caller keeps the arrays alive


# ---------------------------------------------------------------------------- heap
@njit(cache=True)
def _before(k, it, v, E, j):
    """(key, item, version) ``(k, it, v)`` orders before row ``j``."""
    ek = E[j, 0]
    if k != ek:
        return k < ek
    if it != E[j, 1]:
        return it < E[j, 1]
    return v < E[j, 2]


@njit(cache=True)
def _put(E, i, k, it, v):
    E[i, 0] = k
    E[i, 1] = it
    E[i, 2] = v


@njit(cache=True)
def _sift_root(E, pos):
    """Move the entry at ``pos`` toward the root (heapq._siftdown)."""
    k, it, v = E[pos, 0], E[pos, 1], E[pos, 2]
    while pos > 0:
        par = (pos - 1) >> 1
        if not _before(k, it, v, E, par):
            break
        _put(E, pos, E[par, 0], E[par, 1], E[par, 2])
        pos = par
    _put(E, pos, k, it, v)


@njit(cache=True)
def _sift_leaf(E, n, pos):
    """Move the entry at ``pos`` toward the leaves (entries are distinct: versions are unique)."""
    k, it, v = E[pos, 0], E[pos, 1], E[pos, 2]
    while True:
        ch = 2 * pos + 1
        if ch >= n:
            break
        if ch + 1 < n and _before(E[ch + 1, 0], E[ch + 1, 1], E[ch + 1, 2], E, ch):
            ch += 1
        if _before(k, it, v, E, ch):
            break
        _put(E, pos, E[ch, 0], E[ch, 1], E[ch, 2])
        pos = ch
    _put(E, pos, k, it, v)


@njit(cache=True)
def _remove_top(E, meta):
    n = meta[M_LEN] - 1
    meta[M_LEN] = n
    if n > 0:
        _put(E, 0, E[n, 0], E[n, 1], E[n, 2])
        _sift_leaf(E, n, 0)


@njit(cache=True)
def _rebuild(E, kver, meta):
    n = meta[M_LEN]
    m = 0
    for i in range(n):
        if kver[int(E[i, 1])] == int(E[i, 2]):
            _put(E, m, E[i, 0], E[i, 1], E[i, 2])
            m += 1
    meta[M_LEN] = m
    for i in range(m // 2 - 1, -1, -1):
        _sift_leaf(E, m, i)
    meta[M_REBUILDS] += 1


@njit(cache=True)
def h_push(store, kver, mem, meta, item, key, jr, jon):
    """A push of ``item`` with ``key``; with ``jon``, journaled for h_undo, which discards it. Only
    non-members are pushed so (a payload just popped, a parent not in the heap): a member's push
    would need its old key to undo, and the heaps keep no key per payload (decision 152)."""
    if jon:
        if kver[item] != 0:
            raise RuntimeError("cluster_sim gandalf: a journaled push of a heap member")
        jr.append((float(item), 0.0, 0.0))
    _push_at(_with_room(store, meta), kver, mem, meta, item, key)


@njit(cache=True, inline="always")
def _with_room(store, meta):
    """The entry table ``store[0]``, grown first if it is full."""
    E = store[0]
    n = meta[M_LEN]
    if n == E.shape[0]:
        E2 = np.empty((2 * n + 16, 3), dtype=np.float64)
        E2[:n] = E[:n]
        store[0] = E2
        E = E2
    return E


@njit(cache=True, inline="always")
def _push_at(E, kver, mem, meta, item, key):
    """The push itself (a new version of ``item`` with ``key``) into table ``E``, which has room."""
    meta[M_NEXT] += 1
    v = meta[M_NEXT]
    if kver[item] == 0:
        meta[M_LIVE] += 1
    kver[item] = v
    mem[item] = 1
    n = meta[M_LEN]
    _put(E, n, key, float(item), float(v))
    meta[M_LEN] = n + 1
    _sift_root(E, n)
    if meta[M_LEN] > 2 * meta[M_LIVE] + _SLACK:
        _rebuild(E, kver, meta)


@njit(cache=True, inline="always")
def h_forget(kver, mem, meta, item):
    """``item`` leaves the heap (its entry, if any, goes stale)."""
    if kver[item] != 0:
        kver[item] = 0
        meta[M_LIVE] -= 1
    mem[item] = 0


@njit(cache=True)
def _clean_top(E, kver, meta):
    while meta[M_LEN] > 0 and kver[int(E[0, 1])] != int(E[0, 2]):
        _remove_top(E, meta)
        meta[M_STALE] += 1


@njit(cache=True)
def h_peek(store, kver, meta):
    """(found, key) of the minimum."""
    E = store[0]
    _clean_top(E, kver, meta)
    if meta[M_LEN] == 0:
        return False, 0.0
    return True, E[0, 0]


@njit(cache=True)
def h_pop(store, kver, mem, meta, jr, jon):
    """(found, key, item) of the minimum, removed."""
    E = store[0]
    _clean_top(E, kver, meta)
    if meta[M_LEN] == 0:
        return False, 0.0, -1
    k = E[0, 0]
    i = int(E[0, 1])
    _remove_top(E, meta)
    kver[i] = 0
    meta[M_LIVE] -= 1
    mem[i] = 0
    if jon:
        jr.append((float(i), 1.0, k))
    return True, k, i


@njit(cache=True)
def h_undo(store, kver, mem, meta, jr):
    for x in range(len(jr) - 1, -1, -1):
        it, had, old = jr[x]
        item = int(it)
        if had == 0.0:
            h_forget(kver, mem, meta, item)
        else:
            h_push(store, kver, mem, meta, item, old, jr, False)


@njit(cache=True)
def h_flush(store, kver, mem, meta, ops, items, keys):
    """Replay queued interpreter-side changes: op 1 = push, 0 = discard."""
    jr = _new_journal()
    for x in range(len(ops)):
        if ops[x] == 1:
            h_push(store, kver, mem, meta, items[x], keys[x], jr, False)
        else:
            h_forget(kver, mem, meta, items[x])


@njit(cache=True)
def _new_journal():
    jr = [(0.0, 0.0, 0.0)]
    jr.pop()
    return jr


# ---------------------------------------------------------------------------- tentative
# T = (cred, cred_g, creda, creda_g, chosen_g) ; gen: the current generation
#: a tentative's stamps (cred_g, creda_g, chosen_g) may be as narrow as uint16: past this generation
#: they are cleared and the count starts again at 1 (a stamp counts only within its own selection)
STAMP_MAX = 65535


@njit(cache=True)
def t_next(T, G, i):
    """The generation of a new tentative ``T`` (counter ``G[i]``): no stamp of an earlier one counts."""
    g = G[i] + 1
    if g > STAMP_MAX:
        T[1][:] = 0
        T[3][:] = 0
        T[4][:] = 0
        g = 1
    G[i] = g
    return g


@njit(cache=True, inline="always")
def _cred(T, gen, c):
    return T[0][c] if T[1][c] == gen else 0


@njit(cache=True, inline="always")
def _creda(T, gen, c):
    return T[2][c] if T[3][c] == gen else 0


@njit(cache=True, inline="always")
def t_may_drop_last(T, gen, dany, c):
    d = dany[c]
    return d == 0 or d == _creda(T, gen, c)


@njit(cache=True, inline="always")
def t_is_leaf(T, gen, dcnt, c):
    d = dcnt[c]
    return d == 0 or d == _cred(T, gen, c)


@njit(cache=True, inline="always")
def t_chosen(T, gen, p):
    return T[4][p] == gen


@njit(cache=True)
def t_take(T, gen, res, parent, dcnt, dany, bit, p, drop_last):
    """Tentative.take: returns (credited ancestor in the tier or -1, parent or -1)."""
    T[4][p] = gen
    if is_state(p):
        return -1, -1
    c = chunk_of(p)
    par = parent[c]
    if par < 0:
        return -1, -1
    if drop_last:
        T[2][par] = _creda(T, gen, par) + 1 + dany[c]
        T[3][par] = gen
    k = 1 + dcnt[c]
    x = par
    while x >= 0:
        v = _cred(T, gen, x) + k
        T[0][x] = v
        T[1][x] = gen
        if res[fa_of(x)] & bit:
            return x, par
        if v != dcnt[x]:
            return -1, par
        k = v
        x = parent[x]
    return -1, par


# ---------------------------------------------------------------------------- estimates
# C = (res, pin, sbx, parent, depth, anchor, flat, dcnt_dram, dcnt_ssd, dany); sbx: a STATE's bytes by
#     its chunk's depth, then an FA payload's bytes (psize: no array of sizes per payload)
# S = (t_first, t_last, hits, state_demands, pop_p, crc, crc_cum, E)
# F_EST (reuse=hints / learned): E[p] is the payload's estimate, kept current by the interpreter
@njit(cache=True, inline="always")
def psize(C, p):
    """Payload ``p``'s bytes."""
    sbx = C[2]
    if p & 1:
        return sbx[C[4][p >> 1]]
    return sbx[len(sbx) - 1]


@njit(cache=True, inline="always")
def _fsz(C, p):
    return float(psize(C, p))


@njit(cache=True, inline="always")
def _fa_e0(S, P, F, p, tl):
    if F[F_EST]:
        return S[7][p]
    if F[F_POP]:
        if tl != tl:
            return S[4][0]
        h = S[2][p]
        return S[4][h if h < _BUCKETS else _BUCKETS]
    if tl != tl:
        return P[A_R0] * P[A_H]
    return (S[2][p] + P[A_R0T0]) / (tl - S[0][p] + P[A_T0]) * P[A_H]


@njit(cache=True, inline="always")
def _rate(S, P, p):
    tl = S[1][p]
    if tl != tl:
        return P[A_R0]
    return (S[2][p] + P[A_R0T0]) / (tl - S[0][p] + P[A_T0])


@njit(cache=True, inline="always")
def e_hits(S, P, F, p, now):
    if F[F_EST]:
        return S[7][p]
    tl = S[1][p]
    if tl != tl:
        tl = now
    decay = math.exp(-(now - tl) / P[A_TAU])
    if not is_state(p):
        return _fa_e0(S, P, F, p, S[1][p]) * decay
    c = chunk_of(p)
    k = S[3][c]
    if k == 0:
        prior = (P[A_NDEM] + 1.0) / (P[A_NCKPT] + 2.0)
        return prior * decay
    again = (P[A_NDEM2] + 1.0) / (P[A_NDEM] + 2.0)
    est = again * decay
    if k >= 2:
        alt = _rate(S, P, p) * P[A_H] * decay
        if alt > est:
            est = alt
    return est


@njit(cache=True, inline="always")
def c_rc(C, S, p):
    c = chunk_of(p)
    d = C[4][c]
    crc = S[5]
    if not is_state(p):
        return crc[d]
    res = C[0]
    a = C[5][c]
    flat = C[6]
    dm = 0
    for i in range(d - 2, -1, -1):
        if res[state_of(flat[a + i])]:
            dm = i + 1
            break
    return S[6][d] - S[6][dm]


@njit(cache=True, inline="always")
def _ld_ssd(P, sz):
    return P[A_SSDLAT] + sz / P[A_SSDREAD] + sz / P[A_HOST]


@njit(cache=True, inline="always")
def fee(C, S, P, p):
    """α·W(p): zero with a valid SSD copy; α = ∞ means 'never pay'."""
    if C[0][p] & IN_SSD:
        return 0.0
    if P[A_ALPHA] == _INF:
        return _INF
    return P[A_ALPHA] * P[A_CWNOW] * P[A_WAF] * _fsz(C, p)


@njit(cache=True, inline="always")
def _log_or_floor(v):
    return math.log(v) if v > 0 else -1e300


@njit(cache=True, inline="always")
def drop_key(C, S, P, F, p, now):
    sz = _fsz(C, p)
    tl = S[1][p]
    tau = P[A_TAU]
    if not is_state(p):
        v = _fa_e0(S, P, F, p, tl) * P[A_G] * S[5][C[4][chunk_of(p)]] / sz
        if tl != tl:
            tl = now
        return _log_or_floor(v) + tl / tau
    if tl != tl:
        tl = now
    v = e_hits(S, P, F, p, tl) * P[A_G] * c_rc(C, S, p) / sz
    return _log_or_floor(v) + tl / tau


@njit(cache=True, inline="always")
def ssd_key(C, S, P, F, p, now):
    sz = _fsz(C, p)
    tl = S[1][p]
    if tl != tl:
        tl = now
    loss = e_hits(S, P, F, p, tl) * P[A_G] * (c_rc(C, S, p) - _ld_ssd(P, sz))
    if loss < 0.0:
        loss = 0.0
    return (math.log(loss / sz) if loss > 0 else -1e300) + tl / P[A_TAU]


@njit(cache=True, inline="always")
def move_key(C, S, P, F, p, now):
    sz = _fsz(C, p)
    if C[0][p] & IN_SSD:
        f = 0.0
    elif P[A_ALPHA] == _INF:
        return _INF
    elif F[F_STATIC]:
        f = P[A_FEEPB] * sz
    else:
        f = fee(C, S, P, p)
    if is_state(p):
        e = e_hits(S, P, F, p, now)
    else:
        tl = S[1][p]
        e = _fa_e0(S, P, F, p, tl)
        if tl == tl:
            e *= math.exp((tl - now) / P[A_TAU])
    return (f + e * P[A_G] * (P[A_SSDLAT] + sz / P[A_SSDREAD])) / sz


@njit(cache=True, inline="always")
def cand_key(C, S, P, F, p, now):
    jd = drop_key(C, S, P, F, p, now)
    if not F[F_HASSSD]:
        return jd
    jm = move_key(C, S, P, F, p, now)
    if jm != _INF:
        jm = _log_or_floor(jm) + now / P[A_TAU]
    return jd if jd < jm else jm


# ---------------------------------------------------------------------------- victim pool
# The cheapest SSD victims (per byte) for one DRAM selection: items (value, bytes, payload),
# popped (key, payload) to restore, pst = [used, done] (GandalfPolicy's _VictimPool).
@njit(cache=True)
def _pool_more(C, S, P, F, HS, TS, gs, now, items, popped, pst, jr):
    if pst[1] or len(items) >= F[F_PEEK] + pst[0]:
        return False
    res = C[0]
    pin = C[1]
    parent = C[3]
    dcs = C[8]
    dany = C[9]
    cur = F[F_CUR]
    store, kver, mem, meta = HS
    while True:
        ok, key, p = h_pop(store, kver, mem, meta, jr, True)
        if not ok:
            pst[1] = 1
            return False
        if not res[p] & IN_SSD:
            continue
        if not is_state(p) and res[p] == IN_SSD and not t_may_drop_last(TS, gs, dany, chunk_of(p)):
            continue
        if pin[p] == cur:
            popped.append((key, p))
            continue
        fresh = ssd_key(C, S, P, F, p, now)
        if fresh > key + _EPS * max(1.0, abs(key)):
            found, nk = h_peek(store, kver, meta)
            if found and fresh > nk:
                h_push(store, kver, mem, meta, p, fresh, jr, True)
                continue
        popped.append((fresh, p))
        _, par = t_take(TS, gs, res, parent, dcs, dany, IN_SSD, p, res[p] == IN_SSD and not is_state(p))
        if par >= 0:
            q = fa_of(par)
            if res[q] == IN_SSD and kver[q] == 0 and pin[q] != cur and t_may_drop_last(TS, gs, dany, par):
                h_push(store, kver, mem, meta, q, ssd_key(C, S, P, F, q, now), jr, True)
        sz = psize(C, p)
        v = math.exp(fresh - now / P[A_TAU]) * sz if fresh > -1e299 else 0.0
        items.append((v, sz, p))
        return True


@njit(cache=True)
def _pool_consume(items, pst, vbytes):
    got = 0
    while got < vbytes and pst[0] < len(items):
        got += items[pst[0]][1]
        pst[0] += 1


@njit(cache=True, inline="always")
def _move_load(C, S, P, F, p, now):
    """The load part of J_move (its whole cost with a valid SSD copy), as GandalfPolicy._move_cost
    computes it."""
    sz = _fsz(C, p)
    e = e_hits(S, P, F, p, now)
    return e * P[A_G] * (_ld_ssd(P, sz) - sz / P[A_HOST])


# ---------------------------------------------------------------------------- DRAM selection
@njit(cache=True, inline="always")
def _drop_ok(C, TD, gd, p):
    """1 (yes), 2 (blocked only by this selection's choices) or 0."""
    if is_state(p):
        return 1
    c = chunk_of(p)
    d = C[7][c]
    cr = _cred(TD, gd, c)
    if d and d != cr:
        return 2 if cr else 0
    if C[0][p] == IN_DRAM:
        da = C[9][c]
        ca = _creda(TD, gd, c)
        if da and da != ca:
            return 2 if ca else 0
    return 1


@njit(cache=True, inline="always")
def _move_ok(C, F, TD, gd, p):
    if is_state(p):
        return 1
    c = chunk_of(p)
    d = C[7][c]
    cr = _cred(TD, gd, c)
    if d and d != cr:
        return 2 if cr else 0
    if F[F_ROOTSIDE]:
        par = C[3][c]
        if par >= 0 and not C[0][fa_of(par)] & IN_SSD:
            return 2
    return 1


@njit(cache=True)
def _new_pairs():
    x = [(0.0, 0)]
    x.pop()
    return x


@njit(cache=True)
def _new_items():
    x = [(0.0, 0, 0)]
    x.pop()
    return x


@njit(cache=True)
def _new_ints():
    x = [0]
    x.pop()
    return x


@njit(cache=True)
def select_dram(C, S, P, F, K, HC, HS, TD, TS, G, need, now, ssd_free):
    """GandalfPolicy._select_dram. Returns (payloads, actions, SSD plan, shortfall); the
    shortfall is > 0 (and nothing chosen, every heap change undone) if ``need`` cannot be freed."""
    res = C[0]
    pin = C[1]
    parent = C[3]
    dcd = C[7]
    dany = C[9]
    gd = t_next(TD, G, 0)
    gs = t_next(TS, G, 1)
    store, kver, mem, meta = HC
    jrc = _new_journal()
    jrs = _new_journal()
    outp = _new_ints()
    outa = _new_ints()
    aside = _new_pairs()
    items = _new_items()
    popped = _new_pairs()
    pst = np.zeros(2, dtype=np.int64)
    tau = P[A_TAU]
    tnow = now / tau
    has_ssd = F[F_HASSSD]
    shadow = F[F_SHADOW]
    cur = F[F_CUR]
    k0 = K.copy()
    freed = 0
    tries = 0
    while freed < need:
        ok, key, p = h_pop(store, kver, mem, meta, jrc, True)
        if not ok:
            break
        if not res[p] & IN_DRAM:
            continue
        if pin[p] == cur or t_chosen(TD, gd, p):
            aside.append((key, p))
            continue
        dok = _drop_ok(C, TD, gd, p)
        mok = _move_ok(C, F, TD, gd, p) if has_ssd else 0
        if dok != 1 and mok != 1:
            if dok == 2 or mok == 2:
                aside.append((key, p))
            continue
        sz = _fsz(C, p)
        jd = math.exp(drop_key(C, S, P, F, p, now) - tnow) if dok == 1 else _INF
        jm_none = True
        jm = 0.0
        pf = 0.0
        pl = 0.0
        pv = 0
        if mok == 1:
            if res[p] & IN_SSD:
                # a free move (most of them): GandalfPolicy._move_cost's first return
                jm = _move_load(C, S, P, F, p, now) / sz
            else:
                # GandalfPolicy._move_cost and the victim pool's cost, written out here (the same
                # expressions in the same order): a call would pass ~30 arrays and lists, each
                # counted in and out; only the pool's growth (_pool_more, once per SSD victim it
                # weighs) stays a call
                load = _move_load(C, S, P, F, p, now)
                pf = fee(C, S, P, p)
                if pf == _INF:
                    jm = _INF
                else:
                    short = int(sz) - ssd_free
                    if short <= 0:
                        jm = (pf + load) / sz
                    else:
                        total_b = 0
                        total_v = 0.0
                        i = pst[0]
                        pl = _INF
                        pv = -1
                        while total_b < short:
                            if i >= len(items) and not _pool_more(C, S, P, F, HS, TS, gs, now, items, popped,
                                                                  pst, jrs):
                                if shadow and total_b > 0:
                                    v, b, _ = items[i - 1]
                                    pl = total_v + (short - total_b) * v / b
                                    pv = short
                                else:
                                    pl = _INF
                                    pv = 0
                                break
                            v, b, _ = items[i]
                            if shadow:
                                pl = (v / b) * short
                                pv = short
                                break
                            total_b += b
                            total_v += v
                            i += 1
                        if pv < 0:
                            pl = total_v
                            pv = total_b
                        if pl == _INF:
                            jm = _INF
                            pv = 0
                        else:
                            jm = (pf + pl + load) / sz
            jm_none = False
        free_move = (not jm_none) and jm != _INF and pf == 0.0 and pl == 0.0
        best = jd if (jm_none or jd <= jm) else jm
        if not free_move and tries < _MAX_RESCORE:
            fresh = _log_or_floor(best) + tnow if best != _INF else _INF
            if fresh > key + _EPS * max(1.0, abs(key)):
                found, nk = h_peek(store, kver, meta)
                if found and fresh > nk:
                    tries += 1
                    K[K_REPUSHES] += 1
                    h_push(store, kver, mem, meta, p, fresh, jrc, True)
                    continue
        tries = 0
        if best == _INF and not free_move:
            if dok == 2:
                aside.append((key, p))
            continue
        if free_move or ((not jm_none) and jm < jd):
            if not res[p] & IN_SSD:
                ssd_free -= int(sz)
                _pool_consume(items, pst, pv)
                ssd_free += pv
            y, _ = t_take(TD, gd, res, parent, dcd, dany, IN_DRAM, p, False)
            outp.append(p)
            outa.append(DEMOTE)
        else:
            if (not jm_none) and pf > 0:
                K[K_REJECTED] += 1
            y, _ = t_take(TD, gd, res, parent, dcd, dany, IN_DRAM, p, res[p] == IN_DRAM and not is_state(p))
            outp.append(p)
            outa.append(DROP)
        freed += int(sz)
        if y >= 0:
            q = fa_of(y)
            if not (kver[q] != 0 or not res[q] & IN_DRAM or pin[q] == cur or t_chosen(TD, gd, q)
                    or not t_is_leaf(TD, gd, dcd, y)):
                h_push(store, kver, mem, meta, q, cand_key(C, S, P, F, q, now), jrc, True)
    n = len(outp)
    if freed < need:
        h_undo(store, kver, mem, meta, jrc)
        s2, kv2, m2, me2 = HS
        h_undo(s2, kv2, m2, me2, jrs)
        K[:] = k0
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), need - freed
    for x in range(len(aside)):
        key, p = aside[x]
        if not t_chosen(TD, gd, p) and res[p] & IN_DRAM:
            h_push(store, kver, mem, meta, p, key, jrc, False)
    s2, kv2, m2, me2 = HS
    for x in range(len(popped)):
        key, p = popped[x]
        if res[p] & IN_SSD:
            h_push(s2, kv2, m2, me2, p, key, jrs, False)
    plan = np.empty(pst[0], dtype=np.int64)
    for x in range(pst[0]):
        plan[x] = items[x][2]
    op = np.empty(n, dtype=np.int64)
    oa = np.empty(n, dtype=np.int64)
    for x in range(n):
        p = outp[x]
        a = outa[x]
        op[x] = p
        oa[x] = a
        h_forget(kver, mem, meta, p)
        if a == DEMOTE:
            K[K_MOVES_STATE if is_state(p) else K_MOVES_FA] += 1
            if res[p] & IN_SSD:
                K[K_MOVES_FREE] += 1
        else:
            K[K_DROPS_STATE if is_state(p) else K_DROPS_FA] += 1
    return op, oa, plan, 0


# ---------------------------------------------------------------------------- SSD selection
@njit(cache=True)
def _take_plan(C, K, HS, TS, G, F, plan, need):
    res = C[0]
    pin = C[1]
    cur = F[F_CUR]
    gs = t_next(TS, G, 1)
    out = _new_ints()
    freed = 0
    for x in range(len(plan)):
        p = plan[x]
        if freed >= need:
            break
        if not res[p] & IN_SSD or pin[p] == cur or t_chosen(TS, gs, p):
            continue
        if not is_state(p) and res[p] == IN_SSD and not t_may_drop_last(TS, gs, C[9], chunk_of(p)):
            continue
        t_take(TS, gs, res, C[3], C[8], C[9], IN_SSD, p, res[p] == IN_SSD and not is_state(p))
        out.append(p)
        freed += psize(C, p)
    if freed < need:
        return np.zeros(0, np.int64)
    store, kver, mem, meta = HS
    op = np.empty(len(out), dtype=np.int64)
    for x in range(len(out)):
        op[x] = out[x]
        h_forget(kver, mem, meta, out[x])
    K[K_SSD_EVICTIONS] += len(out)
    return op


@njit(cache=True)
def select_ssd(C, S, P, F, K, HS, TS, G, need, now, plan):
    """GandalfPolicy._select_ssd (after taking ``plan``, the last DRAM selection's victims, if
    they suffice). Returns the payloads to drop; empty if ``need`` cannot be freed."""
    if len(plan):
        out = _take_plan(C, K, HS, TS, G, F, plan, need)
        if len(out):
            return out
    res = C[0]
    pin = C[1]
    dany = C[9]
    cur = F[F_CUR]
    gs = t_next(TS, G, 1)
    store, kver, mem, meta = HS
    jr = _new_journal()
    outl = _new_ints()
    aside = _new_pairs()
    k0 = K.copy()
    freed = 0
    while freed < need:
        ok, key, p = h_pop(store, kver, mem, meta, jr, True)
        if not ok:
            break
        if not res[p] & IN_SSD or pin[p] == cur or t_chosen(TS, gs, p):
            if res[p] & IN_SSD:
                aside.append((key, p))
            continue
        if not is_state(p) and res[p] == IN_SSD and not t_may_drop_last(TS, gs, dany, chunk_of(p)):
            if _creda(TS, gs, chunk_of(p)):
                aside.append((key, p))
            continue
        fresh = ssd_key(C, S, P, F, p, now)
        found, nk = h_peek(store, kver, meta)
        if fresh > key + _EPS * max(1.0, abs(key)) and found and fresh > nk:
            K[K_REPUSHES] += 1
            h_push(store, kver, mem, meta, p, fresh, jr, True)
            continue
        _, par = t_take(TS, gs, res, C[3], C[8], dany, IN_SSD, p, res[p] == IN_SSD and not is_state(p))
        outl.append(p)
        freed += psize(C, p)
        if par >= 0:
            q = fa_of(par)
            if res[q] == IN_SSD and kver[q] == 0 and pin[q] != cur and t_may_drop_last(TS, gs, dany, par):
                h_push(store, kver, mem, meta, q, ssd_key(C, S, P, F, q, now), jr, True)
    if freed < need:
        h_undo(store, kver, mem, meta, jr)
        K[:] = k0
        return np.zeros(0, np.int64)
    for x in range(len(aside)):
        key, p = aside[x]
        if not t_chosen(TS, gs, p):
            h_push(store, kver, mem, meta, p, key, jr, False)
    op = np.empty(len(outl), dtype=np.int64)
    for x in range(len(outl)):
        op[x] = outl[x]
        h_forget(kver, mem, meta, outl[x])
    K[K_SSD_EVICTIONS] += len(outl)
    return op


# ---------------------------------------------------------------------------- entry points
# Flat arguments: the dispatcher types plain arrays in C, tuples of arrays in Python (slow).
@njit(cache=True)
def select_dram_flat(res, pin, sbx, parent, depth, anchor, flat, dcd, dcs, dany,
                     tf, tl, hits, sdem, popp, crc, crcc, est, P, F, K,
                     cs, ckv, cmem, cmeta, ss, skv, smem, smeta,
                     td0, td1, td2, td3, td4, ts0, ts1, ts2, ts3, ts4, G, need, now, ssd_free):
    C = (_b(res), _b(pin), _b(sbx), _b(parent), _b(depth), _b(anchor), _b(flat), _b(dcd), _b(dcs), _b(dany))
    S = (_b(tf), _b(tl), _b(hits), _b(sdem), _b(popp), _b(crc), _b(crcc), _b(est))
    return select_dram(C, S, _b(P), _b(F), _b(K), (cs, _b(ckv), _b(cmem), _b(cmeta)),
                       (ss, _b(skv), _b(smem), _b(smeta)),
                       (_b(td0), _b(td1), _b(td2), _b(td3), _b(td4)), (_b(ts0), _b(ts1), _b(ts2), _b(ts3), _b(ts4)),
                       _b(G), need, now, ssd_free)


@njit(cache=True)
def select_ssd_flat(res, pin, sbx, parent, depth, anchor, flat, dcd, dcs, dany,
                    tf, tl, hits, sdem, popp, crc, crcc, est, P, F, K,
                    ss, skv, smem, smeta, ts0, ts1, ts2, ts3, ts4, G, need, now, plan):
    C = (_b(res), _b(pin), _b(sbx), _b(parent), _b(depth), _b(anchor), _b(flat), _b(dcd), _b(dcs), _b(dany))
    S = (_b(tf), _b(tl), _b(hits), _b(sdem), _b(popp), _b(crc), _b(crcc), _b(est))
    return select_ssd(C, S, _b(P), _b(F), _b(K), (ss, _b(skv), _b(smem), _b(smeta)),
                      (_b(ts0), _b(ts1), _b(ts2), _b(ts3), _b(ts4)), _b(G), need, now, _b(plan))


# ---------------------------------------------------------------------------- residency events
# The interpreter's on_enter / on_leaf / on_global_leaf and rekeying, for a batch at a time
# (CacheState delivers one call per batch): the same heap pushes, with the same keys, in the
# same order as the per-event methods of GandalfPolicy. Pushes go straight into the heaps (the
# caller flushes their queues first, so the order of every heap's changes is kept).
@njit(cache=True, inline="always")
def _table(store, meta, E):
    """The entry table with room for one more row: ``E`` (store[0], held by the caller) or store[0]
    grown, and its borrowed view."""
    if meta[M_LEN] == E.shape[0]:
        E = _with_room(store, meta)
    return E


@njit(cache=True)
def _enter(C, S, P, F, HC, HS, tier, now, ps):
    """on_enter(tier, p) of each of ``ps``: each push made as its key is computed (keys do not read
    the heaps, the two heaps are apart, and the payloads are distinct: no push changes a later
    test), so each heap sees the pushes of the per-payload calls, in their order."""
    res = C[0]
    dcd = C[7]
    cs, ckv, cmem, cmeta = HC
    ss, skv, smem, smeta = HS
    Ec = cs[0]
    Es = ss[0]
    for i in range(len(ps)):
        p = ps[i]
        if tier == 2:                       # SSD
            Es = _table(ss, smeta, Es)
            _push_at(_b(Es), skv, smem, smeta, p, ssd_key(C, S, P, F, p, now))
            continue
        if tier == 1 and (is_state(p) or dcd[chunk_of(p)] == 0):
            Ec = _table(cs, cmeta, Ec)
            _push_at(_b(Ec), ckv, cmem, cmeta, p, cand_key(C, S, P, F, p, now))
        if res[p] & IN_SSD and not smem[p]:
            Es = _table(ss, smeta, Es)
            _push_at(_b(Es), skv, smem, smeta, p, ssd_key(C, S, P, F, p, now))


@njit(cache=True)
def _enter_one(C, S, P, F, HC, HS, tier, now, p):
    """_enter of one payload without its buffers (the engine's on_enter, one call per payload):
    the same pushes with the same keys (keys do not read the heaps, and the two heaps are apart)."""
    cs, ckv, cmem, cmeta = HC
    ss, skv, smem, smeta = HS
    if tier == 2:                           # SSD
        _push_one(ss, skv, smem, smeta, p, ssd_key(C, S, P, F, p, now))
        return
    if tier == 1 and (is_state(p) or C[7][chunk_of(p)] == 0):
        _push_one(cs, ckv, cmem, cmeta, p, cand_key(C, S, P, F, p, now))
    if C[0][p] & IN_SSD and not smem[p]:
        _push_one(ss, skv, smem, smeta, p, ssd_key(C, S, P, F, p, now))


@njit(cache=True)
def _push_one(store, kver, mem, meta, item, key):
    """A push of one item (no journal, no buffers)."""
    _push_at(_with_room(store, meta), kver, mem, meta, item, key)


@njit(cache=True)
def _leaf_events(C, S, P, F, HC, HS, dram, now, kinds, nodes):
    """The leaf events in order, each push made at once (as in _enter: keys do not read the heaps,
    and a payload's membership, set by its push, is what a later event tests)."""
    res = C[0]
    dcd = C[7]
    cs, ckv, cmem, cmeta = HC
    ss, skv, smem, smeta = HS
    Ec = cs[0]
    Es = ss[0]
    for i in range(len(kinds)):
        p = fa_of(nodes[i])
        if kinds[i] == 0:                   # on_leaf(tier, c)
            if dram and res[p] & IN_DRAM and not cmem[p]:
                Ec = _table(cs, cmeta, Ec)
                _push_at(_b(Ec), ckv, cmem, cmeta, p, cand_key(C, S, P, F, p, now))
        else:                               # on_global_leaf(c)
            r = res[p]
            if r & IN_DRAM and not cmem[p] and dcd[nodes[i]] == 0:
                Ec = _table(cs, cmeta, Ec)
                _push_at(_b(Ec), ckv, cmem, cmeta, p, cand_key(C, S, P, F, p, now))
            if r & IN_SSD and not smem[p]:
                Es = _table(ss, smeta, Es)
                _push_at(_b(Es), skv, smem, smeta, p, ssd_key(C, S, P, F, p, now))


@njit(cache=True)
def _rekey_push(C, S, P, F, HC, HS, now, ps):
    """_rekey: every payload of ``ps`` in a heap is pushed again with its current key, at once (keys
    do not read the heaps, and a member stays one: each heap sees its pushes in order)."""
    cs, ckv, cmem, cmeta = HC
    ss, skv, smem, smeta = HS
    Ec = cs[0]
    Es = ss[0]
    for i in range(len(ps)):
        p = ps[i]
        if cmem[p]:
            Ec = _table(cs, cmeta, Ec)
            _push_at(_b(Ec), ckv, cmem, cmeta, p, cand_key(C, S, P, F, p, now))
        if smem[p]:
            Es = _table(ss, smeta, Es)
            _push_at(_b(Es), skv, smem, smeta, p, ssd_key(C, S, P, F, p, now))


@njit(cache=True)
def events_flat(res, pin, sbx, parent, depth, anchor, flat, dcd, dcs, dany,
                tf, tl, hits, sdem, popp, crc, crcc, est, P, F,
                cs, ckv, cmem, cmeta, ss, skv, smem, smeta, what, tier, now, a, b):
    """what 0: on_enter(tier, p) for p in ``a``; 1: the leaf events (kinds ``a``, chunks ``b``)
    of tier ``tier``; 2: _rekey(``a``)."""
    C = (_b(res), _b(pin), _b(sbx), _b(parent), _b(depth), _b(anchor), _b(flat), _b(dcd), _b(dcs), _b(dany))
    S = (_b(tf), _b(tl), _b(hits), _b(sdem), _b(popp), _b(crc), _b(crcc), _b(est))
    HC = (cs, _b(ckv), _b(cmem), _b(cmeta))
    HS = (ss, _b(skv), _b(smem), _b(smeta))
    if what == 0:
        _enter(C, S, _b(P), _b(F), HC, HS, tier, now, _b(a))
    elif what == 1:
        _leaf_events(C, S, _b(P), _b(F), HC, HS, tier == 1, now, _b(a), _b(b))
    else:
        _rekey_push(C, S, _b(P), _b(F), HC, HS, now, _b(a))
