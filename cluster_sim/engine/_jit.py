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
* ``PX``: the policy's own state, segments of one int64 array at offsets ``M[M_O_*]``
  (``CompiledNode._policy_arrays`` says what each holds);
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
from ..cache.state import _leaf_events_kernel
from ..policies import _gandalf_jit as GJ
from ..policies import _reuse_jit as RJ
from . import _marconi_eng as MC
from . import hooks as H

#: CacheState's leaf-event climb, compiled (the dispatcher the interpreted node uses)
_leaf_climb = _leaf_events_kernel()

HBM, DRAM, SSD = 0, 1, 2
# A constant passed to a non-inlined kernel (or to an inlined helper that passes it on) is typed as
# a literal, and numba compiles one copy of the kernel, and of what it calls, per literal: pass
# np.int64(SSD), np.bool_(True) instead (decision 133; tests/test_engine_specialisations.py)
NO_TIER = -1
DROP, DEMOTE = 0, 1
DECIDE = 2           # a walk's action: ask the policy per victim (_decide), as lru_select(action=callable)
GATE, GATE_FORCE = 3, 4   # a walk's action: write_through.gated_select (strict, forced pass)
FORCED = 5           # a victim's action: demoted although the policy rejected it (a forced write)
MODE_LAST, MODE_LAST_AND_BRANCH, MODE_EVERY_CHUNK = 0, 1, 2
(POLICY_LRU, POLICY_ORACLE_ADM, POLICY_WRITE_THROUGH, POLICY_LRU_K, POLICY_HOT_PREFIX, POLICY_DYNAMIC_RANDOM,
 POLICY_ORACLE, POLICY_WORKLOAD_AWARE, POLICY_GANDALF_STRICT, POLICY_GANDALF, POLICY_MARCONI) = range(11)

# meta
(M_SEQ, M_CLOCK, M_LOGN, M_USED0, M_USED1, M_USED2, M_CAP0, M_CAP1, M_CAP2, M_ENTRY, M_FAB, M_HAS_STATE,
 M_MODE, M_COUNTING, M_SHORT, M_POLICY, M_GROW, M_WR, M_LEFT0, M_LEFT1, M_LEFT2, M_LEFTN0, M_LEFTN1,
 M_LEFTN2, M_NFUT, M_OUTN, M_OUTROOM, M_HAS_LABELS, M_LOG_OUT, M_OUT_OVERFLOW, M_THRESH, M_AQN,
 M_AQMAX, M_O_A, M_O_B, M_O_NFA, M_O_NST, M_O_W, M_O_FOFF, M_O_FNFA, M_O_FNST, M_O_LAB, M_N_LAB, M_O_OUT,
 M_CAP_OUT, M_O_AQ, M_CAP_AQ, M_KEYED, M_O_LK, M_LK_K, M_LK_Q, M_GHEAD, M_GTAIL, M_GN, M_NRES, M_CAPP,
 M_GHOST_F, M_O_PEND, M_PENDN, M_CAP_PEND, M_DR_STARTED, M_DR_UN, M_DR_UI, M_DR_U0, M_DR_CAP, M_DR_ND,
 M_DR_SEL, M_O_DEC, M_CAP_DEC, M_DR_ROOM, M_DR_LO, M_O_SU, M_O_FEN, M_O_FK, M_O_G, M_O_SZR, M_OR_NSZ,
 M_OR_FARANK, M_OR_SPATH, M_OR_FTOT, M_O_WQ, M_O_WK, M_O_WC, M_WA_CAT, M_WA_NCAT, M_WA_FIT, M_WA_THETA,
 M_WA_ROOM1, M_WA_ROOM2, M_GD_ROOM, M_GD_HELD, M_GD_CROOM) = range(92)
N_META = 92          # M_LEFT*: bytes / copies that left each tier (CacheState.left, left_n)
# M_NFUT: requests in the node's stream (oracle_admission's "never used again"), M_OUTN / M_OUTROOM:
# admission outcomes logged / the room the log must keep free before a request, M_HAS_LABELS: 1
# when an earlier pass's outcomes are given (lab_k, lab_v), M_LOG_OUT: 1 = log them (the hindsight
# passes; not the counted one), M_OUT_OVERFLOW: 1 = the log filled inside a request (the pass is redone);
# M_THRESH: write_through's hit_count threshold, M_AQN / M_AQMAX: SSD writes queued now / at most in a request;
# M_O_*: where each policy segment starts in PX (M_N_LAB, M_CAP_OUT, M_CAP_AQ: lengths);
# M_KEYED: 1 = the DRAM and SSD candidate queues are keyed heaps (lru_k, oracle), not the touch log;
# lru_k: M_O_LK its per-payload records (M_LK_Q int64 each: HIST(p, 1..K) with K = M_LK_K, the request
# of LAST, residency status 0/1/2 = none/mine/ghost, the ghost list's prev/next, the canonical heap
# key in DRAM and in the SSD), M_GHEAD / M_GTAIL / M_GN the ghost list (oldest first) and its length,
# M_NRES the payloads it holds resident, M_CAPP the tiers' capacity in FA chunks, M_GHOST_F the
# float64 bits of policy.ghost, M_O_PEND / M_PENDN / M_CAP_PEND the payloads referenced while absent
# dynamic_random: M_DR_STARTED 1 once the control loop has its start, the node's draws in FX from
# FX_UB (M_DR_UN drawn, M_DR_UI the next, M_DR_U0 where this DRAM selection started, M_DR_CAP room),
# M_DR_ND the selection's decisions logged in PX (segment DEC at M_O_DEC, room M_CAP_DEC: 2 * payload +
# admitted), M_DR_SEL the selections so far (the stamp of the decision accounting's `seen`, segment A),
# M_DR_LO the least payload size; M_DR_ROOM the draws and decisions a request may take (its DRAM
# selections consider at most every DRAM and HBM payload and its own, twice with retries and the
# forced pass), kept free before the request
# oracle: segment A / B the key of each payload's entry in the DRAM / SSD candidate heap (-1: not in it),
# NFA / NST the next use of each chunk's FA / STATE, FOFF / FNFA / FNST the node's stream and the next
# uses per reference (FNST: per request with state_use=resume, M_OR_SPATH 0), SU the chunk whose STATE
# each request uses (-1 none), FEN a Fenwick tree of SSD bytes by next use (total M_OR_FTOT), FK the
# next use each SSD copy's bytes are filed under (-1 none), G the request that last guarded a chunk
# (its resident path), SZR the size rank of a STATE by depth (rank 0: the largest payload size;
# M_OR_FARANK the FA's, M_OR_NSZ the number of sizes)
# workload_aware: segment A the category of each payload (pcat, -1 none), G the request that last guarded a
# chunk, WQ / WK per tier (DRAM, then the SSD; 2U each) the category whose queue a payload is filed in
# (qcat, -1 none) and its key in that queue (-1: popped or not queued), WC the category of each request of
# the call; M_WA_CAT the current request's, M_WA_NCAT the categories so far (queue heaps from WA_H0),
# M_WA_FIT where the fits start in FX, M_WA_THETA 1 when admit_threshold is set, M_WA_ROOM1 / 2 the
# entries one request may add to a DRAM / SSD queue (kept free before it)
# gandalf (placement=strict): segment B the request that asked for a payload's SSD write (as write_through),
# AQ the writes asked for, G per chunk the STATE demands so far (-1: no checkpoint of it ever created)
# counters
(K_WR_FA, K_WR_STATE, K_ADM_FA, K_ADM_STATE, K_ADM_HIT_FA, K_ADM_HIT_STATE, K_DRAM_DEMOTED,
 K_DRAM_DROPPED, K_LOG_COMPACTIONS, K_HEAP_COMPACTIONS) = range(10)
N_COUNTERS = 60
# per-request outputs (columns of R)
(R_H, R_R, R_M, R_N_HBM, R_N_DRAM, R_N_SSD, R_Q_TIER, R_DRAM_B, R_SSD_B, R_SKIPPED, R_WR,
 R_USED0, R_USED1, R_USED2, R_LEFT0, R_LEFT1, R_LEFT2, R_LEFTN2, R_ADM, R_ADM_HIT, R_STOP, R_SUB, R_TURN,
 R_TID) = range(24)
N_R = 24             # R_USED* .. R_ADM_HIT: the node's state after the request (fleet.SNAP)
#: R_STOP .. R_TID are inputs (gandalf, reuse=hints): the request's stop reason, sub-agent flag,
#: turn and thread (dense id, -1: none), as RequestMeta gives them to the interpreted estimator
# policy counters (in K after the node's): oracle_admission
PK_ADMITTED, PK_NEVER_USED, PK_UNUSED_BEFORE, PK_FORCED = range(10, 14)
# policy counters: write_through(_selective), the VictimTally of gated_select and the requests
(PK_REQUESTED, PK_HITS_COUNTED, PK_WRITTEN, PK_WRITTEN_B, PK_ON_SSD, PK_DROPPED, PK_DROPPED_B, PK_FORCED_N,
 PK_FORCED_B, PK_SSD_VICTIMS) = range(14, 24)
# policy counters: lru_k (besides the VictimTally above)
PK_REFS, PK_UNCORRELATED, PK_GHOST_HITS, PK_FORGOTTEN = range(24, 28)
# policy counters: dynamic_random (besides the VictimTally above); PK_DR_WRITTEN(_LAST): the bytes its
# demotions wrote (at the last control update)
PK_DR_ADM, PK_DR_REJ, PK_DR_ADM_B, PK_DR_REJ_B, PK_DR_UPDATES, PK_DR_WRITTEN, PK_DR_WRITTEN_LAST = range(28, 35)
# policy counters: oracle (its select_victims' counts, in its counters() order)
(PK_OR_WRITTEN, PK_OR_NEVER, PK_OR_NO_ROOM, PK_OR_OTHER, PK_OR_FORCED, PK_OR_SSD_EV, PK_OR_SSD_NEVER,
 PK_OR_FAILED) = range(35, 43)
