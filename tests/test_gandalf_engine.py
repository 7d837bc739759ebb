"""Gandalf's compiled engine (numba) against the interpreted reference: the same decisions,
counters and results, on random workloads and on whole runs of the bundled default."""
from __future__ import annotations

import builtins

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import cluster_sim
from cluster_sim.errors import ConfigError
from cluster_sim.model import load_model
from cluster_sim.policies.base import make_policy

from simhelpers import branching_paths, make_node, trace_from_paths

pytest.importorskip("numba", reason="numba is a dependency; the compiled engine needs it")

PARAMS = [{}, {"alpha": 0}, {"alpha": "inf"}, {"victim_loss": "shadow_price", "victim_peek": 2},
          {"reuse": "population", "objective": "chunks"}, {"wear_price": "budget_pressure", "tau_s": 5.0},
          {"moveset": "root_side"}, {"alpha": 4, "tau_s": 30.0, "reuse": "population"},
          {"reuse": "hints", "refit_requests": 4}, {"reuse": "hints", "objective": "chunks", "refit_requests": 3},
          {"reuse": "learned", "objective": "chunks", "refit_requests": 5}, {"reuse": "hints", "alpha": 0}]


class _PerEvent:
    """A listener forwarding only the per-event methods: CacheState then delivers every
    residency event one call at a time, leaf events from its interpreted climb (the delivery
    before batches, docs/decisions.md 91)."""

    def __init__(self, pol):
        self.on_enter, self.on_leave = pol.on_enter, pol.on_leave
        self.on_leaf, self.on_global_leaf = pol.on_leaf, pol.on_global_leaf


def _replay(tr, model, params, engine, caps, signals=None, per_event=False):
    F = model.fa_bytes(256)
    S = model.state_bytes(256) if model.has_state else 0
    unit = F + S // 3
    node = make_node(tr, model, policy="gandalf", policy_params={**params, "engine": engine},
                     hbm_cache_bytes=caps[0] * unit, dram_bytes=caps[1] * unit, ssd_bytes=caps[2] * unit)
    if per_event:
        node.st.listeners = [_PerEvent(node.policy)]
    recs = []
    for i in range(tr.n_requests):
        sid, stop, agent = signals[i] if signals else (-1, 0, -1)
        recs.append(node.process(tr.path(i), int(tr.input_tokens[i]), float(tr.arrival_s[i]), session_id=sid,
                                 stop_reason=stop, agent=agent, turn=i + 1))
        node.st.check_invariants()
    node.finish()
    return node, recs


# inter-arrival gaps: seconds to minutes, and (first-class, as in the whole WEKA trace) idle
# periods of hours to days
GAPS = st.one_of(st.floats(0.0, 400.0), st.floats(0.0, 400.0), st.floats(3600.0, 4 * 86400.0))


@st.composite
def workloads(draw):
    paths = branching_paths(draw)
    model = draw(st.sampled_from(["qwen3_next_80b_a3b", "llama3_1_70b", "kimi_linear_48b_a3b"]))
    mode = draw(st.sampled_from(["last", "last_and_branch", "every_chunk"]))
    caps = [draw(st.integers(0, 3)), draw(st.integers(1, 10)), draw(st.integers(0, 14))]
    gaps = draw(st.lists(GAPS, min_size=len(paths), max_size=len(paths)))
    signals = [(draw(st.integers(-1, 3)), draw(st.integers(0, 4)), draw(st.integers(-1, 2))) for _ in paths]
    return paths, model, mode, caps, draw(st.sampled_from(PARAMS)), np.cumsum(gaps).tolist(), signals


@settings(max_examples=150, deadline=None)
@given(workloads())
def test_compiled_engine_decides_exactly_as_the_reference(w):
    paths, model_name, mode, caps, params, arrivals, signals = w
    model = load_model(model_name, state_checkpoints=mode)
    tr = trace_from_paths(paths, arrivals=arrivals)
    ref, ref_recs = _replay(tr, model, params, "python", caps, signals)
    jit, jit_recs = _replay(tr, model, params, "numba", caps, signals)
    assert jit.policy._jit is not None and ref.policy._jit is None
    assert jit_recs == ref_recs
    assert np.array_equal(jit.st.res, ref.st.res)
    assert jit.policy.counters() == ref.policy.counters()


@settings(max_examples=100, deadline=None)
@given(workloads())
def test_batched_compiled_events_decide_exactly_as_per_event_delivery(w):
    """The compiled engine with batched residency events (CacheState.leaf_events, the event
    kernels) against the interpreted engine with one call per event: two code paths."""
    paths, model_name, mode, caps, params, arrivals, signals = w
    model = load_model(model_name, state_checkpoints=mode)
    tr = trace_from_paths(paths, arrivals=arrivals)
    ref, ref_recs = _replay(tr, model, params, "python", caps, signals, per_event=True)
    jit, jit_recs = _replay(tr, model, params, "numba", caps, signals)
    assert jit_recs == ref_recs
    assert np.array_equal(jit.st.res, ref.st.res)
    assert jit.policy.counters() == ref.policy.counters()


@pytest.mark.parametrize("overrides", [[], ["policy.reuse=population"], ["policy.alpha=4", "policy.tau_s=60"],
                                       ["policy.reuse=hints", "policy.objective=chunks"],
                                       ["policy.reuse=learned", "policy.refit_requests=100"],
                                       ["policy.victim_loss=shadow_price", "policy.wear_price=budget_pressure"]])
