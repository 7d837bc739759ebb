"""A sweep: every point a Ray task, the driver alone writes outputs and MLflow runs.

``cluster-sim -m ...`` reaches :func:`run_sweep` through the Hydra launcher in
``hydra_plugins/cluster_sim_ray_launcher`` (Hydra expands the sweep: choices, ranges,
``hydra.sweeper.params`` of an experiment); a notebook can call it directly with
composed configs. Ray is reached only through :func:`cluster_sim.distributed.ensure_ray`
(this module has no ``import ray``), MLflow only through :mod:`cluster_sim.tracking`
when ``tracking.enabled``.

Per point, the driver writes ``<sweep dir>/<job num>/`` with ``config.yaml`` (the
resolved config), ``overrides.yaml`` (the point's overrides, what makes it a point), ``summary.json``, ``nodes.parquet``, ``epochs.parquet`` and
``figures/``, or ``error.txt`` when the point failed; a failed point is logged as a
FAILED child run and the sweep goes on. With ``sweep.resume=true`` a point whose
config hash (:func:`cluster_sim.tracking.config_hash`) has a FINISHED point run in
the experiment is skipped (its outputs are fetched from MLflow into its folder) and
the new points join that run's parent. At the end the comparison figures of
:mod:`cluster_sim.report` go to ``<sweep dir>/report/`` and to the parent run.
"""
from __future__ import annotations

import json
import os
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from .errors import ConfigError, UserError


@dataclass
class Point:
    idx: int                 # Hydra's job number
    overrides: list[str]     # this point's overrides (what makes it a point)
    config: dict             # the resolved config (no ``hydra`` key)
    out_dir: str             # where the driver writes its outputs
    name: str = ""           # the MLflow run name (set by run_sweep: tracking.run_name)


@dataclass
class PointResult:
    idx: int
    overrides: list[str]
    status: str                      # FINISHED | FAILED | SKIPPED
    out_dir: str
    summary: dict | None = None
    error: str | None = None
    run_id: str | None = None        # MLflow run
    ray_task_id: str | None = None
    wall_s: float = 0.0


@dataclass
class SweepOutcome:
    sweep_dir: str
    results: list[PointResult] = field(default_factory=list)
    parent_run_id: str | None = None
    experiment: str | None = None
    tracking_uri: str | None = None
    figures: list[str] = field(default_factory=list)
    tracking_error: str | None = None     # MLflow failed: the points' files are written, the runs not logged
    runs_url: str | None = None           # the experiment's runs table in the MLflow UI
    resumed: bool = False                 # sweep.resume was on (the footer counts skipped points then)

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.results)

    @property
    def failed(self) -> int:
        return self.count("FAILED")


#: the last sweep run in this process (the command line reads it for its exit status)
LAST: SweepOutcome | None = None


# --------------------------------------------------------------------------- the Ray task

def _point_task(config: dict) -> dict:
    """Runs in a Ray worker: one simulation, nothing written; results travel back to the driver."""
    import traceback

    from .distributed import ensure_ray

    ray = ensure_ray(None)           # inside a worker: the connected ray module
    ctx = ray.get_runtime_context()
    info: dict[str, Any] = {"ray_task_id": ctx.get_task_id(), "ray_node_id": ctx.get_node_id(),
                            "pid": os.getpid(), "host": socket.gethostname(), "start_ms": int(time.time() * 1000)}
    t0 = time.perf_counter()
    try:
        from .api import run
        s = run(config, write=False)
        info["summary"] = json.loads(s.to_json())
        info["nodes"] = s.node_table
        info["epochs"] = s.epoch_table
        info["requests"] = s.request_table
    except Exception as e:  # noqa: BLE001 - any failure is this point's, reported by the driver
        info["error"] = _one_line(e)
        info["traceback"] = traceback.format_exc()
    info["wall_s"] = time.perf_counter() - t0
    info["end_ms"] = int(time.time() * 1000)
    return info


def _one_line(e: BaseException) -> str:
    msg = " ".join(str(e).split())
    return msg if isinstance(e, UserError) else f"{type(e).__name__}: {msg}"


# --------------------------------------------------------------------------- helpers

def _absolute_trace(config: dict) -> dict:
    """Ray workers may start elsewhere: pin a relative trace path that exists here."""
    wl = config.get("workload")
    if isinstance(wl, dict) and wl.get("path") and not os.path.isabs(str(wl["path"])):
        p = Path.cwd() / str(wl["path"])
        if p.exists():
            config = {**config, "workload": {**wl, "path": str(p)}}
    return config


