"""Derived metrics (simulation-model §6) from known counters, by hand."""
from __future__ import annotations

import numpy as np
import pytest

from cluster_sim.config import HardwareConfig
from cluster_sim.metrics import NodeStats, derive, fleet_metrics
from cluster_sim.units import parse_bytes
from cluster_sim.errors import ConfigError

HW = HardwareConfig.from_mapping({"ssd_bytes": "2TB", "gpus_per_node": 8, "gpu_usd_per_hour": 3.0,
                                  "ssd": {"dwpd": 1, "warranty_years": 5, "waf": 2.0, "usd_per_tb": 300}})


def stats(written_fa, written_state, requests=100, gpu_s=36.0, lat=(0.1, 0.2, 0.3)):
    s = NodeStats(requests=requests, chunks_requested=1000, chunk_misses=250, prompt_tokens=10_000,
                  recomputed_tokens=3_000, recompute_gpu_seconds=gpu_s, ssd_bytes_written_fa=written_fa,
                  ssd_bytes_written_state=written_state, ssd_admissions_fa=10, ssd_admissions_state=5,
                  ssd_admissions_hit_fa=4, ssd_admissions_hit_state=1)
    s.load_latency = list(lat)
    s.ttft = list(lat)
    return s


def test_lifetime_and_cost_by_hand():
    s = stats(3e12, 1e12)
    d = derive(s, HW, span_s=43200.0, replays_per_day_scale=1.0, cap_years=1000.0)
    written = 4e12
    per_day = written * 86400 / 43200                       # 8 TB/day
    tbw = 1 * 2e12 * 365 * 5
    assert d["ssd_bytes_written_per_day"] == pytest.approx(per_day)
    assert d["ssd_lifetime_years"] == pytest.approx(tbw / (2.0 * per_day) / 365)
    price = 300 * 2e12 / 1e12
    assert d["cost_per_1k_requests_recompute_usd"] == pytest.approx(36.0 * 3.0 / 3600 * 1000 / 100)
    assert d["cost_per_1k_requests_wear_usd"] == pytest.approx(written * 2.0 * price / tbw * 1000 / 100)
    assert d["cost_per_1k_requests_usd"] == pytest.approx(d["cost_per_1k_requests_recompute_usd"]
                                                          + d["cost_per_1k_requests_wear_usd"])
    assert d["fleet_ssd_replacement_usd_per_year"] == pytest.approx(price / d["ssd_lifetime_years"])
    assert d["chunk_miss_ratio"] == 0.25 and d["token_miss_ratio"] == 0.3
    assert d["ssd_write_hit_fraction"] == pytest.approx(5 / 15)
    assert d["ssd_write_hit_fraction_fa"] == pytest.approx(0.4)
    assert d["ssd_write_hit_fraction_state"] == pytest.approx(0.2)
    d2 = derive(s, HW, span_s=43200.0, replays_per_day_scale=3.0, cap_years=1000.0)
    assert d2["ssd_bytes_written_per_day"] == pytest.approx(3 * per_day)


def test_nothing_written_gives_the_cap_and_zero_ratios():
    d = derive(NodeStats(), HW, span_s=0.0, replays_per_day_scale=1.0, cap_years=1000.0)
    assert d["ssd_lifetime_years"] == 1000.0
    assert d["chunk_miss_ratio"] == 0.0 and d["ssd_write_hit_fraction"] == 0.0
    assert d["cost_per_1k_requests_usd"] == 0.0 and d["load_latency_p99_s"] == 0.0


def test_fleet_quantiles_merge_samples_and_wear_is_per_drive():
    a = stats(4e12, 0, lat=[0.1] * 99 + [10.0])
    b = stats(1e12, 0, lat=[0.2] * 100)
    nodes = [derive(x, HW, span_s=86400.0, replays_per_day_scale=1.0, cap_years=1000.0) for x in (a, b)]
    f = fleet_metrics(nodes, [a, b], [HW, HW], span_s=86400.0, replays_per_day_scale=1.0, cap_years=1000.0,
                      floor_ratio=0.1, floor_gpu_s=1.0)
    allsamples = np.array([0.1] * 99 + [10.0] + [0.2] * 100)
    assert f["load_latency_p99_s"] == pytest.approx(np.quantile(allsamples, 0.99))
    assert f["load_latency_p99_s"] != pytest.approx((nodes[0]["load_latency_p99_s"] + nodes[1]["load_latency_p99_s"]) / 2)
    assert f["ssd_lifetime_years"] == min(n["ssd_lifetime_years"] for n in nodes)
    tbw = 2e12 * 365 * 5
    assert f["ssd_lifetime_years_mean"] == pytest.approx(tbw / (2.0 * 2.5e12) / 365)
    assert f["wear_imbalance"] == pytest.approx(4e12 / 2.5e12)
    assert f["fleet_ssd_replacement_usd_per_year"] == pytest.approx(sum(n["fleet_ssd_replacement_usd_per_year"] for n in nodes))
    assert f["requests"] == 200 and f["chunk_miss_ratio"] == 0.25


@pytest.mark.parametrize("text,value", [("100GB", 100 * 10**9), ("4TiB", 4 * 2**40), ("1e9", 10**9),
                                        (512, 512), ("1.5 kB", 1500), ("7MiB", 7 * 2**20)])
def test_units(text, value):
    assert parse_bytes(text, "k") == value


@pytest.mark.parametrize("bad", ["-1GB", "12QB", "lots", None, True, float("nan")])
def test_bad_units_name_the_key(bad):
    with pytest.raises(ConfigError, match="hardware.dram_bytes"):
        parse_bytes(bad, "hardware.dram_bytes")


def test_node_stats_compare_their_samples_element_by_element():
    # a finished node holds its per-request samples as float64 arrays (decision 118), a replaying
    # one as lists: equality is exact and element by element either way, never an ambiguous array
    from cluster_sim.metrics import NodeStats

    a, b = NodeStats(requests=2), NodeStats(requests=2)
    a.load_latency, a.ttft = np.array([0.5, 1.25]), np.array([0.5, 2.0])
    b.load_latency, b.ttft = [0.5, 1.25], [0.5, 2.0]
    assert a == b
    b.ttft = [0.5, 2.0 + 1e-15]
    assert a != b
    b.ttft, b.requests = [0.5, 2.0], 3
    assert a != b
