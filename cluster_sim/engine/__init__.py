"""The compiled request-step engine (numba): a node's whole request stream in one call.

:class:`cluster_sim.node.NodeSim` is the executable reference (``cache.engine=python``); this
engine (``cache.engine=numba``) moves the same bytes with the same rules over flat arrays, so
every summary figure but the ``sim_*`` timings is identical (tests/test_engine.py). The kernels
are in :mod:`cluster_sim.engine._jit`; this module is the thin Python side: it builds the
arrays, calls the kernel per batch of requests, grows the touch log and candidate heaps when
the kernel asks, and prices each request with the node's :class:`~cluster_sim.cost.CostModel`
(recompute FLOPs, load latency, FCFS time to first token) after the kernel said what it
served: prices are Python floats computed by the very functions the reference calls.

**One constrained victim walk.** ``_jit._walk`` is the only victim selection. It takes a tier's
*candidate queue* and an *action* (the policy's admission rule for the victims: demote to the
next tier, i.e. write it to the SSD unless a valid copy is there, or drop) and enforces, for
every policy alike:

* pins (the current request's payloads are never victims);
* leaf-first within the tier (an FA copy with descendants left in the tier is passed over);
* chain credits (choosing a leaf credits its nearest ancestor in the tier with its whole
  tier-subtree, so an ancestor whose descendants are all chosen becomes a leaf in the same walk;
  the same across tiers for prefix closure of a dropped last copy);
* atomic undo (a walk that cannot free what was asked chooses nothing and puts every
  candidate back);
* the shortfall (a failed walk says how many bytes it lacked, so the node trims the request's
  new payloads by that much at once).

The overflow cascade around it (HBM -> DRAM -> SSD demotions, the undo of a demotion the
lower tier could not absorb, trimming a request's own payloads deepest first) is written once
too. A policy supplies only its hooks (:mod:`cluster_sim.engine.hooks`: its ordering of candidates,
its admission rule, what it hears of entries, leaves and accesses, and, where it has one, its own
selection), in ``policies/<name>/kernels.py``; every hook it does not define is the engine's default,
which is LRU (the candidate queue is the touch log, the logical-clock stamp of the last touch,
with a heap for copies that enter a tier after the walker passed their stamp). The hooks are chosen
when a kernel is typed, from the type of the policy's kernel set in the state (decision 156): a run
compiles the engine for its own policy only. The built-in policies compiled (``SUPPORTED_POLICIES``)
report their counters under the interpreted ``counters()`` names (docs/decisions.md 83-86). A policy
of a plugin (an entry point in ``cluster_sim.policies``) with a ``kernels`` module beside it is
compiled the same way, on the engine's own state (README "Your own policy").

The greedy flash translation layer (``hardware.ssd.ftl=greedy``) consumes each SSD write and trim in
order: the kernel logs them (``S.elog``, in the interpreted node's order) and this side hands them to the
node's :class:`~cluster_sim.ftl.GreedyFTL` between requests (decision 159).

What the compiled engine does not model yet falls back to the interpreted node under
``cache.engine=auto`` and is an error under ``cache.engine=numba`` (:func:`resolve`): policies
without kernels (or settings of theirs the kernels do not cover) and ``fleet.sync=kv_events``
(stored / removed chunk events for the router) — docs/decisions.md 67-69.
"""
from __future__ import annotations

import contextlib
import math
import sys
import time
from collections.abc import Mapping
from types import SimpleNamespace
from pathlib import Path

import numpy as np

from ..cache.state import DRAM, HBM, NO_TIER, SSD
from ..cost import CostModel
from ..errors import ConfigError
from ..metrics import NodeStats

__all__ = ["ENGINES", "SUPPORTED_POLICIES", "PARTLY_COMPILED", "CompiledNode", "resolve", "supports", "numba_available",
           "ensure_compiled", "build_lock_path", "kernel_digest", "digest_path", "remove_stale_kernels",
           "KERNEL_SOURCES", "compile_notice", "interpreted_first_run", "small_run_limit"]

ENGINES = ("auto", "numba", "python")
SUPPORTED_POLICIES = ("lru", "oracle_admission", "write_through", "write_through_selective", "lru_k", "hot_prefix",
                      "dynamic_random", "oracle", "workload_aware", "marconi")
#: policies compiled in some settings only (not their defaults): a compiled setting of each, as
#: parameter values (the warm-up and the identity tests run them); ``policy_unsupported`` says which
#: settings are compiled, and every other one stays interpreted (decisions 134-136)
PARTLY_COMPILED = {"gandalf": ({"placement": "strict"}, {"reuse": "rate"}, {"reuse": "population"}, {})}


_MODES = {"last": 0, "last_and_branch": 1, "every_chunk": 2}
_TIER_KEYS = ("hbm", "dram", "ssd")
#: a fresh compile of one policy's kernel set (_warm_up) on the 2-core machines here: lru 61-67 s
#: (scripts/bench_compile.py, 2026-12-07); every set one after another in one process, about 18 min
#: (the single build of every policy at once took 150-450 s before decision 156)
EXPECTED_COMPILE_S = "60-300"


def numba_available() -> tuple[bool, str | None]:
    """(True, None) when numba imports, else (False, the reason)."""
    try:
        import numba  # noqa: F401
    except ImportError as e:          # pragma: no cover - numba is a dependency
        return False, str(e)
    return True, None


def _params_of(policy: str, params):
    from ..policies.base import parse_params
    if params is None or isinstance(params, Mapping):
        return parse_params(policy, dict(params or {}))
    return params


def policy_unsupported(policy: str, params=None) -> str | None:
    """None when ``policy`` with these parameters (its ``Params`` instance, a mapping, or None for
    the defaults) is compiled exactly, else why not (one phrase). The policy says so itself
    (:meth:`Policy.compiled_unsupported`: a kernels module beside it, and the settings its kernels
    cannot make bit-identical, docs/decisions.md 101-104); the engine keeps no list of them."""
    from ..policies.base import policy_class
    return policy_class(policy).compiled_unsupported(_params_of(policy, params))


def supports(policy: str, hardware_list, kv_events: bool, params=None) -> str | None:
    """None when the compiled engine can run this setting, else why not (one phrase). ``params``:
    the policy's parameters (None: its defaults); some settings of a compiled policy are not."""
    why = policy_unsupported(policy, params)
    if why is not None:
        return why
    return None


def resolve(engine: str, policy: str, hardware_list, kv_events: bool, params=None) -> str:
    """The engine a run uses: ``numba`` or ``python``. ``auto`` takes numba when it imports and
    the setting (the policy with ``params``, None: its defaults) is supported; ``numba`` raises
    :class:`ConfigError` (one line) when it cannot."""
    if engine not in ENGINES:
        raise ConfigError("cache.engine", f"must be one of {', '.join(ENGINES)}, got {engine!r}")
    if engine == "python":
        return "python"
    ok, err = numba_available()
    why = None if ok else f"numba is not available ({err})"
    if why is None:
        why = supports(policy, hardware_list, kv_events, params)
    if why is None:
        return "numba"
    if engine == "numba":
        raise ConfigError("cache.engine", f"numba cannot run this setting: {why}; use cache.engine=auto or python")
    return "python"


#: the engine core's sources: every kernel set's digest covers them (the files its kernels compile
#: from besides the policy's own folder)
CORE_SOURCES = ("engine/_jit.py", "engine/layout.py", "engine/queue.py", "engine/residency.py", "engine/walk.py",
                "engine/cascade.py", "engine/step.py", "engine/hooks.py", "_nrt.py", "_ftl_ops.py", "cache/state.py",
                "policies/_gandalf_jit.py", "policies/_reuse_jit.py", "policies/_marconi_jit.py")


def kernels_of(policy: str, params=None):
    """The kernel set (:class:`hooks.Kernels`) that runs ``policy`` with ``params`` (its ``Params``,
    a mapping, or None for its defaults): the policy's kernel module, its digest over the engine
    core's sources and every source file of the policy's folder. A policy edited gets another
    digest, so its kernels are compiled again, and only its."""
    from ..policies.base import policy_class
    from . import hooks

    p = _params_of(policy, params)
    module = policy_class(policy).kernels_module(p)
    if module is None:
        raise ConfigError("cache.engine", f"policy {policy!r} has no compiled kernels (no kernels module)")
    k = _KSETS.get(module)
    if k is None:
        k = _KSETS[module] = hooks.Kernels(".".join(module.rsplit(".", 2)[-2:]), module,
                                           hooks.source_digest(kernel_sources(module)))
    return k


def kernel_sources(module: str) -> list[Path]:
    """The files a kernel module's digest covers: the engine core's (:data:`CORE_SOURCES`) and every
    ``.py`` file of the module's own folder (the policy's), and no other policy's."""
    import importlib
    root = Path(__file__).resolve().parent.parent
    folder = Path(importlib.import_module(module).__file__).resolve().parent
    return [root / rel for rel in CORE_SOURCES] + sorted(folder.glob("*.py"))


_KSETS: dict = {}


def compiled_settings() -> list[tuple[str, dict | None]]:
    """Every compiled setting: (policy, parameters or None for its defaults)."""
    return [(p, None) for p in SUPPORTED_POLICIES] + [(p, s) for p, ss in PARTLY_COMPILED.items() for s in ss]


def _kernel_sets(settings) -> list:
    """The distinct kernel sets of ``settings`` ((policy, params) pairs; None: every compiled one)."""
    out = {}
    for policy, params in (compiled_settings() if settings is None else settings):
        k = kernels_of(policy, params)
        out.setdefault((k.name, k.digest), (k, policy, params))
    return list(out.values())


def _built_path(k) -> Path:
    """The record that kernel set ``k`` was built (beside the build lock, named after this package's
    location, the set and its digest)."""
    return build_lock_path().with_name(f"cluster_sim-kernels-{_location_tag()}-{k.name}-{k.digest[:16]}.ok")


def _cached(settings=None) -> bool:
    """Whether the kernels of ``settings`` (None: every compiled setting) are built, from the sources
    installed now, and the shared helper kernels too (:func:`kernel_digest`)."""
    if _recorded_digest(digest_path()) != kernel_digest():
        return False
    return all(_built_path(k).exists() for k, _, _ in _kernel_sets(settings))


#: The shared helper kernels' sources (package-relative): kernels that do not take the engine state,
#: so their cache entries carry no kernel set's digest. numba keys each function's cache on the
#: content of its own file only, so a change to a helper in another of these files would leave
#: their cached callers valid in numba's eyes and stale in fact (decision 138): their digest is
#: recorded beside the build, and every engine cache is removed before a build of other sources.
#: (Kernels that take the state are keyed by their kernel set's digest: hooks.Kernels.)
KERNEL_SOURCES = ("policies/_gandalf_jit.py", "policies/_reuse_jit.py", "_nrt.py", "cache/state.py",
                  "policies/marconi/tree.py", "policies/_marconi_jit.py")


