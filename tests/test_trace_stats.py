"""Trace statistics (``cluster_sim.trace.stats``) and the ``cluster-sim-trace stats`` command."""
from __future__ import annotations

import gzip
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import cluster_sim
from cluster_sim.config import WorkloadConfig
from cluster_sim.errors import ConfigError, TraceError
from cluster_sim.model import ModelSpec
from cluster_sim.trace.chunks import chunk_trace
from cluster_sim.trace.load import apply_filters, read_workload
from cluster_sim.trace.schema import build_table, trace_stats
from cluster_sim.trace.stats import reuse_counts, trace_statistics
from cluster_sim.trace.synthetic import SyntheticSpec, generate
from cluster_sim.trace_cli import main

from conftest import MOONCAKE, SHARED_TRACES, needs_mooncake
from cluster_sim.locations import shared_trace

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACE = ROOT / "traces" / "default.parquet"
CLAUDE_CODE = shared_trace("claude_code")

#: the keys simulation-model.md §10 requires of ``--json`` (plus the ones this project's brief adds)
CONTRACT_KEYS = {
    "requests", "sessions", "span_s", "block_tokens", "block_references", "unique_blocks", "reuse_fraction",
    "duplicates_dropped", "input_tokens_p50", "input_tokens_p90", "input_tokens_p99", "input_tokens_mean",
    "input_tokens_max", "output_tokens_mean", "output_tokens_p50", "full_block_reuse_fraction",
    "inter_arrival_mean_s", "inter_arrival_p50_s", "inter_arrival_p90_s", "inter_arrival_p99_s",
    "tree_max_depth", "tree_mean_depth", "tree_mean_branching", "tree_shared_reference_fraction",
    "tree_sampled", "tree_sample_requests",
}
CHUNK_KEYS = {"chunk_references", "unique_chunks"}
MODEL_KEYS = {"working_set_bytes"}


# --------------------------------------------------------------------------- a hand-built trace
#
# 4-token blocks. Hashes are prefix-chained: 1 -> 2 -> 4, 1 -> 6; 3, 5, 7 are partial tails.
#
#   row  arrival  session  input  full blocks  hashes         new at this row
#   0    0        5        10     2            [1, 2, 3]      1 2 3
#   1    1        5        13     3            [1, 2, 4, 5]   4 5        (1, 2 reused)
#   2    1        -        8      2            [1, 6]         6          (1 reused)
#   3    4        7        3      0            [7]            7
#   4    10       5        12     3            [1, 2, 4]      -          (1, 2, 4 reused)

HAND = dict(
    arrival_s=[0.0, 1.0, 1.0, 4.0, 10.0],
    input_tokens=[10, 13, 8, 3, 12],
    output_tokens=[1, 2, 3, 4, 5],
    block_hashes=[[1, 2, 3], [1, 2, 4, 5], [1, 6], [7], [1, 2, 4]],
    block_tokens=4,
    source="hand",
    session_id=[5, 5, None, 7, 5],
    category=["text", "agent", None, "text", "subagent"],
)

#: a toy model: 10 FA bytes per token; STATE = 1000 bytes + a 10-token window of 3 bytes per token
TOY = ModelSpec(
    name="toy", kv_bytes_per_token_full=10, linear_state_bytes=1000, swa_window=10, swa_kv_bytes_per_token=3,
    flops_per_token=1.0, attn_flops_per_ctx_token=0.0, swa_flops_per_ctx_token=0.0, linear_mix_flops_per_token=0.0,
    n_full_layers=1, n_linear_layers=1, n_swa_layers=1,
)


def hand_table(**over):
    kw = dict(HAND)
    kw.update(over)
    return build_table(**kw)


def test_block_reuse_and_counts_by_hand():
    s = trace_statistics(hand_table())
    assert s["requests"] == 5
    assert s["sessions"] == 2
    assert s["span_s"] == 10.0
    assert s["block_tokens"] == 4
    assert s["block_references"] == 13
    assert s["unique_blocks"] == 7
    assert s["reuse_fraction"] == pytest.approx(6 / 13)
    assert s["unique_token_footprint"] == 28
    # full blocks only: [1 2] [1 2 4] [1 6] [] [1 2 4]
    assert s["full_block_references"] == 10
    assert s["unique_full_blocks"] == 4
    assert s["full_block_reuse_fraction"] == pytest.approx(6 / 10)
    assert s["duplicates_dropped"] == 0
    assert s["categories"] == {"agent": 1, "subagent": 1, "text": 2}


