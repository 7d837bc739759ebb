"""``marconi`` on the compiled engine (docs/decisions.md 143): its residency events, candidate sets and
selection (:class:`cluster_sim.policies.marconi.MarconiPolicy` and its ``_Selection``) on flat arrays.

The engine calls these kernels (through marconi's hooks, :mod:`.kernels`) where the interpreted node calls the policy: ``mc_enter`` /
``mc_leave`` / ``mc_leaf`` at the residency events, ``mc_tick`` and ``mc_access`` per request, ``mc_walk``
at the DRAM and SSD selections. They take arrays, not the engine's state (decision 141), so this module
does not import the engine.

**Identity.** The reference keeps, per tier, the candidates (nodes with at most one child) of the tier in
two lazy heaps and two pools re-keyed at every selection. Its keys are exact when a selection starts
(checked on every test stream: the candidates in its heaps and pools are exactly ``is_cand`` of the
current state, their efficiency keys exactly ``eff``, its pools exactly the ``k`` smallest by (recency,
payload) and by (efficiency, payload)), and its heaps give, while a selection borrows from them, the next
candidates in that order. So the sample of a selection is a function of the cache's state, and here it is
computed as one: a dense candidate list per tier, kept by the reference's own dirty-chunk rules (the events
mark chunks, a flush re-evaluates them), with the efficiency key stored at the flush as the reference stores
it; a selection takes the ``k`` smallest of each order and, to extend, the next ``k`` of each.

PX (int64, this policy's only segment array) starts with a header (``H_*``), then the segments whose
offsets the header holds (``O_*``), narrow (decision 149): ids, positions, counts and request numbers as
int32 (read through ``PX.view(np.int32)``, the offset an index of that view), flags as uint8 (through
``PX.view(np.uint8)``, ``MARK`` and ``CHOSEN``). A flag is cleared by the code that reads its list, so no
generation stamps are kept. FX (float64) holds alpha, the bootstrap multiplier, the FLOP parameters
(``_marconi_jit``'s ``P``) and the efficiency keys.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..._nrt import seg_view
from .. import _marconi_jit as MJ

HBM, DRAM, SSD = 0, 1, 2
DROP, DEMOTE = 0, 1
# the engine's meta slots, counters and flags this module writes (_jit asserts they are its own)
M_FAB, M_USED0, M_LEFT0, M_LEFTN0 = 10, 3, 17, 20
K_ADM_HIT_FA, K_ADM_HIT_STATE = 4, 5
F_ADM, F_HIT = 1, 2

# header
(H_K, H_SSDON, H_HAS, H_BUG, H_AUTO, H_TUNED, H_R0, H_NSEEN, H_CT, H_WIN, H_NMLP, H_LSB, H_SWAKV, H_U,
 H_NC1, H_NC2, H_ND1, H_ND2, H_NE1, H_NE2, H_CNT1, H_CNT2, H_NT, H_TEV) = range(24)
H_C0 = 32
# counters (MarconiPolicy.c order)
COUNTER_NAMES = tuple(f"{tn}_{k}" for tn in ("dram", "ssd")
                      for k in ("select_calls", "leaf_evictions", "edge_chunks_evicted", "state_only_evictions",
                                "stateless_leaf_evictions", "candidates_scored", "failed_selects")) + (
    "dram_fa_demoted", "dram_fa_dropped", "dram_states_dropped", "sample_extensions", "state_transitions")
(C_SELECT, C_LEAF, C_EDGE, C_STATE_ONLY, C_STATELESS, C_SCORED, C_FAILED) = range(7)   # + 7 for the SSD
C_FA_DEMOTED, C_FA_DROPPED, C_STATES_DROPPED, C_EXTENSIONS, C_TRANSITIONS = range(14, 19)
H_O = 64
# int32 segments, then uint8 ones (INT32_SEGMENTS of them are int32)
SEGMENTS = ("NCH", "GUARD", "CPOS", "CLIST", "DLIST", "ELIST", "TLIST", "KS", "KO", "TCH", "ROW", "MARK", "CHOSEN")
INT32_SEGMENTS = 11
(O_NCH, O_GUARD, O_CPOS, O_CLIST, O_DLIST, O_ELIST, O_TLIST, O_KS, O_KO, O_TCH, O_ROW, O_MARK,
 O_CHOSEN) = range(H_O, H_O + len(SEGMENTS))
N_HEADER = H_O + len(SEGMENTS) + 1
# MARK's bits: per tier and chunk (row t - 1) in the tier's dirty / dirty_enter list; per chunk (row 0) in
# the transitions list, and the two marks of one _expand_transitions
B_DIRTY, B_ENTER, B_TRANS, B_OUT, B_EXP = 1, 2, 4, 8, 16
# floats
F_ALPHA, F_BOOT = 0, 1
F_P = 2
F_EKEY = F_P + MJ.N_P


def segment_lengths(U: int) -> dict:
    """The length of each segment for ``U`` chunks (per tier: DRAM first, then the SSD)."""
    return {"NCH": 2 * U, "GUARD": U, "CPOS": 4 * U, "CLIST": 4 * U, "DLIST": 2 * U, "ELIST": 2 * U, "TLIST": U,
            "KS": U + 1, "KO": max(U, 1), "TCH": U, "ROW": 2 * U, "MARK": 2 * U, "CHOSEN": 2 * U}


def layout(U: int) -> tuple[dict, int]:
    """Each segment's offset (an index of PX's int32 view, or of its uint8 view) and PX's length."""
    lens = segment_lengths(U)
    offs = {}
    o = 2 * N_HEADER
    for name in SEGMENTS[:INT32_SEGMENTS]:
        offs[name] = o
        o += lens[name]
    o *= 4
    for name in SEGMENTS[INT32_SEGMENTS:]:
        offs[name] = o
        o += lens[name]
    return offs, (o + 7) // 8