# policy counters: workload_aware (its select_victims' counts, in its counters() order)
(PK_WA_DEMOTED, PK_WA_DROPPED, PK_WA_SSD_EV, PK_WA_DEAD, PK_WA_SCORED, PK_WA_REQUEUED,
 PK_WA_FAILED) = range(43, 50)
# policy counters: gandalf with placement=strict (its counters() order; the decision counts of its
# LRU walks, then the STATE demand statistics)
(PK_G_DROPS_FA, PK_G_DROPS_STATE, PK_G_MOVES_FA, PK_G_MOVES_STATE, PK_G_MOVES_FREE, PK_G_SSD_EV, PK_G_NCKPT,
 PK_G_NDEM, PK_G_NDEM2) = range(50, 59)
# dynamic_random's floats (FX): the control loop and its parameters, then the draw buffer
(FX_FACTOR, FX_START, FX_LAST, FX_ROBS, FX_RNEED, FX_TARGET, FX_MAXRATE, FX_CW, FX_FMIN, FX_FMAX, FX_INTERVAL,
 FX_DECAY, FX_BITLEN_BASE, FX_UB) = range(14)
DAY = 86400.0
# workload_aware's floats (FX): the request's time, admit_threshold, then last_t per payload from FXW_LT
# (2U), then per category (from M[M_WA_FIT]) P, lambda, lifespan and the gain 1 - e^{-lambda H}
FXW_NOW, FXW_THETA, FXW_LT = 0, 1, 8
WA_H0 = 3            # workload_aware: heap index of category w's queue in tier t is WA_H0 + 2 w + (t - 1)
assert (MC.M_FAB, MC.M_USED0, MC.M_LEFT0, MC.M_LEFTN0, MC.K_ADM_HIT_FA, MC.K_ADM_HIT_STATE, MC.F_ADM, MC.F_HIT) == \
    (M_FAB, M_USED0, M_LEFT0, M_LEFTN0, K_ADM_HIT_FA, K_ADM_HIT_STATE, 1, 2)
# grow requests (bits of M[M_GROW])
GROW_LOG = 1
GROW_HEAP = (2, 4, 8)
GROW_OUT = 16
GROW_AQ = 32
GROW_DR = 64
GROW_WAH = 128       # workload_aware: a category queue needs room
GROW_GD = 256        # gandalf: a heap's entry table needs room (M_GD_CROOM / M_GD_ROOM rows: DRAM / SSD heap),
                     # or its plan or leaf buffer (M_GD_HELD)
GROW_HINTS = 512     # gandalf, reuse=hints: its estimator's buffers need room
GROW_REFIT = 1024    # gandalf, reuse=hints: its estimator's refit is due at this request's tick
GROW_POP = 2048      # gandalf, reuse=population: its windows of references need room
GROW_MC_TUNE = 4096  # marconi, alpha=auto: its alpha tuning is due at this request's tick (_marconi_eng)
GROW_GDGEN = 8192    # gandalf: its heap versions near GD_GEN_LIMIT (renumbered)
#: Gandalf keeps its heaps' versions (and its leaf memo's stamps) as int32: at a request that finds
#: one at this limit, they are renumbered between requests (a request makes far fewer than 2^30
#: pushes); its tentatives' uint16 stamps start over in the kernel (``_gandalf_jit.t_next``)
GD_GEN_LIMIT = 2**30

F_ADM, F_HIT = 1, 2
F_OHIT = 4           # oracle_admission: this SSD copy served a reuse from the SSD (since it entered)
F_WCH, F_WSK = 16, 32   # inside a gated walk only: chosen / skipped (gated_select's `chosen`, `skipped`)
F_DRC = 64           # dynamic_random, inside its decision accounting only: a victim of the selection
F_HELD = 8           # oracle, inside its walk only: popped and held back (its selection's `held`)
# lru_k's per-payload record (offsets from the start of the record, after the K history slots)
# LK_LS packs LAST's request and the residency status: (request << 2) | status
LK_LS, LK_GPREV, LK_GNEXT, LK_CAN1, LK_CAN2 = range(5)
LK_FIELDS = 5
ST_NONE, ST_MINE, ST_GHOST = 0, 1, 2

EngineState = namedtuple("EngineState", [
    "M", "K", "res", "stamp", "pin", "flags", "dcnt", "dany", "cred", "cred_any", "sb",
    "parent", "depth", "anchor", "flat", "log_p", "log_s", "heap_s", "heap_p", "hoff", "hcap", "hn",
    "wpos", "wfront",
    # the policies' own state, one int64 array in segments (offsets M_O_*): every array of the
    # state costs each call that passes it a reference count, so the policies add one
    "PX",
    # float state (dynamic_random: its control loop and draw buffer) and the node's random stream
    "FX", "rng",
    # the policy's kernel set (hooks.Kernels): its numba type selects the policy's hooks when a
    # kernel is typed, so each policy compiles the engine with its own hooks only
    "pk",
])
#: gandalf's state on the compiled engine: the arrays its interpreted policy keeps for its kernels
#: (policies._gandalf_jit: payload sizes, statistics, parameters, counters, the two lazy heaps, the
#: tentatives of its DRAM and SSD selections), as segments of PX (it has no other PX segments) and FX
#: (float64; segment ``k`` at ``PX[GF0 + k]:PX[GF0 + k + 1]``). Int segment ``k`` is bytes
#: ``PX[2k]:PX[2k + 1]`` of PX, each starting on a word, of the element type ``GI_DTYPES`` gives (int64
#: where it names none; decision 150): narrow where the values fit, read through views (``_gt``, ``_gi``).
#: Its heaps' entry tables are FX segments too (``CST``, ``SST``: rows of (key, item, version), seen by
#: its kernels as one-element stacks of tables, ``store[0]``), with room made between requests
#: (GROW_GD). Fields of its own (two arrays, two typed lists) slowed every policy's calls by 8-15%
#: (each call passes the whole state), hence none. Besides the policy's own,
#: the SSD plan its last DRAM selection priced (``PLAN``, ``GX[GX_PLAN]`` entries, -1: none), the
#: request's time (``GN[0]``), the chunks whose STATE was ever checkpointed (``CKPT``) and the
#: leaf-event memo (``MEND``, ``MGEN``, ``GX[GX_MEMO]``) and buffer (``KINDS``, ``NODES``)
#: Under ``reuse=hints`` (decision 136) its estimator's arrays too (policies._reuse_jit, the ``R*``
#: segments: classes, groups, ties, members, the re-evaluation heap, each thread's last group ``RTHR``
#: by dense thread id), its scalars in ``GX`` (the request's own hints too, from R_STOP .. R_TID) and
#: ``RSC``; its refit stays interpreted, between requests (GROW_REFIT).
#: Under ``reuse=population`` its two windows of references (``_population``'s deques) as rows of
#: bucket counts: ``PRT`` / ``PRC`` the requests' references (a row per request: its time, then its
#: counts by bucket), ``PUT`` / ``PUC`` the reuses (a row per running maximum of the reused
#: references' times: an entry leaves the deque's head exactly when that maximum is out of the
#: window), ``PQ`` the rows' heads and tails then ``pop_n`` and ``pop_r``, ``PQF[0]`` the running maximum.
GI_SEGMENTS = ("SBX", "HITS", "SDEM", "F", "K", "G", "CKV", "CMEM", "CMETA", "SKV", "SMEM", "SMETA",
               "TD0", "TD1", "TD2", "TD3", "TD4", "TS0", "TS1", "TS2", "TS3", "TS4", "PLAN", "GX", "CKPT", "MEND",
               "MGEN", "KINDS", "NODES", "RCLS", "RGRP", "RTOU", "RSUP", "RSTOP", "RSUB", "RTURN", "RBUF", "RGS",
               "RGN", "REVG", "REVB", "RGM", "RTHR", "PQ", "PRC", "PUC")
GF_SEGMENTS = ("TF", "TL", "POPP", "CRC", "CRCC", "EST", "P", "GN", "CST", "SST",
               "RSTART", "RD", "RCN", "RQ", "RT0", "REVT", "RSC", "CRCT", "PRT", "PUT", "PQF")
(GI_SBX, GI_HITS, GI_SDEM, GI_F, GI_K, GI_G, GI_CKV, GI_CMEM, GI_CMETA, GI_SKV, GI_SMEM, GI_SMETA, GI_TD0, GI_TD1,
 GI_TD2, GI_TD3, GI_TD4, GI_TS0, GI_TS1, GI_TS2, GI_TS3, GI_TS4, GI_PLAN, GI_GX, GI_CKPT, GI_MEND, GI_MGEN, GI_KINDS,
 GI_NODES, GI_RCLS, GI_RGRP, GI_RTOU, GI_RSUP, GI_RSTOP, GI_RSUB, GI_RTURN, GI_RBUF, GI_RGS, GI_RGN, GI_REVG,
 GI_REVB, GI_RGM, GI_RTHR, GI_PQ, GI_PRC, GI_PUC) = range(46)
