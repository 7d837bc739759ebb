"""Compiled request step (numba): one node's cache over flat arrays; see :mod:`cluster_sim.engine`.

Everything a request does to the cache happens here, in the order of
:class:`cluster_sim.node.NodeSim` (match, serve, pins and touches, load, insert, overflow
cascade, SSD admission accounting); what only prices the request (recompute FLOPs, latency,
TTFT) is left to the wrapper, which uses the node's :class:`~cluster_sim.cost.CostModel`.

State ``S`` (a namedtuple of arrays, :class:`EngineState`):

* per payload handle ``p`` (``2c`` FA, ``2c + 1`` STATE): ``res`` (tier bits), ``stamp``
  (logical clock of the last touch), ``pin`` (sequence number of the pinning request),
  ``flags`` (bit 0: this SSD copy's admission is counted, bit 1: it has served a reuse);
* per chunk: ``dcnt[t, c]`` strict descendants with FA in tier ``t``, ``dany[c]`` in any tier,
  ``sb`` the STATE bytes, ``cred`` / ``cred_any`` the walk's chain credits (zero between walks);
* the trace's chunk table (``parent``, ``depth``, ``anchor``, ``flat``);
* the touch log (``log_p``, ``log_s``: payloads and stamps in stamp order) and, per tier, a
  binary min-heap of out-of-order candidates inside one array (``heap_s``, ``heap_p`` at
  offset ``hoff[t]``, capacity ``hcap[t]``, size ``hn[t]``) and the walker's log position and
  frontier (``wpos``, ``wfront``);
* ``M`` (meta: clock, sequence, bytes used, capacities, ...) and ``K`` (counters, the policy's
  after the node's);
* ``PX``: the policy's own state, segments of one int64 array at offsets ``M[M_O_*]`` (:data:`SEGMENTS`;
  a policy's adapter fills them, or lays PX out itself), ``FX`` its floats;
* ``pk``: the policy's kernel set (:class:`cluster_sim.engine.hooks.Kernels`). Its hooks
  (``H.on_access``, ``H.enter``, ``H.leave``, ``H.select``, ``H.decide``, ``H.admit``, ...; the list
  and their defaults: :data:`cluster_sim.engine.hooks.HOOKS`) are called where
  :class:`~cluster_sim.node.NodeSim` calls the interpreted policy, and are chosen when a kernel is
  typed: this module names no policy's code, and a run compiles only its policy's.

The candidate queue of a tier yields the payloads resident in it in increasing key order
(LRU's key: the stamp); validity is checked lazily (a stale entry has another stamp or left
the tier). The walk (:func:`_walk`) is the one constrained victim selection.
"""
from __future__ import annotations

import heapq
import math
from collections import namedtuple

import numpy as np
from numba import njit

from .._nrt import borrow, seg_view
from .._ftl_ops import OP_TRIM, OP_WRITE, OP_WRITE_UNCOUNTED  # noqa: F401 (the engine's FTL rows)

#: the event log's rows of a KV-aware router (fleet.sync=kv_events): chunk ``id`` got its first copy /
#: lost its last one (CacheState.ev_stored / ev_removed)
EV_STORED, EV_REMOVED = 3, 4
assert len({OP_TRIM, OP_WRITE, OP_WRITE_UNCOUNTED, EV_STORED, EV_REMOVED}) == 5
from ..cache.state import _leaf_events_kernel

#: CacheState's leaf-event climb, compiled (the dispatcher the interpreted node uses)
_leaf_climb = _leaf_events_kernel()

HBM, DRAM, SSD = 0, 1, 2
# A constant passed to a non-inlined kernel (or to an inlined helper that passes it on) is typed as
# a literal, and numba compiles one copy of the kernel, and of what it calls, per literal: pass
# np.int64(SSD), np.bool_(True) instead (decision 133; tests/test_engine_specialisations.py)
NO_TIER = -1
DROP, DEMOTE = 0, 1
DECIDE = 2           # a walk's action: ask the policy per victim (_decide), as lru_select(action=callable)
GATE, GATE_FORCE = 3, 4   # a walk's action: the gated walk (strict, forced pass; walk._gated_walk)
FORCED = 5           # a victim's action: demoted although the policy rejected it (a forced write)
MODE_LAST, MODE_LAST_AND_BRANCH, MODE_EVERY_CHUNK = 0, 1, 2

