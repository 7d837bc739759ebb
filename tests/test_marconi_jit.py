"""Marconi's α-tuning replay compiled (cluster_sim.policies._marconi_jit) against its reference,
:meth:`SingleTierMarconi.run`: the same ``saved`` float for every α of the grid, bit for bit, and
the same hit length for every request; on the bundled default and on random branching workloads,
with and without ``bug_compatible``, for a hybrid model (STATE), a hybrid with a sliding window
and a pure-attention model, under every ``state_checkpoints`` mode and capacities from "everything
pinned, trim" to "little eviction"."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import cluster_sim
from cluster_sim.api import prepare
from cluster_sim.config import SimConfig
from cluster_sim.model import load_model
from cluster_sim.policies.marconi import ALPHA_GRID, MarconiPolicy, SingleTierMarconi

from conftest import MOONCAKE, needs_mooncake
from simhelpers import branching_paths, make_node, trace_from_paths

QN = "qwen3_next_80b_a3b"
LLAMA = "llama3_1_70b"
MODES = ("last", "last_and_branch", "every_chunk")


def swa_hybrid():
    """Qwen3-Next with a sliding-window term (STATE bytes and FLOPs depend on the window)."""
    m = load_model(QN)
    return dataclasses.replace(m, swa_window=700, swa_kv_bytes_per_token=4096, swa_flops_per_ctx_token=32768.0,
                               n_swa_layers=4)


def models():
    return {"hybrid": load_model(QN), "swa": swa_hybrid(), "dense": load_model(LLAMA)}


def hits(sim, alpha):
    """The reference's hit length per request under ``alpha`` (and its saved float)."""
    seen = []
    orig = sim._request
    sim._request = lambda seq, path: seen.append(orig(seq, path)) or seen[-1]
    try:
        saved = sim.run(alpha)
    finally:
        del sim._request
    return saved, seen


def check(sim, alphas=ALPHA_GRID):
    assert sim.compiled_ok()
    saved, hs = sim.run_compiled(alphas)
    refs = []
    for i, a in enumerate(alphas):
        ref, ref_h = hits(sim, a)
        assert float(saved[i]) == ref, (a, float(saved[i]), ref)
        assert hs[i].tolist() == ref_h, a
        refs.append(ref)
    assert sim.savings(alphas) == refs
    return saved


@pytest.fixture(scope="module")
def default300():
    cfg = SimConfig.from_mapping(cluster_sim.compose(["workload.limit_requests=300"]))
    tr, _, _ = prepare(cfg)
    node = make_node(tr, cfg.model, policy="marconi", dram_bytes=10**9)
    return tr, node.st, [(tr.path(i), int(tr.input_tokens[i])) for i in range(tr.n_requests)]


@pytest.mark.parametrize("name,mode", [("hybrid", m) for m in MODES] + [("swa", "last_and_branch"),
                                                                        ("dense", "last_and_branch")])
def test_compiled_replay_is_the_reference_on_the_default(default300, name, mode):
    """(a model without STATE places no checkpoints: its mode changes nothing)"""
    tr, st_, reqs = default300
    m = dataclasses.replace(models()[name], state_checkpoints=mode)
    spread = []
    for cap, bug in ((10**9, False), (6 * 10**9, True)):
        if True:
            sim = SingleTierMarconi(st_, m, tr.chunk_tokens, cap, reqs, bug=bug)
            spread.append(len(set(check(sim).tolist())))
    assert max(spread) > 5          # α matters: the replays differ


@st.composite
def workloads(draw):
    paths = branching_paths(draw, max_requests=30, max_extension=6)
    name = draw(st.sampled_from(["hybrid", "swa", "dense"]))
    mode = draw(st.sampled_from(MODES))
    bug = draw(st.booleans())
    nf = draw(st.integers(1, 12))
    ns = draw(st.integers(0, 4))
    return paths, name, mode, bug, nf, ns


