"""MLflow logging (the only module that imports mlflow, and only inside functions).

Nothing here runs unless ``tracking.enabled`` is true, so a run with tracking off
never imports MLflow. Everything goes through one :class:`mlflow.MlflowClient`
(no fluent global "active run"), so a sweep driver can hold a parent run open
while it logs child runs as their Ray tasks finish.

Layout in the store (simulation-model §9):

* one experiment per study (``tracking.experiment``; the experiment configs set it),
* a parent run per sweep, tagged ``cluster_sim.kind=sweep``,
* a child run per point (``cluster_sim.kind=point``, ``mlflow.parentRunId``) or a
  lone run for ``cluster-sim`` without ``-m`` (``cluster_sim.kind=single``), with
  params = the flattened resolved config, metrics = the §6 summary (per node as
  ``node<i>.<key>``), per-simulated-hour series (``series.*``, step = hour) and
  artifacts (resolved config, ``summary.json``, Parquet tables, figures),
* tag ``config_hash``: sha256 of the resolved config without the keys that do not
  change what is simulated (``tracking``, ``sweep``, ``ray``, ``output``,
  ``report``); ``sweep.resume=true`` skips a point whose hash has a FINISHED run.
"""
from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any, Iterable, Mapping

from .errors import ConfigError, TrackingError

DEFAULT_URI = "sqlite:///mlflow_runs/mlflow.db"

#: top-level config keys that say where/how to run and log, not what to simulate
NON_SIM_KEYS = ("tracking", "sweep", "ray", "output", "report", "hydra", "paths")

KIND_TAG = "cluster_sim.kind"
HASH_TAG = "config_hash"


# --------------------------------------------------------------------------- pure helpers (no mlflow)

#: dotted keys that never change a simulated figure (``workload.rechain``: chaining is exact, and a
#: trace that needs it fails without it; ``cache.engine``: the engines' results are identical), left out of the hash so that adding them moves no hash
NON_SIM_DOTTED = ("workload.rechain", "cache.engine")


