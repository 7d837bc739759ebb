"""The paper reproduction's quick mode (scripts/reproduce.py --quick) end to end: every point runs as a
Ray task on the real traces, the derived tables and the figures are produced. Long and needs
../shared/traces: marked ``study`` (excluded from the default run; ``python -m pytest -m study``)."""
from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT.parent / "shared" / "traces"

pytestmark = [pytest.mark.study, pytest.mark.ray]


def _load():
    spec = importlib.util.spec_from_file_location("reproduce", ROOT / "scripts" / "reproduce.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["reproduce"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.skipif(not (TRACES / "mooncake-fast25").exists() or not (TRACES / "weka-claude-code-v8").exists(),
                    reason="real traces not available")
def test_quick_study_runs_and_reports(tmp_path, capsys):
    rep = _load()
    t0 = time.perf_counter()
    res = rep.main(["--quick", "--no-docs", "--out", str(tmp_path)])
    wall = time.perf_counter() - t0
    out = capsys.readouterr().out
    assert wall < 600, f"quick study took {wall:.0f} s (must stay under 10 min)"
    # the point list is printed before any point's time
    assert out.index("study:") < out.index("[  1/")
    pts = res["points"]
    assert len(pts) >= 29
    keys = {p["key"] for p in pts}
    for t in ("moon", "weka"):
        assert any(k.startswith(t) and k.endswith("|g1") for k in keys)
        assert any(k.startswith(t) and "|n8:" in k for k in keys), "fleet points missing"
    for p in pts:
        f = p["fleet"]
        assert 0.0 <= f["chunk_miss_ratio"] <= 1.0
        assert f["chunk_miss_ratio"] + 1e-9 >= f["miss_ratio_floor"]
        assert f["ssd_lifetime_years"] > 0
    # the whole setup is the paper's: no HBM cache, 1 DWPD, 5 years, WAF 1, 512-token chunks, Kimi Linear
    g1 = next(p for p in pts if p["key"] == "moon|kimi_linear_48b_a3b|rel:0.01:0.1|g1")
    ov = " ".join(g1["overrides"])
    assert "experiment=paper_mooncake" in ov and "policy=gandalf" in ov
    # iso-miss analysis exists for both traces' main sizing
    groups = res["analysis"]["groups"]
    for t in ("moon", "weka"):
        g = groups[f"{t}|DRAM 1% W : SSD 10% W|w0"]
        assert g["iso"] and all(x["gandalf"].startswith("g") for x in g["iso"])
    # figures: small PNGs
    figs = res["figures"]
    for name in ("frontier_moon", "frontier_weka", "alpha", "capacity", "models", "where", "latency_cost", "fleet"):
        assert name in figs, name
        size = Path(figs[name]).stat().st_size
        assert 5_000 < size < 150_000, (name, size)
    md = (tmp_path / "results.md").read_text()
    assert "BEGIN GENERATED: side_by_side" in md and "8.8× fewer" in md
    assert json.loads((tmp_path / "results.json").read_text())["mode"] == "quick"