def test_compiled_engine_gives_the_same_run_on_the_default_trace(overrides):
    def run(engine):
        cfg = cluster_sim.compose(["policy=gandalf", f"policy.engine={engine}", "tracking.enabled=false",
                                   "hardware.hbm_cache_bytes=1GB", "hardware.dram_bytes=4GB", "hardware.ssd_bytes=24GB",
                                   *overrides])
        s = cluster_sim.run(cfg, write=False)
        drop = ("wall", "per_s")
        fleet = {k: v for k, v in s.fleet.items() if not any(d in k for d in drop)}
        nodes = [{k: v for k, v in n.items() if not any(d in k for d in drop)} for n in s.nodes]
        return fleet, nodes
    ref = run("python")
    assert ref[0]["policy.gandalf.drops_fa"] > 0          # the run exercises the DRAM selection
    if not overrides:
        assert ref[0]["policy.gandalf.ssd_evictions"] > 0     # and, at α = 1, the SSD's
    assert run("numba") == ref


def test_engine_setting_is_checked_and_missing_numba_is_named(monkeypatch):
    with pytest.raises(ConfigError, match="policy.engine"):
        make_policy("gandalf", {"engine": "cython"})
    real_import = builtins.__import__

    def no_numba(name, *a, **k):
        if name == "numba" or name.startswith("numba."):
            raise ImportError("No module named 'numba'")
        return real_import(name, *a, **k)

    import sys
    from cluster_sim.policies import gandalf

    monkeypatch.delitem(sys.modules, "cluster_sim.policies._gandalf_jit", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_numba)
    gandalf._import_jit_module.cache_clear()             # the import is tried once per process
    try:
        tr = trace_from_paths([[1, 2], [1, 3]])
        with pytest.raises(ConfigError, match="policy.engine.*numba"):
            make_node(tr, policy="gandalf", policy_params={"engine": "numba"}, dram_bytes="1GB", ssd_bytes="1TB")
        node = make_node(tr, policy="gandalf", policy_params={"engine": "auto"}, dram_bytes="1GB", ssd_bytes="1TB")
        assert node.policy._jit is None                  # auto falls back to the interpreted engine
    finally:
        gandalf._import_jit_module.cache_clear()


@pytest.mark.parametrize("policy", ["gandalf", "gandalf_paper"])
def test_batched_events_give_the_same_run_on_the_default_trace_as_per_event_delivery(policy, monkeypatch):
    """The default trace on a node whose SSD evicts: the compiled engine with batched residency
    events against the interpreted engine with one call per event (CacheState's per-event path,
    its interpreted leaf climb): every figure but wall times."""
    from cluster_sim.policies.gandalf import GandalfPolicy

    def run(engine):
        cfg = cluster_sim.compose([f"policy={policy}", f"policy.engine={engine}", "tracking.enabled=false",
                                   "hardware.hbm_cache_bytes=0", "hardware.dram_bytes=2GB", "hardware.ssd_bytes=12GB"])
        s = cluster_sim.run(cfg, write=False)
        return {k: v for k, v in s.fleet.items() if "wall" not in k and "per_s" not in k}
    batched = run("numba")
    assert batched["policy.gandalf.ssd_evictions"] > 0
    for name in ("on_enter_many", "on_leave_many", "on_leaf_events"):
        monkeypatch.delattr(GandalfPolicy, name)
    assert run("python") == batched


def test_the_compile_notice_names_every_gandalf_kernel_and_follows_numbas_cache_dir(tmp_path, monkeypatch, capsys):
    """The notice is printed when either of Gandalf's kernel modules (victim selection, reuse
    estimator) has no cache index, and the cache check looks under ``$NUMBA_CACHE_DIR`` too."""
    from cluster_sim import jit_timing
    from cluster_sim.policies import gandalf

    fake = tmp_path / "pkg" / "mod.py"
    fake.parent.mkdir()
    fake.write_text("")
    assert not jit_timing.cached(str(fake), "mod.kernel-")
    sub = tmp_path / "nbc" / "pkg_0123"
    sub.mkdir(parents=True)
    (sub / "mod.kernel-12.py311.nbi").write_bytes(b"")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "nbc"))
    assert jit_timing.cached(str(fake), "mod.kernel-")
    assert not jit_timing.cached(str(fake), "mod.other-")
    # numba caches only in $NUMBA_CACHE_DIR when it is set: an index beside the module is not used
    (fake.parent / "__pycache__").mkdir()
    (fake.parent / "__pycache__" / "mod.other-3.py311.nbi").write_bytes(b"")
    assert not jit_timing.cached(str(fake), "mod.other-")
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    assert jit_timing.cached(str(fake), "mod.other-") and not jit_timing.cached(str(fake), "mod.kernel-")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "nbc"))

    seen = []
    monkeypatch.setattr(gandalf, "cached", lambda f, stem: seen.append(stem) or "_reuse_jit" not in stem)
    gandalf._announce.cache_clear()
    try:
        assert gandalf._load_jit("auto", announce=False) is not None
        assert capsys.readouterr().err == ""             # (the compiled engine's own binding: no notice)
        assert gandalf._load_jit("auto") is not None
    finally:
        gandalf._announce.cache_clear()
    line = capsys.readouterr().err.strip()
    assert "compiling Gandalf's kernels" in line and f"about {gandalf.GANDALF_COMPILE_S} s" in line
    assert len(line.splitlines()) == 1 and any("_reuse_jit" in s for s in seen)
