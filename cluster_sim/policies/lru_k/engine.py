"""``lru_k`` on the compiled engine: a record per payload (its K history stamps, LAST and its status,
the ghost list's links, its canonical keys in DRAM and in the SSD), the payloads a request referenced
while absent, and its keyed DRAM and SSD queues."""
from __future__ import annotations

import numpy as np

from . import layout as L
from ...engine.adapter import Adapter as _Base, tally
from ...errors import ConfigError


def _record_fields(params) -> int:
    """The int64 words of a record after its K history stamps (LK_LSTAMP too with crp in seconds)."""
    return L.LK_FIELDS + int(params.crp != "request")


class Adapter(_Base):
    segment_names = L.SEGMENT_NAMES
    keyed = True

    def setup(self, M, ctx) -> None:
        p = self.node.params
        K = int(p.k)
        M[L.M_LK_K] = K
        M[L.M_LK_SECONDS] = int(p.crp != "request")
        M[L.M_LK_Q] = K + _record_fields(p)
        M[L.M_GHEAD] = M[L.M_GTAIL] = -1
        M[L.M_CAPP] = sum(ctx.caps) // max(ctx.fab, 1)
        M[L.M_GHOST_F:L.M_GHOST_F + 1].view(np.float64)[0] = float(p.ghost)

    def segments(self, ctx) -> dict:
        U, K = ctx.U, int(self.node.params.k)
        rec = np.full((2 * U, K + _record_fields(self.node.params)), -1, dtype=np.int64)
        rec[:, K + L.LK_LS] = L.ST_NONE        # LAST's request 0, status none (packed: _jit.LK_LS)
        return {"LK": rec.reshape(-1), "W": np.full(U, -1, dtype=np.int64),
                "PEND": np.zeros(ctx.maxd + 2, dtype=np.int64)}

    def floats(self, ctx) -> np.ndarray | None:
        p = self.node.params
        if p.crp == "request":
            return None
        FX = np.full(L.FX_LT0 + 2 * ctx.U, -np.inf, dtype=np.float64)     # LAST's time: never
        FX[L.FX_NOW], FX[L.FX_CRP] = 0.0, float(p.crp)
        return FX

    def before_replay(self, offsets, idx, reqs, R) -> None:
        if not len(idx):
            return
        J = self.node.J
        # lru_k packs two stamps in one key (_jit._lk_key): a request touches at most 2m + 1 payloads
        touches = 2 * int((offsets[idx + 1] - offsets[idx]).sum()) + len(idx)
        if int(self.node.S.M[J.M_CLOCK]) + touches >= 2**31 - 1:
            raise ConfigError("cache.engine", "lru_k on the compiled engine keeps stamps below 2^31 per "
                              "node and this node's stream touches more: use cache.engine=python")

    def counters(self) -> dict:
        S = self.node.S
        PK = S.K.tolist()
        return {"references": PK[L.PK_REFS], "uncorrelated_references": PK[L.PK_UNCORRELATED],
                "ghost_hits": PK[L.PK_GHOST_HITS], "ghosts": int(S.M[L.M_GN]),
                "histories_forgotten": PK[L.PK_FORGOTTEN], **tally(PK)}
