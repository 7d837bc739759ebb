"""``gandalf`` on the compiled engine.

``placement=strict`` (the paper's rule alone): the requests that asked for SSD writes, the STATE demands
per chunk and the queue of writes asked for (``PX`` segments), and its counters.

The capacity-aware policy (decision 135): its interpreted policy, bound to the node's arrays, derives its
parameters and allocates its kernels' arrays exactly as on the interpreted node; they become the node's
``PX`` and ``FX`` (``_jit.GI_SEGMENTS`` / ``GF_SEGMENTS``), and the engine drives its kernels. Between
requests this side grows its heaps' tables, renumbers their versions, and runs the hints estimator's room
and refit and the population windows' room (``GROW_GD`` .. ``GROW_GDGEN``).
"""
from __future__ import annotations

import math

import numpy as np

from ...cost import CostModel
from . import layout as L
from ...engine.adapter import Adapter as _Base
from ...errors import ConfigError


def adapter(params):
    """The adapter of these parameters: placement=strict has kernels (and arrays) of its own."""
    return Strict if params.placement == "strict" else CapacityAware


class Strict(_Base):
    def segments(self, ctx) -> dict:
        U, bound = ctx.U, ctx.bound
        return {"B": np.full(2 * U, -1, dtype=np.int64),      # the request that asked for its SSD write
                "G": np.full(U, -1, dtype=np.int64),          # STATE demands per chunk (-1: never checkpointed)
                "AQ": np.zeros(max(64, int(bound[0]) + int(bound[1]) + 64), dtype=np.int64)}

    def counters(self) -> dict:
        PK = self.node.S.K.tolist()
        return {"drops_fa": PK[L.PK_G_DROPS_FA], "drops_state": PK[L.PK_G_DROPS_STATE],
                "moves_fa": PK[L.PK_G_MOVES_FA], "moves_state": PK[L.PK_G_MOVES_STATE],
                "moves_free": PK[L.PK_G_MOVES_FREE], "admissions_rejected_by_fee": 0,
                "ssd_evictions": PK[L.PK_G_SSD_EV], "rescore_repushes": 0, "stale_pops": 0, "heap_rebuilds": 0,
                "states_checkpointed": PK[L.PK_G_NCKPT], "states_demanded": PK[L.PK_G_NDEM],
                "states_demanded_twice": PK[L.PK_G_NDEM2]}


