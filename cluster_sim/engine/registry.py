"""What the compiled engine runs, derived from the policy registry: which settings (:func:`resolve`,
:func:`supports`), each policy's kernel set and the sources its digest covers (:func:`kernels_of`), and
the shared helper kernels (:func:`helper_sources`). This module names no policy; building and caching
the kernels is :mod:`cluster_sim.engine.build`'s.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..errors import ConfigError

ENGINES = ("auto", "numba", "python")

def _builtin_classes() -> list:
    from ..policies.base import builtin_policies, policy_class
    return [(n, policy_class(n)) for n in builtin_policies()]


def supported_policies() -> tuple[str, ...]:
    """The built-in policies compiled in every setting their kernels cover, tested with their defaults
    (in the registry's order)."""
    return tuple(n for n, k in _builtin_classes()
                 if k.compiled_settings is None and k.compiled_unsupported(k.Params()) is None)


def partly_compiled() -> dict:
    """The built-in policies compiled in some settings only: their compiled settings (parameter values)
    the warm-up and the identity tests run (:attr:`Policy.compiled_settings`); the others stay interpreted."""
    return {n: tuple(k.compiled_settings) for n, k in _builtin_classes() if k.compiled_settings is not None}


def __getattr__(name):          # derived from the registry when asked, not when imported
    if name == "SUPPORTED_POLICIES":
        return supported_policies()
    if name == "PARTLY_COMPILED":
        return partly_compiled()
    if name == "KERNEL_SOURCES":
        return helper_sources()
    raise AttributeError(name)


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
#: from besides the policy's own folder and its helpers)
CORE_SOURCES = ("engine/_jit.py", "engine/layout.py", "engine/queue.py", "engine/residency.py", "engine/walk.py",
                "engine/cascade.py", "engine/step.py", "engine/hooks.py", "_nrt.py", "_ftl_ops.py", "cache/state.py")
#: the core's helper kernels that do not take the engine state (numba keys their caches on their own file)
CORE_HELPERS = ("_nrt.py", "cache/state.py")


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
    """The files a kernel module's digest covers: the engine core's (:data:`CORE_SOURCES`), every
    ``.py`` file of the module's own folder (the policy's) and the files of its ``HELPERS`` (modules of
    kernels it calls that do not take the engine state), and no other policy's."""
    import importlib
    root = Path(__file__).resolve().parent.parent
    mod = importlib.import_module(module)
    folder = Path(mod.__file__).resolve().parent
    own = sorted(folder.glob("*.py"))
    extra = [f for f in _helper_files(mod) if f not in own]
    return [root / rel for rel in CORE_SOURCES] + own + extra


def _helper_files(mod) -> list[Path]:
    import importlib
    return [Path(importlib.import_module(h).__file__).resolve() for h in getattr(mod, "HELPERS", ())]


def helper_sources() -> tuple[str, ...]:
    """The shared helper kernels' sources (package-relative): the core's (:data:`CORE_HELPERS`) and the
    ``HELPERS`` of every built-in policy's kernel modules, in a stable order."""
    import importlib
    root = Path(__file__).resolve().parent.parent
    out = list(CORE_HELPERS)
    for module in _kernel_modules():
        for f in _helper_files(importlib.import_module(module)):
            rel = f.relative_to(root).as_posix()
            if rel not in out:
                out.append(rel)
    return tuple(out)


def _kernel_modules() -> list[str]:
    """Every kernel module of the built-in compiled settings (in their order, each once)."""
    out = []
    for policy, params in compiled_settings():
        k = kernels_of(policy, params)
        if k.module not in out:
            out.append(k.module)
    return out


_KSETS: dict = {}


def compiled_settings() -> list[tuple[str, dict | None]]:
    """Every compiled setting: (policy, parameters or None for its defaults)."""
    return [(p, None) for p in supported_policies()] + [(p, s) for p, ss in partly_compiled().items() for s in ss]


def _kernel_sets(settings) -> list:
    """The distinct kernel sets of ``settings`` ((policy, params) pairs; None: every compiled one)."""
    out = {}
    for policy, params in (compiled_settings() if settings is None else settings):
        k = kernels_of(policy, params)
        out.setdefault((k.name, k.digest), (k, policy, params))
    return list(out.values())
