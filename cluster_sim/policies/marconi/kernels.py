"""marconi's compiled hooks: its selection (engine._marconi_eng.mc_walk: FLOP-aware utility over the
radix tree's nodes) and the residency events its state follows."""
import numpy as np
from numba import njit

from ...engine._jit import (
    DECIDE,
    F_ADM,
    F_HIT,
    K_ADM_HIT_FA,
    K_ADM_HIT_STATE,
    M_CLOCK,
    M_FAB,
    M_GROW,
    M_LEFT0,
    M_LEFTN0,
    M_SEQ,
    M_SHORT,
    M_USED0,
)
from .layout import (
    GROW_MC_TUNE,
)
from . import tree as MC

#: modules of kernels these call that do not take the engine state (the build digests and caches them)
HELPERS = ("cluster_sim.policies.marconi.tree", "cluster_sim.policies._marconi_jit")

assert (MC.M_FAB, MC.M_USED0, MC.M_LEFT0, MC.M_LEFTN0, MC.K_ADM_HIT_FA, MC.K_ADM_HIT_STATE, MC.F_ADM, MC.F_HIT) == \
    (M_FAB, M_USED0, M_LEFT0, M_LEFTN0, K_ADM_HIT_FA, K_ADM_HIT_STATE, F_ADM, F_HIT), "tree.py's slots are the engine's"


@njit(cache=True)
def _mc_select(S, t, need, vict, acts):
    """marconi's selection in tier ``t`` (_marconi_eng.mc_walk); the shortfall in ``M[M_SHORT]``."""
    M = S.M
    ok, short = MC.mc_walk(S.PX, S.FX, S.res, S.stamp, S.pin, S.dcnt, S.dany, S.cred, S.cred_any, S.parent,
                           S.depth, S.anchor, S.flat, S.sb, M[M_FAB], M[M_SEQ], M[M_CLOCK], t, need, vict, acts)
    if not ok:
        M[M_SHORT] = short
    return ok


# ---------------------------------------------------------------------------- the engine's hooks


@njit(cache=True, inline="always")
def tick(S, now):
    MC.mc_tick(S.PX, S.FX, S.res, S.dcnt, S.parent, S.depth, S.anchor, S.flat)


@njit(cache=True, inline="always")
def before_request(S, j, i, m, arrival, R):
    if MC.mc_tune_due(S.PX, S.FX):
        S.M[M_GROW] |= GROW_MC_TUNE


@njit(cache=True, inline="always")
def on_access(S, path, h, r, q):
    MC.mc_access(S.PX, path, r, S.M[M_SEQ])


@njit(cache=True, inline="always")
def enter(S, t, p):
    MC.mc_enter(S.PX, S.res, S.parent, t, p)


@njit(cache=True, inline="always")
def enter_many(S, t, ps):
    MC.mc_enter_many(S.PX, S.res, S.parent, t, ps)       # on the arrays (decision 141)


@njit(cache=True, inline="always")
def leave(S, t, p):
    MC.mc_leave(S.PX, S.res[p], S.parent, t, p)


@njit(cache=True, inline="always")
def leave_state(S, t, q, sr):
    # remove_copy clears the STATE's bits tier by tier before each event
    MC.mc_leave(S.PX, np.uint8(sr & (7 ^ ((2 << t) - 1))), S.parent, t, q)


@njit(cache=True, inline="always")
def leaf(S, t, c, gone):
    MC.mc_leaf(S.PX, S.res, S.dcnt, S.anchor, S.depth, S.flat, t, c)


@njit(cache=True, inline="always")
def remove_many(S, t, ps, close, cs, lost):
    # on the arrays (decision 141); the STATEs of the batch first, as remove_copies clears every
    # listed copy before its events (a listed STATE's event sees its bits cleared; its FA's
    # loss then finds it gone)
    MC.mc_remove_many(S.M, S.K, S.PX, S.res, S.flags, S.sb, S.depth, S.parent, t, ps, close, cs, lost)
    return True


@njit(cache=True, inline="always")
def action(S, t):
    return DECIDE       # per-victim actions (its own walk, _marconi_eng.mc_walk, decides them)


@njit(cache=True, inline="always")
def select(S, t, need, act, vict, acts):
    return _mc_select(S, t, need, vict, acts)
