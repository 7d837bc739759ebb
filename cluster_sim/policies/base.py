"""The policy contract (simulation-model §7) and helpers every policy shares.

A policy ranks and decides; the node moves bytes. The node owns a
:class:`~cluster_sim.cache.CacheState` that the policy may read (residency,
sizes, pins, stamps, descendant counts) but never writes.

Calls a policy receives, all with ``now`` = the request's arrival time in
seconds (after ``time_scale``); no policy reads a clock or a global:

* ``on_access(payloads, now, meta)`` once per request, after the match, with
  the FA payloads of ``c_1..c_m`` (root first) and the hit STATE if any;
  ``meta`` is a :class:`RequestMeta`.
* ``on_insert(payloads, now)`` with the payloads the request created
  (new FA chunks and STATE checkpoints) once they are resident.
* ``admit_on_insert(payload, now) -> bool``: write-through SSD admission of a
  just-created payload (default: no).
* ``select_victims(tier, bytes_needed, now) -> [(payload, DROP | DEMOTE)]`` for
  ``tier`` in (DRAM, SSD). Atomic: returns ``[]`` and changes nothing if it
  cannot free ``bytes_needed``; never returns a pinned payload; respects the
  residency rules (use :func:`lru_select` or :class:`Tentative` to check them).
  ``DEMOTE`` from DRAM writes to SSD unless a valid SSD copy exists; from SSD
  it is the same as ``DROP``.
* ``on_enter(tier, payload)`` / ``on_leave(tier, payload)``: residency changes
  in any tier, and ``on_leaf(tier, chunk)`` / ``on_global_leaf(chunk)`` when a
  chunk becomes a leaf in a tier / loses its last resident descendant, for
  policies that keep candidate sets incrementally (delivered only if the policy
  sets ``wants_residency_events = True``; ``on_leaf`` only for the tiers named in
  ``leaf_event_tiers``, which saves the ancestor search for the others).
* ``tick(now)`` before each request, for periodic work.
* ``counters() -> dict`` policy-specific counters, reported as ``policy.<name>.<key>``.

Beyond the contract's calls, a policy may ask for an SSD write at any time with
``ctx.request_ssd_admission(p)`` (e.g. from ``on_enter(DRAM, p)`` for write-through
on entering DRAM, or from ``on_access`` once a payload reached a hit threshold): the
node performs queued admissions right after the call returns, making room on the
SSD through ``select_victims(SSD, ...)``; a payload already on the SSD, or no longer
resident anywhere, is skipped. A policy that sets ``needs_future = True`` receives the
node's whole request stream as ``ctx.future`` (only the oracle may do this).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, fields
from typing import Any, Mapping

import numpy as np

from .. import settings
from ..cache.state import BIT, DEMOTE, DRAM, DROP, HBM, SSD, CacheState, TierLRU, chunk_of, fa_of, is_state
from ..errors import ConfigError
from ..units import parse_number

__all__ = ["Policy", "NoParams", "RequestMeta", "NodeContext", "Victims", "no_victims", "lru_select", "register", "register_target", "plugin_policies",
           "make_policy", "known_policies", "policy_class", "policy_params", "policy_keys", "parse_params",
           "RegistryError", "DROP", "DEMOTE", "HBM", "DRAM", "SSD"]


@dataclass
class RequestMeta:
    """What a node knows about the request being processed.

    The request-level signals (simulation-model §1) are what a serving system has when the
    request completes: ``stop_reason`` is a code into ``trace.schema.STOP_REASONS``
    (0 unknown, 1 ``tool_use``, 2 ``end_turn``, 3 ``max_tokens``, 4 other); times in
    seconds, NaN when the trace does not say; ``agent`` is 0 for a session's own requests,
    k >= 1 for its k-th sub-agent, -1 when unknown."""
    seq: int                 # request index in the node's stream
    arrival_s: float
    session_id: int          # -1 if none
    category: str | None
    turn: int                # 1-based within the session, 0 if unknown
    input_tokens: int
    output_tokens: int
    path: np.ndarray         # chunk ids c_1..c_m
    hit_chunks: int          # h
    resident_chunks: int     # r: leading chunks whose FA was resident at match time
    stop_reason: int = 0
    think_time_s: float = float("nan")
    api_time_s: float = float("nan")
    agent: int = -1

    @property
    def subagent(self) -> bool:
        """True for a sub-agent's request (``agent`` >= 1, or category ``subagent``)."""
        return self.agent > 0 or self.category == "subagent"


