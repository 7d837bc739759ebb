"""Every config in conf/ composes and instantiates; experiment files hold only overrides;
``cluster-sim --help`` / ``--cfg job`` behave as Hydra users expect."""
from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import cluster_sim
from cluster_sim.config import SimConfig
from cluster_sim.policies.base import make_policy

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
GROUPS = sorted(d.name for d in CONF.iterdir() if d.is_dir())


def _instantiate(m: dict) -> SimConfig:
    wl = m["workload"]
    if wl.get("path") and not Path(wl["path"]).exists() and not (ROOT / wl["path"]).exists():
        wl["path"] = str(ROOT / "traces" / "default.parquet")     # real traces may be absent
    cfg = SimConfig.from_mapping(m)
    make_policy(cfg.policy.name, cfg.policy.params)
    return cfg


def _flat_keys(d, prefix=""):
    out = set()
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out |= _flat_keys(v, f"{prefix}{k}.")
        else:
            out.add(f"{prefix}{k}")
    return out


def test_groups_include_experiment_and_debug():
    for g in ("model", "hardware", "workload", "policy", "fleet", "experiment", "debug"):
        assert g in GROUPS, g


@pytest.mark.parametrize("group", GROUPS)
def test_every_option_composes_and_instantiates(group):
    names = sorted(f.stem for f in (CONF / group).glob("*.yaml"))
    assert names
    for name in names:
        _instantiate(cluster_sim.compose([f"{group}={name}"]))


@pytest.mark.parametrize("name", sorted(f.stem for f in (CONF / "experiment").glob("*.yaml")))
def test_experiments_hold_only_overrides_and_every_sweep_point_instantiates(name):
    text = (CONF / "experiment" / f"{name}.yaml").read_text()
    assert text.startswith("# @package _global_") or "\n# @package _global_" in text
    base = _flat_keys(cluster_sim.compose([]))
    m = cluster_sim.compose([f"experiment={name}"])
    # an experiment may pick other group options but adds no key of its own
    groups_chosen = {k.split(".")[0] for k in _flat_keys(m) - base}
    assert groups_chosen <= {"model", "hardware", "workload", "policy", "fleet"}, groups_chosen
    assert m["tracking"]["experiment"] == name, "one MLflow experiment per study"
    params = ((yaml.safe_load(text).get("hydra") or {}).get("sweeper") or {}).get("params") or {}
    assert params, "a study defines its sweep"
    axes = [[f"{k}={v}" for v in str(vals).split(",")] for k, vals in params.items()]
    for point in itertools.product(*axes):
        _instantiate(cluster_sim.compose([f"experiment={name}", *point]))


def test_debug_preset_is_small():
    m = cluster_sim.compose(["debug=default"])
    assert m["workload"]["limit_requests"] <= 1000 and m["tracking"]["experiment"] == "debug"


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "cluster_sim.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def test_help_lists_groups_and_sweep_examples(tmp_path):
    p = _cli("--help", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    for g in ("experiment:", "debug: default", "policy:", "fleet:"):
        assert g in p.stdout, g
    assert "cluster-sim -m" in p.stdout
    assert not (tmp_path / "outputs").exists() and not (tmp_path / "mlflow_runs").exists()


def test_cfg_job_prints_the_composed_config(tmp_path):
    p = _cli("--cfg", "job", "experiment=gandalf_alpha", "policy.alpha=3", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    cfg = yaml.safe_load(p.stdout)
    assert cfg["policy"]["name"] == "gandalf" and cfg["policy"]["alpha"] == 3
    assert cfg["tracking"]["experiment"] == "gandalf_alpha" and "hydra" not in cfg
    p = _cli("--cfg", "hydra", cwd=tmp_path)
    assert "cluster_sim_ray_launcher" in p.stdout     # the Ray launcher is Hydra's launcher here
