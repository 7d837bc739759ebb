"""dynamic_random's names on the compiled engine: its meta slots, counters, floats and segment."""
from __future__ import annotations

from ...engine.layout import F_P2, GROW_P0, K_P0, M_L_X0, M_O_X0, M_P0

# M_DR_STARTED 1 once the control loop has its start, the node's draws in FX from FX_UB (M_DR_UN drawn,
# M_DR_UI the next, M_DR_U0 where this DRAM selection started; FX's room: M_FX_CAP), M_DR_ND the
# selection's decisions logged (segment DEC, room M_CAP_DEC: 2 * payload + admitted), M_DR_SEL the
# selections so far (the stamp of the decision accounting's `seen`, segment A); M_DR_ROOM the draws and
# decisions a request may take (its DRAM selections consider at most every DRAM and HBM payload and its
# own, twice with retries and the forced pass), kept free before the request
(M_DR_STARTED, M_DR_UN, M_DR_UI, M_DR_U0, M_DR_ND, M_DR_SEL, M_DR_ROOM) = range(M_P0, M_P0 + 7)
M_O_DEC, M_CAP_DEC = M_O_X0, M_L_X0
SEGMENT_NAMES = {"DEC": "X0"}
# counters (besides the engine's victim tally); PK_DR_WRITTEN(_LAST): the bytes its demotions wrote (at
# the last control update)
PK_DR_ADM, PK_DR_REJ, PK_DR_ADM_B, PK_DR_REJ_B, PK_DR_UPDATES, PK_DR_WRITTEN, PK_DR_WRITTEN_LAST = range(K_P0, K_P0 + 7)
# its floats (FX): the control loop and its parameters, then the draw buffer
(FX_FACTOR, FX_START, FX_LAST, FX_ROBS, FX_RNEED, FX_TARGET, FX_MAXRATE, FX_CW, FX_FMIN, FX_FMAX, FX_INTERVAL,
 FX_DECAY, FX_BITLEN_BASE, FX_UB) = range(14)
DAY = 86400.0
GROW_DR = GROW_P0    # its draws or decisions need room
F_DRC = F_P2         # inside its decision accounting only: a victim of the selection

# DynamicRandomPolicy: the gated walk over lru's queues, admitting a DRAM victim without an SSD copy
# with probability P / (P + n (1 - P)) (n: the writes it commits) from the node's draws; a control
# loop in simulated time moves the factor of P toward the write budget.
