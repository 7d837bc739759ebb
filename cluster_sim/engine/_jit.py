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
  (``CompiledNode._policy_arrays`` says what each holds). The policy is ``M[M_POLICY]``; its
  hooks (:func:`_on_access`, :func:`_enter`, :func:`_ssd_leave`, :func:`_decide`, :func:`_admit`,
  :func:`_defer`) are called where :class:`~cluster_sim.node.NodeSim` calls the interpreted policy.

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
    if t >= WA_H0:
        _wa_heap_compact(S, t, o, n)
        return
    if t != HBM and S.M[M_POLICY] == POLICY_ORACLE:
        _or_heap_compact(S, t, o, n)
        return
    if t != HBM and S.M[M_KEYED] != 0:
        _kheap_compact(S, t, o, n)
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
        return _kpop(S, t)
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
@njit(cache=True, inline="always")
def _lk(S, p):
    """Where payload ``p``'s lru_k record starts in PX (its HIST(p, 1..K) first)."""
    return S.M[M_O_LK] + p * S.M[M_LK_Q]


@njit(cache=True, inline="always")
def _lkf(S, p):
    """Where the fields after the history start in ``p``'s record (LK_LS, LK_GPREV, ...)."""
    return S.M[M_O_LK] + p * S.M[M_LK_Q] + S.M[M_LK_K]


@njit(cache=True, inline="always")
def _lk_st(PX, f):
    """The residency status in the record whose fields start at ``f`` (ST_*)."""
    return PX[f + LK_LS] & 3


@njit(cache=True, inline="always")
def _lk_set_st(PX, f, st):
    PX[f + LK_LS] = (PX[f + LK_LS] & ~np.int64(3)) | st


@njit(cache=True, inline="always")
def _lk_key(S, p):
    b = _lk(S, p)
    return ((S.PX[b + S.M[M_LK_K] - 1] + 1) << 32) | (S.PX[b] + 1)


@njit(cache=True)
def _kpop(S, t):
    """``KeyedTierHeap.pop``: the least valid entry (key, payload) of tier ``t``, or (-1, -1)."""
    bit = _bit(t)
    can = LK_CAN1 if t == DRAM else LK_CAN2
    while S.hn[t] > 0:
        s, p = _heap_pop(S, t)
        f = _lkf(S, p)
        if S.PX[f + can] != s or (S.res[p] & bit) == 0:
            continue
        k = _lk_key(S, p)
        if k != s:
            S.PX[f + can] = k
            _heap_push(S, t, k, p)
            continue
        return s, p
    return np.int64(-1), np.int64(-1)


@njit(cache=True)
def _kheap_compact(S, t, o, n):
    """``KeyedTierHeap._rebuild``: keep the canonical entries of resident payloads (duplicates too:
    the reference keeps them), sorted by (key, payload)."""
    hs = S.heap_s[o:o + n]
    hp = S.heap_p[o:o + n]
    bit = _bit(t)
    can = LK_CAN1 if t == DRAM else LK_CAN2
    ks = np.empty(n, dtype=np.int64)
    kp = np.empty(n, dtype=np.int64)
    k = 0
    for i in range(n):
        s = hs[i]
        p = hp[i]
        if (S.res[p] & bit) != 0 and S.PX[_lkf(S, p) + can] == s:
            ks[k] = s
            kp[k] = p
            k += 1
    o1 = np.argsort(kp[:k], kind="mergesort")
    o2 = np.argsort(ks[:k][o1], kind="mergesort")     # stable: by (key, payload)
    for i in range(k):
        j = o1[o2[i]]
        hs[i] = ks[j]
        hp[i] = kp[j]
    S.hn[t] = k
    S.K[K_HEAP_COMPACTIONS] += 1


@njit(cache=True)
def _ghost_unlink(S, p, f):
    PX = S.PX
    a = PX[f + LK_GPREV]
    b = PX[f + LK_GNEXT]
    if a >= 0:
        PX[_lkf(S, a) + LK_GNEXT] = b
    else:
        S.M[M_GHEAD] = b
    if b >= 0:
        PX[_lkf(S, b) + LK_GPREV] = a
    else:
        S.M[M_GTAIL] = a
    PX[f + LK_GPREV] = -1
    PX[f + LK_GNEXT] = -1
    S.M[M_GN] -= 1


@njit(cache=True)
def _ghost_append(S, p, f):
    """``ghosts[p] = None``: ``p`` goes last unless it is a ghost already (then it keeps its place)."""
    PX = S.PX
    if _lk_st(PX, f) == ST_GHOST:
        return
    _lk_set_st(PX, f, ST_GHOST)
    tail = S.M[M_GTAIL]
    PX[f + LK_GPREV] = tail
    PX[f + LK_GNEXT] = -1
    if tail >= 0:
        PX[_lkf(S, tail) + LK_GNEXT] = p
    else:
        S.M[M_GHEAD] = p
    S.M[M_GTAIL] = p
    S.M[M_GN] += 1


@njit(cache=True)
def _ghost_trim(S):
    """``LRUKPolicy._trim_ghosts``: forget the oldest ghosts while they number more than
    ``ghost * max(resident payloads, the tiers' capacity in FA chunks)``."""
    M = S.M
    g = M[M_GHOST_F:M_GHOST_F + 1].view(np.float64)[0]
    x = M[M_NRES] if M[M_NRES] > M[M_CAPP] else M[M_CAPP]
    cap = g * x
    K = M[M_LK_K]
    while M[M_GN] > cap:
        p = M[M_GHEAD]
        f = _lkf(S, p)
        _ghost_unlink(S, p, f)
        b = f - K
        for i in range(K):
            S.PX[b + i] = -1
        S.PX[f + LK_LS] = ST_NONE        # LAST's request 0, status none
        S.K[PK_FORGOTTEN] += 1


@njit(cache=True)
def _lk_enter(S, t, p):
    """``LRUKPolicy.on_enter``."""
    f = _lkf(S, p)
    st = _lk_st(S.PX, f)
    if st != ST_MINE:
        if st == ST_GHOST:
            _ghost_unlink(S, p, f)
        _lk_set_st(S.PX, f, ST_MINE)
        S.M[M_NRES] += 1
    if t != HBM:
        k = _lk_key(S, p)
        S.PX[f + (LK_CAN1 if t == DRAM else LK_CAN2)] = k
        _heap_push(S, t, k, p)


@njit(cache=True)
def _lk_gone(S, p):
    """``LRUKPolicy.on_leave`` for a payload that is no longer resident anywhere: it becomes a ghost."""
    f = _lkf(S, p)
    if _lk_st(S.PX, f) == ST_MINE:
        S.M[M_NRES] -= 1
        _lk_set_st(S.PX, f, ST_NONE)
        _ghost_append(S, p, f)
        _ghost_trim(S)


@njit(cache=True)
def _lk_reference(S, p, seq):
    """``LRUKPolicy._reference`` of one payload (crp = request): a reference in a new request
    shifts the history and sets HIST(p, 1) to the payload's stamp; every one sets LAST."""
    b = _lk(S, p)
    K = S.M[M_LK_K]
    f = b + K
    if (S.PX[f + LK_LS] >> 2) != seq:
        for i in range(K - 1, 0, -1):
            S.PX[b + i] = S.PX[b + i - 1]
        S.PX[b] = S.stamp[p]
        S.K[PK_UNCORRELATED] += 1
    S.K[PK_REFS] += 1
    S.PX[f + LK_LS] = (seq << 2) | (S.PX[f + LK_LS] & 3)


@njit(cache=True)
def _lk_tick(S):
    """``LRUKPolicy.tick``: payloads referenced while absent that stayed absent become ghosts."""
    M = S.M
    n = M[M_PENDN]
    if n == 0:
        return
    o = M[M_O_PEND]
    for i in range(n):
        p = S.PX[o + i]
        f = _lkf(S, p)
        if _lk_st(S.PX, f) != ST_MINE:
            _ghost_append(S, p, f)
    M[M_PENDN] = 0
    _ghost_trim(S)


@njit(cache=True)
def _lk_access(S, path, q):
    """``LRUKPolicy.on_access``: absent payloads leave the ghost list (counted as ghost hits when
    their history survived) and wait for the next tick; then every payload is referenced."""
    M = S.M
    seq = M[M_SEQ]
    n = len(path) + (1 if q >= 0 else 0)
    for k in range(n):
        p = 2 * path[k] if k < len(path) else q
        if S.res[p] == 0:
            b = _lk(S, p)
            if S.PX[b] >= 0:
                S.K[PK_GHOST_HITS] += 1
            f = b + M[M_LK_K]
            if _lk_st(S.PX, f) == ST_GHOST:
                _ghost_unlink(S, p, f)
                _lk_set_st(S.PX, f, ST_NONE)
            i = M[M_PENDN]
            if i == M[M_CAP_PEND]:
                raise RuntimeError("cluster_sim engine: lru_k pending list full")
            S.PX[M[M_O_PEND] + i] = p
            M[M_PENDN] = i + 1
    for k in range(n):
        p = 2 * path[k] if k < len(path) else q
        _lk_reference(S, p, seq)


@njit(cache=True)
def _lk_leave_many(S, was_in):
    """The residency events of a batch removal (``CacheState.remove_copies``) in the reference's
    order: the removed copies by payload handle, then the STATEs of the chunks that lost their
    last FA copy, by chunk; a payload left with no copy becomes a ghost."""
    was_in.sort()
    for p in was_in:
        if S.res[p] == 0:
            _lk_gone(S, p)
    for p in was_in:
        if (p & 1) == 0 and S.res[p] == 0:
            _lk_gone(S, p | 1)


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
@njit(cache=True, inline="always")
def _or_slot(S, t, p):
    return S.M[M_O_A if t == DRAM else M_O_B] + p


@njit(cache=True, inline="always")
def _or_key(S, p):
    """The heap key of ``p`` now (the reference's (-next use, -size) as one int64)."""
    M = S.M
    rk = S.PX[M[M_O_SZR] + S.depth[p >> 1]] if p & 1 else M[M_OR_FARANK]
    return (M[M_NFUT] - _next_use(S, p)) * M[M_OR_NSZ] + rk


@njit(cache=True, inline="always")
def _or_push(S, t, p, s):
    """``heaps[t].push(p, ...)`` with key ``s``: ``p`` is (again) in the queue, with this key."""
    S.PX[_or_slot(S, t, p)] = s
    _heap_push(S, t, s, p)


@njit(cache=True)
def _or_pop(S, t):
    """``heaps[t].pop()``: the least valid entry (key, payload), which leaves the queue; (-1, -1)."""
    while S.hn[t] > 0:
        s, p = _heap_pop(S, t)
        o = _or_slot(S, t, p)
        if S.PX[o] == s:
            S.PX[o] = -1
            return s, p
    return np.int64(-1), np.int64(-1)


