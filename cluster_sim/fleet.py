"""Runs a fleet of serving nodes over one request stream (simulation-model §8).

One code path for both backends: the driver routes requests epoch by epoch
(``fleet.epoch_s`` simulated seconds; a request arriving at a barrier belongs to
the later epoch) and ships each node its batch; nodes are :class:`NodeRunner`
objects — here, in this process (``inprocess``), or inside Ray actors
(``distributed.py``). Without feedback (``fleet.sync=none``) the routing runs
ahead: every batch is submitted at once and the nodes run fully in parallel.
With ``fleet.sync=kv_events`` the driver waits at each barrier for the nodes'
stored/removed chunk events and feeds them to the router before routing the
next epoch. Each node's work depends only on its own request stream and its
seed, so every backend and packing gives bit-identical results.
"""
from __future__ import annotations

import dataclasses
import sys
import time

import numpy as np

from . import engine as engines
from .cost import CostModel
from .errors import ConfigError, UserError
from .metrics import NodeStats
from .node import NodeSim, floor_pass
from .policies.base import make_policy, policy_class


#: a compiled span call shorter than this doubles the next call's requests (NodeRunner.run_span)
SPAN_CALL_S = 0.05


def _policy_params(cfg):
    """The validated parameters of ``cfg.policy`` (``SimConfig`` parsed them once)."""
    return cfg.policy.settings if cfg.policy.settings is not None else cfg.policy.params


class SimulationError(UserError):
    """The run could not complete (e.g. a node actor died); nothing partial is reported."""

    exit_code = 3


def node_rng(seed: int, node_index: int) -> np.random.Generator:
    """Per-node stream derived from the root seed (identical in every backend)."""
    return np.random.default_rng(np.random.SeedSequence([seed, 1, node_index]))


#: per-request snapshot of a node after each request (``series["snap"]`` columns): tier occupancy
#: in bytes, and cumulative counters (bytes and copies that left each tier, SSD admissions and
#: the admissions whose copy served a hit, hits per tier); the epoch table takes them apart
SNAP = ("hbm_used_bytes", "dram_used_bytes", "ssd_used_bytes",
        "hbm_left_bytes", "dram_left_bytes", "ssd_left_bytes", "ssd_copies_left",
        "ssd_admissions", "ssd_admissions_hit", "hits_hbm", "hits_dram", "hits_ssd")