# ---------------------------------------------------------------------------- small helpers
@njit(cache=True, inline="always")
def _bit(t):
    return np.uint8(1 << t)


@njit(cache=True, inline="always")
def _psize(fab, sb, depth, p):
    return sb[depth[p >> 1]] if p & 1 else fab


@njit(cache=True, inline="always")
def _i32(PX):
    return seg_view(PX, 0, 8 * len(PX), np.int32)       # (a borrowed view: PX.view's, without its calls)


@njit(cache=True, inline="always")
def _u8(PX):
    return seg_view(PX, 0, 8 * len(PX), np.uint8)


@njit(cache=True, inline="always")
def _mark(PX, t, c, b, o_list, h_n):
    """Append ``c`` to tier ``t``'s list at ``o_list`` (its length at ``PX[h_n + t - 1]``), counted as the
    reference's list grows (``H_CNT1``) and listed once per flush (MARK's bit ``b``, cleared by the flush)."""
    i = t - 1
    PX[H_CNT1 + i] += 1
    U = PX[H_U]
    PB = _u8(PX)
    o = PX[O_MARK] + i * U + c
    if (PB[o] & b) == 0:
        PB[o] |= np.uint8(b)
        _i32(PX)[PX[o_list] + i * U + PX[h_n + i]] = c
        PX[h_n + i] += 1


@njit(cache=True)
def _dirty(PX, t, c):
    """``dirty[t].append(c)``."""
    _mark(PX, t, c, B_DIRTY, O_DLIST, H_ND1)


@njit(cache=True)
def _dirty_enter(PX, t, c):
    """``dirty_enter[t].append(c)``."""
    _mark(PX, t, c, B_ENTER, O_ELIST, H_NE1)


@njit(cache=True)
def _transition(PX, c):
    """``transitions.append(c)``: a STATE appeared (first copy) or vanished (last copy) at chunk ``c``."""
    PX[H_TEV] += 1
    PB = _u8(PX)
    o = PX[O_MARK] + c
    if (PB[o] & B_TRANS) == 0:
        PB[o] |= np.uint8(B_TRANS)
        _i32(PX)[PX[O_TLIST] + PX[H_NT]] = c
        PX[H_NT] += 1


# ---------------------------------------------------------------------------- residency events
@njit(cache=True)
def mc_enter(PX, res, parent, t, p):
    """``MarconiPolicy.on_enter(t, p)`` (after the residency bits)."""
    c = p >> 1
    if p & 1:
        if res[p] == _bit(t):
            _transition(PX, c)
        if t != HBM:
            _dirty(PX, t, c)
    elif t != HBM:
        par = parent[c]
        if par >= 0:
            _i32(PX)[PX[O_NCH] + (t - 1) * PX[H_U] + par] += 1
        _dirty_enter(PX, t, c)


