"""The Ray backend: serving nodes as actors (the only simulation module that imports Ray).

``fleet.ray_workers`` actor processes each host one or more nodes
(:class:`~cluster_sim.fleet.NodeRunner`; without feedback, nodes are placed on workers by the
work routing gave them, :func:`place`; with ``kv_events``, node ``i`` lives on worker ``i mod W``).
The chunked trace goes into the object store once and every actor maps it
zero-copy; requests travel as index batches per epoch. Calls to one actor run
in submission order, so an actor's nodes see their requests in trace order.
A dead actor fails the run with an error naming the node and the epoch; no
partial summary is produced.
"""
from __future__ import annotations

import os
from contextlib import contextmanager

import numpy as np

from .errors import ConfigError
from .fleet import NodeRunner, SimulationError

_STARTED_HERE = False


#: where a local start listens: the loopback interface only (docs/sweeps.md "What listens")
LOOPBACK = "127.0.0.1"


@contextmanager
def _loopback_node_ip():
    """While Ray starts here, let it take 127.0.0.1 as this node's address.

    ``ray.init(_node_ip_address="127.0.0.1")`` alone is not enough on Linux: Ray maps a loopback
    address to the machine's routable one unless it is told the machine is no multi-node
    cluster, the switch it keeps for Windows and macOS (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER``,
    read once as ``ray_constants.ENABLE_RAY_CLUSTER``). With it off during ``ray.init``, the GCS,
    the raylet, the object manager, the runtime-env agent and every worker bind 127.0.0.1. Where a
    Ray version lacks the switch, the plain ``_node_ip_address`` is what is left."""
    try:
        from ray._private import ray_constants
    except ImportError:  # pragma: no cover - another Ray layout
        yield
        return
    had = hasattr(ray_constants, "ENABLE_RAY_CLUSTER")
    old = getattr(ray_constants, "ENABLE_RAY_CLUSTER", None)
    if had:
        ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        if had:
            ray_constants.ENABLE_RAY_CLUSTER = old


#: Ray's authentication switches (docs.ray.io ray-security/token-auth): the mode, and where the token is
AUTH_MODE, AUTH_TOKEN, AUTH_TOKEN_PATH = "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"

#: the token this process made up for a local instance (never written to disk; see _private_local_token)
_LOCAL_TOKEN: str | None = None

#: asks a cluster's GCS for its id, in a child process (Ray's C++ client logs to fd 2, and a
#: failed try must not leave this process's Ray settings half changed); prints the error's class
_PROBE = """
import sys
try:
    from ray._raylet import GcsClient
    GcsClient(sys.argv[1])
except Exception as e:
    print(type(e).__name__ + ": " + " ".join(str(e).split())[:300])
    sys.exit(1)
"""


def is_local(address: str | None) -> bool:
    return address in (None, "", "local")


def check_address(address: str | None, key: str = "ray.address") -> None:
    """Fail fast, in one line, when ``host:port`` does not answer (ray.init would wait a long time)."""
    import socket

    if is_local(address) or address == "auto" or "://" in str(address):
        return
    host, _, port = str(address).rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(key, f"expected local, auto or host:port, got {address!r}")
    try:
        with socket.create_connection((host, int(port)), timeout=3):
            pass
    except OSError as e:
        raise ConfigError(key, f"no Ray cluster answers at {address} ({e.strerror or e})") from e


def _refresh_auth_settings() -> None:
    """Ray caches its settings (RAY_AUTH_MODE) and the token it loaded: after changing either in
    ``os.environ``, make this process read them again."""
    try:
        from ray._raylet import AuthenticationTokenLoader, Config
        Config.initialize("")
        AuthenticationTokenLoader.instance().reset_cache()
    except (ImportError, AttributeError):  # pragma: no cover - a Ray without token authentication
        pass


