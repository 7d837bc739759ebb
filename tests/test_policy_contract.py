"""The policy contract (simulation-model §7, ``cluster_sim/policies/base.py``), checked for
every registered policy (``known_policies()``; tests/test_schema.py checks that each one with
parameters has variants here).

* the residency invariants hold after every request on random workloads;
* every victim returned is unpinned, resident in the tier asked, listed once, and the set
  respects leaf-first (per tier) and prefix closure (for dropped last copies) by itself;
* ``select_victims`` is atomic: asked for more than it can free it returns ``[]`` and changes
  nothing -- neither the node's state nor, as a later replay shows, the policy's;
* decisions depend only on ``now`` and the inputs: the same config and seed give the same
  fleet summary;
* an unknown parameter is a ConfigError naming ``policy.<param>``.
"""
from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pytest
from hypothesis import Phase, given, settings, strategies as st

import cluster_sim
from cluster_sim.cache import DRAM, SSD
from cluster_sim.cache.state import BIT, DEMOTE, DROP
from cluster_sim.config import HardwareConfig
from cluster_sim.errors import ConfigError
from cluster_sim.model import load_model
from cluster_sim.node import NodeSim
from cluster_sim.policies.base import FutureStream, known_policies, make_policy

from simhelpers import branching_paths, trace_from_paths

POLICIES = known_policies()
# extra parameter sets for policies whose knobs change the code path taken
VARIANTS = {
    "lru_k": [{"k": 1}, {"k": 3, "ghost": 0.0}, {"k": 2, "crp": 1.5}],
    "hot_prefix": [{"f": 1}, {"f": 3, "half_life_s": 2.0}, {"f": 2, "eviction": "heat"},
                   {"f": 2, "eviction": "heat", "half_life_s": 3.0}],
    "write_through_selective": [{"threshold": 1}, {"threshold": 3}],
    "kvbm_filter": [{"threshold": 1}, {"threshold": 3, "decay_s": 2.0, "max_entries": 5}],
    "dynamic_random": [{"target_bytes_per_day": "50GB", "update_interval_s": 2},
                       {"target_bytes_per_day": "1GB", "update_interval_s": 1, "probability_seed": 0.05,
                        "size_decay": 0.3, "prob_factor_min": 1e-4}],
    "marconi": [{"alpha": 1.0, "candidates": "all"},
                {"alpha": 0.5, "candidates": 2, "bug_compatible": True},
                {"alpha": "auto", "bootstrap_multiplier": 1, "candidates": 4}],
    "workload_aware": [{"admit_threshold": 0.05, "categories": "none", "lifespan": "mean_multiple",
                        "first_fit_s": 1, "min_samples": 2},
                       {"categories": "first_later", "lifespan": "none", "first_fit_s": 1, "min_samples": 1,
                        "horizon_s": 5}],
    "oracle": [{"fa_use": "hit"}, {"state_use": "path"}],
    "gandalf": [{"placement": "strict"}, {"reuse": "rate", "objective": "dollars", "victim_loss": "shadow_price"}],
    "oracle_admission": [{"passes": 1}, {"passes": 2}],
}
CASES = [(n, {}) for n in POLICIES] + [(n, p) for n in POLICIES for p in VARIANTS.get(n, [])]
CASE_IDS = [n + "".join(f"-{k}={v}" for k, v in p.items()) for n, p in CASES]
# failures of policies owned elsewhere, reported to their owners; strict: a fix makes the marker fail
KNOWN_FAILURES = {
}


def cases(test):
    out = []
    for (n, p), i in zip(CASES, CASE_IDS):
        why = KNOWN_FAILURES.get((test, i))
        out.append(pytest.param(n, p, id=i, marks=[pytest.mark.xfail(strict=True, reason=why)] if why else []))
    return out
MODELS = ["qwen3_next_80b_a3b", "llama3_1_70b", "gemma3_27b", "kimi_linear_48b_a3b"]
WALL = ("sim_wall_s", "sim_chunk_refs_per_s")


def build(trace, model, name, params, seed=7, **hw):
    pol = make_policy(name, params)
    future = None
    if pol.needs_future:
        future = FutureStream(offsets=trace.offsets, flat=trace.flat, arrival_s=trace.arrival_s)
    return NodeSim(trace.parent, trace.depth, trace.anchor, trace.flat, trace.chunk_tokens, model,
                   HardwareConfig.from_mapping(hw), pol, rng=np.random.default_rng(seed), future=future)