@njit(cache=True)
def mc_leave(PX, rem, parent, t, p):
    """``MarconiPolicy.on_leave(t, p)``; ``rem``: ``p``'s residency bits as the reference's event sees
    them (a STATE leaving with its FA's last copy: cleared tier by tier by ``remove_copy``, all at once
    after the events by ``remove_copies``)."""
    c = p >> 1
    if p & 1:
        if rem == 0:
            _transition(PX, c)
        if t != HBM:
            _dirty(PX, t, c)
    elif t != HBM:
        par = parent[c]
        _dirty(PX, t, c)
        if par >= 0:
            _i32(PX)[PX[O_NCH] + (t - 1) * PX[H_U] + par] -= 1
            _dirty(PX, t, par)


@njit(cache=True)
def mc_enter_many(PX, res, parent, t, ps):
    """:func:`mc_enter` of each payload of ``ps``, in order."""
    for p in ps:
        mc_enter(PX, res, parent, t, p)


@njit(cache=True, inline="always")
def _close_ssd(K, flags, p):
    """``_jit._close_ssd`` on the arrays."""
    f = flags[p]
    if (f & F_ADM) != 0 and (f & F_HIT) != 0:
        if p & 1:
            K[K_ADM_HIT_STATE] += 1
        else:
            K[K_ADM_HIT_FA] += 1
    flags[p] = 0


@njit(cache=True)
def mc_remove_many(M, K, PX, res, flags, sb, depth, parent, t, ps, close, cs, lost):
    """``_jit._remove_many``'s removals (``_remove_bits`` of each payload, its events for marconi), on the
    arrays: the batch's STATEs first, then its FAs (``remove_copies``' event order, see mc_leave). Appends
    the removed FA chunks to ``cs`` and whether each lost its last copy to ``lost``."""
    bit = _bit(t)
    fab = M[M_FAB]
    for k2 in range(2):
        for p in ps:
            if (p & 1) == k2:
                continue
            r = res[p]
            if (r & bit) == 0:
                continue
            now = r & ~bit
            res[p] = now
            sz = _psize(fab, sb, depth, p)
            M[M_USED0 + t] -= sz
            M[M_LEFT0 + t] += sz
            M[M_LEFTN0 + t] += 1
            mc_leave(PX, now, parent, t, p)
            if t == SSD and close:
                _close_ssd(K, flags, p)
            if p & 1:
                continue
            cs.append(p >> 1)
            lost.append(now == 0)
            if now == 0:
                q = p | 1
                sr = res[q]
                if sr != 0:
                    qs = _psize(fab, sb, depth, q)
                    for tt in range(3):
                        if (sr & _bit(tt)) != 0:
                            M[M_USED0 + tt] -= qs
                            M[M_LEFT0 + tt] += qs
                            M[M_LEFTN0 + tt] += 1
                            mc_leave(PX, sr, parent, tt, q)
                            if tt == SSD and close:
                                _close_ssd(K, flags, q)
                    res[q] = 0


@njit(cache=True)
def mc_leaf(PX, res, dcnt, anchor, depth, flat, t, c):
    """``CacheState._leaf_events`` after chunk ``c``'s FA left tier ``t`` (counts updated): ``on_leaf``
    of its nearest ancestor in ``t`` when no descendant is left there."""
    if t == HBM:
        return
    bit = _bit(t)
    a = anchor[c]
    for i in range(a + depth[c] - 2, a - 1, -1):
        y = flat[i]
        if dcnt[t, y] != 0:
            return
        if (res[2 * y] & bit) != 0:
            _dirty(PX, t, y)
            return


@njit(cache=True)
def mc_access(PX, path, r, seq):
    """``on_access``: the resident path is guarded for the request; one more request seen."""
    og = PX[O_GUARD]
    PI = _i32(PX)
    for k in range(r):
        PI[og + path[k]] = seq
    PX[H_NSEEN] += 1


@njit(cache=True)
def mc_tune_due(PX, FX):
    """``tick``'s tuning condition: alpha=auto, not tuned yet, R0 known and ``bootstrap_multiplier * R0``
    requests seen."""
    return (PX[H_AUTO] != 0 and PX[H_TUNED] < 0 and PX[H_R0] >= 0
            and float(PX[H_NSEEN]) >= FX[F_BOOT] * float(PX[H_R0]))


# ---------------------------------------------------------------------------- candidates and keys
@njit(cache=True, inline="always")
def _nearest(res, anchor, depth, flat, c, bit):
    a = anchor[c]
    for i in range(a + depth[c] - 2, a - 1, -1):
        y = flat[i]
        if (res[2 * y] & bit) != 0:
            return y
    return -1


