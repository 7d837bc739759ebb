"""``type_aware_lru`` on the compiled engine: two hooks (cluster_sim.engine.hooks.HOOKS lists them
all, with the defaults, which are LRU's). The engine finds this module beside the policy's class
and compiles the request step with these hooks in place of the defaults, for this policy only.

``action(S, t)``: the rule for tier t's victims. DECIDE asks ``decide(S, t, p)`` for each victim.
``S`` is the engine's state (cluster_sim.engine.layout): ``S.M`` its meta slots, ``S.K`` counters,
``S.PX`` / ``S.FX`` a policy's own integer / float arrays (unused here).
``dram_victims`` counts what the interpreted policy counts, so both report the same counters: LRU's two
(the engine's slots) and the policy's own, in the first counter slot the engine leaves to a policy
(``K_P0``; ``engine.py`` reads it back)."""
from numba import njit

from cluster_sim.engine._jit import DECIDE, DEMOTE, DRAM, DROP, K_DRAM_DEMOTED, K_DRAM_DROPPED, K_P0, M_CAP2, _psize, default_action

K_STATE_BYTES_DROPPED = K_P0


@njit(cache=True, inline="always")
def action(S, t):
    if t == DRAM and S.M[M_CAP2] > 0:
        return DECIDE
    return default_action(S, t)


@njit(cache=True, inline="always")
def decide(S, t, p):
    return DROP if (p & 1) != 0 else DEMOTE


@njit(cache=True)
def dram_victims(S, vict, acts):
    # a DRAM selection succeeded (its victims not yet moved): LRU's two counters, per victim
    for i in range(len(vict)):
        if acts[i] == DROP:
            S.K[K_DRAM_DROPPED] += 1
            if (vict[i] & 1) != 0:
                S.K[K_STATE_BYTES_DROPPED] += _psize(S, vict[i])
        else:
            S.K[K_DRAM_DEMOTED] += 1