@dataclass
class NodeContext:
    """What a policy is given at bind time."""
    state: CacheState
    model: Any                # ModelSpec
    hardware: Any             # HardwareConfig
    chunk_tokens: int
    cost: Any                 # cost.CostModel of this node: compute rate, load times, prices
    rng: np.random.Generator  # this node's stream, derived from the root seed
    node_index: int
    future: Any = None        # only for policies with needs_future (the oracle): a FutureStream
    request_ssd_admission: Any = None   # callable(p): ask the node to write p to SSD (see Policy docs)
    replays_per_day_scale: float = 1.0  # workload.replays_per_day_scale (for write-budget policies)


@dataclass
class FutureStream:
    """The node's whole request stream, for hindsight policies only (``needs_future = True``).

    Request ``j`` of this node (``j`` = ``RequestMeta.seq - 1``) has chunk path
    ``flat[offsets[j]:offsets[j+1]]`` and arrival ``arrival_s[j]``."""
    offsets: np.ndarray
    flat: np.ndarray
    arrival_s: np.ndarray


@dataclass(frozen=True)
class NoParams:
    """The parameters of a policy that has none."""


class Policy:
    """The contract every cache manager implements (module docstring; simulation-model §7).

    Units everywhere: times ``now`` in seconds of trace time (after ``workload.time_scale``),
    sizes in bytes, tiers as ``HBM``/``DRAM``/``SSD`` (0/1/2), payloads as handles (``2c`` =
    chunk ``c``'s FA, ``2c + 1`` its STATE). A policy reads ``self.st`` (the node's
    :class:`~cluster_sim.cache.CacheState`) and never writes it.
    """

    name = "base"
    #: the policy's typed parameters (a settings dataclass: keys, defaults, limits, units), the only
    #: place its defaults are written; conf/policy/<name>.yaml carries only what differs
    Params: type = NoParams
    wants_residency_events = False
    leaf_event_tiers = (0, 1, 2)     # tiers (HBM, DRAM, SSD) whose on_leaf events the policy uses
    uses_admit_on_insert = False     # set True if admit_on_insert may return True
    needs_future = False             # hindsight policies only
    #: the settings of this policy the compiled engine's warm-up builds and its identity tests run,
    #: as parameter mappings (``{}``: the defaults); None: the defaults alone. A policy compiled in
    #: some settings only lists them (the rest runs interpreted: :meth:`compiled_unsupported`)
    compiled_settings: tuple | None = None

    @classmethod
    def kernels_module(cls, params) -> str | None:
        """The dotted name of the module holding this policy's compiled hooks
        (:mod:`cluster_sim.engine.hooks`) for these parameters: by default ``kernels`` beside the
        policy's own module (its folder), or None when there is none."""
        import importlib.util
        name = cls.__module__ + ".kernels"
        try:
            return name if importlib.util.find_spec(name) is not None else None
        except ImportError:
            return None

    @classmethod
    def engine_adapter(cls, params) -> type:
        """The class of this policy's Python side on the compiled engine for these parameters
        (:class:`cluster_sim.engine.adapter.Adapter`: its meta slots, arrays, growth between requests
        and counters): ``engine.py`` beside the policy's module, its function ``adapter(params)`` or its
        class ``Adapter``; the engine's default (LRU's: no arrays, LRU's counters) when there is none."""
        import importlib.util
        from ..engine.adapter import Adapter
        name = cls.__module__ + ".engine"
        try:
            found = importlib.util.find_spec(name) is not None
        except ImportError:
            found = False
        if not found:
            return Adapter
        mod = importlib.import_module(name)
        pick = getattr(mod, "adapter", None)
        klass = pick(params) if callable(pick) else getattr(mod, "Adapter", None)
        if not (isinstance(klass, type) and issubclass(klass, Adapter)):
            raise RegistryError(f"policy {cls.name!r}: {name} has no engine Adapter (a subclass of "
                                "cluster_sim.engine.adapter.Adapter named Adapter, or a function adapter(params))")
        return klass

    @classmethod
    def compiled_unsupported(cls, params) -> str | None:
        """None when the compiled engine runs this policy with ``params`` (its ``Params``) exactly,
        else why not (one phrase; ``cache.engine=auto`` then runs the interpreted policy). By
        default: compiled when it has a :meth:`kernels_module`. A policy whose kernels cover only
        some of its settings says which here."""
        if cls.kernels_module(params) is None:
            return (f"policy {cls.name!r} has no compiled kernels (a kernels module beside its class, "
                    "README \"Your own policy\")")
        return None

    def __init__(self, params=None, /, **kw):
        """``params``: an instance of :attr:`Params` (validated already, as :func:`make_policy`
        gives it), or a mapping / keywords, validated here."""
        if params is None or isinstance(params, Mapping):
            params = _parse(type(self), {**(params or {}), **kw})
        elif kw:
            raise TypeError("give the parameters either as a Params instance or as keywords, not both")
        elif not isinstance(params, self.Params):
            raise TypeError(f"policy {self.name!r} takes {self.Params.__name__}, got {type(params).__name__}")
        self.params = params

    def bind(self, ctx: NodeContext) -> None:
        """Attach to one node before its first request: ``ctx.state`` is the node's cache
        state, ``ctx`` also carries the model, hardware and (for hindsight policies) the future."""
        self.ctx = ctx
        self.st = ctx.state

    def on_access(self, payloads: np.ndarray, now: float, meta: RequestMeta) -> None:
        """Once per request, after the match and the touches: ``payloads`` (int64 handles) are
        the FA payloads of ``c_1..c_m``, root first, then the hit STATE if any; ``meta`` carries
        the request's fields and its match (``hit_chunks`` = h, ``resident_chunks`` = r)."""

    def on_insert(self, payloads: np.ndarray, now: float) -> None:
        """The payloads this request created (new FA chunks and STATE checkpoints, int64
        handles), once they are resident in the entry tier."""

    def admit_on_insert(self, payload: int, now: float) -> bool:
        """Write-through admission: True writes the just-created ``payload`` to the SSD now.
        Asked only when ``uses_admit_on_insert`` is set; the default admits nothing."""
        return False

    def select_victims(self, tier: int, bytes_needed: int, now: float) -> list[tuple[int, int]]:
        """Victims ``[(payload, DROP | DEMOTE), ...]`` in ``tier`` (DRAM or SSD) freeing at least
        ``bytes_needed`` bytes. Atomic: an empty list and no change when that cannot be freed
        (:func:`no_victims` says by how many bytes). Never a pinned payload; FA leaf-first within
        the tier; a dropped last copy only without resident descendants (use :func:`lru_select`
        or :class:`Tentative`). ``DEMOTE`` from DRAM writes to the SSD unless a valid copy is
        there; from the SSD it is ``DROP``."""
        raise NotImplementedError

    def on_enter(self, tier: int, p: int) -> None:
        """Payload ``p`` became resident in ``tier`` (only with ``wants_residency_events``)."""

    def on_leave(self, tier: int, p: int) -> None:
        """Payload ``p`` left ``tier`` (only with ``wants_residency_events``)."""

    def on_leaf(self, tier: int, c: int) -> None:
        """Chunk ``c``'s FA copy in ``tier`` has just become a leaf there (no descendant FA left
        in that tier): it may now be demoted (or dropped) leaf-first."""

    def on_global_leaf(self, c: int) -> None:
        """Chunk ``c`` has just lost its last resident descendant: its last copy may now be dropped."""

    def tick(self, now: float) -> None:
        """Before each request, at its arrival time ``now`` (s): periodic work such as decay."""

    def counters(self) -> dict[str, float]:
        """Policy-specific totals, reported as ``policy.<name>.<key>`` (summed over nodes)."""
        return {}


