"""gandalf's names on the compiled engine: placement=strict's counters, the capacity-aware policy's meta
slots, growth requests and the layout of its arrays (PX / FX)."""
from __future__ import annotations

from ...engine.layout import GROW_P2, GROW_P3, GROW_P4, GROW_P5, GROW_P7, K_P0, M_P0

# placement=strict: segment B the request that asked for a payload's SSD write (as the gated walk), AQ the
# writes asked for, G per chunk the STATE demands so far (-1: no checkpoint of it ever created); its
# counters (its counters() order; the decision counts of its LRU walks, then the STATE demand statistics)
(PK_G_DROPS_FA, PK_G_DROPS_STATE, PK_G_MOVES_FA, PK_G_MOVES_STATE, PK_G_MOVES_FREE, PK_G_SSD_EV, PK_G_NCKPT,
 PK_G_NDEM, PK_G_NDEM2) = range(K_P0, K_P0 + 9)
# the capacity-aware policy: the rows its heaps' tables need (DRAM heap M_GD_CROOM, SSD heap M_GD_ROOM) and
# the most payloads resident during the next request (M_GD_HELD: its plan and leaf buffer)
M_GD_ROOM, M_GD_HELD, M_GD_CROOM = range(M_P0, M_P0 + 3)
GROW_GD = GROW_P2      # a heap's entry table needs room (M_GD_CROOM / M_GD_ROOM rows), or its plan or leaf buffer
GROW_HINTS = GROW_P3   # reuse=hints: its estimator's buffers need room
GROW_REFIT = GROW_P4   # reuse=hints: its estimator's refit is due at this request's tick
GROW_POP = GROW_P5     # reuse=population: its windows of references need room
GROW_GDGEN = GROW_P7   # its heap versions near GD_GEN_LIMIT (renumbered)
#: Gandalf keeps its heaps' versions (and its leaf memo's stamps) as int32: at a request that finds
#: one at this limit, they are renumbered between requests (a request makes far fewer than 2^30
#: pushes); its tentatives' uint16 stamps start over in the kernel (``_gandalf_jit.t_next``)
GD_GEN_LIMIT = 2**30

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

# GandalfPolicy(placement="strict"): LRU walks leaf-first in every tier; a DRAM victim is demoted to the
# SSD if it is an FA chunk (written unless a valid copy is there) and dropped if it is a STATE; an FA copy
# entering DRAM without an SSD copy asks for its write (_enter). Its statistics are the STATE demand
# counts it reports (on_access / on_insert); its estimates play no part under strict placement.

# GandalfPolicy on the engine: its own kernels (policies._gandalf_jit: the two lazy heaps, the victim
# selections, the residency events), called where CacheState tells the interpreted policy, with the
# arrays the interpreted policy would hand them. Its estimates here are reuse=rate (decision 135).
