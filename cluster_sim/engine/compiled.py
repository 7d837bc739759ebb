"""One serving node on the compiled engine (:class:`CompiledNode`): the Python side of the kernels.

It builds the state's arrays, calls the kernel per batch of requests, grows the touch log, the
candidate heaps and the event log when the kernel asks, hands the SSD's writes and trims to the FTL,
and prices each request with the node's :class:`~cluster_sim.cost.CostModel` after the kernel said
what it served. Everything that belongs to one policy (its meta slots, its arrays, its growth between
requests, its counters) is its adapter's (:mod:`cluster_sim.engine.adapter`), found through the
registry: this module names no policy.
"""
from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace

import numpy as np

from ..cache.state import DRAM, HBM, NO_TIER, SSD
from ..cost import CostModel
from ..errors import ConfigError
from ..metrics import NodeStats
from .adapter import SetupContext
from .registry import kernels_of, policy_unsupported
from .layout import SEGMENTS

__all__ = ["CompiledNode"]

_MODES = {"last": 0, "last_and_branch": 1, "every_chunk": 2}
_TIER_KEYS = ("hbm", "dram", "ssd")


def _ids(a: np.ndarray) -> np.ndarray:
    """The trace's chunk table as the kernel takes it: the trace's own array (int32 when its ids fit,
    as :mod:`cluster_sim.trace.chunks` stores them, else int64), never a copy, as a read-only view
    so that a trace from Ray's object store (read-only) and one built here have the same numba type
    (one set of specialisations, compiled once per install)."""
    a = np.asarray(a)
    if a.dtype != np.int32 and a.dtype != np.int64:
        a = a.astype(np.int64)
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    return _readonly(a)


def _readonly(a: np.ndarray) -> np.ndarray:
    v = a.view()
    v.flags.writeable = False
    return v



