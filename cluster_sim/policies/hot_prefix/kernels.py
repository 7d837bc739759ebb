"""hot_prefix's compiled hooks (cluster_sim.engine.hooks): heat as a reference count without
decay, kept in PX at M_O_A (heat) and M_O_B (the request that last referenced a payload); the DRAM
victims go down a gated walk that admits a payload whose heat reached ceil(F) (M_THRESH)."""
from numba import njit

from ...engine._jit import (
    GATE,
    M_O_A,
    M_O_B,
    M_SEQ,
    M_THRESH,
    inserted_payload,
)


@njit(cache=True, inline="always")
def on_access(S, path, h, r, q):
    # a payload (re)created by this request starts from zero heat; every payload gets one
    oa = S.M[M_O_A]
    ob = S.M[M_O_B]
    seq = S.M[M_SEQ]
    n = len(path) + (1 if q >= 0 else 0)
    for k in range(n):
        p = 2 * path[k] if k < len(path) else q
        if S.res[p] == 0:
            S.PX[oa + p] = 0
        S.PX[oa + p] += 1
        S.PX[ob + p] = seq


@njit(cache=True)
def on_insert(S, path, r, states):
    seq = S.M[M_SEQ]
    for k in range(len(path) - r + len(states)):
        p = inserted_payload(path, r, states, k)
        if S.res[p] != 0:
            ob = S.M[M_O_B] + p
            if S.PX[ob] != seq:          # a STATE created by this request: heat from zero, one reference
                S.PX[S.M[M_O_A] + p] = 1
                S.PX[ob] = seq


@njit(cache=True, inline="always")
def action(S, t):
    return GATE


@njit(cache=True, inline="always")
def admit(S, t, p):
    """heat >= F, i.e. a reference count >= ceil(F)."""
    return S.PX[S.M[M_O_A] + p] >= S.M[M_THRESH]
