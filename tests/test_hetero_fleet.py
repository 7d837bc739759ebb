"""Heterogeneous fleets (issue #15, item 4): ``fleet.node_overrides`` at 64 nodes, in this process.

Each node's figures are those of its own hardware: a node of a mixed fleet reports exactly what
the same node reports in a fleet where every node has its hardware (the router here does not
look at hardware, so both fleets route alike).
"""
from __future__ import annotations

import pytest

import cluster_sim
from cluster_sim.config import SimConfig
from cluster_sim.errors import ConfigError

# small tiers, so that ~60 requests a node reach the SSD
BASE = ["hardware=demo", "hardware.hbm_cache_bytes=256MB", "hardware.dram_bytes=1GB", "fleet.nodes=64", "fleet.router=session_affinity", "workload.limit_requests=4000",
        "tracking.enabled=false", "report.figures=false"]
OLDER = {"name": "older", "dram_bytes": "512MB", "ssd_bytes": "100GB", "gpu_flops": 4.95e14, "gpu_usd_per_hour": 2.0}
NO_SSD = {"name": "no_ssd", "ssd_bytes": 0, "gpu_flops": 2.25e15, "gpu_usd_per_hour": 6.0}
ODD = {"name": "odd_one", "dram_bytes": "2GB", "ssd": {"waf": 2.0}}
TIMING = ("sim_wall_s", "sim_chunk_refs_per_s")


def _run(node_overrides: dict):
    m = cluster_sim.compose(BASE)
    m["fleet"] = {**m["fleet"], "node_overrides": node_overrides}
    return cluster_sim.run(m, write=False)


def _row(n: dict) -> dict:
    return {k: v for k, v in n.items() if k not in TIMING}


@pytest.fixture(scope="module")
def mixed():
    return _run({"0-31": {}, "32-47": OLDER, "48-63": NO_SSD, 5: ODD})


def test_every_node_of_a_64_node_mixed_fleet_reports_its_own_hardware(mixed):
    same = {"demo": _run({}), "older": _run({"0-63": OLDER}), "no_ssd": _run({"0-63": NO_SSD}),
            "odd_one": _run({"0-63": ODD})}
    want = ["demo"] * 32 + ["older"] * 16 + ["no_ssd"] * 16
    want[5] = "odd_one"
    assert [n["hardware"] for n in mixed.nodes] == want
    for k, n in enumerate(mixed.nodes):
        assert _row(n) == _row(same[want[k]].nodes[k]), f"node {k} ({want[k]})"
    # and the hardware shows: no SSD, no SSD writes; the others write some
    written = {h: sum(n["ssd_bytes_written"] for k, n in enumerate(mixed.nodes) if want[k] == h) for h in same}
    assert written["no_ssd"] == 0 and written["demo"] > 0 and written["older"] > 0, written
    # less DRAM: more of each node's stream reaches the SSD
    per_node = {h: written[h] / want.count(h) for h in ("demo", "older")}
    assert per_node["older"] > per_node["demo"], per_node
    assert mixed.fleet["ssd_bytes_written"] == sum(n["ssd_bytes_written"] for n in mixed.nodes)
    assert mixed.fleet["requests"] == sum(n["requests"] for n in mixed.nodes)


def test_the_node_table_has_one_row_per_node(mixed):
    t = mixed.node_table.to_pydict()
    assert t["node"] == list(range(64))
    assert t["ssd_bytes_written"] == [float(n["ssd_bytes_written"]) for n in mixed.nodes]


def test_the_mixed64_fleet_preset_gives_each_range_its_hardware():
    cfg = SimConfig.from_mapping(cluster_sim.compose(["fleet=mixed64", "hardware=h100_8x"]))
    names = [cfg.hardware_for_node(k).name for k in range(64)]
    assert names == ["h100_8x"] * 32 + ["older_half_dram"] * 16 + ["newer_no_ssd"] * 16
    assert cfg.hardware_for_node(40).dram_bytes == 10**12 and cfg.hardware_for_node(60).ssd_bytes == 0
    assert cfg.hardware_for_node(60).dram_bytes == cfg.hardware.dram_bytes     # not overridden: the preset's


def _cfg(over, nodes=64):
    m = cluster_sim.compose(["hardware=demo", f"fleet.nodes={nodes}"])
    m["fleet"] = {**m["fleet"], "node_overrides": over}
    return SimConfig.from_mapping(m)


def test_a_node_index_goes_on_top_of_its_range():
    cfg = _cfg({"0-9": {"dram_bytes": "1GB", "ssd": {"waf": 3.0, "dwpd": 3}}, 4: {"ssd": {"waf": 1.5}}})
    hw = cfg.hardware_for_node(4)
    assert hw.dram_bytes == 10**9 and hw.ssd.waf == 1.5 and hw.ssd.dwpd == 3
    assert cfg.hardware_for_node(3).ssd.waf == 3.0 and cfg.hardware_for_node(10).dram_bytes == cfg.hardware.dram_bytes


@pytest.mark.parametrize("over,needle", [
    ({"0-40": {}, "40-63": {}}, "overlaps the range 0-40"),
    ({"10-5": {}}, "range 10-5 is not within 0..63"),
    ({"60-64": {}}, "range 60-64 is not within 0..63"),
    ({"a-b": {}}, "ranges like 32-63"),
    ({64: {}}, "out of range 0..63"),
    ({"0-3": 5}, "expected a mapping of hardware keys"),
    ({"0-3": {"dram_bytes": "lots"}}, "fleet.node_overrides.0.dram_bytes"),
])
def test_bad_node_overrides_name_the_key(over, needle):
    with pytest.raises(ConfigError) as e:
        _cfg(over).hardware_for_node(0)
    assert needle in str(e.value), str(e.value)
