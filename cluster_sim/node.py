"""One serving node: match -> load / recompute -> insert -> overflow -> stats.

This is the request step of simulation-model §5. The node owns the tiers and
moves bytes; the policy (``cluster_sim.policies``) only ranks and decides.
HBM is LRU leaf-first for every policy; DRAM and SSD victims come from the
policy. Each request is processed atomically at its arrival time.

Data movement (§4), in the order the node applies it:

1. match: ``r`` = leading chunks with resident FA (prefix closure makes the
   rest non-resident), ``h`` = deepest of them with a resident STATE (hybrid)
   or ``r`` (pure attention);
2. serve: each reused payload from the fastest tier holding it; latency;
3. pin the reused payloads; touch ``c_m .. c_1`` (deepest first) then the hit STATE;
4. load: copies of reused payloads go to the entry tier (HBM, or DRAM when
   HBM is 0; a DRAM hit with HBM 0 changes nothing); overflow is resolved
   after the copies are placed, dropping the deepest copies that cannot fit;
5. insert: new FA chunks ``c_{r+1} .. c_m`` and the STATE checkpoints of
   ``model.state_checkpoints`` enter the entry tier, pinned; overflow cascades
   HBM -> DRAM (policy) -> SSD (policy); what cannot fit because everything
   else is pinned is not cached, deepest first (``insert_skipped_bytes``);
6. write-through admission (``policy.admit_on_insert``), then stats.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .cache.hybrid import checkpoint_positions, unbounded_resume_prefix
from .cache.state import (BIT, DEMOTE, DRAM, DROP, HBM, IN_DRAM, IN_HBM, IN_SSD, NO_TIER, SSD, CacheState, fa_of,
                          is_state, twin_state)
from .cost import CostModel
from .ftl import make_ftl
from .metrics import NodeStats
from .policies.base import NodeContext, Policy, RequestMeta, lru_select

_TIER_KEYS = ("hbm", "dram", "ssd")


class _Served(NamedTuple):
    """What serving one request took (step 2): reused FA per tier, the tier of the reused
    STATE, the recompute (FLOPs, tokens) and the times (s)."""
    n_hbm: int
    n_dram: int
    n_ssd: int
    q_tier: int
    rec_flops: float
    rec_tokens: int
    latency: float
    ttft: float


class NodeSim:
    """The cache of one serving node over a shared chunk id space."""

    def __init__(self, chunk_parent: np.ndarray, chunk_depth: np.ndarray, chunk_anchor: np.ndarray,
                 flat: np.ndarray, chunk_tokens: int, model, hardware, policy: Policy, *,
                 node_index: int = 0, rng: np.random.Generator | None = None, future=None,
                 replays_per_day_scale: float = 1.0):
        self.model = model
        self.hw = hardware
        self.ct = int(chunk_tokens)
        self.has_state = bool(model.has_state)
        self.mode = model.state_checkpoints
        fa_bytes = model.fa_bytes(self.ct)
        if self.has_state:
            state_bytes = model.state_bytes_array(np.asarray(chunk_depth, dtype=np.int64) * self.ct)
        else:
            state_bytes = np.zeros(len(chunk_parent), dtype=np.int64)
        caps = (hardware.hbm_cache_bytes, hardware.dram_bytes, hardware.ssd_bytes)
        self.st = CacheState(chunk_parent, chunk_depth, chunk_anchor, flat, fa_bytes, state_bytes, caps)
        self.entry = next((t for t in (HBM, DRAM, SSD) if caps[t] > 0), NO_TIER)
        self.hbm_lru = self.st.new_lru(HBM)
        self.policy = policy
        self.node_index = node_index
        self.cost = CostModel.of(model, hardware)
        policy.bind(NodeContext(state=self.st, model=model, hardware=hardware, chunk_tokens=self.ct, cost=self.cost,
                                rng=rng if rng is not None else np.random.default_rng(0),
                                node_index=node_index, future=future,
                                request_ssd_admission=self._queue_admission,
                                replays_per_day_scale=replays_per_day_scale))
        if policy.wants_residency_events:
            self.st.listeners.append(policy)
            self.st.leaf_tiers = frozenset(getattr(policy, "leaf_event_tiers", (HBM, DRAM, SSD)))
        self._admit_queue: list[int] = []
        self.stats = NodeStats()
        self.seq = 0
        self.busy_until = 0.0
        self._shortfall = None   # bytes the last failed victim selection could not free, if known
        self.counting = True
        self.now = 0.0
        n2 = 2 * len(chunk_parent)
        self.ssd_adm_counted = np.zeros(n2, dtype=bool)   # this SSD copy's admission is counted
        self.ssd_hit = np.zeros(n2, dtype=bool)           # this SSD copy has served a reuse
        self.ftl = make_ftl(hardware, n2)                  # sees every SSD write and eviction; None if ideal

    # ------------------------------------------------------------------
    def process(self, path: np.ndarray, input_tokens: int, now: float, *, counted: bool = True,
                session_id: int = -1, category: str | None = None, turn: int = 0,
                output_tokens: int = 0, stop_reason: int = 0, think_time_s: float = float("nan"),
                api_time_s: float = float("nan"), agent: int = -1) -> dict:
        """Process one request at its arrival time ``now`` (s): the six steps of the module
        docstring, in order. ``path`` holds the chunk ids ``c_1..c_m``. Returns the request's
        record: ``h`` (chunks reused), ``r`` (leading chunks resident), ``m``, ``latency`` and
        ``ttft`` (s)."""
        st = self.st
        self.seq += 1
        st.cur = self.seq
        self.now = now
        self.counting = counted
        self.policy.tick(now)
        m = len(path)
        fa = fa_of(path)
        res_fa = st.res[fa]
        r, h, q = self._match(fa, res_fa)                                     # 1. match
        served = self._serve(fa, res_fa[:h], q, input_tokens, now)           # 2. serve
        self._pin_and_touch(fa, r, q)                                         # 3. pins, touches
        meta = RequestMeta(seq=self.seq, arrival_s=now, session_id=session_id, category=category, turn=turn,
                           input_tokens=input_tokens, output_tokens=output_tokens, path=path,
                           hit_chunks=h, resident_chunks=r, stop_reason=stop_reason, think_time_s=think_time_s,
                           api_time_s=api_time_s, agent=agent)
        self.policy.on_access(fa if q < 0 else np.append(fa, q), now, meta)
        if self._admit_queue:
            self._drain_admissions()
        if h and self.entry in (HBM, DRAM):                                   # 4. load
            self._load(path, h, res_fa[:h], q)
        skipped = self._insert_new(path, fa, h, r, m, now)                    # 5. insert, 6. admission
        if counted:
            self._count(served, m, h, input_tokens, skipped, now)
        return {"h": h, "r": r, "m": m, "latency": served.latency, "ttft": served.ttft}

    def _match(self, fa: np.ndarray, res_fa: np.ndarray) -> tuple[int, int, int]:
        """Step 1: ``r`` = leading chunks with resident FA, ``h`` = the deepest of them with a
        resident STATE (hybrid) or ``r``, and ``q`` = the STATE handle reused (-1: none)."""
        m = len(fa)
        if not m:
            return 0, 0, -1
        nz = res_fa != 0
        r = m if nz.all() else int(np.argmin(nz))
        if self.has_state and r:
            w = np.flatnonzero(self.st.res[twin_state(fa[:r])])
            h = int(w[-1]) + 1 if len(w) else 0
        else:
            h = r
        q = int(twin_state(fa[h - 1])) if (self.has_state and h) else -1
        return r, h, q

    def _serve(self, fa: np.ndarray, hr: np.ndarray, q: int, input_tokens: int, now: float) -> "_Served":
        """Step 2: bytes from the fastest tier holding each reused payload (``hr`` = residency
        bits of the ``h`` reused FA), the recompute of the rest, the load latency and the
        time to first token behind the node's FCFS prefill queue."""
        st = self.st
        h = len(hr)
        in_hbm = (hr & IN_HBM) != 0
        in_dram = ~in_hbm & ((hr & IN_DRAM) != 0)
        in_ssd = ~in_hbm & ~in_dram
        n_hbm, n_dram = int(in_hbm.sum()), int(in_dram.sum())
        n_ssd = h - n_hbm - n_dram
        fab = st.fa_bytes
        dram_b = n_dram * fab
        ssd_b = n_ssd * fab
        q_tier = st.fastest_tier(q) if q >= 0 else NO_TIER
        if q_tier == DRAM:
            dram_b += int(st.size[q])
        elif q_tier == SSD:
            ssd_b += int(st.size[q])
        rec_flops, rec_tokens = self.cost.request_recompute(h * self.ct, input_tokens)
        latency = self.cost.serve_latency_s(dram_b, ssd_b, rec_flops)
        if ssd_b:
            self.ssd_hit[fa[:h][in_ssd]] = True
            if q_tier == SSD:
                self.ssd_hit[q] = True
        # FCFS prefill queue: the node is busy for the load latency of each request
        start = max(now, self.busy_until)
        self.busy_until = start + latency
        return _Served(n_hbm, n_dram, n_ssd, q_tier, rec_flops, rec_tokens, latency, (start - now) + latency)

    def _pin_and_touch(self, fa: np.ndarray, r: int, q: int) -> None:
        """Step 3: pin the reused payloads, touch ``c_m .. c_1`` (deepest first), then the hit STATE."""
        st = self.st
        if r:
            # the reused chunks, and also c_{h+1}..c_r (resident, not reused): the request's new
            # payloads go below them, so loads must not drop their last copy (docs/decisions.md 21)
            st.pin[fa[:r]] = self.seq
        if q >= 0:
            st.pin[q] = self.seq
        self._pins = [fa[:r], fa[r:], np.asarray([q] if q >= 0 else [], dtype=np.int64)]
        st.touch(fa[::-1])
        if q >= 0:
            st.touch_one(q)

    def _insert_new(self, path: np.ndarray, fa: np.ndarray, h: int, r: int, m: int, now: float) -> int:
        """Steps 5 and 6: new FA chunks and STATE checkpoints into the entry tier (overflow
        cascading down), then write-through admission. Returns the bytes not cached."""
        st = self.st
        skipped = 0
        created: list[int] = []
        if self.entry != NO_TIER and m:
            skipped, created = self._insert(path, fa, h, r, m)
        elif m:
            skipped = (m - r) * st.fa_bytes
            if self.has_state:
                skipped += sum(int(st.size[twin_state(fa[k - 1])]) for k in checkpoint_positions(self.mode, h, r, m))
        if created:
            self.policy.on_insert(np.asarray(created, dtype=np.int64), now)
        if self._admit_queue:
            self._drain_admissions()
        if created and self.policy.uses_admit_on_insert and st.cap[SSD] > 0:
            for p in created:
                if st.res[p] and not st.res[p] & IN_SSD and st.cap[SSD] > 0 and self.policy.admit_on_insert(p, now):
                    self._write_ssd(p)
        return skipped

    def _count(self, sv: "_Served", m: int, h: int, input_tokens: int, skipped: int, now: float) -> None:
        """The request's share of the node's statistics (counted requests only)."""
        s = self.stats
        s.requests += 1
        s.chunks_requested += m
        s.chunk_misses += m - h
        s.prompt_tokens += input_tokens
        s.recomputed_tokens += sv.rec_tokens
        if sv.rec_tokens:
            s.recompute_gpu_seconds += self.cost.gpu_seconds(sv.rec_flops)
        hits = s.hits
        hits["hits_hbm_fa"] += sv.n_hbm
        hits["hits_dram_fa"] += sv.n_dram
        hits["hits_ssd_fa"] += sv.n_ssd
        if sv.q_tier != NO_TIER:
            hits[f"hits_{_TIER_KEYS[sv.q_tier]}_state"] += 1
        s.insert_skipped_bytes += skipped
        s.first_arrival_s = min(s.first_arrival_s, now)
        s.last_arrival_s = max(s.last_arrival_s, now)
        s.load_latency.append(sv.latency)
        s.ttft.append(sv.ttft)

    # ------------------------------------------------------------------
    def _load(self, path, h, hr, q):
        """Copy reused payloads into the entry tier; drop the deepest copies that cannot fit."""
        st = self.st
        t = self.entry
        if t == HBM:
            mask = (hr & IN_HBM) == 0
        else:   # HBM absent: a DRAM hit changes nothing; an SSD hit is copied into DRAM
            mask = (hr & IN_DRAM) == 0
        load_q = q >= 0 and not (st.res[q] & BIT[t])
        if not mask.any() and not load_q:
            return
        full = np.zeros(len(path), dtype=bool)
        full[:h] = mask
        st.add_path_fa(t, path, full)
        if load_q:
            st.add_state(q, t)
        if st.used[t] > st.cap[t]:
            order = fa_of(path[:h][mask].astype(np.int64)).tolist()
            if load_q:
                order.append(q)
            self._resolve_or_trim(t, order, count_skipped=False)

    def _insert(self, path, fa, h, r, m):
        st = self.st
        t = self.entry
        new = np.zeros(m, dtype=bool)
        new[r:] = True
        if r < m:
            st.pin[fa[r:]] = self.seq
            st.add_path_fa(t, path, new)
        created = fa[r:].tolist()
        states = []
        if self.has_state:
            for k in checkpoint_positions(self.mode, h, r, m):
                qq = int(fa[k - 1] + 1)
                if not st.res[qq]:
                    states.append((k, qq))
        if states:
            self._pins.append(np.asarray([qq for _, qq in states], dtype=np.int64))
        for k, qq in states:
            st.pin[qq] = self.seq
            st.touch_one(qq)
            st.add_state(qq, t)
        skipped = 0
        if st.used[t] > st.cap[t]:
            # deepest first: order by position, FA before STATE at the same position
            order = sorted([(r + 1 + i, 0, p) for i, p in enumerate(created)] + [(k, 1, qq) for k, qq in states])
            skipped = self._resolve_or_trim(t, [p for _, _, p in order], count_skipped=True)
        created.extend(qq for _, qq in states)
        placed = [p for p in created if st.res[p]]
        if t == SSD:
            # HBM and DRAM absent: every new payload is an SSD admission (a write)
            for p in placed:
                if st.res[p] & IN_SSD:
                    self._count_ssd_write(p)
        return skipped, placed

    def _resolve_or_trim(self, t: int, order: list[int], count_skipped: bool) -> int:
        """Resolve overflow of tier ``t``; if impossible, remove copies from the end of
        ``order`` (deepest first) until it fits. Returns the bytes not cached."""
        st = self.st
        skipped = 0
        order = list(order)
        bounded = False
        while st.used[t] > st.cap[t]:
            if not bounded:
                # cheap bound first: the request's pinned bytes in this tier can never be freed,
                # so while they exceed the tier no victim selection can succeed (skip trying:
                # a failing selection of a score-based policy scans every candidate)
                bounded = True
                pinned = self._request_pinned_bytes(t)
                if pinned > st.cap[t]:
                    while order and pinned > st.cap[t]:
                        p = order.pop()
                        if st.res[p] & BIT[t]:
                            d = self._trim(p, t)
                            pinned -= d
                            skipped += d
                    continue
            self._shortfall = None
            if self._make_room(t, st.used[t] - st.cap[t]):
                break
            if not order:
                raise AssertionError("tier over capacity with nothing left to trim")
            # the selection said how much it could not free: trim that much at once. Trimming
            # new payloads frees nothing else, except that removing the shallowest new FA chunk
            # can unblock its resident ancestors: before that one goes, the selection is retried.
            short = self._shortfall if self._shortfall else 1
            n_fa = sum(1 for x in order if not is_state(x))
            first = True
            while order and (short > 0 or first):
                p = order[-1]
                if not is_state(p) and n_fa == 1 and not first:
                    break
                order.pop()
                first = False
                if not is_state(p):
                    n_fa -= 1
                if st.res[p] & BIT[t]:
                    d = self._trim(p, t)
                    skipped += d
                    short -= d
                if not is_state(p) and n_fa == 0:
                    break               # the shallowest new FA went: its ancestors may be free now
        return skipped if count_skipped else 0

    def _request_pinned_bytes(self, t: int) -> int:
        st = self.st
        bit = BIT[t]
        pins = self._pins
        total = 0
        for arr in pins:
            if len(arr):
                sel = arr[(st.res[arr] & bit) != 0]
                total += int(st.size[sel].sum())
        return total

    def _state_bytes_in(self, p: int, t: int) -> int:
        q = twin_state(p)
        return int(self.st.size[q]) if not is_state(p) and self.st.res[q] & BIT[t] else 0

    def _trim(self, p: int, t: int) -> int:
        """Remove a just-placed copy that cannot fit; returns the bytes dropped."""
        removed = self.st.remove_copy(p, t)
        return sum(int(self.st.size[x]) for x, tt in removed if tt == t)

    def _make_room(self, t: int, need: int) -> bool:
        """Free at least ``need`` bytes in tier ``t`` by evicting victims. False if impossible."""
        st = self.st
        dest = next((d for d in range(t + 1, 3) if st.cap[d] > 0), NO_TIER) if t != SSD else NO_TIER
        for _ in range(64):
            if need <= 0:
                return True
            self._shortfall = None
            if t == HBM:
                victims = lru_select(st, self.hbm_lru, HBM, need, DEMOTE if dest != NO_TIER else DROP)
            else:
                victims = self.policy.select_victims(t, need, self.now)
            if not victims:
                self._shortfall = getattr(victims, "shortfall", None)   # what the selection could not free
                return False
            before = st.used[t]
            bit = BIT[t]
            demote = [p for p, a in victims if a == DEMOTE and dest != NO_TIER]
            drops = [p for p, a in victims if not (a == DEMOTE and dest != NO_TIER)]
            if demote and not self._demote(demote, t, dest):
                self._shortfall = None  # a lower tier failed: how much this tier lacks is unknown
                return False
            live = [p for p in drops if st.res[p] & bit]
            if live:
                for x, tt in st.remove_copies(live, t):
                    if tt == SSD:
                        self._close_ssd_copy(x)
            need -= before - st.used[t]
        return need <= 0

    def _demote(self, ps: list[int], t: int, dest: int) -> bool:
        """Move the tier-``t`` copies of ``ps`` to ``dest``: they enter ``dest`` (written if it is the
        SSD and no valid copy exists) and leave ``t``; then ``dest`` resolves its overflow through its
        policy, which may pick these very payloads (seeing them, correctly, as copies in ``dest``
        only). If ``dest`` cannot make room, the move is undone and False returned."""
        st = self.st
        bit, dbit = BIT[t], BIT[dest]
        arr = np.asarray(ps, dtype=np.int64)
        r = st.res[arr]
        keep = (r & bit) != 0
        arr = arr[keep]
        if not len(arr):
            return True
        ps = arr.tolist()
        new = arr[(r[keep] & dbit) == 0].tolist()
        if new:
            if dest == SSD:
                for p in new:
                    self._count_ssd_write(p)
            st.add_copies(new, dest)
        for x, tt in st.remove_copies(ps, t):
            if tt == SSD:
                self._close_ssd_copy(x)
        if st.used[dest] > st.cap[dest] and not self._make_room(dest, st.used[dest] - st.cap[dest]):
            newset = set(new)
            back = [p for p in ps if st.res[p] & dbit]       # a payload dest dropped is gone for good
            st.add_copies(back, t)
            drop_new = [p for p in back if p in newset]
            for p in drop_new:
                self._remove(p, dest)
            return False
        return True

    def _remove(self, p: int, t: int) -> None:
        for x, tt in self.st.remove_copy(p, t):
            if tt == SSD:
                self._close_ssd_copy(x)

    def _queue_admission(self, p: int) -> None:
        self._admit_queue.append(int(p))

    def _drain_admissions(self) -> None:
        st = self.st
        while self._admit_queue:
            q, self._admit_queue = self._admit_queue, []
            if st.cap[SSD] <= 0:
                continue
            for p in q:
                if st.res[p] and not st.res[p] & IN_SSD:
                    self._write_ssd(p)

    def _write_ssd(self, p: int) -> None:
        """Write-through admission of a resident payload (room is made first)."""
        st = self.st
        need = st.used[SSD] + int(st.size[p]) - st.cap[SSD]
        if need > 0 and not self._make_room(SSD, need):
            return
        if not st.res[p]:
            return
        self._count_ssd_write(p)
        st.add_copy(p, SSD)

    def _count_ssd_write(self, p: int) -> None:
        if self.ftl is not None:
            self.ftl.write(p, int(self.st.size[p]), is_state(p), self.counting)
        self.ssd_hit[p] = False
        self.ssd_adm_counted[p] = self.counting
        if self.counting:
            s = self.stats
            if is_state(p):
                s.ssd_bytes_written_state += int(self.st.size[p])
                s.ssd_admissions_state += 1
            else:
                s.ssd_bytes_written_fa += int(self.st.size[p])
                s.ssd_admissions_fa += 1

    def _close_ssd_copy(self, p: int) -> None:
        if self.ftl is not None:
            self.ftl.trim(p)
        if self.ssd_adm_counted[p] and self.ssd_hit[p]:
            if is_state(p):
                self.stats.ssd_admissions_hit_state += 1
            else:
                self.stats.ssd_admissions_hit_fa += 1
        self.ssd_adm_counted[p] = False
        self.ssd_hit[p] = False

    def finish(self) -> NodeStats:
        """Close the run: SSD copies still resident count as hit iff they served a reuse."""
        live = (self.st.res & IN_SSD) != 0
        hit = live & self.ssd_adm_counted & self.ssd_hit
        self.stats.ssd_admissions_hit_fa += int(hit[0::2].sum())
        self.stats.ssd_admissions_hit_state += int(hit[1::2].sum())
        self.ssd_adm_counted[live] = False
        if self.ftl is not None:
            self.stats.set_ftl(self.ftl.counters())
        pname = self.policy.name
        self.stats.policy = {f"policy.{pname}.{k}": v for k, v in self.policy.counters().items()}
        # float64 arrays, as the compiled engine gives them (not lists of Python floats)
        self.stats.load_latency = np.asarray(self.stats.load_latency, dtype=np.float64)
        self.stats.ttft = np.asarray(self.stats.ttft, dtype=np.float64)
        return self.stats


def floor_pass(paths_offsets: np.ndarray, flat: np.ndarray, n_chunks: int, input_tokens: np.ndarray,
               counted: np.ndarray, model, chunk_tokens: int, cost: CostModel) -> tuple[float, float]:
    """``miss_ratio_floor`` and ``recompute_gpu_seconds_floor``: the same stream in unbounded tiers
    with the same checkpoint mode (nothing is ever evicted or skipped)."""
    hs = unbounded_resume_prefix(paths_offsets, flat, n_chunks, model)
    lens = np.diff(paths_offsets)
    c = np.asarray(counted, dtype=bool)
    req = int(lens[c].sum())
    miss = int((lens - hs)[c].sum())
    flops, tokens = cost.request_recompute_array(hs * int(chunk_tokens), input_tokens)
    gpu_s = 0.0
    for x in cost.gpu_seconds(flops[c & (tokens != 0)]).tolist():
        gpu_s += x          # in request order, as the request step adds them
    return (miss / req if req else 0.0), gpu_s