def _private_local_token() -> None:
    """A local instance gets its own token, held in this process's environment only.

    Ray 2.59+ turns token authentication on for a local ``ray.init`` and keeps the token in
    ``~/.ray/auth_token``, one file per user; on a machine where several people (or several test
    runs) start Ray at once, a token written there by one run while another's cluster starts
    workers gives that cluster ``InvalidAuthToken`` errors. A token in ``RAY_AUTH_TOKEN`` (Ray's
    first source) reaches the GCS, the raylet and every worker through their environment and
    never touches the file. A user's own ``RAY_AUTH_MODE`` / token settings are left alone
    (decision 78)."""
    global _LOCAL_TOKEN
    if os.environ.get(AUTH_MODE) or os.environ.get(AUTH_TOKEN) or os.environ.get(AUTH_TOKEN_PATH):
        return
    import secrets

    _LOCAL_TOKEN = secrets.token_hex(32)
    os.environ[AUTH_MODE] = "token"
    os.environ[AUTH_TOKEN] = _LOCAL_TOKEN
    _refresh_auth_settings()


def _forget_local_token() -> None:
    """Before joining a cluster: the made-up local token is no token of that cluster's."""
    global _LOCAL_TOKEN
    if _LOCAL_TOKEN is not None and os.environ.get(AUTH_TOKEN) == _LOCAL_TOKEN:
        os.environ.pop(AUTH_TOKEN, None)
        os.environ.pop(AUTH_MODE, None)
        _refresh_auth_settings()
    _LOCAL_TOKEN = None


def token_source() -> str | None:
    """Where a token for a cluster would come from here, in Ray's order, or None."""
    if os.environ.get(AUTH_TOKEN):
        return AUTH_TOKEN
    path = os.environ.get(AUTH_TOKEN_PATH)
    if path:
        return f"{AUTH_TOKEN_PATH}={path}"
    home = os.path.join(os.path.expanduser("~"), ".ray", "auth_token")
    return home if os.path.isfile(home) else None