#: the int segments' element types where they are not int64: counts, ids and generations that stay below
#: 2^31 as int32, flags as uint8 / bool, the estimator's arrays as its own (policies.reuse)
GI_DTYPES = {"HITS": "int32", "SDEM": "uint8", "CKV": "int32", "SKV": "int32", "CMEM": "uint8", "SMEM": "uint8",
             **{f"T{x}{i}": "int32" if i in (0, 2) else "uint16" for x in "DS" for i in range(5)}, "PLAN": "int32", "CKPT": "bool",
             "MEND": "int32", "KINDS": "int8", "NODES": "int32", "RCLS": "int32", "RTOU": "int32", "RSUP": "bool",
             "RSTOP": "int8", "RSUB": "bool", "RTURN": "int32", "RGRP": "int32", "RBUF": "int32", "MGEN": "int32"}
GF0 = 2 * len(GI_SEGMENTS)   # PX[0:GF0]: the int segments' byte bounds; then the float segments' bounds
(GF_TF, GF_TL, GF_POPP, GF_CRC, GF_CRCC, GF_EST, GF_P, GF_GN, GF_CST, GF_SST, GF_RSTART,
 GF_RD, GF_RCN, GF_RQ, GF_RT0, GF_REVT, GF_RSC, GF_CRCT, GF_PRT, GF_PUT, GF_PQF) = range(21)
#: PQ: the rows of PRT / PRC from PQ_RH to PQ_RT (exclusive) and of PUT / PUC from PQ_UH to PQ_UT are in
#: the windows; then pop_n (PQ_N .. PQ_N + 6) and pop_r (PQ_R ..) by bucket
PQ_RH, PQ_RT, PQ_UH, PQ_UT = range(4)
PQ_N = 4
PQ_R = 4 + GJ._BUCKETS + 1
N_PQ = 4 + 2 * (GJ._BUCKETS + 1)
GI_HEADER = GF0 + len(GF_SEGMENTS) + 1
#: GX: the SSD plan's length (-1 none), the leaf-event memo's generation; reuse=hints: on (0/1), the
#: estimator's references so far (``seen``), the ``seen`` of its last refit (-1 none), a re-key of
#: every heap member due (after a refit), the first refit and the refit interval (requests),
#: objective=chunks (0/1), whether the SSD has given a copy up yet (``log_age`` set), the room its
#: member buffer keeps free before a request, the request's stop reason, sub-agent flag, turn, thread
(GX_PLAN, GX_MEMO, GX_HINTS, GX_SEEN, GX_LAST_REFIT, GX_REKEY, GX_FIRST, GX_EVERY, GX_CHUNKS, GX_HASLOG,
 GX_ROOMB, GX_STOP, GX_SUB, GX_TURN, GX_TID) = range(15)
N_GX = 15
#: RSC: H, log_age, the time the SSD last gave a copy up, objective=chunks' sum and count, the time of
#: the request a refit is due at
RS_H, RS_LOGAGE, RS_LASTEV, RS_CRCSUM, RS_CRCN, RS_NOW = range(6)
N_RSC = 6


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


# ---------------------------------------------------------------------------- touch log
@njit(cache=True)
def _compact_log(S):
    """Drop log entries every active walker has passed, and stale ones (a later touch)."""
    M = S.M
    n = M[M_LOGN]
    front = M[M_CLOCK]
    for t in range(3):
        if M[M_CAP0 + t] > 0 and S.wfront[t] < front and (t == HBM or M[M_KEYED] == 0):
            front = S.wfront[t]
    lp, ls, stamp = S.log_p, S.log_s, S.stamp
    k = 0
    for i in range(n):
        s = ls[i]
        p = lp[i]
        if s > front and stamp[p] == s:
            lp[k] = p
            ls[k] = s
            k += 1
    M[M_LOGN] = k
    for t in range(3):
        S.wpos[t] = np.searchsorted(ls[:k], S.wfront[t], side="right")
    S.K[K_LOG_COMPACTIONS] += 1


@njit(cache=True, inline="always")
def _touch(S, p):
    M = S.M
    s = M[M_CLOCK]
    S.stamp[p] = s
    M[M_CLOCK] = s + 1
    n = M[M_LOGN]
    if n == len(S.log_p):      # room is made before each request (replay): never in the hot path
        raise RuntimeError("cluster_sim engine: touch log full")
    S.log_p[n] = p
    S.log_s[n] = s
    M[M_LOGN] = n + 1


# ---------------------------------------------------------------------------- candidate heaps
@njit(cache=True)
def _heap_compact(S, t):
    """Keep the valid entries of tier ``t``'s heap, once each, sorted (a sorted array is a heap)."""
    o = S.hoff[t]
    n = S.hn[t]
    if H.compact_heap(S, t, o, n):       # a policy's own queues (keyed heaps)
        return
    hs = S.heap_s[o:o + n]
    hp = S.heap_p[o:o + n]
    bit = _bit(t)
    order = np.argsort(hs, kind="mergesort")
    ks = np.empty(n, dtype=np.int64)
    kp = np.empty(n, dtype=np.int64)
    k = 0
    last = -1
    for i in range(n):
        s = hs[order[i]]
        p = hp[order[i]]
        if s == last:
            continue
        if S.stamp[p] == s and (S.res[p] & bit) != 0:
            ks[k] = s
            kp[k] = p
            k += 1
            last = s
    hs[:k] = ks[:k]
    hp[:k] = kp[:k]
    S.hn[t] = k
    S.K[K_HEAP_COMPACTIONS] += 1


@njit(cache=True, inline="always")
def _heap_push(S, t, s, p):
    """Push (key ``s``, payload ``p``) on tier ``t``'s heap, ordered by (key, payload): lru's keys
    (stamps) are unique, lru_k's ties are broken by the payload as its heap of tuples breaks them."""
    _heap_push_a(S.heap_s, S.heap_p, S.hn, S.hcap, S.hoff[t], t, s, p)


@njit(cache=True, inline="always")
def _heap_push_a(hs, hp, hn, hcap, o, t, s, p):
    """:func:`_heap_push` on the heap's arrays (``o``: heap ``t``'s offset; see :func:`_heap_pop_a`)."""
    if hn[t] == hcap[t]:   # room is made before each request (replay): never in the hot path
        raise RuntimeError("cluster_sim engine: candidate heap full")
    i = hn[t]
    hn[t] = i + 1
    while i > 0:
        par = (i - 1) >> 1
        a = hs[o + par]
        if a < s or (a == s and hp[o + par] <= p):
            break
        hs[o + i] = a
        hp[o + i] = hp[o + par]
        i = par
    hs[o + i] = s
    hp[o + i] = p


@njit(cache=True, inline="always")
def _heap_pop(S, t):
    return _heap_pop_a(S.heap_s, S.heap_p, S.hn, S.hoff[t], t)


@njit(cache=True, inline="always")
def _heap_pop_a(hs, hp, hn, o, t):
    """:func:`_heap_pop` on the heap's arrays (``o``: tier ``t``'s offset): the hot loops pass
    arrays, not the state (an inlined helper taking the state costs a reference count of each
    of its arrays per call where numba cannot prune them)."""
    s0 = hs[o]
    p0 = hp[o]
    n = hn[t] - 1
    hn[t] = n
    if n > 0:
        s = hs[o + n]
        p = hp[o + n]
        i = 0
        while True:
            a = 2 * i + 1
            if a >= n:
                break
            b = a + 1
            if b < n and (hs[o + b] < hs[o + a] or (hs[o + b] == hs[o + a] and hp[o + b] < hp[o + a])):
                a = b
            if hs[o + a] > s or (hs[o + a] == s and hp[o + a] >= p):
                break
            hs[o + i] = hs[o + a]
            hp[o + i] = hp[o + a]
            i = a
        hs[o + i] = s
        hp[o + i] = p
    return s0, p0


@njit(cache=True, inline="always")
def _note_enter(S, t, p):
    """``p`` entered tier ``t``: a walker already past its stamp must be handed it."""
    s = S.stamp[p]
    if 0 <= s <= S.wfront[t]:
        _heap_push(S, t, s, p)


@njit(cache=True, inline="always")
def _pop(S, t):
    """The least-key valid candidate of tier ``t`` as (key, payload), or (-1, -1); forgotten
    until pushed back."""
    if t != HBM and S.M[M_KEYED] != 0:
        return H.pop(S, t)
    return _pop_log(S.M[M_LOGN], S.stamp, S.res, S.log_p, S.log_s, S.wpos, S.wfront, S.hn, S.hoff[t],
                    S.heap_s, S.heap_p, t)


@njit(cache=True, inline="always")
def _pop_log(n, stamp, res, lp, ls, wpos, wfront, hn, o, heap_s, heap_p, t):
    """:func:`_pop` of an unkeyed tier on the arrays (``n``: the touch log's length, ``o``: the
    tier's heap offset)."""
    bit = _bit(t)
    while True:
        i = wpos[t]
        s = -1
        p = -1
        while i < n:
            s = ls[i]
            p = lp[i]
            if stamp[p] == s and (res[p] & bit) != 0:
                break
            i += 1
            wfront[t] = s
            s = -1
        wpos[t] = i
        if hn[t] > 0 and (s < 0 or heap_s[o] < s):
            hs, hp = _heap_pop_a(heap_s, heap_p, hn, o, t)
            if stamp[hp] == hs and (res[hp] & bit) != 0:
                return hs, hp
            continue
        if s >= 0:
            wpos[t] = i + 1
            wfront[t] = s
            return s, p
        return -1, -1


