"""``hydra/launcher=cluster_sim_ray``: the points of a Hydra sweep as Ray tasks.

Hydra's sweeper expands the sweep (``a=1,2``, ``range(...)``, ``choice(...)``, an
experiment's ``hydra.sweeper.params``) and hands batches of override lists to
:meth:`ClusterSimRayLauncher.launch`. This launcher composes each point's config in
the driver and passes them to :func:`cluster_sim.sweep.run_sweep`, which runs each
point as a Ray task and alone writes outputs and MLflow runs. ``conf/config.yaml``
makes it the default launcher; ``hydra/launcher=basic`` runs points one after the
other in this process through the normal task function instead.

Where points run: ``ray.address`` (``local`` starts a Ray instance on this machine;
``auto`` or ``host:port`` join a running cluster, which must have cluster_sim installed).
"""
# no "from __future__ import annotations": Hydra executes plugin modules before they are in
# sys.modules, and dataclasses then cannot resolve string annotations.

import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence

from hydra.core.config_store import ConfigStore
from hydra.core.utils import JobReturn, JobStatus, filter_overrides, setup_globals
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict

log = logging.getLogger(__name__)


@dataclass
class ClusterSimRayLauncherConf:
    _target_: str = "hydra_plugins.cluster_sim_ray_launcher.ray_launcher.ClusterSimRayLauncher"


ConfigStore.instance().store(group="hydra/launcher", name="cluster_sim_ray", node=ClusterSimRayLauncherConf,
                             provider="cluster_sim")


class ClusterSimRayLauncher(Launcher):
    def __init__(self) -> None:
        super().__init__()
        self.config: Optional[DictConfig] = None
        self.task_function: Optional[TaskFunction] = None
        self.hydra_context: Optional[HydraContext] = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config = config
        self.hydra_context = hydra_context
        self.task_function = task_function

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from hydra.core.hydra_config import HydraConfig

        from cluster_sim.errors import UserError
        from cluster_sim.sweep import Point, run_sweep

        setup_globals()
        assert self.config is not None and self.hydra_context is not None
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        settings = {k: OmegaConf.to_container(self.config[k], resolve=True) if k in self.config else {}
                    for k in ("tracking", "sweep", "ray", "report")}
        points: List[Point] = []
        configs = []
        for i, overrides in enumerate(job_overrides):
            idx = initial_job_idx + i
            sc = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
            with open_dict(sc):
                sc.hydra.job.id = idx
                sc.hydra.job.num = idx
            HydraConfig.instance().set_config(sc)
            out_dir = sweep_dir / str(sc.hydra.sweep.subdir)
            m = {str(k): OmegaConf.to_container(sc[k], resolve=True) if OmegaConf.is_config(sc[k]) else sc[k]
                 for k in sc if k != "hydra"}
            points.append(Point(idx, list(filter_overrides(overrides)), m, str(out_dir)))
            configs.append(sc)
        log.info(f"Launching {len(points)} points on Ray ({settings['ray'].get('address') if settings['ray'] else 'local'})")
        try:
            outcome = run_sweep(points, settings=settings, sweep_dir=sweep_dir, command=" ".join(sys.argv))
        except UserError as e:
            print(f"cluster-sim: error: {e}", file=sys.stderr)
            sys.exit(e.exit_code)
        by_idx = {r.idx: r for r in outcome.results}
        returns = []
        for p, sc in zip(points, configs):
            r = by_idx.get(p.idx)
            ret = JobReturn(overrides=list(job_overrides[p.idx - initial_job_idx]), cfg=sc, hydra_cfg=None,
                            working_dir=p.out_dir, task_name=str(sc.hydra.job.name), status=JobStatus.COMPLETED)
            # a failed point is reported by the sweep (and the exit status), not raised here:
            # raising would make Hydra drop the summary of the points that finished
            ret._return_value = {"status": r.status if r else "FAILED", "run_id": r.run_id if r else None,
                                 "error": r.error if r else "not run"}
            returns.append(ret)
        return returns


# --------------------------------------------------------------------------- the sweeper

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper, BasicSweeperConf  # noqa: E402


@dataclass
class ClusterSimSweeperConf(BasicSweeperConf):
    _target_: str = "hydra_plugins.cluster_sim_ray_launcher.ray_launcher.ClusterSimSweeper"


ConfigStore.instance().store(group="hydra/sweeper", name="cluster_sim", node=ClusterSimSweeperConf,
                             provider="cluster_sim")


class ClusterSimSweeper(BasicSweeper):
    """Hydra's basic sweeper (same syntax: ``a=1,2``, ``range``, ``choice``, ``glob``,
    ``hydra.sweeper.params``), with policy parameters applied only to the policies that have
    them (:func:`cluster_sim.sweep.drop_foreign_policy_params`)."""

    def split_arguments(self, overrides, max_batch_size):  # type: ignore[override]
        from cluster_sim.sweep import drop_foreign_policy_params

        jobs = [job for batch in BasicSweeper.split_arguments(overrides, None) for job in batch]
        base = "lru"
        try:
            base = str(self.config.hydra.runtime.choices.get("policy") or base)
        except Exception:  # noqa: BLE001
            pass
        jobs = drop_foreign_policy_params([list(j) for j in jobs], base)
        n = max_batch_size or len(jobs) or 1
        return [jobs[i:i + n] for i in range(0, len(jobs), n)]