class NodeRunner:
    """One serving node: its tiers, its cache manager, and the requests routed to it."""

    def __init__(self, trace, cfg, node_index: int, future_idx: np.ndarray | None = None,
                 record_events: bool = False, fail_at_epoch: int | None = None, hard_fail: bool = False,
                 share: np.ndarray | None = None):
        """``share``: every trace request this node will be given (ascending), when routing runs
        ahead. The compiled engine then replays them on the share's own chunk table
        (``ChunkedTrace.localize``): arrays sized to the node's chunks, not the fleet's."""
        self.trace = trace
        self.cfg = cfg
        self._share = None
        self.k = node_index
        hw = cfg.hardware_for_node(node_index)
        policy = make_policy(cfg.policy.name, _policy_params(cfg))     # the node's one policy
        self.engine = run_engine(cfg, record_events)
        self.fail_at_epoch = fail_at_epoch
        self.hard_fail = hard_fail
        self.series: list[tuple[np.ndarray, ...]] = []
        self._future_idx = future_idx
        if self.engine == "numba":
            if share is not None and len(share) == trace.n_requests:
                share = None        # the whole trace (a single node): its own table already
            if share is not None and len(share):
                # the node's own chunks only, ids in the trace's order: the same results (decision 146)
                share = np.asarray(share, dtype=np.int64)
                trace, _ = trace.localize(share)
                self._share = share
                if future_idx is not None:
                    future_idx = self._local(future_idx)
            self.local_trace = trace
            # the compiled request step (cluster_sim.engine): the same results as NodeSim
            self.node = engines.CompiledNode(trace.parent, trace.depth, trace.anchor, trace.flat, trace.chunk_tokens,
                                             cfg.model, hw, policy.name, node_index=node_index,
                                             params=_policy_params(cfg), future_idx=future_idx,
                                             rng=node_rng(cfg.seed, node_index),
                                             replays_per_day_scale=cfg.workload.replays_per_day_scale,
                                             policy_obj=policy, record_events=record_events)
            self._record_events = record_events
            self._passes_pending = False
            return
        future = None
        if policy.needs_future:
            from .policies.base import FutureStream
            if future_idx is None:
                raise ConfigError("policy", f"policy {policy.name!r} needs the node's future requests, "
                                  "which only exist when routing runs ahead (fleet.sync=none)")
            sub = trace.subset(future_idx)
            future = FutureStream(offsets=sub.offsets, flat=sub.flat, arrival_s=sub.arrival_s)
        self.node = NodeSim(trace.parent, trace.depth, trace.anchor, trace.flat, trace.chunk_tokens, cfg.model, hw,
                            policy, node_index=node_index, rng=node_rng(cfg.seed, node_index), future=future,
                            replays_per_day_scale=cfg.workload.replays_per_day_scale)
        self.node.st.record_events = record_events
        # hindsight policies that find their rule by replaying the node's stream first
        # (oracle_admission): done at the first replay call, so the time counts in sim_wall_s
        self._passes_pending = getattr(policy, "hindsight_passes", 1) > 1

    def _hindsight_passes(self) -> None:
        """Replay the node's whole stream ``passes - 1`` times (or to a fixed point) with fresh
        nodes, each pass told the admission outcomes of the earlier ones; the counted replay is
        the last pass (``cluster_sim.policies.oracle_admission``)."""
        self._passes_pending = False
        cfg, tr = self.cfg, self.trace
        final = self.node.policy
        labels: dict[int, bool] = {}
        passes = 1
        converged = False
        for _ in range(final.hindsight_passes - 1):
            pol = make_policy(cfg.policy.name, _policy_params(cfg))    # a fresh one per earlier replay
            pol.labels = dict(labels) if passes > 1 else None
            node = NodeSim(tr.parent, tr.depth, tr.anchor, tr.flat, tr.chunk_tokens, cfg.model,
                           cfg.hardware_for_node(self.k), pol, node_index=self.k,
                           rng=node_rng(cfg.seed, self.k), future=self.node.policy.ctx.future,
                           replays_per_day_scale=cfg.workload.replays_per_day_scale)
            self._replay(node, self._future_idx)
            outcomes = pol.hindsight_outcomes()
            passes += 1
            labels.update(outcomes)
            if all(outcomes.values()):
                converged = True          # nothing written went unused: this rule is its own fixed point
                break
        final.labels = labels
        final.c["passes"] = passes
        final.c["converged"] = int(converged)

    def run(self, idx: np.ndarray, epoch: int = 0):
        """Replay the trace requests ``idx`` (in order). Returns this node's stored/removed events."""
        if self.fail_at_epoch is not None and epoch >= self.fail_at_epoch:
            # fault injection (fleet.inject_failure): in an actor the process dies; in-process we raise
            if self.hard_fail:
                import os
                import time
                # let the replies of this actor's finished calls reach the driver first, so the
                # driver sees exactly this epoch's results lost (a crash loses only in-flight work)
                time.sleep(1.0)
                os._exit(17)
            raise SimulationError(f"node {self.k} failed during epoch {epoch} (injected failure)")
        if self._passes_pending:
            self._hindsight_passes()
        if self.engine == "numba":
            idx = np.asarray(idx, dtype=np.int64)
            mine = idx if self._share is None else self._local(idx)
            self.series.append((idx, *self.node.replay(self.local_trace, mine)))
            return self.node.take_events() if self._record_events else None
        self.series.append(self._replay(self.node, idx))
        if self.node.st.record_events:
            return self.node.st.take_events()
        return None

    def _local(self, idx: np.ndarray) -> np.ndarray:
        """The positions in the node's share of the trace requests ``idx`` (all of them in it)."""
        idx = np.asarray(idx, dtype=np.int64)
        at = np.searchsorted(self._share, idx)
        if len(idx) and (at[-1] >= len(self._share) or not np.array_equal(self._share[np.minimum(at, len(self._share) - 1)], idx)):
            raise ValueError(f"node {self.k} was given requests outside its share")
        return at

    def run_span(self, idx: np.ndarray, epochs: np.ndarray, tick=None, block: int | None = None) -> int:
        """Many epochs at once (no feedback, ``fleet.sync=none``): the requests ``idx`` (in trace
        order) with their epochs, with the results of one :meth:`run` per epoch. The compiled
        engine replays them in calls of ``block`` requests (default: all in one), whatever the
        epochs (its per-request rows do not depend on the call boundaries); the interpreted one,
        and a node with an injected failure, epoch by epoch. ``block`` is where the calls start:
        a call that took less than :data:`SPAN_CALL_S` doubles the next one's requests (a call
        costs about 1 ms of dispatch and pricing, so a fixed small block was half of a short
        run; decision 129). ``tick(n)`` hears each call's request count. Returns the number of
        requests."""
        idx = np.asarray(idx, dtype=np.int64)
        n = len(idx)
        if self.engine == "numba" and self.fail_at_epoch is None:
            size = n if block is None else max(1, int(block))
            # the span's rows go straight into arrays sized for the whole span: no blocks to join
            # at the end (freed blocks stay in the allocator's heap, so a join peaked at twice the
            # rows: decision 121)
            out = None
            a = 0
            while a < n:
                b = min(n, a + size)
                t0 = time.perf_counter()
                self.run(idx[a:b], int(epochs[a]))
                if time.perf_counter() - t0 < SPAN_CALL_S:
                    size *= 2
                blk = self.series.pop()
                if out is None:
                    out = tuple(np.empty((n,) + x.shape[1:], dtype=x.dtype) for x in blk)
                for o, x in zip(out, blk):
                    o[a:b] = x
                del blk
                if tick is not None:
                    tick(b - a)
                a = b
            if out is not None:
                self.series.append(out)
            return n
        cut = np.flatnonzero(np.diff(epochs)) + 1
        cuts = [0, *cut.tolist(), n] if n else [0]
        for a, b in zip(cuts, cuts[1:]):
            self.run(idx[a:b], int(epochs[a]))
            if tick is not None:
                tick(b - a)
        return n

    def _replay(self, node, idx: np.ndarray):
        """Process the trace requests ``idx`` on ``node``; per request (idx, h, m, SSD bytes written)."""
        tr = self.trace
        off = tr.offsets
        flat = tr.flat
        arr = tr.arrival_s[idx].tolist()
        inp = tr.input_tokens[idx].tolist()
        out_t = tr.output_tokens[idx].tolist()
        cnt = tr.counted[idx].tolist()
        sid = tr.session_id[idx].tolist()
        turn = tr.turn[idx].tolist()
        stop = tr.stop_reason[idx].tolist()
        think = tr.think_time_s[idx].tolist()
        api = tr.api_time_s[idx].tolist()
        agent = tr.agent[idx].tolist()
        cats = tr.category
        n = len(idx)
        hs = np.zeros(n, dtype=np.int64)
        ms = np.zeros(n, dtype=np.int64)
        wr = np.zeros(n, dtype=np.int64)
        snap = np.zeros((n, len(SNAP)), dtype=np.int64)
        lat = np.zeros(n, dtype=np.float64)
        ttft = np.zeros(n, dtype=np.float64)
        s = node.stats
        st = node.st
        hits = s.hits
        for j, i in enumerate(idx.tolist()):
            before = s.ssd_bytes_written_fa + s.ssd_bytes_written_state
            rec = node.process(flat[off[i]:off[i + 1]], inp[j], arr[j], counted=cnt[j], session_id=sid[j],
                               category=None if cats is None else cats[i], turn=turn[j], output_tokens=out_t[j],
                               stop_reason=stop[j], think_time_s=think[j], api_time_s=api[j], agent=agent[j])
            hs[j] = rec["h"]
            ms[j] = rec["m"]
            wr[j] = s.ssd_bytes_written_fa + s.ssd_bytes_written_state - before
            lat[j] = rec["latency"]
            ttft[j] = rec["ttft"]
            u, lb = st.used, st.left
            snap[j] = (u[0], u[1], u[2], lb[0], lb[1], lb[2], st.left_n[2],
                       s.ssd_admissions_fa + s.ssd_admissions_state,
                       s.ssd_admissions_hit_fa + s.ssd_admissions_hit_state,
                       hits["hits_hbm_fa"] + hits["hits_hbm_state"], hits["hits_dram_fa"] + hits["hits_dram_state"],
                       hits["hits_ssd_fa"] + hits["hits_ssd_state"])
        return np.asarray(idx, dtype=np.int64), hs, ms, wr, snap, lat, ttft

    def finish(self) -> tuple[NodeStats, dict]:
        stats = self.node.finish()
        if self.series:
            # one column at a time, each column's blocks freed once joined: the peak is the joined
            # rows plus one column's blocks, not twice the rows (144 B a request)
            cols = list(zip(*self.series))
            self.series = []
            joined = []
            while cols:
                blocks = cols.pop(0)
                joined.append(blocks[0] if len(blocks) == 1 else np.concatenate(blocks))   # one block: as is
                del blocks
            idx, hs, ms, wr, snap, lat, ttft = joined
        else:
            idx = hs = ms = wr = np.zeros(0, dtype=np.int64)
            snap = np.zeros((0, len(SNAP)), dtype=np.int64)
            lat = ttft = np.zeros(0, dtype=np.float64)
        return stats, {"idx": idx, "h": hs, "m": ms, "ssd_bytes_written": wr, "snap": snap,
                       "load_latency_s": lat, "ttft_s": ttft}


