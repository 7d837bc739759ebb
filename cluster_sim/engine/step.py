"""The request step and the replay of a node's request stream (one call per batch of requests).

Part of the compiled engine (:mod:`cluster_sim.engine._jit`, whose docstring describes the state ``S``)."""
from __future__ import annotations

import numpy as np
from numba import njit

from . import hooks as H
from .layout import (
    DRAM,
    EV_STORED,
    EngineState,
    F_ADM,
    F_HIT,
    GROW_AQ,
    GROW_EV,
    GROW_LOG,
    GROW_OUT,
    HBM,
    K_ADM_FA,
    K_ADM_HIT_FA,
    K_ADM_HIT_STATE,
    K_ADM_STATE,
    MODE_LAST,
    MODE_LAST_AND_BRANCH,
    M_AQMAX,
    M_AQN,
    M_CAP0,
    M_CAP_AQ,
    M_CAP_OUT,
    M_COUNTING,
    M_ENTRY,
    M_FAB,
    M_GROW,
    M_HAS_STATE,
    M_ENTN0,
    M_EV_ROOM,
    M_EVN,
    M_FTL,
    M_KEV,
    M_LEFT0,
    M_LEFTN0,
    M_LEFTN2,
    M_LOGN,
    M_LOG_OUT,
    M_MODE,
    M_OUTN,
    M_OUTROOM,
    M_SEQ,
    M_USED0,
    M_WR,
    NO_TIER,
    R_ADM,
    R_ADM_HIT,
    R_DRAM_B,
    R_H,
    R_LEFT0,
    R_LEFTN2,
    R_M,
    R_N_DRAM,
    R_N_HBM,
    R_N_SSD,
    R_Q_TIER,
    R_R,
    R_SKIPPED,
    R_SSD_B,
    R_USED0,
    R_WR,
    SSD,
    _bit,
    _psize,
    log_event,
    borrow,
)
from .queue import (
    _compact_log,
    _heap_compact,
    _note_enter,
    _touch,
)
from .residency import (
    _count_ssd_write,
    _enter_many,
)
from .cascade import (
    _drain_writes,
    _resolve_or_trim,
)


@njit(cache=True, inline="always")
def _checkpoints(mode, h, r, m, out):
    if m == 0:
        return
    if mode == MODE_LAST:
        if h < m:
            out.append(m)
    elif mode == MODE_LAST_AND_BRANCH:
        if r > h and r < m:
            out.append(r)
        if h < m:
            out.append(m)
    else:
        for k in range(h + 1, m + 1):
            out.append(k)


@njit(cache=True, inline="always")
def _add_path_fa(S, t, path, lo, hi, only_absent_bit):
    """Add tier-``t`` copies of the FA of ``path[lo:hi]`` that are not in tier ``only_absent_bit``'s
    bit (the tier itself: every chunk not yet in ``t``). One pass: descendant counts are strict
    suffix counts along the path. The policy hears each new copy, root first, as
    ``CacheState.add_path_fa`` tells its listeners (lru hears nothing: no list is built)."""
    if not H.has_enter(S):              # a policy that does not listen: no list is built
        _add_path_fa_bits(S, t, path, lo, hi, only_absent_bit)
        return
    added = [np.int64(0) for _ in range(0)]
    for i in range(lo, hi):
        p = 2 * path[i]
        if (S.res[p] & only_absent_bit) == 0:
            added.append(p)
    _add_path_fa_bits(S, t, path, lo, hi, only_absent_bit)
    _enter_many(S, t, added)


@njit(cache=True, inline="always")
def _add_path_fa_bits(S, t, path, lo, hi, only_absent_bit):
    bit = _bit(t)
    res = S.res
    n_add = 0
    n_born = 0
    for i in range(len(path) - 1, -1, -1):
        c = path[i]
        if n_add:
            S.dcnt[t, c] += n_add
        if n_born:
            S.dany[c] += n_born
        if lo <= i < hi:
            p = 2 * c
            was = res[p]
            if (was & only_absent_bit) == 0:
                res[p] = was | bit
                n_add += 1
                if was == 0:
                    n_born += 1
                    if S.M[M_KEV] != 0:
                        log_event(S.M, S.elog, EV_STORED, c, 0, 0)
                _note_enter(S, t, p)
    S.M[M_USED0 + t] += n_add * S.M[M_FAB]
    S.M[M_ENTN0 + t] += n_add


@njit(cache=True, inline="always")
def _fastest(r):
    if r & 1:
        return HBM
    if r & 2:
        return DRAM
    if r & 4:
        return SSD
    return NO_TIER


