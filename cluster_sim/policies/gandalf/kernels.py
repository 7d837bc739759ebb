"""Gandalf's compiled hooks and the kernels on its state (the capacity-aware cost model with lazy
heaps; its DRAM and SSD selections and reuse estimators are in policies._gandalf_jit and
policies._reuse_jit). Its state is PX / FX in segments (engine.layout: GI_* / GF_*)."""
import math
import numpy as np
from numba import njit

from ...engine._jit import (
    DECIDE,
    DRAM,
    DROP,
    M_CAP2,
    M_LO,
    M_FAB,
    M_GROW,
    M_SEQ,
    M_SHORT,
    M_USED0,
    M_USED1,
    M_USED2,
    R_STOP,
    R_SUB,
    R_TID,
    R_TURN,
    SSD,
    _bit,
    _leaf_climb,
    borrow,
    inserted_payload,
    seg_view,
)
from .layout import (
    GD_GEN_LIMIT,
    GF0,
    GF_CRC,
    GF_CRCC,
    GF_CRCT,
    GF_CST,
    GF_EST,
    GF_GN,
    GF_P,
    GF_POPP,
    GF_PQF,
    GF_PRT,
    GF_PUT,
    GF_RCN,
    GF_RD,
    GF_REVT,
    GF_RQ,
    GF_RSC,
    GF_RSTART,
    GF_RT0,
    GF_SST,
    GF_TF,
    GF_TL,
    GI_CKPT,
    GI_CKV,
    GI_CMEM,
    GI_CMETA,
    GI_F,
    GI_G,
    GI_GX,
    GI_HITS,
    GI_K,
    GI_KINDS,
    GI_MEND,
    GI_MGEN,
    GI_NODES,
    GI_PLAN,
    GI_PQ,
    GI_PRC,
    GI_PUC,
    GI_RBUF,
    GI_RCLS,
    GI_REVB,
    GI_REVG,
    GI_RGM,
    GI_RGN,
    GI_RGRP,
    GI_RGS,
    GI_RSTOP,
    GI_RSUB,
    GI_RSUP,
    GI_RTHR,
    GI_RTOU,
    GI_RTURN,
    GI_SBX,
    GI_SDEM,
    GI_SKV,
    GI_SMEM,
    GI_SMETA,
    GI_TD0,
    GI_TD1,
    GI_TD2,
    GI_TD3,
    GI_TD4,
    GI_TS0,
    GI_TS1,
    GI_TS2,
    GI_TS3,
    GI_TS4,
    GROW_GD,
    GROW_GDGEN,
    GROW_HINTS,
    GROW_POP,
    GROW_REFIT,
    GX_CHUNKS,
    GX_EVERY,
    GX_FIRST,
    GX_HASLOG,
    GX_HINTS,
    GX_LAST_REFIT,
    GX_MEMO,
    GX_PLAN,
    GX_REKEY,
    GX_ROOMB,
    GX_SEEN,
    GX_STOP,
    GX_SUB,
    GX_TID,
    GX_TURN,
    M_GD_CROOM,
    M_GD_HELD,
    M_GD_ROOM,
    PQ_N,
    PQ_BUCKETS,
    PQ_R,
    PQ_RH,
    PQ_RT,
    PQ_UH,
    PQ_UT,
    RS_CRCN,
    RS_CRCSUM,
    RS_H,
    RS_LASTEV,
    RS_LOGAGE,
    RS_NOW,
)
from .. import _gandalf_jit as GJ
from .. import _reuse_jit as RJ

#: modules of kernels these call that do not take the engine state (the build digests and caches them)
HELPERS = ("cluster_sim.policies._gandalf_jit", "cluster_sim.policies._reuse_jit")

assert GJ._BUCKETS == PQ_BUCKETS, "the engine's heap layout has room for Gandalf's buckets"


@njit(cache=True, inline="always")
def _gt(S, k, dt):
    """Gandalf's int segment ``k`` of element type ``dt`` (its ``GI_DTYPES`` type; a borrowed view)."""
    return seg_view(S.PX, S.PX[2 * k], S.PX[2 * k + 1], dt)


