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


def test_no_engine_module_is_over_600_lines_but_the_python_side():
    long = {f.name: n for f in ENGINE.glob("*.py") if (n := len(f.read_text().splitlines())) > 600}
    assert set(long) <= {"__init__.py"}, long      # CompiledNode's policy arrays: the adapters, next


def test_the_engine_core_reads_no_policy_id():
    src = "".join((ENGINE / f"{m}.py").read_text() for m in ("_jit", "layout", "queue", "residency", "walk", "cascade",
                                                             "step"))
    assert "M[M_POLICY]" not in src and "S.M[M_POLICY]" not in src
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