@njit(cache=True)
def _or_heap_compact(S, t, o, n):
    """Keep the valid entries of tier ``t``'s queue, once each, sorted by (key, payload)."""
    keep = np.empty(n, dtype=np.bool_)
    for i in range(n):
        keep[i] = S.PX[_or_slot(S, t, S.heap_p[o + i])] == S.heap_s[o + i]
    _heap_rebuild(S, t, o, n, keep)


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


@njit(cache=True)
def _or_enter(S, t, p):
    """``OraclePolicy.on_enter``: STATEs and leaf FA copies are candidates; SSD bytes are filed."""
    if t == HBM:
        return
    if (p & 1) != 0 or S.dcnt[t, p >> 1] == 0:
        _or_push(S, t, p, _or_key(S, p))
    if t == SSD:
        k = _next_use(S, p)
        _fen_add(S, k, _psize(S, p))
        S.PX[S.M[M_O_FK] + p] = k


@njit(cache=True)
def _or_leave(S, t, p):
    """``OraclePolicy.on_leave``."""
    if t == HBM:
        return
    S.PX[_or_slot(S, t, p)] = -1
    if t == SSD:
        o = S.M[M_O_FK] + p
        k = S.PX[o]
        if k >= 0:
            _fen_add(S, k, -_psize(S, p))
            S.PX[o] = -1


@njit(cache=True)
def _or_leaf(S, t, c):
    """Chunk ``c``'s FA left tier ``t`` (the counts updated): ``CacheState._leaf_events`` climbs to
    the nearest ancestor in ``t`` while no descendant is left there, and ``on_leaf`` makes a
    resident leaf a candidate again."""
    if t == HBM:
        return
    bit = _bit(t)
    a = S.anchor[c]
    for i in range(a + S.depth[c] - 2, a - 1, -1):
        y = S.flat[i]
        if S.dcnt[t, y] != 0:
            return
        if (S.res[2 * y] & bit) != 0:
            _or_push(S, t, 2 * y, _or_key(S, 2 * y))
            return


@njit(cache=True)
def _or_rekey(S, p):
    """``OraclePolicy._rekey`` of one payload (resident in DRAM or the SSD) after its next use moved."""
    r = S.res[p]
    if (r & 2) != 0 and S.PX[_or_slot(S, DRAM, p)] >= 0:
        _or_push(S, DRAM, p, _or_key(S, p))
    if (r & 4) != 0:
        if S.PX[_or_slot(S, SSD, p)] >= 0:
            _or_push(S, SSD, p, _or_key(S, p))
        k = _next_use(S, p)
        o = S.M[M_O_FK] + p
        old = S.PX[o]
        if old != k:
            sz = _psize(S, p)
            if old >= 0:
                _fen_add(S, old, -sz)
            _fen_add(S, k, sz)
            S.PX[o] = k


@njit(cache=True)
def _or_access(S, path, r):
    """``OraclePolicy.on_access``: guard the resident path; the next uses of the path's FA and of
    the STATE the request uses move to their following use; re-key what is resident."""
    M = S.M
    PX = S.PX
    res = S.res
    seq = M[M_SEQ]
    og = M[M_O_G]
    for k in range(r):
        PX[og + path[k]] = seq
    j = seq - 1
    a = PX[M[M_O_FOFF] + j]
    onfa = M[M_O_NFA]
    ofa = M[M_O_FNFA] + a
    for k in range(len(path)):
        PX[onfa + path[k]] = PX[ofa + k]
    for k in range(len(path)):
        p = 2 * path[k]
        if (res[p] & 6) != 0:
            _or_rekey(S, p)
    onst = M[M_O_NST]
    if M[M_OR_SPATH] != 0:
        ost = M[M_O_FNST] + a
        for k in range(len(path)):
            PX[onst + path[k]] = PX[ost + k]
        for k in range(len(path)):
            q = 2 * path[k] + 1
            if (res[q] & 6) != 0:
                _or_rekey(S, q)
        return
    u = PX[M[M_O_SU] + j]
    if u >= 0:
        PX[onst + u] = PX[M[M_O_FNST] + j]
        q = 2 * u + 1
        if (res[q] & 6) != 0:
            _or_rekey(S, q)


@njit(cache=True)
def _or_walk(S, t, need, out, acts):
    """``OraclePolicy.select_victims`` of tier ``t`` (DRAM or SSD): Belady within the residency
    rules, with the SSD admission of DRAM victims by the Fenwick tree (see policies.oracle). Its
    walk is its own, not :func:`_walk`: a pinned candidate (or, on the SSD, one that may not go)
    is held and comes back when a victim credits it; a DRAM victim that may only be written is
    written only once nothing else frees the bytes (``forced_writes``). Appends the victims and
    their actions; or, atomically, returns False with nothing chosen and the shortfall in
    ``M[M_SHORT]``. Chain credits as in :func:`_walk` (zero between walks)."""
    M = S.M
    bit = _bit(t)
    seq = M[M_SEQ]
    res, pin, dcnt, dany, flags = S.res, S.pin, S.dcnt, S.dany, S.flags
    cred, cred_any, parent, PX = S.cred, S.cred_any, S.parent, S.PX
    INF = M[M_NFUT]
    nsz = M[M_OR_NSZ]
    og = M[M_O_G]
    ssd_on = M[M_CAP2] > 0
    held_s = [np.int64(0) for _ in range(0)]
    held_p = [np.int64(0) for _ in range(0)]
    take_s = [np.int64(0) for _ in range(0)]
    forced_s = [np.int64(0) for _ in range(0)]
    forced_p = [np.int64(0) for _ in range(0)]
    credited = [np.int64(0) for _ in range(0)]
    credited_any = [np.int64(0) for _ in range(0)]
    n = np.zeros(8, dtype=np.int64)     # this call's counts, PK_OR_WRITTEN.. order (kept on success)
    fi = 0
    freed = 0
    admitted = 0
    start = len(out)
    ok = True
    while freed < need:
        s, p = _or_pop(S, t)
        last_resort = False
        if p < 0:
            if fi < len(forced_p):          # nothing else can free the bytes: write them after all
                s = forced_s[fi]
                p = forced_p[fi]
                fi += 1
                last_resort = True
            else:
                ok = False
                break
        if pin[p] == seq:
            if (flags[p] & F_HELD) == 0:
                flags[p] |= F_HELD
                held_s.append(s)
                held_p.append(p)
            continue
        fa = (p & 1) == 0
        c = p >> 1
        if fa:
            d = dcnt[t, c]
            if d != 0 and d != cred[c]:
                continue        # not a leaf of the tier: it comes back (on_leaf, or below) once it is one
        r = res[p]
        last = r == bit
        droppable = True
        if fa and last:
            da = dany[c]
            droppable = ((da == 0 or da == cred_any[c]) and not (res[p | 1] != 0 and pin[p | 1] == seq)
                         and PX[og + c] != seq)
        nu = INF - s // nsz
        sz = _psize(S, p)
        a = DROP
        why = 0
        if t == SSD:
            if not droppable:
                if (flags[p] & F_HELD) == 0:
                    flags[p] |= F_HELD
                    held_s.append(s)
                    held_p.append(p)
                continue
            why = PK_OR_SSD_EV
        elif (r & 5) != 0:                  # a valid SSD copy, or an HBM copy that comes back later
            why = PK_OR_OTHER
        elif nu >= INF or not ssd_on:
            if droppable:
                why = PK_OR_NEVER
            elif not ssd_on:
                if (flags[p] & F_HELD) == 0:
                    flags[p] |= F_HELD
                    held_s.append(s)
                    held_p.append(p)
                continue
            elif last_resort:
                a = DEMOTE
                why = PK_OR_FORCED
            else:
                forced_s.append(s)
                forced_p.append(p)
                continue
        else:
            room = M[M_CAP2] - M[M_USED2] - admitted + (M[M_OR_FTOT] - _fen_prefix(S, nu))
            if room >= sz:
                a = DEMOTE
                why = PK_OR_WRITTEN
            elif droppable:
                why = PK_OR_NO_ROOM
            elif last_resort:
                a = DEMOTE
                why = PK_OR_FORCED
            else:
                forced_s.append(s)
                forced_p.append(p)
                continue
        if a == DEMOTE:
            admitted += sz
        take_s.append(s)
        out.append(p)
        acts.append(a)
        freed += sz
        n[why - PK_OR_WRITTEN] += 1
        if t == SSD and nu >= INF:
            n[PK_OR_SSD_NEVER - PK_OR_WRITTEN] += 1
        if fa:
            par = parent[c]
            if par >= 0:
                y = _chain_credit(S, t, c, bit, last and (a == DROP or t == SSD), credited, credited_any)
                # its parent (prefix closure) and nearest ancestor in the tier (leaf-first) may now leave
                for k in range(2):
                    x = par if k == 0 else y
                    if x < 0 or (k == 1 and x == par):
                        continue
                    f = 2 * x
                    if (flags[f] & F_HELD) != 0:
                        flags[f] &= ~np.uint8(F_HELD)
                        _or_push(S, t, f, _or_key(S, f))
                    elif ((res[f] & bit) != 0 and (dcnt[t, x] == 0 or dcnt[t, x] == cred[x])
                          and PX[_or_slot(S, t, f)] < 0):
                        _or_push(S, t, f, _or_key(S, f))    # a leaf now, counting this call's victims
    _clear_credits(S, credited, credited_any)
    for i in range(len(held_p)):
        x = held_p[i]
        if (flags[x] & F_HELD) != 0:
            flags[x] &= ~np.uint8(F_HELD)
            _or_push(S, t, x, held_s[i])
    for i in range(fi, len(forced_p)):
        _or_push(S, t, forced_p[i], forced_s[i])
    if not ok:
        for i in range(len(take_s)):
            _or_push(S, t, out[start + i], take_s[i])
        while len(out) > start:
            out.pop()
            acts.pop()
        S.K[PK_OR_FAILED] += 1
        M[M_SHORT] = need - freed
        return False
    for i in range(8):
        S.K[PK_OR_WRITTEN + i] += n[i]
    return True

# ---------------------------------------------------------------------------- workload_aware
# policies.workload_aware on flat arrays. Its queues (one LazyHeap per category and tier, entries ordered
# by (stamp when filed, payload)) are heaps WA_H0 + 2 w + (t - 1) of the heap arrays: an entry (key, p) is
# valid while p is filed in that category's queue (qcat, segment WQ) under that key (segment WK; -1 once
# popped: LazyHeap.pop leaves qcat as it is). The reuse fits are computed by the wrapper with the
# reference's own code (policies.workload_aware.ReuseFits) and given in FX; the categories of the requests
# in segment WC.
@njit(cache=True, inline="always")
def _wa_heap(t, w):
    return WA_H0 + 2 * w + (t - 1)


@njit(cache=True, inline="always")
def _wa_slot(S, t, p):
    """Where payload ``p``'s entries for tier ``t`` are in segments WQ and WK (from their starts)."""
    return (t - 1) * len(S.res) + p