class InProcessNodes:
    """The in-process backend: node runners in this process, calls run immediately."""

    actor_processes = 0
    workers = 0

    def __init__(self, trace, cfg, futures, record_events, fail, loads=None, shares=None):
        self.runners = [NodeRunner(trace, cfg, k, futures[k] if futures else None, record_events,
                                   fail.get(k), share=shares[k] if shares else None)
                        for k in range(cfg.fleet.nodes)]

    def submit(self, k: int, idx: np.ndarray, epoch: int):
        return self.runners[k].run(idx, epoch)

    def submit_span(self, k: int, idx: np.ndarray, epochs: np.ndarray, tick=None, block: int | None = None):
        """Node ``k``'s whole share (no feedback): replayed now, as :meth:`NodeRunner.run_span`."""
        return self.runners[k].run_span(idx, epochs, tick, block)

    def wait_span(self, k: int, handle) -> int:
        return handle

    def wait(self, handles: list, epoch: int) -> list:
        """``handles``: [(node, handle)]; returns each call's result, in order."""
        return [h for _, h in handles]

    def finish(self) -> list:
        return [r.finish() for r in self.runners]

    def close(self):
        pass


def run_engine(cfg, kv_events: bool) -> str:
    """The request-step engine of this run's nodes: ``numba`` or ``python`` (``cache.engine``;
    :func:`cluster_sim.engine.resolve`)."""
    hws = [cfg.hardware_for_node(i) for i in range(cfg.fleet.nodes)]
    return engines.resolve(cfg.engine, cfg.policy.name, hws, kv_events, _policy_params(cfg))


