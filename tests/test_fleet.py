"""The fleet: routers, epochs, backends that agree bit for bit (simulation-model §8)."""
from __future__ import annotations

import numpy as np
import pytest

import cluster_sim
from cluster_sim.errors import UserError
from cluster_sim.router import ROUTERS as ROUTER_CLASSES

from conftest import MOONCAKE, needs_mooncake

ROUTERS = list(ROUTER_CLASSES)
BASE = ["fleet.nodes=4", "workload.limit_requests=500"]


def comparable(summary):
    d = summary.to_dict()
    out = {"fleet": dict(d["fleet"]), "nodes": [dict(n) for n in d["nodes"]]}
    for sec in [out["fleet"], *out["nodes"]]:
        sec.pop("sim_wall_s")
        sec.pop("sim_chunk_refs_per_s")
    return out


@pytest.fixture(scope="module")
def ray_session():
    ray = pytest.importorskip("ray")
    from cluster_sim.distributed import ensure_ray
    ensure_ray("local")
    yield ray


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.parametrize("router", ROUTERS)
def test_backends_and_packings_are_bit_identical(ray_session, router):
    ov = BASE + [f"fleet.router={router}"]
    local = cluster_sim.run(cluster_sim.compose(ov), write=False)
    assert local.run["actor_processes"] == 0
    one = cluster_sim.run(cluster_sim.compose(ov + ["fleet.backend=ray", "fleet.ray_workers=1"]), write=False)
    two = cluster_sim.run(cluster_sim.compose(ov + ["fleet.backend=ray", "fleet.ray_workers=2"]), write=False)
    assert one.run["actor_processes"] == 1 and two.run["actor_processes"] == 2
    assert comparable(local) == comparable(one) == comparable(two)


@pytest.mark.ray
@pytest.mark.slow
def test_kv_events_feedback_is_identical_across_backends(ray_session):
    ov = BASE + ["fleet.router=kv_aware", "fleet.sync=kv_events", "fleet.epoch_s=30"]
    local = cluster_sim.run(cluster_sim.compose(ov), write=False)
    remote = cluster_sim.run(cluster_sim.compose(ov + ["fleet.backend=ray", "fleet.ray_workers=2"]), write=False)
    assert comparable(local) == comparable(remote)


@pytest.mark.parametrize("policy", ["lru", "gandalf"])
def test_kv_events_fleet_is_identical_on_both_engines(policy):
    """A kv_aware fleet fed back at every barrier (decision 160): the compiled nodes report the chunks
    the interpreted ones do, so the router routes every request alike and every figure agrees."""
    from simhelpers import assert_runs_identical
    ov = BASE + [f"policy={policy}", "fleet.router=kv_aware", "fleet.sync=kv_events", "fleet.epoch_s=5",
                 "output.requests=true"]
    a = cluster_sim.run(cluster_sim.compose(ov + ["cache.engine=python"]), write=False)
    b = cluster_sim.run(cluster_sim.compose(ov + ["cache.engine=numba"]), write=False)
    assert a.run["engine"] == "python" and b.run["engine"] == "numba"
    assert_runs_identical(a, b)


@pytest.mark.ray
def test_dead_actor_fails_the_run_naming_node_and_epoch(ray_session, tmp_path):
    out = tmp_path / "s.json"
    cfg = cluster_sim.compose(BASE + ["fleet.backend=ray", "+fleet.inject_failure={node: 2, epoch: 3}",
                                      f"output.summary_path={out}"])
    with pytest.raises(UserError, match=r"node 2 .*died during epoch 3"):
        cluster_sim.run(cfg)
    assert not out.exists()


def test_inprocess_failure_names_node_and_epoch():
    cfg = cluster_sim.compose(BASE + ["+fleet.inject_failure={node: 1, epoch: 2}"])
    with pytest.raises(UserError, match=r"node 1 failed during epoch 2"):
        cluster_sim.run(cfg, write=False)


def test_session_affinity_keeps_each_session_on_one_node():
    from cluster_sim.api import prepare
    from cluster_sim.config import SimConfig
    from cluster_sim.fleet import run_fleet

    cfg = SimConfig.from_mapping(cluster_sim.compose(["fleet.nodes=4", "fleet.router=session_affinity"]))
    trace, _, _ = prepare(cfg)
    raw = run_fleet(trace, cfg)
    assign = raw["assign"]
    for sid in np.unique(trace.session_id):
        assert len(np.unique(assign[trace.session_id == sid])) == 1
    assert len(np.unique(assign)) == 4          # and the sessions spread over the fleet


@pytest.mark.parametrize("router", ROUTERS)
def test_routing_ahead_in_one_pass_equals_routing_request_by_request(router):
    # fleet.sync=none routes the whole trace with route_ahead(); a router's fast pass must give
    # the nodes that route() + dispatched() give in order, with and without session ids
    from cluster_sim.api import prepare
    from cluster_sim.config import SimConfig
    from cluster_sim.router import Router, make_router

    cfg = SimConfig.from_mapping(cluster_sim.compose(["fleet.nodes=5", f"fleet.router={router}",
                                                      "workload.limit_requests=800"]))
    trace, _, _ = prepare(cfg)
    hw = [cfg.hardware_for_node(i) for i in range(5)]
    for sessions in ("kept", "half unknown"):
        if sessions == "half unknown":
            trace.session_id = np.where(np.arange(trace.n_requests) % 2 == 1, -1, trace.session_id)
        slow = make_router(trace, cfg.fleet, cfg.seed, cfg.model, hw)
        want = Router.route_ahead(slow)
        got = make_router(trace, cfg.fleet, cfg.seed, cfg.model, hw).route_ahead()
        assert got.dtype == np.int64 and np.array_equal(got, want), (router, sessions)
        assert len(np.unique(got)) == 5