def test_lengths_arrivals_and_sessions_by_hand():
    s = trace_statistics(hand_table())
    assert s["input_tokens_p50"] == 10
    assert s["input_tokens_mean"] == pytest.approx(9.2)
    assert s["input_tokens_max"] == 13
    assert s["input_tokens_p90"] == pytest.approx(np.percentile([10, 13, 8, 3, 12], 90))
    assert s["output_tokens_mean"] == 3
    assert s["output_tokens_p50"] == 3
    # gaps 1, 0, 3, 6
    assert s["inter_arrival_mean_s"] == 2.5
    assert s["inter_arrival_p50_s"] == 2.0
    assert s["inter_arrival_p99_s"] == pytest.approx(np.percentile([1, 0, 3, 6], 99))
    # session 5: rows 0, 1, 4 (gaps 1 and 9); session 7: row 3
    assert s["requests_per_session_mean"] == 2.0
    assert s["requests_per_session_max"] == 3
    assert s["intra_session_gap_p50_s"] == 5.0


def test_chunks_by_hand():
    # 8-token chunks = 2 blocks: row 0 -> [2], row 1 -> [2], row 2 -> [6], row 3 -> [], row 4 -> [2]
    s = trace_statistics(hand_table(), chunk_tokens=8)
    assert s["chunk_tokens"] == 8
    assert s["chunk_references"] == 4
    assert s["unique_chunks"] == 2
    assert s["chunk_reuse_fraction"] == pytest.approx(2 / 4)
    # chunks of one block are the full blocks
    s4 = trace_statistics(hand_table(), chunk_tokens=4)
    assert (s4["chunk_references"], s4["unique_chunks"]) == (10, 4)
    assert s4["chunk_reuse_fraction"] == s4["full_block_reuse_fraction"]


def test_working_set_bytes_by_hand():
    s = trace_statistics(hand_table(), chunk_tokens=4, model=TOY)
    # FA: 4 distinct full chunks x 4 tokens x 10 B
    assert s["working_set_fa_bytes"] == 160
    # one STATE per request with a full chunk, at the end of its last full chunk:
    # rows 0, 2 end at token 8 (1000 + 8*3), rows 1, 4 at token 12 (1000 + 10*3); row 3 has no full chunk
    assert s["working_set_state_bytes"] == 2 * 1024 + 2 * 1030
    assert s["working_set_bytes"] == 160 + 4108
    assert s["model"] == "toy"
    # 8-token chunks: 2 distinct x 80 B; STATE at 8 for rows 0, 1, 2, 4
    s8 = trace_statistics(hand_table(), chunk_tokens=8, model=TOY)
    assert s8["working_set_bytes"] == 2 * 80 + 4 * 1024


def test_working_set_of_a_pure_attention_model_and_auto_chunks():
    t = generate(SyntheticSpec(num_sessions=20, block_tokens=64), 0)
    s = trace_statistics(t, model="llama3_1_70b")  # no --chunk-tokens: auto = 256 for 64-token blocks
    from cluster_sim.model import load_model

    llama = load_model("llama3_1_70b")
    assert s["chunk_tokens"] == 256
    assert s["working_set_state_bytes"] == 0
    assert s["working_set_bytes"] == s["unique_chunks"] * llama.fa_bytes(256)


