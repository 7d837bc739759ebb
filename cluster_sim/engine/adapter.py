"""A policy's Python side on the compiled engine: the fixed set of calls :class:`CompiledNode` makes
to the policy between kernel calls, and the defaults (LRU's: no arrays of its own, LRU's counters).

The kernels of a policy (``policies/<name>/kernels.py``) are its hooks inside a request
(:mod:`cluster_sim.engine.hooks`); this is what surrounds them: the policy's meta slots and arrays
(``PX`` segments, ``FX``), the growth it asks for between requests, what it needs before a call, its
counters. A policy with arrays or counters of its own puts a subclass named ``Adapter`` in
``policies/<name>/engine.py`` (or a function ``adapter(params)`` returning the class, where its
parameters pick one); the node finds it through the registry (:meth:`Policy.engine_adapter`) and
names no policy itself. A policy without one runs with :class:`Adapter` as it stands.

An adapter is made per node, after the node's core slots are set and before its state is built:
``self.node`` is the :class:`~cluster_sim.engine.compiled.CompiledNode` (its ``S``, ``J`` (the
kernels' names), ``params``, ``model``, ``hw``, ``caps``, ``n_chunks``, ``ct``, ``cost``; its segment
helpers ``seg`` / ``repack`` and ``heaps``).
"""
from __future__ import annotations

import numpy as np

__all__ = ["Adapter", "SetupContext", "tally", "real_setting"]


class SetupContext:
    """What the node has derived when it sets its policy up: ``U`` chunks, ``fab`` an FA copy's bytes,
    ``sb`` STATE bytes by depth (``sb_seen`` those of depths the trace has), ``has_state``, ``maxd`` the
    deepest chunk, ``caps`` the tiers' bytes, ``lo`` the least payload size, ``bound`` the most payloads
    each tier may hold during a request."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def tally(K) -> dict:
    """The counts of the engine's victim tally (the walks that decide per victim: ``_jit.PK_*``), by
    the names the interpreted ``VictimTally`` reports them."""
    from . import _jit as J
    return {"dram_victims_written": K[J.PK_WRITTEN], "dram_victims_written_bytes": K[J.PK_WRITTEN_B],
            "dram_victims_on_ssd": K[J.PK_ON_SSD], "dram_victims_dropped": K[J.PK_DROPPED],
            "dram_victims_dropped_bytes": K[J.PK_DROPPED_B], "forced_writes": K[J.PK_FORCED_N],
            "forced_write_bytes": K[J.PK_FORCED_B], "ssd_victims": K[J.PK_SSD_VICTIMS]}


class Adapter:
    """The default: LRU's. Override what the policy needs; every method is called by the node only."""

    #: True: the DRAM and SSD candidate queues are the policy's own (its ``select`` hook, or heaps it
    #: keeps), so no walker holds the touch log there (``M_KEYED``)
    keyed = False
    #: True: the policy reads the requests' arrival times (``replay_raw`` refuses None)
    needs_arrival = False
    #: the policy's names of the engine's free segments (``{"LK": "X0"}``: its layout.py's SEGMENT_NAMES)
    segment_names: dict = {}

    def __init__(self, node):
        self.node = node

    @classmethod
    def warm_up_setting(cls, params):
        """The (model, hardware) the warm-up (``build._warm_up``) compiles this policy's kernels with,
        or None for the engine's toy setting. A policy whose setup reads the cost model returns a real
        one (``build.real_setting()``)."""
        return None

    # ---- setup (once, in this order)
    def setup(self, M: np.ndarray, ctx: SetupContext) -> None:
        """Set the policy's meta slots (``M[J.M_*]``) from its parameters."""

    def segments(self, ctx: SetupContext) -> dict:
        """The policy's ``PX`` segments (names of ``CompiledNode.SEGMENTS``) with their first contents."""
        return {}

    def floats(self, ctx: SetupContext) -> np.ndarray | None:
        """The policy's ``FX`` (float64), or None for one unused slot."""
        return None

    def arrays(self, ctx: SetupContext) -> dict | None:
        """After the state is built: ``{"PX": ..., "FX": ...}`` to replace it with arrays laid out by
        the policy itself (no segments), or None."""
        return None

    # ---- each call of replay_raw
    def before_replay(self, offsets, idx, reqs, R) -> None:
        """Checks and per-request inputs before the kernel runs requests ``idx`` (``reqs``: the trace's
        per-request columns, ``category`` / ``turn`` / ``session`` / ``agent`` / ``stop``, each or None;
        ``R``: the rows the kernel fills, whose input columns may be written here)."""

    def run(self, offsets, idx, counted, arrival, reqs, R) -> None:
        """Run the kernel over requests ``idx``: by default the node's loop (kernel, growth, kernel ...)."""
        self.node.replay_rows(offsets, idx, counted, arrival, R)

    def after_call(self, offsets, ids) -> None:
        """Requests ``ids`` were processed by one kernel call."""

    def grow(self, g: int) -> None:
        """Room or work the kernel asked for between requests, in ``g`` (bits of ``M_GROW``) beyond the
        engine's own (touch log, heaps, event log, the shared ``AQ`` / ``OUT`` segments)."""

    # ---- hindsight policies (``needs_future``)
    def hindsight(self, trace) -> None:
        """At the first replay: take the node's future stream (``node.future_idx``) and run any passes."""

    def set_future(self, offsets, flat, tables=None):
        raise NotImplementedError(f"policy {self.node.policy_name!r} takes no future stream")

    # ---- results
    def counters(self) -> dict:
        """The policy's counters, as its interpreted ``counters()`` reports them."""
        from . import _jit as J
        K = self.node.S.K.tolist()
        return {"dram_victims_demoted": K[J.K_DRAM_DEMOTED], "dram_victims_dropped": K[J.K_DRAM_DROPPED]}


def real_setting():
    """A hybrid model and a hardware of a few of its payloads per tier, with one-token chunks (the
    warm-up of a policy whose setup reads the cost model)."""
    import dataclasses
    from types import SimpleNamespace

    from ..model import load_model
    model = dataclasses.replace(load_model("qwen3_next_80b_a3b"), state_checkpoints="every_chunk")
    fab = int(model.fa_bytes(1))
    sb = int(model.state_bytes_array(np.array([1]))[0])
    u = max(fab, sb)
    # the fields CostModel.of and a policy's own setup read (the engine sits below the settings' schema)
    ssd = SimpleNamespace(ftl="ideal", dwpd=1.0, waf=1.0, warranty_years=5.0)
    hw = SimpleNamespace(hbm_cache_bytes=2 * u, dram_bytes=3 * u, ssd_bytes=6 * u, ssd=ssd, gpus_per_node=8,
                         gpu_flops=1e15, mfu=0.5, gpu_usd_per_hour=2.0, host_link_bytes_per_s=5e10,
                         ssd_read_bytes_per_s=1e10, ssd_read_latency_s=1e-4, ssd_write_bytes_per_s=5e9,
                         tbw_bytes=1e16, ssd_price_usd=1000.0)
    return model, hw