def _connect(address: str | None, ship_package: Any = "auto"):
    """Ray for the sweep's points, reached before any MLflow run opens: a cluster that cannot be
    joined (no answer, its token authentication, ...) is one line and exit status 2, and MLflow
    is left without a parent run (decision 80)."""
    from .distributed import ensure_ray
    from .signals import reclaim

    ray = ensure_ray(address, "ray.address", ship_package)
    reclaim()          # ray.init replaced the SIGTERM handler with its own sys.exit
    return ray


def _write_overrides(out_dir: Path, overrides: Sequence[str]) -> None:
    """``overrides.yaml``: the point's own overrides (Hydra's launchers keep the same list in
    ``.hydra/overrides.yaml``); a reader of the folder tells the points apart by them."""
    import yaml

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "overrides.yaml").write_text(yaml.safe_dump(list(overrides), sort_keys=False))


def _write_point(out_dir: Path, config: dict, info: dict, overrides: Sequence[str] = ()) -> None:
    import pyarrow.parquet as pq
    import yaml

    _write_overrides(out_dir, overrides)
    (out_dir / "config.yaml").write_text(yaml.safe_dump(info.get("summary", {}).get("config") or config,
                                                        sort_keys=False))
    if "summary" in info:
        (out_dir / "summary.json").write_text(json.dumps(info["summary"], indent=2, allow_nan=False) + "\n")
        if info.get("nodes") is not None:
            pq.write_table(info["nodes"], out_dir / "nodes.parquet")
        if info.get("epochs") is not None:
            pq.write_table(info["epochs"], out_dir / "epochs.parquet")
        if info.get("requests") is not None:
            pq.write_table(info["requests"], out_dir / "requests.parquet")
    else:
        (out_dir / "error.txt").write_text(info.get("traceback") or info.get("error", "") + "\n")


def _progress(enabled: Any, total: int):
    """A rich progress bar on a terminal; nothing in CI or when piped (``sweep.progress``)."""
    if enabled is False or str(enabled).lower() in ("false", "0", "no"):
        return None
    if enabled in (None, "auto") and (os.environ.get("CI") or not sys.stderr.isatty()):
        return None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
        TimeRemainingColumn

    p = Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[failed]} failed"),
                 TimeElapsedColumn(), TimeRemainingColumn(), console=Console(stderr=True), transient=False)
    p.start()
    p.add_task("points", total=total, failed=0)
    return p


# --------------------------------------------------------------------------- the driver

class _Store:
    """The sweep's MLflow side. Its first failure is one warning line, and the store is given up
    for the rest of the sweep: every point's files are still written, and the exit status says so."""

    def __init__(self, outcome: SweepOutcome):
        self.tracker = None
        self.outcome = outcome

    def fail(self, what: str, e: BaseException) -> None:
        from .tracking import one_line

        uri = getattr(self.tracker, "uri", None) or self.outcome.tracking_uri or "?"
        msg = f"MLflow tracking failed ({uri}): {what}: {one_line(e)}"
        if self.outcome.tracking_error is None:
            print(f"cluster-sim: warning: {msg}; the sweep goes on without MLflow (every point's files are "
                  "written)", file=sys.stderr)
            self.outcome.tracking_error = msg
        self.tracker = None

    def call(self, what: str, fn, *args, **kwargs):
        if self.tracker is None:
            return None
        try:
            return fn(self.tracker, *args, **kwargs)
        except Exception as e:  # noqa: BLE001 - any store failure
            self.fail(what, e)
            return None


def run_sweep(points: Sequence[Point], *, settings: Mapping, sweep_dir: str | os.PathLike,
              command: str = "") -> SweepOutcome:
    """Run ``points`` as Ray tasks; log each as it finishes. ``settings`` holds the ``tracking``,
    ``sweep``, ``ray`` and ``report`` sections of the base config. Raises :class:`UserError`
    (before anything runs) for a bad point or a bad Ray address, and for a tracking store that
    cannot be opened when ``sweep.resume`` needs it; without resume an unusable store is one
    warning line and the sweep runs without it (``SweepOutcome.tracking_error``). SIGTERM is
    handled like Ctrl-C: the parent run is KILLED and the sweep can be resumed."""
    from .signals import sigterm_as_interrupt

    with sigterm_as_interrupt():
        return _run_sweep(points, settings=settings, sweep_dir=sweep_dir, command=command)


