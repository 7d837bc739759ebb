"""The command line, the Python API, summary.json and config composition."""
from __future__ import annotations

import ast
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

import cluster_sim
from cluster_sim.config import SimConfig

ROOT = Path(__file__).resolve().parents[1]

METRIC_KEYS = [
    "requests", "trace_span_s", "chunk_miss_ratio", "token_miss_ratio", "miss_ratio_floor",
    "ssd_bytes_written", "ssd_bytes_written_fa", "ssd_bytes_written_state", "ssd_bytes_written_per_day",
    "ssd_write_hit_fraction", "ssd_write_hit_fraction_fa", "ssd_write_hit_fraction_state",
    "ssd_lifetime_years", "ssd_lifetime_years_mean",
    *[f"hits_{t}_{k}" for t in ("hbm", "dram", "ssd") for k in ("fa", "state")],
    "load_latency_mean_s", "load_latency_p50_s", "load_latency_p99_s", "ttft_mean_s", "ttft_p99_s",
    "recompute_gpu_seconds", "recompute_gpu_seconds_floor", "cost_per_1k_requests_usd",
    "cost_per_1k_requests_recompute_usd", "cost_per_1k_requests_wear_usd", "fleet_ssd_replacement_usd_per_year",
    "wear_imbalance", "insert_skipped_bytes", "sim_wall_s", "sim_chunk_refs_per_s",
]


def cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "cluster_sim.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("run")
    out = d / "s" / "summary.json"
    p = cli(f"output.summary_path={out}", cwd=d)
    return p, out, d


def test_default_run_prints_a_table_and_writes_strict_json(default_run):
    p, out, _ = default_run
    assert p.returncode == 0, p.stderr
    assert "chunk miss ratio" in p.stdout and "SSD lifetime" in p.stdout
    text = out.read_text()
    data = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))
    assert set(data) == {"fleet", "nodes", "config", "run"}
    for key in METRIC_KEYS:
        assert key in data["fleet"], key
        assert key in data["nodes"][0], key
    run = data["run"]
    for key in ("version", "git_sha", "trace_path", "trace_sha256", "seed", "backend", "ray_workers",
                "actor_processes"):
        assert key in run, key
    assert run["backend"] == "inprocess" and run["actor_processes"] == 0
    assert run["trace_path"].endswith("traces/default.parquet") and len(run["trace_sha256"]) == 64
    assert data["config"]["policy"]["name"] == "lru"
    assert data["fleet"]["requests"] == 2404
    assert 0 < data["fleet"]["chunk_miss_ratio"] < 1
    assert (out.parent / "nodes.parquet").exists() and (out.parent / "epochs.parquet").exists()


def test_hydra_does_not_change_directory(default_run):
    _, _, d = default_run
    # the run directory is created under the directory the command ran from
    assert (d / "outputs").is_dir()


def test_api_matches_cli(default_run):
    _, out, _ = default_run
    cli_fleet = json.loads(out.read_text())["fleet"]
    s = cluster_sim.run(cluster_sim.compose([]), write=False)
    api = json.loads(s.to_json())["fleet"]
    for k in METRIC_KEYS:
        if k in ("sim_wall_s", "sim_chunk_refs_per_s"):
            continue
        assert api[k] == cli_fleet[k], k


def test_same_seed_same_numbers():
    cfg = cluster_sim.compose(["workload.limit_requests=400"])
    a = cluster_sim.run(cfg, write=False).to_dict()
    b = cluster_sim.run(cfg, write=False).to_dict()
    for sec in ("fleet",):
        for k in a[sec]:
            if k not in ("sim_wall_s", "sim_chunk_refs_per_s"):
                assert a[sec][k] == b[sec][k], k


