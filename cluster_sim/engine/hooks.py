"""The fixed set of hooks the compiled engine calls, resolved per policy when a kernel is typed.

The engine core (the request step, the victim walk, the overflow cascade, residency) names no
policy. The state ``S`` it passes everywhere ends in a :class:`Kernels` value, whose numba type
(:class:`KernelsType`) names a policy's kernel module and the digest of its sources. Every hook
below is a Python stub with an ``@overload``: when numba types a call ``hook(S, ...)`` it looks up
the function of the same name in that module, and falls back to the hook's default when the
module does not define it. So a run types and compiles the core with its own policy's kernels
only, and numba caches one specialisation per kernel set (its type is part of the signature);
an edit to one policy's sources changes its digest, and so its signature, and rebuilds only it.

``defines(S, name)``-style flags (``has_enter`` ...) are compile-time constants: the core skips
work (building a list of new copies, say) for a policy that does not listen.

A policy module implements any subset of these functions, each an ``@njit`` function taking the
same arguments as the stub (see :data:`HOOKS` for the arguments, the return and the default).
"""
from __future__ import annotations

import hashlib
import importlib
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from numba import types
from numba.extending import NativeValue, box, models, overload, register_model, typeof_impl, unbox

__all__ = ["Kernels", "KernelsType", "HOOKS", "kernels_for", "source_digest"]


class Kernels:
    """A policy's kernel set as a value of the engine state: ``module`` (dotted name) holds its
    hooks; ``digest`` is the SHA-1 of its sources (:func:`source_digest`)."""

    _known: dict = {}

    def __init__(self, name: str, module: str, digest: str):
        self.name, self.module, self.digest = name, module, digest
        Kernels._known[(name, digest)] = module

    def __repr__(self) -> str:
        return f"Kernels({self.name!r}, {self.module!r}, {self.digest[:12]})"

    def __reduce__(self):          # Ray ships the engine state's values; the type travels by name
        return (Kernels, (self.name, self.module, self.digest))


class KernelsType(types.Type):
    """The numba type of a :class:`Kernels` value: one per kernel set and version of its sources."""

    def __init__(self, kname: str, module: str, digest: str):
        self.kname, self.module_name, self.digest = kname, module, digest
        super().__init__(name=f"Kernels({kname},{digest[:16]})")

    @property
    def module(self):
        return importlib.import_module(self.module_name)

    def __reduce__(self):          # numba's cache index pickles signatures
        return (KernelsType, (self.kname, self.module_name, self.digest))


@typeof_impl.register(Kernels)
def _typeof_kernels(val, c):
    return KernelsType(val.name, val.module, val.digest)


register_model(KernelsType)(models.OpaqueModel)


@unbox(KernelsType)
def _unbox_kernels(typ, obj, c):
    return NativeValue(c.context.get_dummy_value())


@box(KernelsType)
def _box_kernels(typ, val, c):
    return c.pyapi.make_none()


def source_digest(files) -> str:
    """SHA-1 of the named files (paths) and their contents."""
    h = hashlib.sha1()
    for f in files:
        f = Path(f)
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


_CACHE: dict = {}


def kernels_for(name: str, module: str, extra_sources=()) -> Kernels:
    """The :class:`Kernels` value of the kernel module ``module`` (imported), its digest taken over
    the module's own file and ``extra_sources`` (other files its kernels compile from)."""
    key = (name, module, tuple(extra_sources))
    k = _CACHE.get(key)
    if k is None:
        mod = importlib.import_module(module)
        files = [Path(mod.__file__)] + [Path(x) for x in extra_sources]
        k = _CACHE[key] = Kernels(name, module, source_digest(files))
    return k


def _kernels_type(S) -> KernelsType:
    t = S.types[-1] if isinstance(S, types.BaseTuple) else None
    if not isinstance(t, KernelsType):
        raise TypeError(f"the engine state's last field must be a Kernels value, got {t}")
    return t


def _impl(S, name):
    """The policy's function ``name``, or None."""
    return getattr(_kernels_type(S).module, name, None)


