"""Request-level signals (simulation-model §1): stop reason, think and API time, sub-agent.

Every reader carries them into the canonical table, the chunked trace keeps them per
request, and policies see them in RequestMeta."""
from __future__ import annotations

import json
import math
from dataclasses import asdict

import numpy as np
import pytest

import cluster_sim
from cluster_sim.api import prepare
from cluster_sim.locations import shared_trace
from cluster_sim.config import SimConfig
from cluster_sim.policies.base import RequestMeta
from cluster_sim.policies.lru import LRUPolicy
from cluster_sim.trace.chunks import chunk_trace
from cluster_sim.trace.claude_code import read_claude_code
from cluster_sim.trace.parquet import read_parquet, write_parquet
from cluster_sim.trace.schema import STOP_REASONS, build_table, conform_table, stop_reason_codes, validate_table
from cluster_sim.trace.synthetic import default_spec, generate, spec_from_dict

from simhelpers import trace_from_paths


def _session(sid, reqs):
    return json.dumps({"id": sid, "block_size": 64, "requests": reqs})


def test_claude_code_reader_fills_the_signals(tmp_path):
    f = tmp_path / "s.jsonl"
    f.write_text("\n".join([
        _session("a", [
            {"t": 0.0, "type": "n", "in": 128, "out": 5, "hash_ids": [1, 2], "stop": "tool_use",
             "think_time": 0.0, "api_time": 3.5},
            {"t": 10.0, "type": "subagent", "requests": [
                {"t": 0.0, "type": "n", "in": 64, "out": 1, "hash_ids": [9], "stop": "end_turn", "api_time": 1.0}]},
            {"t": 20.0, "type": "n", "in": 192, "out": 5, "hash_ids": [1, 2, 3], "stop": "end_turn",
             "think_time": 12.5},
        ]),
        _session("b", [{"t": 0.0, "type": "s", "in": 64, "out": 5, "hash_ids": [1], "stop": ""}]),
    ]) + "\n")
    t = read_claude_code(f)
    assert t.column("stop_reason").to_pylist() == ["tool_use", "end_turn", "end_turn", None]
    assert t.column("agent").to_pylist() == [0, 1, 0, 0]
    th = t.column("think_time_s").to_pylist()
    assert th[0] == 0.0 and th[1] is None and th[2] == 12.5
    assert t.column("api_time_s").to_pylist() == [3.5, 1.0, None, None]
    assert stop_reason_codes(t.column("stop_reason")).tolist() == [1, 2, 2, 0]


def test_claude_code_reader_rejects_a_stop_that_is_not_a_string(tmp_path):
    from cluster_sim.errors import TraceError

    f = tmp_path / "s.jsonl"
    f.write_text(_session("a", [{"t": 0.0, "type": "n", "in": 64, "out": 5, "hash_ids": [1], "stop": 7}]) + "\n")
    with pytest.raises(TraceError) as e:
        read_claude_code(f)
    assert "requests[0].stop" in str(e.value)


def test_stop_reason_codes_map_names_and_unknowns():
    codes = stop_reason_codes(["tool_use", "end_turn", "max_tokens", "refusal", "", None, "unknown"])
    assert [STOP_REASONS[c] for c in codes] == ["tool_use", "end_turn", "max_tokens", "other", "unknown",
                                                "unknown", "unknown"]


def test_synthetic_agents_call_tools_until_their_last_turn():
    spec = spec_from_dict(dict(asdict(default_spec()), num_sessions=60, agent_fraction=0.6,
                               subagents_per_agent_turn=0.4))
    t = generate(spec, 5)
    cat = t.column("category").to_pylist()
    stop = t.column("stop_reason").to_pylist()
    agent = np.asarray(t.column("agent").to_pylist())
    sess = np.asarray(t.column("session_id").to_pylist())
    assert set(stop) == {"tool_use", "end_turn"}
    assert all(s == "end_turn" for s, c in zip(stop, cat) if c == "text")
    assert ((agent > 0) == (np.asarray(cat) == "subagent")).all()
    # per conversation (session, agent): tool_use on every turn but the last, which is end_turn
    for key in set(zip(sess.tolist(), agent.tolist())):
        rows = [i for i in range(len(stop)) if (sess[i], agent[i]) == key]
        if cat[rows[0]] == "text":
            continue
        assert [stop[i] for i in rows] == ["tool_use"] * (len(rows) - 1) + ["end_turn"]
    api = np.asarray(t.column("api_time_s").to_pylist())
    out = np.asarray(t.column("output_tokens").to_pylist())
    assert np.allclose(api, out * spec.decode_s_per_token)
    think = np.asarray(t.column("think_time_s").to_pylist())
    assert (think >= 0).all() and (think[np.asarray(t.column("turn").to_pylist()) == 1] == 0).all()


