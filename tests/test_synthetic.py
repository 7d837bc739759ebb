"""The seeded synthetic generator and the bundled default trace."""
from __future__ import annotations

import dataclasses
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster_sim.errors import ConfigError
from cluster_sim.trace.parquet import read_parquet
from cluster_sim.trace.schema import CANONICAL_SCHEMA, TRACE_SCHEMA, block_tokens, trace_stats, validate_table
from cluster_sim.trace.synthetic import SyntheticSpec, default_spec, generate, mix64, spec_from_dict, splitmix64

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACE = ROOT / "traces" / "default.parquet"

SMALL = SyntheticSpec(num_sessions=40, turns_mean=4.0, agent_fraction=0.3, max_input_tokens=8192)


def sessions_of(table):
    """session id -> list of (turn, arrival, input, output, hashes), in turn order."""
    out = defaultdict(list)
    cols = [table.column(c).to_pylist() for c in
            ("session_id", "turn", "arrival_s", "input_tokens", "output_tokens", "block_hashes")]
    for sid, turn, arr, n_in, n_out, hashes in zip(*cols):
        out[sid].append((turn, arr, n_in, n_out, hashes))
    for turns in out.values():
        turns.sort()
    return out


def check_prefix_tree(table):
    """Equal hash <=> equal prefix: every hash has one parent and one depth; partial tails are used once."""
    B = block_tokens(table)
    hashes = table.column("block_hashes").combine_chunks()
    values = hashes.flatten().to_numpy()
    counts = pc.list_value_length(hashes).to_numpy().astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    pos = np.arange(len(values)) - np.repeat(offsets[:-1], counts)
    parent = np.where(pos > 0, np.roll(values, 1), np.uint64(0))
    triples = np.unique(np.stack([values, parent, pos.astype(np.uint64)]), axis=1)
    assert triples.shape[1] == np.unique(values).size, "a hash names two different prefixes"

    n_in = table.column("input_tokens").to_numpy()
    np.testing.assert_array_equal(counts, -(-n_in // B))  # full blocks + one partial tail
    with_tail = n_in % B > 0
    tails = values[offsets[1:][with_tail] - 1]
    _, ref_counts = np.unique(values, return_counts=True)
    assert np.unique(tails).size == tails.size
    assert np.all(ref_counts[np.searchsorted(np.unique(values), tails)] == 1), "a partial tail hash was reused"


def check_sessions(table, spec):
    B = spec.block_tokens
    for sid, turns in sessions_of(table).items():
        assert [t[0] for t in turns] == list(range(1, len(turns) + 1))
        for (k, arr0, in0, out0, h0), (_, arr1, in1, _, h1) in zip(turns, turns[1:]):
            assert arr1 > arr0
            assert in1 >= in0 + out0 + 1  # previous prompt + previous output + a new message
            full0 = in0 // B
            # the later turn's hashes extend the earlier turn's full-block hashes
            assert h1[:full0] == h0[:full0], f"session {sid} turn {k + 1} does not extend turn {k}"
            if in0 % B:
                assert h1[full0] != h0[full0], "a filled partial block kept its partial hash"


# --------------------------------------------------------------------------- determinism


def test_same_seed_same_table():
    a = generate(SMALL, 7)
    b = generate(SMALL, 7)
    assert a.equals(b)
    assert a.schema.equals(b.schema, check_metadata=True)


def test_different_seed_different_table():
    a = generate(SMALL, 1)
    b = generate(SMALL, 2)
    assert not a.equals(b)
    assert not set(a.column("block_hashes")[0].as_py()) & set(b.column("block_hashes")[0].as_py())


# --------------------------------------------------------------------------- structure


def test_table_is_canonical_and_sorted():
    t = generate(SMALL, 3)
    validate_table(t, "synthetic")
    assert t.schema.equals(CANONICAL_SCHEMA)
    assert block_tokens(t) == 64
    assert t.schema.metadata[b"source"] == b"synthetic(seed=3)"
    assert t.column("request_id").to_pylist() == list(range(t.num_rows))
    arrival = t.column("arrival_s").to_numpy()
    assert np.all(np.diff(arrival) >= 0)
    assert arrival[0] == 0.0
    assert set(t.column("session_id").to_pylist()) == set(range(SMALL.num_sessions))
    assert set(t.column("category").to_pylist()) == {"text", "agent"}
    assert t.column("input_tokens").to_numpy().max() <= SMALL.max_input_tokens
    assert t.column("turn").null_count == 0


def test_chained_hashes_extend_across_turns():
    t = generate(SMALL, 4)
    check_sessions(t, SMALL)
    check_prefix_tree(t)


def test_shared_system_prompts_give_identical_leading_hashes():
    spec = dataclasses.replace(
        SMALL, num_sessions=60, system_prompts=3, system_prompt_tokens=640, system_prompt_sigma=0.0,
        agent_fraction=0.0,
    )
    t = generate(spec, 5)
    first_turns = {sid: turns[0][4] for sid, turns in sessions_of(t).items()}
    groups = defaultdict(list)
    for sid, h in first_turns.items():
        groups[tuple(h[:10])].append(sid)  # 640 tokens = 10 full system-prompt blocks
    assert 2 <= len(groups) <= 3
    assert max(len(g) for g in groups.values()) > 1
    assert len({h[0] for h in first_turns.values()}) == len(groups)
    # block 11 holds the session's own first message: never shared
    eleventh = [h[10] for h in first_turns.values() if len(h) > 10]
    assert len(set(eleventh)) == len(eleventh)
    # a Zipf-skewed population: the most popular prompt is used most
    assert max(len(g) for g in groups.values()) >= len(first_turns) / 3


def test_cap_ends_sessions_but_keeps_first_turns():
    spec = dataclasses.replace(SMALL, max_input_tokens=1500, turns_mean=10.0)
    t = generate(spec, 6)
    assert t.column("input_tokens").to_numpy().max() <= 1500
    assert set(t.column("session_id").to_pylist()) == set(range(spec.num_sessions))
    check_sessions(t, spec)


@pytest.mark.parametrize("fraction,expected", [(0.0, {"text"}), (1.0, {"agent"})])
def test_agent_fraction(fraction, expected):
    t = generate(dataclasses.replace(SMALL, agent_fraction=fraction), 8)
    assert set(t.column("category").to_pylist()) == expected


def test_mix_is_order_sensitive_and_vectorised():
    a = np.array([1, 2, 3], dtype=np.uint64)
    b = np.array([3, 2, 1], dtype=np.uint64)
    assert mix64(a, b).dtype == np.uint64
    assert mix64(a, b)[0] != mix64(b, a)[0]
    assert np.unique(splitmix64(np.arange(10_000, dtype=np.uint64))).size == 10_000


@settings(max_examples=30, deadline=None, derandomize=True)
@given(
    sessions=st.integers(1, 15),
    block=st.sampled_from([16, 64, 512]),
    turns=st.floats(1.0, 6.0),
    cap=st.integers(2, 6000),
    sys_tokens=st.integers(1, 3000),
    prompts=st.integers(1, 4),
    seed=st.integers(0, 2**32),
)
def test_random_specs_give_valid_consistent_traces(sessions, block, turns, cap, sys_tokens, prompts, seed):
    spec = SyntheticSpec(
        num_sessions=sessions, block_tokens=block, turns_mean=turns, max_input_tokens=cap,
        system_prompt_tokens=sys_tokens, system_prompts=prompts, agent_fraction=0.5, message_tokens=100,
    )
    t = generate(spec, seed)
    validate_table(t, "hypothesis")
    assert t.column("input_tokens").to_numpy().max() <= cap
    check_sessions(t, spec)
    check_prefix_tree(t)


# --------------------------------------------------------------------------- spec validation


@pytest.mark.parametrize("knob,value", [
    ("num_sessions", 0), ("session_rate_per_s", 0.0), ("turns_mean", 0.5), ("think_time_s", -1.0),
    ("block_tokens", 0), ("agent_fraction", 1.5), ("output_tokens", 2.5), ("max_input_tokens", 1),
])
def test_bad_knob_is_a_config_error(knob, value):
    with pytest.raises(ConfigError) as err:
        generate(dataclasses.replace(SMALL, **{knob: value}), 0)
    assert err.value.key == f"workload.synthetic.{knob}"


def test_spec_from_dict():
    assert spec_from_dict({"num_sessions": 5}).num_sessions == 5
    with pytest.raises(ConfigError, match="unknown knob"):
        spec_from_dict({"num_session": 5})


# --------------------------------------------------------------------------- the bundled default trace


def test_default_trace_file_equals_a_fresh_generation():
    assert DEFAULT_TRACE.exists(), "run scripts/make_default_trace.py"
    on_disk = read_parquet(DEFAULT_TRACE)
    fresh = generate(default_spec(), 0)
    assert on_disk.equals(fresh), "traces/default.parquet is stale: rerun scripts/make_default_trace.py"
    assert on_disk.schema.equals(fresh.schema, check_metadata=True)


def test_default_trace_statistics_are_in_range():
    assert DEFAULT_TRACE.stat().st_size < 1_500_000
    s = trace_stats(generate(default_spec(), 0))
    assert 2000 <= s["requests"] <= 3000
    assert 100 <= s["sessions"] <= 1000
    assert 1000 <= s["input_tokens_p50"] <= 9000
    assert 0.6 <= s["reuse_fraction"] <= 0.8


@pytest.mark.parametrize("seed", [-1, None, 1.5])
def test_bad_seed_is_a_config_error(seed):
    with pytest.raises(ConfigError) as err:
        generate(SMALL, seed)
    assert err.value.key == "seed"