def test_tree_shape_by_hand():
    # full-block tree: 1 -> {2, 6}, 2 -> {4}; references: 1 x4, 2 x3, 4 x2, 6 x1
    s = trace_statistics(hand_table())
    assert s["tree_chunk_tokens"] == 4
    assert s["tree_sampled"] is False
    assert s["tree_sample_requests"] == 5
    assert s["tree_nodes"] == 4
    assert s["tree_roots"] == 1
    assert s["tree_leaves"] == 2
    assert s["tree_max_depth"] == 3
    assert s["tree_mean_depth"] == pytest.approx((1 + 2 + 2 + 3) / 4)
    assert s["tree_mean_leaf_depth"] == pytest.approx((2 + 3) / 2)
    assert s["tree_internal_nodes"] == 2
    assert s["tree_mean_branching"] == pytest.approx((2 + 1) / 2)
    assert s["tree_shared_reference_fraction"] == pytest.approx(9 / 10)
    # 8-token chunks: two roots (2 and 6), no internal node
    s8 = trace_statistics(hand_table(), chunk_tokens=8)
    assert (s8["tree_nodes"], s8["tree_roots"], s8["tree_max_depth"], s8["tree_mean_branching"]) == (2, 2, 1, 0.0)
    assert s8["tree_shared_reference_fraction"] == pytest.approx(3 / 4)


def test_tree_depths_agree_with_the_chunked_trace():
    t = generate(SyntheticSpec(num_sessions=40, agent_fraction=0.3, subagents_per_agent_turn=0.2), 2)
    s = trace_statistics(t, chunk_tokens=128)
    ct = chunk_trace(t, 128)
    assert s["tree_nodes"] == ct.n_chunks
    assert s["tree_max_depth"] == ct.depth.max()
    assert s["tree_mean_depth"] == pytest.approx(ct.depth.mean())
    children = np.bincount(ct.parent[ct.parent >= 0], minlength=ct.n_chunks)
    assert s["tree_mean_branching"] == pytest.approx(children[children > 0].mean())
    assert s["tree_roots"] == int(np.count_nonzero(ct.parent < 0))


def test_large_trees_are_sampled_by_whole_sessions():
    from cluster_sim.trace.stats import _tree_sample

    t = generate(SyntheticSpec(num_sessions=60, turns_mean=4.0), 3)
    full = trace_statistics(t)
    cap = full["full_block_references"] // 4
    s = trace_statistics(t, max_tree_refs=cap)
    assert s["tree_sampled"] is True and s["tree_sample_unit"] == "session"
    assert 0 < s["tree_sample_chunk_references"] <= cap
    assert s["tree_nodes"] < full["tree_nodes"]
    assert s == trace_statistics(t, max_tree_refs=cap)  # reproducible
    # everything but the tree is exact
    assert {k: v for k, v in s.items() if not k.startswith("tree")} == \
        {k: v for k, v in full.items() if not k.startswith("tree")}
    # the sample holds whole sessions: all of a session's requests, or none
    sid = t.column("session_id").to_numpy()
    lens = t.column("input_tokens").to_numpy().astype(np.int64) // 64
    idx, unit = _tree_sample(lens, sid, cap)
    assert unit == "session" and len(idx) == s["tree_sample_requests"]
    chosen = np.zeros(t.num_rows, dtype=bool)
    chosen[idx] = True
    for k in np.unique(sid):
        assert len(set(chosen[sid == k].tolist())) == 1


def test_sessionless_traces_sample_a_prefix_of_the_replay():
    t = hand_table(session_id=None)
    s = trace_statistics(t, max_tree_refs=5)  # rows 0, 1 have 5 full blocks
    assert s["tree_sampled"] and s["tree_sample_unit"] == "request_prefix"
    assert s["tree_sample_requests"] == 2
    assert (s["tree_nodes"], s["tree_max_depth"]) == (3, 3)


def test_reuse_counts_matches_a_brute_force_count():
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(1, 40))
        values = rng.integers(0, 10, n).astype(np.uint64)
        req = np.sort(rng.integers(0, 8, n))
        first: dict[int, int] = {}
        reused = 0
        for v, r in zip(values.tolist(), req.tolist()):
            if v in first and first[v] < r:
                reused += 1
            first.setdefault(v, r)
        assert reuse_counts(values, req) == (len(first), reused)
    assert reuse_counts(np.zeros(0, np.uint64), np.zeros(0, np.int64)) == (0, 0)


