"""MLflow runs one can compare (issue #16): short run names, sizes as numbers of bytes, MLflow's
source tags with the git commit, a parent run with the sweep's params, table and figures."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cluster_sim.tracking import numeric_sizes, run_name, runs_table_url, size_metrics

ROOT = Path(__file__).resolve().parents[1]


def test_run_names_are_short():
    cfg = {"policy": {"name": "gandalf"}}
    assert run_name(cfg, ["policy=gandalf", "policy.alpha=4", "ray.address=auto",
                          "tracking.uri=sqlite:///x.db"]) == "gandalf α=4"
    assert run_name({"policy": {"name": "lru"}}, ["seed=1", "hardware.dram_bytes=8GB", "output.dir=o"],
                    drop={"hardware.dram_bytes=8GB"}) == "lru seed=1"
    assert run_name({"policy": {"name": "lru_k"}}, ["+policy.k=3", "model=gemma3_27b"]) == "lru_k k=3 model=gemma3_27b"


def test_sizes_become_numbers_with_the_text_beside():
    flat = {"hardware.dram_bytes": "16GB", "hardware.ssd_read_bytes_per_s": "104GB/s",
            "hardware.ssd.erase_block_bytes": "auto", "hardware.hbm_cache_bytes": 0, "seed": 0}
    got = numeric_sizes(flat)
    assert got["hardware.dram_bytes"] == 16_000_000_000 and got["hardware.dram_bytes_human"] == "16GB"
    assert got["hardware.ssd_read_bytes_per_s"] == 104_000_000_000
    assert got["hardware.ssd.erase_block_bytes"] == "auto" and "hardware.ssd.erase_block_bytes_human" not in got
    assert got["hardware.hbm_cache_bytes"] == 0 and got["seed"] == 0
    assert size_metrics(flat) == {"config.hardware.dram_bytes": 16e9, "config.hardware.ssd_read_bytes_per_s": 104e9,
                                  "config.hardware.hbm_cache_bytes": 0.0}
    assert runs_table_url("7") == "http://127.0.0.1:5000/#/experiments/7/runs"


@pytest.mark.ray
@pytest.mark.slow
def test_two_point_sweep_runs_compare(tmp_path):
    env = {**os.environ, "CI": "1", "PYTHONPATH": os.pathsep.join([str(ROOT), *([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])])}
    p = subprocess.run([sys.executable, "-m", "cluster_sim.cli", "-m", "seed=0,1", "debug=default",
                        "hardware.dram_bytes=8GB", "ray.address=local", "report.figures=true"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    assert "skipped" not in p.stdout.splitlines()[-8:][0]
    m = re.search(r"parent run (\w+)", p.stdout)
    assert m, p.stdout
    assert re.search(r"runs table:  http://127\.0\.0\.1:5000/#/experiments/\d+/runs", p.stdout), p.stdout
    from mlflow import MlflowClient
    c = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow_runs/mlflow.db")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    parent = c.get_run(m.group(1))
    exp = c.get_experiment(parent.info.experiment_id)
    assert exp.tags.get("mlflow.experimentKind") == "custom_model_development"
    children = c.search_runs([parent.info.experiment_id], f"tags.`mlflow.parentRunId` = '{m.group(1)}'")
    assert sorted(r.info.run_name for r in children) == ["lru seed=0", "lru seed=1"]
    for r in children:
        assert r.data.params["hardware.dram_bytes"] == "8000000000"
        assert r.data.params["hardware.dram_bytes_human"] == "8GB"
        assert r.data.params["hardware.ssd_read_bytes_per_s"] == "104000000000"
        assert r.data.metrics["config.hardware.dram_bytes"] == 8e9
        assert r.data.tags["mlflow.source.git.commit"] == commit
        assert r.data.tags["mlflow.source.name"] == "cluster-sim"
    pp = parent.data.params
    assert pp["sweep.points"] == "2" and pp["swept.seed"] == "0,1"
    assert pp["hardware.dram_bytes"] == "8000000000" and pp["policy.name"] == "lru"
    assert parent.data.tags["mlflow.source.git.commit"] == commit
    arts = {a.path for a in c.list_artifacts(parent.info.run_id, "report")}
    assert {"report/comparison.csv", "report/comparison.md"} <= arts
    assert any(a.endswith(".png") for a in arts), arts
    local = c.download_artifacts(parent.info.run_id, "report/comparison.csv", str(tmp_path / "dl"))
    text = Path(local).read_text().splitlines()
    assert text[0].startswith("job,status,overrides,run_id,chunk_miss_ratio") and len(text) == 3
    # MLflow's monitor needs psutil (a dependency); where the command's own interpreter lacks it
    # (this process may see Ray's vendored copy), the parent has no system metrics and no error
    has_psutil = subprocess.run([sys.executable, "-c", "import psutil"], env=env, capture_output=True).returncode == 0
    system = [k for k in parent.data.metrics if k.startswith("system/")]
    if has_psutil:
        assert any(k.startswith("system/cpu") for k in system), sorted(parent.data.metrics)
    else:
        assert system == []


def test_ui_command_says_to_install_the_ui_extra_when_flask_is_missing(monkeypatch):
    import importlib.util

    from cluster_sim.tracking import ui_command

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "flask" else real(name, *a))
    assert ui_command("sqlite:///x.db").endswith("(first: pip install 'cluster_sim[ui]')")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object())
    assert ui_command("sqlite:///x.db") == "mlflow ui --backend-store-uri sqlite:///x.db --host 127.0.0.1 --port 5000"