@njit(cache=True)
def _is_cand(PX, res, dcnt, t, x):
    bit = _bit(t)
    if (res[x] & bit) == 0:
        return False
    c = x >> 1
    if (x & 1) == 0:
        return dcnt[t, c] == 0
    if _i32(PX)[PX[O_NCH] + (t - 1) * PX[H_U] + c] > 1:
        return False
    return not ((res[x - 1] & bit) != 0 and dcnt[t, c] == 0)


@njit(cache=True, inline="always")
def _flop_eff(PX, FX, lp, d):
    return MJ.eff(lp, d, FX[F_P:F_P + MJ.N_P], PX[H_CT], PX[H_WIN], PX[H_NMLP], PX[H_LSB], PX[H_SWAKV],
                  PX[H_BUG] != 0, PX[H_HAS] != 0)


@njit(cache=True)
def _eff(PX, FX, res, parent, depth, x, gone):
    """``MarconiPolicy.eff(x, gone)[0]`` (``gone``: the chunks whose STATE this selection chose, i.e. whose
    STATE is marked in CHOSEN; False: none)."""
    c = x >> 1
    d = depth[c]
    if PX[H_HAS] == 0:
        return _flop_eff(PX, FX, d - 1, d)
    PB = _u8(PX)
    och = PX[O_CHOSEN]
    if (x & 1) == 0 and (res[x | 1] == 0 or (gone and PB[och + 2 * c + 1] != 0)):
        return 0.0
    a = parent[c]
    while a >= 0 and (res[2 * a + 1] == 0 or (gone and PB[och + 2 * a + 1] != 0)):
        a = parent[a]
    return _flop_eff(PX, FX, depth[a] if a >= 0 else 0, d)


@njit(cache=True, inline="always")
def _tlast(res, stamp, t, x):
    s = stamp[x]
    if (x & 1) == 0 and (res[x | 1] & _bit(t)) != 0:
        s2 = stamp[x | 1]
        if s2 > s:
            s = s2
    return s


@njit(cache=True)
def _refresh(PX, FX, res, dcnt, parent, depth, t, x):
    """``MarconiPolicy._refresh``: ``x`` is in the tier's candidate list iff it is a candidate now,
    with its efficiency key as of now."""
    U = PX[H_U]
    i = t - 1
    PI = _i32(PX)
    cpos = PX[O_CPOS] + i * 2 * U
    cl = PX[O_CLIST] + i * 2 * U
    pos = PI[cpos + x]
    if _is_cand(PX, res, dcnt, t, x):
        if pos < 0:
            n = PX[H_NC1 + i]
            PI[cl + n] = x
            PI[cpos + x] = n
            PX[H_NC1 + i] = n + 1
        FX[F_EKEY + i * 2 * U + x] = _eff(PX, FX, res, parent, depth, x, False)
    elif pos >= 0:
        n = PX[H_NC1 + i] - 1
        last = PI[cl + n]
        PI[cl + pos] = last
        PI[cpos + last] = pos
        PI[cpos + x] = -1
        PX[H_NC1 + i] = n


@njit(cache=True)
def _expand_transitions(PX, res):
    """``MarconiPolicy._expand_transitions``: a STATE appeared or vanished at chunk a: a and the
    candidates whose edge runs through a are dirty in both tiers."""
    nt = PX[H_NT]
    if nt == 0:
        return
    PX[H_C0 + C_TRANSITIONS] += PX[H_TEV]
    PX[H_TEV] = 0
    PI = _i32(PX)
    PB = _u8(PX)
    mk, ks, ko, tl = PX[O_MARK], PX[O_KS], PX[O_KO], PX[O_TLIST]
    out = [np.int64(0) for _ in range(0)]
    seen = [np.int64(0) for _ in range(0)]
    stack = [np.int64(0) for _ in range(0)]
    for j in range(nt):
        a = np.int64(PI[tl + j])
        PB[mk + a] &= np.uint8(~B_TRANS & 0xFF)
        if (PB[mk + a] & B_OUT) == 0:
            PB[mk + a] |= np.uint8(B_OUT)
            out.append(a)
        stack.append(a)
        while len(stack):
            u = stack.pop()
            if (PB[mk + u] & B_EXP) != 0:
                continue
            PB[mk + u] |= np.uint8(B_EXP)
            seen.append(u)
            for k in range(PI[ks + u], PI[ks + u + 1]):
                v = np.int64(PI[ko + k])
                if res[2 * v] == 0:
                    continue
                if (PB[mk + v] & B_OUT) == 0:
                    PB[mk + v] |= np.uint8(B_OUT)
                    out.append(v)
                if res[2 * v + 1] == 0:
                    stack.append(v)
    PX[H_NT] = 0
    for u in seen:
        PB[mk + u] &= np.uint8(~B_EXP & 0xFF)
    for v in out:
        PB[mk + v] &= np.uint8(~B_OUT & 0xFF)
    for t in range(1, 3):
        for v in out:
            _dirty(PX, t, v)