@st.composite
def workloads(draw):
    paths = branching_paths(draw)
    n = len(paths)
    gaps = draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 3.0, 30.0]), min_size=n, max_size=n))
    model = draw(st.sampled_from(MODELS))
    mode = draw(st.sampled_from(["last", "last_and_branch", "every_chunk"]))
    caps = [draw(st.integers(0, 12)) for _ in range(3)]
    return paths, np.cumsum(gaps), model, mode, caps


def setup(w, name, params):
    paths, arrivals, model_name, mode, caps = w
    model = load_model(model_name, state_checkpoints=mode)
    tr = trace_from_paths(paths, arrivals=arrivals)
    F = model.fa_bytes(256)
    S = model.state_bytes(256) if model.has_state else 0
    unit = F + S // 3
    node = build(tr, model, name, params, hbm_cache_bytes=caps[0] * unit, dram_bytes=caps[1] * unit,
                 ssd_bytes=caps[2] * unit)
    return tr, node


def snapshot(s):
    """The node state a policy must not touch (it reads the CacheState, never writes it)."""
    return {"res": s.res.copy(), "used": list(s.used), "dcnt": np.stack(s.dcnt).copy(), "dany": s.dany.copy(),
            "pin": s.pin.copy(), "stamp": s.stamp.copy(), "clock": s.clock, "log_n": s.log_n}


def same(a, b):
    return all(np.array_equal(a[k], b[k]) for k in a)


def check_victims(s, tier, need, out):
    """Everything the contract asks of one non-empty answer of ``select_victims``."""
    bit = BIT[tier]
    ps = [p for p, _ in out]
    assert len(set(ps)) == len(ps), "a victim listed twice"
    assert sum(int(s.size[p]) for p in ps) >= need, "victims do not free the bytes asked"
    act = dict(out)
    for p, a in out:
        assert a in (DROP, DEMOTE)
        assert s.pin[p] != s.cur, f"pinned payload {p} returned"
        assert s.res[p] & bit, f"payload {p} is not in the tier asked"
    # the answer as a whole respects the residency rules of simulation-model §3, counting the
    # removal of the other victims: a copy moving DRAM -> SSD (DEMOTE, or DROP beside a valid SSD
    # copy) leaves DRAM leaf-first; a last copy is dropped only with no descendant resident anywhere;
    # an SSD copy with another copy may go at any time.
    fa = {p >> 1 for p in ps if not p & 1}
    moving = {c for c in fa if tier == DRAM and s.cap[SSD] > 0 and (act[2 * c] == DEMOTE or s.res[2 * c] & 4)}
    gone = {c for c in fa if int(s.res[2 * c]) == bit and (tier == SSD or act[2 * c] == DROP or s.cap[SSD] == 0)}
    below_tier, below_gone = Counter(), Counter()
    for c in fa:
        for a in s.ancestors(c).tolist():
            if a in fa:
                below_tier[a] += 1
            if c in gone and a in gone:
                below_gone[a] += 1
    for c in moving:
        assert s.dcnt[tier][c] == below_tier[c], f"chunk {c} demoted from tier {tier} before its descendants"
    for c in gone:
        assert s.dany[c] == below_gone[c], f"chunk {c}'s last copy dropped with descendants resident"


@pytest.mark.parametrize("name,params", cases("invariants"))
@settings(max_examples=40)
@given(w=workloads())
def test_invariants_and_victims(name, params, w):
    tr, node = setup(w, name, params)
    s = node.st
    pol = node.policy
    orig = pol.select_victims

    def checked(tier, need, now):
        assert tier in (DRAM, SSD) and need > 0
        before = snapshot(s)
        out = orig(tier, need, now)
        if out:
            check_victims(s, tier, need, out)
        assert same(before, snapshot(s)), "select_victims changed the node's state"
        return out

    pol.select_victims = checked
    for i in range(tr.n_requests):
        node.process(tr.path(i), int(tr.input_tokens[i]), float(tr.arrival_s[i]))
        s.check_invariants()
    stats = node.finish()
    hits = sum(stats.hits[f"hits_{t}_fa"] for t in ("hbm", "dram", "ssd"))
    assert hits + stats.chunk_misses == stats.chunks_requested
    for k, v in stats.policy.items():
        assert k.startswith(f"policy.{pol.name}.") and np.isfinite(v)


