"""Where things are: the bundled config and default trace (a checkout's or an installed
wheel's), and the one setting that names the shared-trace root.

The real traces (Mooncake, WEKA Claude Code, Azure 2023) are never copied into the
repository; they are read from a shared folder. Its location is

* the environment variable ``CLUSTER_SIM_TRACES`` when it is set (a relative value is
  taken from the current directory), else
* ``../shared/traces`` beside the repository (the project's layout).

The Hydra config reads the same variable with the same default (``paths.traces`` in
``conf/config.yaml``; the workload YAMLs interpolate ``${paths.traces}``), so scripts,
tests and ``cluster-sim`` agree. This module imports nothing from the package.
"""
from __future__ import annotations

import os
from pathlib import Path

ENV = "CLUSTER_SIM_TRACES"
DEFAULT = "../shared/traces"          # relative to the repository root

#: the shared traces this project reads, by workload format (relative to the root)
TRACE_FILES = {
    "mooncake": "mooncake-fast25/conversation_trace.jsonl.gz",
    "claude_code": "weka-claude-code-v8/traces_v8.jsonl.gz",
    "azure": "azure-llm-2023/AzureLLMInferenceTrace_conv.csv.gz",
}


_PKG = Path(__file__).resolve().parent


def repo_root() -> Path:
    """The folder holding the package: the checkout's root (or site-packages for a wheel)."""
    return _PKG.parent


def data_root() -> Path:
    """The folder that holds the bundled ``conf/`` and ``traces/``: the installed package (a
    wheel carries them as ``cluster_sim/conf`` and ``cluster_sim/traces``, mapped by setup.py),
    else the checkout, where they are top-level folders (``cluster_sim/conf`` does not exist)."""
    if (_PKG / "conf" / "config.yaml").is_file():
        return _PKG
    return _PKG.parent


def conf_dir() -> Path:
    """The bundled Hydra config folder (``config.yaml`` and its groups; the models' files too)."""
    return data_root() / "conf"


def checkout_root() -> Path | None:
    """The repository root when running from a checkout (it has ``hydra_plugins/`` and
    ``conf/`` beside ``cluster_sim/``), else None."""
    root = _PKG.parent
    return root if (root / "hydra_plugins").is_dir() and (root / "conf").is_dir() else None


def traces_root() -> Path:
    """The shared-trace folder (it may not exist: a fresh clone has none)."""
    v = os.environ.get(ENV)
    if v:
        return Path(v).expanduser().resolve()
    return (repo_root() / DEFAULT).resolve()


def shared_trace(name: str) -> Path:
    """The file of a shared trace by name (``mooncake``, ``claude_code``, ``azure``)."""
    try:
        return traces_root() / TRACE_FILES[name]
    except KeyError:
        raise KeyError(f"unknown shared trace {name!r}; known: {', '.join(TRACE_FILES)}") from None


def missing(*names: str) -> str | None:
    """``None`` when every named shared trace is present, else one line saying which is not and
    where it was looked for (a test's skip reason, a script's error)."""
    gone = [n for n in names if not shared_trace(n).exists()]
    if not gone:
        return None
    return (f"real traces not present: {', '.join(str(shared_trace(n)) for n in gone)} (a fresh clone has no "
            f"shared traces; set {ENV} to the folder that holds them)")
