"""The ``cluster-sim`` command: a Hydra app over ``conf/`` (the only module that imports Hydra).

A wrong key or value exits with status 2 and one line on stderr naming it;
the composed config is validated before Hydra starts the job, so a typo never
produces a traceback or an empty output directory.
"""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path

from .errors import TrackingError, UserError
from .locations import conf_dir

PROG = "cluster-sim"


_SCHEMAS_STORED = False


def register_schemas() -> None:
    """Store the settings schema (:func:`cluster_sim.schema_store.nodes`) in Hydra's ConfigStore
    as ``schema/...``, which the YAML files under conf/ extend; once per process."""
    global _SCHEMAS_STORED
    if _SCHEMAS_STORED:
        return
    from hydra.core.config_store import ConfigStore

    from .schema_store import nodes

    from .policies.base import plugin_policies

    cs = ConfigStore.instance()
    schema = nodes()
    for path, node in schema.items():
        group, name = path.rsplit("/", 1)
        cs.store(group=group, name=name, node=node, provider="cluster_sim")
    # a plugin's policy has no conf/policy/<name>.yaml: ``policy=<name>`` selects its defaults
    for name, dist in plugin_policies().items():
        cs.store(group="policy", name=name, node=schema[f"schema/policy/{name}"], provider=dist)
    _SCHEMAS_STORED = True


def _ensure_plugins() -> None:
    """Make Hydra find ``hydra_plugins/cluster_sim_ray_launcher`` beside ``conf/``.

    Hydra scans the ``hydra_plugins`` namespace package; an editable install may expose it
    through an import hook that ``pkgutil`` cannot list, so the folder is added to the
    namespace path explicitly (a no-op when it is already there)."""
    from .locations import checkout_root

    root = checkout_root()
    if root is None:      # an installed wheel: hydra_plugins is a regular part of site-packages
        return
    try:
        import hydra_plugins
    except ImportError:
        sys.path.append(str(root))
        return
    path = str(root / "hydra_plugins")
    if path not in [str(p) for p in hydra_plugins.__path__]:
        hydra_plugins.__path__.append(path)


#: Hydra's own flags of this invocation that change what is composed (``-cd``, ``-cn``, ``-cp``);
#: :func:`main` sets it, so that validation composes exactly what Hydra will run
_SEARCH: dict = {"config_dir": None, "config_name": None, "config_path": None}


def _primary_dir() -> str:
    cp = _SEARCH.get("config_path")
    return os.path.abspath(cp) if cp else str(conf_dir())


@contextmanager
def _initialized():
    """Hydra initialised as ``cluster-sim`` itself would be: the bundled ``conf/`` (or ``-cp``) as
    the primary folder and ``-cd DIR`` added where Hydra's own ``-cd`` puts it (after the primary
    folder, before the structured configs), so a user's file can name a bundled one as its
    default. The same steps as :class:`hydra.initialize_config_dir`, plus the added folder."""
    from hydra.core.config_search_path import SearchPathQuery
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_config_search_path
    from hydra.initialize import get_gh_backup, restore_gh_from_backup
    from hydra import version

    backup = get_gh_backup()
    version.setbase("1.3")
    csp = create_config_search_path(search_path_dir=_primary_dir())
    if _SEARCH.get("config_dir"):
        csp.prepend(provider="command-line", path="file://" + os.path.abspath(_SEARCH["config_dir"]),
                    anchor=SearchPathQuery(provider="schema"))
    Hydra.create_main_hydra2(task_name="cluster_sim", config_search_path=csp)
    try:
        yield
    finally:
        restore_gh_from_backup(backup)


def compose(overrides: list[str], *, hydra_config: bool = False):
    """Compose ``conf/config.yaml`` with Hydra overrides into a plain dict (with this command's
    ``-cd``/``-cn``/``-cp``, see :data:`_SEARCH`); ``hydra_config=True`` returns the DictConfig
    with the ``hydra`` node."""
    from hydra import compose as hydra_compose
    from omegaconf import OmegaConf

    _ensure_plugins()
    register_schemas()
    with _initialized():
        cfg = hydra_compose(config_name=_SEARCH.get("config_name") or "config", overrides=list(overrides),
                            return_hydra_config=hydra_config)
    if hydra_config:
        return cfg
    return OmegaConf.to_container(cfg, resolve=True)


