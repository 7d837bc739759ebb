"""The compiled request-step engine (cluster_sim.engine) against the interpreted reference.

Every figure but the ``sim_*`` timings must be identical between ``cache.engine=numba`` and
``cache.engine=python`` for the compiled policies: per request (h, r, latency, TTFT), every
NodeStats counter, the policy's counters and the final residency of every payload, on
generated workloads with random capacities (zero tiers, tiers smaller than one payload that
force trimming), both kinds of model and every checkpoint mode; whole runs through
``cluster_sim.run`` (fleets, epochs); and a whole Mooncake run when the real traces exist.
"""
from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cluster_sim
from cluster_sim.engine import build as engines
from cluster_sim.config import HardwareConfig
from cluster_sim.engine import CompiledNode
from cluster_sim.errors import ConfigError
from cluster_sim.model import load_model
from cluster_sim.node import NodeSim
from cluster_sim.policies.base import make_policy
from conftest import MOONCAKE, needs_mooncake
from simhelpers import assert_runs_identical, branching_paths, trace_from_paths

ROOT = Path(__file__).resolve().parents[1]
MODELS = {"llama3_1_70b": load_model("llama3_1_70b"), "qwen3_next_80b_a3b": load_model("qwen3_next_80b_a3b")}
SCALAR = ("requests", "chunks_requested", "chunk_misses", "prompt_tokens", "recomputed_tokens",
          "recompute_gpu_seconds", "ssd_bytes_written_fa", "ssd_bytes_written_state", "ssd_admissions_fa",
          "ssd_admissions_state", "ssd_admissions_hit_fa", "ssd_admissions_hit_state", "insert_skipped_bytes",
          "first_arrival_s", "last_arrival_s")


def both(trace, model, hw, counted, **kw):
    """Replay ``trace`` on NodeSim and on CompiledNode; returns (python records, python stats,
    python node, numba (h, m, wr), numba stats, numba node)."""
    ref = NodeSim(trace.parent, trace.depth, trace.anchor, trace.flat, trace.chunk_tokens, model, hw,
                  make_policy("lru"))
    recs = []
    for i in range(trace.n_requests):
        s = ref.stats
        before = s.ssd_bytes_written_fa + s.ssd_bytes_written_state
        r = ref.process(trace.path(i), int(trace.input_tokens[i]), float(trace.arrival_s[i]), counted=bool(counted[i]))
        r["wr"] = s.ssd_bytes_written_fa + s.ssd_bytes_written_state - before
        recs.append(r)
    rs = ref.finish()
    cn = CompiledNode(trace.parent, trace.depth, trace.anchor, trace.flat, trace.chunk_tokens, model, hw, "lru", **kw)
    counted = np.asarray(counted, dtype=bool)
    idx = np.arange(trace.n_requests, dtype=np.int64)
    out = []
    for part in np.array_split(idx, 3):          # batches, as the fleet's epochs call it
        out.append(cn.replay(trace, part, counted=counted[part]))
    hm = tuple(np.concatenate(x) for x in zip(*out))
    return recs, rs, ref, hm, cn.finish(), cn


def assert_same(recs, rs, ref, hm, cs, cn):
    h, m, wr, snap, lat, ttft = hm
    assert lat.tolist() == [r["latency"] for r in recs] and ttft.tolist() == [r["ttft"] for r in recs]
    assert snap[-1, :3].tolist() == ref.st.used if len(snap) else True
    assert snap[-1, 3:7].tolist() == [*ref.st.left, ref.st.left_n[2]] if len(snap) else True
    assert h.tolist() == [r["h"] for r in recs]
    assert m.tolist() == [r["m"] for r in recs]
    assert wr.tolist() == [r["wr"] for r in recs]
    for k in SCALAR:
        assert getattr(cs, k) == getattr(rs, k), k
    assert cs.hits == rs.hits
    assert np.asarray(cs.load_latency).tolist() == np.asarray(rs.load_latency).tolist()   # exact floats, in order
    assert np.asarray(cs.ttft).tolist() == np.asarray(rs.ttft).tolist()
    assert cs.policy == rs.policy
    assert np.array_equal(cn.residency(), ref.st.res)


@st.composite
def workloads(draw):
    paths = branching_paths(draw, max_requests=40, max_extension=5)
    model = MODELS[draw(st.sampled_from(sorted(MODELS)))]
    if model.has_state:
        model = dataclasses.replace(model, state_checkpoints=draw(st.sampled_from(
            ["last", "last_and_branch", "every_chunk"])))
    ct = 16
    fab = model.fa_bytes(ct)
    # capacities in FA payloads: 0 (tier absent), fractions (smaller than one payload: trimming), a few
    caps = st.one_of(st.just(0.0), st.sampled_from([0.5, 1.0, 1.5, 2.5]), st.floats(0.0, 12.0))
    hbm, dram, ssd = (int(draw(caps) * fab) for _ in range(3))
    counted = draw(st.lists(st.booleans(), min_size=len(paths), max_size=len(paths)))
    small = draw(st.booleans())
    return paths, model, ct, (hbm, dram, ssd), counted, small


