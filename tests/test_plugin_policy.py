"""A policy of one's own, outside the package (#47; README "Your own policy"): the example in
docs/examples/type_aware_lru is found through its ``cluster_sim.policies`` entry point, runs from
the command line like a built-in, and its compiled hooks give the interpreted run exactly."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from simhelpers import assert_runs_identical

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "examples" / "type_aware_lru"


def _installed(site: Path, name: str = "type_aware_lru", target: str = "type_aware_lru:TypeAwareLRU") -> Path:
    """The example as an installed distribution under ``site`` (what ``pip install`` leaves: the
    package and a ``.dist-info`` with its entry point), without pip or a network."""
    site.mkdir(parents=True, exist_ok=True)
    shutil.copytree(EXAMPLE / "type_aware_lru", site / "type_aware_lru")
    info = site / "type_aware_lru-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: type-aware-lru\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(f"[cluster_sim.policies]\n{name} = {target}\n")
    return site


@pytest.fixture(scope="session")
def site():
    """One installed copy for the whole test run, every worker's (so its kernels build once: numba
    keys its cache on the source's path)."""
    import fcntl
    import os
    root = Path(os.environ["CLUSTER_SIM_CACHE"]) / "plugin-site"     # the run's own folder (conftest)
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / "plugin-site.lock", "a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        if not (root / "type_aware_lru-0.1.0.dist-info").exists():
            tmp = root.with_name(f"plugin-site.{os.getpid()}")
            _installed(tmp)
            tmp.rename(root)
    return root


def _cli(site: Path, *args, cwd: Path):
    import os
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "cluster_sim.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def test_an_installed_policy_runs_from_the_command_line_like_a_builtin(tmp_path, site):
    out = tmp_path / "summary.json"
    p = _cli(site, "policy=type_aware_lru", "cache.engine=python", "tracking.enabled=false",
             f"output.summary_path={out}", f"output.dir={tmp_path}/o", cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["config"]["policy"]["name"] == "type_aware_lru"
    node = data["nodes"][0]
    # its rule: STATE victims of DRAM are dropped, never written; FA victims go down to the SSD
    assert node["policy.type_aware_lru.dram_victims_dropped"] > 0
    assert node["policy.type_aware_lru.dram_victims_demoted"] > 0
    assert data["fleet"]["ssd_write_hit_fraction_state"] == 0.0
    # a typo in its name is one line and exit 2, like any other
    p = _cli(site, "policy=type_aware_lr", "tracking.enabled=false", f"output.dir={tmp_path}/o2", cwd=tmp_path)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1 and "type_aware_lr" in lines[0] and "Traceback" not in p.stderr


def test_a_policy_class_by_its_import_path_runs_without_an_entry_point(tmp_path):
    # policy._target_: the class of a package on the path, no installation (its .dist-info removed)
    plain = tmp_path / "plain"
    shutil.copytree(EXAMPLE / "type_aware_lru", plain / "type_aware_lru")
    out = tmp_path / "summary.json"
    target = ["policy=lru", "policy.name=mine", "+policy._target_=type_aware_lru.TypeAwareLRU"]
    p = _cli(plain, *target, "cache.engine=python", "tracking.enabled=false", f"output.summary_path={out}",
             f"output.dir={tmp_path}/o", cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["config"]["policy"]["name"] == "mine" and data["nodes"][0]["policy.mine.dram_victims_dropped"] > 0
    for bad, where in ((["policy=lru", "policy.name=mine", "+policy._target_=type_aware_lru.Nope"], "policy._target_"),
                       (["policy=lru", "policy.name=mine", "+policy._target_=no_such_pkg.Policy"], "policy._target_"),
                       (["policy=lru", "+policy._target_=type_aware_lru.TypeAwareLRU"], "policy.name")):
        p = _cli(plain, *bad, "tracking.enabled=false", f"output.dir={tmp_path}/o2", cwd=tmp_path)
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        assert p.returncode == 2 and len(lines) == 1 and where in lines[0] and "Traceback" not in p.stderr, p.stderr


def test_a_plugin_named_like_a_builtin_is_refused_naming_both(tmp_path, monkeypatch):
    from cluster_sim.policies import base
    site = _installed(tmp_path / "site", name="lru")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(base, "_plugins_read", False)
    with pytest.raises(base.RegistryError, match=r"'lru' of package 'type-aware-lru'.*clashes.*cluster_sim.policies.lru"):
        base.known_policies()


@pytest.fixture
def registered(site, monkeypatch):
    """The example registered in this process, as its entry point would (then unregistered)."""
    from cluster_sim.policies import base
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(base, "_plugins_read", False)
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))
    monkeypatch.setattr(base, "_PLUGINS", {})
    assert base.plugin_policies() == {"type_aware_lru": "type-aware-lru"}
    return base