def _one_line(exc: BaseException) -> str:
    """Hydra's multi-line composition errors as one line that names the key."""
    import re

    msg = str(exc).strip()
    m = re.search(r"Could not find '([^'/]+)/([^']+)'", msg)
    if m:
        group, name = m.groups()
        lines = [ln.strip() for ln in msg.splitlines()]
        opts = []
        start = next((i for i, ln in enumerate(lines) if ln.startswith("Available options")), None)
        if start is not None:
            for ln in lines[start + 1:]:
                if not ln or ln.startswith("Config search path"):
                    break
                opts.append(ln)
        tail = f"; available: {', '.join(opts)}" if opts else ""
        return f"{group}: unknown option '{name}'{tail}"
    m = re.search(r"Could not override '([^']+)'", msg) or re.search(r"Key '([^']+)' is not in struct", msg)
    if m:
        return f"{m.group(1)}: unknown key (not a setting of the composed config)"
    lines = [ln.strip() for ln in msg.splitlines() if ln.strip()]
    return " ".join(lines) if lines else type(exc).__name__


def _too_many_digits(overrides: list[str]) -> str | None:
    """Hydra's parser converts a number with ``int()``, which refuses more than 4300 digits."""
    import re

    limit = sys.get_int_max_str_digits()
    for o in overrides:
        if limit and re.search(r"\d{%d,}" % (limit + 1), o):
            return f"{o.split('=', 1)[0]}: a number of more than {limit} digits"
    return None


def _added_top_level(overrides: list[str], composed: dict) -> str | None:
    """``+seedd=3`` adds a top-level key nothing reads: an error naming it (decision 60). A key
    the config files define (the bundled ones, an experiment's, a ``-cn`` config's) is known:
    the overrides that add keys are left out, and what remains is composed again."""
    adds = [o for o in overrides if o.startswith("+") and "=" in o]
    if not adds:
        return None
    new = {o.lstrip("+").split("=", 1)[0].split(".", 1)[0] for o in adds} - {"hydra"}
    new &= set(composed)
    if not new:
        return None
    known = set(compose([o for o in overrides if o not in adds]))
    extra = sorted(new - known)
    if not extra:
        return None
    return f"{extra[0]}: unknown top-level key, nothing reads it (known: {', '.join(sorted(known))})"