@njit(cache=True, inline="always")
def _gi(S, k):
    """Gandalf's int64 segment ``k`` (a borrowed view)."""
    return _gt(S, k, np.int64)


@njit(cache=True, inline="always")
def _gf(S, k):
    """Gandalf's float64 segment ``k`` (a borrowed view: a slice would carry FX's reference count, and
    every inlined key function counts each array of its tuples in and out)."""
    return seg_view(S.FX, 8 * S.PX[GF0 + k], 8 * S.PX[GF0 + k + 1], np.float64)


@njit(cache=True, inline="always")
def _gd_c(S):
    """The chunk arrays Gandalf's kernels take (GJ's ``C``), borrowed: its key functions are inlined,
    and an inlined call counts every array of its tuples in and out (30% of a re-key's time when
    they were counted)."""
    return (borrow(S.res), borrow(S.pin), _gi(S, GI_SBX), borrow(S.parent), borrow(S.depth), borrow(S.anchor),
            borrow(S.flat), borrow(S.dcnt[1]), borrow(S.dcnt[2]), borrow(S.dany))


@njit(cache=True, inline="always")
def _gd_s(S):
    return (_gf(S, GF_TF), _gf(S, GF_TL), _gt(S, GI_HITS, np.int32), _gt(S, GI_SDEM, np.uint8),
            _gf(S, GF_POPP),
            _gf(S, GF_CRC), _gf(S, GF_CRCC), _gf(S, GF_EST))