def replay(tr, node, probe: bool):
    """Per-request records, stats and final residency; with ``probe``, before each request ask
    every present tier for more bytes than it holds and check that nothing changed."""
    s = node.st
    recs = []
    for i in range(tr.n_requests):
        if probe and i:
            for t in (DRAM, SSD):
                if s.cap[t] > 0:
                    before = snapshot(s)
                    assert node.policy.select_victims(t, s.used[t] + 1, float(tr.arrival_s[i - 1])) == []
                    assert same(before, snapshot(s))
        recs.append(node.process(tr.path(i), int(tr.input_tokens[i]), float(tr.arrival_s[i])))
    stats = dataclasses.asdict(node.finish())
    for k in ("load_latency", "ttft"):        # float64 arrays once finished: compare as exact lists
        stats[k] = np.asarray(stats[k]).tolist()
    stats.pop("policy")            # diagnostic counters may count calls; behaviour is what must not change
    return recs, stats, s.res.copy()


@pytest.mark.parametrize("name,params", cases("atomic"))
@settings(max_examples=25, phases=[Phase.explicit, Phase.reuse, Phase.generate])   # no slow shrinking
@given(w=workloads())
def test_select_victims_is_atomic(name, params, w):
    tr, a = setup(w, name, params)
    _, b = setup(w, name, params)
    ra, sa, res_a = replay(tr, a, probe=False)
    rb, sb, res_b = replay(tr, b, probe=True)
    assert ra == rb
    assert np.array_equal(res_a, res_b)
    assert sa == sb


def _fleet(name):
    f = dict(cluster_sim.run(cluster_sim.compose([f"policy={name}", "workload.limit_requests=600"]),
                             write=False).to_dict()["fleet"])
    for k in WALL:
        f.pop(k)
    return f


@pytest.mark.parametrize("name", POLICIES)
def test_same_seed_same_summary(name):
    a = _fleet(name)
    assert a["requests"] == 600
    assert a == _fleet(name)


@pytest.mark.parametrize("name", POLICIES)
def test_unknown_parameter_names_the_key(name):
    with pytest.raises(ConfigError) as e:
        make_policy(name, {"no_such_knob": 1})
    assert e.value.key == "policy.no_such_knob"


@pytest.mark.parametrize("name", POLICIES)
def test_every_registered_policy_has_a_config(name):
    m = cluster_sim.compose([f"policy={name}"])
    assert m["policy"]["name"] == name
    pol = make_policy(name, {k: v for k, v in m["policy"].items() if k != "name"})
    assert pol.name == name


def test_lru_walker_sees_chunks_inserted_after_it_read_their_touch():
    # DRAM of 2 chunks, SSD of 1, HBM absent. Before request 3 an impossible selection walks DRAM to the
    # end of the touch log; request 3 touches chunk (2, 1), loads chunk 2 from the SSD, and the DRAM
    # overflow that load causes reads the log past the (not yet inserted) chunk (2, 1). lru never sees
    # it again: request 4 cannot make room and skips its insert, where without the probe it evicts it.
    w = ([[2], [1, 1], [2, 1], [1]], np.zeros(4), "llama3_1_70b", "last", [0, 2, 1])
    tr, a = setup(w, "lru", {})
    _, b = setup(w, "lru", {})
    ra, _, res_a = replay(tr, a, probe=False)
    rb, _, res_b = replay(tr, b, probe=True)
    assert ra == rb and np.array_equal(res_a, res_b)


@pytest.mark.skipif("gandalf" not in POLICIES, reason="gandalf not registered")
def test_gandalf_probe_reproducer():
    # HBM absent, DRAM and SSD of one unit each; once a failed probe left re-keyed entries behind and
    # request 3's SSD selection evicted
    # payload 4 instead of payload 2 (failed selections are now undone through a journal)
    w = ([[2], [2, 1], [1], [3, 1], [1]], np.zeros(5), "gemma3_27b", "last", [0, 1, 1])
    tr, a = setup(w, "gandalf", {})
    _, b = setup(w, "gandalf", {})
    ra, _, res_a = replay(tr, a, probe=False)
    rb, _, res_b = replay(tr, b, probe=True)
    assert ra == rb and np.array_equal(res_a, res_b)