@njit(cache=True, inline="always")
def _step(S, path, counting, R, j, now):
    M = S.M
    res = S.res
    seq = M[M_SEQ] + 1
    M[M_SEQ] = seq
    M[M_COUNTING] = counting
    M[M_WR] = 0
    H.tick(S, now)
    has_state = M[M_HAS_STATE] != 0
    fab = M[M_FAB]
    m = len(path)
    # 1. match
    r = 0
    while r < m and res[2 * path[r]] != 0:
        r += 1
    h = r
    if has_state:
        h = 0
        for k in range(r - 1, -1, -1):
            if res[2 * path[k] + 1] != 0:
                h = k + 1
                break
    q = 2 * path[h - 1] + 1 if (has_state and h) else -1
    # 2. serve
    n_hbm = 0
    n_dram = 0
    for k in range(h):
        x = res[2 * path[k]]
        if x & 1:
            n_hbm += 1
        elif x & 2:
            n_dram += 1
    n_ssd = h - n_hbm - n_dram
    dram_b = n_dram * fab
    ssd_b = n_ssd * fab
    q_tier = _fastest(res[q]) if q >= 0 else NO_TIER
    if q_tier == DRAM:
        dram_b += _psize(S, q)
    elif q_tier == SSD:
        ssd_b += _psize(S, q)
    if ssd_b:
        for k in range(h):
            p = 2 * path[k]
            if (res[p] & 3) == 0:
                S.flags[p] |= F_HIT
        if q_tier == SSD:
            S.flags[q] |= F_HIT
    # 3. pins, touches (c_m .. c_1, then the hit STATE)
    for k in range(r):
        S.pin[2 * path[k]] = seq
    if q >= 0:
        S.pin[q] = seq
    for k in range(m - 1, -1, -1):
        _touch(S, 2 * path[k])
    if q >= 0:
        _touch(S, q)
    if H.has_on_access(S):
        H.on_access(S, path, h, r, q)
        if M[M_AQN] > 0:
            _drain_writes(S)
    entry = M[M_ENTRY]
    states = [np.int64(0) for _ in range(0)]
    # 4. load
    if h and (entry == HBM or entry == DRAM):
        bit = _bit(entry)
        load_q = q >= 0 and (res[q] & bit) == 0
        any_fa = False
        for k in range(h):
            if (res[2 * path[k]] & bit) == 0:
                any_fa = True
                break
        if any_fa or load_q:
            order = [np.int64(0) for _ in range(0)]
            for k in range(h):
                if (res[2 * path[k]] & bit) == 0:
                    order.append(2 * path[k])
            _add_path_fa(S, entry, path, 0, h, bit)
            if load_q:
                res[q] |= bit
                M[M_USED0 + entry] += _psize(S, q)
                M[M_ENTN0 + entry] += 1
                _note_enter(S, entry, q)
                H.enter(S, entry, q)
                order.append(q)
            if M[M_USED0 + entry] > M[M_CAP0 + entry]:
                _resolve_or_trim(S, entry, order, np.bool_(False), path, q, states)
    # 5. insert
    skipped = 0
    pos = [np.int64(0) for _ in range(0)]
    if has_state:
        _checkpoints(M[M_MODE], h, r, m, pos)
    if entry != NO_TIER and m:
        t = entry
        if r < m:
            for k in range(r, m):
                S.pin[2 * path[k]] = seq
            _add_path_fa(S, t, path, r, m, np.uint8(7))
        spos = [np.int64(0) for _ in range(0)]
        for k in pos:
            qq = 2 * path[k - 1] + 1
            if res[qq] == 0:
                states.append(qq)
                spos.append(k)
        for qq in states:
            S.pin[qq] = seq
            _touch(S, qq)
            res[qq] |= _bit(t)
            M[M_USED0 + t] += _psize(S, qq)
            M[M_ENTN0 + t] += 1
            _note_enter(S, t, qq)
            H.enter(S, t, qq)
        if M[M_USED0 + t] > M[M_CAP0 + t]:
            # deepest last: by position, FA before STATE at the same position
            order = [np.int64(0) for _ in range(0)]
            i = 0
            for k in range(1, m + 1):
                if k > r:
                    order.append(2 * path[k - 1])
                while i < len(spos) and spos[i] == k:
                    order.append(states[i])
                    i += 1
            skipped = _resolve_or_trim(S, t, order, np.bool_(True), path, q, states)
        if t == SSD:
            for k in range(r, m):
                p = 2 * path[k]
                if (res[p] & 4) != 0:
                    _count_ssd_write(S, p)
            for qq in states:
                if (res[qq] & 4) != 0:
                    _count_ssd_write(S, qq)
        if H.has_on_insert(S):
            H.on_insert(S, path, r, states)
    elif m:
        skipped = (m - r) * fab
        for k in pos:
            skipped += _psize(S, 2 * path[k - 1] + 1)
    if M[M_AQN] > 0:
        _drain_writes(S)          # after on_insert, as NodeSim._insert_new
    R[j, R_H] = h
    R[j, R_R] = r
    R[j, R_M] = m
    R[j, R_N_HBM] = n_hbm
    R[j, R_N_DRAM] = n_dram
    R[j, R_N_SSD] = n_ssd
    R[j, R_Q_TIER] = q_tier
    R[j, R_DRAM_B] = dram_b
    R[j, R_SSD_B] = ssd_b
    R[j, R_SKIPPED] = skipped
    R[j, R_WR] = M[M_WR]
    for t in range(3):
        R[j, R_USED0 + t] = M[M_USED0 + t]
        R[j, R_LEFT0 + t] = M[M_LEFT0 + t]
    R[j, R_LEFTN2] = M[M_LEFTN2]
    K = S.K
    R[j, R_ADM] = K[K_ADM_FA] + K[K_ADM_STATE]
    R[j, R_ADM_HIT] = K[K_ADM_HIT_FA] + K[K_ADM_HIT_STATE]


