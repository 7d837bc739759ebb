"""``oracle_admission`` on the compiled engine: the node's stream and next uses as ``PX`` segments, the
earlier passes' outcomes (labels), and the hindsight passes run on fresh nodes before the counted one."""
from __future__ import annotations

import numpy as np

from . import layout as L
from ...engine.adapter import Adapter as _Base
from ...errors import ConfigError


def last_per_key(keys: np.ndarray, vals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted unique keys, the value last given to each), as successive ``dict`` updates leave it."""
    if not len(keys):
        return keys.astype(np.int64), vals.astype(np.uint8)
    u, first_rev = np.unique(keys[::-1], return_index=True)
    return u.astype(np.int64), vals[::-1][first_rev].astype(np.uint8)


class Adapter(_Base):
    #: tests: the outcome log's room per request (None: a tier's worth)
    out_room = None

    def __init__(self, node):
        super().__init__(node)
        self.extra: dict = {}         # counters of the passes
        self.room = 0

    def segments(self, ctx) -> dict:
        U = ctx.U
        # copies that may leave the SSD in one request: those it holds, and a request's worth
        self.room = int(ctx.bound[2]) + 64 if self.out_room is None else int(self.out_room)
        return {"A": np.full(2 * U, -1, dtype=np.int64), "OUT": np.zeros(2 * self.room, dtype=np.int64)}

    def future_tables(self, offsets, flat) -> tuple:
        from ..oracle import next_use_tables
        node = self.node
        offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        first_fa, nfa, first_st, _, nst, _ = next_use_tables(offsets, np.asarray(flat), node.n_chunks, node.model,
                                                             "path", "path")
        return (offsets, np.ascontiguousarray(first_fa, dtype=np.int64), np.ascontiguousarray(first_st, dtype=np.int64),
                np.ascontiguousarray(nfa, dtype=np.int64), np.ascontiguousarray(nst, dtype=np.int64))

    def set_future(self, offsets, flat, tables=None) -> tuple:
        """Give the node its whole request stream (``flat[offsets[j]:offsets[j+1]]`` = its j-th
        request's path), as the interpreted policy gets ``ctx.future``. Returns the next-use tables,
        reusable by another node with the same stream."""
        node = self.node
        J = node.J
        if tables is None:
            tables = self.future_tables(offsets, flat)
        offsets, first_fa, first_st, nfa, nst = tables
        node.repack(NFA=first_fa, NST=first_st, FOFF=offsets, FNFA=nfa, FNST=nst)
        node.S.M[J.M_NFUT] = len(offsets) - 1
        node.S.M[J.M_OUTROOM] = self.room
        node.has_future = True
        return tables

    def set_labels(self, keys: np.ndarray | None, vals: np.ndarray | None) -> None:
        """Earlier passes' outcomes (sorted unique event keys, 1 = used from the SSD); None: pass 1."""
        node = self.node
        J = node.J
        if keys is None or not len(keys):
            node.S.M[J.M_HAS_LABELS] = 0
            return
        node.repack(LAB=2 * np.asarray(keys, dtype=np.int64) + np.asarray(vals, dtype=np.int64))
        node.S.M[J.M_HAS_LABELS] = 1

    def outcomes(self) -> tuple[np.ndarray, np.ndarray]:
        """This pass's admission events and whether each copy served a reuse from the SSD (the
        last outcome of each event; copies still resident count as they stand), as
        ``OracleAdmissionPolicy.hindsight_outcomes``: (sorted unique keys, values)."""
        node = self.node
        J, S = node.J, node.S
        n = int(S.M[J.M_OUTN])
        out = node.seg("OUT")[:n]
        adm = node.seg("A")
        live = np.flatnonzero(adm >= 0)
        keys = np.concatenate([out >> 1, adm[live]])
        vals = np.concatenate([out & 1, (S.flags[live] & L.F_OHIT) != 0]).astype(np.uint8)
        return last_per_key(keys, vals)

    def warm_up_future(self, offsets, flat) -> None:
        """The warm-up's stream: labels given and outcomes logged, so those kernels compile too."""
        self.set_future(offsets, flat)
        self.set_labels(np.array([7], dtype=np.int64), np.zeros(1, dtype=np.uint8))
        self.node.S.M[self.node.J.M_LOG_OUT] = 1

    def hindsight(self, trace) -> None:
        """``NodeRunner._hindsight_passes`` of the reference: replay the node's stream ``passes - 1``
        times (or to a fixed point) on fresh nodes, each told the outcomes of the earlier ones."""
        node = self.node
        J = node.J
        if node.future_idx is None:
            raise ConfigError("policy", f"policy {node.policy_name!r} needs the node's future requests, "
                              "which only exist when routing runs ahead (fleet.sync=none)")
        fidx = node.future_idx
        lens = (trace.offsets[1:] - trace.offsets[:-1])[fidx]
        offs = np.zeros(len(fidx) + 1, dtype=np.int64)
        np.cumsum(lens, out=offs[1:])
        starts = trace.offsets[fidx]
        flat = trace.flat[np.repeat(starts - offs[:-1], lens) + np.arange(offs[-1], dtype=np.int64)]
        tables = self.set_future(offs, flat)
        total = int(getattr(node.params, "passes", 1))
        if total <= 1:
            return
        lab_k = np.zeros(0, dtype=np.int64)
        lab_v = np.zeros(0, dtype=np.uint8)
        passes = 1
        converged = False
        counted = trace.counted[fidx]
        for _ in range(total - 1):
            room = None
            while True:
                other = node.fresh(cost=False, ftl=False)
                other.adapter.set_future(None, None, tables)
                if room is not None:
                    other.repack(OUT=np.zeros(room, dtype=np.int64))
                other.adapter.set_labels(lab_k if passes > 1 else None, lab_v)
                other.S.M[J.M_LOG_OUT] = 1
                other.replay_raw(trace.offsets, fidx, counted, trace.arrival_s)
                if not other.S.M[J.M_OUT_OVERFLOW]:
                    break
                room = 2 * len(other.seg("OUT"))    # the log filled inside a request: again, larger
            k, v = other.adapter.outcomes()
            passes += 1
            lab_k, lab_v = last_per_key(np.concatenate([lab_k, k]), np.concatenate([lab_v, v]))
            if bool(np.all(v)):
                converged = True          # nothing written went unused: this rule is its own fixed point
                break
        self.set_labels(lab_k, lab_v)
        self.extra = {"passes": passes, "converged": int(converged)}

    def counters(self) -> dict:
        PK = self.node.S.K.tolist()
        return {"admitted": PK[L.PK_ADMITTED], "rejected_never_used": PK[L.PK_NEVER_USED],
                "rejected_unused_before": PK[L.PK_UNUSED_BEFORE], "forced_writes": PK[L.PK_FORCED], **self.extra}