class Victims(list):
    """What :meth:`Policy.select_victims` returns: ``[(payload, DROP | DEMOTE), ...]``. An empty
    one may say by how many bytes the selection fell short (``shortfall``; None: unknown), so
    the node trims the right amount of a request's new payloads at once. A plain list works too."""
    shortfall: int | None = None


def no_victims(shortfall: int | None = None) -> Victims:
    """The empty selection of a policy that could not free what was asked, short by ``shortfall`` bytes."""
    v = Victims()
    v.shortfall = shortfall
    return v


def lru_select(st: CacheState, walker: TierLRU, tier: int, need: int, action: int,
               accept=None, drop_fallback=None) -> list[tuple[int, int]]:
    """Least-recent-first victims in ``tier`` freeing at least ``need`` bytes.

    Respects pins, leaf-first within the tier for FA, and prefix closure for a
    dropped last copy, counting the victims already chosen in this call (their
    removal can make an ancestor a leaf). ``action`` is DROP or DEMOTE (DEMOTE
    keeps the payload resident elsewhere, so it never breaks prefix closure;
    from SSD, DEMOTE means DROP) or a callable giving each payload's action.
    ``accept(p)`` may veto a candidate. ``drop_fallback`` (DEMOTE, from DRAM): a victim
    whose action is DROP but whose last copy may not be dropped now (prefix closure) takes
    this action instead of being passed over, so the victims stay exactly LRU's. Atomic:
    returns [] and leaves the walker as it was if ``need`` cannot be freed.
    """
    bit = BIT[tier]
    act_of = action if callable(action) else None
    dropping_all = (not callable(action) and action == DROP) or tier == SSD
    out: list[tuple[int, int]] = []
    taken: list[tuple[int, int]] = []
    skipped: list[tuple[int, int]] = []
    chosen: set[int] = set()
    cred: dict[int, int] = {}        # Tentative credits, inlined on this hot path
    cred_any: dict[int, int] = {}
    dcnt = st.dcnt[tier]
    dany = st.dany
    res = st.res
    parent = st.parent
    freed = 0
    cur = st.cur
    pin = st.pin
    size = st.size
    pop = walker.pop
    while freed < need:
        e = pop()
        if e is None:
            break
        p = e[1]
        if pin[p] == cur or p in chosen or (accept is not None and not accept(p)):
            skipped.append(e)
            continue
        a = act_of(p) if act_of is not None else action
        dropping = dropping_all or a == DROP
        if not is_state(p):
            c = chunk_of(p)
            d = int(dcnt[c])
            if d and d != cred.get(c, 0):
                skipped.append(e)
                continue
            drop_last = dropping and int(res[p]) == bit
            if drop_last:
                da = int(dany[c])
                if da and da != cred_any.get(c, 0):
                    if drop_fallback is None:
                        skipped.append(e)
                        continue
                    a = drop_fallback
                    drop_last = False
            par = int(parent[c])
            if par >= 0:
                # credit the nearest ancestor in the tier with this chunk's whole tier-subtree
                y = par if res[fa_of(par)] & bit else st.nearest_in_tier(c, bit)
                if y >= 0:
                    cred[y] = cred.get(y, 0) + 1 + d
                if drop_last:
                    cred_any[par] = cred_any.get(par, 0) + 1 + int(dany[c])
        chosen.add(p)
        taken.append(e)
        out.append((p, a))
        freed += int(size[p])
    if freed < need:
        for e in taken:
            walker.push_back(e)
        for e in skipped:
            walker.push_back(e)
        return no_victims(need - freed)      # lets the node trim the right amount in one step
    for e in skipped:
        walker.push_back(e)
    return out


