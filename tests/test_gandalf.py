"""Gandalf (policies.md §2): scripted scenarios with hand-computed costs, and its limits."""
from __future__ import annotations

import math

import pytest

import cluster_sim
from cluster_sim.model import load_model

from simhelpers import make_node, trace_from_paths

QN = "qwen3_next_80b_a3b"
HW = dict(gpus_per_node=8, gpu_flops=989e12, mfu=0.4, gpu_usd_per_hour=3.0, host_link_bytes_per_s=400e9,
          ssd_read_bytes_per_s=104e9, ssd_read_latency_s=1e-4, ssd={"dwpd": 1, "warranty_years": 5, "usd_per_tb": 330})


# the hand computations below are of the paper's estimator (policies.md §2.3): policy=gandalf_paper
PAPER = {"reuse": "rate", "objective": "dollars"}


def run_paths(paths, arrivals, *, dram, ssd="1TB", model=None, **params):
    m = model or load_model(QN, state_checkpoints="last")
    tr = trace_from_paths(paths, arrivals=arrivals)
    node = make_node(tr, m, policy="gandalf", policy_params={**PAPER, **params}, dram_bytes=dram, ssd_bytes=ssd,
                     **HW)
    recs = []
    for i in range(tr.n_requests):
        recs.append(node.process(tr.path(i), int(tr.input_tokens[i]), float(tr.arrival_s[i])))
        node.st.check_invariants()
    node.finish()
    ids = {}
    for i, p in enumerate(paths):
        for k in range(len(p)):
            ids[tuple(p[:k + 1])] = int(tr.path(i)[k])
    return node, recs, ids


def test_fresh_fa_is_moved_and_one_off_state_dropped_by_hand():
    m = load_model(QN, state_checkpoints="last")
    F, S = m.fa_bytes(256), m.state_bytes(256)
    H, A1, A2 = 1, 2, 3
    # R1 creates H, A1 and A1's state; R2 branches at H: DRAM (2F + S) must free F + S,
    # and its only unpinned leaves are A1 and the one-off state sA1
    node, recs, ids = run_paths([[H, A1], [H, A2]], [0.0, 1.0], dram=2 * F + S)
    pol, st = node.policy, node.st
    a1 = ids[(H, A1)]
    # hand-computed costs at t = 1 (g in $ per node-second; recompute in node-seconds)
    g = 3.0 * 8 / 3600
    rate = 8 * 989e12 * 0.4
    c1 = m.prefill_flops(0, 256) / rate
    c2 = m.prefill_flops(256, 512) / rate
    decay = math.exp(-1.0 / 600)
    e_fa = (0 + (1 / 600) * 600) / (0 + 600) * 600 * decay          # fresh chunk: the prior, one hit
    e_state = (0 + 1) / (1 + 2) * decay                               # state prior: (demanded+1)/(created+2)
    j_drop_fa = e_fa * g * c2
    j_drop_state = e_state * g * (c1 + c2)                            # back to the root: no ancestor state
    cw = 330 * 1.0 / (1 * 1e12 * 365 * 5)                             # $ per byte written (1 TB, 1 DWPD, 5 y)
    fee_state = cw * S
    fee_fa = cw * F
    assert pol.j_drop(2 * a1, 1.0) == pytest.approx(j_drop_fa, rel=1e-9)
    # the state: dropping is cheaper per byte than paying its write fee
    assert j_drop_state / S < fee_state / S
    # the FA chunk: moving (fee + slower loads) is cheaper than recomputing it
    ld = (1e-4 + F / 104e9 + F / 400e9) - F / 400e9
    assert (fee_fa + e_fa * g * ld) < j_drop_fa
    c = pol.counters()
    assert c["moves_fa"] == 1 and c["drops_state"] == 1 and c["moves_state"] == 0 and c["drops_fa"] == 0
    assert st.res[2 * a1] == 4                      # A1 now only on SSD
    assert st.res[2 * a1 + 1] == 0                  # its one-off state is gone, never written
    assert node.stats.ssd_bytes_written_fa == F and node.stats.ssd_bytes_written_state == 0


def hot_state_paths():
    # an 8-chunk prompt whose end state is demanded by five later requests; then a newcomer
    # pushes it out of DRAM; then it comes back from SSD (copied into DRAM) and is pushed out
    # again. The state sits 2,048 tokens deep: recomputing from the root costs far more than
    # loading it, so keeping it is worth its write fee (a state one chunk deep is not: on this
    # node loading 38 MiB takes about as long as recomputing 256 tokens of a 3B-active model).
    S1 = list(range(1, 9))
    B = list(range(11, 19))
    C = list(range(21, 29))
    paths = [S1] * 6 + [B, S1, C]
    arrivals = [0, 1, 2, 3, 4, 5, 6, 7, 8]
    return paths, arrivals


