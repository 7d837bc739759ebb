"""The settings schema as config nodes (registered with Hydra by ``cli.register_schemas``, at
the edge): every YAML under ``conf/`` that selects a section
extends its schema node and writes only what differs from it (decision 47).

``schema/hardware``, ``schema/workload``, ``schema/fleet`` and ``schema/policy/<name>`` (one per
registered policy) hold the defaults of :class:`~cluster_sim.config.HardwareConfig`,
:class:`~cluster_sim.config.WorkloadConfig`, :class:`~cluster_sim.config.FleetConfig` and each
policy's ``Params``, as plain (untyped) mappings: Hydra only sees which keys exist and their
defaults, so ``policy.alpha=2`` works without ``+``; types, limits and units are checked by
:mod:`cluster_sim.settings` afterwards, with its one-line errors.
"""
from __future__ import annotations

from dataclasses import fields

from . import settings


def _shown(cls, values: dict) -> dict:
    """Defaults as a YAML file would write them: rates in GB/s."""
    out = {}
    for f in fields(cls):
        if f.name not in values:
            continue
        v = values[f.name]
        s = settings.spec_of(f)
        if s.kind == "rate" and isinstance(v, (int, float)):
            v = f"{v / 1e9:g}GB/s"
        elif s.kind == "section" and isinstance(v, dict):
            v = _shown(s.section, v)
        out[f.name] = v
    return out


def nodes() -> dict[str, dict]:
    """``{config path: mapping}`` of every schema node."""
    from .config import FleetConfig, HardwareConfig, WorkloadConfig
    from .policies.base import known_policies, policy_params

    out = {
        "schema/hardware": _shown(HardwareConfig, settings.defaults(HardwareConfig)),
        "schema/workload": {k: v for k, v in settings.defaults(WorkloadConfig).items() if k != "options"},
        "schema/fleet": settings.defaults(FleetConfig),
    }
    for name in known_policies():
        cls = policy_params(name)
        out[f"schema/policy/{name}"] = {"name": name, **_shown(cls, settings.defaults(cls))}
    return out
