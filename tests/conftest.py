import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parents[1]
from cluster_sim.locations import shared_trace, traces_root

SHARED_TRACES = traces_root()          # $CLUSTER_SIM_TRACES, else ../shared/traces (cluster_sim.locations)
MOONCAKE = shared_trace("mooncake")

# converted-trace cache: one per test session, never the user's ~/.cache
if "CLUSTER_SIM_CACHE" not in os.environ:
    import tempfile
    os.environ["CLUSTER_SIM_CACHE"] = tempfile.mkdtemp(prefix="cluster_sim_test_cache_")

# cache.engine=auto takes numba for every run under test, whether or not an earlier test has
# built the kernels (a small first run would otherwise run interpreted: decision 120)
os.environ.setdefault("CLUSTER_SIM_SMALL_RUN_REFS", "0")

#: the most pytest-xdist workers `-n auto` (pyproject's addopts) starts, and the memory each may need:
#: the whole-trace tests hold a few GB, and every worker builds the compiled engine once in a
#: fresh install (decision 132)
MAX_WORKERS = 4
WORKER_BYTES = 5 << 30


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: one worker per CPU this process may use (a container's quota, not the host's
    count), at most :data:`MAX_WORKERS` and at most one per :data:`WORKER_BYTES` of memory."""
    import psutil
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    by_memory = max(1, psutil.virtual_memory().total // WORKER_BYTES)
    return max(1, min(cpus, MAX_WORKERS, by_memory))


settings.register_profile("ci", max_examples=50, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=30, deadline=None)

needs_mooncake = pytest.mark.skipif(
    not MOONCAKE.exists(),
    reason=f"real traces are not present at {SHARED_TRACES} (a fresh clone has none; set CLUSTER_SIM_TRACES)")


@pytest.fixture(scope="session")
def mooncake_table():
    from cluster_sim.trace.mooncake import read_mooncake
    if not MOONCAKE.exists():
        pytest.skip(f"real traces are not present at {SHARED_TRACES}")
    return read_mooncake(MOONCAKE)


@pytest.fixture(autouse=True)
def _fresh_prepared_trace():
    """Each test prepares its own traces: the process keeps the last one (api._prepare), and a
    test must not pass or fail by what an earlier test left there."""
    from cluster_sim import api
    api.clear_prepared()
    yield
    api.clear_prepared()


@pytest.fixture
def closed_port() -> int:
    """A loopback TCP port nothing listens on (bound once, then released)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
settings.register_profile("thorough", max_examples=2000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
