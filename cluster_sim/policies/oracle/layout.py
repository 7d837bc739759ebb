"""oracle's names on the compiled engine: its meta slots, counters, segments and flag."""
from __future__ import annotations

from ...engine.layout import F_P1, K_P0, M_O_X0, M_O_X1, M_O_X2, M_O_X3, M_P0

# segments A / B the key of each payload's entry in the DRAM / SSD candidate heap (-1: not in it), NFA /
# NST the next use of each chunk's FA / STATE, FOFF / FNFA / FNST the node's stream and the next uses per
# reference (FNST: per request with state_use=resume, M_OR_SPATH 0), SU the chunk whose STATE each request
# uses (-1 none), FEN a Fenwick tree of SSD bytes by next use (total M_OR_FTOT), FK the next use each SSD
# copy's bytes are filed under (-1 none), G the request that last guarded a chunk (its resident path), SZR
# the size rank of a STATE by depth (rank 0: the largest payload size; M_OR_FARANK the FA's, M_OR_NSZ the
# number of sizes)
M_OR_NSZ, M_OR_FARANK, M_OR_SPATH, M_OR_FTOT = range(M_P0, M_P0 + 4)
M_O_SU, M_O_FEN, M_O_FK, M_O_SZR = M_O_X0, M_O_X1, M_O_X2, M_O_X3
SEGMENT_NAMES = {"SU": "X0", "FEN": "X1", "FK": "X2", "SZR": "X3"}
# counters (its select_victims' counts, in its counters() order)
(PK_OR_WRITTEN, PK_OR_NEVER, PK_OR_NO_ROOM, PK_OR_OTHER, PK_OR_FORCED, PK_OR_SSD_EV, PK_OR_SSD_NEVER,
 PK_OR_FAILED) = range(K_P0, K_P0 + 8)
F_HELD = F_P1        # inside its walk only: popped and held back (its selection's `held`)

# policies.oracle on flat arrays. Its candidate queues (one LazyHeap per tier in the reference, entries
# ordered by (-next use, -size, payload)) live in the DRAM and SSD heap arrays: an entry is (key,
# payload) with the key (N - next use) * M_OR_NSZ + size rank, and it is valid while it equals the
# payload's current key in that tier (segment A / B; -1 = not in the queue). A popped or discarded
# payload is out of the queue; every push (a re-key) makes the older entries stale, as LazyHeap's
# versions do: the keys are always current (a next use changes only in on_access, which re-keys).
