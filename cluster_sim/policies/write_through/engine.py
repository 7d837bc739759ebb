"""``write_through`` / ``write_through_selective`` on the compiled engine: hit counts, the requests that
asked for writes, the gated walk's waiting keys and the queue of SSD writes asked for (``PX``)."""
from __future__ import annotations

import numpy as np

from . import layout as L
from ...engine.adapter import Adapter as _Base, tally


class Adapter(_Base):
    def segments(self, ctx) -> dict:
        U, bound = ctx.U, ctx.bound
        # writes asked for in one request step: at most the payloads entering DRAM or reused in it (each
        # once while pending); twice the most seen is kept free before each request
        return {"A": np.zeros(2 * U, dtype=np.int64), "B": np.full(2 * U, -1, dtype=np.int64),
                "W": np.full(U, -1, dtype=np.int64),
                "AQ": np.zeros(max(64, int(bound[0]) + int(bound[1]) + 64), dtype=np.int64)}

    def counters(self) -> dict:
        J = self.node.J
        PK = self.node.S.K.tolist()
        return {"ssd_writes_requested": PK[J.PK_REQUESTED], "hits_counted": PK[L.PK_HITS_COUNTED], **tally(PK)}
