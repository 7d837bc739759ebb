"""The one constrained victim walk (pins, leaf-first, chain credits, prefix closure, atomic undo, the shortfall) and the victims' actions.

Part of the compiled engine (:mod:`cluster_sim.engine._jit`, whose docstring describes the state ``S``)."""
from __future__ import annotations

import heapq

import numpy as np
from numba import njit

from . import hooks as H
from .layout import (
    DECIDE,
    DEMOTE,
    DRAM,
    DROP,
    FORCED,
    F_WCH,
    F_WSK,
    GATE,
    GATE_FORCE,
    HBM,
    M_CAP1,
    M_CAP2,
    M_KEYED,
    M_LOGN,
    M_O_W,
    M_SEQ,
    M_SHORT,
    PK_DROPPED,
    PK_DROPPED_B,
    PK_FORCED_B,
    PK_FORCED_N,
    PK_ON_SSD,
    PK_SSD_VICTIMS,
    PK_WRITTEN,
    PK_WRITTEN_B,
    SSD,
    _bit,
    _psize,
)
from .queue import (
    _heap_push,
    _pop_log,
)
from .residency import (
    _nearest_in_tier_a,
)


@njit(cache=True, inline="always")
def _chain_credit(S, t, c, bit, drop_last, credited, credited_any):
    """A victim FA ``c`` of tier ``t`` (its parent exists) is chosen: its parent is credited with its
    whole resident subtree when its last copy goes (prefix closure), and its nearest ancestor in the
    tier with its whole tier-subtree (leaf-first); ``Tentative.choose``. Returns that ancestor (-1:
    none). The credited chunks are listed once each, to be cleared by :func:`_clear_credits`."""
    return _chain_credit_a(S.res, S.parent, S.anchor, S.depth, S.flat, S.dcnt, S.dany, S.cred, S.cred_any, t, c,
                           bit, drop_last, credited, credited_any)


@njit(cache=True, inline="always")
def _chain_credit_a(res, parent, anchor, depth, flat, dcnt, dany, cred, cred_any, t, c, bit, drop_last, credited,
                    credited_any):
    """:func:`_chain_credit` on the arrays (see :func:`_heap_pop_a`)."""
    par = parent[c]
    if drop_last:
        if cred_any[par] == 0:
            credited_any.append(par)
        cred_any[par] += 1 + dany[c]
    y = par if (res[2 * par] & bit) != 0 else _nearest_in_tier_a(res, anchor, depth, flat, c, bit)
    if y >= 0:
        if cred[y] == 0:
            credited.append(y)
        cred[y] += 1 + dcnt[t, c]
    return y


@njit(cache=True, inline="always")
def _clear_credits(S, credited, credited_any):
    """The chain credits are zero again (between walks)."""
    for x in credited:
        S.cred[x] = 0
    for x in credited_any:
        S.cred_any[x] = 0


@njit(cache=True)
def _tally_gated(S, t, vict, acts):
    """``VictimTally.add`` of a gated selection (before it is carried out)."""
    if t != DRAM:
        S.K[PK_SSD_VICTIMS] += len(vict)
        return
    for i in range(len(vict)):
        p = vict[i]
        sz = _psize(S, p)
        if acts[i] != DROP and S.M[M_CAP2] > 0:
            if (S.res[p] & 4) != 0:
                S.K[PK_ON_SSD] += 1
            elif acts[i] == FORCED:
                S.K[PK_FORCED_N] += 1
                S.K[PK_FORCED_B] += sz
            else:
                S.K[PK_WRITTEN] += 1
                S.K[PK_WRITTEN_B] += sz
        else:
            S.K[PK_DROPPED] += 1
            S.K[PK_DROPPED_B] += sz


@njit(cache=True, inline="always")
def _action(S, t):
    """The policy's action for victims of tier ``t`` (the admission rule of a demotion)."""
    M = S.M
    if t == HBM:
        return DEMOTE if (M[M_CAP1] > 0 or M[M_CAP2] > 0) else DROP
    return H.action(S, t)


@njit(cache=True, inline="always")
def default_action(S, t):
    """The action of a policy that does not choose one: DRAM victims go down to the SSD when there
    is one; the SSD's are dropped."""
    if t == DRAM and S.M[M_CAP2] > 0:
        return DEMOTE
    return DROP