@njit(cache=True, inline="always")
def _wa_push(S, t, w, p, key):
    """``queues[t][w].push(p, key, p)`` with ``qcat[t][p] = w``."""
    i0 = (t - 1) * len(S.res)
    _wa_push_a(S.heap_s, S.heap_p, S.hn, S.hcap, S.hoff, S.PX, S.M[M_O_WQ] + i0, S.M[M_O_WK] + i0, t, w, p, key)


@njit(cache=True, inline="always")
def _wa_push_a(hs, hp, hn, hcap, hoff, PX, oq, ok, t, w, p, key):
    """:func:`_wa_push` on the arrays (``oq`` / ``ok``: tier ``t``'s part of segments WQ / WK)."""
    PX[oq + p] = w
    PX[ok + p] = key
    h = _wa_heap(t, w)
    _heap_push_a(hs, hp, hn, hcap, hoff[h], h, key, p)


@njit(cache=True, inline="always")
def _wa_top_a(hs, hp, hn, hoff, PX, oq, ok, t, w):
    """``queues[t][w].peek()``: its least valid entry (key, payload), or (-1, -1); stale entries on
    top are popped."""
    h = _wa_heap(t, w)
    o = hoff[h]
    while hn[h] > 0:
        s = hs[o]
        p = hp[o]
        if PX[oq + p] == w and PX[ok + p] == s:
            return s, p
        _heap_pop_a(hs, hp, hn, o, h)
    return np.int64(-1), np.int64(-1)


@njit(cache=True)
def _wa_heap_compact(S, h, o, n):
    """Keep the valid entries of a category queue, once each, sorted by (key, payload)."""
    t = 1 + ((h - WA_H0) & 1)
    w = (h - WA_H0) >> 1
    i0 = (t - 1) * len(S.res)
    oq = S.M[M_O_WQ] + i0
    ok = S.M[M_O_WK] + i0
    keep = np.empty(n, dtype=np.bool_)
    for i in range(n):
        p = S.heap_p[o + i]
        keep[i] = S.PX[oq + p] == w and S.PX[ok + p] == S.heap_s[o + i]
    _heap_rebuild(S, h, o, n, keep)


@njit(cache=True)
def _wa_enter(S, t, p):
    """``WorkloadAwarePolicy.on_enter``: filed under its category (the request's if it has none)."""
    if t == HBM:
        return
    o = S.M[M_O_A] + p
    w = S.PX[o]
    if w < 0:
        w = S.M[M_WA_CAT]
        S.PX[o] = w
    _wa_push(S, t, w, p, S.stamp[p])


@njit(cache=True, inline="always")
def _wa_leave(S, t, p):
    """``WorkloadAwarePolicy.on_leave``."""
    if t == HBM:
        return
    i = _wa_slot(S, t, p)
    S.PX[S.M[M_O_WQ] + i] = -1
    S.PX[S.M[M_O_WK] + i] = -1


@njit(cache=True)
def _wa_touch(S, p, w, now):
    """``_recategorise`` of one payload to category ``w`` (a filed one moves to ``w``'s queue with its
    stamp), then ``last_t[p] = now``."""
    o = S.M[M_O_A] + p
    if S.PX[o] != w:
        S.PX[o] = w
        for t in range(DRAM, SSD + 1):
            if S.PX[S.M[M_O_WQ] + _wa_slot(S, t, p)] >= 0:
                _wa_push(S, t, w, p, S.stamp[p])
    S.FX[FXW_LT + p] = now


@njit(cache=True)
def _wa_access(S, path, r, q):
    """``WorkloadAwarePolicy.on_access`` (its statistics are the wrapper's): guard the resident path,
    recategorise the payloads and stamp their time."""
    M = S.M
    seq = M[M_SEQ]
    og = M[M_O_G]
    for k in range(r):
        S.PX[og + path[k]] = seq
    w = M[M_WA_CAT]
    now = S.FX[FXW_NOW]
    for k in range(len(path)):
        _wa_touch(S, 2 * path[k], w, now)
    if q >= 0:
        _wa_touch(S, q, w, now)


@njit(cache=True, inline="always")
def _wa_score_a(FX, f, p, now):
    """``WorkloadAwarePolicy.score`` (the reference's arithmetic, in its order; ``f``: the fit of the
    payload's category in FX)."""
    d = now - FX[FXW_LT + p]
    if d > FX[f + 2]:
        return 0.0
    x = 0.0 if 0.0 > d else d            # max(d, 0.0)
    return FX[f] * math.exp(-FX[f + 1] * x) * FX[f + 3]


@njit(cache=True, inline="always")
def _wa_may_leave_a(pin, flags, dcnt, cred, res, dany, cred_any, PX, og, t, p, action_drop, seq, bit):
    """``select_victims``' ``may_leave``: not pinned nor chosen; an FA copy a tentative leaf of the
    tier and, when its last copy would go, without resident descendants, pinned STATE or guard
    (``og``: segment G, the request's guard)."""
    if pin[p] == seq or (flags[p] & F_WCH) != 0:
        return False
    if (p & 1) == 0:
        c = p >> 1
        d = dcnt[t, c]
        if d != 0 and d != cred[c]:
            return False
        if action_drop and res[p] == bit:
            da = dany[c]
            if da != 0 and da != cred_any[c]:
                return False
            q = p | 1
            if (res[q] != 0 and pin[q] == seq) or PX[og + c] == seq:
                return False
    return True


@njit(cache=True)
def _wa_walk(S, t, need, out, acts):
    """``WorkloadAwarePolicy.select_victims`` of tier ``t`` (DRAM or SSD): the victim is the head
    (over the category queues) with the least (score, -depth, key, payload); a head that may not
    leave now is skipped for this call (and reconsidered when a victim credits it); a head whose key
    is stale is re-filed under its stamp (``requeued``). Appends the victims and their actions; or,
    atomically, returns False with nothing chosen and the shortfall in ``M[M_SHORT]`` (the counts of
    heads scored, re-filed and dead victims stay, as the reference's do). Chain credits as in
    :func:`_walk` (zero between walks)."""
    M, K = S.M, S.K
    bit = _bit(t)
    seq = M[M_SEQ]
    now = S.FX[FXW_NOW]
    ncat = M[M_WA_NCAT]
    demote_ok = t == DRAM and M[M_CAP2] > 0
    theta_on = M[M_WA_THETA] != 0
    theta = S.FX[FXW_THETA]
    res, flags, parent, depth, stamp = S.res, S.flags, S.parent, S.depth, S.stamp
    # the state's arrays bound once: no helper taking S in the loop (decision 141)
    hs_, hp_, hn, hcap, hoff, PX, FX = S.heap_s, S.heap_p, S.hn, S.hcap, S.hoff, S.PX, S.FX
    pin, dcnt, dany, cred, cred_any, anchor, flat, sb = S.pin, S.dcnt, S.dany, S.cred, S.cred_any, S.anchor, S.flat, S.sb
    i0 = (t - 1) * len(res)
    oq = M[M_O_WQ] + i0
    ok_ = M[M_O_WK] + i0
    og = M[M_O_G]
    fit = M[M_WA_FIT]
    hst = np.zeros(ncat, dtype=np.int64)          # heads: 0 not computed, 1 none, 2 (hsc, hdep, hkey, hp)
    hsc = np.zeros(ncat, dtype=np.float64)
    hdep = np.zeros(ncat, dtype=np.int64)
    hkey = np.zeros(ncat, dtype=np.int64)
    hp = np.zeros(ncat, dtype=np.int64)
    held_w = [np.int64(0) for _ in range(0)]
    held_s = [np.int64(0) for _ in range(0)]
    sk_w = [np.int64(0) for _ in range(0)]
    sk_s = [np.int64(0) for _ in range(0)]
    sk_p = [np.int64(0) for _ in range(0)]
    credited = [np.int64(0) for _ in range(0)]
    credited_any = [np.int64(0) for _ in range(0)]
    start = len(out)
    freed = 0
    ok = True
    while freed < need:
        bi = -1
        for w in range(ncat):
            if hst[w] == 0:
                hst[w] = 1
                while True:
                    s, p = _wa_top_a(hs_, hp_, hn, hoff, PX, oq, ok_, t, w)
                    if p < 0:
                        break
                    h = _wa_heap(t, w)
                    if stamp[p] != s:                 # touched since: re-key (stamps only grow)
                        _heap_pop_a(hs_, hp_, hn, hoff[h], h)
                        _wa_push_a(hs_, hp_, hn, hcap, hoff, PX, oq, ok_, t, w, p, stamp[p])
                        K[PK_WA_REQUEUED] += 1
                        continue
                    if not _wa_may_leave_a(pin, flags, dcnt, cred, res, dany, cred_any, PX, og, t, p,
                                           not demote_ok, seq, bit):
                        _heap_pop_a(hs_, hp_, hn, hoff[h], h)     # _wa_take
                        PX[ok_ + p] = -1
                        flags[p] |= F_WSK
                        sk_w.append(w)
                        sk_s.append(s)
                        sk_p.append(p)
                        continue
                    hsc[w] = _wa_score_a(FX, fit + 4 * w, p, now)
                    K[PK_WA_SCORED] += 1
                    hdep[w] = -depth[p >> 1]
                    hkey[w] = s
                    hp[w] = p
                    hst[w] = 2
                    break
            if hst[w] == 2:
                if bi < 0:
                    bi = w
                elif hsc[w] != hsc[bi]:
                    if hsc[w] < hsc[bi]:
                        bi = w
                elif hdep[w] != hdep[bi]:
                    if hdep[w] < hdep[bi]:
                        bi = w
                elif hkey[w] != hkey[bi]:
                    if hkey[w] < hkey[bi]:
                        bi = w
                elif hp[w] < hp[bi]:
                    bi = w
        if bi < 0:
            ok = False
            break
        w = bi
        s = hkey[w]
        p = hp[w]
        sc = hsc[w]
        h = _wa_heap(t, w)
        _heap_pop_a(hs_, hp_, hn, hoff[h], h)                 # _wa_take
        PX[ok_ + p] = -1
        held_w.append(w)
        held_s.append(s)
        hst[w] = 0
        if not demote_ok:
            a = DROP
        elif theta_on and sc <= theta and _wa_may_leave_a(pin, flags, dcnt, cred, res, dany, cred_any, PX, og, t,
                                                          p, np.bool_(True), seq, bit):
            a = DROP
        else:
            a = DEMOTE
        if (p & 1) == 0:
            c = p >> 1
            if parent[c] >= 0:
                y = _chain_credit_a(res, parent, anchor, depth, flat, dcnt, dany, cred, cred_any, t, c, bit,
                                    (a == DROP or t == SSD) and res[p] == bit, credited, credited_any)
                if y >= 0:
                    f = 2 * y
                    if (flags[f] & F_WSK) != 0:       # skipped: reconsidered now that it may be a leaf
                        flags[f] &= ~np.uint8(F_WSK)
                        for i in range(len(sk_p) - 1, -1, -1):
                            if sk_p[i] == f:
                                _wa_push_a(hs_, hp_, hn, hcap, hoff, PX, oq, ok_, t, sk_w[i], f, sk_s[i])
                                hst[sk_w[i]] = 0
                                break
        flags[p] |= F_WCH
        out.append(p)
        acts.append(a)
        freed += _psize_a(M, sb, depth, p)
        if sc == 0.0:
            K[PK_WA_DEAD] += 1
    for x in credited:
        cred[x] = 0
    for x in credited_any:
        cred_any[x] = 0
    for i in range(len(sk_p) - 1, -1, -1):            # the latest skip of each payload still skipped
        x = sk_p[i]
        if (flags[x] & F_WSK) != 0:
            flags[x] &= ~np.uint8(F_WSK)
            _wa_push_a(hs_, hp_, hn, hcap, hoff, PX, oq, ok_, t, sk_w[i], x, sk_s[i])
    for i in range(start, len(out)):
        flags[out[i]] &= ~np.uint8(F_WCH)
    if not ok:
        for i in range(len(held_w)):
            _wa_push_a(hs_, hp_, hn, hcap, hoff, PX, oq, ok_, t, held_w[i], out[start + i], held_s[i])
        while len(out) > start:
            out.pop()
            acts.pop()
        K[PK_WA_FAILED] += 1
        M[M_SHORT] = need - freed
        return False
    for i in range(start, len(out)):
        if t == SSD:
            K[PK_WA_SSD_EV] += 1
        elif acts[i] == DEMOTE:
            K[PK_WA_DEMOTED] += 1
        else:
            K[PK_WA_DROPPED] += 1
    return True


