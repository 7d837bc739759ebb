"""Score-ordered evictions and the hindsight oracles: ``marconi`` (policies.md §5),
``workload_aware`` (§6), ``oracle`` (§9.6) and ``oracle_admission``.

Scripted scenarios with hand-derived outcomes, each with a positive side (something
is evicted, written or tuned) so that a policy that does nothing cannot pass; the
sampled Marconi against its full rescan on the bundled default; the α-tuning model
against the node itself; same-seed determinism; residency invariants on random
workloads for the knobs that change the code path.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import cluster_sim
from cluster_sim.api import prepare
from cluster_sim.cache import DRAM
from cluster_sim.config import HardwareConfig, SimConfig
from cluster_sim.errors import ConfigError
from cluster_sim.model import load_model
from cluster_sim.node import NodeSim, floor_pass
from cluster_sim.policies.base import FutureStream, RequestMeta, make_policy
from cluster_sim.policies.marconi import ALPHA_GRID, MarconiPolicy, SingleTierMarconi, _FlopModel
from cluster_sim.policies.oracle import next_use_tables

from simhelpers import branching_paths, make_node, trace_from_paths

QN = "qwen3_next_80b_a3b"
LLAMA = "llama3_1_70b"


def chunk_ids(tr, paths):
    """Chunk name (as written in ``paths``) -> interned chunk id."""
    out = {}
    for i, p in enumerate(paths):
        for k, n in enumerate(p):
            out[n] = int(tr.path(i)[k])
    return out


def names(tr, paths):
    ch = chunk_ids(tr, paths)
    return {2 * c: f"F{n}" for n, c in ch.items()} | {2 * c + 1: f"S{n}" for n, c in ch.items()}


def spy_victims(node, label):
    """Record every answer of ``select_victims`` as (request seq, tier, [payload labels])."""
    log = []
    orig = node.policy.select_victims

    def sv(tier, need, now):
        out = orig(tier, need, now)
        if out:
            log.append((node.seq, tier, [label[p] for p, _ in out]))
        return out

    node.policy.select_victims = sv
    return log


def run(node, tr, *, categories=None, turns=None, check=True):
    recs = []
    for i in range(tr.n_requests):
        recs.append(node.process(tr.path(i), int(tr.input_tokens[i]), float(tr.arrival_s[i]),
                                 category=None if categories is None else categories[i],
                                 turn=0 if turns is None else turns[i]))
        if check:
            node.st.check_invariants()
    node.finish()
    return recs


def oracle_node(tr, model, **hw):
    pol = make_policy("oracle", hw.pop("policy_params", {}))
    fut = FutureStream(offsets=tr.offsets, flat=tr.flat, arrival_s=tr.arrival_s)
    spec = load_model(model) if isinstance(model, str) else model
    return NodeSim(tr.parent, tr.depth, tr.anchor, tr.flat, tr.chunk_tokens, spec, HardwareConfig.from_mapping(hw),
                   pol, future=fut)


# ---------------------------------------------------------------------------------------------
# Marconi
# ---------------------------------------------------------------------------------------------

def test_marconi_alpha0_is_lru_over_nodes_with_at_most_one_child():
    """Hand-derived order (stamps in the comments; DRAM only, so victims are dropped).

    R1 [1,2,3]: F3=0 F2=1 F1=2, S3=3.  R2 [1,2,3,4,5]: resumes at S3 (stamp 9), F5=4 F4=5, S5=10.
    R3 [1,2,6]: branch at 2 -> S2=14, F6=11, S6=15.  R4 [7,8] fills DRAM exactly.
    Nodes with <= 1 child: S3 (chunk 3 has one child, t=9), leaf 5 (t=10, its edge is 5, 4),
    leaf 6 (t=15); chunk 2 is a branch point, so S2 is kept.
    R5 [9] needs F+S: S3 goes (t=9), then leaf 5 with its edge, which now reaches chunk 3 (stateless).
    R7 [11] needs S: chunk 2 has one child left, so S2 (t=14) goes before leaf 6 (t=15).
    R8 [12] needs F+S: leaf 6 and its edge (6, then 2 and 1, both stateless now).
    Plain LRU over payloads evicts FA chunks first (F5 has the oldest stamp after F3..F1)."""
    m = load_model(QN)
    F, S = m.fa_bytes(256), m.state_bytes(256)
    paths = [[1, 2, 3], [1, 2, 3, 4, 5], [1, 2, 6], [7, 8], [9], [10], [11], [12]]
    tr = trace_from_paths(paths)
    label = names(tr, paths)
    node = make_node(tr, m, policy="marconi", policy_params={"alpha": 0}, dram_bytes=8 * F + 5 * S)
    log = spy_victims(node, label)
    recs = run(node, tr)
    assert [r["h"] for r in recs] == [0, 3, 0, 0, 0, 0, 0, 0]
    assert log == [(5, DRAM, ["S3", "F5", "S5", "F4", "F3"]),
                   (7, DRAM, ["S2"]),
                   (8, DRAM, ["F6", "S6", "F2", "F1"])]
    c = node.policy.counters()
    assert c["dram_state_only_evictions"] == 2 and c["dram_leaf_evictions"] == 2
    assert c["dram_edge_chunks_evicted"] == 4
    # the same stream under plain LRU evicts in payload-recency order instead
    lru = make_node(tr, m, policy="lru", dram_bytes=8 * F + 5 * S)
    lru_log = spy_victims(lru, label)
    run(lru, tr)
    assert lru_log[0] == (5, DRAM, ["F5", "F4", "F3", "S3"])


@pytest.mark.parametrize("alpha,victim", [(0.0, "A"), (1.0, "A"), (2.0, "B")])
def test_marconi_flop_efficiency_keeps_the_long_edge(alpha, victim):
    """Two leaves: A (20 chunks, one edge, older) and B (2 chunks, newer). A saves far more FLOPs per
    byte (eff ~2.2e5 vs ~6.4e4 FLOP/B). Min-max over the two: A = (recency 0, eff 1), B = (1, 0),
    so S_A = α, S_B = 1: α=0 evicts A, α=1 ties (least recent: A), α=2 evicts B."""
    m = load_model(QN)
    F, S = m.fa_bytes(256), m.state_bytes(256)
    A = list(range(100, 120))
    paths = [A, [1, 2], [3]]
    tr = trace_from_paths(paths)
    fm = _FlopModel(m, 256, bug=False)
    assert fm.eff(0, 20) > 3 * fm.eff(0, 2)
    node = make_node(tr, m, policy="marconi", policy_params={"alpha": alpha}, dram_bytes=22 * F + 2 * S)
    log = spy_victims(node, names(tr, paths))
    run(node, tr)
    (seq, tier, got), = log
    assert seq == 3 and tier == DRAM
    if victim == "A":
        assert got == ["F119", "S119"] + [f"F{c}" for c in range(118, 99, -1)]
    else:
        assert got == ["F2", "S2", "F1"]


def test_marconi_writes_fa_back_and_never_states():
    """policies.md §5.6: DRAM victims' FA is written back to SSD, their STATE dropped. [3,4] is pushed
    through HBM and DRAM onto the SSD; when it returns, its FA is found (r = 2) but its state is gone."""
    m = load_model(QN)
    F, S = m.fa_bytes(256), m.state_bytes(256)
    paths = [[1, 2], [3, 4], [5, 6], [1, 2, 7], [3, 4]]
    tr = trace_from_paths(paths)
    node = make_node(tr, m, policy="marconi", policy_params={"alpha": 0.5}, hbm_cache_bytes=2 * F + S,
                     dram_bytes=2 * F + S, ssd_bytes="1TB")
    recs = run(node, tr)
    s = node.stats
    assert s.ssd_bytes_written_fa > 0 and s.ssd_bytes_written_state == 0
    # states dropped on DRAM eviction: the FA of [3,4] is on SSD but its state is gone
    assert recs[4]["h"] == 0 and recs[4]["r"] == 2
    assert node.policy.counters()["dram_states_dropped"] > 0


def test_marconi_single_tier_model_is_the_policy_itself():
    """The α-tuning replay model makes the very decisions of a single-tier node running the policy
    with ``candidates=all`` (bug-compatible or not), on the first 300 requests of the default."""
    cfg = SimConfig.from_mapping(cluster_sim.compose(["workload.limit_requests=300"]))
    tr, _, _ = prepare(cfg)
    reqs = [(tr.path(i), int(tr.input_tokens[i])) for i in range(tr.n_requests)]
    cap = 6 * 10**9
    for alpha, bug in ((0.0, False), (1.0, False), (2.0, True)):
        pol = MarconiPolicy(alpha=alpha, candidates="all", bug_compatible=bug)
        node = NodeSim(tr.parent, tr.depth, tr.anchor, tr.flat, tr.chunk_tokens, cfg.model,
                       HardwareConfig(dram_bytes=cap), pol)
        hs = [node.process(p, L, float(tr.arrival_s[i]))["h"] for i, (p, L) in enumerate(reqs)]
        assert pol.c["dram_select_calls"] > 50
        sim = SingleTierMarconi(node.st, cfg.model, tr.chunk_tokens, cap, reqs, bug=bug)
        seen = []
        orig = sim._request
        sim._request = lambda seq, path: seen.append(orig(seq, path)) or seen[-1]
        sim.run(alpha)
        assert seen == hs


def test_marconi_auto_tunes_once_and_picks_the_best_alpha():
    """A 20-chunk document reused every 5 requests among 2-chunk one-offs; the cache holds the
    document and three one-offs. LRU loses the document every time; a FLOP-aware α keeps it.
    R0 = 5 requests at the first eviction; with bootstrap_multiplier 2 the policy tunes after 10,
    replaying them on one tier for each α; the adopted α must be the best of an independent replay
    through the node itself (ties: the smallest)."""
    m = load_model(QN)
    F, S = m.fa_bytes(256), m.state_bytes(256)
    doc = list(range(1000, 1020))
    paths = []
    for rnd in range(12):
        paths.append(doc)
        paths.extend([[10 * rnd + j, 5000 + 10 * rnd + j] for j in range(4)])
    tr = trace_from_paths(paths)
    cap = 20 * F + S + 3 * (2 * F + S)
    node = make_node(tr, m, policy="marconi", policy_params={"bootstrap_multiplier": 2}, dram_bytes=cap)
    recs = run(node, tr, check=False)
    pol = node.policy
    c = pol.counters()
    assert (c["alpha_auto"], c["bootstrap_r0"], c["alpha_tuned_at_request"]) == (1, 5, 10)
    assert len(pol.tune_savings) == len(ALPHA_GRID) == 21
    # independent replays of the first 10 requests through a single-tier node
    saved = []
    for a in ALPHA_GRID:
        n2 = NodeSim(tr.parent, tr.depth, tr.anchor, tr.flat, 256, m, HardwareConfig(dram_bytes=cap),
                     MarconiPolicy(alpha=a, candidates="all"))
        tot = 0.0
        for i in range(10):
            L = int(tr.input_tokens[i])
            h = n2.process(tr.path(i), L, float(tr.arrival_s[i]))["h"]
            tot += m.prefill_flops(0, L) - m.prefill_flops(h * 256, L)
        saved.append(tot)
    assert pol.tune_savings == pytest.approx(saved, rel=1e-12)
    best = max(range(21), key=lambda i: (saved[i], -i))
    assert c["alpha"] == ALPHA_GRID[best] > 0
    # after tuning the document is kept: every later occurrence is a full hit
    assert [recs[i]["h"] for i in range(15, len(paths), 5)] == [20] * 9
    # a fixed α = 0 never hits it
    lru_like = make_node(tr, m, policy="marconi", policy_params={"alpha": 0}, dram_bytes=cap)
    assert all(r["h"] == 0 for r in run(lru_like, tr, check=False))


@pytest.mark.slow
def test_marconi_sample_agrees_with_full_rescan_on_the_default():
    """policies.md §5.3: the 256-candidate sample within 0.005 chunk miss ratio of the reference's
    full rescan, on the bundled default (all 2,404 requests) at α = 1 (at α = 0 both are exact LRU)."""
    out = {}
    for c in ("256", "all"):
        s = cluster_sim.run(cluster_sim.compose(["policy=marconi", "policy.alpha=1.0", f"policy.candidates={c}"]),
                            write=False)
        out[c] = s.fleet["chunk_miss_ratio"]
        assert s.nodes[0]["policy.marconi.dram_state_only_evictions"] > 0
    assert abs(out["256"] - out["all"]) <= 0.005
    assert out["256"] > 0


def test_marconi_bug_compatible_quirks():
    m = load_model(QN)
    ok, bug = _FlopModel(m, 256, bug=False), _FlopModel(m, 256, bug=True)
    assert ok.eff(0, 4) == bug.eff(0, 4)                 # no parent: the MLP quirk subtracts nothing
    d = bug.d_hidden
    assert 1500 < d < 3500                               # Qwen3-Next hidden size is 2048
    L = 4 * 256.0
    extra = bug.n_mlp * (8 * L * d * d - 4 * L * L * d)  # F_mlp(L_par) - F_attn(L_par) per MLP layer
    mem = 8 * 256 * m.kv_bytes_per_token_full + m.state_bytes(8 * 256)
    assert bug.eff(4, 8) == pytest.approx(ok.eff(4, 8) + extra / mem, rel=1e-12)
    # quirk 2: R3 needs 2F+S; the LRU victim is the 10-chunk edge of R1 (10F+S), but the credit is that of
    # the last candidate visited (leaf 20: F+S), so the quirk takes leaf 20 as well
    paths = [list(range(1, 11)), [20], [30, 31]]
    tr = trace_from_paths(paths)
    F, S = m.fa_bytes(256), m.state_bytes(256)
    logs = []
    for flag in (False, True):
        node = make_node(tr, m, policy="marconi", policy_params={"alpha": 0, "bug_compatible": flag},
                         dram_bytes=11 * F + 2 * S)
        logs.append(spy_victims(node, names(tr, paths)))
        run(node, tr)
    edge = ["F10", "S10"] + [f"F{c}" for c in range(9, 0, -1)]
    assert logs == [[(3, DRAM, edge)], [(3, DRAM, edge + ["F20", "S20"])]]


@pytest.mark.parametrize("params,key", [({"alpha": -1}, "policy.alpha"), ({"alpha": "often"}, "policy.alpha"),
                                        ({"candidates": 1}, "policy.candidates"),
                                        ({"candidates": "some"}, "policy.candidates"),
                                        ({"bug_compatible": "maybe"}, "policy.bug_compatible"),
                                        ({"bootstrap_multiplier": 0}, "policy.bootstrap_multiplier"),
                                        ({"beta": 1}, "policy.beta")])
def test_marconi_bad_parameters_name_the_key(params, key):
    with pytest.raises(ConfigError) as e:
        make_policy("marconi", params)
    assert e.value.key == key


# ---------------------------------------------------------------------------------------------
# Workload-aware
# ---------------------------------------------------------------------------------------------

def test_workload_aware_fits_per_category():
    """'hot' touches chunk 1 every 10 s (20 requests); 'cold' references a new chunk each time.
    Refit at t=200 over everything: hot has 20 references and 19 reuses of 10 s; cold has none
    and falls back to the pooled fit (19 reuses over 40 references)."""
    paths, cats, times = [], [], []
    for i in range(20):
        paths.append([1]); cats.append("hot"); times.append(10.0 * i)
        paths.append([100 + i]); cats.append("cold"); times.append(10.0 * i + 5)
    tr = trace_from_paths(paths, arrivals=times)
    node = make_node(tr, LLAMA, policy="workload_aware",
                     policy_params={"categories": "type", "min_samples": 3, "first_fit_s": 1e6, "refit_s": 1e6},
                     dram_bytes="1TB")
    run(node, tr, categories=cats)
    pol = node.policy
    pol._refit(200.0)
    hot, cold = pol.cat_ids["hot"], pol.cat_ids["cold"]
    P, lam, L = pol.fit[hot]
    assert (P, 1 / lam, L) == pytest.approx((19 / 20, 10.0, 10.0))
    assert pol.fit[cold] == pol.pooled == pytest.approx((19 / 40, 0.1, 10.0))
    # the score: P e^{-λΔ}(1 - e^{-λH}) inside the lifespan, 0 beyond it
    p = 2 * int(tr.path(0)[0])
    pol.last_t[p] = 195.0
    assert pol.score(p, hot, 200.0) == pytest.approx(0.95 * math.exp(-0.5) * (1 - math.exp(-6.0)))
    assert pol.score(p, hot, 206.0) == 0.0
    # a window excludes old reuses: at t=1000 with a 100 s window nothing is left -> the prior
    pol.window = 100.0
    pol._refit(1000.0)
    assert pol.fit[hot] == pol.pooled == (1.0, 1 / 600.0, math.inf)


def test_workload_aware_evicts_the_least_likely_reuse_not_the_least_recent():
    """A reuses every 10 s (P=0.9), B every 90 s (P=0.75). At t=200, x (category A, idle 2 s) and
    y (category B, idle 1 s) fill DRAM; a third request needs room. LRU would evict x; the scores
    are 0.9·e^{-0.2}·(1-e^{-6}) = 0.735 for x and 0.75·e^{-1/90}·(1-e^{-2/3}) = 0.361 for y, so y
    goes, and is written back to SSD."""
    paths, cats, times = [], [], []
    for i in range(10):
        paths.append([1]); cats.append("A"); times.append(10.0 * i)
    for i in range(4):
        paths.append([2]); cats.append("B"); times.append(5.0 + 90 * i)
    order = np.argsort(times, kind="stable")
    paths = [paths[i] for i in order] + [[3], [4], [5]]
    cats = [cats[i] for i in order] + ["A", "B", "A"]
    times = [times[i] for i in order] + [300.0, 301.0, 302.0]
    tr = trace_from_paths(paths, arrivals=times)
    F = load_model(LLAMA).fa_bytes(256)
    node = make_node(tr, LLAMA, policy="workload_aware",
                     policy_params={"categories": "type", "min_samples": 3, "lifespan": "none",
                                    "first_fit_s": 290, "refit_s": 1e6},
                     dram_bytes=2 * F, ssd_bytes="1TB")
    label = names(tr, paths)
    log = spy_victims(node, label)
    run(node, tr, categories=cats)
    pol = node.policy
    a, b = pol.fit[pol.cat_ids["A"]], pol.fit[pol.cat_ids["B"]]
    assert a == pytest.approx((0.9, 0.1, math.inf)) and b == pytest.approx((0.75, 1 / 90, math.inf))
    assert log[-1] == (len(paths), DRAM, ["F4"])
    assert node.stats.ssd_bytes_written_fa > 0 and pol.counters()["dram_victims_demoted"] > 0


def test_workload_aware_dead_blocks_leave_tail_first():
    """A's chunk 1 is reused every 10 s (lifespan 10 s); B has too few reuses and shares the pooled fit.
    R12 [10,11,12] at t=201 evicts chunk 1 (dead since t=100) rather than chunk 2 (B, idle 1 s).
    At t=300 both heads are dead: chunk 12 (A, depth 3, t=201) leaves before chunk 2 (B, depth 1,
    t=200), although chunk 2 is older: the larger offset goes first."""
    paths, cats, times = [], [], []
    for i in range(10):
        paths.append([1]); cats.append("A"); times.append(10.0 * i)
    paths += [[2], [10, 11, 12], [20]]
    cats += ["B", "A", "A"]
    times += [200.0, 201.0, 300.0]
    tr = trace_from_paths(paths, arrivals=times)
    F = load_model(LLAMA).fa_bytes(256)
    node = make_node(tr, LLAMA, policy="workload_aware",
                     policy_params={"categories": "type", "min_samples": 3, "first_fit_s": 150, "refit_s": 1e6},
                     dram_bytes=4 * F)
    log = spy_victims(node, names(tr, paths))
    run(node, tr, categories=cats)
    assert log == [(12, DRAM, ["F1"]), (13, DRAM, ["F12"])]
    assert node.policy.counters()["dead_victims"] >= 1


def test_workload_aware_categories():
    pol = make_policy("workload_aware", {})
    meta = lambda cat, turn: RequestMeta(1, 0.0, -1, cat, turn, 0, 0, np.zeros(0), 0, 0)
    assert pol.category_of(meta("text", 2)) == "text_2"
    assert pol.category_of(meta("text", 9)) == "text_4"          # turns above max_turn share one
    assert pol.category_of(meta(None, 0)) == "none_0"
    assert make_policy("workload_aware", {"categories": "first_later"}).category_of(meta("agent", 3)) == "agent_later"
    # requests without a category form one category
    tr = trace_from_paths([[1], [2], [1, 3]])
    node = make_node(tr, LLAMA, policy="workload_aware", dram_bytes="1TB")
    run(node, tr)
    assert node.policy.cat_names == ["none_0"]
    with pytest.raises(ConfigError) as e:
        make_policy("workload_aware", {"categories": "colour"})
    assert e.value.key == "policy.categories"
    with pytest.raises(ConfigError) as e:
        make_policy("workload_aware", {"lifespan_q": 2})
    assert e.value.key == "policy.lifespan_q"


def test_workload_aware_with_one_category_is_lru():
    """policies.md §6.1-6.2: one LRU queue per category, the victim is the argmin over the queue *heads*
    of (score, -offset); within a category the score falls with idle time, so the head is the least
    likely reuse. With a single category (Mooncake: no type, no turn) there is one head and the policy
    is exactly LRU, write-back included (docs/decisions.md). With categories the fits do act."""
    def fleet(ov):
        f = cluster_sim.run(cluster_sim.compose([*ov, "workload.limit_requests=600"]), write=False).fleet
        return {k: v for k, v in f.items() if not k.startswith("policy.") and k not in WALL}

    lru = fleet(["policy=lru"])
    assert fleet(["policy=workload_aware", "policy.categories=none"]) == lru
    assert fleet(["policy=workload_aware"]) != lru


# ---------------------------------------------------------------------------------------------
# Oracle
# ---------------------------------------------------------------------------------------------

def test_next_use_tables():
    """Stream: R0 [1,2]  R1 [1,3]  R2 [1,2,4]  R3 [5]  R4 [1,2]   (chunk ids 0..4 in order)."""
    m = load_model(QN, state_checkpoints="last_and_branch")
    tr = trace_from_paths([[1, 2], [1, 3], [1, 2, 4], [5], [1, 2]])
    f_fa, nxt_fa, f_st, st_use, nxt_st, hinf = next_use_tables(tr.offsets, tr.flat, tr.n_chunks, m, "path")
    ch = chunk_ids(tr, [[1, 2], [1, 3], [1, 2, 4], [5], [1, 2]])
    INF = 5
    assert [int(f_fa[ch[n]]) for n in (1, 2, 3, 4, 5)] == [0, 0, 1, 2, 3]
    # after R0, chunk 1 is next used by R1, chunk 2 by R2
    assert nxt_fa[tr.offsets[0]:tr.offsets[1]].tolist() == [1, 2]
    assert nxt_fa[tr.offsets[4]:tr.offsets[5]].tolist() == [INF, INF]
    # unbounded replay: R0 saves S2; R1 branches at 1 (S1, S3); R2 resumes at S2; R4 resumes at S2
    assert hinf.tolist() == [0, 0, 2, 0, 2]
    assert st_use.tolist() == [-1, -1, ch[2], -1, ch[2]]
    assert int(f_st[ch[2]]) == 2 and int(nxt_st[2]) == 4 and int(nxt_st[4]) == INF
    assert int(f_st[ch[1]]) == INF
    # fa_use=hit: R0 and R1 use chunk 1 only within their resume prefix (h=0): first use R2
    f_hit, nxt_hit, *_ = next_use_tables(tr.offsets, tr.flat, tr.n_chunks, m, "hit")
    assert int(f_hit[ch[1]]) == 2 and int(f_hit[ch[3]]) == INF
    # state_use=path: a STATE is used by every later request passing through its chunk
    *_, f_st2, _, nxt_st2, _ = next_use_tables(tr.offsets, tr.flat, tr.n_chunks, m, "path", "path")
    assert int(f_st2[ch[1]]) == 0 and nxt_st2[tr.offsets[1]:tr.offsets[2]].tolist() == [2, INF]


@pytest.mark.parametrize("model", [LLAMA, QN])
def test_oracle_writes_every_payload_later_hit_from_ssd_and_nothing_else(model):
    """DRAM holds one request; [1,2] and [3,4] come back after being pushed out, [5,6], [7,8] and
    [9,10] never do. The oracle must write exactly the payloads it later serves from SSD (and serve
    everything reused: the floor miss ratio), and write none of the one-offs."""
    spec = load_model(model)
    F = spec.fa_bytes(256)
    S = spec.state_bytes(512) if spec.has_state else 0
    paths = [[1, 2], [3, 4], [5, 6], [1, 2], [7, 8], [3, 4], [9, 10], [1, 2]]
    tr = trace_from_paths(paths)
    node = oracle_node(tr, spec, dram_bytes=2 * F + S, ssd_bytes="1TB")
    st_ = node.st
    written = []
    orig = node._count_ssd_write
    node._count_ssd_write = lambda p: (written.append(p), orig(p))
    served = set()
    for i in range(tr.n_requests):
        path = tr.path(i)
        before = st_.res.copy()
        h = node.process(path, int(tr.input_tokens[i]), float(tr.arrival_s[i]))["h"]
        for p in [2 * int(c) for c in path[:h]] + ([2 * int(path[h - 1]) + 1] if h and spec.has_state else []):
            if before[p] == 4:
                served.add(p)
        st_.check_invariants()
    node.finish()
    ch = chunk_ids(tr, paths)
    reused = {2 * ch[n] for n in (1, 2, 3, 4)} | ({2 * ch[2] + 1, 2 * ch[4] + 1} if spec.has_state else set())
    assert set(written) == served == reused
    assert len(written) == len(set(written))
    s = node.stats
    assert s.ssd_admissions_hit_fa + s.ssd_admissions_hit_state == s.ssd_admissions_fa + s.ssd_admissions_state
    floor, _ = floor_pass(tr.offsets, tr.flat, tr.n_chunks, tr.input_tokens, tr.counted, spec, 256, node.cost)
    assert s.chunk_misses / s.chunks_requested == floor
    # LRU on the same stream writes the one-offs too
    lru = make_node(tr, spec, policy="lru", dram_bytes=2 * F + S, ssd_bytes="1TB")
    run(lru, tr)
    assert lru.stats.ssd_admissions_fa > node.stats.ssd_admissions_fa


def test_oracle_belady_order_and_admission():
    """DRAM of 3 chunks, SSD of 1 chunk (llama, FA only). R4 [4] evicts the chunk never used again
    (3, dropped); R5 [5] the one used farthest ahead (4 at R8, vs 2 at R6 and 1 at R7), written to
    the empty SSD; R8 hits it there and evicts 1 (1, 2 and 5 are never used again: the lowest id)."""
    paths = [[1], [2], [3], [4], [5], [2], [1], [4]]
    tr = trace_from_paths(paths)
    F = load_model(LLAMA).fa_bytes(256)
    node = oracle_node(tr, LLAMA, dram_bytes=3 * F, ssd_bytes=F)
    log = spy_victims(node, names(tr, paths))
    recs = run(node, tr)
    assert [r["h"] for r in recs] == [0, 0, 0, 0, 0, 1, 1, 1]
    assert log == [(4, DRAM, ["F3"]), (5, DRAM, ["F4"]), (8, DRAM, ["F1"])]
    assert node.stats.hits["hits_ssd_fa"] == 1 and node.stats.ssd_admissions_fa == 1
    c = node.policy.counters()
    assert c["dram_written"] == 1 and c["dram_dropped_never_used"] == 2
    # ties (all never used again): the larger STATEs first, then the lower id
    m = load_model(QN)
    F, S = m.fa_bytes(256), m.state_bytes(256)
    paths = [[1], [2], [3]]
    tr = trace_from_paths(paths)
    node = oracle_node(tr, m, dram_bytes=2 * F + 2 * S)
    log = spy_victims(node, names(tr, paths))
    run(node, tr)
    assert log == [(3, DRAM, ["S1", "S2"])]
    F = load_model(LLAMA).fa_bytes(256)
    # SSD full of a payload used at R4; a DRAM victim used only at R5 is not admitted
    paths = [[1], [2], [3], [1], [2]]
    tr = trace_from_paths(paths)
    node = oracle_node(tr, LLAMA, dram_bytes=F, ssd_bytes=F)
    log = spy_victims(node, names(tr, paths))
    recs = run(node, tr)
    assert log[:2] == [(2, DRAM, ["F1"]), (3, DRAM, ["F2"])]
    assert node.stats.ssd_admissions_fa == 1 and node.policy.counters()["dram_dropped_no_room"] == 1
    assert [r["h"] for r in recs] == [0, 0, 0, 1, 0]


def test_oracle_needs_the_future():
    tr = trace_from_paths([[1]])
    with pytest.raises(ValueError, match="future"):
        make_node(tr, LLAMA, policy="oracle", dram_bytes="1GB")
    with pytest.raises(ConfigError) as e:
        make_policy("oracle", {"fa_use": "sometimes"})
    assert e.value.key == "policy.fa_use"
    with pytest.raises(ConfigError) as e:
        make_policy("oracle", {"state_use": "always"})
    assert e.value.key == "policy.state_use"


# ---------------------------------------------------------------------------------------------
# All three
# ---------------------------------------------------------------------------------------------

WALL = ("sim_wall_s", "sim_chunk_refs_per_s")


def _summary(name, extra=()):
    s = cluster_sim.run(cluster_sim.compose([f"policy={name}", "workload.limit_requests=500", "fleet.nodes=2",
                                             "fleet.router=round_robin", *extra]), write=False).to_dict()
    for part in [s["fleet"], *s["nodes"]]:
        for k in WALL:
            part.pop(k)
    return s["fleet"], s["nodes"]


@pytest.mark.parametrize("name,extra", [("marconi", ("policy.alpha=1.0",)), ("marconi", ()),
                                        ("workload_aware", ()), ("oracle", ())])
def test_same_seed_same_results(name, extra):
    a = _summary(name, extra)
    assert a == _summary(name, extra)
    assert a[0]["requests"] == 500
    pol = {k: v for k, v in a[1][0].items() if k.startswith(f"policy.{name}.")}
    assert pol                                   # the policy reports its counters per node


MODELS = [QN, LLAMA, "gemma3_27b", "kimi_linear_48b_a3b"]
VARIANTS = [("marconi", {"alpha": 1.0, "candidates": "all"}),
            ("marconi", {"alpha": 0.5, "candidates": 4, "bug_compatible": True}),
            ("marconi", {"alpha": "auto", "bootstrap_multiplier": 1, "candidates": 2}),
            ("workload_aware", {"admit_threshold": 0.05, "categories": "none", "lifespan": "mean_multiple",
                                "first_fit_s": 1, "min_samples": 2}),
            ("workload_aware", {"first_fit_s": 2, "min_samples": 1, "horizon_s": 10}),
            ("oracle", {"fa_use": "hit"}),
            ("oracle", {"state_use": "path"})]


@st.composite
def workloads(draw):
    paths = branching_paths(draw, max_requests=30, max_extension=4)
    n = len(paths)
    gaps = draw(st.lists(st.sampled_from([0.0, 0.5, 3.0, 30.0]), min_size=n, max_size=n))
    cats = draw(st.lists(st.sampled_from(["text", "agent", None]), min_size=n, max_size=n))
    model = draw(st.sampled_from(MODELS))
    mode = draw(st.sampled_from(["last", "last_and_branch", "every_chunk"]))
    caps = [draw(st.integers(0, 10)) for _ in range(3)]
    return paths, np.cumsum(gaps), cats, model, mode, caps


@pytest.mark.parametrize("name,params", VARIANTS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(VARIANTS)])
@settings(max_examples=30)
@given(w=workloads())
def test_invariants_hold_for_every_knob(name, params, w):
    paths, arrivals, cats, model_name, mode, caps = w
    model = load_model(model_name, state_checkpoints=mode)
    tr = trace_from_paths(paths, arrivals=arrivals)
    F = model.fa_bytes(256)
    unit = F + (model.state_bytes(256) // 3 if model.has_state else 0)
    hw = dict(hbm_cache_bytes=caps[0] * unit, dram_bytes=caps[1] * unit, ssd_bytes=caps[2] * unit)
    pol = make_policy(name, params)
    fut = FutureStream(offsets=tr.offsets, flat=tr.flat, arrival_s=tr.arrival_s) if pol.needs_future else None
    node = NodeSim(tr.parent, tr.depth, tr.anchor, tr.flat, 256, model, HardwareConfig.from_mapping(hw), pol,
                   future=fut)
    for i in range(tr.n_requests):
        node.process(tr.path(i), int(tr.input_tokens[i]), float(tr.arrival_s[i]), category=cats[i], turn=1 + i % 3)
        node.st.check_invariants()
    stats = node.finish()
    if name == "marconi" and caps[1] > 0:      # states are dropped on DRAM eviction (with no DRAM, HBM demotes to SSD)
        assert stats.ssd_bytes_written_state == 0
    for k, v in stats.policy.items():
        assert np.isfinite(v)


# ---- oracle_admission (policies.md §9.7) -------------------------------------------------------
def _run_policy(tr, model, policy, **hw):
    base = [f"model={model}", "cache.chunk_tokens=256", "hardware.hbm_cache_bytes=0",
            *(f"hardware.{k}={v}" for k, v in hw.items()), f"policy={policy}"]
    return cluster_sim.run(cluster_sim.compose(base), trace=tr, write=False).fleet


def test_oracle_admission_writes_only_copies_hit_from_ssd_and_evicts_like_lru():
    """[1,2] and [3,4] come back after DRAM pushed them out, the one-offs never do. LRU writes
    every DRAM victim; oracle_admission, with the same LRU eviction, writes exactly the copies
    later served from the SSD (write-hit fraction 1.0 by construction) and loses no hit."""
    F = load_model(LLAMA).fa_bytes(256)
    paths = [[1, 2], [3, 4], [5, 6], [1, 2], [7, 8], [3, 4], [9, 10], [1, 2]]
    tr = trace_from_paths(paths)
    lru = _run_policy(tr, "llama3_1_70b", "lru", dram_bytes=2 * F, ssd_bytes="1TB")
    oa = _run_policy(tr, "llama3_1_70b", "oracle_admission", dram_bytes=2 * F, ssd_bytes="1TB")
    assert oa["ssd_write_hit_fraction"] == 1.0 and lru["ssd_write_hit_fraction"] < 1.0
    assert oa["ssd_bytes_written"] == 4 * F          # [1,2] and [3,4], once each
    assert oa["chunk_miss_ratio"] == lru["chunk_miss_ratio"]
    assert oa["policy.oracle_admission.converged"] == 1


def test_oracle_admission_evicts_exactly_like_lru():
    """When every DRAM victim is later served from the SSD there is nothing to refuse: the same
    victims, the same writes, the same figures as lru."""
    F = load_model(LLAMA).fa_bytes(256)
    paths = [[1, 2], [3, 4], [5, 6], [1, 2], [3, 4], [5, 6], [1, 2, 7], [3, 4], [5, 6], [1, 2, 7]]
    tr = trace_from_paths(paths)
    base = ["model=llama3_1_70b", "cache.chunk_tokens=256", "hardware.hbm_cache_bytes=0",
            f"hardware.dram_bytes={2 * F}", "hardware.ssd_bytes=1TB"]
    lru = cluster_sim.run(cluster_sim.compose(base + ["policy=lru"]), trace=tr, write=False).fleet
    oa = cluster_sim.run(cluster_sim.compose(base + ["policy=oracle_admission"]), trace=tr, write=False).fleet
    assert lru["ssd_write_hit_fraction"] == 1.0 and lru["ssd_bytes_written"] == 6 * F
    for k in ("chunk_miss_ratio", "ssd_bytes_written", "ssd_write_hit_fraction", "hits_ssd_fa", "hits_dram_fa",
              "load_latency_mean_s"):
        assert oa[k] == lru[k], k
    assert oa["policy.oracle_admission.rejected_never_used"] == oa["policy.oracle_admission.rejected_unused_before"] == 0


@st.composite
def _admission_case(draw):
    return (branching_paths(draw, max_requests=30), draw(st.integers(1, 6)), draw(st.integers(0, 10)),
            draw(st.sampled_from(["llama3_1_70b", "qwen3_next_80b_a3b"])))


@given(_admission_case())
def test_oracle_admission_never_writes_more_than_lru_and_hits_every_write_at_its_fixed_point(case):
    paths, dram, ssd, model = case
    m = load_model(model)
    F = m.fa_bytes(256)
    S = m.state_bytes(512) if m.has_state else 0
    tr = trace_from_paths(paths)
    lru = _run_policy(tr, model, "lru", dram_bytes=dram * F + S, ssd_bytes=ssd * F)
    oa = _run_policy(tr, model, "oracle_admission", dram_bytes=dram * F + S, ssd_bytes=ssd * F)
    assert oa["ssd_bytes_written"] <= lru["ssd_bytes_written"]
    if oa["policy.oracle_admission.converged"] and oa["ssd_bytes_written"]:
        assert oa["ssd_write_hit_fraction"] == 1.0