def _run_sweep(points: Sequence[Point], *, settings: Mapping, sweep_dir: str | os.PathLike,
               command: str = "") -> SweepOutcome:
    global LAST
    from .config import SimConfig

    sweep_dir = Path(sweep_dir)
    tr_cfg = dict(settings.get("tracking") or {})
    sw_cfg = dict(settings.get("sweep") or {})
    ray_cfg = dict(settings.get("ray") or {})
    rep_cfg = dict(settings.get("report") or {})
    outcome = SweepOutcome(str(sweep_dir))
    outcome.resumed = bool(sw_cfg.get("resume"))

    for p in points:   # every point valid before anything runs
        try:
            from .capacity import stand_in
            # 1%W shares: W is known when the point runs; policy parameters too (no policy is built)
            SimConfig.from_mapping(stand_in(p.config))
        except UserError as e:
            raise UserError(f"sweep point #{p.idx} ({' '.join(p.overrides) or 'no overrides'}): {e}") from e

    _name_points(points)
    # Ray before MLflow: a cluster that cannot be joined fails here, leaving no store and no run.
    # A resumed sweep reads the store first (which points are left), and joins Ray only if any is.
    ray = None
    if points and not sw_cfg.get("resume"):
        ray = _connect(ray_cfg.get("address", "local"), ray_cfg.get("ship_package", "auto"))
    store = _Store(outcome)
    from .tracking import config_hash
    if tr_cfg.get("enabled"):
        from .errors import TrackingError
        from .tracking import Tracker, check_settings
        check_settings(tr_cfg)
        outcome.tracking_uri = str(tr_cfg.get("uri") or "")
        try:
            store.tracker = Tracker(tr_cfg)
            outcome.experiment, outcome.tracking_uri = store.tracker.experiment_name, store.tracker.uri
        except TrackingError as e:
            if sw_cfg.get("resume"):
                raise ConfigError("sweep.resume", f"needs the tracking store, and {e}") from None
            store.fail("opening the store", e)
    elif sw_cfg.get("resume"):
        raise ConfigError("sweep.resume", "needs tracking.enabled=true (resume looks for FINISHED MLflow runs)")

    # resume: skip points with a FINISHED run of the same config hash
    todo: list[Point] = []
    skipped: list[tuple[Point, Any]] = []
    if store.tracker is not None and sw_cfg.get("resume"):
        try:
            done = store.tracker.finished_points()
        except Exception as e:  # noqa: BLE001 - nothing has run: say so and stop
            from .tracking import one_line
            raise ConfigError("sweep.resume", f"cannot search the tracking store {store.tracker.uri}: "
                                              f"{one_line(e)}") from None
        for p in points:
            r = done.get(config_hash(p.config))
            (skipped.append((p, r)) if r is not None else todo.append(p))
    else:
        todo = list(points)

    if todo and ray is None:      # resumed: still before any run is opened
        ray = _connect(ray_cfg.get("address", "local"), ray_cfg.get("ship_package", "auto"))

    parent = None
    parents = [r.data.tags.get("mlflow.parentRunId") for _, r in skipped if r.data.tags.get("mlflow.parentRunId")]
    if parents:
        parent = parents[0]
        store.call("reopening the parent run", lambda t: (
            t.reopen(parent), t.set_tags(parent, {"resumed": "true", "last_sweep_dir": str(sweep_dir.resolve())})))
    else:
        parent = store.call("starting the parent run", lambda t: t.start_run(
            f"sweep {sweep_dir.parent.name}/{sweep_dir.name}", kind="sweep",
            tags={"sweep_dir": str(sweep_dir.resolve()), "command": command[:5000], "points": len(points)}))
        if parent:
            store.call("logging the sweep's parameters", lambda t: t.log_params(parent, sweep_params(points)))
    parent = parent if store.tracker is not None else None
    outcome.parent_run_id = parent
    if parent and store.tracker is not None:
        outcome.runs_url = store.tracker.runs_url()
    monitor = store.call("starting system metrics", lambda t: t.system_metrics(parent)) if parent else None

    LAST = outcome
    for p, r in skipped:
        res = PointResult(p.idx, p.overrides, "SKIPPED", p.out_dir, run_id=r.info.run_id,
                          ray_task_id=r.data.tags.get("ray_task_id"))
        try:
            if store.tracker is None:
                raise RuntimeError("the tracking store was given up")
            store.tracker.download_point(r.info.run_id, p.out_dir)
            _write_overrides(Path(p.out_dir), p.overrides)
            res.summary = json.loads((Path(p.out_dir) / "summary.json").read_text())
        except Exception as e:  # noqa: BLE001 - the run is finished in MLflow; its local copy is optional
            res.error = f"could not fetch outputs: {_one_line(e)}"
        outcome.results.append(res)

    status = "FINISHED"
    try:
        if todo:
            _run_points(ray, todo, outcome, store, parent, ray_cfg, sw_cfg, rep_cfg)
    except KeyboardInterrupt:    # Ctrl-C, and SIGTERM (cluster_sim.signals)
        status = "KILLED"
        raise
    except BaseException as e:   # the cluster went away, ...: the parent says FAILED, and why
        status = "FAILED"
        if parent:
            store.call("recording the sweep's failure", lambda t: t.set_tags(parent, {"error": _one_line(e)[:5000]}))
        raise
    finally:
        outcome.results.sort(key=lambda r: r.idx)
        table = write_comparison(comparison_rows(outcome), sweep_dir / "report") if status != "KILLED" else []
        if status != "KILLED" and rep_cfg.get("figures", True):
            _sweep_report(outcome, sweep_dir, store, parent)
        if parent and table:
            store.call("logging the comparison table", lambda t: [t.client.log_artifact(parent, str(f), "report")
                                                                  for f in table])
        if monitor is not None:
            try:
                monitor.finish()
            except Exception:  # noqa: BLE001 - system metrics never cost the sweep
                pass
        if parent:
            store.call("closing the parent run", lambda t: t.log_metrics(parent, {
                "points_finished": outcome.count("FINISHED") + outcome.count("SKIPPED"),
                "points_failed": outcome.failed, "points_skipped": outcome.count("SKIPPED")}))
            store.call("closing the parent run", lambda t: t.end_run(
                parent, status if status != "FINISHED" else ("FAILED" if outcome.failed else "FINISHED")))
    return outcome