@njit(cache=True)
def replay(S, offsets, idx, counted, arrival, j0, R):
    """Requests ``idx[j0:]`` (trace request ids; paths ``flat[offsets[i]:offsets[i+1]]``, arrival
    times ``arrival[i]``), one row of ``R`` each. Returns the index of the first request not processed: ``len(idx)``, or
    earlier when a log or heap asks to grow (``M[M_GROW]``) before a request could start.

    The state goes to the helpers as borrowed views (:mod:`cluster_sim._nrt`): every helper that
    is not inlined takes ``S``, and counting references to its ~25 arrays at each entry and exit
    cost more than the work of most calls. The caller holds ``S`` for the whole call, and no
    array of it is reallocated inside one (the wrapper grows them between calls)."""
    B = EngineState(borrow(S.M), borrow(S.K), borrow(S.res), borrow(S.stamp), borrow(S.pin), borrow(S.flags),
                    borrow(S.dcnt), borrow(S.dany), borrow(S.cred), borrow(S.cred_any), borrow(S.sb),
                    borrow(S.parent), borrow(S.depth), borrow(S.anchor), borrow(S.flat), borrow(S.log_p),
                    borrow(S.log_s), borrow(S.heap_s), borrow(S.heap_p), borrow(S.hoff), borrow(S.hcap),
                    borrow(S.hn), borrow(S.wpos), borrow(S.wfront), borrow(S.PX), borrow(S.FX), borrow(S.elog), S.rng, S.pk)
    return _replay(B, borrow(offsets), borrow(idx), borrow(counted), borrow(arrival), j0, borrow(R))


@njit(cache=True)
def _replay(S, offsets, idx, counted, arrival, j0, R):
    M = S.M
    for j in range(j0, len(idx)):
        i = idx[j]
        a = offsets[i]
        b = offsets[i + 1]
        m = b - a
        # room first (compactions and growth stay out of the hot path): the log takes this
        # request's touches; a heap at most half full gets through any request (its additions
        # are bounded by its tier's resident payloads plus the request's own, see CompiledNode)
        if M[M_LOGN] + 2 * m + 2 > len(S.log_p):
            _compact_log(S)
            if M[M_LOGN] + 2 * m + 2 > len(S.log_p) or 2 * M[M_LOGN] > len(S.log_p):
                M[M_GROW] |= GROW_LOG
        for t in range(3):
            if 2 * S.hn[t] > S.hcap[t]:
                _heap_compact(S, t)
                if 4 * S.hn[t] > S.hcap[t]:
                    M[M_GROW] |= 2 << t
        H.before_request(S, j, i, m, arrival, R)
        if M[M_LOG_OUT] != 0 and M[M_OUTN] + M[M_OUTROOM] > M[M_CAP_OUT]:
            M[M_GROW] |= GROW_OUT
        if 2 * M[M_AQMAX] > M[M_CAP_AQ]:
            M[M_GROW] |= GROW_AQ
        if M[M_FTL] != 0 or M[M_KEV] != 0:
            # the rows one request may log. The FTL's: its writes (each a copy leaving HBM or DRAM, of
            # those there now or of the request's own, at most 2 m + 2 payloads entering) and its trims
            # (of the SSD's copies now, or written in it); a router's: the chunks it stores (of its path)
            # and those that lose their last copy (of the copies there now or entering)
            fast = M[M_ENTN0] - M[M_LEFTN0] + M[M_ENTN0 + 1] - M[M_LEFTN0 + 1] + 4 * m + 8
            ssd = M[M_ENTN0 + 2] - M[M_LEFTN0 + 2]
            room = (ssd + 4 * fast if M[M_FTL] != 0 else 0) + (ssd + fast + m if M[M_KEV] != 0 else 0)
            M[M_EV_ROOM] = room
            if M[M_EVN] + room > len(S.elog):
                M[M_GROW] |= GROW_EV
        if M[M_GROW] != 0:
            return j
        _step(S, S.flat[a:b], 1 if counted[j] else 0, R, j, arrival[i])
    return len(idx)


@njit(cache=True)
def finish_ssd(S):
    """Close the run: SSD copies still resident count as hit iff they served a reuse."""
    hit_fa = 0
    hit_state = 0
    # the arrays bound once: a field read inside the loop counts a reference in and out per read
    # (decision 141), which made this loop 12 ns per payload
    res, flags = borrow(S.res), borrow(S.flags)
    for p in range(len(res)):
        if (res[p] & 4) != 0:
            f = flags[p]
            if (f & F_ADM) != 0 and (f & F_HIT) != 0:
                if p & 1:
                    hit_state += 1
                else:
                    hit_fa += 1
            flags[p] = f & ~np.uint8(F_ADM)
    S.K[K_ADM_HIT_FA] += hit_fa
    S.K[K_ADM_HIT_STATE] += hit_state
