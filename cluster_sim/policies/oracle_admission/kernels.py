"""oracle_admission's compiled hooks: LRU eviction, and a DRAM victim is written to the SSD unless
the node's future says its copy would go unused (never used again, or labelled unused by the last
pass); each SSD admission's outcome is logged for the next pass."""
import numpy as np
from numba import njit

from ...engine._jit import (
    DECIDE,
    DEMOTE,
    DRAM,
    DROP,
    M_CAP2,
    M_CAP_OUT,
    M_HAS_LABELS,
    M_LOG_OUT,
    M_NFUT,
    M_N_LAB,
    M_OUTN,
    M_OUT_OVERFLOW,
    M_O_A,
    M_O_FNFA,
    M_O_FNST,
    M_O_FOFF,
    M_O_LAB,
    M_O_NFA,
    M_O_NST,
    M_O_OUT,
    M_SEQ,
    SSD,
    _next_use,
)
from .layout import (
    F_OHIT,
    PK_ADMITTED,
    PK_FORCED,
    PK_NEVER_USED,
    PK_UNUSED_BEFORE,
)


@njit(cache=True, inline="always")
def _event(S, p):
    """oracle_admission: the admission event of ``p`` now, (payload, its next use) as one key."""
    return p * (S.M[M_NFUT] + 1) + _next_use(S, p)


@njit(cache=True, inline="always")
def _oracle_why_not(S, p):
    """oracle_admission's ``_why_not``: -1 (write DRAM victim ``p``: it has a valid SSD copy, or
    nothing says its copy goes unused), PK_NEVER_USED or PK_UNUSED_BEFORE."""
    if (S.res[p] & 4) != 0:
        return -1
    if _next_use(S, p) >= S.M[M_NFUT]:
        return PK_NEVER_USED
    if S.M[M_HAS_LABELS] != 0:
        # labels: sorted 2 * event + (used from the SSD); an event labelled unused is 2 * event
        k = _event(S, p)
        o = S.M[M_O_LAB]
        n = S.M[M_N_LAB]
        i = np.searchsorted(S.PX[o:o + n], 2 * k)
        if i < n and S.PX[o + i] == 2 * k:
            return PK_UNUSED_BEFORE
    return -1


@njit(cache=True)
def _tally_dram(S, vict, acts):
    """oracle_admission's counters of a DRAM selection (before it is carried out)."""
    for i in range(len(vict)):
        p = vict[i]
        if (S.res[p] & 4) != 0:
            continue
        why = _oracle_why_not(S, p)
        if acts[i] == DROP:
            S.K[why] += 1
        elif why < 0:
            S.K[PK_ADMITTED] += 1
        else:
            S.K[PK_FORCED] += 1


# ---------------------------------------------------------------------------- the engine's hooks


@njit(cache=True, inline="always")
def on_access(S, path, h, r, q):
    res = S.res
    for k in range(h):
        p = 2 * path[k]
        if (res[p] & 7) == 4:
            S.flags[p] |= F_OHIT
    if q >= 0 and (res[q] & 7) == 4:
        S.flags[q] |= F_OHIT
    M = S.M
    PX = S.PX
    a = PX[M[M_O_FOFF] + M[M_SEQ] - 1]
    ofa, ost, onfa, onst = M[M_O_FNFA] + a, M[M_O_FNST] + a, M[M_O_NFA], M[M_O_NST]
    for k in range(len(path)):
        c = path[k]
        PX[onfa + c] = PX[ofa + k]
        PX[onst + c] = PX[ost + k]


@njit(cache=True, inline="always")
def enter(S, t, p):
    if t == SSD:
        S.PX[S.M[M_O_A] + p] = _event(S, p)
        S.flags[p] &= ~np.uint8(F_OHIT)


@njit(cache=True, inline="always")
def ssd_leave(S, p):
    """The admission event's outcome goes to the log of the next pass."""
    o = S.M[M_O_A] + p
    k = S.PX[o]
    if k >= 0:
        S.PX[o] = -1
        if S.M[M_LOG_OUT] != 0:
            n = S.M[M_OUTN]
            if n == S.M[M_CAP_OUT]:
                S.M[M_OUT_OVERFLOW] = 1      # the wrapper redoes this pass with a larger log
            else:
                # (event, served from the SSD) as one number: 2 * event + served
                S.PX[S.M[M_O_OUT] + n] = 2 * k + (1 if (S.flags[p] & F_OHIT) != 0 else 0)
                S.M[M_OUTN] = n + 1


@njit(cache=True, inline="always")
def action(S, t):
    if t == DRAM and S.M[M_CAP2] > 0:
        return DECIDE
    return DROP


@njit(cache=True, inline="always")
def decide(S, t, p):
    return DEMOTE if _oracle_why_not(S, p) < 0 else DROP


@njit(cache=True, inline="always")
def dram_victims(S, vict, acts):
    if S.M[M_CAP2] > 0:          # a DECIDE selection (action): its counters
        _tally_dram(S, vict, acts)