@settings(max_examples=120, deadline=None)
@given(workloads())
def test_compiled_replay_is_the_reference_on_random_workloads(w):
    paths, name, mode, bug, nf, ns = w
    m = dataclasses.replace(models()[name], state_checkpoints=mode)
    tr = trace_from_paths(paths)
    node = make_node(tr, m, policy="marconi", dram_bytes=10**9)
    F, S = m.fa_bytes(256), (m.state_bytes(256) if m.has_state else 0)
    reqs = [(tr.path(i), int(tr.input_tokens[i])) for i in range(tr.n_requests)]
    sim = SingleTierMarconi(node.st, m, 256, nf * F + ns * S, reqs, bug=bug)
    check(sim)


def test_policy_tunes_with_the_compiled_replay():
    """MarconiPolicy._tune adopts the same α and savings with either replay."""
    m = load_model(QN)
    F, S = m.fa_bytes(256), m.state_bytes(256)
    doc = list(range(1000, 1020))
    paths = []
    for rnd in range(12):
        paths.append(doc)
        paths.extend([[10 * rnd + j, 5000 + 10 * rnd + j] for j in range(4)])
    tr = trace_from_paths(paths)
    cap = 20 * F + S + 3 * (2 * F + S)
    out = []
    for engine in ("python", "auto"):
        node = make_node(tr, m, policy="marconi", policy_params={"bootstrap_multiplier": 2}, dram_bytes=cap)
        orig = SingleTierMarconi.savings
        SingleTierMarconi.savings = lambda self, alphas, engine=engine: orig(self, alphas, engine)
        try:
            for i in range(tr.n_requests):
                node.process(tr.path(i), int(tr.input_tokens[i]), float(tr.arrival_s[i]))
        finally:
            SingleTierMarconi.savings = orig
        pol = node.policy
        out.append((pol.tune_savings, pol.alpha, pol.tuned_at))
    assert out[0] == out[1] and out[0][1] > 0 and out[0][2] == 10


def test_int_flop_fields_fall_back_to_the_reference():
    m = dataclasses.replace(load_model(QN), attn_flops_per_ctx_token=196608)
    tr = trace_from_paths([[1, 2], [1, 3]])
    node = make_node(tr, load_model(QN), policy="marconi", dram_bytes=10**9)
    sim = SingleTierMarconi(node.st, m, 256, 10**9, [(tr.path(0), 600)])
    assert not sim.compiled_ok()


@needs_mooncake
@pytest.mark.extended
@pytest.mark.parametrize("bug", [False, True])
def test_compiled_replay_is_the_reference_on_mooncake(monkeypatch, bug):
    """Issue #14's run (Mooncake, 512-token chunks, DRAM 26 GB, SSD 263 GB): the tuning the policy
    does at request 450 (10,469 chunks replayed), with the compiled and the interpreted replay."""
    got = []
    orig = MarconiPolicy._tune

    def tune(self):
        sim = SingleTierMarconi(self.st, self.model, self.ct, self.tuning_capacity(), self.seen, bug=self.bug)
        got.append((self.tuned_at, len(self.seen), sim.savings(ALPHA_GRID, "python"), sim.savings(ALPHA_GRID)))
        orig(self)

    monkeypatch.setattr(MarconiPolicy, "_tune", tune)
    over = ["workload=mooncake", f"workload.path={MOONCAKE}", "workload.limit_requests=500",
            "model=qwen3_next_80b_a3b", "cache.chunk_tokens=512", "hardware.dram_bytes=26GB",
            "hardware.ssd_bytes=263GB", "policy=marconi", f"policy.bug_compatible={str(bug).lower()}",
            "cache.engine=python"]      # the interpreted policy's tuning (the compiled engine's is decision 143's)
    s = cluster_sim.run(cluster_sim.compose(over), write=False)
    assert len(got) == 1
    _, n_seen, ref, comp = got[0]
    assert n_seen == 450 and comp == ref and len(set(ref)) >= 5
    assert s.nodes[0]["policy.marconi.alpha_tuned_at_request"] == 450
