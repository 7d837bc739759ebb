"""dynamic_random's compiled hooks and kernels (CacheLib Navy's DynamicRandomAP): a gated walk whose
admission draws against a probability that a control loop sets from the SSD's write budget each
window."""
import numpy as np
from numba import njit

from ...engine._jit import (
    DRAM,
    DROP,
    GATE,
    M_CAP2,
    M_FX_CAP,
    M_LO,
    M_GROW,
    M_O_A,
    M_USED0,
    M_USED1,
    SSD,
    _psize,
)
from .layout import (
    DAY,
    FX_BITLEN_BASE,
    FX_CW,
    FX_DECAY,
    FX_FACTOR,
    FX_FMAX,
    FX_FMIN,
    FX_INTERVAL,
    FX_LAST,
    FX_MAXRATE,
    FX_RNEED,
    FX_ROBS,
    FX_START,
    FX_TARGET,
    FX_UB,
    F_DRC,
    GROW_DR,
    M_CAP_DEC,
    M_DR_ND,
    M_DR_ROOM,
    M_DR_SEL,
    M_DR_STARTED,
    M_DR_U0,
    M_DR_UI,
    M_DR_UN,
    M_O_DEC,
    PK_DR_ADM,
    PK_DR_ADM_B,
    PK_DR_REJ,
    PK_DR_REJ_B,
    PK_DR_UPDATES,
    PK_DR_WRITTEN,
    PK_DR_WRITTEN_LAST,
)


@njit(cache=True)
def _dr_tick(S, now):
    """``DynamicRandomPolicy.tick``: the start, then the control loop every update interval."""
    M, FX, K = S.M, S.FX, S.K
    if M[M_DR_STARTED] == 0:
        M[M_DR_STARTED] = 1
        FX[FX_START] = now
        FX[FX_LAST] = now
        return
    if now - FX[FX_LAST] < FX[FX_INTERVAL]:
        return
    dt = now - FX[FX_LAST]
    FX[FX_LAST] = now
    diff = K[PK_DR_WRITTEN] - K[PK_DR_WRITTEN_LAST]
    if diff <= 0 or dt <= 0:
        return
    K[PK_DR_UPDATES] += 1
    r_obs = diff / dt
    FX[FX_ROBS] = r_obs
    tomorrow = FX[FX_TARGET] * (now - FX[FX_START] + DAY)
    need = max(0.0, tomorrow - K[PK_DR_WRITTEN]) / DAY
    if FX[FX_MAXRATE] != 0.0 and need > FX[FX_MAXRATE]:
        need = FX[FX_MAXRATE]
    FX[FX_RNEED] = need
    lo = 1.0 - FX[FX_CW]
    hi = 1.0 + FX[FX_CW]
    change = min(max(need / r_obs, lo), hi)
    FX[FX_FACTOR] = min(max(FX[FX_FACTOR] * change, FX[FX_FMIN]), FX[FX_FMAX])
    K[PK_DR_WRITTEN_LAST] = K[PK_DR_WRITTEN]


@njit(cache=True, inline="always")
def _bitlen(x):
    n = 0
    while x > 0:
        n += 1
        x >>= 1
    return n


@njit(cache=True)
def _dr_probability(S, size, commits):
    """``DynamicRandomPolicy.probability``."""
    FX = S.FX
    base = 1.0
    if FX[FX_DECAY] != 0.0:
        base = (FX[FX_BITLEN_BASE] / max(1, _bitlen(size))) ** FX[FX_DECAY]
    P = min(1.0, max(0.0, base * FX[FX_FACTOR]))
    if commits > 1 and P < 1.0:
        P = P / (P + commits * (1.0 - P))
    return P


@njit(cache=True)
def _dr_commitment(S, p):
    """``DynamicRandomPolicy.commitment``: ``p`` and, for an FA chunk, its ancestors below the
    deepest one with an SSD copy or an SSD descendant."""
    if p & 1:
        return 1
    c = p >> 1
    n = S.depth[c] - 1                     # ancestors: flat[anchor[c] : anchor[c] + n], root first
    a = S.anchor[c]
    for i in range(n - 1, -1, -1):
        y = S.flat[a + i]
        if (S.res[2 * y] & 4) != 0 or S.dcnt[SSD, y] > 0:
            return n - i
    return 1 + n