class Tentative:
    """Leaf status in one tier as if the FA copies chosen so far were already gone.

    A chosen chunk had no remaining descendants in the tier (it was a tentative
    leaf), so choosing it removes its whole tier-subtree: ``1 + dcnt[tier][c]`` is
    credited to its parent. Credits climb through ancestors outside the tier only once
    such an ancestor has every one of its tier descendants chosen (then its whole count
    moves up), so an ancestor in the tier is a tentative leaf exactly when its credit
    equals its descendant count — without searching for the nearest ancestor in the
    tier. The same for prefix closure across tiers, where the nearest resident ancestor
    is always the parent. O(1) per choice in the usual case (parent in the tier).
    """

    __slots__ = ("st", "tier", "bit", "cred", "cred_any")

    def __init__(self, st: CacheState, tier: int):
        self.st = st
        self.tier = tier
        self.bit = BIT[tier]
        self.cred: dict[int, int] = {}
        self.cred_any: dict[int, int] = {}

    def is_leaf(self, c: int) -> bool:
        d = int(self.st.dcnt[self.tier][c])
        return d == 0 or d == self.cred.get(c, 0)

    def may_drop_last(self, c: int) -> bool:
        d = int(self.st.dany[c])
        return d == 0 or d == self.cred_any.get(c, 0)

    def choose(self, c: int, drop_last: bool) -> int:
        """Record chunk ``c`` as chosen; returns the ancestor in the tier that was credited
        (whose leaf status may have changed), or -1."""
        st = self.st
        par = int(st.parent[c])
        if par < 0:
            return -1
        if drop_last:
            self.cred_any[par] = self.cred_any.get(par, 0) + 1 + int(st.dany[c])
        dcnt = st.dcnt[self.tier]
        cred = self.cred
        res = st.res
        bit = self.bit
        parent = st.parent
        k = 1 + int(dcnt[c])
        x = par
        while x >= 0:
            v = cred.get(x, 0) + k
            cred[x] = v
            if res[fa_of(x)] & bit:
                return x
            if v != dcnt[x]:
                return -1
            k = v
            x = int(parent[x])
        return -1


