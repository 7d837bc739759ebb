"""oracle's compiled hooks and kernels (Belady by next use, hindsight): its DRAM and SSD queues are
heaps keyed by next use (then size and payload), kept in the tier's heap arrays; its own walk
chooses the victims and their actions; a Fenwick tree over next uses holds the SSD's bytes by
next use (its admission test)."""
import numpy as np
from numba import njit

from ...engine._jit import (
    DECIDE,
    DEMOTE,
    DRAM,
    DROP,
    HBM,
    M_CAP0,
    M_CAP2,
    M_LO,
    M_GROW,
    M_NFUT,
    M_O_A,
    M_O_B,
    M_O_FNFA,
    M_O_FNST,
    M_O_FOFF,
    M_O_G,
    M_O_NFA,
    M_O_NST,
    M_SEQ,
    M_SHORT,
    M_USED0,
    M_USED1,
    M_USED2,
    SSD,
    _bit,
    _chain_credit,
    _clear_credits,
    _heap_compact,
    _heap_pop,
    _heap_push,
    _heap_rebuild,
    _next_use,
    _psize,
)
from .layout import (
    F_HELD,
    M_OR_FARANK,
    M_OR_FTOT,
    M_OR_NSZ,
    M_OR_SPATH,
    M_O_FEN,
    M_O_FK,
    M_O_SU,
    M_O_SZR,
    PK_OR_FAILED,
    PK_OR_FORCED,
    PK_OR_NEVER,
    PK_OR_NO_ROOM,
    PK_OR_OTHER,
    PK_OR_SSD_EV,
    PK_OR_SSD_NEVER,
    PK_OR_WRITTEN,
)


@njit(cache=True)
def _fen_add(S, i, v):
    """The Fenwick tree of SSD bytes by next use: ``v`` more bytes at next use ``i`` (0..N)."""
    M = S.M
    M[M_OR_FTOT] += v
    o = M[M_O_FEN]
    n = M[M_NFUT] + 1
    i += 1
    while i <= n:
        S.PX[o + i] += v
        i += i & -i


@njit(cache=True)
def _fen_prefix(S, i):
    """SSD bytes filed at next uses <= ``i``."""
    o = S.M[M_O_FEN]
    s = 0
    i += 1
    while i > 0:
        s += S.PX[o + i]
        i -= i & -i
    return s


@njit(cache=True, inline="always")
def _or_slot(S, t, p):
    return S.M[M_O_A if t == DRAM else M_O_B] + p


@njit(cache=True, inline="always")
def _or_key(S, p):
    """The heap key of ``p`` now (the reference's (-next use, -size) as one int64)."""
    M = S.M
    rk = S.PX[M[M_O_SZR] + S.depth[p >> 1]] if p & 1 else M[M_OR_FARANK]
    return (M[M_NFUT] - _next_use(S, p)) * M[M_OR_NSZ] + rk


@njit(cache=True, inline="always")
def _or_push(S, t, p, s):
    """``heaps[t].push(p, ...)`` with key ``s``: ``p`` is (again) in the queue, with this key."""
    S.PX[_or_slot(S, t, p)] = s
    _heap_push(S, t, s, p)


@njit(cache=True)
def _or_pop(S, t):
    """``heaps[t].pop()``: the least valid entry (key, payload), which leaves the queue; (-1, -1)."""
    while S.hn[t] > 0:
        s, p = _heap_pop(S, t)
        o = _or_slot(S, t, p)
        if S.PX[o] == s:
            S.PX[o] = -1
            return s, p
    return np.int64(-1), np.int64(-1)


@njit(cache=True)
def _or_heap_compact(S, t, o, n):
    """Keep the valid entries of tier ``t``'s queue, once each, sorted by (key, payload)."""
    keep = np.empty(n, dtype=np.bool_)
    for i in range(n):
        keep[i] = S.PX[_or_slot(S, t, S.heap_p[o + i])] == S.heap_s[o + i]
    _heap_rebuild(S, t, o, n, keep)


@njit(cache=True)
def _or_enter(S, t, p):
    """``OraclePolicy.on_enter``: STATEs and leaf FA copies are candidates; SSD bytes are filed."""
    if t == HBM:
        return
    if (p & 1) != 0 or S.dcnt[t, p >> 1] == 0:
        _or_push(S, t, p, _or_key(S, p))
    if t == SSD:
        k = _next_use(S, p)
        _fen_add(S, k, _psize(S, p))
        S.PX[S.M[M_O_FK] + p] = k


@njit(cache=True)
def _or_leave(S, t, p):
    """``OraclePolicy.on_leave``."""
    if t == HBM:
        return
    S.PX[_or_slot(S, t, p)] = -1
    if t == SSD:
        o = S.M[M_O_FK] + p
        k = S.PX[o]
        if k >= 0:
            _fen_add(S, k, -_psize(S, p))
            S.PX[o] = -1


