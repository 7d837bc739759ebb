"""Figures from finished runs: grouping by seed, mean ± 95% CI, the report command."""
from __future__ import annotations

import json
import math

import pytest

from cluster_sim import report
from cluster_sim.report import Record, groups, mean_ci, sweep_figures


def fake(policy: str, alpha: float | None, seed: int, miss: float, life: float, nodes: int = 2) -> Record:
    pol = {"name": policy, **({"alpha": alpha} if alpha is not None else {})}
    fleet = {"chunk_miss_ratio": miss, "ssd_lifetime_years": life, "wear_imbalance": 1.1,
             **{f"hits_{t}_{k}": 10.0 for t in ("hbm", "dram", "ssd") for k in ("fa", "state")}}
    node = {"ssd_bytes_written": 2e9 * (1 + seed), "chunk_miss_ratio": miss}
    return Record({"fleet": fleet, "nodes": [dict(node) for _ in range(nodes)],
                   "config": {"policy": pol, "seed": seed, "tracking": {"uri": f"x{seed}"}},
                   "run": {"policy_label": policy}})


def test_mean_ci_uses_student_t():
    m, h = mean_ci([1.0, 2.0, 3.0])
    assert m == 2.0 and h == pytest.approx(4.303 * 1.0 / math.sqrt(3), rel=1e-3)
    assert mean_ci([5.0]) == (5.0, 0.0)


def test_seeds_are_one_configuration_with_a_confidence_interval():
    recs = [fake("gandalf", a, s, 0.2 + 0.01 * s + a / 100, 10 * a + s) for a in (0.5, 2.0) for s in (0, 1, 2)]
    recs += [fake("lru", None, s, 0.25 + 0.01 * s, 0.3) for s in (0, 1, 2)]
    gs = groups(recs)
    assert len(gs) == 3 and all(g.seeds == 3 for g in gs)
    m, h = gs[0].stat("ssd_lifetime_years")
    assert m == pytest.approx(6.0) and h > 0
    assert "95% CI over 3 seeds" in report._seed_note(gs)
    assert {g.label for g in gs} == {"policy=gandalf, alpha=0.5", "policy=gandalf, alpha=2", "policy=lru"}


def test_sweep_figures_are_written(tmp_path):
    recs = [fake("gandalf", a, s, 0.2 + a / 100, 10 ** a) for a in (0.5, 1.0, 3.0) for s in (0, 1)]
    paths = sweep_figures(recs, tmp_path)
    names = {p.name for p in paths}
    assert names == {"frontier.png", "alpha.png", "ssd_written_per_node.png", "hit_sources.png"}
    for p in paths:
        assert p.stat().st_size > 10_000


def test_frontier_uses_log_scale_when_years_span_decades():
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    _, ax = plt.subplots()
    assert report._log_if_decades(ax, [0.3, 5.0, 1000.0]) and ax.get_yscale() == "log"
    _, ax = plt.subplots()
    assert not report._log_if_decades(ax, [0.3, 0.6]) and ax.get_yscale() == "linear"
    plt.close("all")


def test_report_command_reads_a_sweep_folder(tmp_path, capsys):
    for i, r in enumerate([fake("lru", None, 0, 0.3, 0.5), fake("gandalf", 1.0, 0, 0.32, 2.0)]):
        d = tmp_path / "sweep" / str(i)
        d.mkdir(parents=True)
        (d / "summary.json").write_text(json.dumps(r.summary))
    assert report.main([str(tmp_path / "sweep"), "--out", str(tmp_path / "fig")]) == 0
    assert (tmp_path / "fig" / "frontier.png").exists()
    assert "2 runs" in capsys.readouterr().out


def test_report_command_bad_input_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        report.main([str(tmp_path / "nope")])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nope" in err[0]


