"""``workload_aware`` on the compiled engine: per-category queues (heaps from ``_jit.WA_H0``), each
payload's category, the fits per category in ``FX``; its reuse statistics run here, with the reference's
code, request by request (they depend on the stream alone), and the kernel runs the requests between two
refits with that stretch's fits."""
from __future__ import annotations

import math

import numpy as np

from . import layout as L
from ...engine.adapter import Adapter as _Base


class Adapter(_Base):
    segment_names = L.SEGMENT_NAMES
    keyed = True                # its DRAM and SSD queues are per-category heaps
    needs_arrival = True

    def setup(self, M, ctx) -> None:
        from . import ReuseFits
        p = self.node.params
        M[L.M_WA_THETA] = int(p.admit_threshold is not None)
        M[L.M_WA_FIT] = L.FXW_LT + 2 * ctx.U
        self.fits = ReuseFits.for_stream(p, ctx.U)
        self.names: dict = {}

    def segments(self, ctx) -> dict:
        U = ctx.U
        return {"A": np.full(2 * U, -1, dtype=np.int64), "G": np.full(U, -1, dtype=np.int64),
                "WQ": np.full(4 * U, -1, dtype=np.int64), "WK": np.full(4 * U, -1, dtype=np.int64),
                "WC": np.zeros(1024, dtype=np.int64)}

    def floats(self, ctx) -> np.ndarray:
        FX = np.zeros(L.FXW_LT + 2 * ctx.U + 4 * 16, dtype=np.float64)
        theta = self.node.params.admit_threshold
        FX[L.FXW_THETA] = 0.0 if theta is None else float(theta)
        return FX

    def grow(self, g: int) -> None:
        node = self.node
        S = node.S
        if g & L.GROW_WAH:
            # the category queues (DRAM, SSD alternating): room for a request's entries
            hcap = S.hcap.copy()
            for h in range(L.WA_H0, len(hcap)):
                room = int(S.M[L.M_WA_ROOM1 if (h - L.WA_H0) % 2 == 0 else L.M_WA_ROOM2])
                n = int(S.hn[h])
                if n + room > hcap[h] or 4 * n > hcap[h]:
                    hcap[h] = max(2 * hcap[h], 2 * (n + room))
            node.S = node.heaps(S, hcap)

    def run(self, offsets, idx, counted, arrival, reqs, R) -> None:
        category, turn = reqs.category, reqs.turn
        fits, names = self.fits, self.names
        flat = self.node.S.flat
        arr = arrival[idx].tolist()
        cats = np.zeros(len(idx), dtype=np.int64)
        start = 0
        for k, i in enumerate(idx.tolist()):
            now = arr[k]
            if k > start and fits.refit_due(now):
                self._run(offsets, idx, counted, arrival, cats, start, k, R)
                start = k
            fits.tick(now)
            key = (None if category is None else category[i], 0 if turn is None else int(turn[i]))
            w = names.get(key)
            if w is None:
                w = names[key] = fits._cat_id(fits.category_name(*key))
            cats[k] = w
            fits._observe(flat[offsets[i]:offsets[i + 1]], now, w)
        if start < len(idx):
            self._run(offsets, idx, counted, arrival, cats, start, len(idx), R)

    def _run(self, offsets, idx, counted, arrival, cats, a, b, R) -> None:
        """Requests ``idx[a:b]`` (no refit among them) on the kernel, with the fits as they stand."""
        node = self.node
        J = node.J
        n = len(self.fits.cat_names)
        S = node.S
        if len(S.hcap) < L.WA_H0 + 2 * n:              # queues for the new categories
            grow = L.WA_H0 + 2 * n - len(S.hcap)
            node.S = S = node.heaps(S, np.concatenate([S.hcap, np.full(grow, 64, dtype=np.int64)]))
        fo = int(S.M[L.M_WA_FIT])
        if len(S.FX) < fo + 4 * n:
            FX = np.zeros(fo + 8 * n, dtype=np.float64)
            FX[:len(S.FX)] = S.FX
            node.S = S = S._replace(FX=FX)
            S.M[J.M_FX_CAP] = len(FX)
        H = self.fits.H
        for w, (P, lam, ell) in enumerate(self.fits.fit):
            S.FX[fo + 4 * w:fo + 4 * w + 4] = (P, lam, ell, 1.0 - math.exp(-lam * H))
        S.M[L.M_WA_NCAT] = n
        if len(node.seg("WC")) < b - a:
            node.repack(WC=np.zeros(2 * (b - a), dtype=np.int64))
        node.seg("WC")[:b - a] = cats[a:b]
        node.replay_rows(offsets, idx[a:b], counted[a:b], arrival, R[a:b])

    def counters(self) -> dict:
        PK = self.node.S.K.tolist()
        return {"dram_victims_demoted": PK[L.PK_WA_DEMOTED], "dram_victims_dropped": PK[L.PK_WA_DROPPED],
                "ssd_evictions": PK[L.PK_WA_SSD_EV], "dead_victims": PK[L.PK_WA_DEAD],
                "heads_scored": PK[L.PK_WA_SCORED], "requeued": PK[L.PK_WA_REQUEUED],
                "failed_selects": PK[L.PK_WA_FAILED], **self.fits.fit_counters()}
