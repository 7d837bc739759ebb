"""What the figures people expect are drawn from (issue #16): per-tier columns of epochs.parquet,
requests.parquet (output.requests=true), capacities as a share of the working set, and the
figures themselves."""
from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

import cluster_sim
from cluster_sim.errors import ConfigError

SMALL = ["fleet=four", "hardware.dram_bytes=0.2%W", "hardware.ssd_bytes=0.5%W"]


@pytest.fixture(scope="module")
def four():
    return cluster_sim.run(cluster_sim.compose([*SMALL, "output.requests=true"]), write=False)


def test_epoch_columns_add_up_to_the_summary(four):
    e = four.epoch_table
    f = four.fleet
    col = {n: e.column(n).to_numpy() for n in e.schema.names}
    assert col["hits_hbm"].sum() == f["hits_hbm_fa"] + f["hits_hbm_state"]
    assert col["hits_dram"].sum() == f["hits_dram_fa"] + f["hits_dram_state"]
    assert col["hits_ssd"].sum() == f["hits_ssd_fa"] + f["hits_ssd_state"]
    assert col["ssd_bytes_written"].sum() == f["ssd_bytes_written"]
    assert col["ssd_admissions"].sum() > 0 and col["ssd_copies_evicted"].sum() > 0
    # written-hit copies are counted when a copy is given up; the rest at the end of the run
    assert 0 < col["ssd_admissions_hit"].sum() <= f["ssd_write_hit_fraction"] * col["ssd_admissions"].sum() + 1e-6
    # occupancy never above capacity; the SSD only fills by writes: evicted = written - what is left
    cap = four.config["hardware"]["ssd_bytes"]
    assert (col["ssd_used_bytes"] <= cap).all() and col["ssd_used_bytes"].max() > 0.9 * cap
    for k in range(4):
        sel = col["node"] == k
        last = col["ssd_used_bytes"][sel][-1]
        assert col["ssd_bytes_written"][sel].sum() - col["ssd_evicted_bytes"][sel].sum() == last


def test_request_table_is_one_row_per_counted_request(four, tmp_path):
    r = four.request_table
    assert r.num_rows == four.fleet["requests"]
    assert r.column("request").to_numpy().tolist() == sorted(r.column("request").to_numpy().tolist())
    lat = r.column("load_latency_s").to_numpy()
    ttft = r.column("ttft_s").to_numpy()
    assert np.mean(lat) == pytest.approx(four.fleet["load_latency_mean_s"], rel=1e-9)
    assert np.percentile(ttft, 99) == pytest.approx(four.fleet["ttft_p99_s"], rel=1e-6)
    assert r.column("chunk_misses").to_numpy().sum() == round(four.fleet["chunk_miss_ratio"] *
                                                             r.column("chunks").to_numpy().sum())
    assert set(r.column("node").to_numpy().tolist()) == {0, 1, 2, 3}
    four.write(tmp_path / "summary.json")
    assert pq.read_table(tmp_path / "requests.parquet").num_rows == r.num_rows


def test_request_table_is_optional(tmp_path):
    s = cluster_sim.run(cluster_sim.compose(["debug=default"]), write=False)
    assert s.request_table is None
    with pytest.raises(ConfigError, match="output.requests"):
        cluster_sim.run(cluster_sim.compose(["debug=default", "output.requests=maybe"]), write=False)


def test_capacity_as_a_share_of_the_working_set(four):
    from cluster_sim.config import SimConfig
    from cluster_sim.trace.load import load_workload
    from cluster_sim.trace.stats import trace_statistics

    cfg = SimConfig.from_mapping(cluster_sim.compose([]))
    w = trace_statistics(load_workload(cfg.workload, cfg.seed), chunk_tokens=four.run["chunk_tokens"],
                         model=cfg.model)["working_set_bytes"]
    assert four.run["working_set_bytes"] == w
    assert four.run["capacity_shares"] == {"hardware.dram_bytes": "0.2%W", "hardware.ssd_bytes": "0.5%W"}
    assert four.config["hardware"]["dram_bytes"] == round(0.002 * w)
    assert four.config["hardware"]["ssd_bytes"] == round(0.005 * w)
    same = cluster_sim.run(cluster_sim.compose(["fleet=four", f"hardware.dram_bytes={round(0.002 * w)}",
                                                f"hardware.ssd_bytes={round(0.005 * w)}"]), write=False)
    assert same.fleet["chunk_miss_ratio"] == four.fleet["chunk_miss_ratio"]
    assert same.fleet["ssd_bytes_written"] == four.fleet["ssd_bytes_written"]


@pytest.mark.parametrize("value,msg", [("1%X", "cannot read '1%X'"), ("%W", "cannot read"), ("-1%W", "cannot read")])
def test_bad_share_is_one_line(tmp_path, value, msg):
    from simhelpers import run_cli

    rc, _, err = run_cli([f"hardware.dram_bytes={value}", "tracking.enabled=false"], tmp_path)
    assert rc == 2 and len(err) == 1 and err[0].startswith("cluster-sim: error: hardware.dram_bytes: ") \
        and msg in err[0], err


def test_run_and_sweep_figures(four, tmp_path):
    from cluster_sim.report import Record, run_figures, sweep_figures

    rec = Record(json.loads(four.to_json()), four.epoch_table, extra={"requests": four.request_table})
    names = {p.name for p in run_figures(rec, tmp_path / "run")}
    assert {"tiers.png", "lifetime_per_node.png", "latency_cdf.png", "ssd_written_per_node.png"} <= names
    one = cluster_sim.run(cluster_sim.compose(["debug=default"]), write=False)
    names1 = {p.name for p in run_figures(Record(json.loads(one.to_json()), one.epoch_table), tmp_path / "one")}
    assert "ssd_written_per_node.png" not in names1 and "lifetime_per_node.png" not in names1   # one node
    assert "tiers.png" in names1 and "latency_cdf.png" not in names1      # no requests table

    recs = []
    for share in ("0.1%W", "1%W"):
        s = cluster_sim.run(cluster_sim.compose(["debug=default", f"hardware.dram_bytes={share}",
                                                 "output.requests=true"]), write=False)
        recs.append(Record(json.loads(s.to_json()), s.epoch_table, extra={"requests": s.request_table}))
    names = {p.name for p in sweep_figures(recs, tmp_path / "sweep")}
    assert {"miss_vs_capacity.png", "latency_cdf.png"} <= names
    for p in (tmp_path / "sweep").glob("*.png"):
        assert p.stat().st_size > 10_000
