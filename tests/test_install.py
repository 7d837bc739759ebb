"""A regular (non-editable) install: build the wheel, install it into a fresh virtual
environment, run ``cluster-sim`` from an empty folder, then with a user's own config folder
(``-cd``) holding a hardware file that names a bundled one as its default.

The environment is made with ``--system-site-packages`` (and, when the tests run in a virtual
environment, that environment's site-packages added) so the dependencies (numpy, Ray,
MLflow, ...) come from the interpreter running the tests and nothing is downloaded but the
build backend (pip's build isolation; the package index or its local mirror). The wheel's
own ``cluster_sim`` shadows any other copy: the test checks which one runs.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def _env(venv: Path) -> dict:
    # a new user's environment: no CLUSTER_SIM_SMALL_RUN_REFS (conftest sets it for in-process tests)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "CLUSTER_SIM_SMALL_RUN_REFS")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    env["CI"] = "true"
    return env


def _run(cmd, cwd, env, timeout=900):   # a guard against hangs: a fresh install compiles the engine (~150-250 s)
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"{' '.join(map(str, cmd))} -> {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p


def _summary(folder: Path) -> dict:
    found = sorted(folder.glob("outputs/*/*/summary.json"))
    assert len(found) == 1, found
    return json.loads(found[0].read_text())


def _see_parent_packages(venv: Path) -> None:
    """When the tests themselves run in a virtual environment, ``--system-site-packages`` gives the
    new one the *base* interpreter's packages, not that environment's (where the dependencies are):
    a ``.pth`` file adds its site-packages folders after the new environment's own, so the wheel
    installed there still comes first (the test checks which copy runs). Their own ``.pth`` files
    are not processed, so the parent's editable cluster_sim is not seen."""
    import site
    import sysconfig
    if sys.prefix == sys.base_prefix:
        return
    parents = [p for p in dict.fromkeys(site.getsitepackages() + [sysconfig.get_paths()["purelib"]]) if Path(p).is_dir()]
    py = subprocess.run([venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                        capture_output=True, text=True, check=True).stdout.strip()
    (Path(py) / "_cluster_sim_parent_env.pth").write_text("\n".join(parents) + "\n")


def test_wheel_installs_and_runs_from_any_folder(tmp_path):
    wheels, venv = tmp_path / "wheels", tmp_path / "venv"
    env0 = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(ROOT)], tmp_path, env0)
    (whl,) = wheels.glob("cluster_sim-*.whl")
    names = set(zipfile.ZipFile(whl).namelist())
    assert {"cluster_sim/conf/config.yaml", "cluster_sim/conf/hardware/demo.yaml",
            "cluster_sim/traces/default.parquet", "hydra_plugins/cluster_sim_ray_launcher/ray_launcher.py"} <= names

    _run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], tmp_path, env0)
    _see_parent_packages(venv)
    env = _env(venv)
    _run([venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", str(whl)],
         tmp_path, env)
    where = _run([venv / "bin" / "python", "-c", "import cluster_sim.locations as r; print(r.conf_dir())"],
                 tmp_path, env).stdout.strip()
    assert where.startswith(str(venv)), f"the installed wheel is not the copy that runs: {where}"

    # the default job, from an empty folder (the MLflow store lands there too)
    empty = tmp_path / "empty"
    empty.mkdir()
    p = _run([venv / "bin" / "cluster-sim"], empty, env)
    out = p.stdout
    assert "chunk miss ratio" in out and "MLflow run:" in out
    base = _summary(empty)
    # a fresh install's first run of the small default does not wait for the compiler (decision 120)
    assert base["run"]["engine"] == "python", base["run"]["engine"]
    assert "runs interpreted, with the same results" in p.stderr
    assert base["config"]["hardware"]["ssd_bytes"] == "500GB"
    assert Path(base["config"]["workload"]["path"]).name == "default.parquet"
    assert (empty / "mlflow_runs" / "mlflow.db").is_file()

    # a user's config folder: hardware/mine.yaml = the bundled demo with one key changed
    user = tmp_path / "my_conf"
    (user / "hardware").mkdir(parents=True)
    (user / "hardware" / "mine.yaml").write_text("defaults:\n  - demo\n  - _self_\nssd_bytes: 100GB\n")
    second = tmp_path / "second"
    second.mkdir()
    _run([venv / "bin" / "cluster-sim", "-cd", str(user), "hardware=mine", "tracking.enabled=false"], second, env)
    mine = _summary(second)
    assert mine["config"]["hardware"]["ssd_bytes"] == "100GB"
    assert mine["config"]["hardware"]["dram_bytes"] == base["config"]["hardware"]["dram_bytes"]
    # it takes effect: the same bytes written over a fifth of the capacity wear it out 5x sooner
    ratio = base["fleet"]["ssd_lifetime_years"] / mine["fleet"]["ssd_lifetime_years"]
    assert ratio == pytest.approx(5.0, rel=0.05), ratio