# ---------------------------------------------------------------------------- lru_k
# The keyed candidate queue of lru_k (policies.lru_k.KeyedTierHeap) lives in the tier's heap arrays:
# an entry is (key, payload), the key (HIST(p, K), HIST(p, 1)) packed into one int64 as
# (HIST(p, K) + 1) << 32 | (HIST(p, 1) + 1) (stamps stay below 2^31, CompiledNode checks), so that the
# entries order exactly as the reference's tuples (k1, k2, p). An entry is valid while it equals the
# payload's canonical key in that tier (set when it enters; re-keyed when a grown key reaches the top).


# ---------------------------------------------------------------------------- chain credits
@njit(cache=True, inline="always")
def _chain_credit(S, t, c, bit, drop_last, credited, credited_any):
    """A victim FA ``c`` of tier ``t`` (its parent exists) is chosen: its parent is credited with its
    whole resident subtree when its last copy goes (prefix closure), and its nearest ancestor in the
    tier with its whole tier-subtree (leaf-first); ``Tentative.choose``. Returns that ancestor (-1:
    none). The credited chunks are listed once each, to be cleared by :func:`_clear_credits`."""
    return _chain_credit_a(S.res, S.parent, S.anchor, S.depth, S.flat, S.dcnt, S.dany, S.cred, S.cred_any, t, c,
                           bit, drop_last, credited, credited_any)


@njit(cache=True, inline="always")
def _chain_credit_a(res, parent, anchor, depth, flat, dcnt, dany, cred, cred_any, t, c, bit, drop_last, credited,
                    credited_any):
    """:func:`_chain_credit` on the arrays (see :func:`_heap_pop_a`)."""
    par = parent[c]
    if drop_last:
        if cred_any[par] == 0:
            credited_any.append(par)
        cred_any[par] += 1 + dany[c]
    y = par if (res[2 * par] & bit) != 0 else _nearest_in_tier_a(res, anchor, depth, flat, c, bit)
    if y >= 0:
        if cred[y] == 0:
            credited.append(y)
        cred[y] += 1 + dcnt[t, c]
    return y


@njit(cache=True, inline="always")
def _clear_credits(S, credited, credited_any):
    """The chain credits are zero again (between walks)."""
    for x in credited:
        S.cred[x] = 0
    for x in credited_any:
        S.cred_any[x] = 0


# ---------------------------------------------------------------------------- oracle
# policies.oracle on flat arrays. Its candidate queues (one LazyHeap per tier in the reference, entries
# ordered by (-next use, -size, payload)) live in the DRAM and SSD heap arrays: an entry is (key,
# payload) with the key (N - next use) * M_OR_NSZ + size rank, and it is valid while it equals the
# payload's current key in that tier (segment A / B; -1 = not in the queue). A popped or discarded
# payload is out of the queue; every push (a re-key) makes the older entries stale, as LazyHeap's
# versions do: the keys are always current (a next use changes only in on_access, which re-keys).


@njit(cache=True)
def _heap_rebuild(S, t, o, n, keep):
    """Heap ``t`` (entries at ``o``, ``n`` of them) keeps the entries marked in ``keep``, once each,
    sorted by (key, payload) (a sorted array is a heap)."""
    hs = S.heap_s[o:o + n]
    hp = S.heap_p[o:o + n]
    ks = np.empty(n, dtype=np.int64)
    kp = np.empty(n, dtype=np.int64)
    k = 0
    for i in range(n):
        if keep[i]:
            ks[k] = hs[i]
            kp[k] = hp[i]
            k += 1
    o1 = np.argsort(kp[:k], kind="mergesort")
    o2 = np.argsort(ks[:k][o1], kind="mergesort")     # stable: by (key, payload)
    m = 0
    for i in range(k):
        j = o1[o2[i]]
        if m and hs[m - 1] == ks[j] and hp[m - 1] == kp[j]:
            continue                                  # the same entry twice (a re-key to the same key)
        hs[m] = ks[j]
        hp[m] = kp[j]
        m += 1
    S.hn[t] = m
    S.K[K_HEAP_COMPACTIONS] += 1


@njit(cache=True)
def _fen_add(S, i, v):
    """The Fenwick tree of SSD bytes by next use: ``v`` more bytes at next use ``i`` (0..N)."""
    M = S.M
    M[M_OR_FTOT] += v
    o = M[M_O_FEN]
    n = M[M_NFUT] + 1
    i += 1
    while i <= n:
        S.PX[o + i] += v
        i += i & -i


@njit(cache=True)
def _fen_prefix(S, i):
    """SSD bytes filed at next uses <= ``i``."""
    o = S.M[M_O_FEN]
    s = 0
    i += 1
    while i > 0:
        s += S.PX[o + i]
        i -= i & -i
    return s


# ---------------------------------------------------------------------------- workload_aware
# policies.workload_aware on flat arrays. Its queues (one LazyHeap per category and tier, entries ordered
# by (stamp when filed, payload)) are heaps WA_H0 + 2 w + (t - 1) of the heap arrays: an entry (key, p) is
# valid while p is filed in that category's queue (qcat, segment WQ) under that key (segment WK; -1 once
# popped: LazyHeap.pop leaves qcat as it is). The reuse fits are computed by the wrapper with the
# reference's own code (policies.workload_aware.ReuseFits) and given in FX; the categories of the requests
# in segment WC.


# ---------------------------------------------------------------------------- shared by policies
@njit(cache=True, inline="always")
def _next_use(S, p):
    """The hindsight policies (oracle, oracle_admission): the next request of the node's stream
    using payload ``p`` (M_NFUT: none)."""
    return S.PX[S.M[M_O_NST if p & 1 else M_O_NFA] + (p >> 1)]


@njit(cache=True, inline="always")
def _request_write(S, p):
    """``ctx.request_ssd_admission(p)`` once per request step (pending: ``pseq[p]`` = this request)."""
    seq = S.M[M_SEQ]
    o = S.M[M_O_B] + p
    if S.PX[o] != seq:
        S.PX[o] = seq
        S.K[PK_REQUESTED] += 1
        n = S.M[M_AQN]
        if n == S.M[M_CAP_AQ]:   # room is made before each request (replay): never in the hot path
            raise RuntimeError("cluster_sim engine: admission queue full")
        S.PX[S.M[M_O_AQ] + n] = p
        S.M[M_AQN] = n + 1


@njit(cache=True, inline="always")
def inserted_payload(path, r, states, k):
    """The ``k``-th payload a request created (new FA ``c_{r+1} .. c_m``, then its new STATEs): the
    order in which a policy's ``on_insert`` hears them (those still resident)."""
    return 2 * path[r + k] if k < len(path) - r else states[k - (len(path) - r)]


@njit(cache=True)
def _enter_many(S, t, ps):
    """The policy's ``enter`` of each payload of ``ps`` (distinct, new in ``t``), in order (a policy
    may take them in one batch: its ``enter_many`` hook)."""
    if len(ps) == 0:
        return
    H.enter_many(S, t, ps)


@njit(cache=True)
def _tally_gated(S, t, vict, acts):
    """``VictimTally.add`` of a gated selection (before it is carried out)."""
    if t != DRAM:
        S.K[PK_SSD_VICTIMS] += len(vict)
        return
    for i in range(len(vict)):
        p = vict[i]
        sz = _psize(S, p)
        if acts[i] != DROP and S.M[M_CAP2] > 0:
            if (S.res[p] & 4) != 0:
                S.K[PK_ON_SSD] += 1
            elif acts[i] == FORCED:
                S.K[PK_FORCED_N] += 1
                S.K[PK_FORCED_B] += sz
            else:
                S.K[PK_WRITTEN] += 1
                S.K[PK_WRITTEN_B] += sz
        else:
            S.K[PK_DROPPED] += 1
            S.K[PK_DROPPED_B] += sz


# ---------------------------------------------------------------------------- gandalf, placement=strict
# GandalfPolicy(placement="strict"): LRU walks leaf-first in every tier; a DRAM victim is demoted to the
# SSD if it is an FA chunk (written unless a valid copy is there) and dropped if it is a STATE; an FA copy
# entering DRAM without an SSD copy asks for its write (_enter). Its statistics are the STATE demand
# counts it reports (on_access / on_insert); its estimates play no part under strict placement.


# ---------------------------------------------------------------------------- gandalf (capacity-aware)
# GandalfPolicy on the engine: its own kernels (policies._gandalf_jit: the two lazy heaps, the victim
# selections, the residency events), called where CacheState tells the interpreted policy, with the
# arrays the interpreted policy would hand them. Its estimates here are reuse=rate (decision 135).


# ---------------------------------------------------------------------------- dynamic_random
# DynamicRandomPolicy: the gated walk over lru's queues, admitting a DRAM victim without an SSD copy
# with probability P / (P + n (1 - P)) (n: the writes it commits) from the node's draws; a control
# loop in simulated time moves the factor of P toward the write budget.


# ---------------------------------------------------------------------------- tier moves
@njit(cache=True, inline="always")
def _add_copy(S, t, p):
    """A copy of ``p`` in tier ``t`` (not there yet)."""
    bit = _bit(t)
    was = S.res[p]
    S.res[p] = was | bit
    S.M[M_USED0 + t] += _psize(S, p)
    if (p & 1) == 0:
        c = p >> 1
        a = S.anchor[c]
        e = a + S.depth[c] - 1
        for i in range(a, e):
            y = S.flat[i]
            S.dcnt[t, y] += 1
            if was == 0:
                S.dany[y] += 1
    _note_enter(S, t, p)
    H.enter(S, t, p)


@njit(cache=True, inline="always")
def _close_ssd(S, p):
    f = S.flags[p]
    if (f & F_ADM) != 0 and (f & F_HIT) != 0:
        if p & 1:
            S.K[K_ADM_HIT_STATE] += 1
        else:
            S.K[K_ADM_HIT_FA] += 1
    S.flags[p] = 0