@njit(cache=True)
def _flush(PX, FX, res, dcnt, parent, depth, anchor, flat, t):
    """``MarconiPolicy._flush(t)``: every dirty chunk's FA and STATE re-evaluated."""
    _expand_transitions(PX, res)
    i = t - 1
    U = PX[H_U]
    PI = _i32(PX)
    ne = PX[H_NE1 + i]
    el = PX[O_ELIST] + i * U
    bit = _bit(t)
    for j in range(ne):
        c = np.int64(PI[el + j])
        _dirty(PX, t, c)
        par = parent[c]
        if par >= 0:
            _dirty(PX, t, par)
            y = _nearest(res, anchor, depth, flat, c, bit)
            if y >= 0:
                _dirty(PX, t, y)
    nd = PX[H_ND1 + i]
    dl = PX[O_DLIST] + i * U
    hs = PX[H_HAS] != 0
    for j in range(nd):
        c = np.int64(PI[dl + j])
        _refresh(PX, FX, res, dcnt, parent, depth, t, 2 * c)
        if hs:
            _refresh(PX, FX, res, dcnt, parent, depth, t, 2 * c + 1)
    # the lists are emptied: their chunks' marks go
    PB = _u8(PX)
    row = PX[O_MARK] + i * U
    for j in range(ne):
        PB[row + PI[el + j]] &= np.uint8(~B_ENTER & 0xFF)
    nd = PX[H_ND1 + i]
    for j in range(nd):
        PB[row + PI[dl + j]] &= np.uint8(~B_DIRTY & 0xFF)
    PX[H_ND1 + i] = 0
    PX[H_NE1 + i] = 0
    PX[H_CNT1 + i] = 0


@njit(cache=True)
def mc_tick(PX, FX, res, dcnt, parent, depth, anchor, flat):
    """``tick``'s flush of a tier whose event lists grew past 20,000 entries."""
    for t in range(1, 3):
        if PX[H_CNT1 + t - 1] > 20000:
            _flush(PX, FX, res, dcnt, parent, depth, anchor, flat, t)


# ---------------------------------------------------------------------------- the selection
@njit(cache=True)
def _sorted_by(keys_f, keys_i, ids, use_f):
    """Indices of ``ids`` sorted by (key, id): float keys when ``use_f``, else int keys."""
    o1 = np.argsort(ids, kind="mergesort")
    if use_f:
        o2 = np.argsort(keys_f[o1], kind="mergesort")
    else:
        o2 = np.argsort(keys_i[o1], kind="mergesort")
    return o1[o2]


@njit(cache=True)
def _k_smallest(keys_f, keys_i, ids, k, use_f):
    """Indices of the ``k`` smallest of ``ids`` by (key, id) (float keys when ``use_f``, else int keys;
    ``k < len(ids)``), in no particular order: the k-th smallest key, what lies below it, and the ties at
    it by id."""
    n = len(ids)
    out = np.empty(k, dtype=np.int64)
    m = 0
    ties = [np.int64(0) for _ in range(0)]
    if use_f:
        v = np.partition(keys_f, k - 1)[k - 1]
        for j in range(n):
            if keys_f[j] < v:
                out[m] = j
                m += 1
            elif keys_f[j] == v:
                ties.append(j)
    else:
        w = np.partition(keys_i, k - 1)[k - 1]
        for j in range(n):
            if keys_i[j] < w:
                out[m] = j
                m += 1
            elif keys_i[j] == w:
                ties.append(j)
    need = k - m
    if len(ties) == need:
        for j in range(need):
            out[m + j] = ties[j]
    else:
        tj = np.array(ties)
        tid = np.empty(len(tj), dtype=np.int64)
        for j in range(len(tj)):
            tid[j] = ids[tj[j]]
        o = np.argsort(tid)
        for j in range(need):
            out[m + j] = tj[o[j]]
    return out


