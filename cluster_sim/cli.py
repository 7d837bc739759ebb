"""The ``cluster-sim`` command: a Hydra app over ``conf/`` (the only module that imports Hydra).

A wrong key or value exits with status 2 and one line on stderr naming it;
the composed config is validated before Hydra starts the job, so a typo never
produces a traceback or an empty output directory.
"""
from __future__ import annotations

import sys
from pathlib import Path

from .errors import UserError

PROG = "cluster-sim"


def conf_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "conf"


def compose(overrides: list[str]) -> dict:
    """Compose ``conf/config.yaml`` with Hydra overrides into a plain dict."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3", job_name="cluster_sim"):
        cfg = hydra_compose(config_name="config", overrides=list(overrides))
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


def _validate(overrides: list[str]) -> str | None:
    """Compose and validate; return an error line or None."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from .config import SimConfig

    try:
        SimConfig.from_mapping(compose(overrides))
    except UserError as e:
        return str(e)
    except (HydraException, OmegaConfBaseException) as e:
        return _one_line(e)
    return None


def _task(cfg) -> None:
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    from .api import run

    m = OmegaConf.to_container(cfg, resolve=True)
    out = m.setdefault("output", {})
    if not out.get("dir"):
        out["dir"] = HydraConfig.get().runtime.output_dir
    try:
        summary = run(m)
    except UserError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
    print(summary.table())
    if summary.run.get("summary_path"):
        print(f"\nsummary: {summary.run['summary_path']}")


def main(argv: list[str] | None = None) -> int:
    import hydra

    argv = list(sys.argv[1:] if argv is None else argv)
    flags = [a for a in argv if a.startswith("-")]
    overrides = [a for a in argv if not a.startswith("-")]
    informational = any(f in ("--help", "-h", "--hydra-help", "--cfg", "-c", "--info", "-i", "--shell-completion",
                              "-sc", "--version") or f.startswith("--cfg") or f.startswith("--info") for f in flags)
    multirun = any(f in ("-m", "--multirun") for f in flags)
    if not informational and not multirun:
        err = _validate(overrides)
        if err:
            print(f"{PROG}: error: {err}", file=sys.stderr)
            return 2
    app = hydra.main(version_base="1.3", config_path=str(conf_dir()), config_name="config")(_task)
    saved = sys.argv
    sys.argv = [PROG] + argv
    try:
        app()
    finally:
        sys.argv = saved
    return 0


if __name__ == "__main__":
    sys.exit(main())
