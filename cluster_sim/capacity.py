"""Capacities as a share of the working set: ``hardware.dram_bytes=1%W``.

W is the workload's working set for the model: the bytes of every distinct payload the
trace references (each unique chunk's FA bytes, plus the STATE checkpoint of every request's
last full chunk for a hybrid model) — ``working_set_bytes`` of ``cluster-sim-trace stats``.
It depends on the trace, the model and the chunk size, so it is known once the trace is
chunked: :func:`cluster_sim.api.run` splits the shares out, loads the trace, and puts the
bytes in (docs/decisions.md 64). A config with shares validates with a stand-in size.
"""
from __future__ import annotations

import copy
import math
import re
from typing import Any, Mapping

from .errors import ConfigError

_SHARE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*%\s*W\s*$")
#: the stand-in a share validates with before W is known (any valid size)
STAND_IN = "1GB"


def _is_size_key(key: str) -> bool:
    return key.endswith("_bytes")


def _walk(node: Any, prefix: str, out: dict) -> None:
    if isinstance(node, Mapping):
        for k, v in node.items():
            _walk(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(node, str) and "%" in node and _is_size_key(prefix):
        m = _SHARE.match(node)
        if not m:
            raise ConfigError(prefix, f"cannot read {node!r} as a share of the working set (e.g. 1%W, 0.5%W)")
        share = float(m.group(1)) / 100.0
        if not math.isfinite(share) or share < 0:
            raise ConfigError(prefix, f"must be a non-negative share of the working set, got {node!r}")
        out[prefix] = (node.strip(), share)


def shares(config: Mapping) -> dict[str, tuple[str, float]]:
    """Dotted key -> (as written, fraction) for every ``<x>%W`` size under ``hardware`` and
    ``fleet.node_overrides``."""
    out: dict[str, tuple[str, float]] = {}
    _walk(config.get("hardware") or {}, "hardware", out)
    fleet = config.get("fleet") or {}
    if isinstance(fleet, Mapping):
        _walk(fleet.get("node_overrides") or {}, "fleet.node_overrides", out)
    return out


def _set(config: dict, dotted: str, value) -> None:
    node = config
    parts = dotted.split(".")
    for p in parts[:-1]:      # node_overrides may be keyed by int
        node = node[p] if p in node else node[int(p)]
    node[parts[-1] if parts[-1] in node or not parts[-1].isdigit() else int(parts[-1])] = value


def substitute(config: Mapping, found: Mapping[str, tuple[str, float]], value_of) -> dict:
    """A copy of ``config`` with each share replaced by ``value_of(fraction)``."""
    c = copy.deepcopy(dict(config))
    for key, (_text, frac) in found.items():
        _set(c, key, value_of(frac))
    return c


def stand_in(config: Mapping) -> dict:
    """``config`` with every share replaced by :data:`STAND_IN` (for validation)."""
    found = shares(config)
    return substitute(config, found, lambda f: STAND_IN) if found else dict(config)


def working_set_bytes(trace, model) -> int:
    """W of a chunked trace for ``model`` (the same sum as ``trace_statistics``)."""
    import numpy as np

    ct = int(trace.chunk_tokens)
    fa = int(model.fa_bytes(ct)) * int(trace.n_chunks)
    m = np.diff(trace.offsets)
    ends = m[m > 0] * ct
    state = int(model.state_bytes_array(ends).sum()) if model.has_state and ends.size else 0
    return fa + state