# ---------------------------------------------------------------------------- policy hooks
@njit(cache=True, inline="always")
def _next_use(S, p):
    """oracle_admission: the next request of the node's stream using payload ``p`` (M_NFUT: none)."""
    return S.PX[S.M[M_O_NST if p & 1 else M_O_NFA] + (p >> 1)]


@njit(cache=True, inline="always")
def _event(S, p):
    """oracle_admission: the admission event of ``p`` now, (payload, its next use) as one key."""
    return p * (S.M[M_NFUT] + 1) + _next_use(S, p)


@njit(cache=True)
def _enter_many(S, t, ps):
    """:func:`_enter` of each payload of ``ps`` (distinct, new in ``t``), in order; Gandalf's in one
    batch (its per-payload call rebuilds its state's views each time)."""
    if len(ps) == 0:
        return
    if S.M[M_POLICY] == POLICY_GANDALF:
        _gd_enter_many(S, t, ps)
        return
    if S.M[M_POLICY] == POLICY_WORKLOAD_AWARE:
        if t == HBM:
            return
        # _wa_enter of each, on the arrays (decision 141)
        M, PX, stamp = S.M, S.PX, S.stamp
        oa = M[M_O_A]
        cat = M[M_WA_CAT]
        i0 = (t - 1) * len(S.res)
        oq, ok = M[M_O_WQ] + i0, M[M_O_WK] + i0
        hs, hp, hn, hcap, hoff = S.heap_s, S.heap_p, S.hn, S.hcap, S.hoff
        for p in ps:
            w = PX[oa + p]
            if w < 0:
                w = cat
                PX[oa + p] = w
            _wa_push_a(hs, hp, hn, hcap, hoff, PX, oq, ok, t, w, p, stamp[p])
        return
    if S.M[M_POLICY] == POLICY_MARCONI:
        MC.mc_enter_many(S.PX, S.res, S.parent, t, ps)       # on the arrays (decision 141)
        return
    for p in ps:
        _enter(S, t, p)


@njit(cache=True, inline="always")
def _enter(S, t, p):
    """``p`` got a copy in tier ``t`` (the policy's ``on_enter(t, p)``, after the residency bits)."""
    pol = S.M[M_POLICY]
    if pol == POLICY_LRU_K:
        _lk_enter(S, t, p)
    elif pol == POLICY_ORACLE:
        _or_enter(S, t, p)
    elif pol == POLICY_WORKLOAD_AWARE:
        _wa_enter(S, t, p)
    elif pol == POLICY_GANDALF:
        _gd_enter(S, t, p)
    elif pol == POLICY_MARCONI:
        MC.mc_enter(S.PX, S.res, S.parent, t, p)
    elif pol == POLICY_GANDALF_STRICT:
        # an FA copy entering DRAM without an SSD copy asks for its write (states never go to the SSD)
        if t == DRAM and (p & 1) == 0 and S.M[M_CAP2] > 0 and (S.res[p] & 4) == 0:
            _request_write(S, p)
    elif pol == POLICY_ORACLE_ADM:
        if t == SSD:
            S.PX[S.M[M_O_A] + p] = _event(S, p)
            S.flags[p] &= ~np.uint8(F_OHIT)
    elif pol == POLICY_WRITE_THROUGH:
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
def _leave(S, t, p):
    """``p``'s copy left tier ``t`` (``on_leave(t, p)``) for the policies that keep queues of their own."""
    if S.M[M_POLICY] == POLICY_ORACLE:
        _or_leave(S, t, p)
    elif S.M[M_POLICY] == POLICY_GANDALF:
        _gd_leave(S, t, p)
    elif S.M[M_POLICY] == POLICY_MARCONI:
        MC.mc_leave(S.PX, S.res[p], S.parent, t, p)
    else:
        _wa_leave(S, t, p)


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
def _ssd_leave(S, p):
    """``p``'s SSD copy left (``on_leave(SSD, p)``): oracle_admission logs the event's outcome."""
    if S.M[M_POLICY] == POLICY_ORACLE_ADM:
        o = S.M[M_O_A] + p
        k = S.PX[o]
        if k >= 0:
            S.PX[o] = -1
            if S.M[M_LOG_OUT] != 0:
                n = S.M[M_OUTN]
                if n == S.M[M_CAP_OUT]:
                    S.M[M_OUT_OVERFLOW] = 1      # the wrapper redoes this pass with a larger log
                else:
                    # (event, served from the SSD) as one number: 2 * event + served
                    S.PX[S.M[M_O_OUT] + n] = 2 * k + (1 if (S.flags[p] & F_OHIT) != 0 else 0)
                    S.M[M_OUTN] = n + 1


@njit(cache=True, inline="always")
def _oracle_why_not(S, p):
    """oracle_admission's ``_why_not``: -1 (write DRAM victim ``p``: it has a valid SSD copy, or
    nothing says its copy goes unused), PK_NEVER_USED or PK_UNUSED_BEFORE."""
    if (S.res[p] & 4) != 0:
        return -1
    if _next_use(S, p) >= S.M[M_NFUT]:
        return PK_NEVER_USED
    if S.M[M_HAS_LABELS] != 0:
        # labels: sorted 2 * event + (used from the SSD); an event labelled unused is 2 * event
        k = _event(S, p)
        o = S.M[M_O_LAB]
        n = S.M[M_N_LAB]
        i = np.searchsorted(S.PX[o:o + n], 2 * k)
        if i < n and S.PX[o + i] == 2 * k:
            return PK_UNUSED_BEFORE
    return -1


@njit(cache=True, inline="always")
def _decide(S, t, p):
    """The policy's action for victim ``p`` of tier ``t`` under a DECIDE walk."""
    if S.M[M_POLICY] == POLICY_GANDALF_STRICT:
        return DROP if (p & 1) != 0 else DEMOTE      # states stay off the SSD; FA go down to it
    return DEMOTE if _oracle_why_not(S, p) < 0 else DROP


@njit(cache=True, inline="always")
def _on_access(S, path, h, r, q):
    """The policy's ``on_access`` (after the match, pins and touches, before the load)."""
    if S.M[M_POLICY] == POLICY_ORACLE:
        _or_access(S, path, r)
    elif S.M[M_POLICY] == POLICY_MARCONI:
        MC.mc_access(S.PX, path, r, S.M[M_SEQ])
    elif S.M[M_POLICY] == POLICY_WORKLOAD_AWARE:
        _wa_access(S, path, r, q)
    elif S.M[M_POLICY] == POLICY_ORACLE_ADM:
        res = S.res
        for k in range(h):
            p = 2 * path[k]
            if (res[p] & 7) == 4:
                S.flags[p] |= F_OHIT
        if q >= 0 and (res[q] & 7) == 4:
            S.flags[q] |= F_OHIT
        M = S.M
        PX = S.PX
        a = PX[M[M_O_FOFF] + M[M_SEQ] - 1]
        ofa, ost, onfa, onst = M[M_O_FNFA] + a, M[M_O_FNST] + a, M[M_O_NFA], M[M_O_NST]
        for k in range(len(path)):
            c = path[k]
            PX[onfa + c] = PX[ofa + k]
            PX[onst + c] = PX[ost + k]
    elif S.M[M_POLICY] == POLICY_LRU_K:
        _lk_access(S, path, q)
    elif S.M[M_POLICY] == POLICY_GANDALF_STRICT:
        _gs_access(S, path)
    elif S.M[M_POLICY] == POLICY_GANDALF:
        _gd_access(S, path)
    elif S.M[M_POLICY] == POLICY_HOT_PREFIX:
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
    elif S.M[M_POLICY] == POLICY_WRITE_THROUGH:
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


@njit(cache=True)
def _on_insert(S, path, r, states):
    """The policy's ``on_insert`` with the payloads this request created that are still resident
    (new FA ``c_{r+1} .. c_m``, then the new STATEs), after the insert's overflow was resolved."""
    pol = S.M[M_POLICY]
    seq = S.M[M_SEQ]
    n = len(path) - r + len(states)
    made = [np.int64(0) for _ in range(0)]      # gandalf, reuse=hints: the new STATEs still resident
    for k in range(n):
        p = 2 * path[r + k] if k < len(path) - r else states[k - (len(path) - r)]
        if S.res[p] == 0:
            continue
        if pol == POLICY_LRU_K:
            _lk_reference(S, p, seq)
        elif pol == POLICY_WORKLOAD_AWARE:
            _wa_touch(S, p, S.M[M_WA_CAT], S.FX[FXW_NOW])
        elif pol == POLICY_GANDALF:
            if (p & 1) != 0:
                _gd_inserted(S, p)
                if _gi(S, GI_GX)[GX_HINTS]:
                    made.append(p)
        elif pol == POLICY_GANDALF_STRICT:
            if (p & 1) != 0:
                o = S.M[M_O_G] + (p >> 1)
                if S.PX[o] < 0:          # the first checkpoint ever created at this chunk
                    S.PX[o] = 0
                    S.K[PK_G_NCKPT] += 1
        elif pol == POLICY_HOT_PREFIX:
            ob = S.M[M_O_B] + p
            if S.PX[ob] != seq:          # a STATE created by this request: heat from zero, one reference
                S.PX[S.M[M_O_A] + p] = 1
                S.PX[ob] = seq
    if len(made):
        qs = np.empty(len(made), dtype=np.int64)
        for k in range(len(made)):
            qs[k] = made[k]
        _gd_est_created(S, qs)


