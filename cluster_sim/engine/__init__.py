"""The compiled request-step engine (numba): a node's whole request stream in one call.

:class:`cluster_sim.node.NodeSim` is the executable reference (``cache.engine=python``); this
engine (``cache.engine=numba``) moves the same bytes with the same rules over flat arrays, so
every summary figure but the ``sim_*`` timings is identical (tests/test_engine.py). The kernels
are in :mod:`cluster_sim.engine._jit` (the request step, the walk, the cascade, residency: ``step``,
``walk``, ``cascade``, ``residency``, ``queue``, their names in ``layout``); :mod:`.compiled` is the thin
Python side (:class:`CompiledNode`: it builds the arrays, calls the kernel per batch of requests, grows
what the kernel asks between requests, and prices each request with the node's
:class:`~cluster_sim.cost.CostModel` after the kernel said what it served: prices are Python floats
computed by the very functions the reference calls); a policy's own part of that side is its
adapter (:mod:`.adapter`, ``policies/<name>/engine.py``); :mod:`.build` compiles a run's kernel set.

**One constrained victim walk.** ``_jit._walk`` is the only victim selection. It takes a tier's
*candidate queue* and an *action* (the policy's admission rule for the victims: demote to the
next tier, i.e. write it to the SSD unless a valid copy is there, or drop) and enforces, for
every policy alike:

* pins (the current request's payloads are never victims);
* leaf-first within the tier (an FA copy with descendants left in the tier is passed over);
* chain credits (choosing a leaf credits its nearest ancestor in the tier with its whole
  tier-subtree, so an ancestor whose descendants are all chosen becomes a leaf in the same walk;
  the same across tiers for prefix closure of a dropped last copy);
* atomic undo (a walk that cannot free what was asked chooses nothing and puts every
  candidate back);
* the shortfall (a failed walk says how many bytes it lacked, so the node trims the request's
  new payloads by that much at once).

The overflow cascade around it (HBM -> DRAM -> SSD demotions, the undo of a demotion the
lower tier could not absorb, trimming a request's own payloads deepest first) is written once
too. A policy supplies only its hooks (:mod:`cluster_sim.engine.hooks`: its ordering of candidates,
its admission rule, what it hears of entries, leaves and accesses, and, where it has one, its own
selection), in ``policies/<name>/kernels.py``; every hook it does not define is the engine's default,
which is LRU (the candidate queue is the touch log, the logical-clock stamp of the last touch,
with a heap for copies that enter a tier after the walker passed their stamp). The hooks are chosen
when a kernel is typed, from the type of the policy's kernel set in the state (decision 156): a run
compiles the engine for its own policy only. The built-in policies compiled (``SUPPORTED_POLICIES``)
report their counters under the interpreted ``counters()`` names (docs/decisions.md 83-86). A policy
of a plugin (an entry point in ``cluster_sim.policies``) with a ``kernels`` module beside it is
compiled the same way, on the engine's own state, with its own adapter if it has one (README "Your own
policy"). What is compiled is derived from the registry (``SUPPORTED_POLICIES``, ``PARTLY_COMPILED``:
:attr:`Policy.compiled_settings`): no engine module names a policy (tests/test_policy_layout.py).

The greedy flash translation layer (``hardware.ssd.ftl=greedy``) consumes each SSD write and trim in
order: the kernel logs them (``S.elog``, in the interpreted node's order) and this side hands them to the
node's :class:`~cluster_sim.ftl.GreedyFTL` between requests (decision 159).

What the compiled engine does not model yet falls back to the interpreted node under
``cache.engine=auto`` and is an error under ``cache.engine=numba`` (:func:`resolve`): policies
without kernels, and settings of theirs the kernels do not cover (each policy's
``compiled_unsupported`` says which) — docs/decisions.md 67-69; ``fleet.sync=kv_events`` and the
greedy FTL run compiled (decisions 159, 160).
"""
from __future__ import annotations

from .build import (CORE_SOURCES, ENGINES, EXPECTED_COMPILE_S, SMALL_RUN_ENV, SMALL_RUN_REFS, build_lock_path,
                    compile_notice, compiled_settings, digest_path, ensure_compiled, helper_sources,
                    interpreted_first_run, kernel_digest, kernel_sources, kernels_of, numba_available,
                    partly_compiled, policy_unsupported, real_setting, remove_stale_kernels, resolve, set_lock_path,
                    small_run_limit, supported_policies, supports)
from .compiled import CompiledNode

__all__ = ["ENGINES", "SUPPORTED_POLICIES", "PARTLY_COMPILED", "CompiledNode", "resolve", "supports", "numba_available",
           "ensure_compiled", "build_lock_path", "kernel_digest", "digest_path", "remove_stale_kernels",
           "KERNEL_SOURCES", "compile_notice", "interpreted_first_run", "small_run_limit", "kernels_of",
           "kernel_sources", "compiled_settings", "policy_unsupported", "supported_policies", "partly_compiled",
           "helper_sources", "CORE_SOURCES", "EXPECTED_COMPILE_S", "SMALL_RUN_ENV", "SMALL_RUN_REFS", "set_lock_path",
           "real_setting"]


def __getattr__(name):          # derived from the registry when asked (registry.__getattr__)
    if name in ("SUPPORTED_POLICIES", "PARTLY_COMPILED", "KERNEL_SOURCES"):
        from . import registry
        return getattr(registry, name)
    raise AttributeError(name)