@settings(max_examples=120, deadline=None)
@given(workloads())
def test_compiled_lru_is_the_interpreted_lru(w):
    paths, model, ct, (hbm, dram, ssd), counted, small = w
    tr = trace_from_paths(paths, chunk_tokens=ct, arrivals=np.arange(len(paths)) * 1e-4)
    hw = HardwareConfig.from_mapping({"hbm_cache_bytes": hbm, "dram_bytes": dram, "ssd_bytes": ssd,
                                      "gpu_flops": 1e12})
    kw = {"log_capacity": 4, "heap_capacity": 4} if small else {}     # small: growth on the way
    assert_same(*both(tr, model, hw, counted, **kw))


def test_tiny_tiers_force_trimming_and_demotion_undo_identically():
    # one chunk fits nowhere whole: every tier smaller than an FA payload but the SSD
    model = dataclasses.replace(MODELS["qwen3_next_80b_a3b"], state_checkpoints="every_chunk")
    fab = model.fa_bytes(16)
    paths = [[1, 2, 3], [1, 2, 4, 5], [1, 6], [1, 2, 3, 7, 8], [9], [1, 2, 4]] * 3
    tr = trace_from_paths(paths, chunk_tokens=16)
    hw = HardwareConfig.from_mapping({"hbm_cache_bytes": fab // 2, "dram_bytes": int(1.5 * fab),
                                      "ssd_bytes": 3 * fab})
    recs, rs, ref, hm, cs, cn = both(tr, model, hw, [True] * len(paths))
    assert rs.insert_skipped_bytes > 0                          # the case is exercised
    assert_same(recs, rs, ref, hm, cs, cn)


@pytest.mark.parametrize("over", [
    [],
    ["hardware.hbm_cache_bytes=1GB", "hardware.dram_bytes=4GB", "hardware.ssd_bytes=100GB",
     "model.state_checkpoints=every_chunk"],
    ["fleet=four", "hardware.dram_bytes=8GB"],
    ["model=llama3_1_70b", "hardware.hbm_cache_bytes=0", "hardware.ssd_bytes=0", "hardware.dram_bytes=2GB"],
])
def test_whole_runs_are_identical_on_both_engines(over):
    a = cluster_sim.run(cluster_sim.compose(over + ["cache.engine=python", "output.requests=true"]), write=False)
    b = cluster_sim.run(cluster_sim.compose(over + ["cache.engine=numba", "output.requests=true"]), write=False)
    assert a.run["engine"] == "python" and b.run["engine"] == "numba"
    assert_runs_identical(a, b)


def test_auto_picks_numba_where_the_engine_is_compiled_and_falls_back_where_it_is_not():
    hw = [HardwareConfig.from_mapping({})]
    assert engines.resolve("auto", "lru", hw, False) == "numba"
    assert engines.resolve("python", "lru", hw, False) == "python"
    assert engines.resolve("auto", "gandalf", hw, False) == "numba"                # its default (decision 136)
    assert engines.resolve("auto", "marconi", hw, False) == "numba"                # decision 143
    learned = {"reuse": "learned"}                     # (every policy is compiled in some setting now)
    assert engines.resolve("auto", "gandalf", hw, False, learned) == "python"
    assert engines.resolve("auto", "lru", hw, True) == "numba"                   # fleet.sync=kv_events (160)
    greedy = [HardwareConfig.from_mapping({"ssd": {"ftl": "greedy"}})]
    assert engines.resolve("auto", "lru", greedy, False) == "numba"                # decision 159
    assert engines.resolve("numba", "gandalf", greedy, False) == "numba"
    with pytest.raises(ConfigError, match="cache.engine"):
        engines.resolve("numba", "gandalf", hw, False, learned)


def test_a_run_under_auto_says_which_engine_ran():
    s = cluster_sim.run(cluster_sim.compose(["debug=default", "policy=gandalf", "policy.reuse=learned"]),
                        write=False)
    assert s.run["engine"] == "python"
    s = cluster_sim.run(cluster_sim.compose(["debug=default"]), write=False)
    assert s.run["engine"] == "numba"