@njit(cache=True, inline="always")
def _count_ssd_write(S, p):
    _count_ssd_write_a(S.M, S.K, S.flags, S.sb, S.depth, p)


@njit(cache=True, inline="always")
def _count_ssd_write_a(M, K, flags, sb, depth, p):
    counting = M[M_COUNTING] != 0
    flags[p] = F_ADM if counting else 0
    if counting:
        sz = _psize_a(M, sb, depth, p)
        M[M_WR] += sz
        if p & 1:
            K[K_WR_STATE] += sz
            K[K_ADM_STATE] += 1
        else:
            K[K_WR_FA] += sz
            K[K_ADM_FA] += 1


@njit(cache=True, inline="always")
def _remove(S, t, p, close):
    """Remove ``p``'s copy from tier ``t`` (and, if that was the FA's last copy, its STATE from
    every tier). Returns the bytes that left tier ``t``. ``close``: SSD copies leaving are closed
    (admission hit accounting)."""
    bit = _bit(t)
    r = S.res[p]
    if (r & bit) == 0:
        return 0
    now = r & ~bit
    S.res[p] = now
    sz = _psize(S, p)
    S.M[M_USED0 + t] -= sz
    S.M[M_LEFT0 + t] += sz
    S.M[M_LEFTN0 + t] += 1
    freed = sz
    hooks = H.has_leave(S)
    if hooks:
        H.leave(S, t, p)
    if t == SSD:
        H.ssd_leave(S, p)
        if close:
            _close_ssd(S, p)
    if (p & 1) == 0:
        c = p >> 1
        a = S.anchor[c]
        e = a + S.depth[c] - 1
        for i in range(a, e):
            y = S.flat[i]
            S.dcnt[t, y] -= 1
            if now == 0:
                S.dany[y] -= 1
        if now == 0:
            q = p | 1
            sr = S.res[q]
            if sr != 0:
                qs = _psize(S, q)
                for tt in range(3):
                    if (sr & _bit(tt)) != 0:
                        S.M[M_USED0 + tt] -= qs
                        S.M[M_LEFT0 + tt] += qs
                        S.M[M_LEFTN0 + tt] += 1
                        if tt == t:
                            freed += qs
                        if hooks:
                            H.leave_state(S, tt, q, sr)
                        if tt == SSD:
                            H.ssd_leave(S, q)
                            if close:
                                _close_ssd(S, q)
                S.res[q] = 0
        H.leaf(S, t, c, now == 0)
    if now == 0:
        H.lost(S, p)
    return freed


@njit(cache=True)
def _batch_anc(S, t, cs, born, sign):
    """``dcnt[t, a] += sign`` for every strict ancestor ``a`` of each chunk of ``cs`` (distinct),
    and ``dany[a] += sign`` for those with ``born`` set. Victims form a few root-ward chains:
    each chain is one walk from its deepest chunk, counting the chunks of ``cs`` met on the way
    (marked in ``cred``, which is zero outside a walk), so the cost is per chain, not per chunk."""
    n = len(cs)
    cred, flat, anchor, depth = S.cred, S.flat, S.anchor, S.depth
    for k in range(n):
        cred[cs[k]] = 2 if born[k] else 1
    d = np.empty(n, dtype=np.int64)
    for k in range(n):
        d[k] = -depth[cs[k]]
    order = np.argsort(d)
    for k in order:
        c = cs[k]
        if cred[c] == 0:
            continue
        a = anchor[c]
        cnt = 0
        cnta = 0
        for i in range(a + depth[c] - 1, a - 1, -1):
            y = flat[i]
            if cnt:
                S.dcnt[t, y] += sign * cnt
            if cnta:
                S.dany[y] += sign * cnta
            f = cred[y]
            if f:
                cnt += 1
                if f == 2:
                    cnta += 1
                cred[y] = 0


@njit(cache=True)
def _leave_events(S, ev, hooks, close):
    """The copies a batch removal (:func:`_remove_many`) took out, in its order, each event
    ``4 * payload + tier``: the policy's ``on_leave`` of each (``hooks``: a policy keeping queues of
    its own; never for HBM), then, for each SSD copy, the policy's ``ssd_leave`` and the admission-hit
    close (:func:`_remove`'s events, in the same order per kind: a policy's leave and the SSD's close
    touch disjoint state)."""
    if hooks:
        H.leave_many(S, ev)
    for e in ev:
        if (e & 3) == SSD:
            p = e >> 2
            H.ssd_leave(S, p)
            if close:
                _close_ssd(S, p)


@njit(cache=True)
def _remove_many(S, t, ps, close):
    """Remove the tier-``t`` copies of ``ps`` (as one by one with :func:`_remove`)."""
    if len(ps) == 1:
        _remove(S, t, ps[0], close)
        return
    cs = [np.int64(0) for _ in range(0)]
    lost = [False for _ in range(0)]
    was_in = H.remove_many_begin(S, t, ps)
    if not H.remove_many(S, t, ps, close, cs, lost):
        hooks = H.has_leave(S)
        # the steps on the arrays alone (an inlined helper taking S costs each victim a reference count
        # of every array of S); the copies that left a tier, in order, as events 4 * payload + tier for
        # the policy's on_leave and the SSD's close, handed to _leave_events after the loop (neither
        # reads what the loop writes, nor the loop what they write)
        M, res, sb, depth = S.M, S.res, S.sb, S.depth
        bit = _bit(t)
        ev = np.empty(4 * len(ps), dtype=np.int64)
        ne = 0
        for p in ps:
            r = res[p]
            if (r & bit) == 0:
                continue
            now = r & ~bit
            res[p] = now
            c = p >> 1
            sz = _psize_a(M, sb, depth, p)
            M[M_USED0 + t] -= sz
            M[M_LEFT0 + t] += sz
            M[M_LEFTN0 + t] += 1
            if t == SSD or (hooks and t != HBM):
                ev[ne] = 4 * p + t
                ne += 1
            if p & 1:
                continue
            cs.append(c)
            lost.append(now == 0)
            if now == 0:
                q = p | 1
                sr = res[q]
                if sr != 0:
                    qs = _psize_a(M, sb, depth, q)
                    for tt in range(3):
                        if (sr & _bit(tt)) != 0:
                            M[M_USED0 + tt] -= qs
                            M[M_LEFT0 + tt] += qs
                            M[M_LEFTN0 + tt] += 1
                            if tt == SSD or (hooks and tt != HBM):
                                ev[ne] = 4 * q + tt
                                ne += 1
                    res[q] = 0
        if ne:
            _leave_events(S, ev[:ne], hooks, close)
    if len(cs):
        _batch_anc(S, t, cs, lost, np.int64(-1))
        H.leaf_many(S, t, cs, lost)
    H.remove_many_end(S, t, was_in)


@njit(cache=True)
def _add_many(S, t, ps):
    """Tier-``t`` copies of ``ps`` (none in ``t`` yet), as one by one with :func:`_add_copy`."""
    if len(ps) == 1:
        _add_copy(S, t, ps[0])
        return
    bit = _bit(t)
    cs = [np.int64(0) for _ in range(0)]
    born = [False for _ in range(0)]
    M, res, sb, depth = S.M, S.res, S.sb, S.depth
    for p in ps:
        was = res[p]
        res[p] = was | bit
        M[M_USED0 + t] += _psize_a(M, sb, depth, p)
        if (p & 1) == 0:
            cs.append(p >> 1)
            born.append(was == 0)
    if len(cs):
        _batch_anc(S, t, cs, born, np.int64(1))
    stamp, wfront = S.stamp, S.wfront
    for p in ps:        # _note_enter, the state passed only to push
        s = stamp[p]
        if 0 <= s <= wfront[t]:
            _heap_push(S, t, s, p)
    if H.has_enter(S):
        _enter_many(S, t, ps)


@njit(cache=True, inline="always")
def _nearest_in_tier(S, c, bit):
    return _nearest_in_tier_a(S.res, S.anchor, S.depth, S.flat, c, bit)


@njit(cache=True, inline="always")
def _nearest_in_tier_a(res, anchor, depth, flat, c, bit):
    """The nearest strict ancestor of chunk ``c`` whose FA is in the tier of ``bit`` (-1: none)."""
    a = anchor[c]
    for i in range(a + depth[c] - 2, a - 1, -1):
        y = flat[i]
        if (res[2 * y] & bit) != 0:
            return y
    return -1


# ---------------------------------------------------------------------------- the walk
@njit(cache=True, inline="always")
def _action(S, t):
    """The policy's action for victims of tier ``t`` (the admission rule of a demotion)."""
    M = S.M
    if t == HBM:
        return DEMOTE if (M[M_CAP1] > 0 or M[M_CAP2] > 0) else DROP
    return H.action(S, t)


@njit(cache=True, inline="always")
def default_action(S, t):
    """The action of a policy that does not choose one: DRAM victims go down to the SSD when there
    is one; the SSD's are dropped."""
    if t == DRAM and S.M[M_CAP2] > 0:
        return DEMOTE
    return DROP


