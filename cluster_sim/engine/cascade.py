"""The overflow cascade: HBM -> DRAM -> SSD demotions, the undo of a demotion the lower tier could not absorb, queued SSD writes, and trimming a request's own payloads deepest first.

Part of the compiled engine (:mod:`cluster_sim.engine._jit`, whose docstring describes the state ``S``)."""
from __future__ import annotations

import numpy as np
from numba import njit

from . import hooks as H
from .layout import (
    DECIDE,
    DEMOTE,
    DRAM,
    DROP,
    GATE,
    GATE_FORCE,
    HBM,
    K_DRAM_DEMOTED,
    K_DRAM_DROPPED,
    M_AQMAX,
    M_AQN,
    M_CAP0,
    M_CAP1,
    M_CAP2,
    M_FAB,
    M_O_AQ,
    M_SHORT,
    M_USED0,
    M_USED1,
    M_USED2,
    NO_TIER,
    SSD,
    _bit,
    _psize,
)
from .residency import (
    _add_copy,
    _add_many,
    _count_ssd_write,
    _count_ssd_write_a,
    _remove,
    _remove_many,
)
from .walk import (
    _action,
    _tally_gated,
    _walk,
)


@njit(cache=True)
def _move_down(S, vict, t, dest, isnew):
    """Demotion, first half: the victims enter ``dest`` (SSD writes counted) and leave ``t``."""
    dbit = _bit(dest)
    for p in vict:
        nw = (S.res[p] & dbit) == 0
        isnew.append(nw)
    if dest == SSD:
        M, K, flags, sb, depth, elog = S.M, S.K, S.flags, S.sb, S.depth, S.elog
        for i in range(len(vict)):
            if isnew[i]:
                _count_ssd_write_a(M, K, flags, sb, depth, elog, vict[i])
    new = [np.int64(0) for _ in range(0)]
    for i in range(len(vict)):
        if isnew[i]:
            new.append(vict[i])
    if len(new):
        _add_many(S, dest, new)
    _remove_many(S, t, vict, True)


@njit(cache=True)
def _undo_move(S, vict, t, dest, isnew):
    """Demotion failed below: what ``dest`` still holds goes back to ``t``; the new copies in
    ``dest`` are removed (a payload ``dest`` dropped is gone for good)."""
    dbit = _bit(dest)
    back = [np.int64(0) for _ in range(0)]
    bnew = [False for _ in range(0)]
    for i in range(len(vict)):
        p = vict[i]
        if (S.res[p] & dbit) != 0:
            back.append(p)
            bnew.append(isnew[i])
    if len(back):
        _add_many(S, t, back)
    for i in range(len(back)):
        if bnew[i]:
            _remove(S, dest, back[i], True)


@njit(cache=True, inline="always")
def _drop_all(S, t, vict):
    _remove_many(S, t, vict, True)


@njit(cache=True)
def _room_ssd(S, need):
    for _ in range(64):
        if need <= 0:
            return True
        S.M[M_SHORT] = -1
        vict = [np.int64(0) for _ in range(0)]
        acts = [np.int64(0) for _ in range(0)]
        act = _action(S, SSD)
        ok = H.select(S, np.int64(SSD), need, act, vict, acts)
        if act == GATE:
            _tally_gated(S, np.int64(SSD), vict, acts)
        if not ok:
            return False
        H.ssd_victims(S, vict)
        before = S.M[M_USED2]
        _drop_all(S, np.int64(SSD), vict)
        need -= before - S.M[M_USED2]
    return need <= 0


@njit(cache=True)
def _demote_to_ssd(S, vict, t):
    isnew = [False for _ in range(0)]
    _move_down(S, vict, t, np.int64(SSD), isnew)
    if S.M[M_USED2] > S.M[M_CAP2] and not _room_ssd(S, S.M[M_USED2] - S.M[M_CAP2]):
        _undo_move(S, vict, t, np.int64(SSD), isnew)
        return False
    return True


@njit(cache=True)
def _room_dram(S, need):
    act = _action(S, DRAM)
    for _ in range(64):
        if need <= 0:
            return True
        S.M[M_SHORT] = -1
        vict = [np.int64(0) for _ in range(0)]
        acts = [np.int64(0) for _ in range(0)]
        H.select_begin(S, np.int64(DRAM))
        ok = H.select(S, np.int64(DRAM), need, act, vict, acts)
        if not ok and act == GATE and S.M[M_CAP2] > 0:
            ok = _walk(S, np.int64(DRAM), need, np.int64(GATE_FORCE), vict, acts)   # select_gated's forced pass
        if act == GATE:
            _tally_gated(S, np.int64(DRAM), vict, acts)
        H.select_end(S, np.int64(DRAM), ok, vict, acts)
        if not ok:
            return False
        H.dram_victims(S, vict, acts)
        before = S.M[M_USED1]
        if act == DECIDE or act == GATE:
            # per-victim actions: the demotions first, then the drops still in DRAM (NodeSim._make_room)
            dem = [np.int64(0) for _ in range(0)]
            drp = [np.int64(0) for _ in range(0)]
            for i in range(len(vict)):
                if acts[i] != DROP and S.M[M_CAP2] > 0:
                    dem.append(vict[i])
                else:
                    drp.append(vict[i])
            if len(dem) and not _demote_to_ssd(S, dem, np.int64(DRAM)):
                S.M[M_SHORT] = -1
                return False
            if len(drp):
                _drop_all(S, np.int64(DRAM), drp)
            need -= before - S.M[M_USED1]
            continue
        if act == DEMOTE:
            S.K[K_DRAM_DEMOTED] += len(vict)
        else:
            S.K[K_DRAM_DROPPED] += len(vict)
        if act == DEMOTE:
            if not _demote_to_ssd(S, vict, np.int64(DRAM)):
                S.M[M_SHORT] = -1
                return False
        else:
            _drop_all(S, np.int64(DRAM), vict)
        need -= before - S.M[M_USED1]
    return need <= 0


