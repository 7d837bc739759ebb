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


#: heavy tests that never build the compiled engine, run first: in a fresh install one background
#: process builds the kernels (:func:`pytest_configure`) while the workers run these, and a test
#: that needs the kernels waits for that build (the engine's build lock) instead of building them
#: once more in every worker
EARLY = (
    "test_claude_code.py::test_real_weka_trace_matches_readme",
    "test_faults_ray.py::test_sigterm_kills_the_parent_run_and_the_sweep_resumes",
    "test_request_signals.py::test_the_weka_trace_carries_stop_reasons",
    "test_install.py::",
    "test_reuse_jit.py::",
    "test_claude_code.py::",
    "test_trace_schema.py::",
    "test_trace_mooncake.py::",
)

_BUILDERS: list = []

#: a builder process's program: build every n-th kernel set, from the i-th (argv: i n)
#: (Gandalf's set first: it takes about three times as long as another, and it is the one most tests use)
_BUILD = ("import os, sys; from cluster_sim.engine import build as E; i, n = map(int, sys.argv[1:3]); os.nice(5); "
          "ks = sorted(E._kernel_sets(None), key=lambda x: x[0].name != 'gandalf.kernels'); "
          "E.ensure_compiled(settings=[(p, q) for _, p, q in ks[i::n]])")


def pytest_configure(config):
    """In the controller of a parallel run on a fresh install: build the kernels in background
    processes, one per CPU (at most 2), each taking every other kernel set, at a lower priority than
    the tests (a test that needs no kernels is not held up by them). A builder holds a set's
    build lock while it builds it; every worker's (and every command-line subprocess's)
    ``ensure_compiled`` of that set then waits for it and loads the cache."""
    if os.environ.get("PYTEST_XDIST_WORKER") or not getattr(config.option, "numprocesses", None):
        return
    import subprocess
    import sys
    import threading
    from cluster_sim import engine
    if not engine.numba_available()[0] or engine.compile_notice() is None:
        return
    n = max(1, min(2, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))
    for i in range(n):
        b = subprocess.Popen([sys.executable, "-c", _BUILD, str(i), str(n)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        first = b.stderr.readline()         # its first compile notice, printed once it holds that set's lock
        b.tail = [first]
        threading.Thread(target=lambda b=b: b.tail.extend(b.stderr), daemon=True).start()
        _BUILDERS.append(b)
        print(f"conftest: building compiled kernels in the background (pid {b.pid}): {first.strip()}")


def pytest_unconfigure(config):
    for b in _BUILDERS:
        if b.poll() is None:
            b.terminate()
            b.wait(timeout=60)


def pytest_collection_modifyitems(config, items):
    def early(item):
        name = item.nodeid.rsplit("/", 1)[-1]
        return next((i for i, e in enumerate(EARLY) if name.startswith(e)), len(EARLY))
    items.sort(key=early)          # stable: the rest keep their order


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