class CompiledNode:
    """One serving node on the compiled engine; the same results as :class:`~cluster_sim.node.NodeSim`."""

    #: the policies' segments of PX, in order (``layout.SEGMENTS``), offsets and lengths in M; a policy's
    #: adapter fills those it uses (:meth:`Adapter.segments`; X0 .. X3 by its own names), the rest stay empty
    SEGMENTS = SEGMENTS

    def __init__(self, chunk_parent, chunk_depth, chunk_anchor, flat, chunk_tokens: int, model, hardware,
                 policy: str, *, node_index: int = 0, cost=True, log_capacity: int = 1 << 14,
                 heap_capacity: int = 1024, params=None, future_idx=None, rng=None,
                 replays_per_day_scale: float = 1.0, policy_obj=None, ftl: bool = True,
                 record_events: bool = False):
        """``params``: the policy's parameters (its ``Params`` instance or a mapping; defaults when
        None). ``future_idx``: the trace requests this node will be given, in order, for a hindsight
        policy (``needs_future``): its passes run at the first :meth:`replay`. ``rng``: the node's
        random stream (``fleet.node_rng``), ``replays_per_day_scale``: the workload's (a write budget's
        default). ``policy_obj``: the node's policy object, unbound, when the caller made one (a policy
        whose adapter binds one to derive its arrays takes it instead of making another). ``ftl``:
        False leaves out the flash translation layer of ``hardware.ssd.ftl=greedy`` (a hindsight pass,
        whose wear nothing reads). ``record_events``: keep the chunks stored and removed for a KV-aware
        router (``fleet.sync=kv_events``; :meth:`take_events`)."""
        from . import _jit as J

        from ..policies.base import parse_params, policy_class
        if params is None or isinstance(params, Mapping):
            params = parse_params(policy, dict(params or {}))
        why = policy_unsupported(policy, params)
        if why is not None:
            raise ConfigError("cache.engine", f"numba cannot run this setting: {why}")
        klass = policy_class(policy)
        self.params = params
        self.policy_obj = policy_obj
        self._args = (chunk_parent, chunk_depth, chunk_anchor, flat, chunk_tokens, model, hardware, policy)
        self._kw = {"node_index": node_index, "log_capacity": log_capacity, "heap_capacity": heap_capacity,
                    "params": params, "replays_per_day_scale": replays_per_day_scale}
        self.rpd_scale = replays_per_day_scale
        self.future_idx = None if future_idx is None else np.asarray(future_idx, dtype=np.int64)
        self.needs_future = bool(klass.needs_future)
        self._passes_pending = self.needs_future
        self.has_future = False
        self.input_tokens = None     # the trace's input tokens per request (replay), for a policy that reads them
        self.J = J
        self.model = model
        self.hw = hardware
        self.ct = int(chunk_tokens)
        self.policy_name = policy
        self.node_index = node_index
        self.cost = CostModel.of(model, hardware) if cost else None
        U = len(chunk_parent)
        self.n_chunks = U
        has_state = bool(model.has_state)
        fab = int(model.fa_bytes(self.ct))
        # STATE bytes by chunk depth (a state's size depends on its position only): one entry per
        # depth, not per chunk (decision 121)
        maxd = int(np.max(chunk_depth)) if U else 0
        if has_state:
            sb = np.zeros(maxd + 1, dtype=np.int64)          # depth 0 holds no chunk
            sb[1:] = model.state_bytes_array(np.arange(1, maxd + 1, dtype=np.int64) * self.ct)
            seen = np.zeros(maxd + 1, dtype=bool)
            seen[chunk_depth] = True
            sb_seen = sb[seen]
        else:
            sb = np.zeros(1, dtype=np.int64)      # never read: no STATE payload exists
            sb_seen = sb
        caps = (int(hardware.hbm_cache_bytes), int(hardware.dram_bytes), int(hardware.ssd_bytes))
        self.caps = caps
        self.entry = next((t for t in (HBM, DRAM, SSD) if caps[t] > 0), NO_TIER)
        # Candidate heaps: after a compaction a heap holds each valid candidate once, at most the
        # payloads resident in its tier, which never exceed the tier's capacity plus what one
        # request adds before its overflow is resolved (its own payloads, or one demoted batch).
        # Compactions and growth happen between requests only (a call out of the hot loop costs
        # the kernel a reference count per state array): before each request a heap more than
        # half full is compacted, and the kernel asks for twice the room (returning early) when it
        # stays over a quarter; the touch log likewise. A heap full inside a request is an
        # internal error (RuntimeError), never a silent change.
        sizes = [fab] + ([int(sb_seen.min()), int(sb_seen.max())] if has_state and U else [])
        lo, hi = max(min(sizes), 1), max(sizes)
        bound = [min(2 * U + 1, (c + (2 * maxd + 2) * hi) // lo + 64) if c > 0 else 4 for c in caps]
        hcap = np.array([min(b, max(int(heap_capacity), 4 * maxd + 64)) if c > 0 else 4 for b, c in zip(bound, caps)],
                        dtype=np.int64)
        ctx = SetupContext(U=U, fab=fab, sb=sb, sb_seen=sb_seen, has_state=has_state, maxd=maxd, caps=caps, lo=lo,
                           bound=bound)
        M = np.zeros(J.N_META, dtype=np.int64)
        M[J.M_CAP0:J.M_CAP0 + 3] = caps
        M[J.M_ENTRY] = self.entry
        M[J.M_FAB] = fab
        M[J.M_HAS_STATE] = int(has_state)
        M[J.M_MODE] = _MODES[model.state_checkpoints] if has_state else 0
        M[J.M_SHORT] = -1
        M[J.M_THRESH] = int(getattr(params, "threshold", 1))
        M[J.M_LO] = lo
        self.adapter = ad = klass.engine_adapter(params)(self)
        M[J.M_KEYED] = int(ad.keyed)
        ad.setup(M, ctx)
        seg = {k: np.zeros(0, dtype=np.int64) for k in self.SEGMENTS}
        seg.update({self._name(k): v for k, v in ad.segments(ctx).items()})
        FX = ad.floats(ctx)
        from ..ftl import make_ftl
        # hardware.ssd.ftl=greedy: the kernel logs the SSD's writes and trims (elog), the FTL takes them
        # between requests, in order (decision 159)
        self.ftl = make_ftl(hardware, 2 * U) if ftl else None
        M[J.M_FTL] = int(self.ftl is not None)
        M[J.M_KEV] = int(record_events)
        self._kv: list = []          # the router's events drained from the log (arrays of rows)
        self.S = J.EngineState(
            M=M, K=np.zeros(J.N_COUNTERS, dtype=np.int64),
            res=np.zeros(2 * U, dtype=np.uint8), stamp=np.full(2 * U, -1, dtype=np.int64),
            pin=np.full(2 * U, -1, dtype=np.int32), flags=np.zeros(2 * U, dtype=np.uint8),
            dcnt=np.zeros((3, U), dtype=np.int32), dany=np.zeros(U, dtype=np.int32),
            cred=np.zeros(U, dtype=np.int32), cred_any=np.zeros(U, dtype=np.int32), sb=sb,
            parent=_ids(chunk_parent), depth=_ids(chunk_depth), anchor=_ids(chunk_anchor), flat=_ids(flat),
            log_p=np.zeros(int(log_capacity), dtype=np.int64), log_s=np.zeros(int(log_capacity), dtype=np.int64),
            heap_s=np.zeros(int(hcap.sum()), dtype=np.int64), heap_p=np.zeros(int(hcap.sum()), dtype=np.int64),
            hoff=np.concatenate([[0], np.cumsum(hcap)[:-1]]).astype(np.int64), hcap=hcap,
            hn=np.zeros(3, dtype=np.int64), wpos=np.zeros(3, dtype=np.int64),
            wfront=np.full(3, -1, dtype=np.int64), PX=np.zeros(0, dtype=np.int64), pk=kernels_of(policy, params),
            FX=np.zeros(1, dtype=np.float64) if FX is None else FX,
            elog=np.zeros((1 << 14 if self.ftl is not None or record_events else 0, 4), dtype=np.int64),
            rng=rng if rng is not None else np.random.default_rng(0))
        self._seg_len = {k: 0 for k in self.SEGMENTS}
        self.repack(**seg)
        own = ad.arrays(ctx)
        if own is not None:
            # arrays laid out by the policy itself replace PX and FX (it has no segments: every M_O_* stays 0)
            self.S = self.S._replace(**own)
        M[J.M_FX_CAP] = len(self.S.FX)
        self.stats = NodeStats()
        self.busy_until = 0.0
        self._lat_parts: list = []       # counted requests' latency and TTFT, one array per call
        self._ttft_parts: list = []

    def fresh(self, **kw) -> "CompiledNode":
        """A new node of this one's stream, hardware, policy and parameters (``kw``: ``cost``, ``ftl``)."""
        return CompiledNode(*self._args, **{**self._kw, **kw})

    def set_future(self, offsets: np.ndarray, flat: np.ndarray, tables=None) -> tuple:
        """Give a hindsight policy the node's whole request stream (``flat[offsets[j]:offsets[j+1]]`` =
        its j-th request's path), as the interpreted policy gets ``ctx.future``; returns its tables,
        reusable by another node with the same stream."""
        return self.adapter.set_future(offsets, flat, tables)

    def _name(self, name: str) -> str:
        """The engine's segment a policy's name for it stands for (its ``SEGMENT_NAMES``: ``"LK"`` -> ``"X0"``)."""
        return self.adapter.segment_names.get(name, name)

    def seg(self, name: str) -> np.ndarray:
        """Segment ``name`` of PX (a view; the engine's name, or the policy's own for one of X0 .. X3)."""
        name = self._name(name)
        o = int(self.S.M[getattr(self.J, "M_O_" + name)])
        return self.S.PX[o:o + int(self._seg_len[name])]

    def repack(self, **new) -> None:
        """Rebuild PX with the segments given replaced (the others kept as they are); each segment's
        offset and length go to ``M_O_<name>`` / ``M_L_<name>``."""
        J = self.J
        new = {self._name(k): v for k, v in new.items()}
        cur = {k: (self.seg(k) if k not in new else np.asarray(new[k], dtype=np.int64)) for k in self.SEGMENTS}
        lens = {k: len(v) for k, v in cur.items()}
        PX = np.concatenate([cur[k] for k in self.SEGMENTS]) if sum(lens.values()) else np.zeros(1, dtype=np.int64)
        M = self.S.M
        o = 0
        for k in self.SEGMENTS:
            M[getattr(J, "M_O_" + k)] = o
            M[getattr(J, "M_L_" + k)] = lens[k]
            o += lens[k]
        self._seg_len = lens
        self.S = self.S._replace(PX=np.ascontiguousarray(PX))

    # ---- the kernel, with growth between requests
    def _grow(self) -> None:
        """The room the kernel asked for (``M[M_GROW]``), between requests: the engine's own, then the policy's."""
        J, S = self.J, self.S
        g = int(S.M[J.M_GROW])
        if g & (J.GROW_AQ | J.GROW_OUT):
            new = {}
            if g & J.GROW_AQ:
                new["AQ"] = np.zeros(max(2 * len(self.seg("AQ")), 2 * int(S.M[J.M_AQMAX])), dtype=np.int64)
            if g & J.GROW_OUT:
                out = self.seg("OUT")
                grown = np.zeros(2 * len(out), dtype=np.int64)
                grown[:len(out)] = out
                new["OUT"] = grown
            self.repack(**new)
            S = self.S
        if g & J.GROW_LOG:
            n = 2 * len(S.log_p)
            lp = np.zeros(n, dtype=np.int64)
            ls = np.zeros(n, dtype=np.int64)
            k = int(S.M[J.M_LOGN])
            lp[:k] = S.log_p[:k]
            ls[:k] = S.log_s[:k]
            S = S._replace(log_p=lp, log_s=ls)
        if g & (2 | 4 | 8):
            hcap = S.hcap.copy()
            for t in range(3):
                if g & (2 << t):
                    hcap[t] *= 2
            S = self.heaps(S, hcap)
        self.S = S
        self.adapter.grow(g)
        if g & J.GROW_EV:
            self._ev_drain()
            room = int(self.S.M[J.M_EV_ROOM])
            if room > len(self.S.elog):
                self.S = self.S._replace(elog=np.zeros((2 * room, 4), dtype=np.int64))
        S = self.S
        S.M[J.M_FX_CAP] = len(S.FX)
        S.M[J.M_GROW] = 0

    def _ev_drain(self) -> None:
        """Empty the event log: the SSD's writes and trims go to the FTL, in order; the router's
        stored / removed chunks are kept for :meth:`take_events`."""
        J, M = self.J, self.S.M
        n = int(M[J.M_EVN])
        if not n:
            return
        rows = self.S.elog[:n]
        if self.ftl is not None and M[J.M_KEV] == 0:
            self.ftl.apply(rows)
        else:
            kv = rows[:, 0] >= J.EV_STORED
            if self.ftl is not None:
                self.ftl.apply(np.ascontiguousarray(rows[~kv]))
            self._kv.append(rows[kv, :2].copy())
        M[J.M_EVN] = 0

    def take_events(self) -> tuple[np.ndarray, np.ndarray]:
        """Chunks whose FA became resident / lost its last copy since the last call, net of each other
        (``CacheState.take_events``: those resident now / not resident now)."""
        J = self.J
        self._ev_drain()
        rows = np.concatenate(self._kv) if self._kv else np.zeros((0, 2), dtype=np.int64)
        self._kv = []
        fa = self.S.res[0::2]
        stored = np.unique(rows[rows[:, 0] == J.EV_STORED, 1])
        removed = np.unique(rows[rows[:, 0] == J.EV_REMOVED, 1])
        return stored[fa[stored] != 0], removed[fa[removed] == 0]

    @staticmethod
    def heaps(S, hcap):
        """``S`` with its candidate heaps given the capacities ``hcap`` (entries kept; heaps beyond the
        current ones start empty)."""
        hcap = np.asarray(hcap, dtype=np.int64)
        hoff = np.concatenate([[0], np.cumsum(hcap)[:-1]]).astype(np.int64)
        hs = np.zeros(int(hcap.sum()), dtype=np.int64)
        hp = np.zeros(int(hcap.sum()), dtype=np.int64)
        hn = np.zeros(len(hcap), dtype=np.int64)
        for t in range(len(S.hcap)):
            n, o, no = int(S.hn[t]), int(S.hoff[t]), int(hoff[t])
            hs[no:no + n] = S.heap_s[o:o + n]
            hp[no:no + n] = S.heap_p[o:o + n]
            hn[t] = n
        return S._replace(heap_s=hs, heap_p=hp, hoff=hoff, hcap=hcap, hn=hn)

    def replay_raw(self, offsets: np.ndarray, idx: np.ndarray, counted: np.ndarray,
                   arrival: np.ndarray | None = None, category=None, turn=None, session=None, agent=None,
                   stop=None) -> np.ndarray:
        """The cache side of requests ``idx`` (in order): one row of ``_jit.R_*`` columns each.
        ``arrival``: every trace request's arrival time (s), as ``trace.arrival_s``; None for a
        policy that never reads the clock (its adapter's ``needs_arrival``). ``category`` / ``turn``:
        every trace request's, as ``trace.category`` / ``trace.turn`` (None: none / 0); ``session`` /
        ``agent`` / ``stop``: likewise ``trace.session_id`` / ``trace.agent`` / ``trace.stop_reason``
        (None: -1, -1, 0); the policy's adapter takes what it reads of them (``before_replay``)."""
        J = self.J
        if self.needs_future and not self.has_future:
            raise ValueError(f"{self.policy_name} needs the node's future request stream (set_future)")
        # read-only views, whatever the caller holds (Ray hands actors read-only arrays): one
        # numba type, so the kernel the warm-up compiled is the one every call uses
        idx = _readonly(np.ascontiguousarray(idx, dtype=np.int64))
        counted = _readonly(np.ascontiguousarray(counted, dtype=np.bool_))
        if arrival is None:
            if self.adapter.needs_arrival:
                raise ValueError(f"{self.policy_name} needs the requests' arrival times (replay_raw(..., arrival))")
            arrival = np.zeros(len(offsets) - 1, dtype=np.float64)
        arrival = _readonly(np.ascontiguousarray(arrival, dtype=np.float64))
        R = np.zeros((len(idx), J.N_R), dtype=np.int64)
        offsets = _ids(offsets)
        if int(self.S.M[J.M_SEQ]) + len(idx) >= 2**31 - 1:
            raise ConfigError("cache.engine", "the compiled engine numbers a node's requests below 2^31 (its pins "
                              "are int32) and this node replays more: use cache.engine=python")
        reqs = SimpleNamespace(category=category, turn=turn, session=session, agent=agent, stop=stop)
        self.adapter.before_replay(offsets, idx, reqs, R)
        self.adapter.run(offsets, idx, counted, arrival, reqs, R)
        return R

    def replay_rows(self, offsets, idx, counted, arrival, R) -> None:
        """The kernel over requests ``idx`` (rows of ``R``), growing the state between calls."""
        J = self.J
        j = 0
        while True:
            j0 = j
            j = J.replay(self.S, offsets, idx, counted, arrival, j, R)
            self.adapter.after_call(offsets, idx[j0:j])
            if j >= len(idx):
                return
            self._grow()

    def replay(self, trace, idx: np.ndarray, counted: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
        """Process the trace requests ``idx`` (in order) and count those ``counted`` (default: the
        trace's own flags); per request (h, m, SSD bytes written, the node's snapshot after it in
        the columns of ``fleet.SNAP``, load latency, TTFT), as the fleet's per-epoch tables and
        the request table want them (``fleet.NodeRunner._replay`` on the reference)."""
        J = self.J
        if self._passes_pending:
            self._passes_pending = False
            self.adapter.hindsight(trace)
        idx = np.asarray(idx, dtype=np.int64)
        counted = trace.counted[idx] if counted is None else np.asarray(counted, dtype=bool)
        self.input_tokens = trace.input_tokens
        R = self.replay_raw(trace.offsets, idx, counted, trace.arrival_s, trace.category, trace.turn,
                            trace.session_id, trace.agent, trace.stop_reason)
        lat, ttft, hits = self._price(R, trace.input_tokens[idx], trace.arrival_s[idx], counted)
        snap = np.concatenate([R[:, J.R_USED0:J.R_USED2 + 1], R[:, J.R_LEFT0:J.R_LEFT2 + 1],
                               R[:, [J.R_LEFTN2, J.R_ADM, J.R_ADM_HIT]], hits], axis=1)
        return R[:, J.R_H].copy(), R[:, J.R_M].copy(), R[:, J.R_WR].copy(), snap, lat, ttft

    def _price(self, R: np.ndarray, inp: np.ndarray, arr: np.ndarray, cnt: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Recompute, latency and TTFT of each request, and its share of the statistics, in
        request order with the node's cost model (the reference's own arithmetic, element by
        element: ``CostModel.request_recompute`` and ``serve_latency_s`` on arrays; the queue and
        the float sums in request order). Returns each request's latency and TTFT (s) and the
        node's hits per tier (FA + STATE) after it."""
        J = self.J
        cost = self.cost
        s = self.stats
        hits = s.hits
        n = len(R)
        inp = np.asarray(inp, dtype=np.int64)
        cnt = np.asarray(cnt, dtype=bool)
        h, m = R[:, J.R_H], R[:, J.R_M]
        rec_flops, rec_tokens = cost.request_recompute_array(h * np.int64(self.ct), inp)
        lat = cost.serve_latency_array(R[:, J.R_DRAM_B], R[:, J.R_SSD_B], rec_flops)
        # the node's prefill queue, request by request
        ttft = np.empty(n, dtype=np.float64)
        busy = self.busy_until
        for j, (now, latency) in enumerate(zip(arr.tolist(), lat.tolist())):
            st = now if now > busy else busy
            busy = st + latency
            ttft[j] = (st - now) + latency
        self.busy_until = busy
        # hits per tier after each request (counted requests add theirs)
        qt = R[:, J.R_Q_TIER]
        inc = np.stack([R[:, J.R_N_HBM] + (qt == HBM), R[:, J.R_N_DRAM] + (qt == DRAM),
                        R[:, J.R_N_SSD] + (qt == SSD)], axis=1) * cnt[:, None]
        tier_hits = np.array([hits[f"hits_{t}_fa"] + hits[f"hits_{t}_state"] for t in _TIER_KEYS], dtype=np.int64)
        cum = tier_hits + np.cumsum(inc, axis=0, dtype=np.int64)
        if cnt.any():
            c = cnt
            s.requests += int(c.sum())
            s.chunks_requested += int(m[c].sum())
            s.chunk_misses += int((m - h)[c].sum())
            s.prompt_tokens += int(inp[c].sum())
            s.recomputed_tokens += int(rec_tokens[c].sum())
            g = s.recompute_gpu_seconds
            for x in cost.gpu_seconds(rec_flops[c & (rec_tokens != 0)]).tolist():
                g += x                                       # in request order
            s.recompute_gpu_seconds = g
            hits["hits_hbm_fa"] += int(R[c, J.R_N_HBM].sum())
            hits["hits_dram_fa"] += int(R[c, J.R_N_DRAM].sum())
            hits["hits_ssd_fa"] += int(R[c, J.R_N_SSD].sum())
            for t, key in zip((HBM, DRAM, SSD), _TIER_KEYS):
                hits[f"hits_{key}_state"] += int((qt[c] == t).sum())
            s.insert_skipped_bytes += int(R[c, J.R_SKIPPED].sum())
            ac = arr[c]
            s.first_arrival_s = min(s.first_arrival_s, float(ac.min()))
            s.last_arrival_s = max(s.last_arrival_s, float(ac.max()))
            self._lat_parts.append(lat[c])
            self._ttft_parts.append(ttft[c])
        return lat, ttft, cum

    def finish(self) -> NodeStats:
        """Close the run (SSD copies still resident count as hit iff they served a reuse) and
        return the node's statistics, the policy's counters included."""
        J, S = self.J, self.S
        J.finish_ssd(S)
        K = S.K.tolist()
        s = self.stats
        if self.ftl is not None:
            self._ev_drain()
            s.set_ftl(self.ftl.counters())
        s.ssd_bytes_written_fa = K[J.K_WR_FA]
        s.ssd_bytes_written_state = K[J.K_WR_STATE]
        s.ssd_admissions_fa = K[J.K_ADM_FA]
        s.ssd_admissions_state = K[J.K_ADM_STATE]
        s.ssd_admissions_hit_fa = K[J.K_ADM_HIT_FA]
        s.ssd_admissions_hit_state = K[J.K_ADM_HIT_STATE]
        s.policy = {f"policy.{self.policy_name}.{k}": v for k, v in self.counters().items()}
        # float64 arrays, not lists of Python floats (32 B a float each, twice: 0.6 GB at 10 M requests)
        s.load_latency = np.concatenate([np.asarray(s.load_latency, dtype=np.float64), *self._lat_parts])
        s.ttft = np.concatenate([np.asarray(s.ttft, dtype=np.float64), *self._ttft_parts])
        self._lat_parts, self._ttft_parts = [], []
        return s

    def counters(self) -> dict:
        """The policy's counters, as its interpreted ``counters()`` reports them (its adapter's)."""
        return self.adapter.counters()

    # ---- introspection (tests, bench)
    def residency(self) -> np.ndarray:
        """Tier bits of every payload handle (a copy)."""
        return self.S.res.copy()

    def state_bytes(self) -> dict:
        """Bytes of simulator state this node holds, by part (per-chunk arrays, the trace's chunk
        table, the touch log and the candidate heaps as allocated, and the policy's own arrays)."""
        S = self.S
        per_chunk = sum(a.nbytes for a in (S.res, S.stamp, S.pin, S.flags, S.dcnt, S.dany, S.cred, S.cred_any))
        table = S.parent.nbytes + S.depth.nbytes + S.anchor.nbytes + S.sb.nbytes   # sb: per depth
        pol = S.PX.nbytes + S.FX.nbytes
        return {"per_chunk_arrays": per_chunk, "chunk_table": table,
                "touch_log": S.log_p.nbytes + S.log_s.nbytes, "heaps": S.heap_s.nbytes + S.heap_p.nbytes,
                "policy_arrays": pol, "chunks": self.n_chunks}