class CapacityAware(_Base):
    keyed = True            # its DRAM and SSD queues are its own heaps: no walker holds the log
    rows = 1024             # the first rows of its heaps' tables (tests: fewer, to grow them)

    def __init__(self, node):
        super().__init__(node)
        self.J, self.params, self.model, self.hw = node.J, node.params, node.model, node.hw
        self.caps, self.n_chunks, self.ct = node.caps, node.n_chunks, node.ct
        self.GJ = None          # policies._gandalf_jit
        self.est = None         # reuse=hints: its estimator (policies.reuse.CompiledHintsReuse)

    @property
    def S(self):
        return self.node.S

    @S.setter
    def S(self, value):
        self.node.S = value

    @property
    def cost(self):
        return self.node.cost

    @classmethod
    def warm_up_setting(cls, params):
        from ...engine.adapter import real_setting
        return real_setting()       # its policy object prices with the cost model

    def before_replay(self, offsets, idx, reqs, R) -> None:
        self.gens_guard()
        if self.est is not None:
            agent, category = reqs.agent, reqs.category
            sub = None
            if agent is not None or category is not None:
                sub = np.zeros(len(offsets) - 1, dtype=bool) if agent is None else np.asarray(agent) > 0
                if category is not None:
                    sub = sub | np.array([c == "subagent" for c in category], dtype=bool)
            self._requests(idx, reqs.session, agent, reqs.stop, sub, reqs.turn, R)

    def grow(self, g: int) -> None:
        if g & L.GROW_GD:
            self._grow_gandalf_tables()
        if g & L.GROW_GDGEN:
            self.gens_guard()
        if g & L.GROW_HINTS:
            self._hints_room()
        if g & L.GROW_REFIT:
            self._refit()
        if g & L.GROW_POP:
            self._pop_room()

    def counters(self) -> dict:
        GJ = self.GJ
        from . import COUNTERS
        cm, sm, P = self.gseg("CMETA"), self.gseg("SMETA"), self.gseg("P")
        c = dict(zip(COUNTERS, self.gseg("K").tolist()))
        c["stale_pops"] = int(cm[GJ.M_STALE] + sm[GJ.M_STALE])
        c["heap_rebuilds"] = int(cm[GJ.M_REBUILDS] + sm[GJ.M_REBUILDS])
        c["states_checkpointed"] = int(P[GJ.A_NCKPT])
        c["states_demanded"] = int(P[GJ.A_NDEM])
        c["states_demanded_twice"] = int(P[GJ.A_NDEM2])
        if self.est is not None:
            GX, H = self.gseg("GX"), float(self.gseg("RSC")[L.RS_H])
            c["horizon_s"] = H if H != math.inf else 0.0
            last, seen = int(GX[L.GX_LAST_REFIT]), int(GX[L.GX_SEEN])
            c["estimator_refits"] = 0 if last <= 0 else 1 + (seen - int(GX[L.GX_FIRST])) // int(GX[L.GX_EVERY])
        return c

    def arrays(self, ctx) -> dict:
        """gandalf (capacity-aware): its interpreted policy, bound to this node's arrays, derives its
        parameters and allocates its kernels' arrays exactly as on the interpreted node; the engine
        then drives those kernels (decision 135)."""
        from types import SimpleNamespace

        from . import GandalfPolicy
        sb = ctx.sb
        J, S = self.J, self.S
        U = self.n_chunks
        size = np.empty(2 * U, dtype=np.int64)
        size[0::2] = int(S.M[J.M_FAB])
        size[1::2] = sb[np.asarray(S.depth)] if bool(self.model.has_state) else int(S.M[J.M_FAB])
        st = SimpleNamespace(res=S.res, size=size, depth=np.asarray(S.depth), parent=np.asarray(S.parent),
                             anchor=np.asarray(S.anchor), flat=np.asarray(S.flat), dcnt=[S.dcnt[0], S.dcnt[1], S.dcnt[2]],
                             dany=S.dany, pin=S.pin, cap=list(self.caps))
        cost = self.cost if self.cost is not None else CostModel.of(self.model, self.hw)
        pol = self.node.policy_obj if isinstance(self.node.policy_obj, GandalfPolicy) else GandalfPolicy(self.params)
        self.node.policy_obj = None
        pol.announce_compile = False           # its kernels are built with the engine's, under its notice
        pol.bind(SimpleNamespace(state=st, hardware=self.hw, model=self.model, chunk_tokens=self.ct, cost=cost))
        if pol._jit is None:
            raise ConfigError("cache.engine", "gandalf on the compiled engine needs numba")
        GJ = pol._jit
        pol._P[GJ.A_CWNOW] = pol._cw(0.0)          # static wear price
        self.GJ = GJ          # (the policy object goes: its arrays are copied below)
        # the SSD plan (SSD victims) and the leaf-event buffer (two per chunk leaving a tier) hold
        # resident payloads only: sized for the tiers full of their smallest payloads plus a request's
        # own, not for every payload; room is checked before each request (GROW_GD, _grow_gandalf_tables)
        lo = max(int(S.M[J.M_LO]), 1)
        maxd = int(np.max(S.depth)) if U else 1
        caps = [int(c) for c in self.caps]
        held = self._held(sum(caps) // lo, maxd)
        ints = {"SBX": pol._C[2], "HITS": pol._hits_a, "SDEM": pol.state_demands, "F": pol._F, "K": pol._K, "G": pol._G,
                "CKV": pol.cand.tup[1], "CMEM": pol.cand.tup[2], "CMETA": pol.cand.tup[3],
                "SKV": pol.ssd_heap.tup[1], "SMEM": pol.ssd_heap.tup[2], "SMETA": pol.ssd_heap.tup[3],
                **{f"TD{i}": a for i, a in enumerate(pol._TD)}, **{f"TS{i}": a for i, a in enumerate(pol._TS)},
                "PLAN": np.zeros(held), "GX": np.zeros(L.N_GX), "CKPT": pol.ckpt_ever,
                "MEND": np.zeros(U), "MGEN": np.zeros(U), "KINDS": np.zeros(2 * held), "NODES": np.zeros(2 * held)}
        ints["GX"][L.GX_PLAN] = -1
        # the heaps' entry tables start with room for half as many rows as the node has chunks (capped
        # by the kernel's room for the heap's tiers full of their smallest payloads: every tier for the
        # SSD heap, the HBM and DRAM for the DRAM heap), so that they seldom grow: a growth rebuilds
        # the whole of FX between requests (about 3 ms a time on Mooncake)
        rows = crows = self.rows
        if rows >= 16:
            most = 2 * (held - 2) + 66
            cmost = 2 * (self._held(sum(caps[:2]) // lo, maxd) - 2) + 66
            rows, crows = max(rows, min(most, U // 2)), max(rows, min(cmost, U // 2))
        floats = {"TF": pol._tf_a, "TL": pol._tl_a, "POPP": pol._popp_a, "CRC": pol._crc_a,
                  "CRCC": pol._crc_cum_a, "EST": pol._E_a, "P": pol._P, "GN": np.zeros(1),
                  # the heaps' entry tables (empty now; room is made before each request: GROW_GD)
                  "CST": np.zeros(3 * crows), "SST": np.zeros(3 * rows)}
        self.est = est = pol.est          # reuse=hints: its estimator (the refit runs on it)
        if est is not None:
            # its estimates stand for the demand statistics: no kernel reads first touches or hit
            # counts under reuse=hints, so none are kept (one slot each; decision 152)
            ints["HITS"] = np.zeros(1)
            floats["TF"] = np.full(1, np.nan)
            GX = ints["GX"]
            GX[L.GX_HINTS] = 1
            GX[L.GX_LAST_REFIT] = -1
            GX[L.GX_FIRST], GX[L.GX_EVERY] = est.first_refit, est.refit_requests
            GX[L.GX_CHUNKS] = pol.objective == "chunks"
            # a request adds at most its path and its thread's previous group (access) and a STATE
            # per chunk (on_insert), in at most five groups, each with one re-evaluation
            maxd = int(np.max(S.depth)) if U else 1
            est._room_need = 3 * maxd + 8
            est._room_groups = 8
            GX[L.GX_ROOMB] = est._room_need
            # room for the node's life, so that growth (a repack of the whole state) stays rare: members
            # (compacted in place by the kernel), groups and re-evaluations, threads
            gmin = max(1024, U // 8)
            est._gmin = gmin
            est.gbuf = np.zeros(max(len(est.gbuf), U), dtype=np.int64)
            est.gs, est.gn, est.gt0 = (np.zeros(gmin, dtype=np.int64), np.full(gmin, -1, dtype=np.int64),
                                       np.zeros(gmin))
            est.evt, est.evg, est.evb = np.zeros(gmin), np.zeros(gmin, dtype=np.int64), np.zeros(gmin, dtype=np.int64)
            est.thr = np.full(4096, -1, dtype=np.int64)
            if self.rows < 16:
                # tests: its buffers start as small as a request allows, to grow on the way (compaction,
                # renumbering, growth) as its heap tables do
                est._gmin = 8
                est.gbuf = np.zeros(est._room_need, dtype=np.int64)
                est.gs, est.gn, est.gt0 = np.zeros(8, dtype=np.int64), np.full(8, -1, dtype=np.int64), np.zeros(8)
                est.evt, est.evg, est.evb = np.zeros(8), np.zeros(8, dtype=np.int64), np.zeros(8, dtype=np.int64)
                est.thr = np.full(1, -1, dtype=np.int64)
            est._room()
            ints.update(self.est_ints(est))
            floats.update(self.est_floats(est))
            rsc = np.zeros(L.N_RSC)
            rsc[L.RS_H] = np.inf
            floats["RSC"] = rsc
            floats["CRCT"] = np.asarray(pol._crc_true_cum, dtype=np.float64)
        if pol.reuse == "population":
            # its windows of references (_jit._gd_population): rows for a few requests, grown between
            # requests (GROW_POP); tests start them at one request's worth
            maxd = int(np.max(S.depth)) if U else 1
            rows = maxd + 2 if self.rows < 16 else max(1024, 4 * maxd)
            nb = L.PQ_BUCKETS + 1
            ints.update(PQ=np.zeros(L.N_PQ), PRC=np.zeros(rows * nb), PUC=np.zeros(rows * nb))
            floats.update(PRT=np.zeros(rows), PUT=np.zeros(rows), PQF=np.full(1, -np.inf))
        PX, FX = self._pack([ints.get(k, ()) for k in L.GI_SEGMENTS], [floats.get(k, ()) for k in L.GF_SEGMENTS])
        if est is not None:
            self._unbind_est()          # (its arrays are copied: views are bound when needed)
        # its arrays are the node's PX and FX (it has no other segments)
        return {"PX": PX, "FX": FX}

    def _pack(self, ints: list, floats: list) -> tuple[np.ndarray, np.ndarray]:
        """Gandalf's PX and FX holding its int segments (each of ``_jit.GI_DTYPES``' type, on a word of
        its own) and its float segments, in ``GI_SEGMENTS`` / ``GF_SEGMENTS`` order."""
        ip = [np.asarray(x, dtype=L.GI_DTYPES.get(k, "int64")) for k, x in zip(L.GI_SEGMENTS, ints)]
        if any(len(x) and x.dtype != y.dtype and not np.array_equal(x, y)
               for x, y in zip(ip, ints) if isinstance(y, np.ndarray)):
            raise OverflowError("cluster_sim engine: a gandalf value does not fit its segment's type")
        starts, o = [], 8 * L.GI_HEADER
        for x in ip:
            starts.append(o)
            o += -(-x.nbytes // 8) * 8
        PX = np.zeros(o // 8, dtype=np.int64)
        PB = PX.view(np.uint8)
        for k, x in enumerate(ip):
            PX[2 * k], PX[2 * k + 1] = starts[k], starts[k] + x.nbytes
            PB[starts[k]:starts[k] + x.nbytes] = x.view(np.uint8)
        fp = [np.asarray(x, dtype=np.float64) for x in floats]
        flen = [len(x) for x in fp]
        PX[L.GF0:L.GF0 + len(flen) + 1] = np.concatenate([[0], np.cumsum(flen)])
        FX = np.zeros(max(sum(flen), 1), dtype=np.float64)
        for k, x in enumerate(fp):
            FX[PX[L.GF0 + k]:PX[L.GF0 + k + 1]] = x
        return PX, FX

    #: the hints estimator's arrays as Gandalf's segments (segment, attribute): int64, float64, and its
    #: (class, age bin) tables (float64, kept flat)
    _EST_INTS = (("RCLS", "cls"), ("RGRP", "grp"), ("RTOU", "touches"), ("RSUP", "sup"), ("RSTOP", "stop"),
                    ("RSUB", "sub"), ("RTURN", "turn"), ("RBUF", "gbuf"), ("RGS", "gs"), ("RGN", "gn"),
                    ("REVG", "evg"), ("REVB", "evb"), ("RGM", "GM"), ("RTHR", "thr"))
    _EST_FLOATS = (("EST", "E"), ("RSTART", "start"), ("RT0", "gt0"), ("REVT", "evt"))
    _EST_TABLES = (("RD", "D"), ("RCN", "C"), ("RQ", "Q"))

    def est_ints(self, est) -> dict:
        """The hints estimator's int arrays, by segment (policies._reuse_jit's arguments)."""
        return {seg: getattr(est, a) for seg, a in self._EST_INTS}

    def est_floats(self, est) -> dict:
        return {**{seg: getattr(est, a) for seg, a in self._EST_FLOATS},
                **{seg: getattr(est, a).ravel() for seg, a in self._EST_TABLES}}

    def repack(self, ints: dict | None = None, floats: dict | None = None) -> None:
        """Rebuild Gandalf's PX / FX with the segments given replaced (the others kept as they are)."""
        J, S = self.J, self.S
        ints, floats = ints or {}, floats or {}
        GI, GF = self._pack([ints[k] if k in ints else self.gseg(k) for k in L.GI_SEGMENTS],
                               [floats[k] if k in floats else self.gseg(k) for k in L.GF_SEGMENTS])
        self.S = S._replace(PX=GI, FX=GF)
        self.S.M[J.M_FX_CAP] = len(GF)

    def _bind_est(self):
        """The hints estimator with its arrays as views of the node's segments (its refit and its
        buffers' room run on it, interpreted), and its counts as the engine has them."""
        est = self.est
        g = self.gseg
        for seg, a in self._EST_INTS + self._EST_FLOATS:
            setattr(est, a, g(seg))
        K, NB = est.D.shape
        for seg, a in self._EST_TABLES:
            setattr(est, a, g(seg).reshape(K, NB))
        GX, RSC = g("GX"), g("RSC")
        est.seen = int(GX[L.GX_SEEN])
        est.H = float(RSC[L.RS_H])
        if GX[L.GX_LAST_REFIT] >= 0:
            est._last_refit = int(GX[L.GX_LAST_REFIT])
        return est

    def _hints_room(self) -> None:
        """Room in the hints estimator's buffers for the next request (its own _room: compaction,
        renumbering, growth), its segments then repacked."""
        est = self._bind_est()
        before = {k: len(getattr(est, k)) for k in ("gbuf", "gs", "evt")}
        est._room()
        # a repack copies the node's whole state: what grew gets twice the room its own growth gave it
        # (gn's new slots: no group, -1), so that repacks stay rare
        for keys, k0 in ((("gbuf",), "gbuf"), (("gs", "gn", "gt0"), "gs"), (("evt", "evg", "evb"), "evt")):
            if len(getattr(est, k0)) > before[k0]:
                for k in keys:
                    a = getattr(est, k)
                    grown = np.full(2 * len(a), -1 if k == "gn" else 0, dtype=a.dtype)
                    grown[:len(a)] = a
                    setattr(est, k, grown)
        ints, floats = self.est_ints(est), self.est_floats(est)
        if not self._write_back({**ints, **floats}):
            self.repack(ints, floats)
        self._unbind_est()

    #: what a buffer's free slots hold (``gn``: no group), as the estimator's own growth fills them
    _FILL = {"RGN": -1}

    def _write_back(self, arrays: dict) -> bool:
        """Put the estimator's arrays back into the node's segments in place when none is longer
        than its segment (most rooms only compact or renumber: a repack would copy the node's whole
        state, ~50 ms on whole Mooncake). A shorter one (a compaction's smaller buffer) fills its
        segment's head, the rest its free fill: a buffer's capacity is not seen in results, only
        when the next compaction comes. False (nothing written) when one is longer."""
        segs = {k: self.gseg(k) for k in arrays}
        for k, a in arrays.items():
            seg = segs[k]
            if len(a) > len(seg):
                return False
            if a.dtype != seg.dtype and len(a) and seg.dtype.kind in "iu":
                info = np.iinfo(seg.dtype)
                if a.min() < info.min or a.max() > info.max:
                    return False            # the repack refuses it, naming the segment
        for k, a in arrays.items():
            seg = segs[k]
            if len(a) == len(seg) and a.ctypes.data == seg.ctypes.data:
                continue                    # the segment itself (changed in place)
            if len(a) < len(seg):
                seg[len(a):] = self._FILL.get(k, 0)
            seg[:len(a)] = a
        return True

    def _unbind_est(self) -> None:
        """Drop the estimator's views (they would keep a replaced PX / FX alive)."""
        est = self.est
        for _, a in self._EST_INTS + self._EST_FLOATS:
            setattr(est, a, None)
        K, NB = est.D.shape
        for _, a in self._EST_TABLES:
            setattr(est, a, np.zeros((K, NB)))

    def _refit(self) -> None:
        """The hints estimator's refit due at this request's tick, interpreted as on the interpreted
        node (``HintsReuse.tick``), and objective=chunks' value per chunk; the engine then re-keys
        every heap member at the tick."""
        est = self._bind_est()
        GX, RSC = self.gseg("GX"), self.gseg("RSC")
        assert est._refit_due()
        low = est.tick(float(RSC[L.RS_NOW]), self.S.res)
        assert low is None
        self.gseg("RQ")[:] = est.Q.ravel()
        GX[L.GX_LAST_REFIT] = est._last_refit
        GX[L.GX_REKEY] = 1
        n = int(RSC[L.RS_CRCN])
        if GX[L.GX_CHUNKS] and n:
            v = RSC[L.RS_CRCSUM] / n
            crc, cum = self.gseg("CRC"), self.gseg("CRCC")
            crc[1:] = v
            cum[:] = np.arange(len(cum), dtype=np.float64) * v
        self._unbind_est()

    def _requests(self, idx, session, agent, stop, subagent, turn, R) -> None:
        """reuse=hints: each request's stop reason, sub-agent flag, turn and thread (dense id, -1 none)
        in its row of R, as RequestMeta gives them to the interpreted estimator."""
        from ..reuse import thread_key
        J, est = self.J, self.est
        n = len(idx)
        R[:, J.R_STOP] = 0 if stop is None else stop[idx]
        R[:, J.R_SUB] = False if subagent is None else subagent[idx]
        R[:, J.R_TURN] = 0 if turn is None else turn[idx]
        tid = np.full(n, -1, dtype=np.int64)
        if session is not None:
            sid = np.asarray(session[idx], dtype=np.int64)
            has = sid >= 0
            if has.any():
                ag = np.zeros(n, dtype=np.int64) if agent is None else np.asarray(agent[idx], dtype=np.int64)
                keys, inv = np.unique(thread_key(sid[has], ag[has]), return_inverse=True)
                tids = est.tids
                ids = np.array([tids.setdefault(k, len(tids)) for k in keys.tolist()], dtype=np.int64)
                tid[has] = ids[inv]
        R[:, J.R_TID] = tid
        thr = self.gseg("RTHR")
        if len(est.tids) > len(thr):
            # (a repack copies the node's whole state: four times the room, so that it stays rare)
            grown = np.full(4 * len(est.tids), -1, dtype=np.int64)
            grown[:len(thr)] = thr
            self.repack({"RTHR": grown})

    def _held(self, resident: int, m: int) -> int:
        """The most payloads resident during a request: ``resident`` before it, plus what a request
        of ``m`` chunks adds (as the kernel's room check counts them), at most every payload."""
        return min(resident + 2 * m + 4, 2 * self.n_chunks) + 2

    def _grow_gandalf_tables(self) -> None:
        """Room for the next request in Gandalf's heap tables (``M_GD_CROOM`` rows for the DRAM heap's,
        ``M_GD_ROOM`` for the SSD heap's: FX rebuilt with larger table segments, the rows kept, each
        grown to a quarter more than its room), its SSD plan and its leaf-event buffer."""
        S = self.S
        rooms = {L.GF_CST: int(S.M[L.M_GD_CROOM]), L.GF_SST: int(S.M[L.M_GD_ROOM])}
        held = int(S.M[L.M_GD_HELD])
        if len(self.gseg("PLAN")) < held or len(self.gseg("KINDS")) < 2 * held:
            grown = {}
            for k, n in (("PLAN", 2 * held), ("KINDS", 4 * held), ("NODES", 4 * held)):
                a = self.gseg(k)
                grown[k] = np.zeros(max(n, len(a)), dtype=np.int64)
                grown[k][:len(a)] = a
            self.repack(ints=grown)
            S = self.S
        PX = S.PX
        parts = []
        for k in range(len(L.GF_SEGMENTS)):
            seg = S.FX[PX[L.GF0 + k]:PX[L.GF0 + k + 1]]
            if k in rooms and len(seg) // 3 < rooms[k]:
                # a quarter more than the room, not twice: a table near its bound holds 2 x its live
                # entries already (decision 155)
                grown = np.zeros(3 * (rooms[k] + rooms[k] // 4 + 64), dtype=np.float64)
                grown[:len(seg)] = seg
                seg = grown
            parts.append(seg)
        lens = [len(x) for x in parts]
        PX[L.GF0:L.GF0 + len(lens) + 1] = np.concatenate([[0], np.cumsum(lens)])
        self.S = S._replace(FX=np.ascontiguousarray(np.concatenate(parts)))

    def _pop_room(self) -> None:
        """reuse=population: room for a request in its windows' rows (a row of references, a row of
        reuses per path chunk): the rows in the windows move to the front, into twice the room when
        they fill half of it."""
        nb = L.PQ_BUCKETS + 1
        Q = self.gseg("PQ").copy()
        rh, rt, uh, ut = (int(x) for x in Q[:4])
        maxd = int(np.max(self.S.depth)) if self.n_chunks else 1
        new_i, new_f = {}, {}
        for (lo, hi, ti, tf, qh, qt) in ((rh, rt, "PRC", "PRT", L.PQ_RH, L.PQ_RT), (uh, ut, "PUC", "PUT", L.PQ_UH, L.PQ_UT)):
            times, counts = self.gseg(tf), self.gseg(ti)
            live = hi - lo
            cap = len(times)
            if live + maxd + 1 > cap // 2:
                cap = 2 * (live + maxd + 1)
            t2 = np.zeros(cap)
            c2 = np.zeros(cap * nb, dtype=np.int64)
            t2[:live] = times[lo:hi]
            c2[:live * nb] = counts[lo * nb:hi * nb]
            new_f[tf], new_i[ti] = t2, c2
            Q[qh], Q[qt] = 0, live
        new_i["PQ"] = Q
        self.repack(ints=new_i, floats=new_f)

    def gens_guard(self, limit: int | None = None) -> None:
        """Gandalf's heaps keep their versions as int32 per payload: past ``limit``
        (``_jit.GD_GEN_LIMIT``; the kernel stops at the first request that finds one there,
        GROW_GDGEN), a heap's versions are renumbered 1, 2, ... in their order (entries order by
        (key, item, version), and only a payload's live version is compared: the same pops, stale
        pops and rebuilds follow). (Its tentatives' uint16 stamps start over in the kernel:
        ``_gandalf_jit.t_next``.)"""
        from .. import _gandalf_jit as GJ
        limit = L.GD_GEN_LIMIT if limit is None else limit
        for table, kv, meta in (("CST", "CKV", "CMETA"), ("SST", "SKV", "SMETA")):
            meta, kver = self.gseg(meta), self.gseg(kv)
            if meta[GJ.M_NEXT] < limit:
                continue
            n = int(meta[GJ.M_LEN])
            E = self.gseg(table).reshape(-1, 3)[:n]
            old = E[:, 2].astype(np.int64)
            order = np.argsort(old, kind="stable")
            srt = old[order]
            live = np.flatnonzero(kver)
            at = np.searchsorted(srt, kver[live])
            if len(live) and not np.array_equal(srt[np.minimum(at, max(n - 1, 0))], kver[live].astype(np.int64)):
                raise RuntimeError("cluster_sim engine: a gandalf heap member has no entry")
            new = np.empty(n, dtype=np.int64)
            new[order] = np.arange(1, n + 1)
            E[:, 2] = new
            kver[live] = at + 1
            meta[GJ.M_NEXT] = n

    def gseg(self, name: str) -> np.ndarray:
        """Gandalf's segment ``name`` (a view; of its type in ``_jit.GI_DTYPES``, else int64 or float64)."""
        S = self.S
        if name in L.GI_SEGMENTS:
            k = L.GI_SEGMENTS.index(name)
            return S.PX.view(np.uint8)[S.PX[2 * k]:S.PX[2 * k + 1]].view(L.GI_DTYPES.get(name, "int64"))
        k = L.GF_SEGMENTS.index(name)
        return S.FX[S.PX[L.GF0 + k]:S.PX[L.GF0 + k + 1]]