def test_hot_state_moves_under_capacity_aware_and_drops_under_strict():
    m = load_model(QN, state_checkpoints="last")
    F, S = m.fa_bytes(256), m.state_bytes(256)
    paths, arrivals = hot_state_paths()
    node, recs, ids = run_paths(paths, arrivals, dram=8 * F + S)
    c = node.policy.counters()
    assert c["moves_state"] > 0
    assert recs[7]["h"] == 8                                   # S1 resumed from its state on SSD
    assert node.stats.hits["hits_ssd_state"] == 1
    node_s, recs_s, _ = run_paths(paths, arrivals, dram=8 * F + S, placement="strict")
    cs = node_s.policy.counters()
    assert cs["moves_state"] == 0 and node_s.stats.ssd_bytes_written_state == 0
    assert recs_s[7]["h"] == 0                                 # strict dropped the state: no resume
    assert node_s.stats.ssd_bytes_written_fa > 0               # strict writes FA at DRAM entry


def test_move_with_valid_ssd_copy_writes_nothing():
    m = load_model(QN, state_checkpoints="last")
    F, S = m.fa_bytes(256), m.state_bytes(256)
    paths, arrivals = hot_state_paths()
    node, recs, ids = run_paths(paths[:8], arrivals[:8], dram=8 * F + S)
    before = node.policy.counters()
    node2, recs2, _ = run_paths(paths, arrivals, dram=8 * F + S)
    c = node2.policy.counters()
    # the last request pushes S1 (its 8 FA chunks and its state, all with valid SSD copies) out
    # again: nine free moves, and not one byte written for them
    assert c["moves_free"] - before["moves_free"] == 9
    s1, s2 = node.stats, node2.stats
    assert s2.ssd_bytes_written_state == s1.ssd_bytes_written_state
    assert s2.ssd_bytes_written_fa == s1.ssd_bytes_written_fa
    assert c["moves_fa"] - before["moves_fa"] == 8 and c["moves_state"] - before["moves_state"] == 1


def test_alpha_infinite_never_writes_without_a_valid_copy():
    f = cluster_sim.run(cluster_sim.compose(["policy=gandalf", "policy.alpha=inf"]), write=False).fleet
    assert f["ssd_bytes_written"] == 0
    assert f["policy.gandalf.moves_fa"] == f["policy.gandalf.moves_free"]


def test_alpha_zero_with_ample_ssd_drops_no_fa_and_matches_lru():
    g = cluster_sim.run(cluster_sim.compose(["policy=gandalf", "policy.alpha=0", "hardware.ssd_bytes=2TB"]),
                        write=False).fleet
    lru = cluster_sim.run(cluster_sim.compose(["policy=lru", "hardware.ssd_bytes=2TB"]), write=False).fleet
    assert g["policy.gandalf.drops_fa"] == 0
    assert g["chunk_miss_ratio"] <= lru["chunk_miss_ratio"] + 0.001


@pytest.mark.slow
def test_alpha_sweep_is_monotone_on_the_default_trace():
    rows = []
    for a in (0, 1, 4, 16, 64):
        f = cluster_sim.run(cluster_sim.compose(["policy=gandalf", f"policy.alpha={a}"]), write=False).fleet
        rows.append((f["ssd_bytes_written"], f["chunk_miss_ratio"]))
    for (w0, m0), (w1, m1) in zip(rows, rows[1:]):
        assert w1 <= w0 and m1 >= m0 - 1e-12, rows


@pytest.mark.parametrize("bad,key", [({"alpha": -1}, "policy.alpha"), ({"placement": "loose"}, "policy.placement"),
                                     ({"tau_s": 0}, "policy.tau_s"), ({"nope": 1}, "policy.nope")])
def test_bad_parameters_name_the_key(bad, key):
    from cluster_sim.errors import ConfigError
    from cluster_sim.policies.base import make_policy
    with pytest.raises(ConfigError, match=key):
        make_policy("gandalf", bad)