# meta: the engine's slots
(M_SEQ, M_CLOCK, M_LOGN, M_USED0, M_USED1, M_USED2, M_CAP0, M_CAP1, M_CAP2, M_ENTRY, M_FAB, M_HAS_STATE,
 M_MODE, M_COUNTING, M_SHORT, M_GROW, M_WR, M_LEFT0, M_LEFT1, M_LEFT2, M_LEFTN0, M_LEFTN1, M_LEFTN2,
 M_NFUT, M_OUTN, M_OUTROOM, M_HAS_LABELS, M_LOG_OUT, M_OUT_OVERFLOW, M_THRESH, M_AQN, M_AQMAX, M_KEYED,
 M_FX_CAP, M_LO, M_FTL, M_EVN, M_EV_ROOM, M_ENTN0, M_ENTN1, M_ENTN2, M_KEV) = range(42)
# M_LEFT*: bytes / copies that left each tier (CacheState.left, left_n); M_ENTN*: copies that entered each
# tier (with M_LEFTN*, the copies each tier holds)
# the hindsight facility (a policy with the node's future stream): M_NFUT the requests in the node's
# stream ("never used again"), M_OUTN / M_OUTROOM: admission outcomes logged / the room the log must keep
# free before a request, M_HAS_LABELS: 1 when an earlier pass's outcomes are given (segment LAB),
# M_LOG_OUT: 1 = log them (a hindsight pass; not the counted one), M_OUT_OVERFLOW: 1 = the log filled
# inside a request (the pass is redone)
# M_THRESH: the gated walk's hit-count threshold; M_AQN / M_AQMAX: SSD writes asked for now / at most in
# a request (segment AQ; residency._request_ssd_admission)
# M_KEYED: 1 = the DRAM and SSD candidate queues are the policy's own (keyed heaps, or its own select),
# not the touch log; M_FX_CAP: FX's length; M_LO: the least payload size
# the event log ``elog``: M_FTL 1 = log the SSD's writes and trims (hardware.ssd.ftl=greedy), M_KEV 1 =
# log the chunks whose FA became resident or lost its last copy (fleet.sync=kv_events), M_EVN the rows
# logged, M_EV_ROOM the rows the next request may log (kept free before it)

#: the policies' segments of PX (``CompiledNode.SEGMENTS``): ``M[M_O_<name>]`` where each starts,
#: ``M[M_L_<name>]`` its length. The engine's own facilities read A / B (the gated walk's and the SSD
#: write queue's per-payload values), W (the gated walk's waiting keys, per chunk), G (per chunk),
#: NFA / NST / FOFF / FNFA / FNST / LAB / OUT (the hindsight facility: next uses, the node's stream, the
#: earlier passes' outcomes, this pass's) and AQ (the SSD writes asked for); X0 .. X3 are a policy's to
#: name (its ``layout.py``: ``M_O_<its name> = M_O_X0``)
SEGMENTS = ("A", "B", "NFA", "NST", "W", "FOFF", "FNFA", "FNST", "LAB", "OUT", "AQ", "G", "X0", "X1", "X2", "X3")
(M_O_A, M_O_B, M_O_NFA, M_O_NST, M_O_W, M_O_FOFF, M_O_FNFA, M_O_FNST, M_O_LAB, M_O_OUT, M_O_AQ, M_O_G, M_O_X0,
 M_O_X1, M_O_X2, M_O_X3) = range(42, 58)
(M_L_A, M_L_B, M_L_NFA, M_L_NST, M_L_W, M_L_FOFF, M_L_FNFA, M_L_FNST, M_L_LAB, M_L_OUT, M_L_AQ, M_L_G, M_L_X0,
 M_L_X1, M_L_X2, M_L_X3) = range(58, 74)
M_N_LAB, M_CAP_OUT, M_CAP_AQ = M_L_LAB, M_L_OUT, M_L_AQ
#: the policy's own meta slots: ``M[M_P0:M_P0 + N_PMETA]`` (its ``layout.py`` names them)
M_P0 = 74
N_PMETA = 32
N_META = M_P0 + N_PMETA

# counters: the node's, then the engine's SSD write requests and victim tally (the walks that decide per
# victim: the interpreted VictimTally), then the policy's own from K_P0 (its ``layout.py`` names them)
(K_WR_FA, K_WR_STATE, K_ADM_FA, K_ADM_STATE, K_ADM_HIT_FA, K_ADM_HIT_STATE, K_DRAM_DEMOTED,
 K_DRAM_DROPPED, K_LOG_COMPACTIONS, K_HEAP_COMPACTIONS) = range(10)
