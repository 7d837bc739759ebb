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