@njit(cache=True)
def _or_leaf(S, t, c):
    """Chunk ``c``'s FA left tier ``t`` (the counts updated): ``CacheState._leaf_events`` climbs to
    the nearest ancestor in ``t`` while no descendant is left there, and ``on_leaf`` makes a
    resident leaf a candidate again."""
    if t == HBM:
        return
    bit = _bit(t)
    a = S.anchor[c]
    for i in range(a + S.depth[c] - 2, a - 1, -1):
        y = S.flat[i]
        if S.dcnt[t, y] != 0:
            return
        if (S.res[2 * y] & bit) != 0:
            _or_push(S, t, 2 * y, _or_key(S, 2 * y))
            return


@njit(cache=True)
def _or_rekey(S, p):
    """``OraclePolicy._rekey`` of one payload (resident in DRAM or the SSD) after its next use moved."""
    r = S.res[p]
    if (r & 2) != 0 and S.PX[_or_slot(S, DRAM, p)] >= 0:
        _or_push(S, DRAM, p, _or_key(S, p))
    if (r & 4) != 0:
        if S.PX[_or_slot(S, SSD, p)] >= 0:
            _or_push(S, SSD, p, _or_key(S, p))
        k = _next_use(S, p)
        o = S.M[M_O_FK] + p
        old = S.PX[o]
        if old != k:
            sz = _psize(S, p)
            if old >= 0:
                _fen_add(S, old, -sz)
            _fen_add(S, k, sz)
            S.PX[o] = k


@njit(cache=True)
def _or_access(S, path, r):
    """``OraclePolicy.on_access``: guard the resident path; the next uses of the path's FA and of
    the STATE the request uses move to their following use; re-key what is resident."""
    M = S.M
    PX = S.PX
    res = S.res
    seq = M[M_SEQ]
    og = M[M_O_G]
    for k in range(r):
        PX[og + path[k]] = seq
    j = seq - 1
    a = PX[M[M_O_FOFF] + j]
    onfa = M[M_O_NFA]
    ofa = M[M_O_FNFA] + a
    for k in range(len(path)):
        PX[onfa + path[k]] = PX[ofa + k]
    for k in range(len(path)):
        p = 2 * path[k]
        if (res[p] & 6) != 0:
            _or_rekey(S, p)
    onst = M[M_O_NST]
    if M[M_OR_SPATH] != 0:
        ost = M[M_O_FNST] + a
        for k in range(len(path)):
            PX[onst + path[k]] = PX[ost + k]
        for k in range(len(path)):
            q = 2 * path[k] + 1
            if (res[q] & 6) != 0:
                _or_rekey(S, q)
        return
    u = PX[M[M_O_SU] + j]
    if u >= 0:
        PX[onst + u] = PX[M[M_O_FNST] + j]
        q = 2 * u + 1
        if (res[q] & 6) != 0:
            _or_rekey(S, q)