# ---- registry ----------------------------------------------------------------
class RegistryError(RuntimeError):
    """The policy registry is inconsistent: a name registered twice, or an entry whose module or
    class cannot be loaded. A fault of the installation or of a plugin, not of the user's config,
    so it keeps its traceback."""


_REGISTRY: dict[str, str] = {}


def register(name: str, target: str) -> None:
    """Register a policy class by dotted path ``module:Class`` (imported lazily). A name registered
    twice is an error, never a silent overwrite."""
    if name in _REGISTRY:
        raise RegistryError(f"policy {name!r} is already registered (as {_REGISTRY[name]!r}); "
                            f"cannot register it again as {target!r}")
    if not isinstance(target, str) or target.count(":") != 1 or not all(target.split(":")):
        raise RegistryError(f"policy {name!r}: target must be 'module:Class', got {target!r}")
    _REGISTRY[name] = target


_BUILTINS = (
    ("lru", "cluster_sim.policies.lru:LRUPolicy"),
    ("gandalf", "cluster_sim.policies.gandalf:GandalfPolicy"),
    ("write_through", "cluster_sim.policies.write_through:WriteThroughPolicy"),
    ("write_through_selective", "cluster_sim.policies.write_through:WriteThroughSelectivePolicy"),
    ("lru_k", "cluster_sim.policies.lru_k:LRUKPolicy"),
    ("hot_prefix", "cluster_sim.policies.hot_prefix:HotPrefixPolicy"),
    ("marconi", "cluster_sim.policies.marconi:MarconiPolicy"),
    ("workload_aware", "cluster_sim.policies.workload_aware:WorkloadAwarePolicy"),
    ("dynamic_random", "cluster_sim.policies.dynamic_random:DynamicRandomPolicy"),
    ("oracle", "cluster_sim.policies.oracle:OraclePolicy"),
    ("oracle_admission", "cluster_sim.policies.oracle_admission:OracleAdmissionPolicy"),
    ("kvbm_filter", "cluster_sim.policies.kvbm_filter:KvbmFilterPolicy"),
)
for _name, _target in _BUILTINS:
    register(_name, _target)


def builtin_policies() -> tuple[str, ...]:
    """The policies this package ships, in registration order (plugins' are not among them)."""
    return tuple(n for n, _ in _BUILTINS)


#: the entry-point group through which an installed package adds policies: ``name = "module:Class"``
#: (README "Your own policy")
ENTRY_POINTS = "cluster_sim.policies"
_PLUGINS: dict[str, str] = {}        # policy name -> the distribution whose entry point registered it
_plugins_read = False


def _read_plugins() -> None:
    """Register every policy of the installed packages' ``cluster_sim.policies`` entry points, once
    per process. A plugin's name clashing with another policy is a RegistryError naming both."""
    global _plugins_read
    if _plugins_read:
        return
    _plugins_read = True
    from importlib.metadata import entry_points
    for ep in entry_points(group=ENTRY_POINTS):
        dist = getattr(ep.dist, "name", None) or "?"
        if _REGISTRY.get(ep.name) == ep.value:
            continue                     # the same entry seen twice (a package on two paths)
        if ep.name in _REGISTRY:
            raise RegistryError(f"policy {ep.name!r} of package {dist!r} (entry point {ep.value!r} in "
                                f"{ENTRY_POINTS!r}) clashes with the policy registered as {_REGISTRY[ep.name]!r}; "
                                "rename one of them")
        register(ep.name, ep.value)
        _PLUGINS[ep.name] = dist