def _validate(overrides: list[str]) -> str | None:
    """Compose and validate; return an error line or None."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from .config import SimConfig

    too_long = _too_many_digits(overrides)
    if too_long:
        return too_long
    try:
        composed = compose(overrides)
        unknown = _added_top_level(overrides, composed)
        if unknown:
            return unknown
        from .capacity import stand_in
        # hardware.dram_bytes=1%W: W is known at run time; policy parameters too (no policy is built)
        SimConfig.from_mapping(stand_in(composed))
    except UserError as e:
        return str(e)
    except (HydraException, OmegaConfBaseException) as e:
        return _one_line(e)
    return None


def _validate_sweep(overrides: list[str]) -> str | None:
    """Expand a command-line sweep as Hydra's basic sweeper does and validate every point
    (an experiment's own ``hydra.sweeper.params`` are validated by the launcher)."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException, OverrideParseException

    too_long = _too_many_digits(overrides)
    if too_long:
        return too_long
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except OverrideParseException as e:
        return " ".join(str(e).split())
    try:
        jobs = [list(job) for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]
        from .sweep import drop_foreign_policy_params
        try:
            base = compose([o.input_line for o in parsed if not o.is_sweep_override()
                            and not o.key_or_group.startswith("policy")])["policy"]["name"]
        except Exception:  # noqa: BLE001 - a composition error is reported for the first point below
            base = "lru"
        jobs = drop_foreign_policy_params(jobs, base)
    except (HydraException, ValueError, TypeError) as e:
        return " ".join(str(e).split())
    except Exception:  # noqa: BLE001 - e.g. glob() needs Hydra's config loader: Hydra validates it itself
        return None
    for job in jobs:
        err = _validate(list(job))
        if err:
            return err + (f" (sweep point: {' '.join(job)})" if len(jobs) > 1 else "")
    return None


@contextmanager
def _spinner(label: str, after_s: float = 3.0):
    """A transient progress bar (requests replayed of the total, elapsed, remaining) for runs
    longer than ``after_s`` seconds, on a terminal only: nothing in CI or when output is piped.
    Yields the ``progress(done, total)`` callback for :func:`cluster_sim.run` (or None)."""
    if os.environ.get("CI") or not sys.stderr.isatty():
        yield None
        return
    import threading

    from rich.console import Console
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    # until the replay reports its first epoch the trace is being read (or converted, once): say
    # so, rather than a count of "0/?" requests
    p = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[count]}"),
                 TimeElapsedColumn(), TimeRemainingColumn(), transient=True, console=Console(stderr=True))
    task = p.add_task("reading the trace", total=None, count="")

    def update(done: int, total: int) -> None:
        p.update(task, completed=done, total=total, description=label, count=f"{done:,}/{total:,} requests")

    timer = threading.Timer(after_s, p.start)
    timer.daemon = True
    timer.start()
    try:
        yield update
    finally:
        timer.cancel()
        p.stop()


def _task(cfg) -> None:
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    from .api import run

    m = OmegaConf.to_container(cfg, resolve=True)
    out = m.setdefault("output", {})
    if not out.get("dir"):
        out["dir"] = HydraConfig.get().runtime.output_dir
    tracking = m.get("tracking") or {}
    try:
        with _spinner("simulating") as progress:
            summary = run(m, progress=progress)
        print(summary.table())
        spath = summary.run.get("summary_path")
        if spath:
            print(f"\nsummary: {spath}")
        figures = _single_run_figures(m, summary, spath)
    except UserError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
    if tracking.get("enabled"):   # after the results are written: an unusable store never costs them
        try:
            from .tracking import Tracker
            _log_single(Tracker(tracking), m, summary, spath, figures)
        except TrackingError as e:
            where = Path(spath).parent if spath else "this terminal"
            print(f"{PROG}: warning: {e}; the results are written ({where}), not logged", file=sys.stderr)
            sys.exit(e.exit_code)


def _single_run_figures(m: dict, summary, spath) -> Path | None:
    if not (m.get("report") or {}).get("figures", True) or not spath:
        return None
    import json

    from .report import Record, run_figures

    fig_dir = Path(spath).parent / "figures"
    paths = run_figures(Record(json.loads(summary.to_json()), summary.epoch_table,
                               extra={"requests": summary.request_table}), fig_dir)
    print(f"figures: {fig_dir}/ ({', '.join(p.name for p in paths)})")
    return fig_dir


def _log_single(tracker, m: dict, summary, spath, fig_dir) -> None:
    import json
    import tempfile

    import yaml

    from .tracking import ui_command

    files = []
    if spath:
        sp = Path(spath)
        files += [(sp, None), (sp.parent / "nodes.parquet", None), (sp.parent / "epochs.parquet", None),
                  (sp.parent / "requests.parquet", None)]     # the last only with output.requests=true
    if fig_dir:
        files.append((fig_dir, "figures"))
    data = json.loads(summary.to_json())
    with tempfile.TemporaryDirectory() as tmp:
        cfg_file = Path(tmp) / "config.yaml"
        cfg_file.write_text(yaml.safe_dump(data["config"], sort_keys=False))
        files.append((cfg_file, None))
        try:
            from hydra.core.hydra_config import HydraConfig

            from .tracking import run_name
            try:
                given = list(HydraConfig.get().overrides.task)
            except Exception:  # noqa: BLE001 - called outside a Hydra job (a test)
                given = []
            rid = tracker.log_point(name=run_name(m, given), kind="single", config=m,
                                    summary=data, epochs=summary.epoch_table, out_dir=None, files=files,
                                    tags={"out_dir": str(Path(spath).parent.resolve()) if spath else ""})
        except Exception as e:  # noqa: BLE001 - the store went away or refused the run
            from .tracking import one_line
            raise TrackingError(tracker.uri, f"logging the run: {one_line(e)}") from e
    print(f"MLflow run: {rid} in experiment '{tracker.experiment_name}' ({tracker.uri})")
    print(f"  open the UI: {ui_command(tracker.uri)}")
    print(f"  runs table:  {tracker.runs_url()}")