@pytest.mark.parametrize("arg,key", [
    ("model=nope", "model"),
    ("policy=nope", "policy"),
    ("hardware.dram_bytes=-5", "hardware.dram_bytes"),
    ("hardware.dram_bytes=12QB", "hardware.dram_bytes"),
    ("cache.chunk_tokens=100", "cache.chunk_tokens"),
    ("workload.path=/no/such/trace.parquet", "workload.path"),
    ("hardware.nope=1", "hardware.nope"),
    ("fleet.nodes=0", "fleet.nodes"),
    ("model.state_checkpoints=sometimes", "model.state_checkpoints"),
    ("hardware.mfu=1.5", "hardware.mfu"),
])
def test_bad_value_exits_2_with_one_line(arg, key, tmp_path):
    p = cli(arg, cwd=tmp_path)
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert key in lines[0] and "Traceback" not in p.stderr


def test_malformed_trace_names_file_line_field(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [1, 2]}\n'
                   '{"timestamp": 5, "input_length": -3, "output_length": 1, "hash_ids": [1]}\n')
    p = cli("workload=mooncake", f"workload.path={bad}", cwd=tmp_path)
    assert p.returncode == 2
    assert "bad.jsonl:2" in p.stderr and "input_length" in p.stderr and "Traceback" not in p.stderr


@pytest.mark.parametrize("group", ["model", "hardware", "policy", "workload", "fleet"])
def test_every_config_composes_and_validates(group):
    names = sorted(f.stem for f in (ROOT / "conf" / group).glob("*.yaml"))
    assert names
    for name in names:
        m = cluster_sim.compose([f"{group}={name}"])
        if group == "workload" and m["workload"].get("path") and not Path(m["workload"]["path"]).exists() \
                and not (ROOT / m["workload"]["path"]).exists():
            m["workload"]["path"] = str(ROOT / "traces" / "default.parquet")   # real traces may be absent
        SimConfig.from_mapping(m)


def test_core_imports_no_ray_mlflow_hydra():
    """The simulation core stays free of Ray, MLflow and Hydra (they live at the edges)."""
    edges = {"cli.py", "distributed.py", "tracking.py", "report.py"}
    banned = {"ray", "mlflow", "hydra", "omegaconf"}
    for f in (ROOT / "cluster_sim").rglob("*.py"):
        if f.name in edges:
            continue
        tree = ast.parse(f.read_text())
        for node in ast.walk(tree):
            mods = []
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                mods = [node.module]
            for mod in mods:
                assert mod.split(".")[0] not in banned, f"{f.relative_to(ROOT)} imports {mod}"


def test_summary_json_is_strict_with_zero_denominators(tmp_path):
    cfg = cluster_sim.compose(["hardware.ssd_bytes=0", "hardware.dram_bytes=0", "hardware.hbm_cache_bytes=0",
                               "workload.limit_requests=50", f"output.summary_path={tmp_path / 's.json'}"])
    s = cluster_sim.run(cfg)
    data = json.loads((tmp_path / "s.json").read_text())
    f = data["fleet"]
    assert f["ssd_bytes_written"] == 0 and f["ssd_write_hit_fraction"] == 0.0
    assert f["ssd_lifetime_years"] == 1000.0 and f["fleet_ssd_replacement_usd_per_year"] == 0.0
    assert f["wear_imbalance"] == 0.0 and f["cost_per_1k_requests_wear_usd"] == 0.0
    assert all(not (isinstance(v, float) and not math.isfinite(v)) for v in f.values())
    assert s.fleet["chunk_miss_ratio"] == 1.0


@pytest.mark.parametrize("extra", [[], ["fleet.nodes=2"]])
def test_progress_callback_counts_every_request(extra):
    # the command line's progress bar is fed by run(..., progress=): epoch by epoch (blocks of requests on
    # the compiled engine without feedback), up to the total
    seen = []
    s = cluster_sim.run(cluster_sim.compose(["workload.limit_requests=400", *extra]), write=False,
                        progress=lambda done, total: seen.append((done, total)))
    assert len(seen) > 3
    assert all(t == 400 for _, t in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert seen[-1] == (400, 400) and s.fleet["requests"] == 400