def register_target(name: str, target: str) -> None:
    """``policy._target_``: register the class at ``target`` (``pkg.module.Class`` or
    ``pkg.module:Class``) as policy ``name`` for this process, from a run's own config (a sweep's
    Ray workers read the same config, so they register it too). A user's setting, so every fault is
    a one-line ConfigError: a target that cannot be imported or is no Policy, or a name another
    policy has."""
    t = target.strip() if isinstance(target, str) else ""
    if ":" not in t and "." in t:
        mod, _, cls = t.rpartition(".")
        t = f"{mod}:{cls}"
    if t.count(":") != 1 or not all(t.split(":")):
        raise ConfigError("policy._target_", f"must be 'package.module.Class', got {target!r}")
    _read_plugins()
    if name in _REGISTRY:
        if _REGISTRY[name] == t:
            return
        raise ConfigError("policy.name", f"{name!r} is the policy registered as {_REGISTRY[name]!r}; "
                          f"give the policy of {target!r} a name of its own (policy.name=...)")
    mod, cls = t.split(":")
    try:
        klass = getattr(importlib.import_module(mod), cls, None)
    except ImportError as e:
        raise ConfigError("policy._target_", f"cannot import {mod!r} ({e})") from e
    if not (isinstance(klass, type) and issubclass(klass, Policy)):
        raise ConfigError("policy._target_", f"{mod} has no Policy class {cls!r}")
    _REGISTRY[name] = t


def plugin_policies() -> dict[str, str]:
    """The policies installed packages added: ``{name: distribution}``."""
    _read_plugins()
    return dict(_PLUGINS)


def known_policies() -> list[str]:
    """Every registered policy, plugins' included (none is dropped: an entry that cannot be loaded
    fails in :func:`policy_class`)."""
    _read_plugins()
    return sorted(_REGISTRY)


def policy_class(name: str) -> type:
    """The class registered as ``name``; ConfigError for an unknown name (a user's typo),
    RegistryError if the entry cannot be loaded."""
    _read_plugins()
    if name not in _REGISTRY:
        raise ConfigError("policy", f"unknown policy {name!r}; known: {', '.join(known_policies())}")
    target = _REGISTRY[name]
    mod, cls = target.split(":")
    try:
        module = importlib.import_module(mod)
    except ImportError as e:
        raise RegistryError(f"policy {name!r} is registered as {target!r}, but its module cannot be "
                            f"imported: {e}") from e
    klass = getattr(module, cls, None)
    if not (isinstance(klass, type) and issubclass(klass, Policy)):
        raise RegistryError(f"policy {name!r} is registered as {target!r}, but {mod} has no Policy class {cls!r}")
    return klass


def policy_params(name: str) -> type:
    """The parameter dataclass of policy ``name``."""
    return policy_class(name).Params


def policy_keys(name: str) -> tuple[str, ...]:
    """The parameter keys of policy ``name`` (``policy.<key>``), in declaration order."""
    return tuple(f.name for f in fields(policy_params(name)))


def _parse(klass: type, params: Mapping):
    keys = ", ".join(f.name for f in fields(klass.Params)) or "none"
    return settings.parse(klass.Params, params, "policy",
                          unknown=f"unknown parameter for policy {klass.name!r} (its parameters: {keys})")


def parse_params(name: str, params: Mapping | None = None):
    """Policy ``name``'s typed parameters from ``params`` (``policy.<key>`` without ``name``):
    unknown keys, types and limits are checked here, once; no policy is built."""
    return _parse(policy_class(name), params or {})


def make_policy(name: str, params=None) -> Policy:
    """A new policy ``name``: ``params`` is its :attr:`Policy.Params` instance (validated already,
    e.g. ``SimConfig.policy.settings``) or a mapping, validated here."""
    klass = policy_class(name)
    if params is None or isinstance(params, Mapping):
        params = _parse(klass, params or {})
    policy = klass(params)
    policy.name = name          # the name it runs under (a plugin's class may be registered as another)
    return policy