@njit(cache=True)
def _or_walk(S, t, need, out, acts):
    """``OraclePolicy.select_victims`` of tier ``t`` (DRAM or SSD): Belady within the residency
    rules, with the SSD admission of DRAM victims by the Fenwick tree (see policies.oracle). Its
    walk is its own, not :func:`_walk`: a pinned candidate (or, on the SSD, one that may not go)
    is held and comes back when a victim credits it; a DRAM victim that may only be written is
    written only once nothing else frees the bytes (``forced_writes``). Appends the victims and
    their actions; or, atomically, returns False with nothing chosen and the shortfall in
    ``M[M_SHORT]``. Chain credits as in :func:`_walk` (zero between walks)."""
    M = S.M
    bit = _bit(t)
    seq = M[M_SEQ]
    res, pin, dcnt, dany, flags = S.res, S.pin, S.dcnt, S.dany, S.flags
    cred, cred_any, parent, PX = S.cred, S.cred_any, S.parent, S.PX
    INF = M[M_NFUT]
    nsz = M[M_OR_NSZ]
    og = M[M_O_G]
    ssd_on = M[M_CAP2] > 0
    held_s = [np.int64(0) for _ in range(0)]
    held_p = [np.int64(0) for _ in range(0)]
    take_s = [np.int64(0) for _ in range(0)]
    forced_s = [np.int64(0) for _ in range(0)]
    forced_p = [np.int64(0) for _ in range(0)]
    credited = [np.int64(0) for _ in range(0)]
    credited_any = [np.int64(0) for _ in range(0)]
    n = np.zeros(8, dtype=np.int64)     # this call's counts, PK_OR_WRITTEN.. order (kept on success)
    fi = 0
    freed = 0
    admitted = 0
    start = len(out)
    ok = True
    while freed < need:
        s, p = _or_pop(S, t)
        last_resort = False
        if p < 0:
            if fi < len(forced_p):          # nothing else can free the bytes: write them after all
                s = forced_s[fi]
                p = forced_p[fi]
                fi += 1
                last_resort = True
            else:
                ok = False
                break
        if pin[p] == seq:
            if (flags[p] & F_HELD) == 0:
                flags[p] |= F_HELD
                held_s.append(s)
                held_p.append(p)
            continue
        fa = (p & 1) == 0
        c = p >> 1
        if fa:
            d = dcnt[t, c]
            if d != 0 and d != cred[c]:
                continue        # not a leaf of the tier: it comes back (on_leaf, or below) once it is one
        r = res[p]
        last = r == bit
        droppable = True
        if fa and last:
            da = dany[c]
            droppable = ((da == 0 or da == cred_any[c]) and not (res[p | 1] != 0 and pin[p | 1] == seq)
                         and PX[og + c] != seq)
        nu = INF - s // nsz
        sz = _psize(S, p)
        a = DROP
        why = 0
        if t == SSD:
            if not droppable:
                if (flags[p] & F_HELD) == 0:
                    flags[p] |= F_HELD
                    held_s.append(s)
                    held_p.append(p)
                continue
            why = PK_OR_SSD_EV
        elif (r & 5) != 0:                  # a valid SSD copy, or an HBM copy that comes back later
            why = PK_OR_OTHER
        elif nu >= INF or not ssd_on:
            if droppable:
                why = PK_OR_NEVER
            elif not ssd_on:
                if (flags[p] & F_HELD) == 0:
                    flags[p] |= F_HELD
                    held_s.append(s)
                    held_p.append(p)
                continue
            elif last_resort:
                a = DEMOTE
                why = PK_OR_FORCED
            else:
                forced_s.append(s)
                forced_p.append(p)
                continue
        else:
            room = M[M_CAP2] - M[M_USED2] - admitted + (M[M_OR_FTOT] - _fen_prefix(S, nu))
            if room >= sz:
                a = DEMOTE
                why = PK_OR_WRITTEN
            elif droppable:
                why = PK_OR_NO_ROOM
            elif last_resort:
                a = DEMOTE
                why = PK_OR_FORCED
            else:
                forced_s.append(s)
                forced_p.append(p)
                continue
        if a == DEMOTE:
            admitted += sz
        take_s.append(s)
        out.append(p)
        acts.append(a)
        freed += sz
        n[why - PK_OR_WRITTEN] += 1
        if t == SSD and nu >= INF:
            n[PK_OR_SSD_NEVER - PK_OR_WRITTEN] += 1
        if fa:
            par = parent[c]
            if par >= 0:
                y = _chain_credit(S, t, c, bit, last and (a == DROP or t == SSD), credited, credited_any)
                # its parent (prefix closure) and nearest ancestor in the tier (leaf-first) may now leave
                for k in range(2):
                    x = par if k == 0 else y
                    if x < 0 or (k == 1 and x == par):
                        continue
                    f = 2 * x
                    if (flags[f] & F_HELD) != 0:
                        flags[f] &= ~np.uint8(F_HELD)
                        _or_push(S, t, f, _or_key(S, f))
                    elif ((res[f] & bit) != 0 and (dcnt[t, x] == 0 or dcnt[t, x] == cred[x])
                          and PX[_or_slot(S, t, f)] < 0):
                        _or_push(S, t, f, _or_key(S, f))    # a leaf now, counting this call's victims
    _clear_credits(S, credited, credited_any)
    for i in range(len(held_p)):
        x = held_p[i]
        if (flags[x] & F_HELD) != 0:
            flags[x] &= ~np.uint8(F_HELD)
            _or_push(S, t, x, held_s[i])
    for i in range(fi, len(forced_p)):
        _or_push(S, t, forced_p[i], forced_s[i])
    if not ok:
        for i in range(len(take_s)):
            _or_push(S, t, out[start + i], take_s[i])
        while len(out) > start:
            out.pop()
            acts.pop()
        S.K[PK_OR_FAILED] += 1
        M[M_SHORT] = need - freed
        return False
    for i in range(8):
        S.K[PK_OR_WRITTEN + i] += n[i]
    return True


# ---------------------------------------------------------------------------- the engine's hooks


@njit(cache=True, inline="always")
def before_request(S, j, i, m, arrival, R):
    # its queues gain, within one request, an entry per payload that enters or re-keys and
    # per leaf event and victim: at most four per resident payload and path chunk
    M = S.M
    room = 4 * ((M[M_USED0] + M[M_USED1] + M[M_USED2]) // M[M_LO] + 3 * m + 4) + 64
    for t in range(1, 3):
        if M[M_CAP0 + t] > 0 and S.hn[t] + room > S.hcap[t]:
            _heap_compact(S, t)
            if S.hn[t] + room > S.hcap[t] or 4 * S.hn[t] > S.hcap[t]:
                M[M_GROW] |= 2 << t


@njit(cache=True, inline="always")
def on_access(S, path, h, r, q):
    _or_access(S, path, r)


@njit(cache=True, inline="always")
def enter(S, t, p):
    _or_enter(S, t, p)


@njit(cache=True, inline="always")
def leave(S, t, p):
    _or_leave(S, t, p)


@njit(cache=True, inline="always")
def leaf(S, t, c, gone):
    _or_leaf(S, t, c)


@njit(cache=True, inline="always")
def action(S, t):
    return DECIDE       # per-victim actions (its own walk, _or_walk, decides them)


@njit(cache=True, inline="always")
def select(S, t, need, act, vict, acts):
    return _or_walk(S, t, need, vict, acts)


@njit(cache=True, inline="always")
def compact_heap(S, t, o, n):
    if t != HBM:
        _or_heap_compact(S, t, o, n)
        return True
    return False