(PK_REQUESTED, PK_WRITTEN, PK_WRITTEN_B, PK_ON_SSD, PK_DROPPED, PK_DROPPED_B, PK_FORCED_N, PK_FORCED_B,
 PK_SSD_VICTIMS) = range(10, 19)
K_P0 = 19
N_COUNTERS = 60
# per-request outputs (columns of R)
(R_H, R_R, R_M, R_N_HBM, R_N_DRAM, R_N_SSD, R_Q_TIER, R_DRAM_B, R_SSD_B, R_SKIPPED, R_WR,
 R_USED0, R_USED1, R_USED2, R_LEFT0, R_LEFT1, R_LEFT2, R_LEFTN2, R_ADM, R_ADM_HIT, R_STOP, R_SUB, R_TURN,
 R_TID) = range(24)
N_R = 24             # R_USED* .. R_ADM_HIT: the node's state after the request (fleet.SNAP)
#: R_STOP .. R_TID are inputs (a policy's request hints): the request's stop reason, sub-agent flag,
#: turn and thread (dense id, -1: none), as RequestMeta gives them to the interpreted policy
# grow requests (bits of M[M_GROW]): the engine's, then GROW_P0 .. GROW_P7 a policy's (its layout.py)
GROW_LOG = 1
GROW_HEAP = (2, 4, 8)
GROW_OUT = 16
GROW_AQ = 32
GROW_P0, GROW_P1, GROW_P2, GROW_P3, GROW_P4, GROW_P5, GROW_P6, GROW_P7 = (64 << i for i in range(8))
GROW_EV = 16384     # the event log needs room: the wrapper hands its rows to the FTL (cluster_sim.ftl) and keeps the router's

# payload flags: the engine's, then F_P0 .. F_P2 a policy's
F_ADM, F_HIT = 1, 2
F_WCH, F_WSK = 16, 32   # inside a gated walk only: chosen / skipped (gated_select's `chosen`, `skipped`)
F_P0, F_P1, F_P2 = 4, 8, 64

EngineState = namedtuple("EngineState", [
    "M", "K", "res", "stamp", "pin", "flags", "dcnt", "dany", "cred", "cred_any", "sb",
    "parent", "depth", "anchor", "flat", "log_p", "log_s", "heap_s", "heap_p", "hoff", "hcap", "hn",
    "wpos", "wfront",
    # the policies' own state, one int64 array in segments (offsets M_O_*): every array of the
    # state costs each call that passes it a reference count, so the policies add one
    "PX",
    # the policy's float state and the node's random stream
    "FX",
    # the node's event log, M[M_EVN] rows (op, id, bytes, kind) in order, drained between requests by the
    # wrapper: the SSD's writes and trims (ops of cluster_sim._ftl_ops) for the flash translation layer,
    # and the chunks stored / removed (EV_STORED, EV_REMOVED) for a KV-aware router; no rows otherwise
    "elog",
    "rng",
    # the policy's kernel set (hooks.Kernels): its numba type selects the policy's hooks when a
    # kernel is typed, so each policy compiles the engine with its own hooks only
    "pk",
])


@njit(cache=True, inline="always")
def _bit(t):
    return np.uint8(1 << t)


@njit(cache=True, inline="always")
def _psize(S, p):
    return _psize_a(S.M, S.sb, S.depth, p)


@njit(cache=True, inline="always")
def _psize_a(M, sb, depth, p):
    if p & 1:
        return sb[depth[p >> 1]]          # a STATE's bytes depend on its position only
    return M[M_FAB]


@njit(cache=True, inline="always")
def log_event(M, elog, op, p, nbytes, kind):
    """Log an SSD write (``op`` OP_WRITE / OP_WRITE_UNCOUNTED, ``nbytes`` of payload ``p`` of ``kind``)
    or trim (OP_TRIM, 0, 0) for the flash translation layer, as the interpreted node's ``ftl.write`` /
    ``ftl.trim`` queue them, or a chunk ``p`` stored / removed (EV_STORED / EV_REMOVED, 0, 0).
    The log has room for the request (its bound, ``M_EV_ROOM``, is kept free before it)."""
    n = M[M_EVN]
    if n == len(elog):
        raise RuntimeError("cluster_sim engine: the event log filled inside a request")
    elog[n, 0] = op
    elog[n, 1] = p
    elog[n, 2] = nbytes
    elog[n, 3] = kind
    M[M_EVN] = n + 1


