"""``hot_prefix`` on the compiled engine: each payload's heat (a count) and the request of its last
reference (``PX``), the gated walk's waiting keys, and its threshold as a whole count."""
from __future__ import annotations

import math

import numpy as np

from ...engine.adapter import Adapter as _Base, tally


class Adapter(_Base):
    def setup(self, M, ctx) -> None:
        # heat without decay is a whole count, so heat >= f is count >= ceil(f)
        M[self.node.J.M_THRESH] = math.ceil(float(self.node.params.f))

    def segments(self, ctx) -> dict:
        U = ctx.U
        return {"A": np.zeros(2 * U, dtype=np.int64), "B": np.zeros(2 * U, dtype=np.int64),
                "W": np.full(U, -1, dtype=np.int64)}

    def counters(self) -> dict:
        return tally(self.node.S.K.tolist())
