"""One cost model (cluster_sim/cost.py): the node, Gandalf, the router, the floors and the
metrics price work with the same :class:`CostModel`, and no other module re-derives it."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from cluster_sim.config import HardwareConfig
from cluster_sim.cost import CostModel
from cluster_sim.metrics import NodeStats, derive
from cluster_sim.model import load_model
from simhelpers import make_node, replay, trace_from_paths

PKG = Path(__file__).resolve().parents[1] / "cluster_sim"
# hardware fields that are prices, rates or latencies: only the cost model turns them into costs
PRICED = {"gpu_flops", "mfu", "gpu_usd_per_hour", "host_link_bytes_per_s", "ssd_read_bytes_per_s",
          "ssd_read_latency_s", "tbw_bytes", "ssd_price_usd"}


def test_only_the_cost_model_reads_the_hardware_prices_and_rates():
    readers = {}
    for f in PKG.rglob("*.py"):
        if f.name in ("cost.py", "config.py"):
            continue
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in PRICED:
                # a CostModel's own fields share the names; reads through `cost`/`self.cost` are fine
                base = node.value
                name = base.id if isinstance(base, ast.Name) else getattr(base, "attr", "")
                if "cost" not in name:
                    readers.setdefault(str(f.relative_to(PKG)), set()).add(node.attr)
    assert readers == {}


HW = dict(hbm_cache_bytes=0, dram_bytes="200MB", ssd_bytes="4GB", gpu_flops=1e12, mfu=0.5, gpus_per_node=2,
          host_link_bytes_per_s="1GB/s", ssd_read_bytes_per_s="0.5GB/s", ssd_read_latency_s=1e-3,
          gpu_usd_per_hour=7.2)


def test_the_node_latency_is_the_cost_models_price_of_what_it_served():
    # request 2 reuses request 1's two chunks from DRAM; nothing on the SSD
    tr = trace_from_paths([[1, 2], [1, 2, 3]], chunk_tokens=16)
    node = make_node(tr, "llama3_1_70b", **HW)
    recs = replay(node, tr)
    cost = node.cost
    fab = node.st.fa_bytes
    flops, tokens = cost.request_recompute(2 * 16, int(tr.input_tokens[1]))
    assert recs[1]["h"] == 2 and tokens == int(tr.input_tokens[1]) - 32
    assert recs[1]["latency"] == cost.dram_load_s(2 * fab) + flops / cost.compute_rate
    assert recs[1]["latency"] > cost.dram_load_s(2 * fab) > 0
    # the same figure with the SSD: one read latency on top of the read and the link
    with_ssd = cost.serve_latency_s(0, fab, 0.0)
    assert with_ssd == pytest.approx(cost.ssd_load_s(fab), rel=1e-12) and with_ssd > cost.ssd_read_latency_s


def test_gandalf_prices_loads_and_wear_with_the_nodes_cost_model():
    tr = trace_from_paths([[1, 2], [1, 2, 3]], chunk_tokens=16)
    node = make_node(tr, "llama3_1_70b", policy="gandalf", policy_params={"engine": "python"}, **HW)
    pol = node.policy
    assert pol.cost is node.cost
    assert pol._ld_ssd(1e6) == node.cost.ssd_load_s(1e6) == 1e-3 + 1e6 / 0.5e9 + 1e6 / 1e9
    assert pol._ld_dram(1e6) == 1e6 / 1e9
    assert pol.g == pytest.approx(7.2 * 2 / 3600.0)
    assert pol.cw == node.cost.wear_usd_per_byte > 0


def test_metrics_price_recompute_and_wear_with_the_cost_model():
    hw = HardwareConfig.from_mapping(HW)
    cost = CostModel.of(load_model("llama3_1_70b"), hw)
    s = NodeStats()
    s.requests = 1000
    s.recompute_gpu_seconds = 3600.0
    s.ssd_bytes_written_fa = 10**9
    m = derive(s, hw, span_s=86400.0, replays_per_day_scale=1.0, cap_years=1e9)
    assert m["cost_per_1k_requests_recompute_usd"] == pytest.approx(3600.0 * cost.usd_per_gpu_s)
    assert m["cost_per_1k_requests_wear_usd"] == pytest.approx(cost.wear_usd(10**9 * cost.waf))
    assert m["ssd_lifetime_years"] == pytest.approx(cost.lifetime_years(10**9 * cost.waf))


def test_a_node_without_ssd_wears_nothing():
    cost = CostModel.of(None, HardwareConfig.from_mapping({**HW, "ssd_bytes": 0}))
    assert cost.wear_usd_per_byte == 0.0 and cost.wear_usd(1e12) == 0.0
