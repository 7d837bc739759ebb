"""Request routers (simulation-model §8). A router sees only what a real one sees:
its own dispatch history, plus — with ``fleet.sync=kv_events`` — the stored and
removed chunk events each node reports at epoch barriers.

Routers are deterministic given the root seed; they run in the driver, ahead of
the nodes when there is no feedback.
"""
from __future__ import annotations

import bisect
import hashlib
from collections import deque

import numpy as np

from .cost import CostModel
from .errors import ConfigError


class Router:
    """Base router: ``route(i)`` picks the node of trace request ``i`` (requests come in order)."""

    def __init__(self, trace, fleet, seed: int, model, node_hw: list):
        self.trace = trace
        self.k = fleet.nodes
        self.fleet = fleet
        self.seed = seed
        self.model = model
        self.node_hw = node_hw
        # full-recompute prefill estimate per node, for backlog bookkeeping
        self.costs = [CostModel.of(model, hw) for hw in node_hw]
        self.rate = np.array([c.compute_rate for c in self.costs], dtype=np.float64)
        self.busy = np.zeros(self.k, dtype=np.float64)        # estimated end of each node's prefill queue
        self.work = np.zeros(self.k, dtype=np.float64)        # total dispatched prefill seconds

    def route(self, i: int) -> int:
        raise NotImplementedError

    def dispatched(self, i: int, node: int) -> None:
        """Bookkeeping of the router's own dispatch history (every router keeps it)."""
        t = float(self.trace.arrival_s[i])
        L = int(self.trace.input_tokens[i])
        est = self.model.prefill_flops(0, L) / self.rate[node] if L > 0 else 0.0
        self.busy[node] = max(self.busy[node], t) + est
        self.work[node] += est

    def route_ahead(self) -> np.ndarray:
        """The node of every request when no feedback comes (``fleet.sync=none``): ``route`` and
        ``dispatched`` request by request, in order. Routers that read no dispatch history
        override it with an equal, faster pass."""
        n = self.trace.n_requests
        assign = np.empty(n, dtype=np.int64)
        for i in range(n):
            node = self.route(i)
            self.dispatched(i, node)
            assign[i] = node
        return assign

    def backlog(self, t: float) -> np.ndarray:
        return np.maximum(0.0, self.busy - t)

    def observe(self, node: int, stored: np.ndarray, removed: np.ndarray) -> None:
        """Stored / removed chunk ids reported by ``node`` at an epoch barrier (kv_events only)."""


class RoundRobin(Router):
    def __init__(self, *a):
        super().__init__(*a)
        self.n = 0

    def route(self, i):
        node = self.n % self.k
        self.n += 1
        return node

    def route_ahead(self):
        # the dispatch history (busy, work) is never read by this router
        assign = (np.arange(self.trace.n_requests, dtype=np.int64) + self.n) % self.k
        self.n += len(assign)
        return assign


class RandomRouter(Router):
    def __init__(self, *a):
        super().__init__(*a)
        self.rng = np.random.default_rng(np.random.SeedSequence([self.seed, 2]))

    def route(self, i):
        return int(self.rng.integers(0, self.k))