@njit(cache=True)
def _demote_to_dram(S, vict, t):
    isnew = [False for _ in range(0)]
    _move_down(S, vict, t, np.int64(DRAM), isnew)
    if S.M[M_USED1] > S.M[M_CAP1] and not _room_dram(S, S.M[M_USED1] - S.M[M_CAP1]):
        _undo_move(S, vict, t, np.int64(DRAM), isnew)
        return False
    return True


@njit(cache=True)
def _room_hbm(S, need):
    dest = DRAM if S.M[M_CAP1] > 0 else (SSD if S.M[M_CAP2] > 0 else NO_TIER)
    act = DEMOTE if dest != NO_TIER else DROP
    for _ in range(64):
        if need <= 0:
            return True
        S.M[M_SHORT] = -1
        vict = [np.int64(0) for _ in range(0)]
        acts = [np.int64(0) for _ in range(0)]
        if not _walk(S, np.int64(HBM), need, act, vict, acts):
            return False
        before = S.M[M_USED0]
        if dest == DRAM:
            ok = _demote_to_dram(S, vict, np.int64(HBM))
        elif dest == SSD:
            ok = _demote_to_ssd(S, vict, np.int64(HBM))
        else:
            _drop_all(S, np.int64(HBM), vict)
            ok = True
        if not ok:
            S.M[M_SHORT] = -1
            return False
        need -= before - S.M[M_USED0]
    return need <= 0


@njit(cache=True, inline="always")
def _make_room(S, t, need):
    if t == HBM:
        return _room_hbm(S, need)
    if t == DRAM:
        return _room_dram(S, need)
    return _room_ssd(S, need)


@njit(cache=True)
def _drain_writes(S):
    """``NodeSim._drain_admissions``: the SSD writes asked for, in order (room is made on the SSD
    first; a payload already on the SSD, or no longer resident, is skipped)."""
    M = S.M
    while M[M_AQN] > 0:
        n = M[M_AQN]
        if n > M[M_AQMAX]:
            M[M_AQMAX] = n
        ps = S.PX[M[M_O_AQ]:M[M_O_AQ] + n].copy()
        M[M_AQN] = 0
        if M[M_CAP2] <= 0:
            continue
        for p in ps:
            r = S.res[p]
            if r == 0 or (r & 4) != 0:
                continue
            need = M[M_USED2] + _psize(S, p) - M[M_CAP2]
            if need > 0:
                M[M_SHORT] = -1
                if not _room_ssd(S, need):
                    continue
            if S.res[p] == 0:
                continue
            _count_ssd_write(S, p)
            _add_copy(S, np.int64(SSD), p)


@njit(cache=True, inline="always")
def _pinned_bytes(S, t, path, q, states):
    """Bytes of the request's own payloads (its path, the hit STATE, its new STATEs) in tier ``t``."""
    bit = _bit(t)
    total = 0
    for c in path:
        if (S.res[2 * c] & bit) != 0:
            total += S.M[M_FAB]
    if q >= 0 and (S.res[q] & bit) != 0:
        total += _psize(S, q)
    for x in states:
        if (S.res[x] & bit) != 0:
            total += _psize(S, x)
    return total


@njit(cache=True)
def _resolve_or_trim(S, t, order, count_skipped, path, q, states):
    """Resolve the overflow of tier ``t``; what cannot fit is removed from the end of ``order``
    (deepest first). Returns the bytes not cached (0 unless ``count_skipped``)."""
    M = S.M
    ut = M_USED0 + t
    ct = M_CAP0 + t
    bit = _bit(t)
    skipped = 0
    bounded = False
    while M[ut] > M[ct]:
        if not bounded:
            bounded = True
            pinned = _pinned_bytes(S, t, path, q, states)
            if pinned > M[ct]:
                while len(order) and pinned > M[ct]:
                    p = order.pop()
                    if (S.res[p] & bit) != 0:
                        d = _remove(S, t, p, False)
                        pinned -= d
                        skipped += d
                continue
        M[M_SHORT] = -1
        if _make_room(S, t, M[ut] - M[ct]):
            break
        if len(order) == 0:
            raise RuntimeError("cluster_sim engine: tier over capacity with nothing left to trim")
        short = M[M_SHORT] if M[M_SHORT] > 0 else 1
        n_fa = 0
        for x in order:
            if (x & 1) == 0:
                n_fa += 1
        first = True
        while len(order) and (short > 0 or first):
            p = order[len(order) - 1]
            if (p & 1) == 0 and n_fa == 1 and not first:
                break
            order.pop()
            first = False
            if (p & 1) == 0:
                n_fa -= 1
            if (S.res[p] & bit) != 0:
                d = _remove(S, t, p, False)
                skipped += d
                short -= d
            if (p & 1) == 0 and n_fa == 0:
                break
    return skipped if count_skipped else 0
