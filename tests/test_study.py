"""The study's plumbing: the one setting of the shared-trace root, scripts that import the package,
and (marked ``study``, excluded from the default run: ``python -m pytest -m study``) the quick mode
of scripts/reproduce.py on the real traces. The pipeline on the bundled trace (a two-point study
through ``cluster-sim -m`` and ``cluster-sim-report --study``) is tests/test_report.py's."""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cluster_sim import compose, locations

ROOT = Path(__file__).resolve().parents[1]


def test_one_setting_names_the_trace_root(monkeypatch, tmp_path):
    monkeypatch.delenv(locations.ENV, raising=False)
    assert locations.traces_root() == (ROOT / ".." / "shared" / "traces").resolve()
    assert compose(["workload=mooncake"])["workload"]["path"] == \
        "../shared/traces/mooncake-fast25/conversation_trace.jsonl.gz"
    monkeypatch.setenv(locations.ENV, str(tmp_path))
    assert locations.traces_root() == tmp_path.resolve()
    assert locations.shared_trace("claude_code") == tmp_path / "weka-claude-code-v8" / "traces_v8.jsonl.gz"
    c = compose(["experiment=paper_weka_azure"])
    assert c["workload"]["path"] == f"{tmp_path}/weka-claude-code-v8/traces_v8.jsonl.gz"
    assert c["workload"]["arrivals"] == f"{tmp_path}/azure-llm-2023/AzureLLMInferenceTrace_conv.csv.gz"
    assert compose(["workload=azure"])["workload"]["path"].startswith(str(tmp_path))
    why = locations.missing("mooncake", "azure")
    assert why and str(tmp_path / "mooncake-fast25") in why and locations.ENV in why


def test_no_yaml_or_script_hard_codes_the_trace_root():
    offenders = []
    for f in [*(ROOT / "conf").rglob("*.yaml"), *(ROOT / "scripts").glob("*.py"), *(ROOT / "tests").glob("*.py")]:
        for i, ln in enumerate(f.read_text().splitlines(), 1):
            code = ln.split("#", 1)[0]      # a path written as a value (prose that names the folder is fine)
            if ('"shared" / "traces"' in code or re.search(r"[\"':=]\s*\.\./shared/traces/", code)) \
                    and f.name != "test_study.py":
                offenders.append(f"{f.relative_to(ROOT)}:{i}")
    assert not offenders, offenders


def test_scripts_import_the_package_not_each_other():
    scripts = {f.stem for f in (ROOT / "scripts").glob("*.py")}
    bad = []
    for f in sorted((ROOT / "scripts").glob("*.py")):
        tree = ast.parse(f.read_text())
        for n in ast.walk(tree):
            if isinstance(n, ast.Call) and ast.unparse(n.func) in ("sys.path.insert", "sys.path.append"):
                bad.append(f"{f.name}:{n.lineno} {ast.unparse(n)}")
            if isinstance(n, ast.ImportFrom) and n.module and n.module.split(".")[0] in scripts:
                bad.append(f"{f.name}:{n.lineno} from {n.module}")
            if isinstance(n, ast.Import) and any(a.name.split(".")[0] in scripts for a in n.names):
                bad.append(f"{f.name}:{n.lineno} import")
    assert not bad, bad


def test_a_missing_shared_trace_is_one_line_and_exit_2(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), locations.ENV: str(tmp_path)}
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "reproduce.py"), "--quick", "--list"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("reproduce: error: real traces not present") and str(tmp_path) in line


def test_every_study_point_composes():
    names = sorted(p.stem for p in (ROOT / "conf" / "experiment" / "paper_points").glob("*.yaml"))
    assert len(names) >= 30
    spec = __import__("importlib").util.spec_from_file_location("reproduce", ROOT / "scripts" / "reproduce.py")
    rep = __import__("importlib").util.module_from_spec(spec)
    spec.loader.exec_module(rep)
    assert set(rep.LABELS) == set(names)        # every point has a label, every label a point file
    g = compose(["experiment=paper_mooncake", "workload=default", "+experiment/paper_points=gpobjc"])["policy"]
    assert (g["alpha"], g["reuse"], g["objective"]) == (1, "population", "chunks")
    k = compose(["experiment=paper_mooncake", "workload=default", "+experiment/paper_points=lruk3"])["policy"]
    assert (k["name"], k["k"]) == ("lru_k", 3)


@pytest.mark.study
@pytest.mark.ray
@pytest.mark.skipif(bool(locations.missing("mooncake", "claude_code")),
                    reason=locations.missing("mooncake", "claude_code") or "")
def test_quick_study_runs_and_reports(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "reproduce.py"), "--quick", "--no-docs",
                        "--no-tracking", "--out", str(tmp_path)], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert wall < 900, f"quick study took {wall:.0f} s"
    res = json.loads((tmp_path / "results.json").read_text())
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
    g1 = next(p for p in pts if p["key"] == "moon|kimi_linear_48b_a3b|rel:0.01:0.1|g1")
    assert "experiment=paper_mooncake" in " ".join(g1["overrides"]) or g1["overrides"]
    groups = res["analysis"]["groups"]
    for t in ("moon", "weka"):
        g = groups[f"{t}|DRAM 1% W : SSD 10% W|w0"]
        assert g["iso"] and all(x["gandalf"].startswith("g") for x in g["iso"])
    for name in ("frontier_moon", "frontier_weka", "alpha", "capacity", "models", "where", "latency_cost", "fleet"):
        assert name in res["figures"], name
        assert 5_000 < Path(res["figures"][name]).stat().st_size < 150_000, name
    md = (tmp_path / "results.md").read_text()
    assert "BEGIN GENERATED: side_by_side" in md and "8.8× fewer" in md


def test_every_paper_experiment_replays_the_whole_trace():
    """A cut (workload.until_s / limit_requests) hid Gandalf's long-span regression (decision 45):
    the study's experiment configs replay whole traces; a cut is only ever a command-line choice."""
    names = sorted(p.stem for p in (ROOT / "conf" / "experiment").glob("paper_*.yaml"))
    assert {"paper_mooncake", "paper_weka", "paper_weka_azure"} <= set(names)
    for name in names:
        w = compose([f"experiment={name}"])["workload"]
        assert w.get("until_s") is None and not w.get("limit_requests"), (name, w.get("until_s"),
                                                                          w.get("limit_requests"))