def test_agrees_with_the_schema_helper_and_chunk_trace_on_the_default_trace():
    from cluster_sim.trace.parquet import read_parquet

    t = read_parquet(DEFAULT_TRACE)
    s = trace_statistics(t, chunk_tokens=64)
    old = trace_stats(t)
    for k in ("requests", "sessions", "span_s", "block_references", "unique_blocks", "reuse_fraction",
              "input_tokens_p50", "input_tokens_mean", "output_tokens_mean"):
        assert s[k] == pytest.approx(old[k]), k
    ct = chunk_trace(t, 64)
    assert s["chunk_references"] == s["full_block_references"] == ct.chunk_refs
    assert s["unique_chunks"] == s["unique_full_blocks"] == ct.n_chunks
    assert s["chunk_reuse_fraction"] == pytest.approx(s["full_block_reuse_fraction"])


def test_duplicates_dropped_comes_from_the_schema_metadata():
    t = hand_table()
    meta = dict(t.schema.metadata)
    meta[b"duplicates_dropped"] = b"3"
    assert trace_statistics(t.replace_schema_metadata(meta))["duplicates_dropped"] == 3


def test_empty_table():
    t = build_table(arrival_s=[], input_tokens=[], output_tokens=[], block_hashes=[], block_tokens=16, source="e")
    s = trace_statistics(t, chunk_tokens=16, model=TOY)
    assert s["requests"] == 0 and s["reuse_fraction"] == 0.0 and s["working_set_bytes"] == 0
    assert s["tree_nodes"] == 0
    json.dumps(s, allow_nan=False)


def test_bad_inputs_are_user_errors():
    with pytest.raises(ConfigError) as e:
        trace_statistics(hand_table(), chunk_tokens=6)  # not a multiple of 4
    assert e.value.key == "cache.chunk_tokens"
    with pytest.raises(ConfigError):
        trace_statistics(hand_table(), chunk_tokens=0)
    with pytest.raises(ConfigError) as e:
        trace_statistics(hand_table(), model="no_such_model")
    assert e.value.key == "model"
    with pytest.raises(TraceError, match="full blocks"):
        trace_statistics(hand_table(block_hashes=[[1], [1, 2, 4, 5], [1, 6], [7], [1, 2, 4]]))
    with pytest.raises(TraceError, match="prefix-chained"):  # 2 follows 1 and 6
        trace_statistics(hand_table(block_hashes=[[1, 2, 3], [6, 2, 4, 5], [1, 6], [7], [1, 2, 4]]))


# --------------------------------------------------------------------------- the command


def run_main(capsys, *args):
    rc = main(["stats", *map(str, args)])
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_json_has_the_contract_keys(capsys):
    rc, out, err = run_main(capsys, DEFAULT_TRACE, "--format", "parquet", "--json",
                            "--chunk-tokens", "256", "--model", "qwen3_next_80b_a3b")
    assert rc == 0 and err == ""
    assert len(out.strip().splitlines()) == 1
    s = json.loads(out)
    assert CONTRACT_KEYS | CHUNK_KEYS | MODEL_KEYS <= set(s)
    from cluster_sim.trace.parquet import read_parquet

    assert s == json.loads(json.dumps(trace_statistics(read_parquet(DEFAULT_TRACE), 256, "qwen3_next_80b_a3b")))
    rc, out, _ = run_main(capsys, DEFAULT_TRACE, "--format", "parquet", "--json")
    assert not (CHUNK_KEYS | MODEL_KEYS) & set(json.loads(out))


def test_cli_table_and_limits(capsys):
    rc, out, _ = run_main(capsys, DEFAULT_TRACE, "--format", "parquet", "--limit-requests", "100",
                          "--chunk-tokens", "auto", "--model", "llama3_1_70b")
    assert rc == 0
    assert "reuse fraction" in out and "working set (llama3_1_70b)" in out and "prefix tree" in out
    assert "requests" in out and " 100\n" in out


def test_cli_synthetic_presets_and_options(capsys):
    preset = ROOT / "conf" / "workload" / "synthetic.yaml"
    rc, out, _ = run_main(capsys, preset, "--format", "synthetic", "--json", "--no-tree",
                          "-o", "synthetic.num_sessions=30", "--seed", "4")
    assert rc == 0
    s = json.loads(out)
    assert s["sessions"] == 30 and s["source"] == "synthetic(seed=4)" and "tree_nodes" not in s
    rc, out, _ = run_main(capsys, "default", "--format", "synthetic", "--json", "--no-tree", "--limit-requests", "50")
    assert rc == 0 and json.loads(out)["requests"] == 50


