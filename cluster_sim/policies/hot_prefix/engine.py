"""``hot_prefix`` on the compiled engine: each payload's heat (a count in ``PX``, or with a half-life a
float in ``FX`` beside the time of its last update) and the request of its last reference, the gated
walk's waiting keys, and its threshold."""
from __future__ import annotations

import math

import numpy as np

from . import layout as L
from ...engine.adapter import Adapter as _Base, tally


class Adapter(_Base):
    def setup(self, M, ctx) -> None:
        p = self.node.params
        # heat without decay is a whole count, so heat >= f is count >= ceil(f)
        M[self.node.J.M_THRESH] = math.ceil(float(p.f))
        M[L.M_HP_DECAY] = int(p.half_life_s is not None)
        M[L.M_HP_TUPD] = L.FX_HEAT0 + 2 * ctx.U

    def segments(self, ctx) -> dict:
        U = ctx.U
        return {"A": np.zeros(2 * U, dtype=np.int64), "B": np.zeros(2 * U, dtype=np.int64),
                "W": np.full(U, -1, dtype=np.int64)}

    def floats(self, ctx) -> np.ndarray:
        p = self.node.params
        if p.half_life_s is None:
            return np.zeros(L.FX_HEAT0, dtype=np.float64)
        FX = np.zeros(L.FX_HEAT0 + 4 * ctx.U, dtype=np.float64)
        FX[L.FX_T], FX[L.FX_F] = float(p.half_life_s), float(p.f)
        return FX

    def counters(self) -> dict:
        return tally(self.node.S.K.tolist())
