"""Finished runs and how the figures group them: one run's :class:`Record` (``load_dir`` reads every
``summary.json`` below a folder), runs that differ only in ``seed`` as one :class:`Group`, their mean and
95% confidence interval (Student t), and the labels the figures give them."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np


# two-sided 95% Student t quantiles, df = 1..30
_T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
        2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
        2.045, 2.042]


def t95(df: int) -> float:
    return _T95[df - 1] if 1 <= df <= len(_T95) else 1.96


def mean_ci(values: Sequence[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% confidence interval (0 with fewer than two values)."""
    v = np.asarray(values, dtype=float)
    if len(v) == 0:
        return float("nan"), 0.0
    m = float(v.mean())
    if len(v) < 2:
        return m, 0.0
    return m, float(t95(len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v)))


@dataclass
class Record:
    """One finished run: its summary (``summary.json`` as a dict) and per-epoch table."""
    summary: dict
    epochs: Any = None           # pyarrow.Table or None
    source: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def config(self) -> dict:
        return self.summary.get("config") or {}

    @property
    def fleet(self) -> dict:
        return self.summary.get("fleet") or {}

    @property
    def policy(self) -> str:
        p = self.config.get("policy")
        return p.get("name") if isinstance(p, dict) else str(p)


# --------------------------------------------------------------------------- loading

def load_dir(path: str | Path) -> list[Record]:
    """Every ``summary.json`` below ``path`` (a sweep folder, or one run's folder)."""
    import pyarrow.parquet as pq

    recs = []
    for s in sorted(Path(path).rglob("summary.json"), key=lambda p: _natural(str(p))):
        try:
            data = json.loads(s.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or "fleet" not in data:
            continue
        ep = s.parent / "epochs.parquet"
        rq = s.parent / "requests.parquet"     # output.requests=true
        rec = Record(data, pq.read_table(ep) if ep.exists() else None, str(s.parent),
                     {"requests": pq.read_table(rq)} if rq.exists() else {})
        ov = s.parent / "overrides.yaml"      # the sweep point's own overrides (cluster_sim.sweep)
        if ov.exists():
            import yaml
            try:
                rec.extra["overrides"] = [str(x) for x in (yaml.safe_load(ov.read_text()) or [])]
            except yaml.YAMLError:
                pass
        recs.append(rec)
    return recs


def _natural(s: str):
    import re
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]


# --------------------------------------------------------------------------- grouping and labels

def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = json.dumps(v, sort_keys=True, default=str) if isinstance(v, (dict, list)) else v
    return out


_SKIP_TOP = ("tracking", "sweep", "ray", "output", "report", "hydra")


def _sim_flat(rec: Record) -> dict:
    c = {k: v for k, v in rec.config.items() if k not in _SKIP_TOP}
    if isinstance(c.get("model"), dict):
        c["model"] = {k: v for k, v in c["model"].items() if k != "derived"}
    return _flat(c)


def varying_keys(recs: Sequence[Record]) -> list[str]:
    """Config keys (dotted) whose value differs between the records, seed excluded."""
    flats = [_sim_flat(r) for r in recs]
    keys = sorted(set().union(*flats)) if flats else []
    out = []
    for k in keys:
        if k == "seed":
            continue
        vals = {json.dumps(f.get(k), default=str) for f in flats}
        if len(vals) > 1:
            out.append(k)
    # a group choice (model.name) makes every key of that group vary: keep the choice only
    # (a key of such a group stays when it varies between runs of the same choice: policy.alpha)
    chosen = {k.rsplit(".", 1)[0] for k in out if k.endswith(".name")}

    def varies_within_choice(k: str) -> bool:
        g = k.split(".")[0]
        by_choice: dict = {}
        for f in flats:
            by_choice.setdefault(json.dumps(f.get(f"{g}.name"), default=str), set()).add(
                json.dumps(f.get(k), default=str))
        return any(len(v) > 1 for v in by_choice.values())

    out = [k for k in out if k.endswith(".name") or k.split(".")[0] not in chosen or varies_within_choice(k)]
    return sorted(out, key=lambda k: (k != "policy.name", not k.endswith(".name"), k))


def short_key(k: str) -> str:
    if k.endswith(".name"):
        return k[:-5]
    return k.split(".")[-1]


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


@dataclass
class Group:
    """Runs with the same configuration but for ``seed``."""
    recs: list[Record]
    label: str
    policy: str
    values: dict           # varying key -> value

    def stat(self, key: str, scope: str = "fleet") -> tuple[float, float]:
        return mean_ci([float(r.fleet.get(key, 0.0)) for r in self.recs])

    def node_stat(self, key: str) -> list[tuple[float, float]]:
        n = min(len(r.summary.get("nodes") or []) for r in self.recs)
        return [mean_ci([float(r.summary["nodes"][i].get(key, 0.0)) for r in self.recs]) for i in range(n)]

    @property
    def seeds(self) -> int:
        return len(self.recs)


def groups(recs: Sequence[Record]) -> list[Group]:
    keys = varying_keys(recs)
    out: dict[str, Group] = {}
    for r in recs:
        f = _sim_flat(r)
        vals = {k: f.get(k) for k in keys if k in f}
        gk = json.dumps({k: v for k, v in f.items() if k != "seed"}, sort_keys=True, default=str)
        if gk not in out:
            label = ", ".join(f"{short_key(k)}={_fmt(v)}" for k, v in vals.items()) or \
                (r.summary.get("run") or {}).get("policy_label") or r.policy
            out[gk] = Group([], label, r.policy, vals)
        out[gk].recs.append(r)
    return list(out.values())


def short_label(rec: Record) -> str:
    """``gandalf(α=1)``, ``lru_k(k=2)``, ``lru``: the policy with its main knob, not every parameter."""
    p = rec.config.get("policy")
    if not isinstance(p, dict):
        return rec.policy
    for key, sym in (("alpha", "α"), ("k", "k"), ("f", "f")):
        if key in p:
            return f"{rec.policy}({sym}={_fmt(p[key])})"
    return rec.policy
