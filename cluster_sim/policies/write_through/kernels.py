"""write_through's (and write_through_selective's) compiled hooks (cluster_sim.engine.hooks): a
payload's hit count in PX at M_O_A, the request that asked for its SSD write at M_O_B; a payload in
DRAM without an SSD copy asks for its write once its count reaches the threshold (M_THRESH), and
the DRAM victims go down a gated walk that admits those whose write is still queued."""
from numba import njit

from ...engine._jit import (
    DRAM,
    GATE,
    M_CAP1,
    M_CAP2,
    M_O_A,
    M_O_B,
    M_SEQ,
    M_THRESH,
    SSD,
    _bit,
    _request_write,
)
from .layout import (
    PK_HITS_COUNTED,
)


@njit(cache=True, inline="always")
def on_access(S, path, h, r, q):
    # every reused payload's hit_count goes up; one in DRAM without an SSD copy that reaches
    # the threshold asks for its write
    n = h + (1 if q >= 0 else 0)
    oa = S.M[M_O_A]
    for k in range(n):
        p = 2 * path[k] if k < h else q
        S.PX[oa + p] += 1
    S.K[PK_HITS_COUNTED] += n
    if S.M[M_CAP2] > 0 and S.M[M_CAP1] > 0:
        thr = S.M[M_THRESH]
        for k in range(n):
            p = 2 * path[k] if k < h else q
            if S.PX[oa + p] >= thr and (S.res[p] & 6) == 2:
                _request_write(S, p)


@njit(cache=True, inline="always")
def enter(S, t, p):
    # creation sets hit_count to 1; entering DRAM without an SSD copy at the threshold asks
    # for the write; entering the SSD is that write (no longer pending)
    r = S.res[p]
    if r == _bit(t):
        S.PX[S.M[M_O_A] + p] = 1
    if t == DRAM:
        if (r & 4) == 0 and S.M[M_CAP2] > 0 and S.PX[S.M[M_O_A] + p] >= S.M[M_THRESH]:
            _request_write(S, p)
    elif t == SSD:
        S.PX[S.M[M_O_B] + p] = -1


@njit(cache=True, inline="always")
def action(S, t):
    return GATE


@njit(cache=True, inline="always")
def admit(S, t, p):
    """Its write was asked for in this request step and is still queued."""
    return S.PX[S.M[M_O_B] + p] == S.M[M_SEQ]