def test_per_node_figure_shows_nand_bytes_and_the_waf(tmp_path, monkeypatch):
    """With a measured (or assumed) WAF above 1, NAND bytes are drawn as hatched outlines behind
    the host bytes, and each run is labelled with its WAF; with WAF 1 the figure is as before."""
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    monkeypatch.setattr(plt, "close", lambda *a, **k: None)
    monkeypatch.setattr(report, "_plt", lambda: plt)
    recs = [fake("lru", None, 0, 0.2, 1.0), fake("gandalf", 1.0, 0, 0.2, 1.0)]
    for r, waf in zip(recs, (1.0, 1.5)):
        r.summary["fleet"]["ssd_waf"] = waf
        for n in r.summary["nodes"]:
            n["ssd_bytes_written_nand"] = waf * n["ssd_bytes_written"]
    gs = groups(recs)
    report.ssd_written_per_node(gs, tmp_path / "a.png")
    ax = plt.gcf().axes[0]
    hatched = [p for p in ax.patches if p.get_hatch() == "//"]
    assert len(hatched) == 2 * 2                      # 2 runs x 2 nodes
    texts = " ".join(t.get_text() for t in ax.texts)
    assert "WAF 1.50" in texts and "WAF 1.00" in texts
    plt.close("all")
    for r in recs:
        for n in r.summary["nodes"]:
            n["ssd_bytes_written_nand"] = n["ssd_bytes_written"]
    report.ssd_written_per_node(groups(recs), tmp_path / "b.png")
    ax = plt.gcf().axes[0]
    assert not [p for p in ax.patches if p.get_hatch() == "//"] and "WAF" not in " ".join(t.get_text() for t in ax.texts)
    plt.close("all")


# --------------------------------------------------------------------------- a study (scripts/reproduce.py)

import os  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tiny_study(tmp_path_factory):
    """The study pipeline end to end on the bundled default trace: scripts/reproduce.py --tiny runs
    one ``cluster-sim -m`` sweep of two named points (lru, gandalf α=1) and reports it."""
    out = tmp_path_factory.mktemp("study")
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "reproduce.py"), "--tiny", "--no-tracking",
                        "--out", str(out)], cwd=out, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return out, r.stdout


@pytest.mark.ray
def test_tiny_study_runs_its_points_as_one_sweep_and_reports_the_tables(tiny_study):
    out, stdout = tiny_study
    man = json.loads((out / "study.json").read_text())
    (setting,) = man["settings"]
    sweep = out / setting["dir"]
    # the points are the sweep's: one folder per job, each with the overrides that make it a point
    ovs = sorted(tuple(json.loads(json.dumps(__import__("yaml").safe_load((d / "overrides.yaml").read_text()))))
                 for d in sweep.iterdir() if d.is_dir() and (d / "summary.json").exists())
    assert [o for ov in ovs for o in ov if o.startswith("+experiment/paper_points=")] == \
        ["+experiment/paper_points=g1", "+experiment/paper_points=lru"]
    # DRAM and SSD are 1% and 10% of the working set W the manifest records
    w = man["working_sets_bytes"]["default|kimi_linear_48b_a3b"]
    cfg = json.loads((sweep / "0" / "summary.json").read_text())["config"]
    assert abs(float(cfg["hardware"]["dram_bytes"]) - 0.01 * w) <= 1 and abs(float(cfg["hardware"]["ssd_bytes"])
                                                                                - 0.10 * w) <= 1
    md = (out / "results.md").read_text()
    for sec in ("provenance", "side_by_side", "e2e", "capacity", "alpha", "models", "where", "latency_cost",
                "investigate", "fleet", "points"):
        assert f"<!-- BEGIN GENERATED: {sec} -->" in md and f"<!-- END GENERATED: {sec} -->" in md, sec
    e2e = md.split("<!-- BEGIN GENERATED: e2e -->")[1].split("<!-- END")[0]
    rows = {ln.split("|")[1].strip(): ln for ln in e2e.splitlines() if ln.startswith("| ") and "---" not in ln}
    assert {"LRU", "gandalf α=1"} <= set(rows)
    res = json.loads((out / "results.json").read_text())
    by_pol = {p["key"].rsplit("|", 1)[1]: p["fleet"] for p in res["points"]}
    assert f"{by_pol['lru']['chunk_miss_ratio']:.4f}" in rows["LRU"]
    assert f"{by_pol['g1']['chunk_miss_ratio']:.4f}" in rows["gandalf α=1"]
    assert "| lifetime at iso-miss" in md and "| claim (paper §) | paper | ours: default |" in md
    figs = res["figures"]
    assert {"frontier_default", "latency_cost"} <= set(figs)
    for f in figs.values():
        assert Path(f).parent == out / "figures" and 5_000 < Path(f).stat().st_size < 150_000
        assert f"figures/{Path(f).name}" in md