def config_hash(config: Mapping, *, drop: Iterable[str] = ()) -> str:
    """sha256 of the resolved config without :data:`NON_SIM_KEYS`, :data:`NON_SIM_DOTTED` (and
    ``drop``: dotted keys)."""
    import hashlib

    drop = (*NON_SIM_DOTTED, *drop)
    c = {k: v for k, v in config.items() if k not in NON_SIM_KEYS}
    c = json.loads(json.dumps(c, default=str))
    if isinstance(c.get("model"), dict):
        c["model"] = {k: v for k, v in c["model"].items() if k != "derived"}
    for key in drop:
        parts = key.split(".")
        node = c
        for p in parts[:-1]:
            node = node.get(p) if isinstance(node, dict) else None
            if node is None:
                break
        if isinstance(node, dict):
            node.pop(parts[-1], None)
    return hashlib.sha256(json.dumps(c, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def flatten(d: Mapping, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``; empty mappings and lists stay as JSON text."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping) and v:
            out.update(flatten(v, key + "."))
        elif isinstance(v, (Mapping, list, tuple)):
            out[key] = json.dumps(v, default=str)
        else:
            out[key] = v
    return out


def summary_metrics(summary: Mapping) -> dict[str, float]:
    """The §6 summary as MLflow metrics: fleet keys as-is, node ``i`` as ``node<i>.<key>``."""
    out: dict[str, float] = {}
    for k, v in (summary.get("fleet") or {}).items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[k] = float(v)
    for i, node in enumerate(summary.get("nodes") or []):
        for k, v in node.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out[f"node{i}.{k}"] = float(v)
    return out


def hourly_series(epochs) -> dict[str, list[tuple[int, float]]]:
    """Per simulated hour (an epoch counts in the hour it starts): fleet SSD bytes written,
    chunk hit ratio, and SSD bytes written per node. ``epochs`` is the ``epochs.parquet`` table."""
    import numpy as np

    if epochs is None or epochs.num_rows == 0:
        return {}
    hour = np.floor(epochs.column("t_start_s").to_numpy() / 3600.0).astype(np.int64)
    node = epochs.column("node").to_numpy()
    w = epochs.column("ssd_bytes_written").to_numpy().astype(float)
    ch = epochs.column("chunks").to_numpy().astype(float)
    miss = epochs.column("chunk_misses").to_numpy().astype(float)
    hours = np.unique(hour)
    out: dict[str, list[tuple[int, float]]] = {"series.ssd_bytes_written_per_hour": [],
                                                "series.chunk_hit_ratio_per_hour": []}
    for h in hours.tolist():
        sel = hour == h
        c = ch[sel].sum()
        out["series.ssd_bytes_written_per_hour"].append((h, float(w[sel].sum())))
        out["series.chunk_hit_ratio_per_hour"].append((h, float(1.0 - miss[sel].sum() / c) if c > 0 else 0.0))
    for k in np.unique(node).tolist():
        key = f"series.node{k}.ssd_bytes_written_per_hour"
        out[key] = [(h, float(w[(hour == h) & (node == k)].sum())) for h in hours.tolist()]
    return out


# --------------------------------------------------------------------------- names, sizes, sources

#: config keys whose values are sizes or rates written with units (``16GB``, ``400GB/s``)
SIZE_SUFFIXES = ("_bytes", "_bytes_per_s")
#: how a run name writes a few keys (the rest: the key's last part)
SHORT_KEYS = {"alpha": "α", "tau_s": "τ"}


def numeric_sizes(flat: Mapping[str, Any]) -> dict[str, Any]:
    """Flattened params with every size or rate as a plain number of bytes (bytes/s), so that the
    UI can put it on a chart axis; the value as written sits beside it as ``<key>_human``."""
    from .errors import ConfigError
    from .units import parse_bytes

    out: dict[str, Any] = {}
    for k, v in flat.items():
        out[k] = v
        if isinstance(v, str) and k.endswith(SIZE_SUFFIXES):
            try:
                n = parse_bytes(v, k, allow_rate=True)
            except ConfigError:      # e.g. erase_block_bytes: auto
                continue
            out[k] = n
            out[f"{k}_human"] = v
    return out


def size_metrics(flat: Mapping[str, Any]) -> dict[str, float]:
    """The config's sizes as metrics too (``config.hardware.dram_bytes``): a metric is always a
    number in MLflow's charts and compare view, a param only when every run's value parses."""
    return {f"config.{k}": float(v) for k, v in numeric_sizes(flat).items()
            if k.endswith(SIZE_SUFFIXES) and isinstance(v, (int, float)) and not isinstance(v, bool)}


def _short(key: str) -> str:
    last = key.split(".")[-1]
    return SHORT_KEYS.get(last, last)


def run_name(config: Mapping, overrides: Iterable[str] = (), *, drop: Iterable[str] = ()) -> str:
    """A short run name: the policy, then the overrides that change what is simulated, keys cut to
    their last part (``gandalf α=4``, ``lru seed=1``, ``lru_k k=3 dram_bytes=8GB``). ``drop`` are
    overrides left out (those every point of a sweep shares)."""
    policy = str(((config.get("policy") or {}).get("name")) or "run")
    drop = set(drop)
    parts = []
    for o in overrides:
        if o in drop or "=" not in o:
            continue
        key, value = o.split("=", 1)
        key = key.lstrip("+~")
        top = key.split(".", 1)[0]
        if top in NON_SIM_KEYS or key == "policy" or key in NON_SIM_DOTTED:
            continue
        parts.append(f"{_short(key) if '.' in key else key}={value}")
    return " ".join([policy, *parts])[:250]


def git_info() -> dict[str, str]:
    """Commit, branch and whether the work tree has changes, of the checkout cluster_sim runs
    from (nothing for an installed wheel: its folder is no checkout)."""
    import subprocess

    from .locations import checkout_root

    root = checkout_root()
    if root is None:
        return {}

    def git(*args):
        p = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=5)
        return p.stdout.strip() if p.returncode == 0 else ""

    try:
        commit = git("rev-parse", "HEAD")
        if not commit:
            return {}
        return {"commit": commit, "branch": git("rev-parse", "--abbrev-ref", "HEAD"),
                "dirty": "true" if git("status", "--porcelain", "--untracked-files=no") else "false"}
    except (OSError, subprocess.SubprocessError):
        return {}


def source_tags(entry: str = "cluster-sim") -> dict[str, str]:
    """MLflow's own source tags (the UI shows them in the run's header and the runs table)."""
    from ._version import __version__

    g = git_info()
    tags = {"mlflow.source.name": entry, "mlflow.source.type": "LOCAL", "cluster_sim.version": __version__}
    if g:
        tags["mlflow.source.git.commit"] = g["commit"]
        if g.get("branch"):
            tags["mlflow.source.git.branch"] = g["branch"]
        tags["cluster_sim.git_dirty"] = g["dirty"]
    return tags


def runs_table_url(experiment_id: str, ui: str = "http://127.0.0.1:5000") -> str:
    """The experiment's runs table in MLflow 3's UI (which otherwise opens an experiment on its
    GenAI pages)."""
    return f"{ui}/#/experiments/{experiment_id}/runs"


#: tracking-store URI schemes MLflow itself provides (others come from plugins: checked with MLflow)
BUILTIN_SCHEMES = ("", "file", "sqlite", "http", "https", "postgresql", "mysql", "mssql", "databricks",
                   "databricks-uc", "uc")
#: MLflow's HTTP client, unless the environment says otherwise: at most 2 retries, 1 s and 2 s
#: apart, 5 s per attempt, so an unreachable server costs seconds, not MLflow's ~4 minutes
HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                 "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "5"}


def _local_path(uri: str) -> Path | None:
    """The filesystem path of a ``sqlite:///`` or file store (None for a server)."""
    from urllib.parse import urlparse

    if uri.startswith("sqlite:///"):
        p = Path(uri[len("sqlite:///"):])
    elif uri.startswith("file:"):
        p = Path(urlparse(uri).path)
    elif "://" not in uri:
        p = Path(uri).expanduser()
    else:
        return None
    return p if p.is_absolute() else Path.cwd() / p


def check_settings(settings: Mapping) -> None:
    """Before a run: a ``tracking.uri`` of an unknown scheme, or a local store or artifact folder
    that cannot exist (a regular file where a folder must be), is a ConfigError naming the key.
    Nothing is contacted and MLflow is not imported for its own schemes."""
    from urllib.parse import urlparse

    from .outputs import check_dir, check_file

    uri = str(settings.get("uri") or DEFAULT_URI)
    scheme = urlparse(uri).scheme if "://" in uri or uri.startswith("file:") else ""
    if scheme == "sqlite" and uri not in ("sqlite://", "sqlite:///:memory:"):
        if not uri.startswith("sqlite:///"):
            raise ConfigError("tracking.uri", f"expected sqlite:///<path of the database file>, got {uri!r}")
        check_file(_local_path(uri), "tracking.uri")
    elif scheme in ("", "file"):
        check_dir(_local_path(uri), "tracking.uri")
    elif scheme not in BUILTIN_SCHEMES:
        try:
            _quiet()
            from mlflow.tracking._tracking_service.utils import _tracking_store_registry as registry
            known = set(registry._registry)
        except Exception:  # noqa: BLE001 - cannot tell: MLflow says so when the run is logged
            return
        if scheme not in known:
            raise ConfigError("tracking.uri", f"unknown tracking store scheme {scheme!r} in {uri!r} "
                                              f"(known: {', '.join(sorted(s for s in known if s))})")
    root = settings.get("artifact_root")
    if root and ("://" not in str(root) or str(root).startswith("file:")):
        check_dir(_local_path(str(root)), "tracking.artifact_root")


def resolve_uri(uri: str | None) -> str:
    """A relative ``sqlite:///path`` resolves against the working directory (contract §9);
    the folder is created. Other URIs pass through."""
    uri = uri or DEFAULT_URI
    if uri.startswith("sqlite:///"):
        p = Path(uri[len("sqlite:///"):])
        p = p if p.is_absolute() else Path.cwd() / p
        p.parent.mkdir(parents=True, exist_ok=True)
        return "sqlite:///" + str(p)
    return uri


def artifact_root(uri: str, configured: str | None) -> str | None:
    """Where a new experiment keeps artifacts: ``tracking.artifact_root`` or, for a SQLite
    store, ``artifacts/`` beside the database (so everything lives under ``mlflow_runs/``)."""
    if configured:
        p = Path(configured)
        p = p if p.is_absolute() else Path.cwd() / p
        p.mkdir(parents=True, exist_ok=True)
        return p.as_uri()
    if uri.startswith("sqlite:///"):
        p = Path(uri[len("sqlite:///"):]).parent / "artifacts"
        p.mkdir(parents=True, exist_ok=True)
        return p.as_uri()
    return None


def ui_command(uri: str) -> str:
    """The command that opens the UI on ``uri``; it says to install the ``[ui]`` extra first when
    the web app is not there (the dependencies bring MLflow's logging client only)."""
    import importlib.util

    cmd = f"mlflow ui --backend-store-uri {uri} --host 127.0.0.1 --port 5000"
    if importlib.util.find_spec("flask") is None:
        cmd += "   (first: pip install 'cluster_sim[ui]')"
    return cmd


# --------------------------------------------------------------------------- the MLflow side

def _quiet():
    for name in ("alembic", "mlflow", "urllib3", "git"):
        logging.getLogger(name).setLevel(logging.WARNING)
    os.environ.setdefault("GIT_PYTHON_REFRESH", "quiet")
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("MLFLOW_ENABLE_ASYNC_LOGGING", "false")
    for k, v in HTTP_DEFAULTS.items():
        os.environ.setdefault(k, v)


def one_line(e: BaseException) -> str:
    """A store failure in one short line: MLflow's HTTP errors are cut to the request and the
    operating system's reason (``... failed: [Errno 111] Connection refused``)."""
    import re

    msg = " ".join(str(e).split()) or type(e).__name__
    reason = re.search(r"\[Errno -?\d+\] [^'\")\]]+|Read timed out|timed out", msg)
    if reason and " failed with exception " in msg:
        msg = f"{msg.split(' failed with exception ')[0]} failed: {reason.group(0).strip()}"
    return msg[:300]


class Tracker:
    """One experiment in one tracking store. ``settings`` is the ``tracking`` config section.

    A store that cannot be opened raises :class:`~cluster_sim.errors.TrackingError`."""

    def __init__(self, settings: Mapping):
        _quiet()
        self.uri = str(settings.get("uri") or DEFAULT_URI)
        try:
            from mlflow import MlflowClient
            from mlflow.entities import Metric, Param, RunTag
        except ImportError as e:     # pragma: no cover - mlflow is a dependency
            raise TrackingError(self.uri, f"MLflow is not installed ({e}); use tracking.enabled=false") from e
        _quiet()     # mlflow sets its own logger level on import
        self._Metric, self._Param, self._RunTag = Metric, Param, RunTag
        self.experiment_name = str(settings.get("experiment") or "cluster_sim")
        try:
            self.uri = resolve_uri(settings.get("uri"))
            self.client = MlflowClient(tracking_uri=self.uri)
            exp = self.client.get_experiment_by_name(self.experiment_name)
            if exp is None:
                self.experiment_id = self.client.create_experiment(
                    self.experiment_name, artifact_location=artifact_root(self.uri, settings.get("artifact_root")),
                    tags={"mlflow.experimentKind": "custom_model_development"})   # the UI's runs view, not GenAI
            elif exp.lifecycle_stage == "deleted":
                self.client.restore_experiment(exp.experiment_id)
                self.experiment_id = exp.experiment_id
            else:
                self.experiment_id = exp.experiment_id
        except Exception as e:  # noqa: BLE001 - any store failure: unreachable, unwritable, corrupt
            raise TrackingError(self.uri, f"cannot open the store: {one_line(e)}") from e

    # -- runs

    def start_run(self, name: str, *, kind: str, parent_id: str | None = None, tags: Mapping | None = None,
                  start_time_ms: int | None = None) -> str:
        t = {KIND_TAG: kind, **source_tags(), **{k: str(v) for k, v in (tags or {}).items()}}
        if parent_id:
            t["mlflow.parentRunId"] = parent_id
        run = self.client.create_run(self.experiment_id, start_time=start_time_ms, tags=t, run_name=name)
        return run.info.run_id

    def reopen(self, run_id: str) -> None:
        self.client.update_run(run_id, status="RUNNING")

    def end_run(self, run_id: str, status: str = "FINISHED") -> None:
        self.client.set_terminated(run_id, status=status)

    def set_tags(self, run_id: str, tags: Mapping) -> None:
        self._batch(run_id, tags=[self._RunTag(k, str(v)) for k, v in tags.items()])

    def log_params(self, run_id: str, params: Mapping) -> None:
        items = []
        for k, v in numeric_sizes(flatten(params)).items():
            s = "null" if v is None else str(v)
            items.append(self._Param(k[:250], s[:6000]))
        self._batch(run_id, params=items)

    def log_metrics(self, run_id: str, metrics: Mapping[str, float], step: int = 0) -> None:
        now = int(time.time() * 1000)
        self._batch(run_id, metrics=[self._Metric(k, float(v), now, step) for k, v in metrics.items()])

    def log_series(self, run_id: str, series: Mapping[str, list[tuple[int, float]]]) -> None:
        now = int(time.time() * 1000)
        self._batch(run_id, metrics=[self._Metric(k, float(v), now, int(step))
                                     for k, pts in series.items() for step, v in pts])

    def log_artifacts(self, run_id: str, local_dir: str | os.PathLike, artifact_path: str | None = None) -> None:
        self.client.log_artifacts(run_id, str(local_dir), artifact_path)

    def _batch(self, run_id, metrics=(), params=(), tags=()):
        metrics, params, tags = list(metrics), list(params), list(tags)
        for i in range(0, len(metrics), 1000):
            self.client.log_batch(run_id, metrics=metrics[i:i + 1000])
        for i in range(0, len(params), 100):
            self.client.log_batch(run_id, params=params[i:i + 100])
        for i in range(0, len(tags), 100):
            self.client.log_batch(run_id, tags=tags[i:i + 100])

    # -- one simulated point

    def log_point(self, *, name: str, kind: str, config: Mapping, summary: Mapping | None, epochs,
                  out_dir: str | os.PathLike | None, parent_id: str | None = None, tags: Mapping | None = None,
                  status: str = "FINISHED", start_time_ms: int | None = None,
                  files: Iterable[tuple[str | os.PathLike, str | None]] = ()) -> str:
        """A whole run at once: params, metrics, series, artifacts (everything in ``out_dir``, and
        ``files`` as (local path, artifact folder or None)), status."""
        t = {HASH_TAG: config_hash(config), **(tags or {})}
        rid = self.start_run(name, kind=kind, parent_id=parent_id, tags=t, start_time_ms=start_time_ms)
        try:
            self.log_params(rid, summary["config"] if summary else config)
            if summary:
                self.log_metrics(rid, {**summary_metrics(summary),
                                       **size_metrics(flatten(summary.get("config") or config))})
                self.log_series(rid, hourly_series(epochs))
            if out_dir and Path(out_dir).is_dir():
                self.log_artifacts(rid, out_dir)
            for f, where in files:
                f = Path(f)
                if f.is_dir():
                    self.log_artifacts(rid, f, where)
                elif f.exists():
                    self.client.log_artifact(rid, str(f), where)
        except BaseException as e:   # Ctrl-C / SIGTERM while logging: the run is KILLED, not left RUNNING
            self.end_run(rid, "KILLED" if isinstance(e, KeyboardInterrupt) else "FAILED")
            raise
        self.end_run(rid, status)
        return rid

    # -- resume and reports

    def finished_points(self) -> dict[str, Any]:
        """config_hash -> the most recent FINISHED point run (child or single) of this experiment."""
        runs = self.client.search_runs([self.experiment_id],
                                       filter_string=f"attributes.status = 'FINISHED' and tags.`{KIND_TAG}` = 'point'",
                                       max_results=50000, order_by=["attributes.start_time DESC"])
        out: dict[str, Any] = {}
        for r in runs:
            h = r.data.tags.get(HASH_TAG)
            if h and h not in out:
                out[h] = r
        return out

    def latest_sweep(self) -> str | None:
        runs = self.client.search_runs([self.experiment_id], filter_string=f"tags.`{KIND_TAG}` = 'sweep'",
                                       max_results=1, order_by=["attributes.start_time DESC"])
        return runs[0].info.run_id if runs else None

    def children(self, parent_id: str, status: str | None = "FINISHED"):
        f = f"tags.`mlflow.parentRunId` = '{parent_id}'"
        if status:
            f += f" and attributes.status = '{status}'"
        return self.client.search_runs([self.experiment_id], filter_string=f, max_results=50000,
                                       order_by=["attributes.start_time ASC"])

    def download_point(self, run_id: str, dst: str | os.PathLike) -> Path:
        """Fetch a point's ``summary.json`` and ``epochs.parquet`` into ``dst``; returns the folder."""
        dst = Path(dst)
        dst.mkdir(parents=True, exist_ok=True)
        for name in ("summary.json", "epochs.parquet", "nodes.parquet"):
            try:
                self.client.download_artifacts(run_id, name, str(dst))
            except Exception:   # noqa: BLE001 - an optional table may be missing
                if name == "summary.json":
                    raise
        return dst

    def runs_url(self) -> str:
        return runs_table_url(self.experiment_id)

    def system_metrics(self, run_id: str, interval_s: float = 2.0):
        """MLflow's system metrics monitor (CPU, memory, disk, network as ``system/*``) on
        ``run_id``, started; ``.finish()`` it. None when it cannot run (psutil missing)."""
        try:
            import psutil  # noqa: F401 - what MLflow's monitors read
            from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor
        except ImportError:
            return None
        logging.getLogger("mlflow.system_metrics").setLevel(logging.ERROR)
        mon = SystemMetricsMonitor(run_id, sampling_interval=interval_s, samples_before_logging=1,
                                   tracking_uri=self.uri)
        mon.start()
        return mon

    def run_url_hint(self, run_id: str) -> str:
        return f"experiment '{self.experiment_name}' (id {self.experiment_id}), run {run_id}"
