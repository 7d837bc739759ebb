"""The prepared trace is kept between runs in one process (api._prepare, decision 119).

A sweep's points in one Ray worker share a workload: they must load, place, chain and chunk it
once, and get exactly what a fresh preparation gives. Anything the trace depends on (the
workload's settings, the seed, the chunk size, the source's path and bytes, a file a reader
option names) must prepare it again."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import cluster_sim
from cluster_sim import api
from cluster_sim.config import SimConfig
from cluster_sim.errors import ConfigError

from simhelpers import assert_runs_identical

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def counted(monkeypatch):
    calls = []
    real = api._prepare_uncached

    def spy(cfg, **kw):
        calls.append(cfg)
        return real(cfg, **kw)

    monkeypatch.setattr(api, "_prepare_uncached", spy)
    return calls


def _run(*ov):
    return cluster_sim.run(cluster_sim.compose(["tracking.enabled=false", "report.figures=false",
                                                "output.requests=true", *ov]), write=False)


@pytest.mark.parametrize("policy", ["lru", "gandalf"])
def test_a_second_run_reuses_the_trace_and_gives_the_same_results(counted, policy):
    ov = [f"policy={policy}", "fleet.nodes=3", "fleet.router=session_affinity"]
    a = _run(*ov)
    b = _run(*ov, "hardware.dram_bytes=3GB")      # hardware is not the trace's: still one preparation
    c = _run(*ov)
    assert len(counted) == 1
    assert_runs_identical(a, c)                   # the reused trace was not changed by the runs
    api.clear_prepared()
    d = _run(*ov)
    assert len(counted) == 2
    assert_runs_identical(a, d)                   # and a fresh preparation gives the same
    api.clear_prepared()
    assert_runs_identical(b, _run(*ov, "hardware.dram_bytes=3GB"))


@pytest.mark.parametrize("change", ["seed=7", "cache.chunk_tokens=128", "workload.until_s=600",
                                    "workload.warmup_s=300", "workload.limit_requests=50"])
def test_what_the_trace_depends_on_prepares_it_again(counted, change):
    base = ["workload=synthetic", "+workload.synthetic.num_sessions=40"]
    t0 = api.prepare(SimConfig.from_mapping(cluster_sim.compose(base)))[0]
    t1 = api.prepare(SimConfig.from_mapping(cluster_sim.compose([*base, change])))[0]
    assert len(counted) == 2
    assert t1 is not t0


def test_an_edited_source_file_is_read_again(counted, tmp_path):
    src = ROOT / "traces" / "default.parquet"
    mine = tmp_path / "t.parquet"
    shutil.copyfile(src, mine)
    ov = [f"workload.path={mine}"]
    cfg = SimConfig.from_mapping(cluster_sim.compose(ov))
    t0, p0, sha0 = api.prepare(cfg)
    assert api.prepare(cfg)[0] is t0 and len(counted) == 1
    # the same bytes under another name: another path in the run record, so prepared again
    other = tmp_path / "u.parquet"
    shutil.copyfile(src, other)
    t1, p1, sha1 = api.prepare(SimConfig.from_mapping(cluster_sim.compose([f"workload.path={other}"])))
    assert len(counted) == 2 and p1 != p0 and sha1 == sha0
    # new bytes at the first name
    import pyarrow.parquet as pq
    table = pq.read_table(src)
    pq.write_table(table.slice(0, table.num_rows // 2), mine)
    os.utime(mine, ns=(1, 1))                    # a distinct mtime even on a coarse clock
    t2, p2, sha2 = api.prepare(cfg)
    assert len(counted) == 3 and sha2 != sha0 and t2.n_requests < t0.n_requests


def test_settings_checked_against_the_trace_are_checked_on_reuse(counted):
    ov = ["workload=synthetic", "+workload.synthetic.num_sessions=40"]
    api.prepare(SimConfig.from_mapping(cluster_sim.compose(ov)))
    with pytest.raises(ConfigError, match="fleet.epoch_s"):
        api.prepare(SimConfig.from_mapping(cluster_sim.compose([*ov, "fleet.epoch_s=1e-300"])))
    assert len(counted) == 1


def test_one_trace_is_kept(counted):
    a = SimConfig.from_mapping(cluster_sim.compose(["workload=synthetic", "+workload.synthetic.num_sessions=40"]))
    b = SimConfig.from_mapping(cluster_sim.compose(["workload=synthetic", "+workload.synthetic.num_sessions=41"]))
    api.prepare(a)
    api.prepare(b)
    api.prepare(a)
    assert len(counted) == 3 and len(api._PREPARED) == 1
