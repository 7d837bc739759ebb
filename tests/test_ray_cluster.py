"""A real Ray cluster (issue #15, item 3): ``ray start --head`` on 127.0.0.1, started and stopped
(by its PID) here, with token authentication on; a fleet and a sweep join it by address.

The head has a private temp dir, free ports for everything it listens on, no dashboard and its
own token, so it collides neither with other tests' local Ray instances nor with anyone's Ray on
a shared machine; ``ray stop`` (which stops every Ray of the user) is never called.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.ray, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
# the interpreted engine: a package shipped to the cluster has no numba cache, so compiled workers
# would each spend 2-5 min compiling (docs/cluster.md), whichever test came first; the engines'
# identity on Ray actors is tested in test_fleet.py, and these tests are about joining, auth and shipping
SMALL = ["workload.limit_requests=300", "report.figures=false", "cache.engine=python"]
AUTH = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS")


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _descendants(pid: int) -> set[int]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                ppid = int(Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        for k in kids.get(p, []):
            if k not in out:
                out.add(k)
                todo.append(k)
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:    # a zombie is gone for our purposes
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Head:
    def __init__(self, proc, port: int, token: str, temp: str):
        self.proc, self.port, self.token, self.temp = proc, port, token, temp
        self.address = f"127.0.0.1:{port}"

    def env(self, home: Path, **extra) -> dict:
        """A driver's environment: no Ray auth settings of the caller's, a home of its own."""
        env = {k: v for k, v in os.environ.items() if k not in AUTH}
        env.update(CI="1", HOME=str(home), PYTHONPATH=str(ROOT))
        env.update(extra)
        return env


@pytest.fixture(scope="module")
def head():
    ports = _free_ports(48)
    temp = tempfile.mkdtemp(prefix="csrh_", dir="/tmp")     # short: Ray's socket paths live under it
    token = secrets.token_hex(32)
    env = {k: v for k, v in os.environ.items() if k not in AUTH and k != "PYTHONPATH"}
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token,
               RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")      # bind 127.0.0.1 only (cluster_sim.distributed)
    cmd = ["ray", "start", "--head", "--block", "--node-ip-address", "127.0.0.1", "--port", str(ports[0]),
           "--include-dashboard=false", "--disable-usage-stats", "--temp-dir", temp,
           "--node-manager-port", str(ports[1]), "--object-manager-port", str(ports[2]),
           "--runtime-env-agent-port", str(ports[3]), "--dashboard-agent-grpc-port", str(ports[4]),
           "--dashboard-agent-listen-port", str(ports[5]), "--metrics-export-port", str(ports[6]),
           "--worker-port-list", ",".join(map(str, ports[8:])),
           "--num-cpus", "2", "--object-store-memory", str(256 * 2**20)]
    log = open(Path(temp) / "head.log", "w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=temp)
    try:
        deadline = time.monotonic() + 120
        while "Ray runtime started" not in (Path(temp) / "head.log").read_text():
            assert proc.poll() is None, (Path(temp) / "head.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "ray start --head did not come up in 120 s"
            time.sleep(0.5)
        yield Head(proc, ports[0], token, temp)
    finally:
        tree = _descendants(proc.pid)
        proc.send_signal(signal.SIGTERM)        # by its PID: ray start --block stops what it started
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        deadline = time.monotonic() + 30
        while any(_alive(p) for p in tree) and time.monotonic() < deadline:
            time.sleep(0.5)
        left = [p for p in tree if _alive(p)]
        for p in left:                          # only processes of this head's own tree
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        log.close()
        shutil.rmtree(temp, ignore_errors=True)
        assert not left, f"the head's processes outlived SIGTERM: {left}"


def cli(*args, cwd, env, timeout=900):   # a guard against hangs (a shipped worker compiling the engine took ~5 min)
    return subprocess.run([sys.executable, "-m", "cluster_sim.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _errors(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln.strip()]


def test_a_fleet_joins_the_cluster_by_address_and_matches_in_process(head, tmp_path):
    # RAY_AUTH_MODE unset, the token in RAY_AUTH_TOKEN: the token mode is found, not required
    env = head.env(tmp_path, RAY_AUTH_TOKEN=head.token)
    fleet = ["fleet.nodes=3", "fleet.router=session_affinity", *SMALL, "tracking.enabled=false"]
    p = cli("fleet.backend=ray", f"fleet.ray_address={head.address}", "fleet.ray_workers=2", *fleet,
            f"output.dir={tmp_path}/ray", cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "InvalidAuthToken" not in p.stderr and "Traceback" not in p.stderr
    q = cli(*fleet, f"output.dir={tmp_path}/inproc", cwd=tmp_path, env=env)
    assert q.returncode == 0, q.stderr[-3000:]
    a = json.loads((tmp_path / "ray" / "summary.json").read_text())
    b = json.loads((tmp_path / "inproc" / "summary.json").read_text())
    assert a["run"]["backend"] == "ray" and a["run"]["actor_processes"] == 2
    timing = ("sim_wall_s", "sim_chunk_refs_per_s")
    for x, y in zip(a["nodes"], b["nodes"]):
        assert {k: v for k, v in x.items() if k not in timing} == {k: v for k, v in y.items() if k not in timing}
    assert {k: v for k, v in a["fleet"].items() if k not in timing} == \
           {k: v for k, v in b["fleet"].items() if k not in timing}


def test_a_sweep_runs_its_points_on_the_cluster(head, tmp_path):
    from mlflow import MlflowClient

    env = head.env(tmp_path, RAY_AUTH_TOKEN=head.token)
    db = f"sqlite:///{tmp_path}/m.db"
    p = cli("-m", "seed=0,1", *SMALL, f"ray.address={head.address}", f"tracking.uri={db}",
            "tracking.experiment=cluster", f"hydra.sweep.dir={tmp_path}/sw", cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "2 finished, 0 failed" in p.stdout
    c = MlflowClient(tracking_uri=db)
    runs = c.search_runs([c.get_experiment_by_name("cluster").experiment_id])
    parents = [r for r in runs if r.data.tags.get("cluster_sim.kind") == "sweep"]
    points = [r for r in runs if r.data.tags.get("cluster_sim.kind") == "point"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert len(points) == 2 and all(r.info.status == "FINISHED" for r in points)
    # the points ran in this head's worker processes (their logs are in its temp dir), not in a
    # Ray instance of the driver's own
    logs = {f.name for f in Path(head.temp).glob("session_*/logs/python-core-worker-*.log")}
    for r in points:
        pid = r.data.tags["worker_pid"]
        assert any(n.endswith(f"_{pid}.log") for n in logs), (pid, sorted(logs))


SHIPPED = r'''
import json, sys
from cluster_sim.distributed import ensure_ray
ray = ensure_ray(sys.argv[1])

@ray.remote
def where():
    import cluster_sim
    from cluster_sim.locations import conf_dir
    return cluster_sim.__file__, str(conf_dir()), (conf_dir() / "config.yaml").is_file()

print(json.dumps(ray.get(where.remote())))
'''


def test_the_workers_import_the_package_the_driver_shipped(head, tmp_path):
    env = head.env(tmp_path, RAY_AUTH_TOKEN=head.token)
    p = subprocess.run([sys.executable, "-c", SHIPPED, head.address], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    path, conf, has_config = json.loads(p.stdout.strip().splitlines()[-1])
    # not this checkout, not the shared installation: the copy Ray unpacked from the upload
    assert not path.startswith(str(ROOT)) and "runtime_resources" in path, path
    assert has_config and conf.startswith(str(Path(path).parent)), conf


@pytest.mark.parametrize("case", ["no token", "wrong token", "auth disabled here"])
def test_token_authentication_problems_are_one_line_before_any_run_opens(head, tmp_path, case):
    extra = {"no token": {}, "wrong token": {"RAY_AUTH_TOKEN": "0" * 64},
             "auth disabled here": {"RAY_AUTH_MODE": "disabled", "RAY_AUTH_TOKEN": head.token}}[case]
    env = head.env(tmp_path, **extra)
    t0 = time.monotonic()
    p = cli("-m", "seed=0,1", *SMALL, f"ray.address={head.address}", f"tracking.uri=sqlite:///{tmp_path}/m.db",
            f"hydra.sweep.dir={tmp_path}/sw", cwd=tmp_path, env=env)
    took = time.monotonic() - t0
    lines = _errors(p.stderr)
    assert p.returncode == 2 and len(lines) == 1, p.stderr[-3000:]
    assert "ray.address" in lines[0] and "token authentication" in lines[0] and "RAY_AUTH_TOKEN" in lines[0]
    assert "InvalidAuthToken" not in p.stderr
    assert took < 60, f"{took:.0f} s: Ray's own retries (about 20 s) were not cut short"
    # Ray is reached before MLflow: no store, no parent run
    assert not (tmp_path / "m.db").exists() and not (tmp_path / "sw").exists()


def test_a_local_instance_ignores_RAY_ADDRESS_and_the_users_token_file(head, tmp_path):
    # RAY_ADDRESS names a foreign cluster (this head, whose token we do not give): ray.init() with
    # no address would join it and fail on its token; fleet.ray_address=local starts our own
    env = head.env(tmp_path, RAY_ADDRESS=head.address)
    p = cli("fleet.backend=ray", "fleet.nodes=2", *SMALL, "tracking.enabled=false", f"output.dir={tmp_path}/o",
            cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "InvalidAuthToken" not in p.stderr
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["run"]["backend"] == "ray" and s["run"]["actor_processes"] == 2
    # the local token lived in the environment only: nothing written to the (shared) ~/.ray
    assert not (tmp_path / ".ray" / "auth_token").exists()


def test_a_sweep_that_dies_after_its_parent_opened_marks_it_failed_with_the_reason(tmp_path, monkeypatch):
    # no Ray needed: the connection is stood in for, and the points' run loses its cluster
    import cluster_sim
    from cluster_sim import sweep
    from mlflow import MlflowClient

    def lost(*a, **k):
        raise ConnectionError("the Ray cluster went away")

    monkeypatch.setattr(sweep, "_connect", lambda *a, **k: object())
    monkeypatch.setattr(sweep, "_run_points", lost)
    base = cluster_sim.compose(SMALL)
    points = [sweep.Point(i, [f"seed={i}"], {**base, "seed": i}, str(tmp_path / "sw" / str(i))) for i in (0, 1)]
    db = f"sqlite:///{tmp_path}/m.db"
    settings = {"tracking": {**base["tracking"], "enabled": True, "uri": db, "experiment": "dies"},
                "sweep": {"progress": False}, "ray": base["ray"], "report": {"figures": False}}
    with pytest.raises(ConnectionError):
        sweep.run_sweep(points, settings=settings, sweep_dir=tmp_path / "sw")
    c = MlflowClient(tracking_uri=db)
    (parent,) = c.search_runs([c.get_experiment_by_name("dies").experiment_id])
    assert parent.info.status == "FAILED"
    assert "the Ray cluster went away" in parent.data.tags["error"]


def _count_calls(cfg, trace):
    """Run the fleet on a local Ray, counting the replay calls the driver submits."""
    from cluster_sim.distributed import RayNodes
    from cluster_sim.fleet import run_fleet

    seen = {"span": 0, "epoch": 0}

    class Counting(RayNodes):
        def submit_span(self, k, idx, epochs):
            h = super().submit_span(k, idx, epochs)
            seen["span"] += len(h)
            return h

        def submit(self, k, idx, epoch):
            seen["epoch"] += 1
            return super().submit(k, idx, epoch)

    return run_fleet(trace, cfg, Counting.factory(cfg)), seen


def test_without_feedback_each_node_replays_its_share_in_one_call(tmp_path):
    from cluster_sim.api import prepare
    from cluster_sim.config import SimConfig
    from cluster_sim.distributed import ensure_ray
    from cluster_sim.fleet import epochs_of, run_fleet

    ensure_ray("local")
    ov = ["fleet.nodes=4", "fleet.router=session_affinity", "workload.limit_requests=600", "fleet.epoch_s=5"]
    cfg = SimConfig.from_mapping(cluster_sim_compose(ov + ["fleet.backend=ray", "fleet.ray_workers=2"]))
    trace, _, _ = prepare(cfg)
    epochs = len(np.unique(epochs_of(trace, 5.0)))
    raw, seen = _count_calls(cfg, trace)
    active = len(np.unique(raw["assign"]))
    assert epochs > 5 * active                     # many epochs, and yet one call per node
    assert seen == {"span": active, "epoch": 0}
    local = run_fleet(trace, SimConfig.from_mapping(cluster_sim_compose(ov)))
    assert np.array_equal(local["assign"], raw["assign"])
    for (sa, a), (sb, b) in zip(local["results"], raw["results"]):
        assert sa == sb
        assert a.keys() == b.keys() and all(np.array_equal(a[x], b[x]) for x in a)
    # an injected failure cuts its node's share at that epoch: the lost call starts there
    bad = SimConfig.from_mapping(cluster_sim_compose(ov + ["fleet.backend=ray", "fleet.ray_workers=2",
                                                           "+fleet.inject_failure={node: 1, epoch: 4}"]))
    from cluster_sim.errors import UserError
    with pytest.raises(UserError, match=r"node 1 .*died during epoch \d+;"):
        _count_calls(bad, trace)
    # with feedback the barriers stay: one call per node and epoch it has requests in
    kv = SimConfig.from_mapping(cluster_sim_compose(ov + ["fleet.backend=ray", "fleet.ray_workers=2",
                                                          "fleet.sync=kv_events", "fleet.router=kv_aware"]))
    raw, seen = _count_calls(kv, trace)
    assert seen["span"] == 0 and seen["epoch"] > epochs


def cluster_sim_compose(ov):
    import cluster_sim
    return cluster_sim.compose(ov)