@pytest.mark.parametrize("arg", ["cache.engine=numba policy=gandalf policy.reuse=learned", "cache.engine=fast"])
def test_engine_errors_are_one_line_exit_2(arg, tmp_path):
    p = subprocess.run([sys.executable, "-m", "cluster_sim.cli", *arg.split(), "debug=default",
                        "tracking.enabled=false", f"output.dir={tmp_path}"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "cache.engine" in lines[0] and "Traceback" not in p.stderr


def test_the_engine_setting_moves_no_config_hash():
    from cluster_sim.tracking import config_hash
    a = cluster_sim.compose(["cache.engine=python"])
    b = cluster_sim.compose(["cache.engine=numba"])
    assert a["cache"]["engine"] != b["cache"]["engine"]
    assert config_hash(a) == config_hash(b)


def test_compile_notice_is_one_line_and_only_when_not_cached(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(engines, "_cached", lambda settings=None: False)
    # the set looks unbuilt to this process (its record elsewhere), whatever another test built
    monkeypatch.setattr(engines, "_built_path", lambda k: tmp_path / f"{k.name}.ok")
    note = engines.compile_notice([("lru", None)])
    assert note and "\n" not in note and "once per install" in note and " s)" in note and "lru" in note
    monkeypatch.setattr(engines, "_READY", set())
    engines.ensure_compiled(settings=[("lru", None)])
    err = capsys.readouterr().err
    assert err.strip() == note
    monkeypatch.setattr(engines, "_cached", lambda settings=None: True)
    assert engines.compile_notice() is None


def test_state_is_within_200_bytes_per_tracked_chunk():
    from cluster_sim.api import prepare
    from cluster_sim.config import SimConfig
    c = SimConfig.from_mapping(cluster_sim.compose([]))
    tr, _, _ = prepare(c)
    cn = CompiledNode(tr.parent, tr.depth, tr.anchor, tr.flat, tr.chunk_tokens, c.model, c.hardware, "lru")
    cn.replay(tr, np.arange(tr.n_requests))
    b = cn.state_bytes()
    per = (b["per_chunk_arrays"] + b["chunk_table"] + b["touch_log"] + b["heaps"]) / b["chunks"]
    assert per <= 200, b


@needs_mooncake
@pytest.mark.extended
def test_whole_mooncake_run_is_identical_on_both_engines():
    over = ["workload=mooncake", f"workload.path={MOONCAKE}", "cache.chunk_tokens=512",
            "hardware.dram_bytes=26GB", "hardware.ssd_bytes=263GB"]
    a = cluster_sim.run(cluster_sim.compose(over + ["cache.engine=python", "output.requests=true"]), write=False)
    b = cluster_sim.run(cluster_sim.compose(over + ["cache.engine=numba", "output.requests=true"]), write=False)
    assert {k: v for k, v in a.fleet.items() if not k.startswith("sim_")} == \
        {k: v for k, v in b.fleet.items() if not k.startswith("sim_")}
    assert a.epoch_table.equals(b.epoch_table)


def test_a_small_first_run_runs_interpreted_until_the_kernels_are_built(monkeypatch, capsys):
    """Decision 120: under auto, a run of at most $CLUSTER_SIM_SMALL_RUN_REFS chunk references does
    not wait for the compiler while nothing is built; it says so, and its results are the compiled
    engine's. A larger run, or cache.engine=numba, takes the compiled engine."""
    over = ["tracking.enabled=false", "report.figures=false", "output.requests=true"]
    b = cluster_sim.run(cluster_sim.compose(over + ["cache.engine=numba"]), write=False)
    refs = b.run["counted_chunk_refs"]
    monkeypatch.setattr(engines, "_cached", lambda settings=None: False)
    monkeypatch.setattr(engines, "_READY", set())
    monkeypatch.setenv(engines.SMALL_RUN_ENV, str(10 * refs))
    capsys.readouterr()
    a = cluster_sim.run(cluster_sim.compose(over), write=False)
    err = capsys.readouterr().err.strip().splitlines()
    assert a.run["engine"] == "python"
    assert len(err) == 1 and "runs interpreted, with the same results" in err[0]
    assert_runs_identical(a, b)
    fleet = cluster_sim.run(cluster_sim.compose(over + ["fleet=four"]), write=False)
    assert fleet.run["engine"] == "python"              # every node of a fleet alike
    monkeypatch.setenv(engines.SMALL_RUN_ENV, "10")       # larger than the limit: compiled
    assert cluster_sim.run(cluster_sim.compose(over), write=False).run["engine"] == "numba"
    monkeypatch.setattr(engines, "_READY", set())
    monkeypatch.setenv(engines.SMALL_RUN_ENV, "0")        # 0: never interpreted for speed
    assert cluster_sim.run(cluster_sim.compose(over), write=False).run["engine"] == "numba"


@pytest.mark.parametrize("bad", ["many", "-3", "1.5"])
def test_a_bad_small_run_limit_is_one_line_naming_the_variable(monkeypatch, bad):
    monkeypatch.setenv(engines.SMALL_RUN_ENV, bad)
    with pytest.raises(ConfigError, match="CLUSTER_SIM_SMALL_RUN_REFS.*non-negative whole number"):
        engines.small_run_limit()


def test_the_kernel_digest_follows_every_kernel_source_not_only_the_engines(tmp_path):
    # numba keys a function's cache on its own file: a change in the Gandalf kernels' file alone
    # must still change what the engine's build is recorded against (decision 138)
    for rel in engines.KERNEL_SOURCES:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(f"# {rel}\n")
    before = engines.kernel_digest(tmp_path)
    assert engines.kernel_digest(tmp_path) == before
    (tmp_path / "policies/_gandalf_jit.py").write_text("# policies/_gandalf_jit.py, edited\n")
    assert engines.kernel_digest(tmp_path) != before
    assert "policies/_gandalf_jit.py" in engines.KERNEL_SOURCES and "cache/state.py" in engines.KERNEL_SOURCES
    assert len(engines.kernel_digest()) == 40          # the installed sources hash without error


def test_a_build_of_other_sources_is_removed_and_only_the_kernel_modules_files(tmp_path):
    eng, pol = tmp_path / "engine", tmp_path / "policies"
    eng.mkdir(), pol.mkdir()
    kept = [eng / "other.f-1.py311.nbi", pol / "gandalf.g-2.py311.nbc", eng / "_jit.py"]
    stale = [eng / "_jit.replay-3138.py311.nbi", eng / "_jit.replay-3138.py311.1.nbc",
             pol / "_gandalf_jit.select_dram-600.py311.nbi", pol / "_reuse_jit.tick-10.py311.2.nbc"]
    for f in kept + stale:
        f.write_text("x")
    dirs = {"_jit": eng, "_gandalf_jit": pol, "_reuse_jit": pol}
    assert engines.remove_stale_kernels(dirs, "abc", "abc") == []           # same sources: kept
    assert all(f.exists() for f in kept + stale)
    gone = engines.remove_stale_kernels(dirs, "abc", "def")
    assert sorted(gone) == sorted(stale)
    assert not any(f.exists() for f in stale) and all(f.exists() for f in kept)
    assert sorted(engines.remove_stale_kernels(dirs, None, "def")) == []     # nothing left to remove


def test_a_build_recorded_against_other_sources_counts_as_not_built(tmp_path, monkeypatch):
    lru = [("lru", None)]                                # one set is enough (every set shares the record)
    engines.ensure_compiled(settings=lru)
    assert engines.compile_notice(lru) is None           # built, from these sources
    fake = tmp_path / "digest.sha1"
    fake.write_text("0" * 40 + "\n")
    monkeypatch.setattr(engines, "digest_path", lambda: fake)
    assert engines.compile_notice(lru) is not None       # a run would rebuild (with the notice)
    fake.write_text(engines.kernel_digest() + "\n")
    assert engines.compile_notice(lru) is None


@pytest.mark.skipif(sys.platform == "win32", reason="the build lock is flock (POSIX); Windows builds per process")
def test_a_process_waits_for_another_processs_build_then_loads_it():
    # while one process holds a kernel set's lock exclusively (building it), ensure_compiled of that
    # set in another process waits; once the lock is released it loads the kernels and ends. (The
    # set's lock, not the cache's: that one other builds hold shared, so taking it would wait for them.)
    import fcntl
    import time
    engines.ensure_compiled(settings=[("lru", None)])
    with open(engines.set_lock_path(engines.kernels_of("lru").name), "a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        p = subprocess.Popen([sys.executable, "-c", "from cluster_sim.engine import ensure_compiled as e; "
                              "e(settings=[('lru', None)]); print('ready')"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(8)
        assert p.poll() is None, p.communicate()
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0 and out.strip() == "ready", err


def test_a_runs_jit_compile_s_counts_the_build_it_waited_for(monkeypatch, tmp_path):
    # a set that is not built yet: the run builds it (here a stand-in build of 0.3 s) before its
    # clock starts, and says so in run.jit_compile_s; a second run, the set built, counts nothing
    import time as _t
    engines.ensure_compiled(settings=[("lru", None)])          # the real kernels, loaded
    monkeypatch.setattr(engines, "_READY", set())
    monkeypatch.setattr(engines, "_built_path", lambda k: tmp_path / f"{k.name}.ok")
    real = engines._warm_up
    monkeypatch.setattr(engines, "_warm_up", lambda *a: (_t.sleep(0.3), real(*a)))
    cfg = cluster_sim.compose(["debug=default", "cache.engine=numba", "tracking.enabled=false"])
    first = cluster_sim.run(cfg, write=False)
    assert first.run["engine"] == "numba" and first.run["jit_compile_s"] >= 0.3
    second = cluster_sim.run(cfg, write=False)
    assert second.run["jit_compile_s"] < 0.3
