"""workload_aware's names on the compiled engine: its meta slots, counters, segments, floats and queues."""
from __future__ import annotations

from ...engine.layout import GROW_P1, K_P0, M_O_X0, M_O_X1, M_O_X2, M_P0

# segment A the category of each payload (pcat, -1 none), G the request that last guarded a chunk, WQ / WK
# per tier (DRAM, then the SSD; 2U each) the category whose queue a payload is filed in (qcat, -1 none)
# and its key in that queue (-1: popped or not queued), WC the category of each request of the call;
# M_WA_CAT the current request's, M_WA_NCAT the categories so far (queue heaps from WA_H0), M_WA_FIT where
# the fits start in FX, M_WA_THETA 1 when admit_threshold is set, M_WA_ROOM1 / 2 the entries one request
# may add to a DRAM / SSD queue (kept free before it)
M_WA_CAT, M_WA_NCAT, M_WA_FIT, M_WA_THETA, M_WA_ROOM1, M_WA_ROOM2 = range(M_P0, M_P0 + 6)
M_O_WQ, M_O_WK, M_O_WC = M_O_X0, M_O_X1, M_O_X2
SEGMENT_NAMES = {"WQ": "X0", "WK": "X1", "WC": "X2"}
# counters (its select_victims' counts, in its counters() order)
(PK_WA_DEMOTED, PK_WA_DROPPED, PK_WA_SSD_EV, PK_WA_DEAD, PK_WA_SCORED, PK_WA_REQUEUED,
 PK_WA_FAILED) = range(K_P0, K_P0 + 7)
# its floats (FX): the request's time, admit_threshold, then last_t per payload from FXW_LT (2U), then per
# category (from M[M_WA_FIT]) P, lambda, lifespan and the gain 1 - e^{-lambda H}
FXW_NOW, FXW_THETA, FXW_LT = 0, 1, 8
WA_H0 = 3            # heap index of category w's queue in tier t is WA_H0 + 2 w + (t - 1)
GROW_WAH = GROW_P1   # a category queue needs room

# policies.workload_aware on flat arrays. Its queues (one LazyHeap per category and tier, entries ordered
# by (stamp when filed, payload)) are heaps WA_H0 + 2 w + (t - 1) of the heap arrays: an entry (key, p) is
# valid while p is filed in that category's queue (qcat, segment WQ) under that key (segment WK; -1 once
# popped: LazyHeap.pop leaves qcat as it is). The reuse fits are computed by the wrapper with the
# reference's own code (policies.workload_aware.ReuseFits) and given in FX; the categories of the requests
# in segment WC.
