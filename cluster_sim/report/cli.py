"""``cluster-sim-report``: the comparison figures of a finished sweep (from its folder or from
MLflow), or the tables and figures of a study (``--study``)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .figures import sweep_figures
from .records import load_dir
from .results import study_report


PROG = "cluster-sim-report"


# --------------------------------------------------------------------------- command line

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=PROG, description="Draw the comparison figures of a finished sweep, or the "
                                                        "tables and figures of a study (--study).")
    ap.add_argument("path", nargs="?", help="a sweep's output folder (every summary.json below it is one run)")
    ap.add_argument("--experiment", help="read from MLflow instead: the experiment (default: its latest sweep)")
    ap.add_argument("--run", dest="parent", help="with --experiment: the sweep's parent run id")
    ap.add_argument("--uri", default=None, help="MLflow tracking URI (default sqlite:///mlflow_runs/mlflow.db)")
    ap.add_argument("--out", help="where to write the figures (default: PATH/report, or reports/<parent run>)")
    ap.add_argument("--log", action="store_true", help="with --experiment: also log the figures to the parent run")
    ap.add_argument("--study", metavar="DIR", help="a study folder (study.json and its sweeps, scripts/reproduce.py): "
                                                   "its tables and figures")
    ap.add_argument("--docs", metavar="FILE", help="with --study: rewrite the generated sections of FILE (e.g. "
                                                   "docs/results.md) and put the figures in figures/ beside it")
    a = ap.parse_args(argv)
    try:
        if a.study:
            if not Path(a.study).is_dir():
                raise SystemExit(_err(f"{a.study}: no such folder"))
            res = study_report(a.study, a.docs)
            print(f"{len(res['points'])} points; wrote {res['markdown']} and {Path(a.study) / 'results.json'}")
            for k, v in res["figures"].items():
                print(f"  figure {k}: {v}")
            return 0
        if a.docs:
            raise SystemExit(_err("--docs goes with --study DIR"))
        if a.experiment:
            import tempfile

            from .. import tracking
            tr = tracking.Tracker({"uri": a.uri, "experiment": a.experiment})
            parent = a.parent or tr.latest_sweep()
            if not parent:
                raise SystemExit(_err(f"experiment '{a.experiment}': no sweep (parent run) found in {tr.uri}"))
            tmp = Path(tempfile.mkdtemp(prefix="cluster_sim_report_"))
            for i, r in enumerate(tr.children(parent)):
                tr.download_point(r.info.run_id, tmp / f"{i:05d}")
            recs = load_dir(tmp)
            out = Path(a.out or Path("reports") / parent)
        elif a.path:
            if not Path(a.path).exists():
                raise SystemExit(_err(f"{a.path}: no such folder"))
            recs = load_dir(a.path)
            out = Path(a.out or Path(a.path) / "report")
        else:
            ap.print_usage(sys.stderr)
            raise SystemExit(_err("give a sweep folder or --experiment NAME"))
        if not recs:
            raise SystemExit(_err("no finished runs (summary.json) found"))
        paths = sweep_figures(recs, out)
        if a.experiment and a.log:
            tr.log_artifacts(parent, out, "report")
    except SystemExit:
        raise
    except Exception as e:  # noqa: BLE001 - one line for the user; the cause is named
        from ..errors import UserError
        if isinstance(e, UserError):
            raise SystemExit(_err(str(e)))
        raise
    print(f"{len(recs)} runs; figures:")
    for p in paths:
        print(f"  {p}")
    return 0


def _err(msg: str) -> int:
    print(f"{PROG}: error: {msg}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
