"""Golden summaries on the bundled default trace (regenerate deliberately with scripts/update_golden.py)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import cluster_sim

GOLDEN = Path(__file__).resolve().parent / "golden"


def _cases():
    """Every golden on the default engine; those of a compiled policy also on each engine
    (cluster_sim.engine: the interpreted reference and the compiled request step)."""
    from cluster_sim.engine import SUPPORTED_POLICIES

    out = []
    for p in sorted(GOLDEN.glob("*.json")):
        pol = json.loads(p.read_text())["overrides"]
        name = next((o.split("=", 1)[1] for o in pol if o.startswith("policy=")), "lru")
        if name in SUPPORTED_POLICIES:
            out += [pytest.param(p, "python", id=f"{p.stem}-python"), pytest.param(p, "numba", id=f"{p.stem}-numba")]
        else:
            out.append(pytest.param(p, None, id=p.stem))
    return out


@pytest.mark.parametrize("path,engine", _cases())
def test_golden(path, engine):
    g = json.loads(path.read_text())
    over = list(g["overrides"]) + ([f"cache.engine={engine}"] if engine else [])
    s = cluster_sim.run(cluster_sim.compose(over), write=False)
    if engine:
        assert s.run["engine"] == engine
    f = s.fleet
    for k, v in g["fleet"].items():
        if isinstance(v, int):
            assert f[k] == v, k
        else:
            assert f[k] == pytest.approx(v, rel=1e-9, abs=1e-12), k