@njit(cache=True)
def _walk(S, t, need, action, out, acts):
    """The constrained victim walk: candidates of tier ``t`` in key order, skipping pinned
    payloads, FA copies with descendants left in the tier (leaf-first; the chain credits of
    the victims already chosen count as gone) and last copies whose chunk has resident
    descendants (prefix closure); stops once ``need`` bytes are chosen. Appends the victims to
    ``out`` and returns True; or, atomically, returns False with nothing chosen (the queue as
    it was) and the shortfall in ``M[M_SHORT]``. Each victim's action goes to ``acts``.

    ``action``: DROP or DEMOTE (every victim); DECIDE (``lru_select(action=callable,
    drop_fallback=DEMOTE)``): the policy's :func:`_decide` per victim, and a victim it would drop
    whose last copy may not go (prefix closure) is demoted instead of passed over; GATE or
    GATE_FORCE (``write_through.gated_select``): in DRAM with an SSD a victim is demoted when it
    has a valid SSD copy or the policy admits it (:func:`_admit`), else dropped.

    The gated walk is the one extension of the walk (its semantics differ from lru_select's, so
    they are flags here rather than a second walk): a candidate the policy defers
    (:func:`_defer`) is considered only once the queue is exhausted, in the order seen; a
    candidate skipped for descendants (leaf-first, or prefix closure) waits on its chunk
    (``wkey``) and is retried, before the next queue entry, as soon as a chosen victim credits
    that chunk; a rejected DRAM candidate whose drop would break prefix closure is demoted
    anyway (FORCED) when a descendant lives on the SSD, or with GATE_FORCE (the second pass
    the DRAM cascade runs when the strict one fails), and waits otherwise."""
    bit = _bit(t)
    gated = action >= GATE
    force = action == GATE_FORCE
    gate = gated and t == DRAM and S.M[M_CAP2] > 0
    dropping_all = action == DROP or t == SSD
    seq = S.M[M_SEQ]
    res, pin, dcnt, dany, flags = S.res, S.pin, S.dcnt, S.dany, S.flags
    cred, cred_any, parent, PX = S.cred, S.cred_any, S.parent, S.PX
    ow = S.M[M_O_W]           # wkey[c] = PX[ow + c]: the key of chunk c's FA waiting for descendants (-1: none)
    keyed = t != HBM and S.M[M_KEYED] != 0
    stamp, log_p, log_s, wpos, wfront, hn = S.stamp, S.log_p, S.log_s, S.wpos, S.wfront, S.hn
    heap_s, heap_p, anchor, depth, flat, M = S.heap_s, S.heap_p, S.anchor, S.depth, S.flat, S.M
    ho = S.hoff[t]
    skip_s = [np.int64(0) for _ in range(0)]
    skip_p = [np.int64(0) for _ in range(0)]
    take_s = [np.int64(0) for _ in range(0)]
    credited = [np.int64(0) for _ in range(0)]
    credited_any = [np.int64(0) for _ in range(0)]
    waited = [np.int64(0) for _ in range(0)]
    ready = [(np.int64(0), np.int64(0)) for _ in range(0)]
    later_s = [np.int64(0) for _ in range(0)]
    later_p = [np.int64(0) for _ in range(0)]
    li = 0
    phase = 0
    freed = 0
    prev = -1
    start = len(out)
    while freed < need:
        if len(ready):
            s, p = heapq.heappop(ready)
        else:
            s = np.int64(-1)
            p = np.int64(-1)
            if phase == 0:
                if keyed:
                    s, p = H.pop(S, t)
                else:
                    s, p = _pop_log(M[M_LOGN], stamp, res, log_p, log_s, wpos, wfront, hn, ho, heap_s, heap_p, t)
                if p < 0:
                    if not gated:
                        break
                    phase = 1
                elif not gated:
                    if p == prev:
                        continue    # a duplicate entry of the candidate just seen: same verdict
                    prev = p
            if p < 0:
                if li >= len(later_p):
                    break
                s = later_s[li]
                p = later_p[li]
                li += 1
        if gated:
            if (flags[p] & (F_WCH | F_WSK)) != 0:
                continue            # gated_select: `p in chosen or p in skipped`, a duplicate entry
        if pin[p] == seq:
            if gated:
                flags[p] |= F_WSK
            skip_s.append(s)
            skip_p.append(p)
            continue
        if gated and phase == 0 and H.defer(S, t, p):
            later_s.append(s)
            later_p.append(p)
            continue
        r = res[p]
        c = p >> 1
        d = 0
        if (p & 1) == 0:
            d = dcnt[t, c]
            if d != 0 and d != cred[c]:
                if gated:
                    PX[ow + c] = s
                    waited.append(c)
                    flags[p] |= F_WSK
                else:
                    skip_s.append(s)
                    skip_p.append(p)
                continue
        a = action
        if action == DECIDE:
            a = H.decide(S, t, p)
        elif gated:
            a = DEMOTE if gate and ((r & 4) != 0 or H.admit(S, t, p)) else DROP
        if (p & 1) == 0:
            drop_last = (dropping_all or a == DROP) and r == bit
            if drop_last:
                da = dany[c]
                if da != 0 and da != cred_any[c]:
                    if action == DECIDE:
                        a = DEMOTE          # drop_fallback: the victims stay exactly LRU's
                    elif gate and (force or dcnt[SSD, c] != 0):
                        a = FORCED          # an admitted descendant on the SSD needs this prefix
                    elif gated:
                        PX[ow + c] = s
                        waited.append(c)
                        flags[p] |= F_WSK
                        continue
                    else:
                        skip_s.append(s)
                        skip_p.append(p)
                        continue
                    drop_last = False
            par = parent[c]
            if par >= 0:
                # credit the nearest ancestor in the tier with this chunk's whole tier-subtree
                y = par if (res[2 * par] & bit) != 0 else _nearest_in_tier_a(res, anchor, depth, flat, c, bit)
                if y >= 0:
                    if cred[y] == 0:
                        credited.append(y)
                    cred[y] += 1 + d
                    if gated and PX[ow + y] >= 0:
                        heapq.heappush(ready, (PX[ow + y], 2 * y))
                        PX[ow + y] = -1
                        flags[2 * y] &= ~np.uint8(F_WSK)
                if drop_last:
                    if cred_any[par] == 0:
                        credited_any.append(par)
                    cred_any[par] += 1 + dany[c]
                    if gated and PX[ow + par] >= 0:
                        heapq.heappush(ready, (PX[ow + par], 2 * par))
                        PX[ow + par] = -1
                        flags[2 * par] &= ~np.uint8(F_WSK)
        take_s.append(s)
        out.append(p)
        acts.append(a)
        if gated:
            flags[p] |= F_WCH
        freed += _psize(S, p)
    for y in credited:
        cred[y] = 0
    for y in credited_any:
        cred_any[y] = 0
    if gated:
        clear = ~np.uint8(F_WCH | F_WSK)
        for i in range(start, len(out)):
            flags[out[i]] &= clear
        for x in skip_p:
            flags[x] &= clear
        for c in waited:
            flags[2 * c] &= clear
        # what still waits, what was made ready but not reached, what was deferred and not reached
        for c in waited:
            if PX[ow + c] >= 0:
                skip_s.append(PX[ow + c])
                skip_p.append(2 * c)
                PX[ow + c] = -1
        for e in ready:
            skip_s.append(e[0])
            skip_p.append(e[1])
        for i in range(li, len(later_p)):
            skip_s.append(later_s[i])
            skip_p.append(later_p[i])
    if freed < need:
        for i in range(len(take_s)):
            _heap_push(S, t, take_s[i], out[start + i])
        for i in range(len(skip_s)):
            _heap_push(S, t, skip_s[i], skip_p[i])
        while len(out) > start:
            out.pop()
            acts.pop()
        S.M[M_SHORT] = need - freed
        return False
    for i in range(len(skip_s)):
        _heap_push(S, t, skip_s[i], skip_p[i])
    return True


# ---------------------------------------------------------------------------- overflow cascade
@njit(cache=True)
def _move_down(S, vict, t, dest, isnew):
    """Demotion, first half: the victims enter ``dest`` (SSD writes counted) and leave ``t``."""
    dbit = _bit(dest)
    for p in vict:
        nw = (S.res[p] & dbit) == 0
        isnew.append(nw)
    if dest == SSD:
        M, K, flags, sb, depth = S.M, S.K, S.flags, S.sb, S.depth
        for i in range(len(vict)):
            if isnew[i]:
                _count_ssd_write_a(M, K, flags, sb, depth, vict[i])
    new = [np.int64(0) for _ in range(0)]
    for i in range(len(vict)):
        if isnew[i]:
            new.append(vict[i])
    if len(new):
        _add_many(S, dest, new)
    _remove_many(S, t, vict, True)


@njit(cache=True)
def _undo_move(S, vict, t, dest, isnew):
    """Demotion failed below: what ``dest`` still holds goes back to ``t``; the new copies in
    ``dest`` are removed (a payload ``dest`` dropped is gone for good)."""
    dbit = _bit(dest)
    back = [np.int64(0) for _ in range(0)]
    bnew = [False for _ in range(0)]
    for i in range(len(vict)):
        p = vict[i]
        if (S.res[p] & dbit) != 0:
            back.append(p)
            bnew.append(isnew[i])
    if len(back):
        _add_many(S, t, back)
    for i in range(len(back)):
        if bnew[i]:
            _remove(S, dest, back[i], True)


@njit(cache=True, inline="always")
def _drop_all(S, t, vict):
    _remove_many(S, t, vict, True)


@njit(cache=True)
def _room_ssd(S, need):
    for _ in range(64):
        if need <= 0:
            return True
        S.M[M_SHORT] = -1
        vict = [np.int64(0) for _ in range(0)]
        acts = [np.int64(0) for _ in range(0)]
        act = _action(S, SSD)
        ok = H.select(S, np.int64(SSD), need, act, vict, acts)
        if act == GATE:
            _tally_gated(S, np.int64(SSD), vict, acts)
        if not ok:
            return False
        H.ssd_victims(S, vict)
        before = S.M[M_USED2]
        _drop_all(S, np.int64(SSD), vict)
        need -= before - S.M[M_USED2]
    return need <= 0