def _fixed(overrides: list[str]) -> list[str]:
    """The overrides of a sweep that are the same for every point."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return [o.input_line for o in OverridesParser.create().parse_overrides(overrides) if not o.is_sweep_override()]


def _hydra_dir(overrides: list[str], multirun: bool) -> tuple[str, str] | None:
    """(key, resolved folder) of the run (``hydra.run.dir``) or sweep (``hydra.sweep.dir``), or None
    when it cannot be resolved before Hydra runs."""
    from omegaconf import OmegaConf

    key = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    try:
        if multirun:   # the points' own values do not decide the sweep folder
            overrides = _fixed(overrides)
        cfg = compose(list(overrides), hydra_config=True)
        value = OmegaConf.select(cfg, key)
    except Exception:  # noqa: BLE001 - e.g. an interpolation only Hydra's run can resolve
        return None
    return (key, str(value)) if value else None


def _preflight(overrides: list[str], folder: tuple[str, str] | None, multirun: bool) -> str | None:
    """Every output path checked before anything runs; returns an error line or None."""
    from .outputs import check_dir, check_summary_path
    from .tracking import check_settings

    try:
        if folder is not None:
            check_dir(folder[1], folder[0])
        base = compose(_fixed(overrides) if multirun else overrides)
        tr = base.get("tracking") or {}
        if tr.get("enabled"):
            check_settings(tr)
        if multirun:
            return None
        out = base.get("output") or {}
        if out.get("dir"):
            check_dir(out["dir"], "output.dir")
        run_dir = out.get("dir") or (folder[1] if folder else None)
        spath = out.get("summary_path") or (Path(run_dir) / "summary.json" if run_dir else None)
        if spath:
            check_summary_path(spath, "output.summary_path" if out.get("summary_path") else
                               ("output.dir" if out.get("dir") else "hydra.run.dir"),
                               figures=bool((base.get("report") or {}).get("figures", True)))
    except UserError as e:
        return str(e)
    except Exception:  # noqa: BLE001 - composition errors were reported by validation already
        return None
    return None


def _quote(value: str) -> str:
    """A Hydra override value that is taken literally (quoted, with escapes)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


#: what Hydra puts into a run or sweep folder before the job runs
HYDRA_ENTRIES = (".hydra", "cluster_sim.log", "multirun.yaml")


def _new_folders(path: str) -> tuple[list[Path], list[Path]]:
    """What a run at ``path`` would create: ``path`` and its ancestors that do not exist yet
    (deepest first) or, for a folder that exists, Hydra's own entries that are not there yet."""
    p = Path(os.path.abspath(path))
    made = []
    while not p.exists() and p.parent != p:
        made.append(p)
        p = p.parent
    if made:
        return made, []
    return [], [p / name for name in HYDRA_ENTRIES if not (p / name).exists()]


def _remove_new_folders(made: tuple[list[Path], list[Path]]) -> None:
    """Take back what a failed run created (its run folder and parents left empty, or Hydra's
    entries in a folder that was there), unless results were written there."""
    import shutil

    folders, entries = made
    if folders:
        if not folders[0].exists() or any(folders[0].rglob("summary.json")):
            return
        shutil.rmtree(folders[0], ignore_errors=True)
        for p in folders[1:]:
            try:
                p.rmdir()   # only if empty: another run may have put something there meanwhile
            except OSError:
                break
        return
    for e in entries:
        if e.is_dir():
            shutil.rmtree(e, ignore_errors=True)
        elif e.exists():
            e.unlink()


