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
# the node's event log ``elog``: M_FTL 1 = log the SSD's writes and trims (hardware.ssd.ftl=greedy), M_KEV
# 1 = log the chunks whose FA became resident or lost its last copy (fleet.sync=kv_events), M_EVN the rows
# logged, M_EV_ROOM the rows the next request may log (kept free before it); M_ENTN*: copies that
# entered each tier (with M_LEFTN*, the copies each tier holds)
M_FTL, M_EVN, M_EV_ROOM, M_ENTN0, M_ENTN1, M_ENTN2, M_KEV = range(92, 99)
N_META = 99          # M_LEFT*: bytes / copies that left each tier (CacheState.left, left_n)
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
GROW_EV = 16384     # the event log needs room: the wrapper hands its rows to the FTL (cluster_sim.ftl) and keeps the router's
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
PQ_BUCKETS = 6      # gandalf's score buckets per tier heap (policies/_gandalf_jit.py asserts its own is this)
PQ_R = 4 + PQ_BUCKETS + 1
N_PQ = 4 + 2 * (PQ_BUCKETS + 1)
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


# ---------------------------------------------------------------------------- lru_k
# The keyed candidate queue of lru_k (policies.lru_k.KeyedTierHeap) lives in the tier's heap arrays:
# an entry is (key, payload), the key (HIST(p, K), HIST(p, 1)) packed into one int64 as
# (HIST(p, K) + 1) << 32 | (HIST(p, 1) + 1) (stamps stay below 2^31, CompiledNode checks), so that the
# entries order exactly as the reference's tuples (k1, k2, p). An entry is valid while it equals the
# payload's canonical key in that tier (set when it enters; re-keyed when a grown key reaches the top).


# ---------------------------------------------------------------------------- oracle
# policies.oracle on flat arrays. Its candidate queues (one LazyHeap per tier in the reference, entries
# ordered by (-next use, -size, payload)) live in the DRAM and SSD heap arrays: an entry is (key,
# payload) with the key (N - next use) * M_OR_NSZ + size rank, and it is valid while it equals the
# payload's current key in that tier (segment A / B; -1 = not in the queue). A popped or discarded
# payload is out of the queue; every push (a re-key) makes the older entries stale, as LazyHeap's
# versions do: the keys are always current (a next use changes only in on_access, which re-keys).


# ---------------------------------------------------------------------------- workload_aware
# policies.workload_aware on flat arrays. Its queues (one LazyHeap per category and tier, entries ordered
# by (stamp when filed, payload)) are heaps WA_H0 + 2 w + (t - 1) of the heap arrays: an entry (key, p) is
# valid while p is filed in that category's queue (qcat, segment WQ) under that key (segment WK; -1 once
# popped: LazyHeap.pop leaves qcat as it is). The reuse fits are computed by the wrapper with the
# reference's own code (policies.workload_aware.ReuseFits) and given in FX; the categories of the requests
# in segment WC.


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
