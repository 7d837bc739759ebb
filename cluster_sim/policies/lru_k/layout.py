"""lru_k's names on the compiled engine: its meta slots, counters, segments and per-payload record."""
from __future__ import annotations

from ...engine.layout import K_P0, M_L_X1, M_O_X0, M_O_X1, M_P0

# M_LK_K / M_LK_Q: K and the int64 words of a record (HIST(p, 1..K), the request of LAST, residency status
# 0/1/2 = none/mine/ghost, the ghost list's prev/next, the canonical heap key in DRAM and in the SSD),
# M_GHEAD / M_GTAIL / M_GN the ghost list (oldest first) and its length, M_NRES the payloads it holds
# resident, M_CAPP the tiers' capacity in FA chunks, M_GHOST_F the float64 bits of policy.ghost, M_PENDN
# the payloads referenced while absent (segment PEND, room M_CAP_PEND)
(M_LK_K, M_LK_Q, M_GHEAD, M_GTAIL, M_GN, M_NRES, M_CAPP, M_GHOST_F, M_PENDN) = range(M_P0, M_P0 + 9)
#: M_LK_SECONDS: 1 when policy.crp is in seconds: a record then has one more field (LK_LSTAMP, the stamp of
#: LAST) and FX holds the request's time (FX_NOW), the period (FX_CRP) and per payload the time of LAST
#: (FX_LT0 + p)
M_LK_SECONDS = M_P0 + 9
FX_NOW, FX_CRP, FX_LT0 = 0, 1, 2
#: segment LK: a record per payload; PEND: the payloads a request referenced while absent
M_O_LK, M_O_PEND, M_CAP_PEND = M_O_X0, M_O_X1, M_L_X1
SEGMENT_NAMES = {"LK": "X0", "PEND": "X1"}
# counters (besides the engine's victim tally)
PK_REFS, PK_UNCORRELATED, PK_GHOST_HITS, PK_FORGOTTEN = range(K_P0, K_P0 + 4)
# the per-payload record (offsets from the start of the record, after the K history slots);
# LK_LS packs LAST's request and the residency status: (request << 2) | status
LK_LS, LK_GPREV, LK_GNEXT, LK_CAN1, LK_CAN2, LK_LSTAMP = range(6)
LK_FIELDS = 5                   # and LK_LSTAMP with crp in seconds
ST_NONE, ST_MINE, ST_GHOST = 0, 1, 2

# The keyed candidate queue of lru_k (policies.lru_k.KeyedTierHeap) lives in the tier's heap arrays:
# an entry is (key, payload), the key (HIST(p, K), HIST(p, 1)) packed into one int64 as
# (HIST(p, K) + 1) << 32 | (HIST(p, 1) + 1) (stamps stay below 2^31, CompiledNode checks), so that the
# entries order exactly as the reference's tuples (k1, k2, p). An entry is valid while it equals the
# payload's canonical key in that tier (set when it enters; re-keyed when a grown key reaches the top).