@njit(cache=True)
def _dr_draw(S):
    """The node's next draw (``ctx.rng.random(1024)`` blocks, as the reference buffers them)."""
    M, FX = S.M, S.FX
    i = M[M_DR_UI]
    n = M[M_DR_UN]
    if i >= n:
        if FX_UB + n + 1024 > M[M_FX_CAP]:    # room is kept before each request (replay)
            raise RuntimeError("cluster_sim engine: dynamic_random's draw buffer is full")
        FX[FX_UB + n:FX_UB + n + 1024] = S.rng.random(1024)
        M[M_DR_UN] = n + 1024
    M[M_DR_UI] = i + 1
    return FX[FX_UB + i]


@njit(cache=True)
def _dr_admit(S, p):
    """``DynamicRandomPolicy._admit``: one decision, logged for the selection's accounting."""
    prob = _dr_probability(S, _psize(S, p), _dr_commitment(S, p))
    ok = prob >= 1.0 or _dr_draw(S) < prob
    M = S.M
    n = M[M_DR_ND]
    if n >= M[M_CAP_DEC]:
        raise RuntimeError("cluster_sim engine: dynamic_random's decision log is full")
    S.PX[M[M_O_DEC] + n] = 2 * p + (1 if ok else 0)
    M[M_DR_ND] = n + 1
    return ok


@njit(cache=True)
def _dr_begin(S):
    """A DRAM selection starts: the draws consumed long ago are let go (the reference trims its
    buffer past 4096), and this is where a failed selection gives its draws back to."""
    M, FX = S.M, S.FX
    ui = M[M_DR_UI]
    if ui > 4096:
        n = M[M_DR_UN] - ui
        FX[FX_UB:FX_UB + n] = FX[FX_UB + ui:FX_UB + ui + n].copy()
        M[M_DR_UN] = n
        M[M_DR_UI] = 0
    M[M_DR_U0] = M[M_DR_UI]
    M[M_DR_ND] = 0


@njit(cache=True)
def _dr_end(S, ok, vict, acts):
    """A DRAM selection ended: a failed one changes nothing (its draws go back); a chosen victim
    counts its last decision as admitted or rejected, and a demotion without an SSD copy adds its
    bytes to what the control loop has written."""
    M, K = S.M, S.K
    if not ok:
        M[M_DR_UI] = M[M_DR_U0]
        return
    if M[M_CAP2] <= 0:
        return
    M[M_DR_SEL] += 1
    sel = M[M_DR_SEL]
    oa = M[M_O_A]
    od = M[M_O_DEC]
    flags = S.flags
    for p in vict:
        flags[p] |= F_DRC
    for i in range(M[M_DR_ND] - 1, -1, -1):          # the last decision on a payload is the one used
        x = S.PX[od + i]
        p = x >> 1
        if (flags[p] & F_DRC) == 0 or S.PX[oa + p] == sel:
            continue
        S.PX[oa + p] = sel
        sz = _psize(S, p)
        if x & 1:
            K[PK_DR_ADM] += 1
            K[PK_DR_ADM_B] += sz
        else:
            K[PK_DR_REJ] += 1
            K[PK_DR_REJ_B] += sz
    clear = ~np.uint8(F_DRC)
    for i in range(len(vict)):
        p = vict[i]
        flags[p] &= clear
        if acts[i] != DROP and (S.res[p] & 4) == 0:
            K[PK_DR_WRITTEN] += _psize(S, p)


# ---------------------------------------------------------------------------- the engine's hooks


@njit(cache=True, inline="always")
def tick(S, now):
    _dr_tick(S, now)


@njit(cache=True, inline="always")
def before_request(S, j, i, m, arrival, R):
    # a selection's draws and decisions: at most 4 per candidate (every payload in DRAM or
    # HBM, and this request's), the buffer at most 5119 draws at a selection's start
    M = S.M
    room = 4 * ((M[M_USED0] + M[M_USED1]) // M[M_LO] + 2 * m + 2) + 64
    M[M_DR_ROOM] = room
    if M[M_FX_CAP] < FX_UB + 6144 + room or M[M_CAP_DEC] < room:
        M[M_GROW] |= GROW_DR


@njit(cache=True, inline="always")
def action(S, t):
    return GATE


@njit(cache=True, inline="always")
def admit(S, t, p):
    return _dr_admit(S, p)


@njit(cache=True, inline="always")
def select_begin(S, t):
    if t == DRAM:
        _dr_begin(S)


@njit(cache=True, inline="always")
def select_end(S, t, ok, vict, acts):
    if t == DRAM:
        _dr_end(S, ok, vict, acts)
