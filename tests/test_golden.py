"""Golden summaries on the bundled default trace (regenerate deliberately with scripts/update_golden.py)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import cluster_sim

GOLDEN = Path(__file__).resolve().parent / "golden"


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("*.json")), ids=lambda p: p.stem)
def test_golden(path):
    g = json.loads(path.read_text())
    f = cluster_sim.run(cluster_sim.compose(g["overrides"]), write=False).fleet
    for k, v in g["fleet"].items():
        if isinstance(v, int):
            assert f[k] == v, k
        else:
            assert f[k] == pytest.approx(v, rel=1e-9, abs=1e-12), k
