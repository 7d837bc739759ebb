"""kvbm_filter's names on the compiled engine: its meta slots, counter, segment and floats."""
from __future__ import annotations

from ...engine.layout import K_P0, M_L_X0, M_O_X0, M_P0

# M_KV_D: decay rounds so far; M_KV_LIVE: at least the chunks in the count map (exact after each
# check); M_KV_MAX / M_KV_THRESH: policy.max_entries / policy.threshold
M_KV_D, M_KV_LIVE, M_KV_MAX, M_KV_THRESH = range(M_P0, M_P0 + 4)
#: segment KV: per chunk, the decay round at which its count reaches 0 (count = max(KV[c] - D, 0))
M_O_KV, M_L_KV = M_O_X0, M_L_X0
SEGMENT_NAMES = {"KV": "X0"}
# FX: policy.decay_s, the next periodic round and the request's time (trace seconds)
FX_DECAY, FX_NEXT, FX_NOW = 0, 1, 2
# counters (besides the engine's victim tally)
PK_KV_PRUNES = K_P0