@njit(cache=True)
def _walk(S, t, need, action, out, acts):
    """The constrained victim walk: candidates of tier ``t`` in key order, skipping pinned
    payloads, FA copies with descendants left in the tier (leaf-first; the chain credits of
    the victims already chosen count as gone) and last copies whose chunk has resident
    descendants (prefix closure); stops once ``need`` bytes are chosen. Appends the victims to
    ``out`` and returns True; or, atomically, returns False with nothing chosen (the queue as
    it was) and the shortfall in ``M[M_SHORT]``. Each victim's action goes to ``acts``.

    ``action``: DROP or DEMOTE (every victim); DECIDE (``lru_select(action=callable,
    drop_fallback=DEMOTE)``): the policy's :func:`_decide` per victim, and a victim it would drop
    whose last copy may not go (prefix closure) is demoted instead of passed over; GATE or
    GATE_FORCE (the interpreted ``gated_select``): in DRAM with an SSD a victim is demoted when it
    has a valid SSD copy or the policy admits it (:func:`_admit`), else dropped.

    The gated walk is the one extension of the walk (its semantics differ from lru_select's, so
    they are flags here rather than a second walk): a candidate the policy defers
    (:func:`_defer`) is considered only once the queue is exhausted, in the order seen; a
    candidate skipped for descendants (leaf-first, or prefix closure) waits on its chunk
    (``wkey``) and is retried, before the next queue entry, as soon as a chosen victim credits
    that chunk; a rejected DRAM candidate whose drop would break prefix closure is demoted
    anyway (FORCED) when a descendant lives on the SSD, or with GATE_FORCE (the second pass
    the DRAM cascade runs when the strict one fails), and waits otherwise."""
    bit = _bit(t)
    gated = action >= GATE
    force = action == GATE_FORCE
    gate = gated and t == DRAM and S.M[M_CAP2] > 0
    dropping_all = action == DROP or t == SSD
    seq = S.M[M_SEQ]
    res, pin, dcnt, dany, flags = S.res, S.pin, S.dcnt, S.dany, S.flags
    cred, cred_any, parent, PX = S.cred, S.cred_any, S.parent, S.PX
    ow = S.M[M_O_W]           # wkey[c] = PX[ow + c]: the key of chunk c's FA waiting for descendants (-1: none)
    keyed = t != HBM and S.M[M_KEYED] != 0
    stamp, log_p, log_s, wpos, wfront, hn = S.stamp, S.log_p, S.log_s, S.wpos, S.wfront, S.hn
    heap_s, heap_p, anchor, depth, flat, M = S.heap_s, S.heap_p, S.anchor, S.depth, S.flat, S.M
    ho = S.hoff[t]
    skip_s = [np.int64(0) for _ in range(0)]
    skip_p = [np.int64(0) for _ in range(0)]
    take_s = [np.int64(0) for _ in range(0)]
    credited = [np.int64(0) for _ in range(0)]
    credited_any = [np.int64(0) for _ in range(0)]
    waited = [np.int64(0) for _ in range(0)]
    ready = [(np.int64(0), np.int64(0)) for _ in range(0)]
    later_s = [np.int64(0) for _ in range(0)]
    later_p = [np.int64(0) for _ in range(0)]
    li = 0
    phase = 0
    freed = 0
    prev = -1
    start = len(out)
    while freed < need:
        if len(ready):
            s, p = heapq.heappop(ready)
        else:
            s = np.int64(-1)
            p = np.int64(-1)
            if phase == 0:
                if keyed:
                    s, p = H.pop(S, t)
                else:
                    s, p = _pop_log(M[M_LOGN], stamp, res, log_p, log_s, wpos, wfront, hn, ho, heap_s, heap_p, t)
                if p < 0:
                    if not gated:
                        break
                    phase = 1
                elif not gated:
                    if p == prev:
                        continue    # a duplicate entry of the candidate just seen: same verdict
                    prev = p
            if p < 0:
                if li >= len(later_p):
                    break
                s = later_s[li]
                p = later_p[li]
                li += 1
        if gated:
            if (flags[p] & (F_WCH | F_WSK)) != 0:
                continue            # gated_select: `p in chosen or p in skipped`, a duplicate entry
        if pin[p] == seq:
            if gated:
                flags[p] |= F_WSK
            skip_s.append(s)
            skip_p.append(p)
            continue
        if gated and phase == 0 and H.defer(S, t, p):
            later_s.append(s)
            later_p.append(p)
            continue
        r = res[p]
        c = p >> 1
        d = 0
        if (p & 1) == 0:
            d = dcnt[t, c]
            if d != 0 and d != cred[c]:
                if gated:
                    PX[ow + c] = s
                    waited.append(c)
                    flags[p] |= F_WSK
                else:
                    skip_s.append(s)
                    skip_p.append(p)
                continue
        a = action
        if action == DECIDE:
            a = H.decide(S, t, p)
        elif gated:
            a = DEMOTE if gate and ((r & 4) != 0 or H.admit(S, t, p)) else DROP
        if (p & 1) == 0:
            drop_last = (dropping_all or a == DROP) and r == bit
            if drop_last:
                da = dany[c]
                if da != 0 and da != cred_any[c]:
                    if action == DECIDE:
                        a = DEMOTE          # drop_fallback: the victims stay exactly LRU's
                    elif gate and (force or dcnt[SSD, c] != 0):
                        a = FORCED          # an admitted descendant on the SSD needs this prefix
                    elif gated:
                        PX[ow + c] = s
                        waited.append(c)
                        flags[p] |= F_WSK
                        continue
                    else:
                        skip_s.append(s)
                        skip_p.append(p)
                        continue
                    drop_last = False
            par = parent[c]
            if par >= 0:
                # credit the nearest ancestor in the tier with this chunk's whole tier-subtree
                y = par if (res[2 * par] & bit) != 0 else _nearest_in_tier_a(res, anchor, depth, flat, c, bit)
                if y >= 0:
                    if cred[y] == 0:
                        credited.append(y)
                    cred[y] += 1 + d
                    if gated and PX[ow + y] >= 0:
                        heapq.heappush(ready, (PX[ow + y], 2 * y))
                        PX[ow + y] = -1
                        flags[2 * y] &= ~np.uint8(F_WSK)
                if drop_last:
                    if cred_any[par] == 0:
                        credited_any.append(par)
                    cred_any[par] += 1 + dany[c]
                    if gated and PX[ow + par] >= 0:
                        heapq.heappush(ready, (PX[ow + par], 2 * par))
                        PX[ow + par] = -1
                        flags[2 * par] &= ~np.uint8(F_WSK)
        take_s.append(s)
        out.append(p)
        acts.append(a)
        if gated:
            flags[p] |= F_WCH
        freed += _psize(S, p)
    for y in credited:
        cred[y] = 0
    for y in credited_any:
        cred_any[y] = 0
    if gated:
        clear = ~np.uint8(F_WCH | F_WSK)
        for i in range(start, len(out)):
            flags[out[i]] &= clear
        for x in skip_p:
            flags[x] &= clear
        for c in waited:
            flags[2 * c] &= clear
        # what still waits, what was made ready but not reached, what was deferred and not reached
        for c in waited:
            if PX[ow + c] >= 0:
                skip_s.append(PX[ow + c])
                skip_p.append(2 * c)
                PX[ow + c] = -1
        for e in ready:
            skip_s.append(e[0])
            skip_p.append(e[1])
        for i in range(li, len(later_p)):
            skip_s.append(later_s[i])
            skip_p.append(later_p[i])
    if freed < need:
        for i in range(len(take_s)):
            _heap_push(S, t, take_s[i], out[start + i])
        for i in range(len(skip_s)):
            _heap_push(S, t, skip_s[i], skip_p[i])
        while len(out) > start:
            out.pop()
            acts.pop()
        S.M[M_SHORT] = need - freed
        return False
    for i in range(len(skip_s)):
        _heap_push(S, t, skip_s[i], skip_p[i])
    return True


H.provide(walk=_walk, default_action=default_action, DEMOTE=DEMOTE)   # the hooks' defaults