@njit(cache=True)
def _demote_to_ssd(S, vict, t):
    isnew = [False for _ in range(0)]
    _move_down(S, vict, t, np.int64(SSD), isnew)
    if S.M[M_USED2] > S.M[M_CAP2] and not _room_ssd(S, S.M[M_USED2] - S.M[M_CAP2]):
        _undo_move(S, vict, t, np.int64(SSD), isnew)
        return False
    return True


@njit(cache=True)
def _room_dram(S, need):
    act = _action(S, DRAM)
    for _ in range(64):
        if need <= 0:
            return True
        S.M[M_SHORT] = -1
        vict = [np.int64(0) for _ in range(0)]
        acts = [np.int64(0) for _ in range(0)]
        H.select_begin(S, np.int64(DRAM))
        ok = H.select(S, np.int64(DRAM), need, act, vict, acts)
        if not ok and act == GATE and S.M[M_CAP2] > 0:
            ok = _walk(S, np.int64(DRAM), need, np.int64(GATE_FORCE), vict, acts)   # select_gated's forced pass
        if act == GATE:
            _tally_gated(S, np.int64(DRAM), vict, acts)
        H.select_end(S, np.int64(DRAM), ok, vict, acts)
        if not ok:
            return False
        H.dram_victims(S, vict, acts)
        before = S.M[M_USED1]
        if act == DECIDE or act == GATE:
            # per-victim actions: the demotions first, then the drops still in DRAM (NodeSim._make_room)
            dem = [np.int64(0) for _ in range(0)]
            drp = [np.int64(0) for _ in range(0)]
            for i in range(len(vict)):
                if acts[i] != DROP and S.M[M_CAP2] > 0:
                    dem.append(vict[i])
                else:
                    drp.append(vict[i])
            if len(dem) and not _demote_to_ssd(S, dem, np.int64(DRAM)):
                S.M[M_SHORT] = -1
                return False
            if len(drp):
                _drop_all(S, np.int64(DRAM), drp)
            need -= before - S.M[M_USED1]
            continue
        if act == DEMOTE:
            S.K[K_DRAM_DEMOTED] += len(vict)
        else:
            S.K[K_DRAM_DROPPED] += len(vict)
        if act == DEMOTE:
            if not _demote_to_ssd(S, vict, np.int64(DRAM)):
                S.M[M_SHORT] = -1
                return False
        else:
            _drop_all(S, np.int64(DRAM), vict)
        need -= before - S.M[M_USED1]
    return need <= 0


@njit(cache=True)
def _demote_to_dram(S, vict, t):
    isnew = [False for _ in range(0)]
    _move_down(S, vict, t, np.int64(DRAM), isnew)
    if S.M[M_USED1] > S.M[M_CAP1] and not _room_dram(S, S.M[M_USED1] - S.M[M_CAP1]):
        _undo_move(S, vict, t, np.int64(DRAM), isnew)
        return False
    return True


@njit(cache=True)
def _room_hbm(S, need):
    dest = DRAM if S.M[M_CAP1] > 0 else (SSD if S.M[M_CAP2] > 0 else NO_TIER)
    act = DEMOTE if dest != NO_TIER else DROP
    for _ in range(64):
        if need <= 0:
            return True
        S.M[M_SHORT] = -1
        vict = [np.int64(0) for _ in range(0)]
        acts = [np.int64(0) for _ in range(0)]
        if not _walk(S, np.int64(HBM), need, act, vict, acts):
            return False
        before = S.M[M_USED0]
        if dest == DRAM:
            ok = _demote_to_dram(S, vict, np.int64(HBM))
        elif dest == SSD:
            ok = _demote_to_ssd(S, vict, np.int64(HBM))
        else:
            _drop_all(S, np.int64(HBM), vict)
            ok = True
        if not ok:
            S.M[M_SHORT] = -1
            return False
        need -= before - S.M[M_USED0]
    return need <= 0


@njit(cache=True, inline="always")
def _make_room(S, t, need):
    if t == HBM:
        return _room_hbm(S, need)
    if t == DRAM:
        return _room_dram(S, need)
    return _room_ssd(S, need)


@njit(cache=True)
def _drain_writes(S):
    """``NodeSim._drain_admissions``: the SSD writes asked for, in order (room is made on the SSD
    first; a payload already on the SSD, or no longer resident, is skipped)."""
    M = S.M
    while M[M_AQN] > 0:
        n = M[M_AQN]
        if n > M[M_AQMAX]:
            M[M_AQMAX] = n
        ps = S.PX[M[M_O_AQ]:M[M_O_AQ] + n].copy()
        M[M_AQN] = 0
        if M[M_CAP2] <= 0:
            continue
        for p in ps:
            r = S.res[p]
            if r == 0 or (r & 4) != 0:
                continue
            need = M[M_USED2] + _psize(S, p) - M[M_CAP2]
            if need > 0:
                M[M_SHORT] = -1
                if not _room_ssd(S, need):
                    continue
            if S.res[p] == 0:
                continue
            _count_ssd_write(S, p)
            _add_copy(S, np.int64(SSD), p)


@njit(cache=True, inline="always")
def _pinned_bytes(S, t, path, q, states):
    """Bytes of the request's own payloads (its path, the hit STATE, its new STATEs) in tier ``t``."""
    bit = _bit(t)
    total = 0
    for c in path:
        if (S.res[2 * c] & bit) != 0:
            total += S.M[M_FAB]
    if q >= 0 and (S.res[q] & bit) != 0:
        total += _psize(S, q)
    for x in states:
        if (S.res[x] & bit) != 0:
            total += _psize(S, x)
    return total


@njit(cache=True)
def _resolve_or_trim(S, t, order, count_skipped, path, q, states):
    """Resolve the overflow of tier ``t``; what cannot fit is removed from the end of ``order``
    (deepest first). Returns the bytes not cached (0 unless ``count_skipped``)."""
    M = S.M
    ut = M_USED0 + t
    ct = M_CAP0 + t
    bit = _bit(t)
    skipped = 0
    bounded = False
    while M[ut] > M[ct]:
        if not bounded:
            bounded = True
            pinned = _pinned_bytes(S, t, path, q, states)
            if pinned > M[ct]:
                while len(order) and pinned > M[ct]:
                    p = order.pop()
                    if (S.res[p] & bit) != 0:
                        d = _remove(S, t, p, False)
                        pinned -= d
                        skipped += d
                continue
        M[M_SHORT] = -1
        if _make_room(S, t, M[ut] - M[ct]):
            break
        if len(order) == 0:
            raise RuntimeError("cluster_sim engine: tier over capacity with nothing left to trim")
        short = M[M_SHORT] if M[M_SHORT] > 0 else 1
        n_fa = 0
        for x in order:
            if (x & 1) == 0:
                n_fa += 1
        first = True
        while len(order) and (short > 0 or first):
            p = order[len(order) - 1]
            if (p & 1) == 0 and n_fa == 1 and not first:
                break
            order.pop()
            first = False
            if (p & 1) == 0:
                n_fa -= 1
            if (S.res[p] & bit) != 0:
                d = _remove(S, t, p, False)
                skipped += d
                short -= d
            if (p & 1) == 0 and n_fa == 0:
                break
    return skipped if count_skipped else 0


# ---------------------------------------------------------------------------- the request step
@njit(cache=True, inline="always")
def _checkpoints(mode, h, r, m, out):
    if m == 0:
        return
    if mode == MODE_LAST:
        if h < m:
            out.append(m)
    elif mode == MODE_LAST_AND_BRANCH:
        if r > h and r < m:
            out.append(r)
        if h < m:
            out.append(m)
    else:
        for k in range(h + 1, m + 1):
            out.append(k)


@njit(cache=True, inline="always")
def _add_path_fa(S, t, path, lo, hi, only_absent_bit):
    """Add tier-``t`` copies of the FA of ``path[lo:hi]`` that are not in tier ``only_absent_bit``'s
    bit (the tier itself: every chunk not yet in ``t``). One pass: descendant counts are strict
    suffix counts along the path. The policy hears each new copy, root first, as
    ``CacheState.add_path_fa`` tells its listeners (lru hears nothing: no list is built)."""
    if not H.has_enter(S):              # a policy that does not listen: no list is built
        _add_path_fa_bits(S, t, path, lo, hi, only_absent_bit)
        return
    added = [np.int64(0) for _ in range(0)]
    for i in range(lo, hi):
        p = 2 * path[i]
        if (S.res[p] & only_absent_bit) == 0:
            added.append(p)
    _add_path_fa_bits(S, t, path, lo, hi, only_absent_bit)
    _enter_many(S, t, added)


@njit(cache=True, inline="always")
def _add_path_fa_bits(S, t, path, lo, hi, only_absent_bit):
    bit = _bit(t)
    res = S.res
    n_add = 0
    n_born = 0
    for i in range(len(path) - 1, -1, -1):
        c = path[i]
        if n_add:
            S.dcnt[t, c] += n_add
        if n_born:
            S.dany[c] += n_born
        if lo <= i < hi:
            p = 2 * c
            was = res[p]
            if (was & only_absent_bit) == 0:
                res[p] = was | bit
                n_add += 1
                if was == 0:
                    n_born += 1
                _note_enter(S, t, p)
    S.M[M_USED0 + t] += n_add * S.M[M_FAB]


@njit(cache=True, inline="always")
def _fastest(r):
    if r & 1:
        return HBM
    if r & 2:
        return DRAM
    if r & 4:
        return SSD
    return NO_TIER