@njit(cache=True, inline="always")
def _admit(S, t, p):
    """A gated walk's admission of DRAM victim ``p`` without a valid SSD copy (write_through: its
    write was asked for in this request step and is still queued; lru_k: K references, ghost history
    included; hot_prefix: heat >= F, i.e. a reference count >= ceil(F))."""
    pol = S.M[M_POLICY]
    if pol == POLICY_LRU_K:
        return S.PX[_lk(S, p) + S.M[M_LK_K] - 1] >= 0
    if pol == POLICY_DYNAMIC_RANDOM:
        return _dr_admit(S, p)
    if pol == POLICY_HOT_PREFIX:
        return S.PX[S.M[M_O_A] + p] >= S.M[M_THRESH]
    return S.PX[S.M[M_O_B] + p] == S.M[M_SEQ]


@njit(cache=True, inline="always")
def _defer(S, t, p):
    """A gated walk considers ``p`` only once every other candidate has been (lru_k: a payload
    referenced within the correlated-reference period, i.e. by the request being processed)."""
    if S.M[M_POLICY] == POLICY_LRU_K:
        return (S.PX[_lkf(S, p) + LK_LS] >> 2) == S.M[M_SEQ]
    return False


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


@njit(cache=True)
def _tally_dram(S, vict, acts):
    """oracle_admission's counters of a DRAM selection (before it is carried out)."""
    for i in range(len(vict)):
        p = vict[i]
        if (S.res[p] & 4) != 0:
            continue
        why = _oracle_why_not(S, p)
        if acts[i] == DROP:
            S.K[why] += 1
        elif why < 0:
            S.K[PK_ADMITTED] += 1
        else:
            S.K[PK_FORCED] += 1


# ---------------------------------------------------------------------------- gandalf, placement=strict
# GandalfPolicy(placement="strict"): LRU walks leaf-first in every tier; a DRAM victim is demoted to the
# SSD if it is an FA chunk (written unless a valid copy is there) and dropped if it is a STATE; an FA copy
# entering DRAM without an SSD copy asks for its write (_enter). Its statistics are the STATE demand
# counts it reports (on_access / on_insert); its estimates play no part under strict placement.
@njit(cache=True)
def _gs_access(S, path):
    """``on_access``'s STATE demand: the deepest chunk of ``path`` at which a checkpoint was ever created."""
    og = S.M[M_O_G]
    for k in range(len(path) - 1, -1, -1):
        o = og + path[k]
        d = S.PX[o]
        if d >= 0:
            S.PX[o] = d + 1
            if d == 0:
                S.K[PK_G_NDEM] += 1
            elif d == 1:
                S.K[PK_G_NDEM2] += 1
            return


@njit(cache=True)
def _gs_tally(S, vict, acts):
    """``GandalfPolicy._count`` of each victim of a DRAM selection (before it is carried out)."""
    for i in range(len(vict)):
        p = vict[i]
        st = (p & 1) != 0
        if acts[i] == DROP:
            S.K[PK_G_DROPS_STATE if st else PK_G_DROPS_FA] += 1
        else:
            S.K[PK_G_MOVES_STATE if st else PK_G_MOVES_FA] += 1
            if (S.res[p] & 4) != 0:
                S.K[PK_G_MOVES_FREE] += 1



# ---------------------------------------------------------------------------- gandalf (capacity-aware)
# GandalfPolicy on the engine: its own kernels (policies._gandalf_jit: the two lazy heaps, the victim
# selections, the residency events), called where CacheState tells the interpreted policy, with the
# arrays the interpreted policy would hand them. Its estimates here are reuse=rate (decision 135).
@njit(cache=True, inline="always")
def _gt(S, k, dt):
    """Gandalf's int segment ``k`` of element type ``dt`` (its ``GI_DTYPES`` type; a borrowed view)."""
    return seg_view(S.PX, S.PX[2 * k], S.PX[2 * k + 1], dt)


@njit(cache=True, inline="always")
def _gi(S, k):
    """Gandalf's int64 segment ``k`` (a borrowed view)."""
    return _gt(S, k, np.int64)


@njit(cache=True, inline="always")
def _gf(S, k):
    """Gandalf's float64 segment ``k`` (a borrowed view: a slice would carry FX's reference count, and
    every inlined key function counts each array of its tuples in and out)."""
    return seg_view(S.FX, 8 * S.PX[GF0 + k], 8 * S.PX[GF0 + k + 1], np.float64)


@njit(cache=True, inline="always")
def _gd_c(S):
    """The chunk arrays Gandalf's kernels take (GJ's ``C``), borrowed: its key functions are inlined,
    and an inlined call counts every array of its tuples in and out (30% of a re-key's time when
    they were counted)."""
    return (borrow(S.res), borrow(S.pin), _gi(S, GI_SBX), borrow(S.parent), borrow(S.depth), borrow(S.anchor),
            borrow(S.flat), borrow(S.dcnt[1]), borrow(S.dcnt[2]), borrow(S.dany))


@njit(cache=True, inline="always")
def _gd_s(S):
    return (_gf(S, GF_TF), _gf(S, GF_TL), _gt(S, GI_HITS, np.int32), _gt(S, GI_SDEM, np.uint8),
            _gf(S, GF_POPP),
            _gf(S, GF_CRC), _gf(S, GF_CRCC), _gf(S, GF_EST))


