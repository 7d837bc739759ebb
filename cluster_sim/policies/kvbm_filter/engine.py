"""``kvbm_filter`` on the compiled engine: a count per chunk (``PX``, segment KV), the gated walk's
waiting keys, its decay clock in ``FX``, and its counters."""
from __future__ import annotations

import numpy as np

from . import layout as L
from ...engine.adapter import Adapter as _Base, tally


class Adapter(_Base):
    segment_names = L.SEGMENT_NAMES

    def setup(self, M, ctx) -> None:
        p = self.node.params
        M[L.M_KV_THRESH] = int(p.threshold)
        M[L.M_KV_MAX] = int(p.max_entries)

    def segments(self, ctx) -> dict:
        return {"KV": np.zeros(ctx.U, dtype=np.int64), "W": np.full(ctx.U, -1, dtype=np.int64)}

    def floats(self, ctx) -> np.ndarray:
        d = float(self.node.params.decay_s)
        return np.array([d, d, 0.0], dtype=np.float64)

    def counters(self) -> dict:
        S = self.node.S
        return {**tally(S.K.tolist()), "decay_rounds": int(S.M[L.M_KV_D]),
                "oversize_prunes": int(S.K[L.PK_KV_PRUNES])}
