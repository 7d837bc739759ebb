"""The Ray backend: serving nodes as actors (the only simulation module that imports Ray).

``fleet.ray_workers`` actor processes each host one or more nodes
(:class:`~cluster_sim.fleet.NodeRunner`; node ``i`` lives on worker ``i mod W``).
The chunked trace goes into the object store once and every actor maps it
zero-copy; requests travel as index batches per epoch. Calls to one actor run
in submission order, so an actor's nodes see their requests in trace order.
A dead actor fails the run with an error naming the node and the epoch; no
partial summary is produced.
"""
from __future__ import annotations

import os
from contextlib import contextmanager

import numpy as np

from .fleet import NodeRunner, SimulationError

_STARTED_HERE = False


#: where a local start listens: the loopback interface only (docs/sweeps.md "What listens")
LOOPBACK = "127.0.0.1"


@contextmanager
def _loopback_node_ip():
    """While Ray starts here, let it take 127.0.0.1 as this node's address.

    ``ray.init(_node_ip_address="127.0.0.1")`` alone is not enough on Linux: Ray maps a loopback
    address to the machine's routable one unless it is told the machine is no multi-node
    cluster, the switch it keeps for Windows and macOS (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER``,
    read once as ``ray_constants.ENABLE_RAY_CLUSTER``). With it off during ``ray.init``, the GCS,
    the raylet, the object manager, the runtime-env agent and every worker bind 127.0.0.1. Where a
    Ray version lacks the switch, the plain ``_node_ip_address`` is what is left."""
    try:
        from ray._private import ray_constants
    except ImportError:  # pragma: no cover - another Ray layout
        yield
        return
    had = hasattr(ray_constants, "ENABLE_RAY_CLUSTER")
    old = getattr(ray_constants, "ENABLE_RAY_CLUSTER", None)
    if had:
        ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        if had:
            ray_constants.ENABLE_RAY_CLUSTER = old


def ensure_ray(address: str | None):
    """Connect to Ray: ``local`` starts (or reuses) a local instance bound to 127.0.0.1;
    ``auto`` / ``host:port`` join an existing cluster."""
    import ray

    from .signals import reclaim

    global _STARTED_HERE
    if ray.is_initialized():
        return ray
    kw = dict(include_dashboard=False, log_to_driver=False, ignore_reinit_error=True,
              configure_logging=False)
    if address in (None, "", "local"):
        with _loopback_node_ip():
            ray.init(num_cpus=max(2, os.cpu_count() or 2), object_store_memory=256 * 2**20,
                     _node_ip_address=LOOPBACK, **kw)
        _STARTED_HERE = True
    else:
        ray.init(address=address, **kw)
    reclaim()   # ray.init installs its own SIGTERM handler in the driver (sys.exit)
    return ray


def _actor_class():
    import ray

    @ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0)
    class NodeGroup:
        """Hosts some of the fleet's nodes in one actor process."""

        def __init__(self, trace, cfg, nodes: list, futures: dict, record_events: bool, fail: dict):
            self.runners = {k: NodeRunner(trace, cfg, k, futures.get(k), record_events, fail.get(k), hard_fail=True)
                            for k in nodes}

        def pid(self) -> int:
            return os.getpid()

        def run(self, k: int, idx: np.ndarray, epoch: int):
            return self.runners[k].run(idx, epoch)

        def finish(self, k: int):
            return self.runners[k].finish()

    return NodeGroup


class RayNodes:
    """The Ray backend behind the same interface as ``fleet.InProcessNodes``."""

    def __init__(self, trace, cfg, futures, record_events, fail):
        ray = ensure_ray(cfg.fleet.ray_address)
        self.ray = ray
        k = cfg.fleet.nodes
        w = min(cfg.fleet.ray_workers or k, k)
        self.workers = w
        self.where = [i % w for i in range(k)]
        trace_ref = ray.put(trace)
        cls = _actor_class()
        self.actors = []
        for j in range(w):
            mine = [i for i in range(k) if self.where[i] == j]
            fut = {i: futures[i] for i in mine} if futures else {}
            self.actors.append(cls.remote(trace_ref, cfg, mine, fut, record_events,
                                          {i: e for i, e in fail.items() if i in mine}))
        try:
            pids = ray.get([a.pid.remote() for a in self.actors])
        except Exception as e:  # noqa: BLE001 - surfaced as one clear error
            raise SimulationError(f"could not start the node actors: {e}") from None
        self.actor_processes = len(set(pids))

    @classmethod
    def factory(cls, cfg):
        return lambda trace, c, futures, record_events, fail: cls(trace, c, futures, record_events, fail)

    def submit(self, k: int, idx: np.ndarray, epoch: int):
        return (epoch, self.actors[self.where[k]].run.remote(k, idx, epoch))

    def wait(self, handles: list, epoch: int) -> list:
        out = []
        for k, (e, ref) in handles:
            out.append(self._get(ref, k, e))
        return out

    def _get(self, ref, k: int, epoch: int | None):
        from ray.exceptions import RayActorError, RayTaskError

        try:
            return self.ray.get(ref)
        except RayActorError as e:
            # epochs are pipelined: the first lost result names the epoch the actor died in
            when = f" during epoch {epoch}" if epoch is not None else " while finishing"
            raise SimulationError(f"node {k} (Ray actor on worker {self.where[k]}) died{when}; "
                                  f"the run is abandoned, no partial summary is written ({type(e).__name__})") from None
        except RayTaskError as e:
            cause = e.cause if getattr(e, "cause", None) is not None else e
            when = f" during epoch {epoch}" if epoch is not None else " while finishing"
            raise SimulationError(f"node {k} failed{when}: {cause}") from None

    def finish(self) -> list:
        refs = [(k, self.actors[self.where[k]].finish.remote(k)) for k in range(len(self.where))]
        return [self._get(r, k, None) for k, r in refs]

    def close(self):
        for a in self.actors:
            try:
                self.ray.kill(a)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.actors = []