# ---------------------------------------------------------------------------- the defaults
# (name, arguments after S, default body as source). The defaults are compiled in the engine's own
# terms: the names :data:`C` holds, the kernels the engine core registered (:func:`provide`; the walker and LRU's
# action), so this module imports no engine module and the core imports this one.
HOOKS = {
    # the request step
    "tick": ("now", "pass"),                                  # a request starts (clock, sequence set)
    "before_request": ("j, i, m, arrival, R", "pass"),        # room checks before request j (ask growth in M)
    "on_access": ("path, h, r, q", "pass"),                   # after the match, pins and touches
    "on_insert": ("path, r, states", "pass"),                 # the request's new payloads, placed
    # residency
    "enter": ("t, p", "pass"),                                # p got a copy in tier t
    "enter_many": ("t, ps", "for p in ps:\n        enter(S, t, p)"),
    "leave": ("t, p", "pass"),                                # p's copy left tier t
    "leave_state": ("t, q, sr", "leave(S, t, q)"),            # a STATE's copy left with its FA's last
    "leave_many": ("ev", "for e in ev:\n        leave(S, e & 3, e >> 2)"),   # events 4 p + t, in order
    "ssd_leave": ("p", "pass"),                               # p's SSD copy left
    "leaf": ("t, c, gone", "pass"),                           # chunk c's FA left tier t (gone: last copy)
    "leaf_many": ("t, cs, lost", "for k in range(len(cs)):\n        leaf(S, t, cs[k], lost[k])"),
    "lost": ("p", "pass"),                                    # p's last copy is gone
    "remove_many": ("t, ps, close, cs, lost", "return False"),  # a policy's own batch removal (True: done)
    "remove_many_begin": ("t, ps", "return np.empty(0, dtype=np.int64)"),
    "remove_many_end": ("t, was_in", "pass"),
    # victim selection
    "action": ("t", "return default_action(S, t)"),         # DRAM / SSD victims' admission rule
    "select": ("t, need, act, vict, acts", "return walk(S, t, need, act, vict, acts)"),
    "select_begin": ("t", "pass"),
    "select_end": ("t, ok, vict, acts", "pass"),
    "dram_victims": ("vict, acts", "pass"),                   # a DRAM selection succeeded, not carried out yet
    "ssd_victims": ("vict", "pass"),                          # an SSD selection succeeded, not carried out yet
    "decide": ("t, p", "return DEMOTE"),                    # a DECIDE walk's action for victim p
    "admit": ("t, p", "return False"),                        # a gated walk admits DRAM victim p
    "defer": ("t, p", "return False"),                        # a gated walk looks at p last
    "pop": ("t", "return np.int64(-1), np.int64(-1)"),        # a keyed queue's least valid entry
    "compact_heap": ("t, o, n", "return False"),              # compact tier t's heap itself (True: done)
}

#: flags: whether the policy defines any of these hooks (a compile-time constant each)
FLAGS = {
    "has_enter": ("enter", "enter_many"),
    "has_leave": ("leave",),
    "has_on_access": ("on_access",),
    "has_on_insert": ("on_insert",),
}


#: what the engine core provides the defaults (:func:`provide`)
C = SimpleNamespace()
_NEEDS = {"action": {"default_action"}, "select": {"walk"}, "decide": {"DEMOTE"}}


def provide(**kernels) -> None:
    """The engine core registers what the defaults call (``walk``, ``default_action``, ``DEMOTE``)."""
    vars(C).update(kernels)


def _make_hook(name: str, args: str, default: str):
    full = f"S, {args}" if args else "S"
    ns: dict = {}
    exec(f"def {name}({full}):\n    raise NotImplementedError('{name}: a compiled hook')\n", ns)
    stub = ns[name]
    stub.__module__ = __name__
    stub.__qualname__ = name

    def pick(S):
        fn = _impl(S, name)
        if fn is not None:
            env = {"fn": fn}
            exec(f"def impl({full}):\n    return fn({full})\n", env)
            return env["impl"]
        missing = _NEEDS.get(name, set()) - set(vars(C))
        if missing:
            raise RuntimeError(f"hook {name}: the engine core has not provided {sorted(missing)} (import cluster_sim.engine._jit)")
        env = {**vars(C), "np": np, **{h: globals()[h] for h in HOOKS if h in globals()}}
        exec(f"def impl({full}):\n    {default}\n", env)
        return env["impl"]

    env = {"pick": pick}          # the typing function takes the hook's own arguments
    exec(f"def typer({full}):\n    return pick(S)\n", env)
    typer = env["typer"]

    overload(stub, inline="always")(typer)
    return stub


def _make_flag(name: str, hooks: tuple):
    ns: dict = {}
    exec(f"def {name}(S):\n    raise NotImplementedError('{name}: a compiled flag')\n", ns)
    stub = ns[name]
    stub.__module__ = __name__

    def typer(S):
        if any(_impl(S, h) is not None for h in hooks):
            return lambda S: True
        return lambda S: False

    overload(stub, inline="always")(typer)
    return stub


for _name, (_args, _default) in HOOKS.items():
    globals()[_name] = _make_hook(_name, _args, _default)
for _name, _hooks in FLAGS.items():
    globals()[_name] = _make_flag(_name, _hooks)
__all__ += list(HOOKS) + list(FLAGS)