def probe(address: str, mode: str, timeout: float = 30.0) -> str | None:
    """Ask the cluster at ``address`` for its id with ``RAY_AUTH_MODE=mode``; None when it answers,
    else Ray's error (``AuthenticationError: ...`` when it wants a token, or another one)."""
    import subprocess
    import sys

    env = {**os.environ, AUTH_MODE: mode}
    try:
        p = subprocess.run([sys.executable, "-c", _PROBE, address], env=env, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"TimeoutError: no answer from the cluster's GCS in {timeout:g} s"
    if p.returncode == 0:
        return None
    return (p.stdout.strip().splitlines() or [f"exit status {p.returncode}"])[-1]


def setup_auth(address: str, key: str = "ray.address") -> str:
    """Find the authentication ``address`` needs and set ``RAY_AUTH_MODE`` for it; returns the mode.

    Ray 2.60 only finds that a cluster wants a token by itself when it looks for the cluster
    (``auto``); told an address, a driver without ``RAY_AUTH_MODE=token`` retries for about 20 s
    and then fails with an error that never says authentication. Here a child process asks the
    cluster first (about a second): a cluster that wants a token gets the one Ray would use
    (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH``, ``~/.ray/auth_token``) with ``RAY_AUTH_MODE=token``
    set for this run; no token, or a token the cluster refuses, is one line naming the fix (a
    :class:`ConfigError` under ``key``, exit status 2; decision 77)."""
    asked = os.environ.get(AUTH_MODE, "").strip().lower()
    first = asked if asked in ("token", "disabled") else "disabled"
    err = probe(address, first)
    if err is None:
        if not asked:
            os.environ[AUTH_MODE] = first
            _refresh_auth_settings()
        return first
    if not err.startswith("AuthenticationError"):
        raise ConfigError(key, f"the Ray cluster at {address} did not answer as a Ray GCS: {err}")
    src = token_source()
    how = (f"set {AUTH_MODE}=token and {AUTH_TOKEN} to the cluster's token (`ray get-auth-token` on the "
           "head prints it; docs/cluster.md)")
    if asked == "disabled":
        raise ConfigError(key, f"the Ray cluster at {address} uses token authentication, and {AUTH_MODE}=disabled "
                               f"here: {how}")
    if src is None:
        raise ConfigError(key, f"the Ray cluster at {address} uses token authentication and no token is set "
                               f"here: {how}")
    if asked != "token" and probe(address, "token") is None:
        os.environ[AUTH_MODE] = "token"
        _refresh_auth_settings()
        return "token"
    raise ConfigError(key, f"the Ray cluster at {address} uses token authentication and refuses the token "
                           f"from {src}: {how}")


def _host_is_loopback(address: str) -> bool:
    import ipaddress

    host = str(address).rpartition(":")[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def package_runtime_env() -> dict:
    """``runtime_env`` that makes this very ``cluster_sim`` importable on a cluster's workers.

    Ray uploads ``py_modules`` folders to the cluster (content-addressed, once per version) and
    puts them on each worker's path. The folder shipped is a copy of the imported package laid
    out like the installed wheel: the bundled ``conf/`` (and the default trace) inside the
    package, where :func:`cluster_sim.locations.data_root` looks first (decision 79)."""
    import hashlib
    import shutil
    import tempfile
    from pathlib import Path

    from . import locations

    pkg = Path(__file__).resolve().parent
    data = locations.data_root()
    h = hashlib.sha256()
    files = sorted(f for f in pkg.rglob("*") if f.is_file() and "__pycache__" not in f.parts)
    extra = [] if data == pkg else sorted(f for d in ("conf", "traces") if (data / d).is_dir()
                                           for f in (data / d).rglob("*") if f.is_file())
    for f in files + extra:
        h.update(str(f).encode())
        h.update(f.read_bytes())
    stage = Path(tempfile.gettempdir()) / f"cluster_sim_ship_{h.hexdigest()[:16]}"
    if not (stage / "cluster_sim" / "__init__.py").is_file():
        tmp = Path(tempfile.mkdtemp(prefix="cluster_sim_ship_", dir=tempfile.gettempdir()))
        shutil.copytree(pkg, tmp / "cluster_sim", ignore=shutil.ignore_patterns("__pycache__"))
        if data != pkg:
            for d in ("conf", "traces"):
                if (data / d).is_dir():
                    shutil.copytree(data / d, tmp / "cluster_sim" / d, ignore=shutil.ignore_patterns("__pycache__"))
        try:
            os.replace(tmp, stage)
        except OSError:      # another process staged the same version first
            shutil.rmtree(tmp, ignore_errors=True)
    return {"py_modules": [str(stage / "cluster_sim")]}


def wants_shipping(address: str | None, ship: str | bool | None) -> bool:
    """``ray.ship_package``: auto ships the package to a cluster joined by address, not to a local one."""
    if isinstance(ship, bool):
        return ship
    v = str(ship if ship is not None else "auto").lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    return not is_local(address)


def ensure_ray(address: str | None, key: str = "ray.address", ship_package: str | bool | None = "auto"):
    """Connect to Ray: ``local`` starts a fresh local instance bound to 127.0.0.1; ``auto`` /
    ``host:port`` join an existing cluster (its authentication found by :func:`setup_auth`, this
    package shipped to its workers unless ``ship_package`` is false).

    ``local`` means a new instance of this process's own, whatever ``RAY_ADDRESS`` or the last
    ``ray start`` (``/tmp/ray/ray_current_cluster``) say: ``ray.init()`` without an address would
    join either (decision 78). Connection failures are one :class:`ConfigError` under ``key``."""
    import ray

    from .signals import reclaim

    global _STARTED_HERE
    if ray.is_initialized():
        return ray
    kw = dict(include_dashboard=False, log_to_driver=False, ignore_reinit_error=True,
              configure_logging=False)
    if wants_shipping(address, ship_package):
        kw["runtime_env"] = package_runtime_env()
    if is_local(address):
        _private_local_token()
        with _loopback_node_ip():
            ray.init(address="local", num_cpus=max(2, os.cpu_count() or 2), object_store_memory=256 * 2**20,
                     _node_ip_address=LOOPBACK, **kw)
        _STARTED_HERE = True
    else:
        _forget_local_token()
        check_address(address, key)
        if address != "auto" and "://" not in str(address):
            setup_auth(str(address), key)
        try:
            if _host_is_loopback(str(address)):   # a head on 127.0.0.1: this driver is on its node
                with _loopback_node_ip():
                    ray.init(address=address, _node_ip_address=LOOPBACK, **kw)
            else:
                ray.init(address=address, **kw)
        except Exception as e:  # noqa: BLE001 - ConnectionError, RuntimeError, ... all mean "cannot connect"
            raise ConfigError(key, f"cannot connect to Ray at {address!r}: {' '.join(str(e).split())[:300]}") \
                from None
    reclaim()   # ray.init installs its own SIGTERM handler in the driver (sys.exit)
    return ray


def _actor_class():
    import ray

    @ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0)
    class NodeGroup:
        """Hosts some of the fleet's nodes in one actor process."""

        def __init__(self, trace, cfg, nodes: list, futures: dict, record_events: bool, fail: dict,
                     shares: dict | None = None):
            shares = shares or {}
            self.runners = {k: NodeRunner(trace, cfg, k, futures.get(k), record_events, fail.get(k), hard_fail=True,
                                          share=shares.get(k))
                            for k in nodes}
            # this process's kernels, loaded (or compiled) while the fleet is set up, as the driver
            # does before its clock starts: loading them is not simulation time
            if any(r.engine == "numba" for r in self.runners.values()):
                from . import engine as engines
                from .fleet import run_settings
                engines.ensure_compiled(settings=run_settings(cfg))

        def pid(self) -> int:
            return os.getpid()

        def run(self, k: int, idx: np.ndarray, epoch: int):
            return self.runners[k].run(idx, epoch)

        def run_span(self, k: int, idx: np.ndarray, epochs: np.ndarray, finish: bool = False):
            """Many epochs in one call: the node's requests ``idx`` (in trace order) with their
            epochs, replayed epoch by epoch exactly as one call per epoch would. With ``finish``
            (the node's last call) also its results, ``(requests, finish())``: one round trip
            fewer per node, and a node's closing work overlaps the other nodes' replays."""
            n = self.runners[k].run_span(idx, epochs)
            return (n, self.runners[k].finish()) if finish else n

        def finish(self, k: int):
            return self.runners[k].finish()

    return NodeGroup


def _when(epoch) -> str:
    """`` during epoch 3`` / `` during epochs 3-9`` (a call of many epochs) / `` while finishing``."""
    if epoch is None:
        return " while finishing"
    if isinstance(epoch, tuple):
        a, b = epoch
        return f" during epoch {a}" if a == b else f" during epochs {a}-{b} (one call)"
    return f" during epoch {epoch}"


def place(loads, workers: int) -> list[int]:
    """The worker of each node: longest first onto the least loaded worker (ties: the lowest
    index), so that the slowest worker, which sets the wall time, carries as little as it can.
    ``loads``: each node's work (its chunk references, known once routing ran ahead). Every
    worker gets a node when there are at least as many nodes; deterministic (decision 97)."""
    loads = np.asarray(loads, dtype=np.float64)
    where = [0] * len(loads)
    total = [0.0] * workers
    count = [0] * workers
    for i in np.argsort(-loads, kind="stable").tolist():
        j = min(range(workers), key=lambda w: (total[w], count[w], w))
        where[i] = j
        total[j] += float(loads[i])
        count[j] += 1
    return where


class RayNodes:
    """The Ray backend behind the same interface as ``fleet.InProcessNodes``."""

    def __init__(self, trace, cfg, futures, record_events, fail, loads=None, shares=None):
        ray = ensure_ray(cfg.fleet.ray_address, "fleet.ray_address",
                         (cfg.raw.get("ray") or {}).get("ship_package", "auto"))
        self.ray = ray
        k = cfg.fleet.nodes
        w = min(cfg.fleet.ray_workers or k, k)
        self.workers = w
        self.fail = dict(fail)
        self._finished: dict = {}       # node -> its finish() results, returned by its last span call
        self.where = place(loads, w) if loads is not None else [i % w for i in range(k)]
        trace_ref = ray.put(trace)
        cls = _actor_class()
        self.actors = []
        for j in range(w):
            mine = [i for i in range(k) if self.where[i] == j]
            fut = {i: futures[i] for i in mine} if futures else {}
            shr = {i: shares[i] for i in mine} if shares else None
            self.actors.append(cls.remote(trace_ref, cfg, mine, fut, record_events,
                                          {i: e for i, e in fail.items() if i in mine}, shr))
        try:
            pids = ray.get([a.pid.remote() for a in self.actors])
        except Exception as e:  # noqa: BLE001 - surfaced as one clear error
            raise SimulationError(f"could not start the node actors: {e}") from None
        self.actor_processes = len(set(pids))

    @classmethod
    def factory(cls, cfg):
        return lambda trace, c, futures, record_events, fail, loads=None, shares=None: cls(
            trace, c, futures, record_events, fail, loads, shares)

    def submit(self, k: int, idx: np.ndarray, epoch: int):
        return (epoch, self.actors[self.where[k]].run.remote(k, idx, epoch))

    def submit_span(self, k: int, idx: np.ndarray, epochs: np.ndarray):
        """Node ``k``'s share of a run without feedback in as few calls as its results allow: one,
        or two when a failure is injected at an epoch of the share, so that the lost call starts at
        that epoch and the error names it (decision 82)."""
        fail = self.fail.get(k)
        cuts = [0, len(idx)]
        if fail is not None:
            at = int(np.searchsorted(epochs, fail))
            if 0 < at < len(idx):
                cuts = [0, at, len(idx)]
        actor = self.actors[self.where[k]]
        last = len(cuts) - 2
        return [((int(epochs[a]), int(epochs[b - 1])),
                 actor.run_span.remote(k, idx[a:b], epochs[a:b], finish=(i == last and fail is None)))
                for i, (a, b) in enumerate(zip(cuts, cuts[1:]))]

    def wait_span(self, k: int, handle) -> int:
        """The requests node ``k`` replayed in the calls of :meth:`submit_span`."""
        fail = self.fail.get(k)
        # an injected failure kills the node as its call starts: at the first epoch of that call
        n = 0
        for span, ref in handle:
            got = self._get(ref, k, span[0] if fail is not None and span[0] >= fail else span)
            if isinstance(got, tuple):          # the node's last call also finished it
                got, self._finished[k] = got
            n += got
        return n

    def wait(self, handles: list, epoch: int) -> list:
        out = []
        for k, (e, ref) in handles:
            out.append(self._get(ref, k, e))
        return out

    def _get(self, ref, k: int, epoch: int | None):
        from ray.exceptions import RayActorError, RayTaskError

        try:
            return self.ray.get(ref)
        except RayActorError as e:
            # epochs are pipelined: the first lost result names the epoch the actor died in
            when = _when(epoch)
            raise SimulationError(f"node {k} (Ray actor on worker {self.where[k]}) died{when}; "
                                  f"the run is abandoned, no partial summary is written ({type(e).__name__})") from None
        except RayTaskError as e:
            cause = e.cause if getattr(e, "cause", None) is not None else e
            when = _when(epoch)
            raise SimulationError(f"node {k} failed{when}: {cause}") from None

    def finish(self) -> list:
        refs = {k: self.actors[self.where[k]].finish.remote(k) for k in range(len(self.where))
                if k not in self._finished}
        return [self._finished[k] if k in self._finished else self._get(refs[k], k, None)
                for k in range(len(self.where))]

    def close(self):
        for a in self.actors:
            try:
                self.ray.kill(a)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.actors = []
