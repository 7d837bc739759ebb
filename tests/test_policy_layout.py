"""The policy layout (#47, decision 156): the engine core dispatches to a policy's hooks by the type of
the kernel set its state carries, not by a run-time policy id, so a run compiles its own policy's
kernels only and an edit to one policy's folder rebuilds only that policy."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cluster_sim import engine as E
from cluster_sim.engine import hooks

ENGINE = Path(E.__file__).resolve().parent


def test_no_engine_module_is_over_600_lines():
    long = {f.name: n for f in ENGINE.glob("*.py") if (n := len(f.read_text().splitlines())) > 600}
    assert not long, long


def _policy_pattern():
    """Every built-in policy's name and class name but LRU's (the engine's default order, which it
    implements itself), as they may appear in prose or code."""
    import re

    from cluster_sim.policies.base import builtin_policies, policy_class
    words = set()
    for name in builtin_policies():
        if name != "lru":
            words |= {name, name.replace("_", ""), name.replace("_", "-"), policy_class(name).__name__}
    assert {"gandalf", "marconi", "lru_k", "oracle", "GandalfPolicy", "workload_aware"} <= words
    return re.compile("|".join(sorted(map(re.escape, words), key=len, reverse=True)), re.IGNORECASE)


def test_no_engine_module_names_a_policy():
    """The engine core and its Python side call hooks and adapters found through the registry: no
    file of ``cluster_sim/engine`` names a built-in policy (in code or prose), so no dispatch on
    policies is written there by hand."""
    pat = _policy_pattern()
    found = {}
    for f in sorted(ENGINE.glob("*.py")):
        for i, line in enumerate(f.read_text().splitlines(), 1):
            if pat.search(line):
                found.setdefault(f.name, []).append((i, line.strip()))
    assert not found, found


def test_the_policy_name_check_sees_a_name():
    pat = _policy_pattern()
    assert pat.search("    if policy == 'workload_aware':") and pat.search("# Marconi's tree")
    assert pat.search("from ..policies.gandalf import GandalfPolicy") and pat.search("hot-prefix")
    assert not pat.search("    M[M_KEYED] = int(ad.keyed)  # the workload's stream, an LRU order")


def test_what_is_compiled_is_derived_from_the_registry():
    from cluster_sim.engine.adapter import Adapter
    from cluster_sim.policies.base import builtin_policies, policy_class
    names = builtin_policies()
    for name in names:
        k = policy_class(name)
        compiled = k.kernels_module(k.Params()) is not None
        assert compiled == (name in E.SUPPORTED_POLICIES or name in E.PARTLY_COMPILED), name
    assert E.PARTLY_COMPILED["gandalf"] == policy_class("gandalf").compiled_settings
    # a policy's adapter is its folder's, or the engine's default (LRU's) where it has none
    assert policy_class("lru").engine_adapter(None) is Adapter
    ad = policy_class("lru_k").engine_adapter(policy_class("lru_k").Params())
    assert issubclass(ad, Adapter) and ad.__module__ == "cluster_sim.policies.lru_k.engine"
    g = policy_class("gandalf")
    assert g.engine_adapter(g.Params(placement="strict")).__name__ == "Strict"
    assert g.engine_adapter(g.Params()).__name__ == "CapacityAware"


def test_the_engine_core_calls_hooks():
    src = "".join((ENGINE / f"{m}.py").read_text() for m in ("_jit", "layout", "queue", "residency", "walk", "cascade",
                                                             "step"))
    assert "M_POLICY" not in src
    # the hooks are the only way in: each is a stub with an overload, called as H.<name>
    assert {"enter", "leave", "select", "action", "on_access", "tick"} <= set(hooks.HOOKS)
    assert "H.select(" in src and "H.enter(" in src


def test_each_compiled_setting_has_a_kernel_set_of_its_own_policy():
    sets = {(p, tuple(sorted((s or {}).items()))): E.kernels_of(p, s) for p, s in E.compiled_settings()}
    names = {k.name for k in sets.values()}
    assert {"lru.kernels", "lru_k.kernels", "oracle.kernels", "gandalf.kernels", "gandalf.strict",
            "marconi.kernels", "write_through.kernels"} <= names
    # a policy's variants share its kernels unless a parameter picks other ones
    assert E.kernels_of("write_through") is E.kernels_of("write_through_selective")
    assert E.kernels_of("gandalf", {"reuse": "rate"}) is E.kernels_of("gandalf")
    assert E.kernels_of("gandalf", {"placement": "strict"}).name == "gandalf.strict"
    assert len({(k.name, k.digest) for k in sets.values()}) == len(names)


def test_a_policys_digest_covers_the_core_and_its_own_folder_only():
    files = E.kernel_sources("cluster_sim.policies.lru_k.kernels")
    names = {f"{f.parent.name}/{f.name}" for f in files}
    assert "engine/_jit.py" in names and "engine/hooks.py" in names and "lru_k/kernels.py" in names
    assert not any(n.startswith(("lru/", "gandalf/", "oracle/", "marconi/")) for n in names)
    # a changed file of that folder changes the digest; the type of the kernel set follows it
    before = hooks.source_digest(files)
    copy = [Path(f) for f in files]
    assert hooks.source_digest(copy) == before
    k1, k2 = hooks.Kernels("x.kernels", "m", "a" * 40), hooks.Kernels("x.kernels", "m", "b" * 40)
    from numba import typeof
    assert typeof(k1) != typeof(k2) and typeof(k1) == typeof(hooks.Kernels("x.kernels", "m", "a" * 40))


def test_an_unknown_hook_module_attribute_falls_back_to_the_default():
    # lru defines no hook: every one is the engine's default
    import cluster_sim.policies.lru.kernels as L
    assert not any(hasattr(L, h) for h in hooks.HOOKS)


def test_a_run_compiles_and_loads_only_its_own_policys_kernels():
    """A run of lru specialises the replay kernel for lru's kernel set alone (none of another
    policy is typed, loaded or compiled in its process)."""
    code = ("import cluster_sim; from cluster_sim.engine import _jit as J; "
            "cluster_sim.run(cluster_sim.compose(['cache.engine=numba', 'tracking.enabled=false', "
            "'report.figures=false']), write=False); "
            "print(sorted({str(sig[0].types[-1]) for sig in J.replay.signatures}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    got = eval(out.stdout.strip().splitlines()[-1])
    assert len(got) == 1 and got[0].startswith("Kernels(lru.kernels,"), got