class _ArgvError(Exception):
    pass


def parse_argv(argv: list[str]):
    """Hydra's own command line parser (``hydra._internal.utils.get_args_parser``), flags and
    overrides in any order. Returns (namespace, argv for Hydra: flags with their values first,
    then the overrides). A bad flag raises :class:`_ArgvError` with argparse's one line."""
    from hydra._internal.utils import get_args_parser

    parser = get_args_parser()

    def error(message):   # argparse would print its usage and exit: one line instead
        raise _ArgvError(message)

    parser.error = error
    args = parser.parse_intermixed_args(argv)
    if args.config_path:   # Hydra reads a relative one against cli.py's folder; a user means this folder
        args.config_path = os.path.abspath(args.config_path)
    flags: list[str] = []
    for dest, flag in (("help", "--help"), ("hydra_help", "--hydra-help"), ("resolve", "--resolve"),
                       ("run", "--run"), ("multirun", "--multirun"), ("shell_completion", "--shell-completion")):
        if getattr(args, dest):
            flags.append(flag)
    for dest, flag in (("cfg", "--cfg"), ("package", "--package"), ("config_path", "--config-path"),
                       ("config_name", "--config-name"), ("config_dir", "--config-dir"),
                       ("experimental_rerun", "--experimental-rerun"), ("info", "--info")):
        v = getattr(args, dest)
        if v is not None:
            flags += [flag, v]
    return args, flags + list(args.overrides)


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    finally:   # the next compose() in this process (a test, a notebook) sees the bundled conf/ only
        _SEARCH.update(config_dir=None, config_name=None, config_path=None)


def _main(argv: list[str] | None = None) -> int:
    import hydra

    from .signals import sigterm_as_interrupt, was_terminated

    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args, argv = parse_argv(argv)
    except _ArgvError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    overrides = list(args.overrides)
    informational = bool(args.help or args.hydra_help or args.cfg or args.info or args.shell_completion)
    multirun = bool(args.multirun)
    if args.config_dir is not None and not os.path.isdir(args.config_dir):
        print(f"{PROG}: error: --config-dir: not a folder: {args.config_dir}", file=sys.stderr)
        return 2
    _SEARCH.update(config_dir=args.config_dir, config_name=args.config_name, config_path=args.config_path)
    _ensure_plugins()
    register_schemas()
    made: tuple[list[Path], list[Path]] = ([], [])
    if not informational:
        err = _validate_sweep(overrides) if multirun else _validate(overrides)
        folder = None if err else _hydra_dir(overrides, multirun)
        err = err or _preflight(overrides, folder, multirun)
        if err:
            print(f"{PROG}: error: {err}", file=sys.stderr)
            return 2
        if folder is not None:   # pin the folder Hydra creates, so that a failed run can take it back
            key, value = folder
            argv = [a for a in argv if not a.lstrip("+~").startswith(key + "=")] + [f"{key}={_quote(value)}"]
            made = _new_folders(value)
    from . import sweep

    sweep.LAST = None
    app = hydra.main(version_base="1.3", config_path=str(conf_dir()), config_name="config")(_task)
    saved = sys.argv
    sys.argv = [PROG] + argv
    code = 0
    try:
        with sigterm_as_interrupt():
            app()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except KeyboardInterrupt as e:
        code = 143 if was_terminated(e) else 130
        what = "terminated (SIGTERM)" if code == 143 else "interrupted"
        hint = "; finished points are kept, sweep.resume=true runs the rest" if multirun else ""
        print(f"{PROG}: {what}{hint}", file=sys.stderr)
    finally:
        sys.argv = saved
    if code not in (0, 3) and not (multirun and code == 1):
        _remove_new_folders(made)
    if code:
        return code
    if multirun and not informational and sweep.LAST is not None:
        print(sweep.format_outcome(sweep.LAST))
        if sweep.LAST.failed:
            return 1
        return 3 if sweep.LAST.tracking_error else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