def _run_points(ray, todo, outcome, store, parent, ray_cfg, sw_cfg, rep_cfg) -> None:
    task_cpus = float(ray_cfg.get("task_cpus") or 1)
    remote = ray.remote(num_cpus=task_cpus, max_retries=0)(_point_task)
    limit = int(sw_cfg.get("max_parallel") or 0) or len(todo)
    queue = list(todo)
    pending: dict[Any, Point] = {}
    bar = _progress(sw_cfg.get("progress", "auto"), len(todo))
    try:
        while queue or pending:
            while queue and len(pending) < limit:
                p = queue.pop(0)
                pending[remote.remote(_absolute_trace(p.config))] = p
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                p = pending.pop(ref)
                try:
                    info = ray.get(ref)
                except Exception as e:  # noqa: BLE001 - the worker died or the task could not run
                    info = {"error": _one_line(e), "traceback": str(e), "ray_task_id": ref.task_id().hex()}
                res = _finish_point(p, info, store, parent, rep_cfg)
                outcome.results.append(res)
                if bar is not None:
                    bar.update(bar.task_ids[0], advance=1, failed=outcome.failed)
    # On an interruption the points in flight are not cancelled: a cancellation that races a
    # task's reply trips an internal check of Ray's (task_manager.cc, "an unexpected system
    # state", ray-project/ray#54785), which aborted the process after our one line with exit
    # status 1 in about one interruption in five. Ray ends a job's tasks when its driver goes.
    finally:
        if bar is not None:
            bar.stop()


