"""What a new user sees (issue #16): Hydra's own flags, lifetimes in readable units, unknown
top-level keys, the sweep footer, first-run notices, compile time kept out of sim time."""
from __future__ import annotations

import json

import pyarrow as pa
import pytest

from cluster_sim.units import lifetime_text
from simhelpers import run_cli

QUIET = ["tracking.enabled=false", "report.figures=false", "debug=default"]


@pytest.mark.parametrize("years,text", [
    (5.0, "5.00 years"), (1.0, "1.00 years"), (0.48, "5.8 months"), (1 / 6, "2.0 months"),
    (30 / 365, "30.0 days"), (1 / 365, "1.0 days"), (0.5 / 365, "12.0 hours"), (0.0, "0.0 hours"),
])
def test_lifetime_text(years, text):
    assert lifetime_text(years) == text


def test_summary_table_prints_short_lifetimes_in_months(tmp_path):
    rc, out, err = run_cli(["hardware.ssd_bytes=100GB", *QUIET], tmp_path)
    assert rc == 0, err
    line = next(ln for ln in out.splitlines() if "SSD lifetime" in ln)
    s = json.loads(next(tmp_path.glob("outputs/*/*/summary.json")).read_text())
    assert s["fleet"]["ssd_lifetime_years"] < 1
    assert "months" in line or "days" in line, line
    assert "0.00 years" not in out


def test_unknown_top_level_key_is_one_line_exit_2(tmp_path):
    rc, out, err = run_cli(["+seedd=3", *QUIET], tmp_path)
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith("cluster-sim: error: seedd: unknown top-level key"), err
    assert not (tmp_path / "outputs").exists()
    rc, _, err = run_cli(["-m", "+seedd=3,4", *QUIET], tmp_path)
    assert rc == 2 and "seedd" in err[0], err
    rc, _, err = run_cli(["+policy.not_a_param=1", *QUIET], tmp_path)   # a section's key: the section's check
    assert rc == 2 and "not_a_param" in err[0], err


def test_argv_is_parsed_by_hydra_flags_keep_their_values():
    from cluster_sim.cli import parse_argv

    args, argv = parse_argv(["policy=lru", "-cd", "my_conf", "-m", "seed=0,1", "-cn", "study"])
    assert args.config_dir == "my_conf" and args.config_name == "study" and args.multirun
    assert args.overrides == ["policy=lru", "seed=0,1"]
    assert argv == ["--multirun", "--config-name", "study", "--config-dir", "my_conf", "policy=lru", "seed=0,1"]


def test_config_dir_and_name_take_effect(tmp_path):
    user = tmp_path / "my_conf"
    (user / "hardware").mkdir(parents=True)
    (user / "hardware" / "mine.yaml").write_text("defaults:\n  - demo\n  - _self_\ndram_bytes: 2GB\n")
    (user / "study.yaml").write_text("defaults:\n  - config\n  - _self_\nseed: 7\n")
    rc, _, err = run_cli(["-cd", str(user), "-cn", "study", "hardware=mine", *QUIET], tmp_path)
    assert rc == 0, err
    s = json.loads(next(tmp_path.glob("outputs/*/*/summary.json")).read_text())
    assert s["config"]["hardware"]["dram_bytes"] == "2GB" and s["config"]["seed"] == 7
    assert s["config"]["hardware"]["ssd_bytes"] == "500GB"          # the rest from the bundled demo
    rc, _, err = run_cli(["hardware=mine", *QUIET], tmp_path)         # without -cd it is not there
    assert rc == 2 and "hardware: unknown option 'mine'" in err[0], err
    rc, _, err = run_cli(["-cd", str(tmp_path / "nope"), *QUIET], tmp_path)
    assert rc == 2 and err == [f"cluster-sim: error: --config-dir: not a folder: {tmp_path / 'nope'}"]
    rc, _, err = run_cli(["--cfg", "bogus"], tmp_path)
    assert rc == 2 and len(err) == 1 and "invalid choice: 'bogus'" in err[0], err


def test_sweep_footer_says_resume_only_when_it_was_on():
    from cluster_sim.sweep import PointResult, SweepOutcome, format_outcome

    o = SweepOutcome("multirun/x", [PointResult(0, ["seed=0"], "FINISHED", "multirun/x/0",
                                                summary={"fleet": {"chunk_miss_ratio": 0.25,
                                                                   "ssd_lifetime_years": 0.5}})])
    head = format_outcome(o).splitlines()[0]
    assert "resume" not in head and "skipped" not in head, head
    assert "lifetime 6.0 months" in format_outcome(o)
    o.resumed = True
    assert "0 skipped (resume)" in format_outcome(o).splitlines()[0]


def test_trace_conversion_says_so_once(tmp_path, monkeypatch, capsys):
    from cluster_sim.trace import cache

    import time

    monkeypatch.setenv("CLUSTER_SIM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(cache, "NOTICE_AFTER_S", 0.05)
    src = tmp_path / "trace.jsonl"
    src.write_text("{}\n")
    table = pa.table({"x": [1, 2, 3]})

    def slow():
        time.sleep(0.5)
        return table

    got = cache.cached_table("test", src, {}, slow, validate=lambda t, p: None)
    assert got.equals(table)
    assert "converting trace.jsonl, once" in capsys.readouterr().err
    cache.cached_table("test", src, {}, slow, validate=lambda t, p: None)     # from the cache now
    assert "converting" not in capsys.readouterr().err
    src.write_text("{}\n{}\n")                                               # a quick conversion: quiet
    cache.cached_table("test", src, {}, lambda: table, validate=lambda t, p: None)
    assert "converting" not in capsys.readouterr().err


def test_compile_time_is_measured_apart():
    import numba                  # a dependency (pyproject.toml)

    from cluster_sim.jit_timing import start

    @numba.njit(cache=False)
    def fresh(x):
        return x * 2 + 1

    t = start()
    assert fresh(3) == 7          # compiled now
    first = t.stop()
    assert first > 0.0
    t = start()
    assert fresh(4) == 9          # already compiled
    assert t.stop() == 0.0
