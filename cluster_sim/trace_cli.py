"""The ``cluster-sim-trace`` command (simulation-model.md §10).

    cluster-sim-trace stats PATH --format FMT [--json] [--chunk-tokens N] [--model M]

reads the trace through :func:`cluster_sim.trace.load.load_workload` — the
path the simulator takes, so every format it reads works here — and prints
:func:`cluster_sim.trace.stats.trace_statistics` as a table, or as one JSON
object with ``--json``. For ``--format synthetic`` PATH is a workload YAML
(e.g. ``conf/workload/synthetic_mooncake.yaml``: its ``synthetic`` knobs and
core keys are used), a YAML mapping of generator knobs, or ``default``.

A user error (missing file, unknown format, malformed trace, bad option)
prints one line on stderr and exits with status 2.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .errors import ConfigError, UserError
from .trace.load import READERS

PROG = "cluster-sim-trace"

# how the config keys of errors raised below are named on this command line
_KEY_NAMES = {
    "workload.path": "PATH",
    "workload.format": "--format",
    "workload.limit_requests": "--limit-requests",
    "workload.until_s": "--until-s",
    "workload.time_scale": "--time-scale",
    "cache.chunk_tokens": "--chunk-tokens",
    "model": "--model",
    "seed": "--seed",
}


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage block) and exit status 2."""

    def error(self, message: str):  # noqa: D401 - argparse API
        self.exit(2, f"{PROG}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="Inspect trace files the simulator reads.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    s = sub.add_parser(
        "stats", help="statistics of one trace (as ../shared/traces/README.md publishes them, and more)",
        description="Statistics of one trace, computed from the canonical table the simulator consumes.")
    s.add_argument("path", metavar="PATH",
                   help="the trace file (for --format synthetic: a workload YAML, a YAML of knobs, or 'default')")
    s.add_argument("--format", required=True, metavar="FMT",
                   help=f"{', '.join(READERS)} (as workload.format)")
    s.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    s.add_argument("--chunk-tokens", metavar="N", default=None,
                   help="also count full chunks of N tokens (a multiple of the block size, or 'auto')")
    s.add_argument("--model", metavar="M", default=None,
                   help="also compute the working set in bytes for model M (conf/model/M.yaml)")
    s.add_argument("--limit-requests", type=int, metavar="N", default=None,
                   help="only the first N requests in arrival order (as workload.limit_requests)")
    s.add_argument("--until-s", type=float, metavar="S", default=None,
                   help="drop requests arriving more than S seconds after the first (as workload.until_s)")
    s.add_argument("--seed", type=int, default=0, help="root seed (synthetic workloads, session placement)")
    s.add_argument("--option", "-o", action="append", default=[], metavar="KEY=VALUE",
                   help="a reader / generator option, as workload.KEY (repeatable; dotted keys nest, "
                        "e.g. synthetic.num_sessions=100)")
    s.add_argument("--max-tree-refs", type=int, default=None, metavar="N",
                   help="cap on chunk references fed to networkx for the prefix-tree shape (sampled above it)")
    s.add_argument("--no-tree", action="store_true", help="skip the prefix-tree shape")
    return p


def _set_dotted(m: dict, key: str, value: Any) -> None:
    parts = key.split(".")
    for part in parts[:-1]:
        nxt = m.get(part)
        if not isinstance(nxt, dict):
            nxt = m[part] = {}
        m = nxt
    m[parts[-1]] = value


def _workload_mapping(args) -> dict:
    import yaml

    fmt = args.format
    m: dict[str, Any] = {"format": fmt, "path": args.path}
    if fmt == "synthetic":
        m["path"] = None
        if args.path != "default":
            p = Path(args.path)
            if not p.is_file():
                raise ConfigError("workload.path", f"no such file: {args.path} (for --format synthetic give a "
                                                   "workload YAML, a YAML of generator knobs, or 'default')")
            try:
                data = yaml.safe_load(p.read_text()) or {}
            except (yaml.YAMLError, OSError, UnicodeDecodeError) as e:
                raise ConfigError("workload.path", f"{args.path}: not a readable YAML file ({e})") from None
            if not isinstance(data, dict):
                raise ConfigError("workload.path", f"{args.path}: must hold a mapping")
            if "format" in data:  # a workload preset
                if data["format"] != "synthetic":
                    raise ConfigError("workload.format", f"{args.path} is a workload of format "
                                                         f"{data['format']!r}, not 'synthetic'")
                m.update({k: v for k, v in data.items() if k not in ("defaults",)})
                m["path"] = None
            else:  # a mapping of knobs
                m["synthetic"] = data
    for opt in args.option:
        key, eq, raw = opt.partition("=")
        if not eq or not key:
            raise ConfigError("--option", f"expected KEY=VALUE, got {opt!r}")
        try:
            value = yaml.safe_load(raw)
        except (yaml.YAMLError, ValueError) as e:   # ValueError: an integer of more than 4300 digits
            raise ConfigError("--option", f"{key.strip()}: cannot read {raw[:40]!r}"
                                          f"{'...' if len(raw) > 40 else ''} ({' '.join(str(e).split())[:120]})") from None
        _set_dotted(m, key.strip(), value)
    if args.limit_requests is not None:
        m["limit_requests"] = args.limit_requests
    if args.until_s is not None:
        m["until_s"] = args.until_s
    return m


def stats_command(args) -> int:
    from .config import WorkloadConfig
    from .trace.load import load_workload
    from .trace.stats import DEFAULT_MAX_TREE_REFS, format_table, trace_statistics

    if args.seed < 0:
        raise ConfigError("seed", f"must be a non-negative integer, got {args.seed}")
    wl = WorkloadConfig.from_mapping(_workload_mapping(args))
    table = load_workload(wl, args.seed)
    s = trace_statistics(table, chunk_tokens=args.chunk_tokens, model=args.model,
                         max_tree_refs=args.max_tree_refs or DEFAULT_MAX_TREE_REFS, tree=not args.no_tree)
    if args.json:
        print(json.dumps(s, allow_nan=False))
    else:
        print(format_table(s, args.path))
    return 0


def _one_line(e: UserError) -> str:
    if isinstance(e, ConfigError):
        name = _KEY_NAMES.get(e.key, e.key)
        return f"{name}: {e.message}"
    return " ".join(str(e).split())


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help (0) or a usage error (2, one line already printed)
        return int(e.code or 0)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return stats_command(args)
    except UserError as e:
        print(f"{PROG}: error: {_one_line(e)}", file=sys.stderr)
        return e.exit_code
    except BrokenPipeError:  # `... | head`
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