@pytest.mark.parametrize("args,expect", [
    (["nope.jsonl", "--format", "mooncake"], "nope.jsonl"),
    ([str(DEFAULT_TRACE), "--format", "foo"], "--format"),
    ([str(DEFAULT_TRACE), "--format", "parquet", "--chunk-tokens", "100"], "--chunk-tokens"),
    ([str(DEFAULT_TRACE), "--format", "parquet", "--chunk-tokens", "big"], "--chunk-tokens"),
    ([str(DEFAULT_TRACE), "--format", "parquet", "--model", "gpt9"], "--model"),
    ([str(DEFAULT_TRACE), "--format", "parquet", "-o", "novalue"], "KEY=VALUE"),
    ([str(DEFAULT_TRACE), "--format", "parquet", "--limit-requests", "0"], "--limit-requests"),
    ([str(DEFAULT_TRACE)], "--format"),
    (["nope.yaml", "--format", "synthetic"], "nope.yaml"),
])
def test_cli_user_errors_are_one_line_and_status_2(capsys, args, expect):
    rc, out, err = run_main(capsys, *args)
    assert rc == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("cluster-sim-trace: error: ") and expect in lines[0]


def test_cli_help(capsys):
    assert main(["stats", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--chunk-tokens" in out and "--model" in out and "--json" in out
    assert main([]) == 2


def test_cli_malformed_trace_names_file_and_line(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl.gz"
    with gzip.open(bad, "wt") as f:
        f.write('{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}\n')
        f.write('{"timestamp": 5, "input_length": 600, "output_length": 5, "hash_ids": "x"}\n')
    rc, out, err = run_main(capsys, bad, "--format", "mooncake", "--json")
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert f"{bad}:2" in err and "hash_ids" in err


def test_console_script_help_and_exit_status(tmp_path):
    exe = Path(sys.executable).with_name("cluster-sim-trace")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "cluster_sim.trace_cli"]
    r = subprocess.run([*cmd, "stats", "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "--chunk-tokens" in r.stdout and "--model" in r.stdout
    r = subprocess.run([*cmd, "stats", str(tmp_path / "missing.parquet"), "--format", "parquet", "--json"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and "missing.parquet" in r.stderr
    r = subprocess.run([*cmd, "stats", str(DEFAULT_TRACE), "--format", "parquet", "--json", "--no-tree"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and json.loads(r.stdout)["requests"] > 0


# --------------------------------------------------------------------------- the real Mooncake trace


@needs_mooncake
def test_mooncake_stats_match_the_published_ones(capsys):
    rc, out, err = run_main(capsys, MOONCAKE, "--format", "mooncake", "--json", "--chunk-tokens", "512",
                            "--model", "llama3_1_70b")
    assert rc == 0, err
    s = json.loads(out)
    assert CONTRACT_KEYS | CHUNK_KEYS | MODEL_KEYS <= set(s)
    # ../shared/traces/README.md §1
    assert s["requests"] == 12_031
    assert s["sessions"] == 0
    assert s["block_tokens"] == 512
    assert s["block_references"] == 288_500
    assert s["unique_blocks"] == 182_790
    assert round(s["reuse_fraction"], 3) == 0.366
    assert round(s["span_s"]) == 3_537
    assert round(s["inter_arrival_mean_s"], 3) == 0.294
    assert s["inter_arrival_p50_s"] == 0.0
    assert s["input_tokens_p50"] == 6_909
    assert round(s["input_tokens_mean"]) == 12_035
    assert round(s["input_tokens_p99"]) == 85_400  # the README rounds the interpolated 85,400.4 up
    assert s["input_tokens_max"] == 126_195
    assert round(s["output_tokens_mean"]) == 343 and s["output_tokens_p50"] == 350
    assert s["unique_token_footprint"] == 182_790 * 512
    assert s["duplicates_dropped"] == 0
    # 512-token chunks are the full blocks; one shared system block roots the whole tree
    assert (s["chunk_references"], s["unique_chunks"]) == (s["full_block_references"], s["unique_full_blocks"])
    assert s["tree_roots"] == 1 and s["tree_sampled"] is False
    from cluster_sim.model import load_model

    assert s["working_set_bytes"] == s["unique_chunks"] * load_model("llama3_1_70b").fa_bytes(512)


# --------------------------------------------------------------------------- the simulator agrees


_READ_CACHE: dict = {}


def _sim_floor_and_stats(overrides, chunk_tokens):
    """Run the simulator, and compute the statistics of the table it replays.

    The table is what ``load_workload`` gives for the composed workload config
    and root seed: ``apply_filters(read_workload(...))``; the unfiltered read
    is kept across parameters (reading and placing a large trace takes seconds).
    """
    cfg = cluster_sim.compose(overrides)
    summary = cluster_sim.run(cfg, write=False)
    wl = WorkloadConfig.from_mapping(cfg["workload"])
    key = (wl.format, wl.path, repr(sorted(wl.options.items())), cfg["seed"])
    if key not in _READ_CACHE:
        _READ_CACHE.clear()
        _READ_CACHE[key] = read_workload(wl, cfg["seed"])
    table = apply_filters(_READ_CACHE[key], wl)
    return summary, trace_statistics(table, chunk_tokens=chunk_tokens, tree=False)


SIM_UNBOUNDED = ["model=llama3_1_70b", "hardware.hbm_cache_bytes=0", "hardware.ssd_bytes=0",
                 "hardware.dram_bytes=1PB"]


@needs_mooncake
@pytest.mark.parametrize("n", [300, 2500, 12_031])
def test_simulator_floor_equals_full_block_reuse_on_mooncake(n, capsys):
    summary, s = _sim_floor_and_stats(
        ["workload=mooncake", f"workload.path={MOONCAKE}", f"workload.limit_requests={n}",
         "cache.chunk_tokens=512", *SIM_UNBOUNDED], 512)
    assert s["requests"] == summary.fleet["requests"] == n
    assert s["chunk_references"] == s["full_block_references"] == summary.run["counted_chunk_refs"]
    assert summary.fleet["miss_ratio_floor"] == pytest.approx(1 - s["full_block_reuse_fraction"], abs=1e-12)
    assert summary.fleet["chunk_miss_ratio"] == pytest.approx(summary.fleet["miss_ratio_floor"], abs=1e-12)
    # and the command line, on the same first n requests
    rc, out, _ = run_main(capsys, MOONCAKE, "--format", "mooncake", "--json", "--no-tree",
                          "--chunk-tokens", "512", "--limit-requests", n)
    assert rc == 0
    assert json.loads(out)["full_block_reuse_fraction"] == pytest.approx(s["full_block_reuse_fraction"], abs=1e-15)


def _claude_code_ready() -> str | None:
    """Why the Claude Code comparison cannot run yet (None when it can)."""
    if importlib.util.find_spec("cluster_sim.trace.claude_code") is None:
        return "the Claude Code reader (cluster_sim/trace/claude_code.py) is not written yet"
    if not (ROOT / "conf" / "workload" / "claude_code.yaml").exists():
        return "conf/workload/claude_code.yaml does not exist yet"
    if not CLAUDE_CODE.exists():
        return f"real traces are not present at {SHARED_TRACES} (a fresh clone has none; set CLUSTER_SIM_TRACES)"
    return None


@pytest.mark.slow
@pytest.mark.parametrize("n", [200, 1500])
def test_simulator_floor_equals_full_block_reuse_on_claude_code(n):
    why = _claude_code_ready()
    if why:
        pytest.skip(why)
    summary, s = _sim_floor_and_stats(
        ["workload=claude_code", f"workload.path={CLAUDE_CODE}", f"workload.limit_requests={n}",
         "cache.chunk_tokens=64", *SIM_UNBOUNDED], 64)
    assert s["block_tokens"] == 64
    assert s["requests"] == summary.fleet["requests"] == n
    assert s["chunk_references"] == s["full_block_references"] == summary.run["counted_chunk_refs"]
    assert summary.fleet["miss_ratio_floor"] == pytest.approx(1 - s["full_block_reuse_fraction"], abs=1e-12)