def _finish_point(p: Point, info: dict, store: _Store, parent, rep_cfg) -> PointResult:
    """Driver side: write the point's folder, its figures and its MLflow child run."""
    ok = "summary" in info
    if ok:   # the config as the user wrote it (the task saw an absolute trace path)
        info["summary"]["config"]["workload"] = {**info["summary"]["config"].get("workload", {}),
                                                 "path": (p.config.get("workload") or {}).get("path")}
    res = PointResult(p.idx, p.overrides, "FINISHED" if ok else "FAILED", p.out_dir,
                      summary=info.get("summary"), error=info.get("error"), ray_task_id=info.get("ray_task_id"),
                      wall_s=float(info.get("wall_s", 0.0)))
    out = Path(p.out_dir)
    try:
        _write_point(out, p.config, info, p.overrides)
        if ok and rep_cfg.get("figures", True):
            from .report import Record, run_figures
            run_figures(Record(info["summary"], info.get("epochs"), extra={"requests": info.get("requests")}),
                        out / "figures")
    except Exception as e:  # noqa: BLE001 - keep the sweep going; the point is marked failed
        res.status, res.error = "FAILED", f"writing outputs: {_one_line(e)}"
    if store.tracker is not None:
        tags = {"ray_task_id": info.get("ray_task_id") or "", "ray_node_id": info.get("ray_node_id") or "",
                "worker_pid": info.get("pid") or "", "worker_host": info.get("host") or "",
                "overrides": " ".join(p.overrides), "job_num": p.idx, "out_dir": str(out.resolve())}
        if res.error:
            tags["error"] = res.error[:5000]
        name = p.name or (res.summary or {}).get("run", {}).get("policy_label") or f"point {p.idx}"
        res.run_id = store.call(f"logging point #{p.idx}", lambda t: t.log_point(
            name=name[:250], kind="point", config=p.config, summary=res.summary, epochs=info.get("epochs"),
            out_dir=out, parent_id=parent, tags=tags, status=res.status, start_time_ms=info.get("start_ms")))
    return res


def _name_points(points: Sequence[Point]) -> None:
    """Short MLflow run names (``gandalf α=4``): the policy and what differs between the points;
    a name two points share gets its job number."""
    from collections import Counter

    from .tracking import run_name

    common = set.intersection(*[set(p.overrides) for p in points]) if len(points) > 1 else set()
    names = [p.name or run_name(p.config, p.overrides, drop=common) for p in points]
    seen = Counter(names)
    for p, n in zip(points, names):
        p.name = n if seen[n] == 1 else f"{n} #{p.idx}"


def sweep_params(points: Sequence[Point]) -> dict:
    """The parent run's params: every key the points share, at its value, and each swept key as
    ``swept.<key>`` = its values in point order (``0.5,1,2``); ``sweep.points``."""
    from .tracking import flatten

    flats = [flatten(p.config) for p in points]
    if not flats:
        return {}
    keys = list(dict.fromkeys(k for f in flats for k in f))
    out: dict[str, Any] = {"sweep.points": len(points)}
    for k in keys:
        vals = [f.get(k) for f in flats]
        if all(v == vals[0] for v in vals):
            out[k] = vals[0]
        else:
            out[f"swept.{k}"] = ",".join(dict.fromkeys("null" if v is None else str(v) for v in vals))
    return out


#: the summary keys of the comparison table, in its column order
COMPARE_KEYS = ("chunk_miss_ratio", "token_miss_ratio", "ssd_lifetime_years", "ssd_bytes_written",
                "ssd_write_hit_fraction", "load_latency_p99_s", "ttft_p99_s", "cost_per_1k_requests_usd")


def comparison_rows(o: SweepOutcome) -> list[dict]:
    """One row a point: its run name, status, the keys swept, and :data:`COMPARE_KEYS`."""
    rows = []
    for r in o.results:
        f = (r.summary or {}).get("fleet") or {}
        row = {"job": r.idx, "status": r.status, "overrides": " ".join(r.overrides), "run_id": r.run_id or ""}
        for k in COMPARE_KEYS:
            v = f.get(k)
            row[k] = "" if v is None else (f"{v:.6g}" if isinstance(v, float) else v)
        rows.append(row)
    return rows


