"""MLflow tracking: the no-argument run, tracking off without MLflow, config hashes, hourly series."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pyarrow as pa
import pytest

from cluster_sim.tracking import config_hash, flatten, hourly_series, summary_metrics


def test_no_argument_run_logs_to_mlflow_and_says_where(tmp_path):
    t0 = time.time()
    p = subprocess.run(["cluster-sim"] if _has_script() else [sys.executable, "-m", "cluster_sim.cli"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120, env={**os.environ, "CI": "1"})
    assert p.returncode == 0, p.stderr[-3000:]
    assert time.time() - t0 < 120
    m = re.search(r"MLflow run: (\w+) in experiment 'cluster_sim'", p.stdout)
    assert m, p.stdout
    assert "figures: " in p.stdout and "mlflow ui --backend-store-uri sqlite:///" in p.stdout
    assert "--host 127.0.0.1" in p.stdout
    assert (tmp_path / "mlflow_runs" / "mlflow.db").exists()
    from mlflow import MlflowClient
    c = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow_runs/mlflow.db")
    r = c.get_run(m.group(1))
    assert r.info.status == "FINISHED" and r.data.tags["cluster_sim.kind"] == "single"
    assert r.data.params["policy.name"] == "lru" and r.data.params["model.name"] == "qwen3_next_80b_a3b"
    assert any(k.startswith("model.derived.") for k in r.data.params)      # the resolved config
    assert r.data.metrics["requests"] == 2404 and "node0.ssd_lifetime_years" in r.data.metrics
    arts = {a.path for a in c.list_artifacts(r.info.run_id)}
    assert {"config.yaml", "summary.json", "nodes.parquet", "epochs.parquet", "figures"} <= arts
    # artifacts live under mlflow_runs/ too
    assert any((tmp_path / "mlflow_runs" / "artifacts").rglob("summary.json"))


def _has_script() -> bool:
    import shutil
    return shutil.which("cluster-sim") is not None


def test_tracking_off_never_imports_mlflow(tmp_path):
    code = ("import sys; sys.modules['mlflow'] = None\n"      # any 'import mlflow' now raises ImportError
            "from cluster_sim.cli import main\n"
            "rc = main(['workload.limit_requests=200', 'tracking.enabled=false'])\n"
            "assert sys.modules['mlflow'] is None\n"
            "sys.exit(rc)\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "CI": "1"})
    assert p.returncode == 0, p.stderr[-3000:]
    assert "MLflow run" not in p.stdout and "figures:" in p.stdout
    assert not (tmp_path / "mlflow_runs").exists()


def test_bad_tracking_uri_is_one_line(tmp_path):
    p = subprocess.run([sys.executable, "-m", "cluster_sim.cli", "workload.limit_requests=100",
                        "tracking.uri=nosuchscheme://x"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "tracking.uri" in lines[0], p.stderr


def test_config_hash_ignores_where_and_how_results_are_logged():
    a = {"policy": {"name": "lru"}, "seed": 0, "tracking": {"uri": "a"}, "output": {"dir": "x"},
         "sweep": {"resume": True}, "ray": {"address": "auto"}, "report": {"figures": True}}
    b = {"policy": {"name": "lru"}, "seed": 0, "tracking": {"uri": "b", "experiment": "z"}, "output": {"dir": "y"}}
    assert config_hash(a) == config_hash(b)
    assert config_hash(a) != config_hash({**a, "seed": 1})
    with_derived = {**a, "model": {"name": "m", "derived": {"x": 1}}}
    assert config_hash(with_derived) == config_hash({**a, "model": {"name": "m"}})


def test_flatten_and_metrics_names():
    assert flatten({"a": {"b": 1, "c": {}}, "d": [1, 2]}) == {"a.b": 1, "a.c": "{}", "d": "[1, 2]"}
    m = summary_metrics({"fleet": {"requests": 3, "x": "s"}, "nodes": [{"requests": 1}, {"requests": 2}]})
    assert m == {"requests": 3.0, "node0.requests": 1.0, "node1.requests": 2.0}


def test_hourly_series_sums_epochs_by_simulated_hour():
    t = pa.table({"node": [0, 0, 1, 0], "epoch": [0, 59, 0, 60], "t_start_s": [0.0, 3540.0, 0.0, 3600.0],
                  "requests": [1, 1, 1, 1], "chunks": [10, 10, 20, 10], "chunk_misses": [5, 5, 0, 10],
                  "ssd_bytes_written": [100, 200, 50, 7]})
    s = hourly_series(t)
    assert s["series.ssd_bytes_written_per_hour"] == [(0, 350.0), (1, 7.0)]
    assert s["series.chunk_hit_ratio_per_hour"] == [(0, pytest.approx(0.75)), (1, 0.0)]
    assert s["series.node1.ssd_bytes_written_per_hour"] == [(0, 50.0), (1, 0.0)]