def test_signals_survive_parquet_and_an_older_table_gets_unknowns(tmp_path):
    t = build_table(arrival_s=[0.0, 1.0], input_tokens=[64, 128], output_tokens=[1, 1],
                    block_hashes=[[1], [1, 2]], block_tokens=64, source="t", stop_reason=["tool_use", None],
                    think_time_s=[None, 2.0], api_time_s=[1.5, None], agent=[0, 2])
    validate_table(t)
    write_parquet(t, tmp_path / "t.parquet")
    back = read_parquet(tmp_path / "t.parquet")
    assert back.column("stop_reason").to_pylist() == ["tool_use", None]
    assert back.column("agent").to_pylist() == [0, 2]
    old = t.select(["arrival_s", "request_id", "session_id", "category", "turn", "input_tokens",
                    "output_tokens", "block_hashes"])
    conf = conform_table(old)
    assert conf.column_names == t.column_names
    assert conf.column("stop_reason").null_count == 2 and conf.column("think_time_s").null_count == 2
    tr = chunk_trace(conf, 64)
    assert tr.stop_reason.tolist() == [0, 0] and np.isnan(tr.think_time_s).all() and tr.agent.tolist() == [-1, -1]


@pytest.mark.parametrize("bad", [{"think_time_s": [math.inf, 1.0]}, {"api_time_s": [-1.0, 1.0]}, {"agent": [0, -3]}])
def test_bad_signal_values_are_trace_errors(bad):
    from cluster_sim.errors import TraceError

    t = build_table(arrival_s=[0.0, 1.0], input_tokens=[64, 128], output_tokens=[1, 1],
                    block_hashes=[[1], [1, 2]], block_tokens=64, source="t", **bad)
    with pytest.raises(TraceError) as e:
        validate_table(t, "x.parquet")
    assert e.value.field == next(iter(bad))


class _Recorder(LRUPolicy):
    name = "lru"

    def bind(self, ctx):
        super().bind(ctx)
        self.seen: list[RequestMeta] = []

    def on_access(self, payloads, now, meta):
        super().on_access(payloads, now, meta)
        self.seen.append(meta)


def test_policies_see_the_signals_in_request_meta(monkeypatch):
    import cluster_sim.fleet as fleet

    # the interpreted node calls the policy (the compiled engine runs lru without a policy object)
    cfg = SimConfig.from_mapping(cluster_sim.compose(["workload=synthetic", "+workload.synthetic.num_sessions=30",
                                                      "+workload.synthetic.agent_fraction=0.5", "cache.engine=python"]))
    tr, _, _ = prepare(cfg)
    pol = _Recorder()
    monkeypatch.setattr(fleet, "make_policy", lambda name, params: pol)
    fleet.NodeRunner(tr, cfg, 0).run(np.arange(tr.n_requests))
    seen = pol.seen
    assert len(seen) == tr.n_requests
    assert [m.stop_reason for m in seen] == tr.stop_reason.tolist()
    assert [m.agent for m in seen] == tr.agent.tolist()
    assert np.allclose([m.api_time_s for m in seen], tr.api_time_s)
    assert {m.stop_reason for m in seen} == {1, 2}


def test_mooncake_style_traces_have_unknown_signals():
    tr = trace_from_paths([[1, 2], [1, 3]])
    assert tr.stop_reason.tolist() == [0, 0] and tr.agent.tolist() == [-1, -1]
    assert not RequestMeta(seq=1, arrival_s=0.0, session_id=-1, category=None, turn=0, input_tokens=1,
                           output_tokens=0, path=np.zeros(0, dtype=np.int64), hit_chunks=0,
                           resident_chunks=0).subagent


WEKA = shared_trace("claude_code")


@pytest.mark.extended
@pytest.mark.skipif(not WEKA.exists(), reason=f"real traces are not present at {WEKA.parent.parent}")
def test_the_weka_trace_carries_stop_reasons():
    path = WEKA
    cfg = SimConfig.from_mapping(cluster_sim.compose(["workload=claude_code", f"workload.path={path}"]))
    tr, _, _ = prepare(cfg)
    counts = np.bincount(tr.stop_reason, minlength=len(STOP_REASONS))
    # 42,211 tool_use, 2,793 end_turn and 4,330 empty (unknown) stops in the v8 set
    assert counts[1] == 42211 and counts[2] == 2793 and counts[0] == 4330
    assert (tr.agent > 0).sum() == np.sum(np.asarray(tr.category) == "subagent")