def _h64(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


class SessionAffinity(Router):
    """Consistent hashing with virtual nodes on the session id, or — for requests with no
    session — on the hashes of the first ``fleet.affinity_chunks`` full chunks."""

    VNODES = 128

    def __init__(self, *a):
        super().__init__(*a)
        ring = sorted((_h64(f"node{n}#{v}".encode()), n) for n in range(self.k) for v in range(self.VNODES))
        self.points = [p for p, _ in ring]
        self.owner = [n for _, n in ring]

    def key(self, i: int) -> bytes:
        sid = int(self.trace.session_id[i])
        if sid >= 0:
            return b"s" + sid.to_bytes(8, "little", signed=True)
        p = self.trace.path(i)[: self.fleet.affinity_chunks]
        return b"c" + np.asarray(self.trace.chunk_hash[p], dtype=np.uint64).tobytes()

    def route(self, i):
        return self._owner_of(_h64(self.key(i)))

    def _owner_of(self, h: int) -> int:
        j = bisect.bisect_left(self.points, h)
        return self.owner[j % len(self.points)]

    def route_ahead(self):
        # one hash per distinct session (its requests share a key); the dispatch history is
        # never read by this router
        sid = np.asarray(self.trace.session_id, dtype=np.int64)
        assign = np.empty(len(sid), dtype=np.int64)
        has = sid >= 0
        if has.any():
            uniq, inv = np.unique(sid[has], return_inverse=True)
            nodes = np.array([self._owner_of(_h64(b"s" + int(u).to_bytes(8, "little", signed=True)))
                              for u in uniq.tolist()], dtype=np.int64)
            assign[has] = nodes[inv]
        for i in np.flatnonzero(~has).tolist():
            assign[i] = self.route(i)
        return assign


class LeastLoaded(Router):
    """Shortest estimated prefill backlog (full-recompute prefill time of the router's own
    dispatches, drained in simulated time); ties: least total work, then lowest index."""

    def route(self, i):
        t = float(self.trace.arrival_s[i])
        b = self.backlog(t)
        return int(np.lexsort((np.arange(self.k), self.work, b))[0])


class KVAware(Router):
    """Expected prefix overlap weighed against load (as SGLang's cache-aware router and
    Dynamo's KV router do): each node's cache is approximated by the chunks the router sent
    there (LRU-bounded to the node's capacity in chunks), corrected by the nodes' stored /
    removed events at epoch barriers with ``fleet.sync=kv_events``.

    Among nodes holding at least ``fleet.kv_threshold`` of the prompt's full chunks,
    score(node) = recompute seconds saved by its overlap − ``fleet.kv_balance`` × its
    backlog seconds; the best score wins (ties: least backlog, then lowest index). Nodes whose
    dispatched prefill work exceeds ``fleet.kv_max_work_ratio`` × the fleet mean are not
    preferred, which bounds load and wear imbalance. When no
    node holds that much, the request goes to the least loaded node, so new prefixes
    spread over the fleet instead of piling onto whoever holds a shared system prompt.
    """

    def __init__(self, *a):
        super().__init__(*a)
        U = self.trace.n_chunks
        self.view = np.zeros((self.k, U), dtype=bool)
        self.last = np.full((self.k, U), -1, dtype=np.int64)
        self.queue = [deque() for _ in range(self.k)]
        self.count = np.zeros(self.k, dtype=np.int64)
        fa = max(1, self.model.fa_bytes(self.trace.chunk_tokens))
        self.cap = [max(1, (hw.hbm_cache_bytes + hw.dram_bytes + hw.ssd_bytes) // fa) for hw in self.node_hw]
        self.balance = float(self.fleet.kv_balance)
        self.threshold = float(self.fleet.kv_threshold)
        self.max_ratio = float(self.fleet.kv_max_work_ratio)
        self.tick = 0
        ct = self.trace.chunk_tokens
        maxd = int(self.trace.depth.max()) if len(self.trace.depth) else 1
        d = np.arange(1, maxd + 1, dtype=np.int64)
        flops = self.model.prefill_flops_array((d - 1) * ct, d * ct)
        self.cum_flops = np.concatenate([[0.0], np.cumsum(flops)])

    def route(self, i):
        t = float(self.trace.arrival_s[i])
        path = self.trace.path(i)
        m = len(path)
        b = self.backlog(t)
        if m:
            hit = self.view[:, path]                              # (k, m)
            full = hit.all(axis=1)
            overlap = np.where(full, m, np.argmin(hit, axis=1))
            ok = overlap >= self.threshold * m
            # balance guard: a node already carrying more than kv_max_work_ratio x the mean
            # dispatched work is not preferred for affinity (as SGLang's router falls back to
            # the shortest queue when load is imbalanced)
            mean = self.work.mean()
            if mean > 0:
                ok &= self.work <= self.max_ratio * mean
            if ok.any():
                saved = self.cum_flops[overlap] / self.rate
                score = np.where(ok, saved - self.balance * b, -np.inf)
                return int(np.lexsort((np.arange(self.k), b, -score))[0])
        # no node holds enough of the prompt: least loaded (backlog, then total work)
        return int(np.lexsort((np.arange(self.k), self.work, b))[0])

    def dispatched(self, i, node):
        super().dispatched(i, node)
        path = self.trace.path(i)
        if not len(path):
            return
        self.tick += 1
        new = ~self.view[node, path]
        self.view[node, path] = True
        self.last[node, path] = self.tick
        q = self.queue[node]
        for c in path.tolist():
            q.append((self.tick, c))
        self.count[node] += int(new.sum())
        # evict the least recently dispatched chunks beyond the node's capacity
        last = self.last[node]
        view = self.view[node]
        while self.count[node] > self.cap[node] and q:
            tk, c = q.popleft()
            if last[c] == tk and view[c]:
                view[c] = False
                self.count[node] -= 1
        if len(q) > 4 * self.cap[node] + 1024:
            self.queue[node] = deque((tk, c) for tk, c in q if last[c] == tk and view[c])

    def observe(self, node, stored, removed):
        view = self.view[node]
        if len(removed):
            was = view[removed]
            view[removed] = False
            self.count[node] -= int(was.sum())
        if len(stored):
            new = ~view[stored]
            view[stored] = True
            self.tick += 1
            self.last[node, stored] = self.tick
            q = self.queue[node]
            for c in stored[new].tolist():
                q.append((self.tick, c))
            self.count[node] += int(new.sum())


ROUTERS = {
    "round_robin": RoundRobin,
    "random": RandomRouter,
    "session_affinity": SessionAffinity,
    "least_loaded": LeastLoaded,
    "kv_aware": KVAware,
}


def make_router(trace, fleet, seed, model, node_hw) -> Router:
    cls = ROUTERS.get(fleet.router)
    if cls is None:
        raise ConfigError("fleet.router", f"unknown router {fleet.router!r}; known: {', '.join(sorted(ROUTERS))}")
    return cls(trace, fleet, seed, model, node_hw)
