"""Gandalf with placement=strict, compiled: the paper's attention-type-aware rule alone (FA copies
go down to the SSD, STATE copies stay off it; an FA copy entering DRAM without an SSD copy asks for
its write), LRU order."""
from numba import njit

from ...engine._jit import (
    DECIDE,
    DEMOTE,
    DRAM,
    DROP,
    M_CAP2,
    M_O_G,
    _request_write,
    inserted_payload,
)
from .layout import (
    PK_G_DROPS_FA,
    PK_G_DROPS_STATE,
    PK_G_MOVES_FA,
    PK_G_MOVES_FREE,
    PK_G_MOVES_STATE,
    PK_G_NCKPT,
    PK_G_NDEM,
    PK_G_NDEM2,
    PK_G_SSD_EV,
)


@njit(cache=True)
def _gs_access(S, path):
    """``on_access``'s STATE demand: the deepest chunk of ``path`` at which a checkpoint was ever created."""
    og = S.M[M_O_G]
    for k in range(len(path) - 1, -1, -1):
        o = og + path[k]
        d = S.PX[o]
        if d >= 0:
            S.PX[o] = d + 1
            if d == 0:
                S.K[PK_G_NDEM] += 1
            elif d == 1:
                S.K[PK_G_NDEM2] += 1
            return


@njit(cache=True)
def _gs_tally(S, vict, acts):
    """``GandalfPolicy._count`` of each victim of a DRAM selection (before it is carried out)."""
    for i in range(len(vict)):
        p = vict[i]
        st = (p & 1) != 0
        if acts[i] == DROP:
            S.K[PK_G_DROPS_STATE if st else PK_G_DROPS_FA] += 1
        else:
            S.K[PK_G_MOVES_STATE if st else PK_G_MOVES_FA] += 1
            if (S.res[p] & 4) != 0:
                S.K[PK_G_MOVES_FREE] += 1


# ---------------------------------------------------------------------------- the engine's hooks


@njit(cache=True, inline="always")
def on_access(S, path, h, r, q):
    _gs_access(S, path)


@njit(cache=True)
def on_insert(S, path, r, states):
    for k in range(len(path) - r + len(states)):
        p = inserted_payload(path, r, states, k)
        if S.res[p] != 0 and (p & 1) != 0:
            o = S.M[M_O_G] + (p >> 1)
            if S.PX[o] < 0:          # the first checkpoint ever created at this chunk
                S.PX[o] = 0
                S.K[PK_G_NCKPT] += 1


@njit(cache=True, inline="always")
def enter(S, t, p):
    # an FA copy entering DRAM without an SSD copy asks for its write (states never go to the SSD)
    if t == DRAM and (p & 1) == 0 and S.M[M_CAP2] > 0 and (S.res[p] & 4) == 0:
        _request_write(S, p)


@njit(cache=True, inline="always")
def action(S, t):
    # lru_select(action=callable) without a fallback: DRAM victims by kind (decide) when there is
    # an SSD; every other victim is dropped
    return DECIDE if t == DRAM and S.M[M_CAP2] > 0 else DROP


@njit(cache=True, inline="always")
def decide(S, t, p):
    return DROP if (p & 1) != 0 else DEMOTE      # states stay off the SSD; FA go down to it


@njit(cache=True, inline="always")
def dram_victims(S, vict, acts):
    _gs_tally(S, vict, acts)


@njit(cache=True, inline="always")
def ssd_victims(S, vict):
    S.K[PK_G_SSD_EV] += len(vict)