@njit(cache=True)
def _legal_now(PX, res, pin, dcnt, dany, cred, cred_any, t, x, seq, dropping):
    """``_Selection.legal_now``."""
    bit = _bit(t)
    PB = _u8(PX)
    PI = _i32(PX)
    och = PX[O_CHOSEN]
    if PB[och + x] != 0 or pin[x] == seq:
        return False
    if (res[x] & bit) == 0:
        return False
    c = x >> 1
    if (x & 1) == 0:
        d = dcnt[t, c]
        if d != 0 and d != cred[c]:
            return False
        q = x | 1
        if (res[q] & bit) != 0 and pin[q] == seq:
            return False
        if dropping and res[x] == bit:
            da = dany[c]
            if da != 0 and da != cred_any[c]:
                return False
            if (res[q] != 0 and pin[q] == seq) or PI[PX[O_GUARD] + c] == seq:
                return False
        return True
    if PI[PX[O_NCH] + (t - 1) * PX[H_U] + c] - PI[PX[O_TCH] + c] > 1:
        return False
    fa = x - 1
    if (res[fa] & bit) != 0 and PB[och + fa] == 0:
        d = dcnt[t, c]
        if d == 0 or d == cred[c]:
            return False
    return True


@njit(cache=True)
def _choose(res, dcnt, dany, cred, cred_any, parent, anchor, depth, flat, t, c, drop_last, credited,
            credited_any):
    """``Tentative.choose`` with the engine's chain credits (``_jit._chain_credit``)."""
    par = parent[c]
    if par < 0:
        return
    bit = _bit(t)
    if drop_last:
        if cred_any[par] == 0:
            credited_any.append(par)
        cred_any[par] += 1 + dany[c]
    y = par if (res[2 * par] & bit) != 0 else _nearest(res, anchor, depth, flat, c, bit)
    if y >= 0:
        if cred[y] == 0:
            credited.append(y)
        cred[y] += 1 + dcnt[t, c]