@njit(cache=True, inline="always")
def _step(S, path, counting, R, j, now):
    M = S.M
    res = S.res
    seq = M[M_SEQ] + 1
    M[M_SEQ] = seq
    M[M_COUNTING] = counting
    M[M_WR] = 0
    H.tick(S, now)
    has_state = M[M_HAS_STATE] != 0
    fab = M[M_FAB]
    m = len(path)
    # 1. match
    r = 0
    while r < m and res[2 * path[r]] != 0:
        r += 1
    h = r
    if has_state:
        h = 0
        for k in range(r - 1, -1, -1):
            if res[2 * path[k] + 1] != 0:
                h = k + 1
                break
    q = 2 * path[h - 1] + 1 if (has_state and h) else -1
    # 2. serve
    n_hbm = 0
    n_dram = 0
    for k in range(h):
        x = res[2 * path[k]]
        if x & 1:
            n_hbm += 1
        elif x & 2:
            n_dram += 1
    n_ssd = h - n_hbm - n_dram
    dram_b = n_dram * fab
    ssd_b = n_ssd * fab
    q_tier = _fastest(res[q]) if q >= 0 else NO_TIER
    if q_tier == DRAM:
        dram_b += _psize(S, q)
    elif q_tier == SSD:
        ssd_b += _psize(S, q)
    if ssd_b:
        for k in range(h):
            p = 2 * path[k]
            if (res[p] & 3) == 0:
                S.flags[p] |= F_HIT
        if q_tier == SSD:
            S.flags[q] |= F_HIT
    # 3. pins, touches (c_m .. c_1, then the hit STATE)
    for k in range(r):
        S.pin[2 * path[k]] = seq
    if q >= 0:
        S.pin[q] = seq
    for k in range(m - 1, -1, -1):
        _touch(S, 2 * path[k])
    if q >= 0:
        _touch(S, q)
    if H.has_on_access(S):
        H.on_access(S, path, h, r, q)
        if M[M_AQN] > 0:
            _drain_writes(S)
    entry = M[M_ENTRY]
    states = [np.int64(0) for _ in range(0)]
    # 4. load
    if h and (entry == HBM or entry == DRAM):
        bit = _bit(entry)
        load_q = q >= 0 and (res[q] & bit) == 0
        any_fa = False
        for k in range(h):
            if (res[2 * path[k]] & bit) == 0:
                any_fa = True
                break
        if any_fa or load_q:
            order = [np.int64(0) for _ in range(0)]
            for k in range(h):
                if (res[2 * path[k]] & bit) == 0:
                    order.append(2 * path[k])
            _add_path_fa(S, entry, path, 0, h, bit)
            if load_q:
                res[q] |= bit
                M[M_USED0 + entry] += _psize(S, q)
                _note_enter(S, entry, q)
                H.enter(S, entry, q)
                order.append(q)
            if M[M_USED0 + entry] > M[M_CAP0 + entry]:
                _resolve_or_trim(S, entry, order, np.bool_(False), path, q, states)
    # 5. insert
    skipped = 0
    pos = [np.int64(0) for _ in range(0)]
    if has_state:
        _checkpoints(M[M_MODE], h, r, m, pos)
    if entry != NO_TIER and m:
        t = entry
        if r < m:
            for k in range(r, m):
                S.pin[2 * path[k]] = seq
            _add_path_fa(S, t, path, r, m, np.uint8(7))
        spos = [np.int64(0) for _ in range(0)]
        for k in pos:
            qq = 2 * path[k - 1] + 1
            if res[qq] == 0:
                states.append(qq)
                spos.append(k)
        for qq in states:
            S.pin[qq] = seq
            _touch(S, qq)
            res[qq] |= _bit(t)
            M[M_USED0 + t] += _psize(S, qq)
            _note_enter(S, t, qq)
            H.enter(S, t, qq)
        if M[M_USED0 + t] > M[M_CAP0 + t]:
            # deepest last: by position, FA before STATE at the same position
            order = [np.int64(0) for _ in range(0)]
            i = 0
            for k in range(1, m + 1):
                if k > r:
                    order.append(2 * path[k - 1])
                while i < len(spos) and spos[i] == k:
                    order.append(states[i])
                    i += 1
            skipped = _resolve_or_trim(S, t, order, np.bool_(True), path, q, states)
        if t == SSD:
            for k in range(r, m):
                p = 2 * path[k]
                if (res[p] & 4) != 0:
                    _count_ssd_write(S, p)
            for qq in states:
                if (res[qq] & 4) != 0:
                    _count_ssd_write(S, qq)
        if H.has_on_insert(S):
            H.on_insert(S, path, r, states)
    elif m:
        skipped = (m - r) * fab
        for k in pos:
            skipped += _psize(S, 2 * path[k - 1] + 1)
    if M[M_AQN] > 0:
        _drain_writes(S)          # after on_insert, as NodeSim._insert_new
    R[j, R_H] = h
    R[j, R_R] = r
    R[j, R_M] = m
    R[j, R_N_HBM] = n_hbm
    R[j, R_N_DRAM] = n_dram
    R[j, R_N_SSD] = n_ssd
    R[j, R_Q_TIER] = q_tier
    R[j, R_DRAM_B] = dram_b
    R[j, R_SSD_B] = ssd_b
    R[j, R_SKIPPED] = skipped
    R[j, R_WR] = M[M_WR]
    for t in range(3):
        R[j, R_USED0 + t] = M[M_USED0 + t]
        R[j, R_LEFT0 + t] = M[M_LEFT0 + t]
    R[j, R_LEFTN2] = M[M_LEFTN2]
    K = S.K
    R[j, R_ADM] = K[K_ADM_FA] + K[K_ADM_STATE]
    R[j, R_ADM_HIT] = K[K_ADM_HIT_FA] + K[K_ADM_HIT_STATE]


@njit(cache=True)
def replay(S, offsets, idx, counted, arrival, j0, R):
    """Requests ``idx[j0:]`` (trace request ids; paths ``flat[offsets[i]:offsets[i+1]]``, arrival
    times ``arrival[i]``), one row of ``R`` each. Returns the index of the first request not processed: ``len(idx)``, or
    earlier when a log or heap asks to grow (``M[M_GROW]``) before a request could start.

    The state goes to the helpers as borrowed views (:mod:`cluster_sim._nrt`): every helper that
    is not inlined takes ``S``, and counting references to its ~25 arrays at each entry and exit
    cost more than the work of most calls. The caller holds ``S`` for the whole call, and no
    array of it is reallocated inside one (the wrapper grows them between calls)."""
    B = EngineState(borrow(S.M), borrow(S.K), borrow(S.res), borrow(S.stamp), borrow(S.pin), borrow(S.flags),
                    borrow(S.dcnt), borrow(S.dany), borrow(S.cred), borrow(S.cred_any), borrow(S.sb),
                    borrow(S.parent), borrow(S.depth), borrow(S.anchor), borrow(S.flat), borrow(S.log_p),
                    borrow(S.log_s), borrow(S.heap_s), borrow(S.heap_p), borrow(S.hoff), borrow(S.hcap),
                    borrow(S.hn), borrow(S.wpos), borrow(S.wfront), borrow(S.PX), borrow(S.FX), S.rng, S.pk)
    return _replay(B, borrow(offsets), borrow(idx), borrow(counted), borrow(arrival), j0, borrow(R))


@njit(cache=True)
def _replay(S, offsets, idx, counted, arrival, j0, R):
    M = S.M
    for j in range(j0, len(idx)):
        i = idx[j]
        a = offsets[i]
        b = offsets[i + 1]
        m = b - a
        # room first (compactions and growth stay out of the hot path): the log takes this
        # request's touches; a heap at most half full gets through any request (its additions
        # are bounded by its tier's resident payloads plus the request's own, see CompiledNode)
        if M[M_LOGN] + 2 * m + 2 > len(S.log_p):
            _compact_log(S)
            if M[M_LOGN] + 2 * m + 2 > len(S.log_p) or 2 * M[M_LOGN] > len(S.log_p):
                M[M_GROW] |= GROW_LOG
        for t in range(3):
            if 2 * S.hn[t] > S.hcap[t]:
                _heap_compact(S, t)
                if 4 * S.hn[t] > S.hcap[t]:
                    M[M_GROW] |= 2 << t
        H.before_request(S, j, i, m, arrival, R)
        if M[M_LOG_OUT] != 0 and M[M_OUTN] + M[M_OUTROOM] > M[M_CAP_OUT]:
            M[M_GROW] |= GROW_OUT
        if 2 * M[M_AQMAX] > M[M_CAP_AQ]:
            M[M_GROW] |= GROW_AQ
        if M[M_GROW] != 0:
            return j
        _step(S, S.flat[a:b], 1 if counted[j] else 0, R, j, arrival[i])
    return len(idx)


@njit(cache=True)
def finish_ssd(S):
    """Close the run: SSD copies still resident count as hit iff they served a reuse."""
    hit_fa = 0
    hit_state = 0
    # the arrays bound once: a field read inside the loop counts a reference in and out per read
    # (decision 141), which made this loop 12 ns per payload
    res, flags = borrow(S.res), borrow(S.flags)
    for p in range(len(res)):
        if (res[p] & 4) != 0:
            f = flags[p]
            if (f & F_ADM) != 0 and (f & F_HIT) != 0:
                if p & 1:
                    hit_state += 1
                else:
                    hit_fa += 1
            flags[p] = f & ~np.uint8(F_ADM)
    S.K[K_ADM_HIT_FA] += hit_fa
    S.K[K_ADM_HIT_STATE] += hit_state
