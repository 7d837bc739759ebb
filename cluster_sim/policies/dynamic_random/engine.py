"""``dynamic_random`` on the compiled engine: its control loop, parameters and draw buffer (``FX``), the
selection that last counted each payload's decision and the decisions of the selection under way (``PX``)."""
from __future__ import annotations

import numpy as np

from . import layout as L
from ...engine.adapter import Adapter as _Base, tally


class Adapter(_Base):
    segment_names = L.SEGMENT_NAMES
    needs_arrival = True        # its control loop runs on the requests' clock

    def segments(self, ctx) -> dict:
        U = ctx.U
        return {"A": np.zeros(2 * U, dtype=np.int64), "W": np.full(U, -1, dtype=np.int64),
                "DEC": np.zeros(1024, dtype=np.int64)}      # grown before a request that may need more

    def floats(self, ctx) -> np.ndarray:
        from . import write_budget
        node = self.node
        p = node.params
        FX = np.zeros(L.FX_UB + 8192, dtype=np.float64)
        FX[L.FX_FACTOR] = p.probability_seed
        FX[L.FX_TARGET], FX[L.FX_MAXRATE] = write_budget(p, node.hw, node.rpd_scale)
        FX[L.FX_CW] = p.change_window
        FX[L.FX_FMIN] = p.prob_factor_min
        FX[L.FX_FMAX] = p.prob_factor_max
        FX[L.FX_INTERVAL] = p.update_interval_s
        FX[L.FX_DECAY] = p.size_decay
        FX[L.FX_BITLEN_BASE] = int(p.base_size).bit_length()
        return FX

    def grow(self, g: int) -> None:
        node = self.node
        if g & L.GROW_DR:
            room = int(node.S.M[L.M_DR_ROOM])
            if len(node.seg("DEC")) < room:
                node.repack(DEC=np.zeros(2 * room, dtype=np.int64))
            S = node.S
            if len(S.FX) < L.FX_UB + 6144 + room:
                FX = np.zeros(2 * (L.FX_UB + 6144 + room), dtype=np.float64)
                FX[:len(S.FX)] = S.FX
                node.S = S._replace(FX=FX)

    def counters(self) -> dict:
        node = self.node
        FX = node.S.FX
        PK = node.S.K.tolist()
        return {"admitted": PK[L.PK_DR_ADM], "rejected": PK[L.PK_DR_REJ], "admitted_bytes": PK[L.PK_DR_ADM_B],
                "rejected_bytes": PK[L.PK_DR_REJ_B], "control_updates": PK[L.PK_DR_UPDATES],
                "prob_factor_final": float(FX[L.FX_FACTOR]), "target_bytes_per_s": float(FX[L.FX_TARGET]),
                "observed_bytes_per_s_last": float(FX[L.FX_ROBS]), **tally(PK)}