@njit(cache=True, inline="always")
def _gd_table(S, k):
    """Heap entry table ``k`` (GF_CST / GF_SST) as the kernels take it: ``store[0]`` is the table."""
    t = _gf(S, k)
    return t.reshape((1, len(t) // 3, 3))


@njit(cache=True, inline="always")
def _gd_hc(S):
    return (_gd_table(S, GF_CST), _gt(S, GI_CKV, np.int32), _gt(S, GI_CMEM, np.uint8), _gi(S, GI_CMETA))


@njit(cache=True, inline="always")
def _gd_hs(S):
    return (_gd_table(S, GF_SST), _gt(S, GI_SKV, np.int32), _gt(S, GI_SMEM, np.uint8), _gi(S, GI_SMETA))


@njit(cache=True, inline="always")
def _gd_td(S):
    i4, u2 = np.int32, np.uint16
    return (_gt(S, GI_TD0, i4), _gt(S, GI_TD1, u2), _gt(S, GI_TD2, i4), _gt(S, GI_TD3, u2), _gt(S, GI_TD4, u2))


@njit(cache=True, inline="always")
def _gd_ts(S):
    i4, u2 = np.int32, np.uint16
    return (_gt(S, GI_TS0, i4), _gt(S, GI_TS1, u2), _gt(S, GI_TS2, i4), _gt(S, GI_TS3, u2), _gt(S, GI_TS4, u2))


@njit(cache=True, inline="always")
def _gnow(S):
    return S.FX[S.PX[GF0 + GF_GN]]


@njit(cache=True)
def _gd_enter(S, t, p):
    """``on_enter(t, p)`` (one payload: as CacheState's batches, whose payloads are distinct)."""
    GJ._enter_one(_gd_c(S), _gd_s(S), _gf(S, GF_P), _gi(S, GI_F), _gd_hc(S), _gd_hs(S), t, _gnow(S), p)


@njit(cache=True)
def _gd_enter_many(S, t, ps):
    """``on_enter(t, p)`` of each of ``ps`` (distinct, typed list), in one call: the same pushes in the
    same order as one call per payload (:func:`GJ._enter`: no push changes a later payload's test)."""
    n = len(ps)
    if n == 1:
        _gd_enter(S, t, ps[0])
        return
    a = np.empty(n, dtype=np.int64)
    for i in range(n):
        a[i] = ps[i]
    GJ._enter(_gd_c(S), _gd_s(S), _gf(S, GF_P), _gi(S, GI_F), _gd_hc(S), _gd_hs(S), t, _gnow(S), a)


@njit(cache=True)
def _gd_leave(S, t, p):
    """``on_leave(t, p)``: the copy leaves the tier's heap (its queued discard, as _JitHeap's)."""
    if t == DRAM:
        mem = _gt(S, GI_CMEM, np.uint8)
        if mem[p]:
            GJ.h_forget(_gt(S, GI_CKV, np.int32), mem, _gi(S, GI_CMETA), p)
    elif t == SSD:
        mem = _gt(S, GI_SMEM, np.uint8)
        if mem[p]:
            GJ.h_forget(_gt(S, GI_SKV, np.int32), mem, _gi(S, GI_SMETA), p)


@njit(cache=True)
def _gd_leaf(S, t, cs, gone):
    """CacheState's leaf events after the FA copies of chunks ``cs`` (sorted, distinct; ``gone``: lost
    their last copy) left tier ``t``: on_leaf in DRAM, on_global_leaf in any tier."""
    kinds, nodes = _gt(S, GI_KINDS, np.int8), _gt(S, GI_NODES, np.int32)
    if len(kinds) < 2 * len(cs):
        raise RuntimeError("cluster_sim engine: gandalf leaf-event buffer full")
    GX = _gi(S, GI_GX)
    mgen = _gt(S, GI_MGEN, np.int32)
    if GX[GX_MEMO] >= GD_GEN_LIMIT:          # int32 stamps: the memo starts over (it only saves work)
        mgen[:] = 0
        GX[GX_MEMO] = 0
    GX[GX_MEMO] += 1
    n = _leaf_climb(t == DRAM, _bit(t), cs, gone, S.parent, S.res, S.dcnt[t], S.dany, _gt(S, GI_MEND, np.int32),
                    mgen, GX[GX_MEMO], kinds, nodes)
    if n:
        GJ._leaf_events(_gd_c(S), _gd_s(S), _gf(S, GF_P), _gi(S, GI_F), _gd_hc(S), _gd_hs(S), t == DRAM, _gnow(S),
                        kinds[:n], nodes[:n])


@njit(cache=True)
def _gd_removed(S, t, cs_l, lost_l):
    """The leaf events of a batch removal from tier ``t`` (chunks in any order, each once)."""
    n = len(cs_l)
    if n == 0:
        return
    cs = np.empty(n, dtype=np.int64)
    for i in range(n):
        cs[i] = cs_l[i]
    order = np.argsort(cs)
    sc = np.empty(n, dtype=np.int64)
    sg = np.empty(n, dtype=np.bool_)
    for i in range(n):
        sc[i] = cs[order[i]]
        sg[i] = lost_l[order[i]]
    _gd_leaf(S, t, sc, sg)


@njit(cache=True)
def _gd_access(S, path):
    """``GandalfPolicy.on_access``: demand statistics of the path's FA chunks, the estimator's
    references (reuse=hints), then the demand of the deepest STATE ever checkpointed on it."""
    m = len(path)
    if m == 0:
        return
    now = _gnow(S)
    if _gi(S, GI_F)[GJ.F_POP]:
        _gd_population(S, path, now)
    tf, tl, hits = _gf(S, GF_TF), _gf(S, GF_TL), _gt(S, GI_HITS, np.int32)
    hints = _gi(S, GI_GX)[GX_HINTS] != 0
    for k in range(m):
        p = 2 * path[k]
        if not hints:               # under reuse=hints no kernel reads first touches or hits (none kept)
            if tf[p] == tf[p]:
                hits[p] += 1
            else:
                tf[p] = now
        tl[p] = now
    ckpt, sdem, P = _gt(S, GI_CKPT, np.bool_), _gt(S, GI_SDEM, np.uint8), _gf(S, GF_P)
    if hints:
        _gd_est_access(S, path, ckpt)
    for k in range(m - 1, -1, -1):
        c = path[k]
        if ckpt[c]:
            q = 2 * c + 1
            d = sdem[c]
            if d < 2:                   # demands counted up to 2: every reader asks 0, 1 or >= 2
                sdem[c] = d + 1
            if d == 0:
                P[GJ.A_NDEM] += 1.0
            elif d == 1:
                P[GJ.A_NDEM2] += 1.0
            if d >= 1 and not hints:
                hits[q] += 1
            tl[q] = now
            return


@njit(cache=True)
def _gd_population(S, path, now):
    """reuse=population, ``GandalfPolicy._population`` (before the path's statistics move): this
    request's references and reuses join the windows, those whose window H closed are counted, and
    ``pop_p`` is recomputed when a reference was. Rows of counts stand for the reference's deques
    (see ``PQ``); the counts and ``pop_p``'s floats are the reference's."""
    nb = GJ._BUCKETS + 1
    H = _gf(S, GF_P)[GJ.A_H]
    tf, tl, hits = _gf(S, GF_TF), _gf(S, GF_TL), _gt(S, GI_HITS, np.int32)
    Q, PRC, PUC = _gi(S, GI_PQ), _gi(S, GI_PRC), _gi(S, GI_PUC)
    PRT, PUT, PQF = _gf(S, GF_PRT), _gf(S, GF_PUT), _gf(S, GF_PQF)
    r = Q[PQ_RT]
    Q[PQ_RT] = r + 1
    PRT[r] = now
    for b in range(nb):
        PRC[r * nb + b] = 0
    for k in range(len(path)):
        p = 2 * path[k]
        t1 = tl[p]
        seen = tf[p] == tf[p]
        h = hits[p]
        b = 0
        if seen:
            b = h + 1 if h + 1 < GJ._BUCKETS else GJ._BUCKETS
            if now - t1 <= H:
                # a reuse of the reference at t1, in the bucket of the touches before it
                if t1 > PQF[0]:
                    PQF[0] = t1
                u = Q[PQ_UT]
                if u == Q[PQ_UH] or PUT[u - 1] != PQF[0]:
                    PUT[u] = PQF[0]
                    for x in range(nb):
                        PUC[u * nb + x] = 0
                    Q[PQ_UT] = u + 1
                    u += 1
                PUC[(u - 1) * nb + (h if h < GJ._BUCKETS else GJ._BUCKETS)] += 1
        PRC[r * nb + b] += 1
    changed = False
    i = Q[PQ_RH]
    while i < Q[PQ_RT] and PRT[i] + H < now:
        for b in range(nb):
            Q[PQ_N + b] += PRC[i * nb + b]
        i += 1
        changed = True
    Q[PQ_RH] = i
    i = Q[PQ_UH]
    while i < Q[PQ_UT] and PUT[i] + H < now:
        for b in range(nb):
            Q[PQ_R + b] += PUC[i * nb + b]
        i += 1
    Q[PQ_UH] = i
    if changed:
        popp = _gf(S, GF_POPP)
        for b in range(nb):
            popp[b] = (Q[PQ_R + b] + 1.0) / (Q[PQ_N + b] + 2.0)


@njit(cache=True)
def _gd_inserted(S, q):
    """``on_insert`` of a new STATE ``q`` still resident (FA payloads need nothing under reuse=rate)."""
    c = q >> 1
    ckpt = _gt(S, GI_CKPT, np.bool_)
    if not ckpt[c]:
        ckpt[c] = 1
        _gf(S, GF_P)[GJ.A_NCKPT] += 1.0
    now = _gnow(S)
    tf, tl = _gf(S, GF_TF), _gf(S, GF_TL)
    if _gi(S, GI_GX)[GX_HINTS] == 0 and tf[q] != tf[q]:
        tf[q] = now
    tl[q] = now


@njit(cache=True, inline="always")
def _gd_rtab(S, k):
    """The estimator's (class, age bin) table ``k`` (GF_RD, GF_RCN, GF_RQ) as its kernels take it."""
    t = _gf(S, k)
    return t.reshape((len(t) // RJ.NB, RJ.NB))


@njit(cache=True, inline="always")
def _gd_rcls(S):
    """The estimator's per-payload class, group, touches, superseded, stop, sub-agent and turn arrays."""
    return (_gt(S, GI_RCLS, np.int32), _gt(S, GI_RGRP, np.int32), _gt(S, GI_RTOU, np.int32), _gt(S, GI_RSUP, np.bool_),
            _gt(S, GI_RSTOP, np.int8), _gt(S, GI_RSUB, np.bool_), _gt(S, GI_RTURN, np.int32))


@njit(cache=True)
def _gd_rekey(S, ps):
    """``_rekey(ps)``: the heap entries of payloads whose estimate went down are pushed again."""
    if len(ps):
        GJ._rekey_push(_gd_c(S), _gd_s(S), _gf(S, GF_P), _gi(S, GI_F), _gd_hc(S), _gd_hs(S), _gnow(S), ps)


@njit(cache=True)
def _gd_est_access(S, path, ckpt):
    """reuse=hints, ``on_access``: the estimator's references of the path (its FA chunks and the
    deepest STATE ever checkpointed on it), then the re-key of what went down."""
    m = len(path)
    GX, RSC = _gi(S, GI_GX), _gf(S, GF_RSC)
    state = -1
    for k in range(m - 1, -1, -1):
        if ckpt[path[k]]:
            state = 2 * path[k] + 1
            break
    GX[GX_SEEN] += 1
    if GX[GX_CHUNKS]:
        RSC[RS_CRCSUM] += _gf(S, GF_CRCT)[m]
        RSC[RS_CRCN] += m
    cls, grp, tou, sup, stop, sub, turn = _gd_rcls(S)
    low = RJ.access(_gf(S, GF_EST), _gf(S, GF_RSTART), cls, grp, tou, sup, stop, sub, turn, _gd_rtab(S, GF_RD),
                    _gd_rtab(S, GF_RCN), _gd_rtab(S, GF_RQ), _gt(S, GI_RBUF, np.int32), _gi(S, GI_RGS), _gi(S, GI_RGN),
                    _gf(S, GF_RT0), _gf(S, GF_REVT), _gi(S, GI_REVG), _gi(S, GI_REVB), _gi(S, GI_RGM),
                    _gi(S, GI_RTHR), path, state, _gnow(S), GX[GX_STOP], GX[GX_SUB], GX[GX_TID], GX[GX_TURN])
    _gd_rekey(S, low)


@njit(cache=True)
def _gd_est_created(S, qs):
    """reuse=hints, ``on_insert``: fresh references for the new STATEs ``qs`` (still resident)."""
    GX = _gi(S, GI_GX)
    cls, grp, tou, sup, stop, sub, turn = _gd_rcls(S)
    low = RJ.created(_gf(S, GF_EST), _gf(S, GF_RSTART), cls, grp, tou, sup, stop, sub, turn, _gd_rtab(S, GF_RD),
                     _gd_rtab(S, GF_RCN), _gd_rtab(S, GF_RQ), _gt(S, GI_RBUF, np.int32), _gi(S, GI_RGS), _gi(S, GI_RGN),
                     _gf(S, GF_RT0), _gf(S, GF_REVT), _gi(S, GI_REVG), _gi(S, GI_REVB), _gi(S, GI_RGM), qs,
                     _gnow(S), GX[GX_STOP], GX[GX_SUB], GX[GX_TURN])
    _gd_rekey(S, low)


@njit(cache=True)
def _gd_tick(S, now):
    """reuse=hints, ``tick`` (H is set before the request, in _replay; the refit runs interpreted
    between requests): after a refit every heap member is re-keyed, else the due re-evaluations."""
    GX = _gi(S, GI_GX)
    if GX[GX_REKEY]:
        GX[GX_REKEY] = 0
        cm, sm = _gt(S, GI_CMEM, np.uint8), _gt(S, GI_SMEM, np.uint8)
        n = 0
        for p in range(len(cm)):
            if cm[p] != 0 or sm[p] != 0:
                n += 1
        ps = np.empty(n, dtype=np.int64)
        k = 0
        for p in range(len(cm)):
            if cm[p] != 0 or sm[p] != 0:
                ps[k] = p
                k += 1
        _gd_rekey(S, ps)
        return
    low = RJ.tick(_gf(S, GF_EST), _gf(S, GF_RSTART), _gt(S, GI_RCLS, np.int32), _gt(S, GI_RGRP, np.int32), _gd_rtab(S, GF_RQ),
                  _gt(S, GI_RBUF, np.int32), _gi(S, GI_RGS), _gi(S, GI_RGN), _gf(S, GF_RT0), _gf(S, GF_REVT), _gi(S, GI_REVG),
                  _gi(S, GI_REVB), _gi(S, GI_RGM), S.res, now)
    _gd_rekey(S, low)


@njit(cache=True)
def _gd_compact(S):
    """The estimator's member buffer compacted in place, as ``CompiledHintsReuse._compact`` does it
    into a new one: the live groups' members moved to the front, in group order (a group's slot
    never starts before an older group's, so every move is to the left); ids and members unchanged.
    Growth (a repack of the node's state) is then needed only when the live members fill it."""
    gbuf, gs, gn, GM = _gt(S, GI_RBUF, np.int32), _gi(S, GI_RGS), _gi(S, GI_RGN), _gi(S, GI_RGM)
    w = 0
    for g in range(GM[RJ.G_NEXT]):
        n = gn[g]
        if n > 0:
            o = gs[g]
            if o != w:
                for i in range(n):
                    gbuf[w + i] = gbuf[o + i]
                gs[g] = w
            w += n
    GM[RJ.G_USED] = w


@njit(cache=True)
def _gd_before(S, now, row):
    """reuse=hints, before a request (at time ``now``; its hints in its ``row`` of R): the estimator's
    H as ``tick`` sets it, and the grow requests: room in its buffers, its refit due at this request."""
    M = S.M
    GX, RSC = _gi(S, GI_GX), _gf(S, GF_RSC)
    GX[GX_STOP], GX[GX_SUB], GX[GX_TURN], GX[GX_TID] = row[R_STOP], row[R_SUB], row[R_TURN], row[R_TID]
    if GX[GX_HASLOG] == 0 or M[M_USED2] + M[M_FAB] <= M[M_CAP2]:
        RSC[RS_H] = np.inf         # nothing given up yet, or room left: a copy written now stays
    else:
        RSC[RS_H] = max(math.exp(RSC[RS_LOGAGE]), now - RSC[RS_LASTEV])
    GM = _gi(S, GI_RGM)
    if GM[RJ.G_USED] + GX[GX_ROOMB] > len(_gt(S, GI_RBUF, np.int32)):
        _gd_compact(S)
    if (GM[RJ.G_USED] + GX[GX_ROOMB] > len(_gt(S, GI_RBUF, np.int32)) or GM[RJ.G_NEXT] + 8 > len(_gi(S, GI_RGS))
            or GM[RJ.G_EVN] + 8 > len(_gf(S, GF_REVT))):
        M[M_GROW] |= GROW_HINTS
    seen = GX[GX_SEEN]
    if (seen >= GX[GX_FIRST] and (seen - GX[GX_FIRST]) % GX[GX_EVERY] == 0 and seen != GX[GX_LAST_REFIT]):
        RSC[RS_NOW] = now
        M[M_GROW] |= GROW_REFIT


@njit(cache=True)
def _gd_note_ssd_victims(S, ps):
    """``_note_ssd_victims``: the SSD's characteristic time, a running mean of the log ages (time
    since the last touch) of the copies it gives up."""
    now = _gnow(S)
    GX, RSC, tl = _gi(S, GI_GX), _gf(S, GF_RSC), _gf(S, GF_TL)
    RSC[RS_LASTEV] = now
    la = RSC[RS_LOGAGE]
    has = GX[GX_HASLOG] != 0
    for i in range(len(ps)):
        t = tl[ps[i]]
        if t == t:
            x = math.log(max(now - t, 1.0))
            la = x if not has else 0.999 * la + 0.001 * x
            has = True
    RSC[RS_LOGAGE] = la
    GX[GX_HASLOG] = 1 if has else 0


@njit(cache=True)
def _gd_select_dram(S, need, vict, acts):
    """``select_victims(DRAM)``: the compiled selection; its SSD plan is kept for the next SSD one.
    False (the shortfall in M_SHORT) when it cannot free ``need``."""
    M = S.M
    ps, ac, plan, short = GJ.select_dram(_gd_c(S), _gd_s(S), _gf(S, GF_P), _gi(S, GI_F), _gi(S, GI_K), _gd_hc(S),
                                         _gd_hs(S), _gd_td(S), _gd_ts(S), _gi(S, GI_G), need, _gnow(S),
                                         M[M_CAP2] - M[M_USED2])
    if short:
        M[M_SHORT] = short
        return False
    buf = _gt(S, GI_PLAN, np.int32)
    if len(plan) > len(buf):
        raise RuntimeError("cluster_sim engine: gandalf plan buffer full")
    buf[:len(plan)] = plan
    _gi(S, GI_GX)[GX_PLAN] = len(plan) if len(plan) else -1
    for i in range(len(ps)):
        vict.append(ps[i])
        acts.append(ac[i])
    return len(ps) > 0


@njit(cache=True)
def _gd_select_ssd(S, need, vict):
    """``select_victims(SSD)``, taking the last DRAM selection's plan first (once)."""
    GX = _gi(S, GI_GX)
    n = GX[GX_PLAN]
    GX[GX_PLAN] = -1
    plan = _gt(S, GI_PLAN, np.int32)[:n if n > 0 else 0]
    ps = GJ.select_ssd(_gd_c(S), _gd_s(S), _gf(S, GF_P), _gi(S, GI_F), _gi(S, GI_K), _gd_hs(S), _gd_ts(S),
                       _gi(S, GI_G), need, _gnow(S), plan)
    for i in range(len(ps)):
        vict.append(ps[i])
    if len(ps) and GX[GX_HINTS]:
        _gd_note_ssd_victims(S, ps)
    return len(ps) > 0


# ---------------------------------------------------------------------------- the engine's hooks


@njit(cache=True, inline="always")
def tick(S, now):
    # (indexed here directly: through the inlined _gi helper, inside the inlined step, the store
    # was lost: numba 0.68, found by comparing with NUMBA_DISABLE_JIT)
    S.FX[S.PX[GF0 + GF_GN]] = now
    S.PX[(S.PX[2 * GI_F] >> 3) + GJ.F_CUR] = S.M[M_SEQ]
    if S.PX[(S.PX[2 * GI_GX] >> 3) + GX_HINTS] != 0:
        _gd_tick(S, now)


@njit(cache=True, inline="always")
def before_request(S, j, i, m, arrival, R):
    M = S.M
    # a heap's table holds at most 2 x its live entries + 65 (it is rebuilt beyond that), and
    # its live entries are distinct payloads of its tier: the SSD heap's, payloads in the SSD,
    # which a request can fill from every tier and with its own; the DRAM heap's, payloads in
    # DRAM, which a request fills only from the HBM and with its own (loads and inserts of its
    # own chunks), never from the SSD's other residents. At most every payload, in either.
    np2 = len(S.res)
    held = min((M[M_USED0] + M[M_USED1] + M[M_USED2]) // M[M_LO] + 2 * m + 4, np2)
    room = 2 * held + 66
    M[M_GD_ROOM] = room
    M[M_GD_CROOM] = 2 * min((M[M_USED0] + M[M_USED1]) // M[M_LO] + 2 * m + 4, np2) + 66
    if ((S.PX[GF0 + GF_CST + 1] - S.PX[GF0 + GF_CST]) // 3 < M[M_GD_CROOM]
            or (S.PX[GF0 + GF_SST + 1] - S.PX[GF0 + GF_SST]) // 3 < room):
        M[M_GROW] |= GROW_GD
    # the SSD plan holds SSD victims, the leaf-event buffer two events per chunk leaving a tier
    # (CompiledNode._gd_held: the same bound, at most every payload)
    held = held + 2
    M[M_GD_HELD] = held
    if ((S.PX[2 * GI_PLAN + 1] - S.PX[2 * GI_PLAN]) // 4 < held
            or S.PX[2 * GI_KINDS + 1] - S.PX[2 * GI_KINDS] < 2 * held):
        M[M_GROW] |= GROW_GD
    cme, sme = _gi(S, GI_CMETA), _gi(S, GI_SMETA)
    if max(cme[GJ.M_NEXT], sme[GJ.M_NEXT]) >= GD_GEN_LIMIT:
        M[M_GROW] |= GROW_GDGEN
    if S.PX[(S.PX[2 * GI_GX] >> 3) + GX_HINTS] != 0:
        _gd_before(S, arrival[i], R[j])
    if S.PX[(S.PX[2 * GI_F] >> 3) + GJ.F_POP] != 0:
        # reuse=population: a request adds a row of references and at most a row of reuses
        # per path chunk
        Q = _gi(S, GI_PQ)
        if (Q[PQ_RT] + 1 > len(_gf(S, GF_PRT)) or Q[PQ_UT] + m > len(_gf(S, GF_PUT))):
            M[M_GROW] |= GROW_POP


@njit(cache=True, inline="always")
def on_access(S, path, h, r, q):
    _gd_access(S, path)


@njit(cache=True)
def on_insert(S, path, r, states):
    made = [np.int64(0) for _ in range(0)]      # reuse=hints: the new STATEs still resident
    for k in range(len(path) - r + len(states)):
        p = inserted_payload(path, r, states, k)
        if S.res[p] != 0 and (p & 1) != 0:
            _gd_inserted(S, p)
            if _gi(S, GI_GX)[GX_HINTS]:
                made.append(p)
    if len(made):
        qs = np.empty(len(made), dtype=np.int64)
        for k in range(len(made)):
            qs[k] = made[k]
        _gd_est_created(S, qs)


@njit(cache=True, inline="always")
def enter(S, t, p):
    _gd_enter(S, t, p)


@njit(cache=True, inline="always")
def enter_many(S, t, ps):
    _gd_enter_many(S, t, ps)         # one batch: a call per payload rebuilds its state's views


@njit(cache=True, inline="always")
def leave(S, t, p):
    _gd_leave(S, t, p)


@njit(cache=True, inline="always")
def leave_many(S, ev):
    ckv, cmem, cmeta = _gt(S, GI_CKV, np.int32), _gt(S, GI_CMEM, np.uint8), _gi(S, GI_CMETA)
    skv, smem, smeta = _gt(S, GI_SKV, np.int32), _gt(S, GI_SMEM, np.uint8), _gi(S, GI_SMETA)
    for e in ev:                                  # _gd_leave, the views bound once
        p = e >> 2
        if (e & 3) == DRAM:
            if cmem[p]:
                GJ.h_forget(ckv, cmem, cmeta, p)
        elif smem[p]:
            GJ.h_forget(skv, smem, smeta, p)


@njit(cache=True, inline="always")
def leaf(S, t, c, gone):
    one = np.empty(1, dtype=np.int64)
    one[0] = c
    g = np.empty(1, dtype=np.bool_)
    g[0] = gone
    _gd_leaf(S, t, one, g)


@njit(cache=True, inline="always")
def leaf_many(S, t, cs, lost):
    _gd_removed(S, t, cs, lost)


@njit(cache=True, inline="always")
def action(S, t):
    return DECIDE if t == DRAM else DROP     # per-victim actions from its own selection (_gd_select_dram)


@njit(cache=True, inline="always")
def select(S, t, need, act, vict, acts):
    if t == DRAM:
        return _gd_select_dram(S, need, vict, acts)
    return _gd_select_ssd(S, need, vict)