def epochs_of(trace, epoch_s: float) -> np.ndarray:
    """Epoch index of every request: floor((t - t0) / epoch_s); a request at a barrier is in the later one."""
    a = trace.arrival_s
    if not len(a):
        return np.zeros(0, dtype=np.int64)
    return np.floor((a - a[0]) / epoch_s).astype(np.int64)


def shares(assign: np.ndarray, k: int) -> list[np.ndarray]:
    """Each node's request indices in request order (``np.flatnonzero(assign == j)`` for every
    ``j``, in one sort rather than ``k`` passes)."""
    order = np.argsort(assign, kind="stable")
    cuts = np.cumsum(np.bincount(assign, minlength=k)[:k])[:-1] if len(assign) else np.zeros(k - 1, dtype=np.int64)
    return np.split(order, cuts)


def run_settings(cfg) -> list:
    """The compiled settings a run uses, for :func:`cluster_sim.engine.ensure_compiled`: its policy
    with its parameters (every node runs the same policy)."""
    return [(cfg.policy.name, _policy_params(cfg))]


def run_fleet(trace, cfg, backend_factory=None, progress=None) -> dict:
    """Route and replay. Returns raw results for :mod:`cluster_sim.api`. ``progress(done,
    total)``, if given, hears how many requests have been replayed (or, for a backend that
    runs ahead, submitted and then finished) after every epoch."""
    from .router import make_router

    fleet = cfg.fleet
    k = fleet.nodes
    node_hw = [cfg.hardware_for_node(i) for i in range(k)]
    sync = fleet.sync == "kv_events" and k > 1
    engine = run_engine(cfg, sync)
    if engine == "numba" and cfg.engine == "auto":
        note = engines.interpreted_first_run(trace.chunk_refs, run_settings(cfg))
        if note:                           # a small first run does not wait for the compiler
            print(note, file=sys.stderr, flush=True)
            engine = "python"
            cfg = dataclasses.replace(cfg, engine="python")     # every node, in this process or on Ray
    build_s = 0.0
    if engine == "numba":
        # once per install and policy, before the clock starts; the seconds are the run's jit_compile_s
        build_s = engines.ensure_compiled(settings=run_settings(cfg))
    t0 = time.perf_counter()
    router = make_router(trace, fleet, cfg.seed, cfg.model, node_hw)
    ep = epochs_of(trace, fleet.epoch_s)
    n = trace.n_requests
    assign = np.full(n, -1, dtype=np.int64)
    fail = {}
    if fleet.inject_failure:
        fail = {int(fleet.inject_failure["node"]): int(fleet.inject_failure["epoch"])}
    futures = parts = None
    if not sync:
        assign = router.route_ahead()
        futures = parts = shares(assign, k)
    if not policy_class(cfg.policy.name).needs_future:     # a class attribute: no policy is built here
        futures = None
    elif futures is None:
        raise ConfigError("policy", f"policy {cfg.policy.name!r} needs the node's future requests; "
                          "use fleet.sync=none (routing ahead)")
    # each node's work when routing ran ahead (its chunk references): backends place nodes by it
    loads = None
    if not sync and n:
        loads = np.bincount(assign, weights=np.diff(trace.offsets)[:n], minlength=k)
    setup_t = time.perf_counter()
    nodes = (backend_factory or InProcessNodes)(trace, cfg, futures, sync, fail, loads=loads, shares=parts)
    setup = time.perf_counter() - setup_t
    from .jit_timing import start as compile_timer
    jit = compile_timer()          # numba compiling a kernel on first use is not simulation time
    try:
        # epoch boundaries in request order
        bounds = np.flatnonzero(np.diff(ep)) + 1
        starts = np.concatenate([[0], bounds]) if n else np.zeros(0, dtype=np.int64)
        ends = np.concatenate([bounds, [n]]) if n else np.zeros(0, dtype=np.int64)
        pending = []
        ahead = not isinstance(nodes, InProcessNodes)   # calls return before the replay ends
        spans = not sync and hasattr(nodes, "submit_span")
        if spans:
            # no feedback: each node's whole share in as few calls as the backend allows (one per
            # node, distributed.RayNodes.submit_span); the node replays it epoch by epoch, as below
            starts = ends = np.zeros(0, dtype=np.int64)
            done = 0
            if not ahead:
                # in this process: blocks of requests, so that a progress bar moves; they start
                # small and double while a call is short (run_span), so a run makes a few dozen
                def tick(d: int) -> None:
                    nonlocal done
                    done += d
                    if progress is not None:
                        progress(done, n)
                for j, idx in enumerate(parts):
                    if len(idx):
                        nodes.submit_span(j, idx, ep[idx], tick=tick, block=max(16, n // 1000))
            else:
                calls = [(j, nodes.submit_span(j, idx, ep[idx])) for j, idx in enumerate(parts) if len(idx)]
                for j, handle in calls:
                    done += nodes.wait_span(j, handle)
                    if progress is not None:
                        progress(done, n)
        for s_, e_ in zip(starts.tolist(), ends.tolist()):
            e = int(ep[s_])
            if sync:
                for i in range(s_, e_):
                    node = router.route(i)
                    router.dispatched(i, node)
                    assign[i] = node
            sl = assign[s_:e_]
            handles = []
            for j in range(k):
                idx = np.flatnonzero(sl == j) + s_
                if len(idx):
                    handles.append((j, nodes.submit(j, idx, e)))
            if sync:
                results = nodes.wait(handles, e)
                for (j, _), ev in zip(handles, results):
                    if ev is not None:
                        router.observe(j, ev[0], ev[1])
                if progress is not None:
                    progress(e_, n)
            else:
                pending.append((e, handles, e_))
                if progress is not None and not ahead:
                    progress(e_, n)            # in-process submission is the replay itself
        for e, handles, upto in pending:
            nodes.wait(handles, e)
            if progress is not None and ahead:
                progress(upto, n)
        results = nodes.finish()
    finally:
        nodes.close()
        compile_s = jit.stop()
    wall = time.perf_counter() - t0 - setup - compile_s
    return {"assign": assign, "results": results, "sim_wall_s": wall, "jit_compile_s": compile_s + build_s, "engine": engine,
            "actor_processes": nodes.actor_processes, "ray_workers": nodes.workers, "setup_s": setup}


def floors(trace, cfg, assign) -> tuple[list[tuple[float, float]], tuple[float, float]]:
    """Per-node floors on each node's own stream and the fleet floor on the whole stream."""
    out = []
    for k, idx in enumerate(shares(assign, cfg.fleet.nodes)):
        cost = CostModel.of(cfg.model, cfg.hardware_for_node(k))
        if cfg.fleet.nodes > 1:
            offs, flat = trace.stream(idx)          # the node's stream (a subset's other columns unused)
            tokens, counted = trace.input_tokens[idx], trace.counted[idx]
        else:
            offs, flat, tokens, counted = trace.offsets, trace.flat, trace.input_tokens, trace.counted
        out.append(floor_pass(offs, flat, trace.n_chunks, tokens, counted, cfg.model, trace.chunk_tokens, cost))
    if cfg.fleet.nodes == 1:
        return out, out[0]
    whole = floor_pass(trace.offsets, trace.flat, trace.n_chunks, trace.input_tokens, trace.counted, cfg.model,
                       trace.chunk_tokens, CostModel.of(cfg.model, cfg.hardware))
    return out, whole