@njit(cache=True, inline="always")
def _gd_table(S, k):
    """Heap entry table ``k`` (GF_CST / GF_SST) as the kernels take it: ``store[0]`` is the table."""
    t = _gf(S, k)
    return t.reshape((1, len(t) // 3, 3))


@njit(cache=True, inline="always")
def _gd_hc(S):
    return (_gd_table(S, GF_CST), _gt(S, GI_CKV, np.int32), _gt(S, GI_CMEM, np.uint8), _gi(S, GI_CMETA))


@njit(cache=True, inline="always")
def _gd_hs(S):
    return (_gd_table(S, GF_SST), _gt(S, GI_SKV, np.int32), _gt(S, GI_SMEM, np.uint8), _gi(S, GI_SMETA))


@njit(cache=True, inline="always")
def _gd_td(S):
    i4, u2 = np.int32, np.uint16
    return (_gt(S, GI_TD0, i4), _gt(S, GI_TD1, u2), _gt(S, GI_TD2, i4), _gt(S, GI_TD3, u2), _gt(S, GI_TD4, u2))


@njit(cache=True, inline="always")
def _gd_ts(S):
    i4, u2 = np.int32, np.uint16
    return (_gt(S, GI_TS0, i4), _gt(S, GI_TS1, u2), _gt(S, GI_TS2, i4), _gt(S, GI_TS3, u2), _gt(S, GI_TS4, u2))


@njit(cache=True, inline="always")
def _gnow(S):
    return S.FX[S.PX[GF0 + GF_GN]]


@njit(cache=True)
def _gd_enter(S, t, p):
    """``on_enter(t, p)`` (one payload: as CacheState's batches, whose payloads are distinct)."""
    GJ._enter_one(_gd_c(S), _gd_s(S), _gf(S, GF_P), _gi(S, GI_F), _gd_hc(S), _gd_hs(S), t, _gnow(S), p)


@njit(cache=True)
def _gd_enter_many(S, t, ps):
    """``on_enter(t, p)`` of each of ``ps`` (distinct, typed list), in one call: the same pushes in the
    same order as one call per payload (:func:`GJ._enter`: no push changes a later payload's test)."""
    n = len(ps)
    if n == 1:
        _gd_enter(S, t, ps[0])
        return
    a = np.empty(n, dtype=np.int64)
    for i in range(n):
        a[i] = ps[i]
    GJ._enter(_gd_c(S), _gd_s(S), _gf(S, GF_P), _gi(S, GI_F), _gd_hc(S), _gd_hs(S), t, _gnow(S), a)


@njit(cache=True)
def _gd_leave(S, t, p):
    """``on_leave(t, p)``: the copy leaves the tier's heap (its queued discard, as _JitHeap's)."""
    if t == DRAM:
        mem = _gt(S, GI_CMEM, np.uint8)
        if mem[p]:
            GJ.h_forget(_gt(S, GI_CKV, np.int32), mem, _gi(S, GI_CMETA), p)
    elif t == SSD:
        mem = _gt(S, GI_SMEM, np.uint8)
        if mem[p]:
            GJ.h_forget(_gt(S, GI_SKV, np.int32), mem, _gi(S, GI_SMETA), p)


@njit(cache=True)
def _gd_leaf(S, t, cs, gone):
    """CacheState's leaf events after the FA copies of chunks ``cs`` (sorted, distinct; ``gone``: lost
    their last copy) left tier ``t``: on_leaf in DRAM, on_global_leaf in any tier."""
    kinds, nodes = _gt(S, GI_KINDS, np.int8), _gt(S, GI_NODES, np.int32)
    if len(kinds) < 2 * len(cs):
        raise RuntimeError("cluster_sim engine: gandalf leaf-event buffer full")
    GX = _gi(S, GI_GX)
    mgen = _gt(S, GI_MGEN, np.int32)
    if GX[GX_MEMO] >= GD_GEN_LIMIT:          # int32 stamps: the memo starts over (it only saves work)
        mgen[:] = 0
        GX[GX_MEMO] = 0
    GX[GX_MEMO] += 1
    n = _leaf_climb(t == DRAM, _bit(t), cs, gone, S.parent, S.res, S.dcnt[t], S.dany, _gt(S, GI_MEND, np.int32),
                    mgen, GX[GX_MEMO], kinds, nodes)
    if n:
        GJ._leaf_events(_gd_c(S), _gd_s(S), _gf(S, GF_P), _gi(S, GI_F), _gd_hc(S), _gd_hs(S), t == DRAM, _gnow(S),
                        kinds[:n], nodes[:n])


@njit(cache=True)
def _gd_removed(S, t, cs_l, lost_l):
    """The leaf events of a batch removal from tier ``t`` (chunks in any order, each once)."""
    n = len(cs_l)
    if n == 0:
        return
    cs = np.empty(n, dtype=np.int64)
    for i in range(n):
        cs[i] = cs_l[i]
    order = np.argsort(cs)
    sc = np.empty(n, dtype=np.int64)
    sg = np.empty(n, dtype=np.bool_)
    for i in range(n):
        sc[i] = cs[order[i]]
        sg[i] = lost_l[order[i]]
    _gd_leaf(S, t, sc, sg)


@njit(cache=True)
def _gd_access(S, path):
    """``GandalfPolicy.on_access``: demand statistics of the path's FA chunks, the estimator's
    references (reuse=hints), then the demand of the deepest STATE ever checkpointed on it."""
    m = len(path)
    if m == 0:
        return
    now = _gnow(S)
    if _gi(S, GI_F)[GJ.F_POP]:
        _gd_population(S, path, now)
    tf, tl, hits = _gf(S, GF_TF), _gf(S, GF_TL), _gt(S, GI_HITS, np.int32)
    hints = _gi(S, GI_GX)[GX_HINTS] != 0
    for k in range(m):
        p = 2 * path[k]
        if not hints:               # under reuse=hints no kernel reads first touches or hits (none kept)
            if tf[p] == tf[p]:
                hits[p] += 1
            else:
                tf[p] = now
        tl[p] = now
    ckpt, sdem, P = _gt(S, GI_CKPT, np.bool_), _gt(S, GI_SDEM, np.uint8), _gf(S, GF_P)
    if hints:
        _gd_est_access(S, path, ckpt)
    for k in range(m - 1, -1, -1):
        c = path[k]
        if ckpt[c]:
            q = 2 * c + 1
            d = sdem[c]
            if d < 2:                   # demands counted up to 2: every reader asks 0, 1 or >= 2
                sdem[c] = d + 1
            if d == 0:
                P[GJ.A_NDEM] += 1.0
            elif d == 1:
                P[GJ.A_NDEM2] += 1.0
            if d >= 1 and not hints:
                hits[q] += 1
            tl[q] = now
            return


@njit(cache=True)
def _gd_population(S, path, now):
    """reuse=population, ``GandalfPolicy._population`` (before the path's statistics move): this
    request's references and reuses join the windows, those whose window H closed are counted, and
    ``pop_p`` is recomputed when a reference was. Rows of counts stand for the reference's deques
    (see ``PQ``); the counts and ``pop_p``'s floats are the reference's."""
    nb = GJ._BUCKETS + 1
    H = _gf(S, GF_P)[GJ.A_H]
    tf, tl, hits = _gf(S, GF_TF), _gf(S, GF_TL), _gt(S, GI_HITS, np.int32)
    Q, PRC, PUC = _gi(S, GI_PQ), _gi(S, GI_PRC), _gi(S, GI_PUC)
    PRT, PUT, PQF = _gf(S, GF_PRT), _gf(S, GF_PUT), _gf(S, GF_PQF)
    r = Q[PQ_RT]
    Q[PQ_RT] = r + 1
    PRT[r] = now
    for b in range(nb):
        PRC[r * nb + b] = 0
    for k in range(len(path)):
        p = 2 * path[k]
        t1 = tl[p]
        seen = tf[p] == tf[p]
        h = hits[p]
        b = 0
        if seen:
            b = h + 1 if h + 1 < GJ._BUCKETS else GJ._BUCKETS
            if now - t1 <= H:
                # a reuse of the reference at t1, in the bucket of the touches before it
                if t1 > PQF[0]:
                    PQF[0] = t1
                u = Q[PQ_UT]
                if u == Q[PQ_UH] or PUT[u - 1] != PQF[0]:
                    PUT[u] = PQF[0]
                    for x in range(nb):
                        PUC[u * nb + x] = 0
                    Q[PQ_UT] = u + 1
                    u += 1
                PUC[(u - 1) * nb + (h if h < GJ._BUCKETS else GJ._BUCKETS)] += 1
        PRC[r * nb + b] += 1
    changed = False
    i = Q[PQ_RH]
    while i < Q[PQ_RT] and PRT[i] + H < now:
        for b in range(nb):
            Q[PQ_N + b] += PRC[i * nb + b]
        i += 1
        changed = True
    Q[PQ_RH] = i
    i = Q[PQ_UH]
    while i < Q[PQ_UT] and PUT[i] + H < now:
        for b in range(nb):
            Q[PQ_R + b] += PUC[i * nb + b]
        i += 1
    Q[PQ_UH] = i
    if changed:
        popp = _gf(S, GF_POPP)
        for b in range(nb):
            popp[b] = (Q[PQ_R + b] + 1.0) / (Q[PQ_N + b] + 2.0)


@njit(cache=True)
def _gd_inserted(S, q):
    """``on_insert`` of a new STATE ``q`` still resident (FA payloads need nothing under reuse=rate)."""
    c = q >> 1
    ckpt = _gt(S, GI_CKPT, np.bool_)
    if not ckpt[c]:
        ckpt[c] = 1
        _gf(S, GF_P)[GJ.A_NCKPT] += 1.0
    now = _gnow(S)
    tf, tl = _gf(S, GF_TF), _gf(S, GF_TL)
    if _gi(S, GI_GX)[GX_HINTS] == 0 and tf[q] != tf[q]:
        tf[q] = now
    tl[q] = now


@njit(cache=True, inline="always")
def _gd_rtab(S, k):
    """The estimator's (class, age bin) table ``k`` (GF_RD, GF_RCN, GF_RQ) as its kernels take it."""
    t = _gf(S, k)
    return t.reshape((len(t) // RJ.NB, RJ.NB))


@njit(cache=True, inline="always")
def _gd_rcls(S):
    """The estimator's per-payload class, group, touches, superseded, stop, sub-agent and turn arrays."""
    return (_gt(S, GI_RCLS, np.int32), _gt(S, GI_RGRP, np.int32), _gt(S, GI_RTOU, np.int32), _gt(S, GI_RSUP, np.bool_),
            _gt(S, GI_RSTOP, np.int8), _gt(S, GI_RSUB, np.bool_), _gt(S, GI_RTURN, np.int32))


@njit(cache=True)
def _gd_rekey(S, ps):
    """``_rekey(ps)``: the heap entries of payloads whose estimate went down are pushed again."""
    if len(ps):
        GJ._rekey_push(_gd_c(S), _gd_s(S), _gf(S, GF_P), _gi(S, GI_F), _gd_hc(S), _gd_hs(S), _gnow(S), ps)


@njit(cache=True)
def _gd_est_access(S, path, ckpt):
    """reuse=hints, ``on_access``: the estimator's references of the path (its FA chunks and the
    deepest STATE ever checkpointed on it), then the re-key of what went down."""
    m = len(path)
    GX, RSC = _gi(S, GI_GX), _gf(S, GF_RSC)
    state = -1
    for k in range(m - 1, -1, -1):
        if ckpt[path[k]]:
            state = 2 * path[k] + 1
            break
    GX[GX_SEEN] += 1
    if GX[GX_CHUNKS]:
        RSC[RS_CRCSUM] += _gf(S, GF_CRCT)[m]
        RSC[RS_CRCN] += m
    cls, grp, tou, sup, stop, sub, turn = _gd_rcls(S)
    low = RJ.access(_gf(S, GF_EST), _gf(S, GF_RSTART), cls, grp, tou, sup, stop, sub, turn, _gd_rtab(S, GF_RD),
                    _gd_rtab(S, GF_RCN), _gd_rtab(S, GF_RQ), _gt(S, GI_RBUF, np.int32), _gi(S, GI_RGS), _gi(S, GI_RGN),
                    _gf(S, GF_RT0), _gf(S, GF_REVT), _gi(S, GI_REVG), _gi(S, GI_REVB), _gi(S, GI_RGM),
                    _gi(S, GI_RTHR), path, state, _gnow(S), GX[GX_STOP], GX[GX_SUB], GX[GX_TID], GX[GX_TURN])
    _gd_rekey(S, low)


@njit(cache=True)
def _gd_est_created(S, qs):
    """reuse=hints, ``on_insert``: fresh references for the new STATEs ``qs`` (still resident)."""
    GX = _gi(S, GI_GX)
    cls, grp, tou, sup, stop, sub, turn = _gd_rcls(S)
    low = RJ.created(_gf(S, GF_EST), _gf(S, GF_RSTART), cls, grp, tou, sup, stop, sub, turn, _gd_rtab(S, GF_RD),
                     _gd_rtab(S, GF_RCN), _gd_rtab(S, GF_RQ), _gt(S, GI_RBUF, np.int32), _gi(S, GI_RGS), _gi(S, GI_RGN),
                     _gf(S, GF_RT0), _gf(S, GF_REVT), _gi(S, GI_REVG), _gi(S, GI_REVB), _gi(S, GI_RGM), qs,
                     _gnow(S), GX[GX_STOP], GX[GX_SUB], GX[GX_TURN])
    _gd_rekey(S, low)


@njit(cache=True)
def _gd_tick(S, now):
    """reuse=hints, ``tick`` (H is set before the request, in _replay; the refit runs interpreted
    between requests): after a refit every heap member is re-keyed, else the due re-evaluations."""
    GX = _gi(S, GI_GX)
    if GX[GX_REKEY]:
        GX[GX_REKEY] = 0
        cm, sm = _gt(S, GI_CMEM, np.uint8), _gt(S, GI_SMEM, np.uint8)
        n = 0
        for p in range(len(cm)):
            if cm[p] != 0 or sm[p] != 0:
                n += 1
        ps = np.empty(n, dtype=np.int64)
        k = 0
        for p in range(len(cm)):
            if cm[p] != 0 or sm[p] != 0:
                ps[k] = p
                k += 1
        _gd_rekey(S, ps)
        return
    low = RJ.tick(_gf(S, GF_EST), _gf(S, GF_RSTART), _gt(S, GI_RCLS, np.int32), _gt(S, GI_RGRP, np.int32), _gd_rtab(S, GF_RQ),
                  _gt(S, GI_RBUF, np.int32), _gi(S, GI_RGS), _gi(S, GI_RGN), _gf(S, GF_RT0), _gf(S, GF_REVT), _gi(S, GI_REVG),
                  _gi(S, GI_REVB), _gi(S, GI_RGM), S.res, now)
    _gd_rekey(S, low)


@njit(cache=True)
def _gd_compact(S):
    """The estimator's member buffer compacted in place, as ``CompiledHintsReuse._compact`` does it
    into a new one: the live groups' members moved to the front, in group order (a group's slot
    never starts before an older group's, so every move is to the left); ids and members unchanged.
    Growth (a repack of the node's state) is then needed only when the live members fill it."""
    gbuf, gs, gn, GM = _gt(S, GI_RBUF, np.int32), _gi(S, GI_RGS), _gi(S, GI_RGN), _gi(S, GI_RGM)
    w = 0
    for g in range(GM[RJ.G_NEXT]):
        n = gn[g]
        if n > 0:
            o = gs[g]
            if o != w:
                for i in range(n):
                    gbuf[w + i] = gbuf[o + i]
                gs[g] = w
            w += n
    GM[RJ.G_USED] = w


@njit(cache=True)
def _gd_before(S, now, row):
    """reuse=hints, before a request (at time ``now``; its hints in its ``row`` of R): the estimator's
    H as ``tick`` sets it, and the grow requests: room in its buffers, its refit due at this request."""
    M = S.M
    GX, RSC = _gi(S, GI_GX), _gf(S, GF_RSC)
    GX[GX_STOP], GX[GX_SUB], GX[GX_TURN], GX[GX_TID] = row[R_STOP], row[R_SUB], row[R_TURN], row[R_TID]
    if GX[GX_HASLOG] == 0 or M[M_USED2] + M[M_FAB] <= M[M_CAP2]:
        RSC[RS_H] = np.inf         # nothing given up yet, or room left: a copy written now stays
    else:
        RSC[RS_H] = max(math.exp(RSC[RS_LOGAGE]), now - RSC[RS_LASTEV])
    GM = _gi(S, GI_RGM)
    if GM[RJ.G_USED] + GX[GX_ROOMB] > len(_gt(S, GI_RBUF, np.int32)):
        _gd_compact(S)
    if (GM[RJ.G_USED] + GX[GX_ROOMB] > len(_gt(S, GI_RBUF, np.int32)) or GM[RJ.G_NEXT] + 8 > len(_gi(S, GI_RGS))
            or GM[RJ.G_EVN] + 8 > len(_gf(S, GF_REVT))):
        M[M_GROW] |= GROW_HINTS
    seen = GX[GX_SEEN]
    if (seen >= GX[GX_FIRST] and (seen - GX[GX_FIRST]) % GX[GX_EVERY] == 0 and seen != GX[GX_LAST_REFIT]):
        RSC[RS_NOW] = now
        M[M_GROW] |= GROW_REFIT


@njit(cache=True)
def _gd_note_ssd_victims(S, ps):
    """``_note_ssd_victims``: the SSD's characteristic time, a running mean of the log ages (time
    since the last touch) of the copies it gives up."""
    now = _gnow(S)
    GX, RSC, tl = _gi(S, GI_GX), _gf(S, GF_RSC), _gf(S, GF_TL)
    RSC[RS_LASTEV] = now
    la = RSC[RS_LOGAGE]
    has = GX[GX_HASLOG] != 0
    for i in range(len(ps)):
        t = tl[ps[i]]
        if t == t:
            x = math.log(max(now - t, 1.0))
            la = x if not has else 0.999 * la + 0.001 * x
            has = True
    RSC[RS_LOGAGE] = la
    GX[GX_HASLOG] = 1 if has else 0


@njit(cache=True)
def _gd_select_dram(S, need, vict, acts):
    """``select_victims(DRAM)``: the compiled selection; its SSD plan is kept for the next SSD one.
    False (the shortfall in M_SHORT) when it cannot free ``need``."""
    M = S.M
    ps, ac, plan, short = GJ.select_dram(_gd_c(S), _gd_s(S), _gf(S, GF_P), _gi(S, GI_F), _gi(S, GI_K), _gd_hc(S),
                                         _gd_hs(S), _gd_td(S), _gd_ts(S), _gi(S, GI_G), need, _gnow(S),
                                         M[M_CAP2] - M[M_USED2])
    if short:
        M[M_SHORT] = short
        return False
    buf = _gt(S, GI_PLAN, np.int32)
    if len(plan) > len(buf):
        raise RuntimeError("cluster_sim engine: gandalf plan buffer full")
    buf[:len(plan)] = plan
    _gi(S, GI_GX)[GX_PLAN] = len(plan) if len(plan) else -1
    for i in range(len(ps)):
        vict.append(ps[i])
        acts.append(ac[i])
    return len(ps) > 0


@njit(cache=True)
def _gd_select_ssd(S, need, vict):
    """``select_victims(SSD)``, taking the last DRAM selection's plan first (once)."""
    GX = _gi(S, GI_GX)
    n = GX[GX_PLAN]
    GX[GX_PLAN] = -1
    plan = _gt(S, GI_PLAN, np.int32)[:n if n > 0 else 0]
    ps = GJ.select_ssd(_gd_c(S), _gd_s(S), _gf(S, GF_P), _gi(S, GI_F), _gi(S, GI_K), _gd_hs(S), _gd_ts(S),
                       _gi(S, GI_G), need, _gnow(S), plan)
    for i in range(len(ps)):
        vict.append(ps[i])
    if len(ps) and GX[GX_HINTS]:
        _gd_note_ssd_victims(S, ps)
    return len(ps) > 0


# ---------------------------------------------------------------------------- dynamic_random
# DynamicRandomPolicy: the gated walk over lru's queues, admitting a DRAM victim without an SSD copy
# with probability P / (P + n (1 - P)) (n: the writes it commits) from the node's draws; a control
# loop in simulated time moves the factor of P toward the write budget.
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
        if FX_UB + n + 1024 > M[M_DR_CAP]:    # room is kept before each request (replay)
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
    _enter(S, t, p)


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
    oracle = S.M[M_POLICY] == POLICY_ORACLE
    hooks = (oracle or S.M[M_POLICY] == POLICY_WORKLOAD_AWARE or S.M[M_POLICY] == POLICY_GANDALF
             or S.M[M_POLICY] == POLICY_MARCONI)
    if hooks:
        _leave(S, t, p)
    if t == SSD:
        _ssd_leave(S, p)
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
                        if hooks and S.M[M_POLICY] == POLICY_MARCONI:
                            # remove_copy clears the STATE's bits tier by tier before each event
                            MC.mc_leave(S.PX, np.uint8(sr & (7 ^ ((2 << tt) - 1))), S.parent, tt, q)
                        elif hooks:
                            _leave(S, tt, q)
                        if tt == SSD:
                            _ssd_leave(S, q)
                            if close:
                                _close_ssd(S, q)
                S.res[q] = 0
        if oracle:
            _or_leaf(S, t, c)
        elif S.M[M_POLICY] == POLICY_MARCONI:
            MC.mc_leaf(S.PX, S.res, S.dcnt, S.anchor, S.depth, S.flat, t, c)
        elif S.M[M_POLICY] == POLICY_GANDALF:
            one = np.empty(1, dtype=np.int64)
            one[0] = c
            gone = np.empty(1, dtype=np.bool_)
            gone[0] = now == 0
            _gd_leaf(S, t, one, gone)
    if S.M[M_POLICY] == POLICY_LRU_K and now == 0:
        _lk_gone(S, p)                  # CacheState.remove_copy's events: p, then its STATE
        if (p & 1) == 0:
            _lk_gone(S, p | 1)
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
    ``4 * payload + tier``: the policy's ``on_leave`` (``hooks``: the policies keeping queues of their
    own; never for HBM), then, for an SSD copy, oracle_admission's log and the admission-hit close
    (:func:`_remove`'s events, in the same order)."""
    M, PX = S.M, S.PX
    pol = M[M_POLICY]
    wa = hooks and pol == POLICY_WORKLOAD_AWARE
    gd = hooks and pol == POLICY_GANDALF
    nres = len(S.res)
    oq, ok = M[M_O_WQ], M[M_O_WK]
    ckv, cmem, cmeta = seg_view(PX, 0, 0, np.int32), seg_view(PX, 0, 0, np.uint8), PX[:0]
    skv, smem, smeta = seg_view(PX, 0, 0, np.int32), seg_view(PX, 0, 0, np.uint8), PX[:0]
    if gd:
        ckv, cmem, cmeta = _gt(S, GI_CKV, np.int32), _gt(S, GI_CMEM, np.uint8), _gi(S, GI_CMETA)
        skv, smem, smeta = _gt(S, GI_SKV, np.int32), _gt(S, GI_SMEM, np.uint8), _gi(S, GI_SMETA)
    for e in ev:
        p = e >> 2
        t = e & 3
        if hooks:
            if wa:                                   # _wa_leave
                i = (t - 1) * nres + p
                PX[oq + i] = -1
                PX[ok + i] = -1
            elif gd:                                 # _gd_leave
                if t == DRAM:
                    if cmem[p]:
                        GJ.h_forget(ckv, cmem, cmeta, p)
                elif smem[p]:
                    GJ.h_forget(skv, smem, smeta, p)
            else:
                _or_leave(S, t, p)
        if t == SSD:
            _ssd_leave(S, p)
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
    keyed = S.M[M_POLICY] == POLICY_LRU_K
    was_in = np.empty(len(ps) if keyed else 0, dtype=np.int64)
    nw = 0
    if keyed:
        bit = _bit(t)
        for p in ps:
            if (S.res[p] & bit) != 0:
                was_in[nw] = p
                nw += 1
    pol = S.M[M_POLICY]
    if pol == POLICY_MARCONI:
        # on the arrays (decision 141); the STATEs of the batch first, as remove_copies clears every
        # listed copy before its events (a listed STATE's event sees its bits cleared; its FA's
        # loss then finds it gone)
        MC.mc_remove_many(S.M, S.K, S.PX, S.res, S.flags, S.sb, S.depth, S.parent, t, ps, close, cs, lost)
    else:
        hooks = pol == POLICY_ORACLE or pol == POLICY_WORKLOAD_AWARE or pol == POLICY_GANDALF
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
        if S.M[M_POLICY] == POLICY_ORACLE:
            for c in cs:
                _or_leaf(S, t, c)
        elif S.M[M_POLICY] == POLICY_MARCONI:
            for c in cs:
                MC.mc_leaf(S.PX, S.res, S.dcnt, S.anchor, S.depth, S.flat, t, c)
        elif S.M[M_POLICY] == POLICY_GANDALF:
            _gd_removed(S, t, cs, lost)
    if keyed:
        _lk_leave_many(S, was_in[:nw])


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
    if S.M[M_POLICY] != POLICY_LRU:
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
    if M[M_POLICY] == POLICY_ORACLE or M[M_POLICY] == POLICY_WORKLOAD_AWARE or M[M_POLICY] == POLICY_MARCONI:
        return DECIDE       # per-victim actions (its own walk, _or_walk / _wa_walk, decides them)
    if M[M_POLICY] == POLICY_GANDALF:
        return DECIDE if t == DRAM else DROP     # per-victim actions from its own selection (_gd_select_dram)
    if M[M_POLICY] == POLICY_GANDALF_STRICT:
        # lru_select(action=callable) without a fallback: DRAM victims by kind (_decide) when there is
        # an SSD; every other victim is dropped
        return DECIDE if t == DRAM and M[M_CAP2] > 0 else DROP
    if M[M_POLICY] >= POLICY_WRITE_THROUGH:
        return GATE
    if t == DRAM:
        if M[M_CAP2] <= 0:
            return DROP
        return DECIDE if M[M_POLICY] == POLICY_ORACLE_ADM else DEMOTE
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
                    s, p = _kpop(S, t)
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
        if gated and phase == 0 and _defer(S, t, p):
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
            a = _decide(S, t, p)
        elif gated:
            a = DEMOTE if gate and ((r & 4) != 0 or _admit(S, t, p)) else DROP
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
def _mc_select(S, t, need, vict, acts):
    """marconi's selection in tier ``t`` (_marconi_eng.mc_walk); the shortfall in ``M[M_SHORT]``."""
    M = S.M
    ok, short = MC.mc_walk(S.PX, S.FX, S.res, S.stamp, S.pin, S.dcnt, S.dany, S.cred, S.cred_any, S.parent,
                           S.depth, S.anchor, S.flat, S.sb, M[M_FAB], M[M_SEQ], M[M_CLOCK], t, need, vict, acts)
    if not ok:
        M[M_SHORT] = short
    return ok


@njit(cache=True)
def _room_ssd(S, need):
    for _ in range(64):
        if need <= 0:
            return True
        S.M[M_SHORT] = -1
        vict = [np.int64(0) for _ in range(0)]
        acts = [np.int64(0) for _ in range(0)]
        act = _action(S, SSD)
        if S.M[M_POLICY] == POLICY_ORACLE:
            ok = _or_walk(S, np.int64(SSD), need, vict, acts)
        elif S.M[M_POLICY] == POLICY_WORKLOAD_AWARE:
            ok = _wa_walk(S, np.int64(SSD), need, vict, acts)
        elif S.M[M_POLICY] == POLICY_GANDALF:
            ok = _gd_select_ssd(S, need, vict)
        elif S.M[M_POLICY] == POLICY_MARCONI:
            ok = _mc_select(S, np.int64(SSD), need, vict, acts)
        else:
            ok = _walk(S, np.int64(SSD), need, act, vict, acts)
        if act == GATE:
            _tally_gated(S, np.int64(SSD), vict, acts)
        if not ok:
            return False
        if S.M[M_POLICY] == POLICY_GANDALF_STRICT:
            S.K[PK_G_SSD_EV] += len(vict)
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
    oracle = S.M[M_POLICY] == POLICY_ORACLE
    wa = S.M[M_POLICY] == POLICY_WORKLOAD_AWARE
    for _ in range(64):
        if need <= 0:
            return True
        S.M[M_SHORT] = -1
        vict = [np.int64(0) for _ in range(0)]
        acts = [np.int64(0) for _ in range(0)]
        dr = S.M[M_POLICY] == POLICY_DYNAMIC_RANDOM
        if dr:
            _dr_begin(S)
        if oracle:
            ok = _or_walk(S, np.int64(DRAM), need, vict, acts)
        elif wa:
            ok = _wa_walk(S, np.int64(DRAM), need, vict, acts)
        elif S.M[M_POLICY] == POLICY_GANDALF:
            ok = _gd_select_dram(S, need, vict, acts)
        elif S.M[M_POLICY] == POLICY_MARCONI:
            ok = _mc_select(S, np.int64(DRAM), need, vict, acts)
        else:
            ok = _walk(S, np.int64(DRAM), need, act, vict, acts)
        if not ok and act == GATE and S.M[M_CAP2] > 0:
            ok = _walk(S, np.int64(DRAM), need, np.int64(GATE_FORCE), vict, acts)   # select_gated's forced pass
        if act == GATE:
            _tally_gated(S, np.int64(DRAM), vict, acts)
        if dr:
            _dr_end(S, ok, vict, acts)
        if not ok:
            return False
        gs = S.M[M_POLICY] == POLICY_GANDALF_STRICT
        if gs:
            _gs_tally(S, vict, acts)
        before = S.M[M_USED1]
        if act == DECIDE or act == GATE or oracle:
            # per-victim actions: the demotions first, then the drops still in DRAM (NodeSim._make_room)
            if act == DECIDE and not (oracle or wa or gs or S.M[M_POLICY] == POLICY_GANDALF
                                      or S.M[M_POLICY] == POLICY_MARCONI):
                _tally_dram(S, vict, acts)
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
    if S.M[M_POLICY] == POLICY_LRU or S.M[M_POLICY] == POLICY_DYNAMIC_RANDOM:   # they hear nothing
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
    if M[M_POLICY] == POLICY_LRU_K:
        _lk_tick(S)
    elif M[M_POLICY] == POLICY_DYNAMIC_RANDOM:
        _dr_tick(S, now)
    elif M[M_POLICY] == POLICY_MARCONI:
        MC.mc_tick(S.PX, S.FX, S.res, S.dcnt, S.parent, S.depth, S.anchor, S.flat)
    elif M[M_POLICY] == POLICY_GANDALF:
        # (indexed here directly: through the inlined _gi helper, inside this inlined step, the store
        # was lost: numba 0.68, found by comparing with NUMBA_DISABLE_JIT)
        S.FX[S.PX[GF0 + GF_GN]] = now
        S.PX[(S.PX[2 * GI_F] >> 3) + GJ.F_CUR] = seq
        if S.PX[(S.PX[2 * GI_GX] >> 3) + GX_HINTS] != 0:
            _gd_tick(S, now)
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
    if M[M_POLICY] != POLICY_LRU:
        _on_access(S, path, h, r, q)
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
                _enter(S, entry, q)
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
            _enter(S, t, qq)
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
        if (M[M_POLICY] == POLICY_LRU_K or M[M_POLICY] == POLICY_HOT_PREFIX or M[M_POLICY] == POLICY_WORKLOAD_AWARE
                or M[M_POLICY] == POLICY_GANDALF_STRICT or M[M_POLICY] == POLICY_GANDALF):
            _on_insert(S, path, r, states)
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
                    borrow(S.hn), borrow(S.wpos), borrow(S.wfront), borrow(S.PX), borrow(S.FX), S.rng)
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
        if M[M_POLICY] == POLICY_ORACLE:
            # its queues gain, within one request, an entry per payload that enters or re-keys and
            # per leaf event and victim: at most four per resident payload and path chunk
            room = 4 * ((M[M_USED0] + M[M_USED1] + M[M_USED2]) // M[M_DR_LO] + 3 * m + 4) + 64
            for t in range(1, 3):
                if M[M_CAP0 + t] > 0 and S.hn[t] + room > S.hcap[t]:
                    _heap_compact(S, t)
                    if S.hn[t] + room > S.hcap[t] or 4 * S.hn[t] > S.hcap[t]:
                        M[M_GROW] |= 2 << t
        if M[M_POLICY] == POLICY_WORKLOAD_AWARE:
            M[M_WA_CAT] = S.PX[M[M_O_WC] + j]
            S.FX[FXW_NOW] = arrival[i]
            # a category queue gains, within one request, an entry per payload that enters its tier,
            # moves to it or is re-filed in it: bounded by the payloads above the SSD (entering; back
            # from an undone demotion; re-filed), the tier's own (re-filed) and the request's
            above = (M[M_USED0] + M[M_USED1]) // M[M_DR_LO]
            M[M_WA_ROOM1] = 3 * above + 8 * m + 64
            M[M_WA_ROOM2] = 3 * above + M[M_USED2] // M[M_DR_LO] + 8 * m + 64
            for h in range(WA_H0, WA_H0 + 2 * M[M_WA_NCAT]):
                room = M[M_WA_ROOM1] if (h - WA_H0) % 2 == 0 else M[M_WA_ROOM2]
                if S.hn[h] + room > S.hcap[h] or 2 * S.hn[h] > S.hcap[h]:
                    _heap_compact(S, h)
                    if S.hn[h] + room > S.hcap[h] or 4 * S.hn[h] > S.hcap[h]:
                        M[M_GROW] |= GROW_WAH
        if M[M_POLICY] == POLICY_GANDALF:
            # a heap's table holds at most 2 x its live entries + 65 (it is rebuilt beyond that), and
            # its live entries are distinct payloads of its tier: the SSD heap's, payloads in the SSD,
            # which a request can fill from every tier and with its own; the DRAM heap's, payloads in
            # DRAM, which a request fills only from the HBM and with its own (loads and inserts of its
            # own chunks), never from the SSD's other residents. At most every payload, in either.
            np2 = len(S.res)
            held = min((M[M_USED0] + M[M_USED1] + M[M_USED2]) // M[M_DR_LO] + 2 * m + 4, np2)
            room = 2 * held + 66
            M[M_GD_ROOM] = room
            M[M_GD_CROOM] = 2 * min((M[M_USED0] + M[M_USED1]) // M[M_DR_LO] + 2 * m + 4, np2) + 66
            if ((S.PX[GF0 + GF_CST + 1] - S.PX[GF0 + GF_CST]) // 3 < M[M_GD_CROOM]
                    or (S.PX[GF0 + GF_SST + 1] - S.PX[GF0 + GF_SST]) // 3 < room):
                M[M_GROW] |= GROW_GD
            # the SSD plan holds SSD victims, the leaf-event buffer two events per chunk leaving a tier
            # (CompiledNode._gd_held: the same bound, at most every payload)
            held = held + 2
            M[M_GD_HELD] = held
            if ((S.PX[2 * GI_PLAN + 1] - S.PX[2 * GI_PLAN]) // 4 < held
                    or S.PX[2 * GI_KINDS + 1] - S.PX[2 * GI_KINDS] < 2 * held):
                M[M_GROW] |= GROW_GD
            cme, sme = _gi(S, GI_CMETA), _gi(S, GI_SMETA)
            if max(cme[GJ.M_NEXT], sme[GJ.M_NEXT]) >= GD_GEN_LIMIT:
                M[M_GROW] |= GROW_GDGEN
            if S.PX[(S.PX[2 * GI_GX] >> 3) + GX_HINTS] != 0:
                _gd_before(S, arrival[i], R[j])
            if S.PX[(S.PX[2 * GI_F] >> 3) + GJ.F_POP] != 0:
                # reuse=population: a request adds a row of references and at most a row of reuses
                # per path chunk
                Q = _gi(S, GI_PQ)
                if (Q[PQ_RT] + 1 > len(_gf(S, GF_PRT)) or Q[PQ_UT] + m > len(_gf(S, GF_PUT))):
                    M[M_GROW] |= GROW_POP
        if M[M_POLICY] == POLICY_MARCONI and MC.mc_tune_due(S.PX, S.FX):
            M[M_GROW] |= GROW_MC_TUNE
        if M[M_LOG_OUT] != 0 and M[M_OUTN] + M[M_OUTROOM] > M[M_CAP_OUT]:
            M[M_GROW] |= GROW_OUT
        if 2 * M[M_AQMAX] > M[M_CAP_AQ]:
            M[M_GROW] |= GROW_AQ
        if M[M_POLICY] == POLICY_DYNAMIC_RANDOM:
            # a selection's draws and decisions: at most 4 per candidate (every payload in DRAM or
            # HBM, and this request's), the buffer at most 5119 draws at a selection's start
            room = 4 * ((M[M_USED0] + M[M_USED1]) // M[M_DR_LO] + 2 * m + 2) + 64
            M[M_DR_ROOM] = room
            if M[M_DR_CAP] < FX_UB + 6144 + room or M[M_CAP_DEC] < room:
                M[M_GROW] |= GROW_DR
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
