"""``cluster-sim -m``: every point a Ray task, one MLflow parent per sweep, resume by config hash."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.slow]

SMALL = ["workload.limit_requests=300"]


def cli(*args, cwd):
    env = {**os.environ, "CI": "1"}
    return subprocess.run([sys.executable, "-m", "cluster_sim.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=400, env=env)


def store(tmp_path: Path):
    return [f"tracking.uri=sqlite:///{tmp_path}/mlruns/mlflow.db", "tracking.experiment=sweep_test"]


def client(tmp_path: Path):
    from mlflow import MlflowClient
    c = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlruns/mlflow.db")
    return c, c.get_experiment_by_name("sweep_test").experiment_id


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    d = tmp_path_factory.mktemp("sweep")
    p = cli("-m", "policy=lru,gandalf", "seed=0,1", *SMALL, *store(d), f"hydra.sweep.dir={d}/multirun/a", cwd=d)
    return d, p


def test_four_finished_child_runs_under_one_parent_each_from_its_own_ray_task(sweep):
    d, p = sweep
    assert p.returncode == 0, p.stderr[-3000:]
    c, exp = client(d)
    runs = c.search_runs([exp], max_results=100)
    parents = [r for r in runs if r.data.tags.get("cluster_sim.kind") == "sweep"]
    children = [r for r in runs if r.data.tags.get("cluster_sim.kind") == "point"]
    assert len(parents) == 1 and len(children) == 4
    pid = parents[0].info.run_id
    assert parents[0].info.status == "FINISHED"
    for r in children:
        assert r.info.status == "FINISHED"
        assert r.data.tags["mlflow.parentRunId"] == pid
        assert r.data.params["policy.name"] in ("lru", "gandalf") and r.data.params["seed"] in ("0", "1")
        assert r.data.params["workload.limit_requests"] == "300"
        for k in ("chunk_miss_ratio", "ssd_lifetime_years", "ssd_bytes_written", "node0.ssd_bytes_written",
                  "node0.chunk_miss_ratio", "wear_imbalance", "series.ssd_bytes_written_per_hour",
                  "series.chunk_hit_ratio_per_hour"):
            assert k in r.data.metrics, k
        arts = {a.path for a in c.list_artifacts(r.info.run_id)}
        assert {"config.yaml", "summary.json", "nodes.parquet", "epochs.parquet", "figures"} <= arts
    combos = {(r.data.params["policy.name"], r.data.params["seed"]) for r in children}
    assert len(combos) == 4
    task_ids = {r.data.tags["ray_task_id"] for r in children}
    assert len(task_ids) == 4 and all(len(t) >= 16 for t in task_ids)
    assert {a.path for a in c.list_artifacts(pid, "report")} >= {"report/frontier.png", "report/hit_sources.png",
                                                                  "report/ssd_written_per_node.png"}


def test_the_driver_wrote_every_point_and_the_report(sweep):
    d, p = sweep
    out = d / "multirun" / "a"
    for i in range(4):
        assert (out / str(i) / "summary.json").exists() and (out / str(i) / "epochs.parquet").exists()
    assert (out / "report" / "frontier.png").exists()
    assert "4 finished, 0 failed" in p.stdout and "mlflow ui --backend-store-uri" in p.stdout


def test_resume_runs_nothing_new(sweep):
    d, _ = sweep
    p = cli("-m", "policy=lru,gandalf", "seed=0,1", *SMALL, *store(d), "sweep.resume=true",
            f"hydra.sweep.dir={d}/multirun/b", cwd=d)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "0 finished, 0 failed, 4 skipped" in p.stdout
    c, exp = client(d)
    runs = c.search_runs([exp], max_results=100)
    assert len([r for r in runs if r.data.tags.get("cluster_sim.kind") == "point"]) == 4
    assert len([r for r in runs if r.data.tags.get("cluster_sim.kind") == "sweep"]) == 1
    assert (d / "multirun" / "b" / "report" / "frontier.png").exists()     # outputs fetched from MLflow
    # nothing left to run: no Ray at all (an address where nothing listens is never dialled)
    p = cli("-m", "policy=lru,gandalf", "seed=0,1", *SMALL, *store(d), "sweep.resume=true", "ray.address=127.0.0.1:9",
            f"hydra.sweep.dir={d}/multirun/c", cwd=d)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "0 finished, 0 failed, 4 skipped" in p.stdout


def test_a_failing_point_is_recorded_and_the_sweep_goes_on(tmp_path):
    p = cli("-m", "fleet.nodes=2", "fleet.inject_failure=null,{node:1,epoch:0}", *SMALL, *store(tmp_path),
            f"hydra.sweep.dir={tmp_path}/multirun", cwd=tmp_path)
    assert p.returncode == 1, p.stderr[-3000:]
    assert "1 finished, 1 failed" in p.stdout and "node 1 failed during epoch 0" in p.stdout
    c, exp = client(tmp_path)
    kids = [r for r in c.search_runs([exp]) if r.data.tags.get("cluster_sim.kind") == "point"]
    assert sorted(r.info.status for r in kids) == ["FAILED", "FINISHED"]
    assert (tmp_path / "multirun" / "0" / "summary.json").exists()
    assert (tmp_path / "multirun" / "1" / "error.txt").exists()
    # resume reruns only the failed point (which fails again), under the same parent
    p = cli("-m", "fleet.nodes=2", "fleet.inject_failure=null,{node:1,epoch:0}", *SMALL, *store(tmp_path),
            "sweep.resume=true", f"hydra.sweep.dir={tmp_path}/multirun2", cwd=tmp_path)
    assert "0 finished, 1 failed, 1 skipped" in p.stdout
    runs = c.search_runs([exp])
    assert len([r for r in runs if r.data.tags.get("cluster_sim.kind") == "sweep"]) == 1


@pytest.mark.parametrize("args,needle", [
    (["experiment=nope"], "experiment: unknown option 'nope'"),
    (["policy=gandalf", "policy.alpha=-1,1"], "policy.alpha"),
    (["policy.alpha=range(1,x)", "policy=gandalf"], "range(1,x)"),
    (["ray.address=127.0.0.1:1"], "ray.address"),
    (["policy=gandalf", "sweep.resume=true", "tracking.enabled=false"], "sweep.resume"),
])
def test_bad_sweep_input_is_one_line_and_exit_2(tmp_path, args, needle):
    p = cli("-m", *args, *SMALL, *store(tmp_path), cwd=tmp_path)
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip() and not ln.startswith("Token authentication")]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in p.stderr, p.stderr


def test_policy_parameters_apply_to_the_policies_that_have_them(tmp_path):
    from cluster_sim.sweep import drop_foreign_policy_params
    jobs = [[f"policy={p}", f"policy.alpha={a}"] for p in ("gandalf", "lru_k") for a in (0.5, 1)]
    assert drop_foreign_policy_params(jobs, "lru") == [["policy=gandalf", "policy.alpha=0.5"],
                                                       ["policy=gandalf", "policy.alpha=1"], ["policy=lru_k"]]
    # a key no swept policy has is kept (and fails as a typo)
    typo = [["policy=gandalf", "policy.alhpa=1"], ["policy=lru_k", "policy.alhpa=1"]]
    assert drop_foreign_policy_params(typo, "lru") == typo