@pytest.mark.ray
def test_the_report_regenerates_the_same_tables_from_the_folder(tiny_study, tmp_path, capsys):
    out, _ = tiny_study
    before = (out / "results.md").read_text()
    doc = tmp_path / "results.md"
    doc.write_text("# mine\n\nprose kept\n\n<!-- BEGIN GENERATED: e2e -->\nold\n<!-- END GENERATED: e2e -->\n")
    assert report.main(["--study", str(out), "--docs", str(doc)]) == 0
    text = doc.read_text()
    assert text.startswith("# mine\n\nprose kept\n") and "\nold\n" not in text
    seg = lambda s: re.search(r"<!-- BEGIN GENERATED: e2e -->(.*?)<!-- END", s, re.S).group(1)  # noqa: E731
    assert seg(text) == seg(before)
    assert (tmp_path / "figures" / "frontier_default.png").exists()


def test_report_study_bad_folder_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        report.main(["--study", str(tmp_path / "nope")])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        report.main(["--study", str(tmp_path)])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "no study.json" in err[1] and "Traceback" not in err[1]


def test_best_baseline_is_the_longest_lived_within_the_miss_slack():
    st = report.Study({"main_model": "m", "labels": {"a": ["LRU", ""], "b": ["LRU-K", "K=2"], "g": ["gandalf", "α=1"]},
                       "baseline_families": ["LRU", "LRU-K"]}, [])
    rows = [("a", {"chunk_miss_ratio": 0.30, "ssd_lifetime_years": 9.0}),
            ("b", {"chunk_miss_ratio": 0.205, "ssd_lifetime_years": 2.0}),
            ("g", {"chunk_miss_ratio": 0.20, "ssd_lifetime_years": 5.0})]
    assert report.best_baseline_for(st, rows, "g") == "b"        # a lives longer but misses 0.10 more
    (g,) = report.iso_miss(st, rows)
    assert g[2] == "b" and g[3] == pytest.approx(2.5)


def test_share_of_oracle_admission_flags_a_reference_that_misses_more():
    st = report.Study({"main_model": "m", "labels": {"a": ["LRU", ""], "o": ["oracle_admission", ""],
                                                     "g": ["gandalf (default)", "α=1, hints"]},
                       "baseline_families": ["LRU"]}, [])
    rows = {"a": {"chunk_miss_ratio": 0.095, "ssd_lifetime_years": 2.0},
            "o": {"chunk_miss_ratio": 0.09, "ssd_lifetime_years": 4.0},
            "g": {"chunk_miss_ratio": 0.05, "ssd_lifetime_years": 3.0}}
    ref = report.oadm_row(st, rows)
    assert ref is rows["o"]
    assert report.oadm_share(rows["a"], ref, 1000.0) == "0.50"          # iso-miss: o misses less
    assert report.oadm_share(rows["g"], ref, 1000.0) == "0.75 †"        # o misses 0.04 more than g
    assert report.oadm_share({"chunk_miss_ratio": 0.5, "ssd_lifetime_years": 1000.0}, ref, 1000.0) == "cap"
    assert report.oadm_share({"chunk_miss_ratio": 0.5, "ssd_lifetime_years": 8.0}, ref, 1000.0) == "2.00 ‡"
    assert report.oadm_row(st, {"a": rows["a"]}) is None