def kernel_digest(root: Path | None = None, sources=KERNEL_SOURCES) -> str:
    """SHA-1 of :data:`KERNEL_SOURCES` (names and contents) under the package folder ``root``."""
    import hashlib

    root = Path(__file__).resolve().parent.parent if root is None else Path(root)
    h = hashlib.sha1()
    for rel in sources:
        h.update(rel.encode() + b"\0")
        h.update((root / rel).read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def digest_path() -> Path:
    """Where the digest of the sources of the last build is recorded: beside the build lock, named
    after this package's location (checkouts sharing a ``$NUMBA_CACHE_DIR`` keep theirs apart)."""
    return build_lock_path().with_name(f"cluster_sim-kernels-{_location_tag()}.sha1")


def _location_tag() -> str:
    """A short name for this package's location (its folder's SHA-1, 12 hex digits)."""
    import hashlib

    return hashlib.sha1(str(Path(__file__).resolve()).encode()).hexdigest()[:12]


def _recorded_digest(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _kernel_cache_dirs() -> dict[str, Path]:
    """numba's cache folder of each kernel module, by the file stem its cache files start with."""
    from ..cache import state
    from ..policies import _gandalf_jit as GJ, _reuse_jit as RJ
    from ..policies.marconi import tree as MC

    out = {}
    from . import step
    for stem in ("_jit", "layout", "queue", "residency", "walk", "cascade"):      # the core's modules: one folder
        path = getattr(getattr(step.replay, "_cache", None), "_cache_path", None)
        if path:
            out[stem] = Path(path)
    for stem, d in (("step", step.replay), ("_gandalf_jit", GJ.select_dram), ("_reuse_jit", RJ.tick),
                    ("state", state._leaf_events_kernel()), ("tree", MC.mc_walk)):
        cache = getattr(d, "_cache", None)
        path = getattr(cache, "_cache_path", None)
        if path:
            out[stem] = Path(path)
    return out


def remove_stale_kernels(dirs: dict[str, Path], recorded: str | None, digest: str) -> list[Path]:
    """When ``recorded`` (the digest of the last build's sources) is not ``digest``, remove numba's
    cache files (``<stem>.*.nbi`` / ``.nbc``) of every kernel module in ``dirs``; returns them."""
    if recorded == digest:
        return []
    gone = []
    for stem, folder in dirs.items():
        for ext in ("nbi", "nbc"):
            for f in folder.glob(f"{stem}.*.{ext}"):
                try:
                    f.unlink()
                    gone.append(f)
                except OSError:
                    pass
    return gone


def compile_notice(settings=None) -> str | None:
    """The one-line notice to print before the kernels of ``settings`` ((policy, params) pairs;
    None: every compiled setting) are compiled, or None if they are cached."""
    if _cached(settings):
        return None
    names = sorted({k.name for k, _, _ in _kernel_sets(settings)})
    what = "every policy" if settings is None else ", ".join(names)
    return (f"cluster_sim: compiling the request-step engine for {what} (numba; once per install and "
            f"policy, about {EXPECTED_COMPILE_S} s)")


_READY: set = set()      # the kernel sets (name, digest) this process has loaded

#: environment variable: the most chunk references a run may have to run interpreted under
#: ``cache.engine=auto`` while the kernels are not built (0: never; decision 120)
SMALL_RUN_ENV = "CLUSTER_SIM_SMALL_RUN_REFS"
SMALL_RUN_REFS = 500_000


def small_run_limit() -> int:
    """:data:`SMALL_RUN_REFS`, or the integer in ``$CLUSTER_SIM_SMALL_RUN_REFS``."""
    import os

    raw = os.environ.get(SMALL_RUN_ENV)
    if raw is None or not raw.strip():
        return SMALL_RUN_REFS
    try:
        v = int(raw.strip().replace("_", ""))
    except ValueError:
        v = -1
    if v < 0:
        raise ConfigError(SMALL_RUN_ENV, f"must be a non-negative whole number of chunk references, got {raw!r}")
    return v


def interpreted_first_run(chunk_refs: int, settings=None) -> str | None:
    """Under ``cache.engine=auto``, before the kernels are built: the one-line notice to print
    when a run of ``chunk_refs`` chunk references is small enough to run interpreted (the same
    results, in a fraction of the compile time), else None. A larger run, or
    ``cache.engine=numba``, builds the kernels (decision 120)."""
    limit = small_run_limit()
    if chunk_refs > limit or _cached(settings):
        return None
    return (f"cluster_sim: the compiled engine is not built yet (numba, about {EXPECTED_COMPILE_S} s, once per "
            f"install), so this small run ({chunk_refs:,} chunk references) runs interpreted, with the same "
            f"results; a run of more than {limit:,} references, or cache.engine=numba, builds it")


def ensure_compiled(stream=None, settings=None) -> float:
    """Compile (or load from numba's cache) the kernels of ``settings`` ((policy, params) pairs; None:
    every compiled setting) with the types a run uses, printing :func:`compile_notice` first when
    compiling. Returns the seconds spent building a set, or waiting for another process's build of
    it (0.0 when every set was built already: loading from the cache is not counted). A run calls
    this before its clock starts, so compilation never counts in ``sim_wall_s``; it reports these
    seconds as ``run.jit_compile_s``.

    One build of a kernel set at a time per cache (decision 137): a process that finds a set unbuilt
    builds it under that set's exclusive lock; any other process needing it (a sweep's next point, a
    fleet's worker, a test worker) waits for that build and then loads it. Different sets build in
    parallel. Every build holds the cache's lock shared; the shared helpers' sources changing (an
    update, an edit) is handled under it exclusively: their caches, and every record, are removed."""
    todo = [x for x in _kernel_sets(settings) if (x[0].name, x[0].digest) not in _READY]
    if not todo:
        return 0.0
    spent = 0.0
    digest = kernel_digest()
    if _recorded_digest(digest_path()) != digest:
        with _build_lock(exclusive=True):
            if _recorded_digest(digest_path()) != digest:
                remove_stale_kernels(_kernel_cache_dirs(), _recorded_digest(digest_path()), digest)
                for f in build_lock_path().parent.glob(f"cluster_sim-kernels-{_location_tag()}-*.ok"):
                    with contextlib.suppress(OSError):
                        f.unlink()
                with contextlib.suppress(OSError):
                    digest_path().write_text(digest + "\n")
    with _build_lock(exclusive=False):
        for k, policy, params in todo:
            built = _built_path(k).exists()
            t0 = time.perf_counter()
            with _build_lock(exclusive=not built, name=k.name):
                if not _built_path(k).exists():
                    note = compile_notice([(policy, params)])
                    if note:
                        print(note, file=stream if stream is not None else sys.stderr, flush=True)
                _warm_up(policy, params)
                with contextlib.suppress(OSError):
                    _built_path(k).write_text(k.module + "\n")
            if not built:
                spent += time.perf_counter() - t0
            _READY.add((k.name, k.digest))
    return spent


def build_lock_path():
    """The file whose exclusive lock (``flock``) a process holds while it builds the kernels: in
    ``$NUMBA_CACHE_DIR`` when set, else beside numba's default cache (``__pycache__``), else (not
    writable) in the temporary folder, named after this package's location."""
    import os
    import tempfile

    root = os.environ.get("NUMBA_CACHE_DIR")
    folder = Path(root) if root else Path(__file__).resolve().parent / "__pycache__"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if os.access(folder, os.W_OK):
            return folder / "cluster_sim-build.lock"
    except OSError:
        pass
    return Path(tempfile.gettempdir()) / f"cluster_sim-build-{_location_tag()}.lock"


def set_lock_path(name: str) -> Path:
    """The lock a process holds exclusively while it builds kernel set ``name`` (beside
    :func:`build_lock_path`)."""
    path = build_lock_path()
    return path.with_name(f"{path.stem}-{name}.lock")


@contextlib.contextmanager
def _build_lock(exclusive: bool, name: str | None = None):
    """Hold :func:`build_lock_path`'s lock (``name``: kernel set ``name``'s, beside it), exclusive (a
    build) or shared (a load), blocking while another process holds it exclusively. No lock where
    ``fcntl`` is missing (Windows) or the file cannot be opened: each process then builds on its own,
    as numba alone would."""
    try:
        import fcntl
        fh = open(build_lock_path() if name is None else set_lock_path(name), "a+b")
    except (ImportError, OSError):
        yield
        return
    try:
        fcntl.flock(fh, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        fh.close()          # closing releases the lock


def _warm_up(policy: str, params=None) -> None:
    """Run the kernels of ``policy`` with ``params`` once on a three-request branch (every tier, STATE
    payloads, trimming), so that no specialisation is compiled after a run's clock starts."""
    from types import SimpleNamespace

    parent = np.array([-1, 0, 1, 1], dtype=np.int32)
    depth = np.array([1, 2, 3, 3], dtype=np.int32)
    flat = np.array([0, 1, 2, 0, 1, 3, 0, 1, 2], dtype=np.int32)
    anchor = np.array([0, 1, 2, 5], dtype=np.int32)
    offsets = np.array([0, 3, 6, 9], dtype=np.int64)
    ssd = SimpleNamespace(ftl="ideal", dwpd=1.0)
    hw = SimpleNamespace(hbm_cache_bytes=100, dram_bytes=150, ssd_bytes=300, ssd=ssd, ssd_write_bytes_per_s=1e9)
    model = SimpleNamespace(has_state=True, state_checkpoints="every_chunk", fa_bytes=lambda ct: 50,
                            state_bytes_array=lambda pos: np.full(len(pos), 20, dtype=np.int64))
    idx = np.arange(3, dtype=np.int64)
    m, h = model, hw
    p = _params_of(policy, params)
    if (policy == "gandalf" and p.placement != "strict") or policy == "marconi":
        m, h = _real_setting()          # its policy object prices with the cost model (marconi: FLOPs)
    import warnings

    from numba.core.errors import NumbaIRAssumptionWarning
    with warnings.catch_warnings():
        # numba's own pedantic check on the IR of an inlined hook (a numba note, not a fault of the
        # kernels: the digests are unchanged); a user would read it as an error
        warnings.simplefilter("ignore", NumbaIRAssumptionWarning)
        node = CompiledNode(parent, depth, anchor, flat, 1, m, h, policy, cost=False, params=params)
        if node.needs_future:
            node.set_future(offsets, flat)
            node.set_labels(np.array([7], dtype=np.int64), np.zeros(1, dtype=np.uint8))
            node.S.M[node.J.M_LOG_OUT] = 1
        node.replay_raw(offsets, idx, np.ones(3, dtype=bool), np.array([0.0, 1.0, 100.0]))
        node.finish()          # its kernels too: loading them from the cache took 60 ms in a fresh worker


def _real_setting():
    """A hybrid model and a hardware of a few of its payloads per tier, with one-token chunks (the
    warm-up of a policy whose setup reads the cost model)."""
    import dataclasses
    from types import SimpleNamespace

    from ..model import load_model
    model = dataclasses.replace(load_model("qwen3_next_80b_a3b"), state_checkpoints="every_chunk")
    fab = int(model.fa_bytes(1))
    sb = int(model.state_bytes_array(np.array([1]))[0])
    u = max(fab, sb)
    # the fields CostModel.of and GandalfPolicy read (the engine sits below the settings' schema)
    ssd = SimpleNamespace(ftl="ideal", dwpd=1.0, waf=1.0, warranty_years=5.0)
    hw = SimpleNamespace(hbm_cache_bytes=2 * u, dram_bytes=3 * u, ssd_bytes=6 * u, ssd=ssd, gpus_per_node=8,
                         gpu_flops=1e15, mfu=0.5, gpu_usd_per_hour=2.0, host_link_bytes_per_s=5e10,
                         ssd_read_bytes_per_s=1e10, ssd_read_latency_s=1e-4, ssd_write_bytes_per_s=5e9,
                         tbw_bytes=1e16, ssd_price_usd=1000.0)
    return model, hw


def _last_per_key(keys: np.ndarray, vals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted unique keys, the value last given to each), as successive ``dict`` updates leave it."""
    if not len(keys):
        return keys.astype(np.int64), vals.astype(np.uint8)
    u, first_rev = np.unique(keys[::-1], return_index=True)
    return u.astype(np.int64), vals[::-1][first_rev].astype(np.uint8)


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

    def __init__(self, chunk_parent, chunk_depth, chunk_anchor, flat, chunk_tokens: int, model, hardware,
                 policy: str, *, node_index: int = 0, cost=True, log_capacity: int = 1 << 14,
                 heap_capacity: int = 1024, params=None, future_idx=None, rng=None,
                 replays_per_day_scale: float = 1.0, policy_obj=None, ftl: bool = True,
                 record_events: bool = False):
        """``params``: the policy's parameters (its ``Params`` instance or a mapping; defaults when
        None). ``future_idx``: the trace requests this node will be given, in order, for the
        hindsight policy (``oracle_admission``): its passes run at the first :meth:`replay`.
        ``rng``: the node's random stream (``fleet.node_rng``; ``dynamic_random`` draws from it),
        ``replays_per_day_scale``: the workload's, for ``dynamic_random``'s default budget.
        ``policy_obj``: the node's policy object, unbound, when the caller made one (gandalf binds
        it to derive its arrays instead of making another: one policy per node). ``ftl``: False leaves
        out the flash translation layer of ``hardware.ssd.ftl=greedy`` (a hindsight pass, whose wear
        nothing reads). ``record_events``: keep the chunks stored and removed for a KV-aware router
        (``fleet.sync=kv_events``; :meth:`take_events`)."""
        from . import _jit as J

        from ..policies.base import parse_params, policy_class
        if params is None or isinstance(params, Mapping):
            params = parse_params(policy, dict(params or {}))
        why = policy_unsupported(policy, params)
        if why is not None:
            raise ConfigError("cache.engine", f"numba cannot run this setting: {why}")
        self.params = params
        self._policy_obj = policy_obj
        self._args = (chunk_parent, chunk_depth, chunk_anchor, flat, chunk_tokens, model, hardware, policy)
        self._kw = {"node_index": node_index, "log_capacity": log_capacity, "heap_capacity": heap_capacity,
                    "params": params, "replays_per_day_scale": replays_per_day_scale}
        self.rpd_scale = replays_per_day_scale
        self.future_idx = None if future_idx is None else np.asarray(future_idx, dtype=np.int64)
        self.needs_future = bool(policy_class(policy).needs_future)
        self._passes_pending = self.needs_future
        self.pk_extra: dict = {}
        self.S_room = 0
        self._has_future = False
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
        M = np.zeros(J.N_META, dtype=np.int64)
        M[J.M_CAP0:J.M_CAP0 + 3] = caps
        M[J.M_ENTRY] = self.entry
        M[J.M_FAB] = fab
        M[J.M_HAS_STATE] = int(has_state)
        M[J.M_MODE] = _MODES[model.state_checkpoints] if has_state else 0
        M[J.M_SHORT] = -1
        M[J.M_POLICY] = {"lru": J.POLICY_LRU, "oracle_admission": J.POLICY_ORACLE_ADM,
                         "write_through": J.POLICY_WRITE_THROUGH,
                         "write_through_selective": J.POLICY_WRITE_THROUGH, "lru_k": J.POLICY_LRU_K,
                         "hot_prefix": J.POLICY_HOT_PREFIX, "dynamic_random": J.POLICY_DYNAMIC_RANDOM,
                         "oracle": J.POLICY_ORACLE, "workload_aware": J.POLICY_WORKLOAD_AWARE,
                         "gandalf": J.POLICY_GANDALF_STRICT, "marconi": J.POLICY_MARCONI}.get(policy, J.POLICY_LRU)
        self.gd_kernels = None       # gandalf (capacity-aware): policies._gandalf_jit
        if policy == "gandalf" and params.placement != "strict":
            M[J.M_POLICY] = J.POLICY_GANDALF
            M[J.M_KEYED] = 1          # its DRAM and SSD queues are its own heaps: no walker holds the log
        M[J.M_THRESH] = int(getattr(params, "threshold", 1))
        if policy == "hot_prefix":
            # heat without decay is a whole count, so heat >= f is count >= ceil(f)
            M[J.M_THRESH] = math.ceil(float(params.f))
        if policy == "oracle":
            M[J.M_KEYED] = 1          # its DRAM and SSD queues are keyed by next use (_jit._or_*)
            # the reference orders candidates by (-next use, -size, payload): sizes as ranks,
            # 0 the largest, so that one int64 key orders as its tuples
            distinct = np.unique(np.concatenate([[fab], sb_seen]))[::-1] if has_state else np.array([fab])
            M[J.M_OR_NSZ] = len(distinct)
            rank = {int(v): i for i, v in enumerate(distinct.tolist())}
            M[J.M_OR_FARANK] = rank[fab]
            self._or_szr = np.array([rank.get(int(v), 0) for v in sb.tolist()], dtype=np.int64)
        if policy == "marconi":
            M[J.M_KEYED] = 1          # its DRAM and SSD selections are its own (policies/marconi/tree.py): no walker there
        if policy == "workload_aware":
            M[J.M_KEYED] = 1          # its DRAM and SSD queues are per-category heaps (_jit._wa_*)
            M[J.M_WA_THETA] = int(params.admit_threshold is not None)
            from ..policies.workload_aware import ReuseFits
            self.fits = ReuseFits.for_stream(params, U)
            self._wa_names: dict = {}
        if policy == "lru_k":
            K = int(params.k)
            M[J.M_KEYED] = 1
            M[J.M_LK_K] = K
            M[J.M_LK_Q] = K + J.LK_FIELDS
            M[J.M_GHEAD] = M[J.M_GTAIL] = -1
            M[J.M_CAPP] = sum(caps) // max(fab, 1)
            M[J.M_GHOST_F:J.M_GHOST_F + 1].view(np.float64)[0] = float(params.ghost)
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
        max_m = maxd
        bound = [min(2 * U + 1, (c + (2 * max_m + 2) * hi) // lo + 64) if c > 0 else 4 for c in caps]
        hcap = np.array([min(b, max(int(heap_capacity), 4 * max_m + 64)) if c > 0 else 4 for b, c in zip(bound, caps)],
                        dtype=np.int64)
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
            wfront=np.full(3, -1, dtype=np.int64), **self._policy_arrays(U, bound), pk=kernels_of(policy, params),
            FX=self._floats(hardware, lo), elog=np.zeros((1 << 14 if self.ftl is not None or record_events else 0, 4), dtype=np.int64),
            rng=rng if rng is not None else np.random.default_rng(0))
        M[J.M_DR_LO] = lo
        M[J.M_DR_CAP] = len(self.S.FX)
        M[J.M_WA_FIT] = J.FXW_LT + 2 * U
        self._seg_len = {k: 0 for k in self._SEGMENTS}
        self._repack(**self._seg_init)
        del self._seg_init
        if M[J.M_POLICY] == J.POLICY_GANDALF:
            # its arrays replace PX and FX (it has no other segments: every M_O_* offset stays 0)
            self.S = self.S._replace(**self._gandalf_arrays(sb))
            M[J.M_DR_CAP] = len(self.S.FX)
        if policy == "marconi":
            # its arrays replace PX and FX too (policies/marconi/tree.py; no other segment)
            self.S = self.S._replace(**self._marconi_arrays())
            M[J.M_DR_CAP] = len(self.S.FX)
        self.stats = NodeStats()
        self.busy_until = 0.0
        self._lat_parts: list = []       # counted requests' latency and TTFT, one array per call
        self._ttft_parts: list = []

    _out_room = None        # tests: the outcome log's room per request (None: a tier's worth)
    _gd_rows = 1024         # gandalf: the first rows of its heaps' tables (tests: fewer, to grow them)
    _gd_est = None          # gandalf, reuse=hints: its estimator (policies.reuse.CompiledHintsReuse)
    # the policy's segments of PX, in order, and their offsets in M
    _SEGMENTS = ("A", "B", "NFA", "NST", "W", "FOFF", "FNFA", "FNST", "LAB", "OUT", "AQ", "LK", "PEND", "DEC", "SU",
                 "FEN", "FK", "G", "SZR", "WQ", "WK", "WC")

    def _policy_arrays(self, U: int, bound: list) -> dict:
        """The policy's part of the state: one int64 array ``PX`` of segments (empty where the
        policy has no use for them): ``A`` per payload (oracle_admission: the admission event of
        its SSD copy, -1 none; write_through: hit_count), ``B`` per payload (write_through: the
        request that asked for its write), ``NFA`` / ``NST`` per chunk (oracle_admission: next use
        of the FA / STATE), ``W`` per chunk (the gated walk's waiting keys), ``FOFF`` / ``FNFA`` /
        ``FNST`` (oracle_admission: the node's stream, next use per reference), ``LAB`` (earlier
        passes' outcomes, sorted ``2 * event + used``), ``OUT`` (this pass's, in order), ``AQ``
        (write_through: SSD writes asked for, in order); hot_prefix: ``A`` its heat (a count),
        ``B`` the request of its last reference; lru_k: ``LK`` a record per payload (HIST(p, 1..K),
        the request of LAST packed with the residency status, ghost-list links, canonical keys in DRAM and in
        the SSD: ``_jit.LK_*``), ``PEND`` the payloads a request referenced while absent;
        dynamic_random: ``A`` the selection that last counted a payload's decision, ``DEC`` the
        decisions of the selection under way (``2 * payload + admitted``); oracle: ``A`` / ``B``
        the key of each payload in the DRAM / SSD queue (-1: not in it), ``FK`` the next use its
        SSD bytes are filed under, ``G`` per chunk the request that last guarded it, ``SZR`` the
        size rank of a STATE by depth, and from :meth:`set_future` ``NFA`` / ``NST``, ``FOFF`` /
        ``FNFA`` / ``FNST``, ``SU`` (the chunk whose STATE each request uses) and ``FEN`` (the
        Fenwick tree of SSD bytes by next use); workload_aware: ``A`` the category of each payload, ``G``
        per chunk the request that last guarded it, ``WQ`` / ``WK`` per tier (DRAM, SSD) the category
        queue a payload is filed in and its key there, ``WC`` the category of each request of a call."""
        J = self.J
        z = np.zeros(0, dtype=np.int64)
        seg = {k: z for k in self._SEGMENTS}
        if self.policy_name == "oracle_admission":
            seg["A"] = np.full(2 * U, -1, dtype=np.int64)
            # copies that may leave the SSD in one request: those it holds, and a request's worth
            self.S_room = int(bound[SSD]) + 64 if self._out_room is None else int(self._out_room)
            seg["OUT"] = np.zeros(2 * self.S_room, dtype=np.int64)
        elif self.policy_name in ("write_through", "write_through_selective"):
            seg["A"] = np.zeros(2 * U, dtype=np.int64)
            seg["B"] = np.full(2 * U, -1, dtype=np.int64)
            seg["W"] = np.full(U, -1, dtype=np.int64)
            # writes asked for in one request step: at most the payloads entering DRAM or reused in
            # it (each once while pending); twice the most seen is kept free before each request
            seg["AQ"] = np.zeros(max(64, int(bound[HBM]) + int(bound[DRAM]) + 64), dtype=np.int64)
        elif self.policy_name == "hot_prefix":
            seg["A"] = np.zeros(2 * U, dtype=np.int64)
            seg["B"] = np.zeros(2 * U, dtype=np.int64)
            seg["W"] = np.full(U, -1, dtype=np.int64)
        elif self.policy_name == "gandalf" and self.params.placement == "strict":
            seg["B"] = np.full(2 * U, -1, dtype=np.int64)     # the request that asked for its SSD write
            seg["G"] = np.full(U, -1, dtype=np.int64)         # STATE demands per chunk (-1: never checkpointed)
            seg["AQ"] = np.zeros(max(64, int(bound[HBM]) + int(bound[DRAM]) + 64), dtype=np.int64)
        elif self.policy_name == "dynamic_random":
            seg["A"] = np.zeros(2 * U, dtype=np.int64)       # the selection that last counted its decision
            seg["W"] = np.full(U, -1, dtype=np.int64)
            seg["DEC"] = np.zeros(1024, dtype=np.int64)       # grown before a request that may need more
        elif self.policy_name == "oracle":
            seg["A"] = np.full(2 * U, -1, dtype=np.int64)
            seg["B"] = np.full(2 * U, -1, dtype=np.int64)
            seg["FK"] = np.full(2 * U, -1, dtype=np.int64)
            seg["G"] = np.full(U, -1, dtype=np.int64)
            seg["SZR"] = self._or_szr
        elif self.policy_name == "workload_aware":
            seg["A"] = np.full(2 * U, -1, dtype=np.int64)
            seg["G"] = np.full(U, -1, dtype=np.int64)
            seg["WQ"] = np.full(4 * U, -1, dtype=np.int64)
            seg["WK"] = np.full(4 * U, -1, dtype=np.int64)
            seg["WC"] = np.zeros(1024, dtype=np.int64)
        elif self.policy_name == "lru_k":
            K = int(self.params.k)
            rec = np.full((2 * U, K + J.LK_FIELDS), -1, dtype=np.int64)
            rec[:, K + J.LK_LS] = J.ST_NONE        # LAST's request 0, status none (packed: _jit.LK_LS)
            seg["LK"] = rec.reshape(-1)
            seg["W"] = np.full(U, -1, dtype=np.int64)
            max_m = int(np.max(self._args[1])) if U else 0
            seg["PEND"] = np.zeros(max_m + 2, dtype=np.int64)
        self._seg_init = seg
        return {"PX": np.zeros(0, dtype=np.int64)}

    def _gandalf_arrays(self, sb: np.ndarray):
        """gandalf (capacity-aware): its interpreted policy, bound to this node's arrays, derives its
        parameters and allocates its kernels' arrays exactly as on the interpreted node; the engine
        then drives those kernels (decision 135)."""
        from types import SimpleNamespace

        from ..policies.gandalf import GandalfPolicy
        J, S = self.J, self.S
        U = self.n_chunks
        size = np.empty(2 * U, dtype=np.int64)
        size[0::2] = int(S.M[J.M_FAB])
        size[1::2] = sb[np.asarray(S.depth)] if bool(self.model.has_state) else int(S.M[J.M_FAB])
        st = SimpleNamespace(res=S.res, size=size, depth=np.asarray(S.depth), parent=np.asarray(S.parent),
                             anchor=np.asarray(S.anchor), flat=np.asarray(S.flat), dcnt=[S.dcnt[0], S.dcnt[1], S.dcnt[2]],
                             dany=S.dany, pin=S.pin, cap=list(self.caps))
        cost = self.cost if self.cost is not None else CostModel.of(self.model, self.hw)
        pol = self._policy_obj if isinstance(self._policy_obj, GandalfPolicy) else GandalfPolicy(self.params)
        self._policy_obj = None
        pol.announce_compile = False           # its kernels are built with the engine's, under its notice
        pol.bind(SimpleNamespace(state=st, hardware=self.hw, model=self.model, chunk_tokens=self.ct, cost=cost))
        if pol._jit is None:
            raise ConfigError("cache.engine", "gandalf on the compiled engine needs numba")
        GJ = pol._jit
        pol._P[GJ.A_CWNOW] = pol._cw(0.0)          # static wear price
        self.gd_kernels = GJ          # (the policy object goes: its arrays are copied below)
        # the SSD plan (SSD victims) and the leaf-event buffer (two per chunk leaving a tier) hold
        # resident payloads only: sized for the tiers full of their smallest payloads plus a request's
        # own, not for every payload; room is checked before each request (GROW_GD, _grow_gandalf_tables)
        lo = max(int(S.M[J.M_DR_LO]), 1)
        maxd = int(np.max(S.depth)) if U else 1
        caps = [int(c) for c in self.caps]
        held = self._gd_held(sum(caps) // lo, maxd)
        ints = {"SBX": pol._C[2], "HITS": pol._hits_a, "SDEM": pol.state_demands, "F": pol._F, "K": pol._K, "G": pol._G,
                "CKV": pol.cand.tup[1], "CMEM": pol.cand.tup[2], "CMETA": pol.cand.tup[3],
                "SKV": pol.ssd_heap.tup[1], "SMEM": pol.ssd_heap.tup[2], "SMETA": pol.ssd_heap.tup[3],
                **{f"TD{i}": a for i, a in enumerate(pol._TD)}, **{f"TS{i}": a for i, a in enumerate(pol._TS)},
                "PLAN": np.zeros(held), "GX": np.zeros(J.N_GX), "CKPT": pol.ckpt_ever,
                "MEND": np.zeros(U), "MGEN": np.zeros(U), "KINDS": np.zeros(2 * held), "NODES": np.zeros(2 * held)}
        ints["GX"][J.GX_PLAN] = -1
        # the heaps' entry tables start with room for half as many rows as the node has chunks (capped
        # by the kernel's room for the heap's tiers full of their smallest payloads: every tier for the
        # SSD heap, the HBM and DRAM for the DRAM heap), so that they seldom grow: a growth rebuilds
        # the whole of FX between requests (about 3 ms a time on Mooncake)
        rows = crows = self._gd_rows
        if rows >= 16:
            most = 2 * (held - 2) + 66
            cmost = 2 * (self._gd_held(sum(caps[:2]) // lo, maxd) - 2) + 66
            rows, crows = max(rows, min(most, U // 2)), max(rows, min(cmost, U // 2))
        floats = {"TF": pol._tf_a, "TL": pol._tl_a, "POPP": pol._popp_a, "CRC": pol._crc_a,
                  "CRCC": pol._crc_cum_a, "EST": pol._E_a, "P": pol._P, "GN": np.zeros(1),
                  # the heaps' entry tables (empty now; room is made before each request: GROW_GD)
                  "CST": np.zeros(3 * crows), "SST": np.zeros(3 * rows)}
        self._gd_est = est = pol.est          # reuse=hints: its estimator (the refit runs on it)
        if est is not None:
            # its estimates stand for the demand statistics: no kernel reads first touches or hit
            # counts under reuse=hints, so none are kept (one slot each; decision 152)
            ints["HITS"] = np.zeros(1)
            floats["TF"] = np.full(1, np.nan)
            GX = ints["GX"]
            GX[J.GX_HINTS] = 1
            GX[J.GX_LAST_REFIT] = -1
            GX[J.GX_FIRST], GX[J.GX_EVERY] = est.first_refit, est.refit_requests
            GX[J.GX_CHUNKS] = pol.objective == "chunks"
            # a request adds at most its path and its thread's previous group (access) and a STATE
            # per chunk (on_insert), in at most five groups, each with one re-evaluation
            maxd = int(np.max(S.depth)) if U else 1
            est._room_need = 3 * maxd + 8
            est._room_groups = 8
            GX[J.GX_ROOMB] = est._room_need
            # room for the node's life, so that growth (a repack of the whole state) stays rare: members
            # (compacted in place by the kernel), groups and re-evaluations, threads
            gmin = max(1024, U // 8)
            est._gmin = gmin
            est.gbuf = np.zeros(max(len(est.gbuf), U), dtype=np.int64)
            est.gs, est.gn, est.gt0 = (np.zeros(gmin, dtype=np.int64), np.full(gmin, -1, dtype=np.int64),
                                       np.zeros(gmin))
            est.evt, est.evg, est.evb = np.zeros(gmin), np.zeros(gmin, dtype=np.int64), np.zeros(gmin, dtype=np.int64)
            est.thr = np.full(4096, -1, dtype=np.int64)
            if self._gd_rows < 16:
                # tests: its buffers start as small as a request allows, to grow on the way (compaction,
                # renumbering, growth) as its heap tables do
                est._gmin = 8
                est.gbuf = np.zeros(est._room_need, dtype=np.int64)
                est.gs, est.gn, est.gt0 = np.zeros(8, dtype=np.int64), np.full(8, -1, dtype=np.int64), np.zeros(8)
                est.evt, est.evg, est.evb = np.zeros(8), np.zeros(8, dtype=np.int64), np.zeros(8, dtype=np.int64)
                est.thr = np.full(1, -1, dtype=np.int64)
            est._room()
            ints.update(self._gd_est_ints(est))
            floats.update(self._gd_est_floats(est))
            rsc = np.zeros(J.N_RSC)
            rsc[J.RS_H] = np.inf
            floats["RSC"] = rsc
            floats["CRCT"] = np.asarray(pol._crc_true_cum, dtype=np.float64)
        if pol.reuse == "population":
            # its windows of references (_jit._gd_population): rows for a few requests, grown between
            # requests (GROW_POP); tests start them at one request's worth
            maxd = int(np.max(S.depth)) if U else 1
            rows = maxd + 2 if self._gd_rows < 16 else max(1024, 4 * maxd)
            nb = J.PQ_BUCKETS + 1
            ints.update(PQ=np.zeros(J.N_PQ), PRC=np.zeros(rows * nb), PUC=np.zeros(rows * nb))
            floats.update(PRT=np.zeros(rows), PUT=np.zeros(rows), PQF=np.full(1, -np.inf))
        PX, FX = self._gd_pack([ints.get(k, ()) for k in J.GI_SEGMENTS], [floats.get(k, ()) for k in J.GF_SEGMENTS])
        if est is not None:
            self._gd_unbind_est()          # (its arrays are copied: views are bound when needed)
        # its arrays are the node's PX and FX (it has no other segments)
        return {"PX": PX, "FX": FX}

    def _gd_pack(self, ints: list, floats: list) -> tuple[np.ndarray, np.ndarray]:
        """Gandalf's PX and FX holding its int segments (each of ``_jit.GI_DTYPES``' type, on a word of
        its own) and its float segments, in ``GI_SEGMENTS`` / ``GF_SEGMENTS`` order."""
        J = self.J
        ip = [np.asarray(x, dtype=J.GI_DTYPES.get(k, "int64")) for k, x in zip(J.GI_SEGMENTS, ints)]
        if any(len(x) and x.dtype != y.dtype and not np.array_equal(x, y)
               for x, y in zip(ip, ints) if isinstance(y, np.ndarray)):
            raise OverflowError("cluster_sim engine: a gandalf value does not fit its segment's type")
        starts, o = [], 8 * J.GI_HEADER
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
        PX[J.GF0:J.GF0 + len(flen) + 1] = np.concatenate([[0], np.cumsum(flen)])
        FX = np.zeros(max(sum(flen), 1), dtype=np.float64)
        for k, x in enumerate(fp):
            FX[PX[J.GF0 + k]:PX[J.GF0 + k + 1]] = x
        return PX, FX

    #: the hints estimator's arrays as Gandalf's segments (segment, attribute): int64, float64, and its
    #: (class, age bin) tables (float64, kept flat)
    _GD_EST_INTS = (("RCLS", "cls"), ("RGRP", "grp"), ("RTOU", "touches"), ("RSUP", "sup"), ("RSTOP", "stop"),
                    ("RSUB", "sub"), ("RTURN", "turn"), ("RBUF", "gbuf"), ("RGS", "gs"), ("RGN", "gn"),
                    ("REVG", "evg"), ("REVB", "evb"), ("RGM", "GM"), ("RTHR", "thr"))
    _GD_EST_FLOATS = (("EST", "E"), ("RSTART", "start"), ("RT0", "gt0"), ("REVT", "evt"))
    _GD_EST_TABLES = (("RD", "D"), ("RCN", "C"), ("RQ", "Q"))

    # ---- marconi (policies/marconi/tree.py)
    _mc_seen = None          # marconi, alpha=auto: (offsets, request ids) replayed until it tunes
    _mc_inp = None           # the trace's input tokens per request (its tuning replays them)

    def _marconi_arrays(self) -> dict:
        """marconi's PX (a header, then its segments: policies/marconi/tree.py) and FX (alpha, the bootstrap
        multiplier, the FLOP parameters of policies._marconi_jit, the efficiency keys per tier)."""
        from ..policies import _marconi_jit as MJ
        from ..policies.marconi import SingleTierMarconi, _FlopModel
        from ..policies.marconi import tree as MC
        p, m, U = self.params, self.model, self.n_chunks
        if not SingleTierMarconi.compiled_ok(SimpleNamespace(model=m)):
            raise ConfigError("cache.engine", "numba cannot run this setting: marconi's FLOP fields of this model "
                              "are not floats (their arithmetic would not be the interpreted policy's)")
        fm = _FlopModel(m, self.ct, bool(p.bug_compatible))
        lens = MC.segment_lengths(U)
        offs, words = MC.layout(U)
        PX = np.zeros(words, dtype=np.int64)
        for k, name in enumerate(MC.SEGMENTS):
            PX[MC.H_O + k] = offs[name]
        PX[MC.N_HEADER - 1] = words
        PI = PX.view(np.int32)

        def seg(name):      # an int32 segment
            a = offs[name]
            return PI[a:a + lens[name]]
        seg("GUARD")[:] = -1
        seg("CPOS")[:] = -1
        seg("ROW")[:] = -1
        if fm.has_state and U:
            par = np.asarray(self.S.parent, dtype=np.int64)
            seg("KO")[:U] = np.argsort(par, kind="stable")
            seg("KS")[:] = np.cumsum(np.bincount(par + 1, minlength=U + 1))
        PX[MC.H_K] = 0 if p.candidates == "all" else max(int(p.candidates) // 2, 1)
        PX[MC.H_SSDON] = int(self.caps[SSD] > 0)
        PX[MC.H_HAS] = int(fm.has_state)
        PX[MC.H_BUG] = int(bool(p.bug_compatible))
        PX[MC.H_AUTO] = int(p.alpha == "auto")
        PX[MC.H_TUNED] = -1
        PX[MC.H_R0] = -1
        PX[MC.H_CT] = self.ct
        PX[MC.H_WIN] = int(m.swa_window)
        PX[MC.H_NMLP] = int(fm.n_mlp)
        PX[MC.H_LSB] = int(m.linear_state_bytes)
        PX[MC.H_SWAKV] = int(m.swa_kv_bytes_per_token)
        PX[MC.H_U] = U
        FX = np.zeros(MC.F_EKEY + 4 * U, dtype=np.float64)
        FX[MC.F_ALPHA] = 0.0 if p.alpha == "auto" else float(p.alpha)
        FX[MC.F_BOOT] = float(p.bootstrap_multiplier)
        P = FX[MC.F_P:MC.F_P + MJ.N_P]
        P[MJ.P_FPT_LMF] = m.flops_per_token + m.linear_mix_flops_per_token
        P[MJ.P_ATTN] = m.attn_flops_per_ctx_token
        P[MJ.P_SWA] = m.swa_flops_per_ctx_token
        P[MJ.P_KVPT] = fm.kvpt
        P[MJ.P_DH] = fm.d_hidden
        self._mc_alpha = 0.0 if p.alpha == "auto" else p.alpha
        self._mc_seen = [] if p.alpha == "auto" else None
        return {"PX": PX, "FX": FX}

    def _mc_tune(self) -> None:
        """``MarconiPolicy._tune`` at the request where its ``tick`` tunes: the requests seen so far
        replayed by its single-tier model (compiled, policies._marconi_jit) for each alpha of the grid."""
        from ..policies.marconi import ALPHA_GRID, SingleTierMarconi
        from ..policies.marconi import tree as MC
        S = self.S
        n = int(S.PX[MC.H_NSEEN])
        if self._mc_inp is None:
            raise RuntimeError("marconi's alpha tuning needs the requests' input tokens (CompiledNode.replay)")
        reqs = []
        for offsets, ids in self._mc_seen:
            for i in ids.tolist():
                reqs.append((np.asarray(S.flat[offsets[i]:offsets[i + 1]], dtype=np.int64), int(self._mc_inp[i])))
        reqs = reqs[:n]
        assert len(reqs) == n, (len(reqs), n)
        st = SimpleNamespace(parent=np.asarray(S.parent, dtype=np.int64), depth=np.asarray(S.depth, dtype=np.int64),
                             anchor=np.asarray(S.anchor, dtype=np.int64), flat=np.asarray(S.flat, dtype=np.int64))
        caps = self.caps
        cap = caps[HBM] + caps[DRAM] if caps[HBM] + caps[DRAM] > 0 else caps[SSD]
        sim = SingleTierMarconi(st, self.model, self.ct, cap, reqs, bug=bool(self.params.bug_compatible))
        savings = sim.savings(ALPHA_GRID)
        best = max(range(len(ALPHA_GRID)), key=lambda i: (savings[i], -i))
        self._mc_alpha = ALPHA_GRID[best]
        S.FX[MC.F_ALPHA] = float(self._mc_alpha)
        S.PX[MC.H_TUNED] = n
        self._mc_seen = None

    def _mc_counters(self) -> dict:
        from ..policies.marconi import tree as MC
        PX, p = self.S.PX, self.params
        d = dict(zip(MC.COUNTER_NAMES, PX[MC.H_C0:MC.H_C0 + len(MC.COUNTER_NAMES)].tolist()))
        d["alpha"] = self._mc_alpha
        d["alpha_auto"] = int(p.alpha == "auto")
        d["alpha_tuned_at_request"] = int(PX[MC.H_TUNED])
        d["bootstrap_r0"] = int(PX[MC.H_R0])
        d["candidates"] = -1 if p.candidates == "all" else p.candidates
        d["bug_compatible"] = int(bool(p.bug_compatible))
        return d

    def _gd_est_ints(self, est) -> dict:
        """The hints estimator's int arrays, by segment (policies._reuse_jit's arguments)."""
        return {seg: getattr(est, a) for seg, a in self._GD_EST_INTS}

    def _gd_est_floats(self, est) -> dict:
        return {**{seg: getattr(est, a) for seg, a in self._GD_EST_FLOATS},
                **{seg: getattr(est, a).ravel() for seg, a in self._GD_EST_TABLES}}

    def _gd_repack(self, ints: dict | None = None, floats: dict | None = None) -> None:
        """Rebuild Gandalf's PX / FX with the segments given replaced (the others kept as they are)."""
        J, S = self.J, self.S
        ints, floats = ints or {}, floats or {}
        GI, GF = self._gd_pack([ints[k] if k in ints else self._gseg(k) for k in J.GI_SEGMENTS],
                               [floats[k] if k in floats else self._gseg(k) for k in J.GF_SEGMENTS])
        self.S = S._replace(PX=GI, FX=GF)
        self.S.M[J.M_DR_CAP] = len(GF)

    def _gd_bind_est(self):
        """The hints estimator with its arrays as views of the node's segments (its refit and its
        buffers' room run on it, interpreted), and its counts as the engine has them."""
        J, est = self.J, self._gd_est
        g = self._gseg
        for seg, a in self._GD_EST_INTS + self._GD_EST_FLOATS:
            setattr(est, a, g(seg))
        K, NB = est.D.shape
        for seg, a in self._GD_EST_TABLES:
            setattr(est, a, g(seg).reshape(K, NB))
        GX, RSC = g("GX"), g("RSC")
        est.seen = int(GX[J.GX_SEEN])
        est.H = float(RSC[J.RS_H])
        if GX[J.GX_LAST_REFIT] >= 0:
            est._last_refit = int(GX[J.GX_LAST_REFIT])
        return est

    def _gd_hints_room(self) -> None:
        """Room in the hints estimator's buffers for the next request (its own _room: compaction,
        renumbering, growth), its segments then repacked."""
        est = self._gd_bind_est()
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
        ints, floats = self._gd_est_ints(est), self._gd_est_floats(est)
        if not self._gd_write_back({**ints, **floats}):
            self._gd_repack(ints, floats)
        self._gd_unbind_est()

    #: what a buffer's free slots hold (``gn``: no group), as the estimator's own growth fills them
    _GD_FILL = {"RGN": -1}

    def _gd_write_back(self, arrays: dict) -> bool:
        """Put the estimator's arrays back into the node's segments in place when none is longer
        than its segment (most rooms only compact or renumber: a repack would copy the node's whole
        state, ~50 ms on whole Mooncake). A shorter one (a compaction's smaller buffer) fills its
        segment's head, the rest its free fill: a buffer's capacity is not seen in results, only
        when the next compaction comes. False (nothing written) when one is longer."""
        segs = {k: self._gseg(k) for k in arrays}
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
                seg[len(a):] = self._GD_FILL.get(k, 0)
            seg[:len(a)] = a
        return True

    def _gd_unbind_est(self) -> None:
        """Drop the estimator's views (they would keep a replaced PX / FX alive)."""
        est = self._gd_est
        for _, a in self._GD_EST_INTS + self._GD_EST_FLOATS:
            setattr(est, a, None)
        K, NB = est.D.shape
        for _, a in self._GD_EST_TABLES:
            setattr(est, a, np.zeros((K, NB)))

    def _gd_refit(self) -> None:
        """The hints estimator's refit due at this request's tick, interpreted as on the interpreted
        node (``HintsReuse.tick``), and objective=chunks' value per chunk; the engine then re-keys
        every heap member at the tick."""
        J = self.J
        est = self._gd_bind_est()
        GX, RSC = self._gseg("GX"), self._gseg("RSC")
        assert est._refit_due()
        low = est.tick(float(RSC[J.RS_NOW]), self.S.res)
        assert low is None
        self._gseg("RQ")[:] = est.Q.ravel()
        GX[J.GX_LAST_REFIT] = est._last_refit
        GX[J.GX_REKEY] = 1
        n = int(RSC[J.RS_CRCN])
        if GX[J.GX_CHUNKS] and n:
            v = RSC[J.RS_CRCSUM] / n
            crc, cum = self._gseg("CRC"), self._gseg("CRCC")
            crc[1:] = v
            cum[:] = np.arange(len(cum), dtype=np.float64) * v
        self._gd_unbind_est()

    def _gd_requests(self, idx, session, agent, stop, subagent, turn, R) -> None:
        """reuse=hints: each request's stop reason, sub-agent flag, turn and thread (dense id, -1 none)
        in its row of R, as RequestMeta gives them to the interpreted estimator."""
        from ..policies.reuse import thread_key
        J, est = self.J, self._gd_est
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
        thr = self._gseg("RTHR")
        if len(est.tids) > len(thr):
            # (a repack copies the node's whole state: four times the room, so that it stays rare)
            grown = np.full(4 * len(est.tids), -1, dtype=np.int64)
            grown[:len(thr)] = thr
            self._gd_repack({"RTHR": grown})

    def _gd_held(self, resident: int, m: int) -> int:
        """The most payloads resident during a request: ``resident`` before it, plus what a request
        of ``m`` chunks adds (as the kernel's room check counts them), at most every payload."""
        return min(resident + 2 * m + 4, 2 * self.n_chunks) + 2

    def _grow_gandalf_tables(self) -> None:
        """Room for the next request in Gandalf's heap tables (``M_GD_CROOM`` rows for the DRAM heap's,
        ``M_GD_ROOM`` for the SSD heap's: FX rebuilt with larger table segments, the rows kept, each
        grown to a quarter more than its room), its SSD plan and its leaf-event buffer."""
        J, S = self.J, self.S
        rooms = {J.GF_CST: int(S.M[J.M_GD_CROOM]), J.GF_SST: int(S.M[J.M_GD_ROOM])}
        held = int(S.M[J.M_GD_HELD])
        if len(self._gseg("PLAN")) < held or len(self._gseg("KINDS")) < 2 * held:
            grown = {}
            for k, n in (("PLAN", 2 * held), ("KINDS", 4 * held), ("NODES", 4 * held)):
                a = self._gseg(k)
                grown[k] = np.zeros(max(n, len(a)), dtype=np.int64)
                grown[k][:len(a)] = a
            self._gd_repack(ints=grown)
            S = self.S
        PX = S.PX
        parts = []
        for k in range(len(J.GF_SEGMENTS)):
            seg = S.FX[PX[J.GF0 + k]:PX[J.GF0 + k + 1]]
            if k in rooms and len(seg) // 3 < rooms[k]:
                # a quarter more than the room, not twice: a table near its bound holds 2 x its live
                # entries already (decision 155)
                grown = np.zeros(3 * (rooms[k] + rooms[k] // 4 + 64), dtype=np.float64)
                grown[:len(seg)] = seg
                seg = grown
            parts.append(seg)
        lens = [len(x) for x in parts]
        PX[J.GF0:J.GF0 + len(lens) + 1] = np.concatenate([[0], np.cumsum(lens)])
        self.S = S._replace(FX=np.ascontiguousarray(np.concatenate(parts)))

    def _gd_pop_room(self) -> None:
        """reuse=population: room for a request in its windows' rows (a row of references, a row of
        reuses per path chunk): the rows in the windows move to the front, into twice the room when
        they fill half of it."""
        J = self.J
        nb = J.PQ_BUCKETS + 1
        Q = self._gseg("PQ").copy()
        rh, rt, uh, ut = (int(x) for x in Q[:4])
        maxd = int(np.max(self.S.depth)) if self.n_chunks else 1
        new_i, new_f = {}, {}
        for (lo, hi, ti, tf, qh, qt) in ((rh, rt, "PRC", "PRT", J.PQ_RH, J.PQ_RT), (uh, ut, "PUC", "PUT", J.PQ_UH, J.PQ_UT)):
            times, counts = self._gseg(tf), self._gseg(ti)
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
        self._gd_repack(ints=new_i, floats=new_f)

    def _gd_gens_guard(self, limit: int | None = None) -> None:
        """Gandalf's heaps keep their versions as int32 per payload: past ``limit``
        (``_jit.GD_GEN_LIMIT``; the kernel stops at the first request that finds one there,
        GROW_GDGEN), a heap's versions are renumbered 1, 2, ... in their order (entries order by
        (key, item, version), and only a payload's live version is compared: the same pops, stale
        pops and rebuilds follow). (Its tentatives' uint16 stamps start over in the kernel:
        ``_gandalf_jit.t_next``.)"""
        from ..policies import _gandalf_jit as GJ
        J = self.J
        limit = J.GD_GEN_LIMIT if limit is None else limit
        for table, kv, meta in (("CST", "CKV", "CMETA"), ("SST", "SKV", "SMETA")):
            meta, kver = self._gseg(meta), self._gseg(kv)
            if meta[GJ.M_NEXT] < limit:
                continue
            n = int(meta[GJ.M_LEN])
            E = self._gseg(table).reshape(-1, 3)[:n]
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

    def _gseg(self, name: str) -> np.ndarray:
        """Gandalf's segment ``name`` (a view; of its type in ``_jit.GI_DTYPES``, else int64 or float64)."""
        J, S = self.J, self.S
        if name in J.GI_SEGMENTS:
            k = J.GI_SEGMENTS.index(name)
            return S.PX.view(np.uint8)[S.PX[2 * k]:S.PX[2 * k + 1]].view(J.GI_DTYPES.get(name, "int64"))
        k = J.GF_SEGMENTS.index(name)
        return S.FX[S.PX[J.GF0 + k]:S.PX[J.GF0 + k + 1]]

    def _floats(self, hw, lo: int) -> np.ndarray:
        """``FX``: dynamic_random's control loop, its parameters and the draw buffer (one slot for
        the other policies)."""
        J = self.J
        if self.policy_name == "workload_aware":
            FX = np.zeros(J.FXW_LT + 2 * self.n_chunks + 4 * 16, dtype=np.float64)
            theta = self.params.admit_threshold
            FX[J.FXW_THETA] = 0.0 if theta is None else float(theta)
            return FX
        if self.policy_name != "dynamic_random":
            return np.zeros(1, dtype=np.float64)
        from ..policies.dynamic_random import write_budget
        p = self.params
        FX = np.zeros(J.FX_UB + 8192, dtype=np.float64)
        FX[J.FX_FACTOR] = p.probability_seed
        FX[J.FX_TARGET], FX[J.FX_MAXRATE] = write_budget(p, hw, self.rpd_scale)
        FX[J.FX_CW] = p.change_window
        FX[J.FX_FMIN] = p.prob_factor_min
        FX[J.FX_FMAX] = p.prob_factor_max
        FX[J.FX_INTERVAL] = p.update_interval_s
        FX[J.FX_DECAY] = p.size_decay
        FX[J.FX_BITLEN_BASE] = int(p.base_size).bit_length()
        return FX

    def _seg(self, name: str) -> np.ndarray:
        """Segment ``name`` of PX (a view)."""
        J, S = self.J, self.S
        o = int(S.M[getattr(J, "M_O_" + name)])
        n = int(self._seg_len[name])
        return S.PX[o:o + n]

    def _repack(self, **new) -> None:
        """Rebuild PX with the segments given replaced (the others kept as they are)."""
        J = self.J
        cur = {k: (self._seg(k) if k not in new else np.asarray(new[k], dtype=np.int64)) for k in self._SEGMENTS}
        lens = {k: len(v) for k, v in cur.items()}
        PX = np.concatenate([cur[k] for k in self._SEGMENTS]) if sum(lens.values()) else np.zeros(1, dtype=np.int64)
        M = self.S.M
        o = 0
        for k in self._SEGMENTS:
            M[getattr(J, "M_O_" + k)] = o
            o += lens[k]
        M[J.M_N_LAB] = lens["LAB"]
        M[J.M_CAP_OUT] = lens["OUT"]
        M[J.M_CAP_AQ] = lens["AQ"]
        M[J.M_CAP_PEND] = lens["PEND"]
        M[J.M_CAP_DEC] = lens["DEC"]
        self._seg_len = lens
        self.S = self.S._replace(PX=np.ascontiguousarray(PX))

    # ---- oracle_admission: the node's stream and the hindsight passes
    def set_future(self, offsets: np.ndarray, flat: np.ndarray, tables=None) -> tuple:
        """Give the node its whole request stream (``flat[offsets[j]:offsets[j+1]]`` = its j-th
        request's path), as ``policies.oracle_admission`` gets ``ctx.future``. Returns the next-use
        tables, reusable by another node with the same stream."""
        from ..policies.oracle import next_use_tables

        J = self.J
        if self.policy_name == "oracle":
            return self._set_oracle_future(offsets, flat, tables)
        if tables is None:
            offsets = np.ascontiguousarray(offsets, dtype=np.int64)
            first_fa, nfa, first_st, _, nst, _ = next_use_tables(offsets, np.asarray(flat), self.n_chunks, self.model,
                                                                 "path", "path")
            tables = (offsets, np.ascontiguousarray(first_fa, dtype=np.int64),
                      np.ascontiguousarray(first_st, dtype=np.int64), np.ascontiguousarray(nfa, dtype=np.int64),
                      np.ascontiguousarray(nst, dtype=np.int64))
        offsets, first_fa, first_st, nfa, nst = tables
        self._repack(NFA=first_fa, NST=first_st, FOFF=offsets, FNFA=nfa, FNST=nst)
        self.S.M[J.M_NFUT] = len(offsets) - 1
        self.S.M[J.M_OUTROOM] = self.S_room
        self._has_future = True
        return tables

    def _set_oracle_future(self, offsets, flat, tables) -> tuple:
        """``set_future`` of ``oracle``: its next-use tables with its own ``fa_use`` / ``state_use``."""
        from ..policies.oracle import next_use_tables

        J = self.J
        if tables is None:
            offsets = np.ascontiguousarray(offsets, dtype=np.int64)
            p = self.params
            first_fa, nfa, first_st, st_use, nst, _ = next_use_tables(offsets, np.asarray(flat), self.n_chunks,
                                                                      self.model, p.fa_use, p.state_use)
            tables = tuple(np.ascontiguousarray(a, dtype=np.int64) for a in (offsets, first_fa, first_st, nfa, nst,
                                                                                st_use))
        offsets, first_fa, first_st, nfa, nst, st_use = tables
        N = len(offsets) - 1
        self._repack(NFA=first_fa, NST=first_st, FOFF=offsets, FNFA=nfa, FNST=nst, SU=st_use,
                     FEN=np.zeros(N + 2, dtype=np.int64))
        self.S.M[J.M_NFUT] = N
        self.S.M[J.M_OR_SPATH] = int(self.params.state_use == "path")
        self.pk_extra = {"requests_with_state_use": int((st_use >= 0).sum())}
        self._has_future = True
        return tables

    def set_labels(self, keys: np.ndarray | None, vals: np.ndarray | None) -> None:
        """Earlier passes' outcomes (sorted unique event keys, 1 = used from the SSD); None: pass 1."""
        J = self.J
        if keys is None or not len(keys):
            self.S.M[J.M_HAS_LABELS] = 0
            return
        self._repack(LAB=2 * np.asarray(keys, dtype=np.int64) + np.asarray(vals, dtype=np.int64))
        self.S.M[J.M_HAS_LABELS] = 1

    def outcomes(self) -> tuple[np.ndarray, np.ndarray]:
        """This pass's admission events and whether each copy served a reuse from the SSD (the
        last outcome of each event; copies still resident count as they stand), as
        ``OracleAdmissionPolicy.hindsight_outcomes``: (sorted unique keys, values)."""
        J, S = self.J, self.S
        n = int(S.M[J.M_OUTN])
        out = self._seg("OUT")[:n]
        adm = self._seg("A")
        live = np.flatnonzero(adm >= 0)
        keys = np.concatenate([out >> 1, adm[live]])
        vals = np.concatenate([out & 1, (S.flags[live] & J.F_OHIT) != 0]).astype(np.uint8)
        return _last_per_key(keys, vals)

    def _hindsight_passes(self, trace) -> None:
        """``NodeRunner._hindsight_passes`` of the reference: replay the node's stream ``passes - 1``
        times (or to a fixed point) on fresh nodes, each told the outcomes of the earlier ones."""
        J = self.J
        self._passes_pending = False
        if self.future_idx is None:
            raise ConfigError("policy", f"policy {self.policy_name!r} needs the node's future requests, "
                              "which only exist when routing runs ahead (fleet.sync=none)")
        fidx = self.future_idx
        lens = (trace.offsets[1:] - trace.offsets[:-1])[fidx]
        offs = np.zeros(len(fidx) + 1, dtype=np.int64)
        np.cumsum(lens, out=offs[1:])
        starts = trace.offsets[fidx]
        flat = trace.flat[np.repeat(starts - offs[:-1], lens) + np.arange(offs[-1], dtype=np.int64)]
        tables = self.set_future(offs, flat)
        total = int(getattr(self.params, "passes", 1))     # oracle: one pass
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
                node = CompiledNode(*self._args, cost=False, ftl=False, **self._kw)
                node.set_future(None, None, tables)
                if room is not None:
                    node._repack(OUT=np.zeros(room, dtype=np.int64))
                node.set_labels(lab_k if passes > 1 else None, lab_v)
                node.S.M[J.M_LOG_OUT] = 1
                node.replay_raw(trace.offsets, fidx, counted, trace.arrival_s)
                if not node.S.M[J.M_OUT_OVERFLOW]:
                    break
                room = 2 * len(node._seg("OUT"))    # the log filled inside a request: again, larger
            k, v = node.outcomes()
            passes += 1
            lab_k, lab_v = _last_per_key(np.concatenate([lab_k, k]), np.concatenate([lab_v, v]))
            if bool(np.all(v)):
                converged = True          # nothing written went unused: this rule is its own fixed point
                break
        self.set_labels(lab_k, lab_v)
        self.pk_extra = {"passes": passes, "converged": int(converged)}

    # ---- the kernel, with growth between requests
    def _grow(self) -> None:
        J, S = self.J, self.S
        g = int(S.M[J.M_GROW])
        if g & J.GROW_DR:
            room = int(S.M[J.M_DR_ROOM])
            if len(self._seg("DEC")) < room:
                self._repack(DEC=np.zeros(2 * room, dtype=np.int64))
            S = self.S
            if len(S.FX) < J.FX_UB + 6144 + room:
                FX = np.zeros(2 * (J.FX_UB + 6144 + room), dtype=np.float64)
                FX[:len(S.FX)] = S.FX
                S = S._replace(FX=FX)
            self.S = S
        if g & (J.GROW_AQ | J.GROW_OUT):
            new = {}
            if g & J.GROW_AQ:
                new["AQ"] = np.zeros(max(2 * len(self._seg("AQ")), 2 * int(S.M[J.M_AQMAX])), dtype=np.int64)
            if g & J.GROW_OUT:
                out = self._seg("OUT")
                grown = np.zeros(2 * len(out), dtype=np.int64)
                grown[:len(out)] = out
                new["OUT"] = grown
            self._repack(**new)
            S = self.S
        if g & J.GROW_LOG:
            n = 2 * len(S.log_p)
            lp = np.zeros(n, dtype=np.int64)
            ls = np.zeros(n, dtype=np.int64)
            k = int(S.M[J.M_LOGN])
            lp[:k] = S.log_p[:k]
            ls[:k] = S.log_s[:k]
            S = S._replace(log_p=lp, log_s=ls)
        if g & (2 | 4 | 8 | J.GROW_WAH):
            hcap = S.hcap.copy()
            for t in range(3):
                if g & (2 << t):
                    hcap[t] *= 2
            if g & J.GROW_WAH:
                # workload_aware's category queues (DRAM, SSD alternating): room for a request's entries
                for h in range(J.WA_H0, len(hcap)):
                    room = int(S.M[J.M_WA_ROOM1 if (h - J.WA_H0) % 2 == 0 else J.M_WA_ROOM2])
                    n = int(S.hn[h])
                    if n + room > hcap[h] or 4 * n > hcap[h]:
                        hcap[h] = max(2 * hcap[h], 2 * (n + room))
            S = self._heaps(S, hcap)
        self.S = S
        if g & J.GROW_GD:
            self._grow_gandalf_tables()
        if g & J.GROW_GDGEN:
            self._gd_gens_guard()
        if g & J.GROW_HINTS:
            self._gd_hints_room()
        if g & J.GROW_REFIT:
            self._gd_refit()
        if g & J.GROW_POP:
            self._gd_pop_room()
        if g & J.GROW_MC_TUNE:
            self._mc_tune()
        if g & J.GROW_EV:
            self._ev_drain()
            room = int(self.S.M[J.M_EV_ROOM])
            if room > len(self.S.elog):
                self.S = self.S._replace(elog=np.zeros((2 * room, 4), dtype=np.int64))
        S = self.S
        S.M[J.M_DR_CAP] = len(S.FX)
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
    def _heaps(S, hcap):
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
        policy that never reads the clock (``dynamic_random``'s control loop and workload_aware
        do). ``category`` / ``turn``: every trace request's, as ``trace.category`` / ``trace.turn``
        (workload_aware's categories; None: none / 0); ``session`` / ``agent`` / ``stop``: likewise
        ``trace.session_id`` / ``trace.agent`` / ``trace.stop_reason`` (Gandalf's hints; None: -1, -1, 0)."""
        J = self.J
        if self.needs_future and not self._has_future:
            raise ValueError(f"{self.policy_name} needs the node's future request stream (set_future)")
        # read-only views, whatever the caller holds (Ray hands actors read-only arrays): one
        # numba type, so the kernel the warm-up compiled is the one every call uses
        idx = _readonly(np.ascontiguousarray(idx, dtype=np.int64))
        counted = _readonly(np.ascontiguousarray(counted, dtype=np.bool_))
        if arrival is None:
            if self.policy_name in ("dynamic_random", "workload_aware"):
                raise ValueError(f"{self.policy_name} needs the requests' arrival times (replay_raw(..., arrival))")
            arrival = np.zeros(len(offsets) - 1, dtype=np.float64)
        arrival = _readonly(np.ascontiguousarray(arrival, dtype=np.float64))
        R = np.zeros((len(idx), J.N_R), dtype=np.int64)
        offsets = _ids(offsets)
        if self.policy_name == "lru_k" and len(idx):
            # lru_k packs two stamps in one key (_jit._lk_key): a request touches at most 2m + 1 payloads
            touches = 2 * int((offsets[idx + 1] - offsets[idx]).sum()) + len(idx)
            if int(self.S.M[J.M_CLOCK]) + touches >= 2**31 - 1:
                raise ConfigError("cache.engine", "lru_k on the compiled engine keeps stamps below 2^31 per "
                                  "node and this node's stream touches more: use cache.engine=python")
        if int(self.S.M[J.M_SEQ]) + len(idx) >= 2**31 - 1:
            raise ConfigError("cache.engine", "the compiled engine numbers a node's requests below 2^31 (its pins "
                              "are int32) and this node replays more: use cache.engine=python")
        if self.gd_kernels is not None:
            self._gd_gens_guard()
        if self.policy_name == "workload_aware":
            self._wa_replay(offsets, idx, counted, arrival, category, turn, R)
            return R
        if self._gd_est is not None:
            sub = None
            if agent is not None or category is not None:
                sub = np.zeros(len(offsets) - 1, dtype=bool) if agent is None else np.asarray(agent) > 0
                if category is not None:
                    sub = sub | np.array([c == "subagent" for c in category], dtype=bool)
            self._gd_requests(idx, session, agent, stop, sub, turn, R)
        self._replay_rows(offsets, idx, counted, arrival, R)
        return R

    def _replay_rows(self, offsets, idx, counted, arrival, R) -> None:
        """The kernel over requests ``idx`` (rows of ``R``), growing the state between calls."""
        J = self.J
        j = 0
        while True:
            j0 = j
            j = J.replay(self.S, offsets, idx, counted, arrival, j, R)
            if self.policy_name == "marconi" and self._mc_seen is not None:
                self._mc_seen.append((offsets, idx[j0:j]))
            if j >= len(idx):
                return
            self._grow()

    def _wa_replay(self, offsets, idx, counted, arrival, category, turn, R) -> None:
        """workload_aware: the reuse statistics run here, with the reference's code, request by request
        (they depend on the stream alone); the kernel runs the requests between two refits with the
        fits of that stretch and each request's category."""
        fits = self.fits
        names = self._wa_names
        flat = self.S.flat
        arr = arrival[idx].tolist()
        cats = np.zeros(len(idx), dtype=np.int64)
        start = 0
        for k, i in enumerate(idx.tolist()):
            now = arr[k]
            if k > start and fits.refit_due(now):
                self._wa_run(offsets, idx, counted, arrival, cats, start, k, R)
                start = k
            fits.tick(now)
            key = (None if category is None else category[i], 0 if turn is None else int(turn[i]))
            w = names.get(key)
            if w is None:
                w = names[key] = fits._cat_id(fits.category_name(*key))
            cats[k] = w
            fits._observe(flat[offsets[i]:offsets[i + 1]], now, w)
        if start < len(idx):
            self._wa_run(offsets, idx, counted, arrival, cats, start, len(idx), R)

    def _wa_run(self, offsets, idx, counted, arrival, cats, a, b, R) -> None:
        """Requests ``idx[a:b]`` (no refit among them) on the kernel, with the fits as they stand."""
        J = self.J
        n = len(self.fits.cat_names)
        S = self.S
        if len(S.hcap) < J.WA_H0 + 2 * n:              # queues for the new categories
            grow = J.WA_H0 + 2 * n - len(S.hcap)
            self.S = S = self._heaps(S, np.concatenate([S.hcap, np.full(grow, 64, dtype=np.int64)]))
        fo = int(S.M[J.M_WA_FIT])
        if len(S.FX) < fo + 4 * n:
            FX = np.zeros(fo + 8 * n, dtype=np.float64)
            FX[:len(S.FX)] = S.FX
            self.S = S = S._replace(FX=FX)
            S.M[J.M_DR_CAP] = len(FX)
        H = self.fits.H
        for w, (P, lam, L) in enumerate(self.fits.fit):
            S.FX[fo + 4 * w:fo + 4 * w + 4] = (P, lam, L, 1.0 - math.exp(-lam * H))
        S.M[J.M_WA_NCAT] = n
        if len(self._seg("WC")) < b - a:
            self._repack(WC=np.zeros(2 * (b - a), dtype=np.int64))
        self._seg("WC")[:b - a] = cats[a:b]
        self._replay_rows(offsets, idx[a:b], counted[a:b], arrival, R[a:b])

    def replay(self, trace, idx: np.ndarray, counted: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
        """Process the trace requests ``idx`` (in order) and count those ``counted`` (default: the
        trace's own flags); per request (h, m, SSD bytes written, the node's snapshot after it in
        the columns of ``fleet.SNAP``, load latency, TTFT), as the fleet's per-epoch tables and
        the request table want them (``fleet.NodeRunner._replay`` on the reference)."""
        J = self.J
        if self._passes_pending:
            self._hindsight_passes(trace)
        idx = np.asarray(idx, dtype=np.int64)
        counted = trace.counted[idx] if counted is None else np.asarray(counted, dtype=bool)
        self._mc_inp = trace.input_tokens
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
        """The policy's counters, as its interpreted ``counters()`` reports them."""
        J, S = self.J, self.S
        K = PK = S.K.tolist()
        if self.policy_name == "marconi":
            return self._mc_counters()
        if self.policy_name == "oracle":
            return {"dram_written": PK[J.PK_OR_WRITTEN], "dram_dropped_never_used": PK[J.PK_OR_NEVER],
                    "dram_dropped_no_room": PK[J.PK_OR_NO_ROOM], "dram_dropped_other_copy": PK[J.PK_OR_OTHER],
                    "forced_writes": PK[J.PK_OR_FORCED], "ssd_evictions": PK[J.PK_OR_SSD_EV],
                    "ssd_evicted_never_used": PK[J.PK_OR_SSD_NEVER], "failed_selects": PK[J.PK_OR_FAILED],
                    **self.pk_extra}
        if self.policy_name == "oracle_admission":
            return {"admitted": PK[J.PK_ADMITTED], "rejected_never_used": PK[J.PK_NEVER_USED],
                    "rejected_unused_before": PK[J.PK_UNUSED_BEFORE], "forced_writes": PK[J.PK_FORCED],
                    **self.pk_extra}
        tally = {"dram_victims_written": PK[J.PK_WRITTEN], "dram_victims_written_bytes": PK[J.PK_WRITTEN_B],
                 "dram_victims_on_ssd": PK[J.PK_ON_SSD], "dram_victims_dropped": PK[J.PK_DROPPED],
                 "dram_victims_dropped_bytes": PK[J.PK_DROPPED_B], "forced_writes": PK[J.PK_FORCED_N],
                 "forced_write_bytes": PK[J.PK_FORCED_B], "ssd_victims": PK[J.PK_SSD_VICTIMS]}
        if self.policy_name == "lru_k":
            return {"references": PK[J.PK_REFS], "uncorrelated_references": PK[J.PK_UNCORRELATED],
                    "ghost_hits": PK[J.PK_GHOST_HITS], "ghosts": int(S.M[J.M_GN]),
                    "histories_forgotten": PK[J.PK_FORGOTTEN], **tally}
        if self.policy_name == "hot_prefix":
            return tally
        if self.gd_kernels is not None:
            GJ = self.gd_kernels
            from ..policies.gandalf import COUNTERS
            cm, sm, P = self._gseg("CMETA"), self._gseg("SMETA"), self._gseg("P")
            c = dict(zip(COUNTERS, self._gseg("K").tolist()))
            c["stale_pops"] = int(cm[GJ.M_STALE] + sm[GJ.M_STALE])
            c["heap_rebuilds"] = int(cm[GJ.M_REBUILDS] + sm[GJ.M_REBUILDS])
            c["states_checkpointed"] = int(P[GJ.A_NCKPT])
            c["states_demanded"] = int(P[GJ.A_NDEM])
            c["states_demanded_twice"] = int(P[GJ.A_NDEM2])
            if self._gd_est is not None:
                GX, H = self._gseg("GX"), float(self._gseg("RSC")[J.RS_H])
                c["horizon_s"] = H if H != math.inf else 0.0
                last, seen = int(GX[J.GX_LAST_REFIT]), int(GX[J.GX_SEEN])
                c["estimator_refits"] = 0 if last <= 0 else 1 + (seen - int(GX[J.GX_FIRST])) // int(GX[J.GX_EVERY])
            return c
        if self.policy_name == "gandalf":
            return {"drops_fa": PK[J.PK_G_DROPS_FA], "drops_state": PK[J.PK_G_DROPS_STATE],
                    "moves_fa": PK[J.PK_G_MOVES_FA], "moves_state": PK[J.PK_G_MOVES_STATE],
                    "moves_free": PK[J.PK_G_MOVES_FREE], "admissions_rejected_by_fee": 0,
                    "ssd_evictions": PK[J.PK_G_SSD_EV], "rescore_repushes": 0, "stale_pops": 0, "heap_rebuilds": 0,
                    "states_checkpointed": PK[J.PK_G_NCKPT], "states_demanded": PK[J.PK_G_NDEM],
                    "states_demanded_twice": PK[J.PK_G_NDEM2]}
        if self.policy_name == "workload_aware":
            return {"dram_victims_demoted": PK[J.PK_WA_DEMOTED], "dram_victims_dropped": PK[J.PK_WA_DROPPED],
                    "ssd_evictions": PK[J.PK_WA_SSD_EV], "dead_victims": PK[J.PK_WA_DEAD],
                    "heads_scored": PK[J.PK_WA_SCORED], "requeued": PK[J.PK_WA_REQUEUED],
                    "failed_selects": PK[J.PK_WA_FAILED], **self.fits.fit_counters()}
        if self.policy_name == "dynamic_random":
            FX = S.FX
            return {"admitted": PK[J.PK_DR_ADM], "rejected": PK[J.PK_DR_REJ], "admitted_bytes": PK[J.PK_DR_ADM_B],
                    "rejected_bytes": PK[J.PK_DR_REJ_B], "control_updates": PK[J.PK_DR_UPDATES],
                    "prob_factor_final": float(FX[J.FX_FACTOR]), "target_bytes_per_s": float(FX[J.FX_TARGET]),
                    "observed_bytes_per_s_last": float(FX[J.FX_ROBS]), **tally}
        if self.policy_name in ("write_through", "write_through_selective"):
            return {"ssd_writes_requested": PK[J.PK_REQUESTED], "hits_counted": PK[J.PK_HITS_COUNTED],
                    "dram_victims_written": PK[J.PK_WRITTEN], "dram_victims_written_bytes": PK[J.PK_WRITTEN_B],
                    "dram_victims_on_ssd": PK[J.PK_ON_SSD], "dram_victims_dropped": PK[J.PK_DROPPED],
                    "dram_victims_dropped_bytes": PK[J.PK_DROPPED_B], "forced_writes": PK[J.PK_FORCED_N],
                    "forced_write_bytes": PK[J.PK_FORCED_B], "ssd_victims": PK[J.PK_SSD_VICTIMS]}
        return {"dram_victims_demoted": K[J.K_DRAM_DEMOTED], "dram_victims_dropped": K[J.K_DRAM_DROPPED]}

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