def test_the_plugins_compiled_hooks_give_its_interpreted_run(registered):
    import cluster_sim
    from cluster_sim.engine import policy_unsupported
    assert policy_unsupported("type_aware_lru") is None            # kernels beside it: compiled
    base = ["tracking.enabled=false", "output.requests=true", "policy=lru", "policy.name=type_aware_lru"]
    ref = cluster_sim.run(cluster_sim.compose(base + ["cache.engine=python"]), write=False)
    got = cluster_sim.run(cluster_sim.compose(base + ["cache.engine=numba"]), write=False)
    assert ref.run["engine"] == "python" and got.run["engine"] == "numba"
    assert ref.nodes[0]["policy.type_aware_lru.dram_victims_dropped"] > 0
    assert ref.nodes[0]["policy.type_aware_lru.state_bytes_dropped"] > 0     # its own counter, via its adapter
    assert_runs_identical(ref, got)


def test_a_plugin_without_kernels_runs_interpreted_and_says_why_under_numba(registered, tmp_path, monkeypatch):
    import cluster_sim
    from cluster_sim.errors import ConfigError
    (tmp_path / "plain_policy.py").write_text(
        "from type_aware_lru import TypeAwareLRU\n\nclass Plain(TypeAwareLRU):\n    name = 'plain'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registered.register("plain", "plain_policy:Plain")
    base = ["tracking.enabled=false", "policy=lru", "policy.name=plain", "workload.limit_requests=200"]
    s = cluster_sim.run(cluster_sim.compose(base + ["cache.engine=auto"]), write=False)
    assert s.run["engine"] == "python"
    with pytest.raises(ConfigError, match="policy 'plain' has no compiled kernels"):
        cluster_sim.run(cluster_sim.compose(base + ["cache.engine=numba"]), write=False)


@pytest.mark.ray
@pytest.mark.slow
def test_an_installed_policy_runs_in_a_two_point_sweep_on_ray(tmp_path, site):
    # every point a Ray task (the sweep's default launcher): the workers find the plugin as the
    # driver does, through the installed distribution's entry point
    from mlflow import MlflowClient
    db = f"sqlite:///{tmp_path}/mlruns/mlflow.db"
    p = _cli(site, "-m", "policy=lru,type_aware_lru", "workload.limit_requests=300", "report.figures=false",
             f"tracking.uri={db}", "tracking.experiment=plugin", f"hydra.sweep.dir={tmp_path}/multirun",
             cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    c = MlflowClient(tracking_uri=db)
    runs = c.search_runs([c.get_experiment_by_name("plugin").experiment_id], max_results=10)
    points = {r.data.params["policy.name"]: r for r in runs if r.data.tags.get("cluster_sim.kind") == "point"}
    assert set(points) == {"lru", "type_aware_lru"}
    assert all(r.info.status == "FINISHED" for r in points.values())
    # the rule shows in the numbers: no STATE is ever written to the SSD
    assert points["type_aware_lru"].data.metrics["ssd_bytes_written_state"] == 0
    assert points["lru"].data.metrics["ssd_bytes_written_state"] > 0