def test_population_reuse_estimate_by_hand():
    # policy.reuse=population: P(an FA chunk is touched again within H | earlier touches), over
    # references whose window has closed. H = τ = 100 s. A is touched at 0 and 10 (the first
    # touch is reused within H), B once at 20; the request at 500 closes all three windows:
    # bucket 0 (first touches): 2 references, 1 reused -> (1+1)/(2+2); bucket 1: 1, 0 -> 1/3
    A, B, C = 1, 2, 3
    node, recs, ids = run_paths([[A], [A], [B], [C]], [0.0, 10.0, 20.0, 500.0], dram="1TB",
                                reuse="population", tau_s=100)
    pol = node.policy
    assert pol.pop_n[:2] == [2, 1] and pol.pop_r[:2] == [1, 0]
    assert pol.pop_p[0] == pytest.approx(0.5) and pol.pop_p[1] == pytest.approx(1 / 3)
    a = 2 * ids[(A,)]
    # A's last touch had one earlier touch: E_hits at its last touch is P(bucket 1), then decays
    assert pol.e_hits(a, 10.0) == pytest.approx(1 / 3)
    assert pol.e_hits(a, 110.0) == pytest.approx(math.exp(-1) / 3)
    with pytest.raises(cluster_sim.errors.ConfigError, match="policy.reuse"):
        run_paths([[A]], [0.0], dram="1TB", reuse="oracle")


def test_move_prices_victims_that_free_their_parents_on_ssd():
    # pure attention, DRAM and SSD of three chunks each. R1's chain 1-2-3 is moved to the SSD by R2,
    # where only its leaf 3 is evictable at first. R5 needs R2's chain 4-5-6 moved too: pricing each
    # move must see that evicting 3 frees 2, and then 1 (a chain leaves the SSD leaf-first); a pool
    # that saw only the current SSD leaves could not price the second move, and 5 (whose child 6 is
    # already on the SSD) could be neither dropped nor moved: the selection failed and R5's insert
    # was trimmed instead.
    m = load_model("llama3_1_70b")
    F = m.fa_bytes(256)
    # 4-5-6 is touched again just before R3, while 1-2-3 has decayed for 50 minutes: moving 4-5-6
    # (fee + the small value of the old chain) is cheaper than recomputing it
    node, recs, ids = run_paths([[1, 2, 3], [4, 5, 6], [4, 5, 6], [4, 5, 6], [7, 8, 9]],
                                [0.0, 1.0, 2990.0, 2995.0, 3000.0], dram=3 * F, ssd=3 * F, model=m)
    st = node.st
    assert [int(st.res[2 * ids[(4,)]]), int(st.res[2 * ids[(4, 5)]]), int(st.res[2 * ids[(4, 5, 6)]])] == [4, 4, 4]
    assert all(st.res[2 * ids[k]] == 0 for k in [(1,), (1, 2), (1, 2, 3)])
    assert all(st.res[2 * ids[k]] == 2 for k in [(7,), (7, 8), (7, 8, 9)])
    assert node.stats.insert_skipped_bytes == 0
    c = node.policy.counters()
    assert c["moves_fa"] == 6 and c["drops_fa"] == 0 and c["ssd_evictions"] == 3


@pytest.mark.parametrize("params", [PAPER, {}], ids=["paper", "default"])
def test_a_just_hit_ssd_copy_is_not_evicted_to_be_rewritten(params):
    """A hot path A returns between one-off paths. When A is hit from the SSD its chunks are copied
    into DRAM, so the SSD copies are no longer the last ones. They must keep their value: pricing
    them at the fee to write them again (the reconstruction before decision 31) made the SSD evict
    exactly those copies, and rewrite them at A's next DRAM eviction; on the whole WEKA trace 4.2 M
    of 5.0 M FA writes were such rewrites. Here that cost two rewrites and two of A's hits."""
    m = load_model("llama3_1_70b")
    F = m.fa_bytes(256)
    A, B, C, D, E = ([k * 10 + i for i in range(1, 5)] for k in range(5))
    paths = [A, B, A, C, A, D, A, E, A]
    tr = trace_from_paths(paths, arrivals=[10.0 * i for i in range(len(paths))])
    node = make_node(tr, m, policy="gandalf", policy_params=params, dram_bytes=6 * F, ssd_bytes=6 * F,
                     hbm_cache_bytes=0, **HW)
    writes: dict[int, int] = {}
    count = node._count_ssd_write

    def counting(p):
        writes[p] = writes.get(p, 0) + 1
        count(p)

    node._count_ssd_write = counting
    recs = []
    for i in range(tr.n_requests):
        recs.append(node.process(tr.path(i), int(tr.input_tokens[i]), float(tr.arrival_s[i])))
        node.st.check_invariants()
    assert max(writes.values()) == 1, "a payload was written to the SSD twice"
    assert [r["h"] for r in recs[2::2]] == [4, 4, 4, 4]       # every return of A is a full hit
