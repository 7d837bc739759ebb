"""``oracle`` on the compiled engine: its DRAM and SSD queues keyed by next use (its kernels), the next-use
tables with its own ``fa_use`` / ``state_use``, and the size ranks of its tie-break."""
from __future__ import annotations

import numpy as np

from . import layout as L
from ..oracle_admission.engine import Adapter as _Hindsight


class Adapter(_Hindsight):
    segment_names = L.SEGMENT_NAMES
    keyed = True           # its DRAM and SSD queues are keyed by next use

    def setup(self, M, ctx) -> None:
        # the reference orders candidates by (-next use, -size, payload): sizes as ranks, 0 the
        # largest, so that one int64 key orders as its tuples
        distinct = (np.unique(np.concatenate([[ctx.fab], ctx.sb_seen]))[::-1] if ctx.has_state
                    else np.array([ctx.fab]))
        M[L.M_OR_NSZ] = len(distinct)
        rank = {int(v): i for i, v in enumerate(distinct.tolist())}
        M[L.M_OR_FARANK] = rank[ctx.fab]
        self.szr = np.array([rank.get(int(v), 0) for v in ctx.sb.tolist()], dtype=np.int64)

    def segments(self, ctx) -> dict:
        U = ctx.U
        return {"A": np.full(2 * U, -1, dtype=np.int64), "B": np.full(2 * U, -1, dtype=np.int64),
                "FK": np.full(2 * U, -1, dtype=np.int64), "G": np.full(U, -1, dtype=np.int64), "SZR": self.szr}

    def set_future(self, offsets, flat, tables=None) -> tuple:
        from . import next_use_tables
        node = self.node
        J = node.J
        p = node.params
        if tables is None:
            offsets = np.ascontiguousarray(offsets, dtype=np.int64)
            first_fa, nfa, first_st, st_use, nst, _ = next_use_tables(offsets, np.asarray(flat), node.n_chunks,
                                                                      node.model, p.fa_use, p.state_use)
            tables = tuple(np.ascontiguousarray(a, dtype=np.int64) for a in (offsets, first_fa, first_st, nfa, nst,
                                                                                st_use))
        offsets, first_fa, first_st, nfa, nst, st_use = tables
        N = len(offsets) - 1
        node.repack(NFA=first_fa, NST=first_st, FOFF=offsets, FNFA=nfa, FNST=nst, SU=st_use,
                    FEN=np.zeros(N + 2, dtype=np.int64))
        node.S.M[J.M_NFUT] = N
        node.S.M[L.M_OR_SPATH] = int(p.state_use == "path")
        self.extra = {"requests_with_state_use": int((st_use >= 0).sum())}
        node.has_future = True
        return tables

    def counters(self) -> dict:
        PK = self.node.S.K.tolist()
        return {"dram_written": PK[L.PK_OR_WRITTEN], "dram_dropped_never_used": PK[L.PK_OR_NEVER],
                "dram_dropped_no_room": PK[L.PK_OR_NO_ROOM], "dram_dropped_other_copy": PK[L.PK_OR_OTHER],
                "forced_writes": PK[L.PK_OR_FORCED], "ssd_evictions": PK[L.PK_OR_SSD_EV],
                "ssd_evicted_never_used": PK[L.PK_OR_SSD_NEVER], "failed_selects": PK[L.PK_OR_FAILED], **self.extra}