def test_every_router_uses_every_node_and_summary_has_per_node_rows():
    for r in ROUTERS:
        s = cluster_sim.run(cluster_sim.compose(BASE + [f"fleet.router={r}"]), write=False)
        assert len(s.nodes) == 4
        assert sum(n["requests"] for n in s.nodes) == s.fleet["requests"] == 500
        assert all(n["requests"] > 0 for n in s.nodes), r
        assert s.fleet["wear_imbalance"] >= 1.0 or s.fleet["ssd_bytes_written"] == 0


def test_least_loaded_beats_round_robin_p99_ttft_when_queues_build():
    ov = ["fleet.nodes=4", "workload.time_scale=40", "hardware.gpus_per_node=1"]
    rr = cluster_sim.run(cluster_sim.compose(ov + ["fleet.router=round_robin"]), write=False).fleet
    ll = cluster_sim.run(cluster_sim.compose(ov + ["fleet.router=least_loaded"]), write=False).fleet
    assert rr["ttft_p99_s"] > rr["load_latency_p99_s"]          # the load does queue
    assert ll["ttft_p99_s"] < rr["ttft_p99_s"]


@needs_mooncake
@pytest.mark.extended
@pytest.mark.slow
def test_kv_aware_beats_round_robin_on_mooncake():
    ov = ["workload=mooncake", f"workload.path={MOONCAKE}", "cache.chunk_tokens=512", "fleet.nodes=4",
          "model=qwen3_next_80b_a3b"]
    rr = cluster_sim.run(cluster_sim.compose(ov + ["fleet.router=round_robin"]), write=False).fleet
    kv = cluster_sim.run(cluster_sim.compose(ov + ["fleet.router=kv_aware"]), write=False).fleet
    assert kv["chunk_miss_ratio"] < rr["chunk_miss_ratio"]
    assert kv["ttft_p99_s"] <= 1.2 * rr["ttft_p99_s"]
    assert kv["wear_imbalance"] <= 1.5


def test_ray_places_nodes_longest_first_on_the_least_loaded_worker():
    """Decision 97: the wall time is the slowest worker's; round robin put 2x the work on one."""
    from cluster_sim.distributed import place

    assert place([10, 1, 1, 1, 1, 10], 2) == [0, 0, 1, 0, 1, 1]       # the two big ones apart, 12 : 12
    loads = [9, 1, 8, 1, 7, 1, 1, 1]
    where = place(loads, 2)
    per = [sum(x for x, w in zip(loads, where) if w == j) for j in range(2)]
    rr = [sum(x for i, x in enumerate(loads) if i % 2 == j) for j in range(2)]
    assert max(per) == 15 and max(rr) == 25                               # LPT: 15 : 14; round robin 25 : 4
    assert sorted(set(place([0, 0, 0, 5], 3))) == [0, 1, 2]               # every worker gets a node
    assert place([3, 3, 3, 3], 2) == place([3, 3, 3, 3], 2)               # deterministic


def test_a_span_replays_alike_in_any_blocks(monkeypatch):
    """NodeRunner.run_span (no feedback): one call, blocks of 7 requests, blocks that double from 7
    (every call shorter than SPAN_CALL_S), or epoch by epoch on the interpreted engine: the same
    per-request series and statistics."""
    from cluster_sim import fleet
    from cluster_sim.api import prepare
    from cluster_sim.config import SimConfig
    from cluster_sim.fleet import NodeRunner, epochs_of

    out = []
    for engine, block, span_s in (("numba", None, 0.05), ("numba", 7, 0.0), ("numba", 7, float("inf")),
                                  ("python", None, 0.05)):
        monkeypatch.setattr(fleet, "SPAN_CALL_S", span_s)
        cfg = SimConfig.from_mapping(cluster_sim.compose(["policy=lru", f"cache.engine={engine}"]))
        trace = prepare(cfg)[0]
        idx = np.arange(trace.n_requests, dtype=np.int64)
        r = NodeRunner(trace, cfg, 0)
        calls = []
        assert r.run_span(idx, epochs_of(trace, 60.0), tick=calls.append, block=block) == len(idx)
        assert sum(calls) == len(idx)
        if engine == "numba" and block is None:
            assert calls == [len(idx)]
        elif engine == "numba" and span_s == 0.0:
            assert len(calls) == -(-len(idx) // block)               # no call is short enough to grow
        elif engine == "numba":
            assert calls[:-1] == [block << i for i in range(len(calls) - 1)] and calls[-1] <= block << len(calls) - 1
        stats, series = r.finish()
        out.append((stats.chunk_misses, stats.ssd_bytes_written_fa, series))
    for misses, wr, series in out[1:]:
        assert (misses, wr) == out[0][:2]
        for key, v in series.items():
            assert np.array_equal(v, out[0][2][key]), key
    assert out[0][0] > 0