def write_comparison(rows: list[dict], folder: Path) -> list[Path]:
    """``rows`` as ``comparison.csv`` and ``comparison.md`` in ``folder`` (MLflow's ``log_table``
    needs pandas, which the skinny client does not bring); returns the files written."""
    import csv

    if not rows:
        return []
    try:
        folder.mkdir(parents=True, exist_ok=True)
        cols = list(dict.fromkeys(k for r in rows for k in r))
        with open(folder / "comparison.csv", "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=cols)
            w.writeheader()
            w.writerows(rows)
        md = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        md += ["| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in rows]
        (folder / "comparison.md").write_text("\n".join(md) + "\n")
    except OSError as e:
        print(f"cluster-sim: warning: comparison table not written: {e}", file=sys.stderr)
        return []
    return [folder / "comparison.csv", folder / "comparison.md"]


def _sweep_report(outcome: SweepOutcome, sweep_dir: Path, store: _Store, parent) -> None:
    from .report import load_dir, sweep_figures

    ok_dirs = [Path(r.out_dir) for r in outcome.results if r.status in ("FINISHED", "SKIPPED") and r.summary]
    try:
        recs = [rec for d in ok_dirs for rec in load_dir(d)]
        if not recs:
            return
        paths = sweep_figures(recs, sweep_dir / "report")
        outcome.figures = [str(p) for p in paths]
        if parent:
            store.call("logging the sweep figures", lambda t: t.log_artifacts(parent, sweep_dir / "report", "report"))
    except Exception as e:  # noqa: BLE001 - figures never lose finished points
        print(f"cluster-sim: warning: sweep figures failed: {_one_line(e)}", file=sys.stderr)


def format_outcome(o: SweepOutcome) -> str:
    """What the command line prints after a sweep."""
    from .units import lifetime_text

    skipped = f", {o.count('SKIPPED')} skipped (resume)" if o.count("SKIPPED") or o.resumed else ""
    lines = [f"sweep: {len(o.results)} points — {o.count('FINISHED')} finished, {o.failed} failed"
             f"{skipped}   outputs: {o.sweep_dir}"]
    common = set.intersection(*[set(r.overrides) for r in o.results]) if len(o.results) > 1 else set()
    for r in o.results:
        f = (r.summary or {}).get("fleet") or {}
        shown = " ".join(x for x in r.overrides if x not in common) or "(base)"
        what = (f"miss {f.get('chunk_miss_ratio', 0):.4f}  lifetime {lifetime_text(f.get('ssd_lifetime_years', 0))}"
                if f else (r.error or ""))
        lines.append(f"  #{r.idx:<3} {r.status:<8} {shown:<40} {what}")
    if o.parent_run_id:
        from .tracking import ui_command
        lines.append(f"MLflow: experiment '{o.experiment}', parent run {o.parent_run_id}")
        lines.append(f"  open the UI: {ui_command(o.tracking_uri)}")
        if o.runs_url:
            lines.append(f"  runs table:  {o.runs_url}")
    if o.tracking_error:
        lines.append(f"not logged: {o.tracking_error}")
    if o.figures:
        lines.append("figures: " + "  ".join(o.figures))
    return "\n".join(lines)


# ------------------------------------------------------------------ expanding a sweep's points
def _policy_keys(option: str) -> set:
    """The parameter keys of the policy that ``policy=<option>`` selects, from the registry. A
    variant (conf/policy/gandalf_paper.yaml) names its registered policy in its ``name``."""
    from .policies.base import known_policies, policy_keys

    name = option if option in known_policies() else _variant_of(option)
    try:
        return {"name", *policy_keys(name)} if name else set()
    except ConfigError:     # not a policy: the point fails validation with its own message
        return set()


def _variant_of(option: str) -> str | None:
    import yaml

    from .locations import conf_dir

    try:
        name = (yaml.safe_load((conf_dir() / "policy" / f"{option}.yaml").read_text()) or {}).get("name")
    except (OSError, yaml.YAMLError, AttributeError):
        return None
    return name if isinstance(name, str) else None


def drop_foreign_policy_params(jobs: list[list[str]], base_policy: str) -> list[list[str]]:
    """``policy=gandalf,lru_k policy.alpha=0.5,1,2``: a ``policy.<key>`` override applies to the
    points whose policy has that key. It is dropped from a point whose policy does not have it
    but another swept policy does (a key no swept policy has stays, and fails as a typo), and
    points that become identical are run once."""
    policies = set()
    for job in jobs:
        policies |= {o.split("=", 1)[1] for o in job if o.split("=", 1)[0].lstrip("+~") == "policy"}
    policies = policies or {base_policy}
    if len(policies) < 2:
        return jobs
    keys = {p: _policy_keys(p) for p in policies}
    known = set().union(*keys.values())
    out, seen = [], set()
    for job in jobs:
        pol = next((o.split("=", 1)[1] for o in job if o.split("=", 1)[0].lstrip("+~") == "policy"), base_policy)
        kept = []
        for o in job:
            k = o.split("=", 1)[0].lstrip("+~")
            if k.startswith("policy.") and k.count(".") == 1:
                p = k.split(".", 1)[1]
                if p in known and p not in keys.get(pol, set()):
                    continue
            kept.append(o)
        if tuple(kept) not in seen:
            seen.add(tuple(kept))
            out.append(kept)
    return out
