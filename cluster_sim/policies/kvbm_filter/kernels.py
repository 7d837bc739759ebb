"""kvbm_filter's compiled hooks (cluster_sim.engine.hooks): LRU everywhere (the engine's walks), the
DRAM victims down the gated walk, admitted iff their chunk's count reached policy.threshold; the
counts doubled per referencing request and decayed lazily (the KvbmFilterPolicy docstring)."""
import numpy as np
from numba import njit

from ...engine._jit import GATE
from .layout import FX_DECAY, FX_NEXT, FX_NOW, M_KV_D, M_KV_LIVE, M_KV_MAX, M_KV_THRESH, M_L_KV, M_O_KV, PK_KV_PRUNES

COUNT_CAP = np.int64(1) << np.int64(60)


@njit(cache=True, inline="always")
def tick(S, now):
    S.FX[FX_NOW] = now
    while now >= S.FX[FX_NEXT]:
        S.M[M_KV_D] += 1
        S.FX[FX_NEXT] += S.FX[FX_DECAY]


@njit(cache=True)
def _oversize(S):
    """Every count falls by 1 until at most max_entries chunks hold one (upstream's prune)."""
    M = S.M
    o = M[M_O_KV]
    n = M[M_L_KV]
    D = M[M_KV_D]
    v = S.PX[o:o + n] - D
    live = np.sort(v[v > 0])
    mx = M[M_KV_MAX]
    if len(live) > mx:
        k = live[len(live) - 1 - mx]
        M[M_KV_D] = D + k
        S.FX[FX_NEXT] = S.FX[FX_NOW] + S.FX[FX_DECAY]      # the clock restarts (tokio's interval.reset)
        S.K[PK_KV_PRUNES] += 1
        M[M_KV_LIVE] = np.count_nonzero(live > k)
    else:
        M[M_KV_LIVE] = len(live)


@njit(cache=True, inline="always")
def on_access(S, path, h, r, q):
    M = S.M
    o = M[M_O_KV]
    D = M[M_KV_D]
    new = 0
    for k in range(len(path)):
        x = o + path[k]
        v = S.PX[x] - D
        if v <= 0:
            v = 1
            new += 1
        else:
            v = min(2 * v, COUNT_CAP)
        S.PX[x] = D + v
    M[M_KV_LIVE] += new
    if M[M_KV_LIVE] > M[M_KV_MAX]:
        _oversize(S)


@njit(cache=True, inline="always")
def action(S, t):
    return GATE


@njit(cache=True, inline="always")
def admit(S, t, p):
    return S.PX[S.M[M_O_KV] + (p >> 1)] - S.M[M_KV_D] >= S.M[M_KV_THRESH]