@njit(cache=True)
def mc_walk(PX, FX, res, stamp, pin, dcnt, dany, cred, cred_any, parent, depth, anchor, flat, sb, fab, seq,
            clock, t, need, out, acts):
    """``MarconiPolicy.select_victims(t, need)`` (DRAM or SSD). Appends the victims and their actions and
    returns (True, 0); or, with nothing appended, (False, the shortfall ``no_victims`` reports)."""
    ci = 0 if t == DRAM else 7
    PX[H_C0 + ci + C_SELECT] += 1
    _flush(PX, FX, res, dcnt, parent, depth, anchor, flat, t)
    i_t = t - 1
    U = PX[H_U]
    bit = _bit(t)
    k = PX[H_K]
    has = PX[H_HAS] != 0
    bug = PX[H_BUG] != 0
    alpha = FX[F_ALPHA]
    fa_action = DEMOTE if (t == DRAM and PX[H_SSDON] != 0) else DROP
    dropping = fa_action == DROP or t == SSD
    PI = _i32(PX)
    PB = _u8(PX)
    ochosen, otch, orow = PX[O_CHOSEN], PX[O_TCH], PX[O_ROW]
    ek0 = F_EKEY + i_t * 2 * U
    # the candidates now, and the sample
    n = PX[H_NC1 + i_t]
    cl = PX[O_CLIST] + i_t * 2 * U
    C = PI[cl:cl + n].astype(np.int64)
    ordR = np.zeros(0, dtype=np.int64)
    ordE = np.zeros(0, dtype=np.int64)
    sampled = k > 0 and n > k
    tlc = np.empty(n if sampled else 0, dtype=np.int64)
    ekc = np.empty(n if sampled else 0, dtype=np.float64)
    if sampled:
        for j in range(n):
            tlc[j] = _tlast(res, stamp, t, C[j])
            ekc[j] = FX[ek0 + C[j]]
        # the pools: the k smallest by (recency, payload) and by (efficiency, payload); the full orders
        # only when a selection extends its sample
        cand0 = np.concatenate((C[_k_smallest(ekc, tlc, C, k, np.bool_(False))],
                                C[_k_smallest(ekc, tlc, C, k, np.bool_(True))]))
    else:
        cand0 = C
    ids = [np.int64(0) for _ in range(0)]
    tl = [np.int64(0) for _ in range(0)]
    ef = [np.float64(0.0) for _ in range(0)]
    legal = [False for _ in range(0)]
    for x in cand0:
        if PI[orow + x] >= 0:
            continue
        PI[orow + x] = len(ids)
        ids.append(x)
        tl.append(_tlast(res, stamp, t, x))
        ef.append(FX[ek0 + x])
        legal.append(_legal_now(PX, res, pin, dcnt, dany, cred, cred_any, t, x, seq, dropping))
    rnext = k
    enext = k
    any_gone = False
    credited = [np.int64(0) for _ in range(0)]
    credited_any = [np.int64(0) for _ in range(0)]
    tchl = [np.int64(0) for _ in range(0)]
    start = len(out)
    cnt_leaf = 0
    cnt_edge = 0
    cnt_state = 0
    cnt_stateless = 0
    cnt_fa = 0
    cnt_st_drop = 0
    freed = 0
    credited_b = 0
    ok = True
    while freed < need or credited_b < need:
        nl = 0
        for i in range(len(legal)):
            if legal[i]:
                nl += 1
        if nl == 0:
            extended = False
            if sampled and len(ordR) == 0:
                ordR = _sorted_by(ekc, tlc, C, np.bool_(False))
                ordE = _sorted_by(ekc, tlc, C, np.bool_(True))
            if sampled:
                new = [np.int64(0) for _ in range(0)]
                for kind in range(2):
                    ordx = ordR if kind == 0 else ordE
                    pos = rnext if kind == 0 else enext
                    m = 0
                    while m < k and pos < n:
                        x = C[ordx[pos]]
                        pos += 1
                        m += 1
                        if PI[orow + x] < 0:
                            new.append(x)
                    if kind == 0:
                        rnext = pos
                    else:
                        enext = pos
                if len(new):
                    extended = True
                    for x in new:
                        if PI[orow + x] >= 0:
                            continue
                        PI[orow + x] = len(ids)
                        ids.append(x)
                        tl.append(_tlast(res, stamp, t, x))
                        e = FX[ek0 + x]
                        if any_gone:
                            e = _eff(PX, FX, res, parent, depth, x, True)
                        ef.append(e)
                        legal.append(_legal_now(PX, res, pin, dcnt, dany, cred, cred_any, t, x, seq, dropping))
            if extended:
                PX[H_C0 + C_EXTENSIONS] += 1
                continue
            ok = False
            break
        PX[H_C0 + ci + C_SCORED] += nl
        # scores: min-max recency + alpha * min-max efficiency, over the legal rows
        idx = np.empty(nl, dtype=np.int64)
        j = 0
        for i in range(len(legal)):
            if legal[i]:
                idx[j] = i
                j += 1
        rv = np.empty(nl, dtype=np.float64)
        for j in range(nl):
            rv[j] = 1.0 / float(clock - tl[idx[j]])
        lo = rv.min()
        hi = rv.max()
        score = np.empty(nl, dtype=np.float64)
        if hi == lo:
            score[:] = 1.0
        else:
            for j in range(nl):
                score[j] = (rv[j] - lo) / (hi - lo)
        if alpha != 0.0:
            ev = np.empty(nl, dtype=np.float64)
            for j in range(nl):
                ev[j] = ef[idx[j]]
            lo = ev.min()
            hi = ev.max()
            if hi == lo:
                for j in range(nl):
                    score[j] = score[j] + alpha * 1.0
            else:
                for j in range(nl):
                    score[j] = score[j] + alpha * ((ev[j] - lo) / (hi - lo))
        best = -1
        smin = score.min()
        for j in range(nl):
            if score[j] == smin:
                i = idx[j]
                if best < 0 or tl[i] < tl[best] or (tl[i] == tl[best] and ids[i] < ids[best]):
                    best = i
        x = ids[best]
        c = x >> 1
        legal[best] = False
        if (x & 1) == 0:
            q = x | 1
            with_state = (res[q] & bit) != 0 and PB[ochosen + q] == 0
            out.append(x)
            acts.append(fa_action)
            got = fab
            nv = 1
            if with_state:
                out.append(q)
                acts.append(DROP)
                got += sb[depth[c]]
                nv += 1
                PB[ochosen + q] = 1        # (a chosen STATE: its chunk's STATE is gone, for _eff)
                any_gone = True
                rq = PI[orow + q]
                if rq >= 0:
                    legal[rq] = False
            _choose(res, dcnt, dany, cred, cred_any, parent, anchor, depth, flat, t, c,
                    dropping and res[x] == bit, credited, credited_any)
            PB[ochosen + x] = 1
            top = c
            if has:
                a = parent[top]
                while a >= 0:
                    f = 2 * a
                    if ((res[f] & bit) == 0 or pin[f] == seq or PB[ochosen + f] != 0
                            or (res[f + 1] != 0 and PB[ochosen + f + 1] == 0)):
                        break
                    d = dcnt[t, a]
                    if d != 0 and d != cred[a]:
                        break
                    dl = dropping and res[f] == bit
                    if dl:
                        da = dany[a]
                        if (da != 0 and da != cred_any[a]) or PI[PX[O_GUARD] + a] == seq:
                            break
                    _choose(res, dcnt, dany, cred, cred_any, parent, anchor, depth, flat, t, a, dl, credited,
                            credited_any)
                    PB[ochosen + f] = 1
                    out.append(f)
                    acts.append(fa_action)
                    got += fab
                    nv += 1
                    rf = PI[orow + f]
                    if rf >= 0:
                        legal[rf] = False
                    cnt_edge += 1
                    top = a
                    a = parent[a]
            z = parent[top]
            if z >= 0:
                if PI[otch + z] == 0:
                    tchl.append(z)
                PI[otch + z] += 1
            freed += got
            if bug:     # quirk 2: credit the last candidate visited (scanning by payload id)
                last = -1
                for j in range(nl):
                    if ids[idx[j]] > last:
                        last = ids[idx[j]]
                got = _psize(fab, sb, depth, last)
                if (last & 1) == 0 and (res[last | 1] & bit) != 0:
                    got += sb[depth[last >> 1]]
            credited_b += got
            if with_state or not has:
                cnt_leaf += 1
            else:
                cnt_stateless += 1
            cnt_fa += nv - (1 if with_state else 0)
            cnt_st_drop += 1 if with_state else 0
            if z >= 0:
                y = _nearest(res, anchor, depth, flat, top, bit)
                w1 = z
                w2 = y if y != z else np.int64(-1)
                if w2 >= 0 and w2 < w1:
                    w1, w2 = w2, w1
                for wi in range(2):
                    w = w1 if wi == 0 else w2
                    if w < 0:
                        continue
                    for kk in range(2 if has else 1):
                        xx = 2 * w + kk
                        ri = PI[orow + xx]
                        if ri >= 0:
                            legal[ri] = _legal_now(PX, res, pin, dcnt, dany, cred, cred_any, t, xx, seq, dropping)
                        elif _legal_now(PX, res, pin, dcnt, dany, cred, cred_any, t, xx, seq, dropping):
                            PI[orow + xx] = len(ids)
                            ids.append(xx)
                            tl.append(_tlast(res, stamp, t, xx))
                            ef.append(_eff(PX, FX, res, parent, depth, xx, any_gone))
                            legal.append(True)
            if with_state:
                _rescore(PX, FX, res, parent, depth, anchor, flat, ids, ef, legal, c)
        else:
            out.append(x)
            acts.append(DROP)
            sz = sb[depth[c]]
            freed += sz
            credited_b += sz
            PB[ochosen + x] = 1
            any_gone = True
            cnt_state += 1
            cnt_st_drop += 1
            _rescore(PX, FX, res, parent, depth, anchor, flat, ids, ef, legal, c)
    # clean up: rows, chosen marks (every victim, and only they), tentative child counts, chain credits
    for x in ids:
        PI[orow + x] = -1
    for j in range(start, len(out)):
        PB[ochosen + out[j]] = 0
    for z in tchl:
        PI[otch + z] = 0
    for x in credited:
        cred[x] = 0
    for x in credited_any:
        cred_any[x] = 0
    if not ok:
        while len(out) > start:
            out.pop()
            acts.pop()
        PX[H_C0 + ci + C_FAILED] += 1
        return False, need - freed
    PX[H_C0 + ci + C_LEAF] += cnt_leaf
    PX[H_C0 + ci + C_STATELESS] += cnt_stateless
    PX[H_C0 + ci + C_EDGE] += cnt_edge
    PX[H_C0 + ci + C_STATE_ONLY] += cnt_state
    if t == DRAM:
        PX[H_C0 + (C_FA_DEMOTED if fa_action == DEMOTE else C_FA_DROPPED)] += cnt_fa
        PX[H_C0 + C_STATES_DROPPED] += cnt_st_drop
    if len(out) > start and PX[H_R0] < 0:
        PX[H_R0] = max(PX[H_NSEEN], 1)
    if len(out) == start:
        PX[H_C0 + ci + C_FAILED] += 1
    return True, np.int64(0)


@njit(cache=True)
def _rescore(PX, FX, res, parent, depth, anchor, flat, ids, ef, legal, a):
    """``_Selection._rescore``: the STATE at chunk ``a`` is going: legal rows below ``a`` whose edge
    reached it are re-scored."""
    da = depth[a]
    for i in range(len(ids)):
        if not legal[i]:
            continue
        c = ids[i] >> 1
        if depth[c] > da and flat[anchor[c] + da - 1] == a:
            ef[i] = _eff(PX, FX, res, parent, depth, ids[i], True)
