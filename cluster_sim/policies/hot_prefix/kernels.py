"""hot_prefix's compiled hooks (cluster_sim.engine.hooks): a payload's heat kept in PX at M_O_A and the
request that last referenced it at M_O_B; the DRAM victims go down a gated walk that admits a payload
whose heat reached F. Without decay the heat is a reference count, compared with ceil(F) (M_THRESH);
with ``policy.half_life_s`` (M_HP_DECAY) it is a float in FX, decayed as the interpreted policy does:
``heat * exp2(-(now - t_upd) / T) + 1`` on a reference, ``heat * 2 ** (-(now - t_upd) / T)`` when read
(the C library's exp2 and pow, as Python's)."""
import math

from numba import njit

from ...engine._jit import (
    GATE,
    M_O_A,
    M_O_B,
    M_SEQ,
    M_THRESH,
    inserted_payload,
)
from .layout import FX_F, FX_HEAT0, FX_NOW, FX_T, M_HP_DECAY, M_HP_TUPD


@njit(cache=True, inline="always")
def tick(S, now):
    S.FX[FX_NOW] = now


@njit(cache=True, inline="always")
def _bump(S, p):
    if S.M[M_HP_DECAY] != 0:
        now = S.FX[FX_NOW]
        x = FX_HEAT0 + p
        u = S.M[M_HP_TUPD] + p
        S.FX[x] = S.FX[x] * math.exp2(-(now - S.FX[u]) / S.FX[FX_T]) + 1.0
        S.FX[u] = now
    else:
        S.PX[S.M[M_O_A] + p] += 1


@njit(cache=True, inline="always")
def _reset(S, p):
    if S.M[M_HP_DECAY] != 0:
        S.FX[FX_HEAT0 + p] = 0.0
    else:
        S.PX[S.M[M_O_A] + p] = 0


@njit(cache=True, inline="always")
def on_access(S, path, h, r, q):
    # a payload (re)created by this request starts from zero heat; every payload gets one
    ob = S.M[M_O_B]
    seq = S.M[M_SEQ]
    n = len(path) + (1 if q >= 0 else 0)
    for k in range(n):
        p = 2 * path[k] if k < len(path) else q
        if S.res[p] == 0:
            _reset(S, p)
        _bump(S, p)
        S.PX[ob + p] = seq


@njit(cache=True)
def on_insert(S, path, r, states):
    seq = S.M[M_SEQ]
    for k in range(len(path) - r + len(states)):
        p = inserted_payload(path, r, states, k)
        if S.res[p] != 0:
            ob = S.M[M_O_B] + p
            if S.PX[ob] != seq:          # a STATE created by this request: heat from zero, one reference
                _reset(S, p)
                _bump(S, p)
                S.PX[ob] = seq


@njit(cache=True, inline="always")
def action(S, t):
    return GATE


@njit(cache=True, inline="always")
def admit(S, t, p):
    """heat >= F (without decay: a reference count >= ceil(F))."""
    if S.M[M_HP_DECAY] != 0:
        h = S.FX[FX_HEAT0 + p]
        if h != 0.0:
            h *= 2.0 ** (-(S.FX[FX_NOW] - S.FX[S.M[M_HP_TUPD] + p]) / S.FX[FX_T])
        return h >= S.FX[FX_F]
    return S.PX[S.M[M_O_A] + p] >= S.M[M_THRESH]
