"""The Claude Code session reader and session placement: fixtures, malformed input, the real WEKA trace."""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from cluster_sim.config import WorkloadConfig
from cluster_sim.locations import shared_trace, traces_root
from cluster_sim.errors import ConfigError, TraceError
from cluster_sim.trace.claude_code import read_claude_code
from cluster_sim.trace.load import load_workload, read_workload
from cluster_sim.trace.placement import (
    Placement, lane_starts, place_sessions, placement_from_options, poisson_starts, session_durations,
)
from cluster_sim.trace.schema import CANONICAL_SCHEMA, TRACE_SCHEMA, block_tokens, trace_stats, validate_table

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SMALL = FIXTURES / "claude_code_small.jsonl"
SESSION_DIR = FIXTURES / "claude_code_sessions"
AZURE_SMALL = FIXTURES / "azure_small.csv"
SHARED_TRACES = traces_root()
WEKA = shared_trace("claude_code")
AZURE_CONV = shared_trace("azure")

NS = 1 << 32  # session k's local ids live in ((k + 1) << 32) | id


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CLUSTER_SIM_CACHE", str(tmp_path_factory.mktemp("cache")))


def wl(path, **options) -> WorkloadConfig:
    return WorkloadConfig.from_mapping({"format": "claude_code", "path": str(path), **options})


def meta(table: pa.Table, key: str) -> str:
    return table.schema.metadata[key.encode()].decode()


# --------------------------------------------------------------------------- #
# the committed fixture: flattening, categories, duplicates, scopes


def test_fixture_unplaced_table():
    t = read_claude_code(SMALL)
    validate_table(t.select(TRACE_SCHEMA.names).slice(0, 8), "session a")  # one session is a valid trace
    assert t.schema.names[:12] == CANONICAL_SCHEMA.names and t.schema.names[12:] == ["model"]
    assert block_tokens(t) == 64
    assert meta(t, "duplicates_dropped") == "2"
    assert json.loads(meta(t, "session_names")) == ["sess_a", "sess_b", "sess_c"]
    assert json.loads(meta(t, "session_end_s")) == [44.5, 251.0, 1.5]
    assert meta(t, "hash_id_scope") == "mixed"
    assert t.column("session_id").to_pylist() == [0] * 8 + [1] * 4 + [2] * 2
    assert t.column("turn").to_pylist() == list(range(1, 9)) + [1, 2, 3, 4] + [1, 2]

    a = t.slice(0, 8)
    # sub-agent requests at parent t + child t (nested twice: 10 + 4 + 1), sorted stably by time:
    # the sub-agent's request at 13 was earlier in the file than the top-level one at 13
    assert a.column("arrival_s").to_pylist() == [0.0, 5.0, 10.0, 13.0, 13.0, 15.0, 30.0, 40.0]
    assert a.column("input_tokens").to_pylist() == [130, 200, 64, 128, 256, 64, 192, 300]
    assert a.column("category").to_pylist() == ["agent", "agent", "subagent", "subagent", "agent",
                                                "subagent", "subagent", "agent"]
    assert a.column("model").to_pylist() == ["m-opus", "m-opus", "m-haiku", "m-haiku", "m-opus", "m-haiku",
                                             "m-haiku", "m-opus"]
    hashes = a.column("block_hashes").to_pylist()
    assert hashes[0] == [NS + 1, NS + 2]
    assert hashes[5] == [NS + 9]                          # the nested sub-agent shares the session namespace
    assert hashes[6] == [NS + 1, NS + 7, NS + 8]

    b = t.slice(8, 4)
    # n -> s with equal hashes but a different 'in' (a keep-alive) is kept; s -> n identical is dropped;
    # the following s is not paired with the dropped n (pairs are disjoint)
    assert b.column("arrival_s").to_pylist() == [0.0, 240.0, 250.0, 251.0]
    assert b.column("input_tokens").to_pylist() == [150, 164, 200, 200]
    assert b.column("block_hashes").to_pylist()[0] == [2 * NS + 1, 2 * NS + 2]

    c = t.slice(12, 2)
    assert c.column("block_hashes").to_pylist() == [[1, 2], [1, 2, 6]]   # global scope: kept as is
    assert c.column("model").to_pylist() == [None, None]


def test_local_ids_never_collide_across_sessions_and_global_scope_keeps_them():
    loc = read_claude_code(SMALL, hash_id_scope_override="local")
    glob = read_claude_code(SMALL, hash_id_scope_override="global")
    assert meta(loc, "hash_id_scope") == "local" and meta(glob, "hash_id_scope") == "global"
    per_session = {}
    for s, h in zip(loc.column("session_id").to_pylist(), loc.column("block_hashes").to_pylist()):
        per_session.setdefault(s, set()).update(h)
    assert not (per_session[0] & per_session[1]) and not (per_session[1] & per_session[2])
    assert all(x >> 32 == s + 1 for s, ids in per_session.items() for x in ids)
    # the same ids under global scope: sessions share blocks 1 and 2
    g = glob.column("block_hashes").to_pylist()
    assert g[0] == [1, 2] and g[8] == [1, 2] and g[12] == [1, 2]
    assert trace_stats(glob)["unique_blocks"] < trace_stats(loc)["unique_blocks"]


def test_duplicate_pair_alone(tmp_path):
    reqs = [{"t": 0, "type": "s", "in": 64, "out": 1, "hash_ids": [3]},
            {"t": 0, "type": "n", "in": 64, "out": 1, "hash_ids": [3]},   # dropped
            {"t": 1, "type": "n", "in": 64, "out": 1, "hash_ids": [3]},   # n -> n: kept
            {"t": 2, "type": "subagent", "requests": [{"t": 0, "type": "s", "in": 64, "out": 1, "hash_ids": [3]}]},
            {"t": 3, "type": "n", "in": 64, "out": 1, "hash_ids": [3]}]   # after a sub-agent: not adjacent
    p = tmp_path / "d.jsonl"
    p.write_text(json.dumps({"id": "x", "requests": reqs}) + "\n")
    t = read_claude_code(p)
    assert meta(t, "duplicates_dropped") == "1"
    assert t.num_rows == 4
    assert t.column("category").to_pylist() == ["agent", "agent", "subagent", "agent"]


def test_directory_of_session_files_equals_jsonl_lines():
    d = read_claude_code(SESSION_DIR)
    j = read_claude_code(SMALL)
    assert d.num_rows == 12
    assert d.select(TRACE_SCHEMA.names).equals(j.select(TRACE_SCHEMA.names).slice(0, 12))
    assert meta(d, "duplicates_dropped") == "2"
    assert json.loads(meta(d, "session_names")) == ["sess_a", "sess_b"]


def test_gzip_and_blank_lines(tmp_path):
    lines = SMALL.read_text().splitlines()
    p = tmp_path / "s.jsonl.gz"
    p.write_bytes(gzip.compress(("\n".join([lines[0], "", lines[1], "   ", lines[2]]) + "\n").encode()))
    t = read_claude_code(p)
    assert t.select(TRACE_SCHEMA.names).equals(read_claude_code(SMALL).select(TRACE_SCHEMA.names))


def test_empty_file_and_empty_session(tmp_path):
    e = tmp_path / "e.jsonl"
    e.write_text("")
    assert read_claude_code(e).num_rows == 0
    p = tmp_path / "s.jsonl"
    p.write_text('{"id": "a", "requests": []}\n{"id": "b", "requests": [{"t": 0, "type": "n", "in": 1, '
                 '"out": 1, "hash_ids": []}]}\n')
    t = read_claude_code(p)
    assert t.column("session_id").to_pylist() == [1]
    assert meta(t, "sessions") == "2"
    assert t.column("block_hashes").to_pylist() == [[]]


# --------------------------------------------------------------------------- #
# malformed input: file, 1-based line and field path, never a silent skip

GOOD = {"id": "g", "requests": [{"t": 0, "type": "n", "in": 128, "out": 1, "hash_ids": [1, 2]}]}


def _req(**kw):
    r = {"t": 1.0, "type": "s", "in": 128, "out": 2, "hash_ids": [1, 2]}
    r.update(kw)
    return {k: v for k, v in r.items() if v is not _DROP}


_DROP = object()


def _session(*reqs, **extra):
    return json.dumps({"id": "bad", "block_size": 64, "hash_id_scope": "local", "requests": list(reqs), **extra})


def _sub(t, *reqs):
    return {"t": t, "type": "subagent", "requests": list(reqs)}


MALFORMED = [
    ("truncated", _session(_req(), _req(t=2.0))[:-25], None, "truncated JSON"),
    ("not-json", "{nope}", None, "invalid JSON"),
    ("array-line", "[1, 2]", None, "session object"),
    ("missing-requests", json.dumps({"id": "x"}), "requests", "missing"),
    ("requests-not-list", json.dumps({"id": "x", "requests": {"t": 0}}), "requests", "list"),
    ("missing-hash-ids", _session(_req(), _req(t=2.0, hash_ids=_DROP)), "requests[1].hash_ids", "missing"),
    ("nested-missing-hash-ids", _session(_req(), _sub(3.0, _req(t=0.0), _req(hash_ids=_DROP))),
     "requests[1].requests[1].hash_ids", "missing"),
    ("negative-in", _session(_req(**{"in": -5})), "requests[0].in", ">= 0"),
    ("negative-out", _session(_req(), _sub(2.0, _req(out=-1))), "requests[1].requests[0].out", ">= 0"),
    ("in-float", _session(_req(**{"in": 12.5})), "requests[0].in", "integer"),
    ("in-string", _session(_req(**{"in": "128"})), "requests[0].in", "integer"),
    ("in-bool", _session(_req(**{"in": True})), "requests[0].in", "integer"),
    ("t-decreases", _session(_req(t=5.0), _req(t=4.0)), "requests[1].t", "decreases"),
    ("nested-t-decreases", _session(_req(), _sub(2.0, _req(t=3.0), _req(t=1.0))), "requests[1].requests[1].t",
     "decreases"),
    ("subagent-t-decreases", _session(_req(t=5.0), _sub(2.0, _req(t=0.0))), "requests[1].t", "decreases"),
    ("t-string", _session(_req(), _sub(2.0, _req(t="soon"))), "requests[1].requests[0].t", "number"),
    ("t-negative", _session(_req(t=-1.0)), "requests[0].t", ">= 0"),
    ("t-missing", _session(_req(t=_DROP)), "requests[0].t", "missing"),
    ("deep-field-path", _session(*[_req(t=float(i)) for i in range(12)],
                                 _sub(12.0, *[_req(t=float(i)) for i in range(3)], _req(t=5.0, hash_ids="x"))),
     "requests[12].requests[3].hash_ids", "list"),
    ("type-missing", _session(_req(type=_DROP)), "requests[0].type", "missing"),
    ("type-int", _session(_req(type=3)), "requests[0].type", "string"),
    ("subagent-without-requests", _session({"t": 0, "type": "subagent"}), "requests[0].requests", "missing"),
    ("request-not-object", _session(_req(), 7), "requests[1]", "request object"),
    ("hash-ids-string", _session(_req(hash_ids="1,2")), "requests[0].hash_ids", "list"),
    ("hash-id-float", _session(_req(hash_ids=[1, 2.5])), "requests[0].hash_ids", "index 1"),
    ("hash-id-bool", _session(_req(hash_ids=[1, True])), "requests[0].hash_ids", "index 1"),
    ("hash-id-null", _session(_req(hash_ids=[None, 2])), "requests[0].hash_ids", "index 0"),
    ("hash-id-negative", _session(_req(hash_ids=[1, -2])), "requests[0].hash_ids", "negative"),
    ("too-few-hashes", _session(_req(**{"in": 200}, hash_ids=[1, 2])), "requests[0].hash_ids", "at least 3"),
    ("local-id-too-big", _session(_req(hash_ids=[1, 2**32])), "requests[0].hash_ids", "32 bits"),
    ("model-not-string", _session(_req(model=5)), "requests[0].model", "string"),
    ("api-time-negative", _session(_req(api_time=-2)), "requests[0].api_time", ">= 0"),
    ("bad-scope", _session(_req(), hash_id_scope="world"), "hash_id_scope", "local, global"),
    ("bad-block-size", _session(_req(), block_size="64"), "block_size", "positive integer"),
    ("other-block-size", _session(_req(), block_size=16), "block_size", "differs"),
]


@pytest.mark.parametrize("case,line,field,fragment", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_line_names_file_line_field(tmp_path, case, line, field, fragment):
    p = tmp_path / "bad.jsonl"
    p.write_text(json.dumps(GOOD) + "\n" + line + "\n" + json.dumps(GOOD) + "\n")
    with pytest.raises(TraceError) as ei:
        read_claude_code(p)
    e = ei.value
    assert e.path == str(p) and e.line == 2
    if field is not None:
        assert e.field == field
        assert f"field '{field}'" in str(e)
    assert f"bad.jsonl:2" in str(e)
    assert fragment in str(e), str(e)


def test_malformed_in_directory_names_the_file(tmp_path):
    d = tmp_path / "sessions"
    d.mkdir()
    (d / "trace_0001.json").write_text(json.dumps(GOOD))
    (d / "trace_0002.json").write_text(_session(_req(), _sub(2.0, _req(t=3.0), _req(t=1.0))))
    with pytest.raises(TraceError) as ei:
        read_claude_code(d)
    assert ei.value.path == str(d / "trace_0002.json") and ei.value.line == 1
    assert ei.value.field == "requests[1].requests[1].t"
    # a JSON error in a pretty-printed file names the line the parser stopped at
    (d / "trace_0002.json").write_text('{\n  "id": "x",\n  "requests": [\n    {"t": 0,,}\n  ]\n}\n')
    with pytest.raises(TraceError) as ei:
        read_claude_code(d)
    assert ei.value.line == 4
    empty = tmp_path / "none"
    empty.mkdir()
    with pytest.raises(TraceError, match="no session files"):
        read_claude_code(empty)


def test_truncated_gzip_and_missing_file(tmp_path):
    data = gzip.compress(SMALL.read_bytes())
    p = tmp_path / "cut.jsonl.gz"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceError, match="gzip"):
        read_claude_code(p)
    with pytest.raises(TraceError, match="no such file"):
        read_claude_code(tmp_path / "absent.jsonl")
    with pytest.raises(ConfigError, match="hash_id_scope_override"):
        read_claude_code(SMALL, hash_id_scope_override="galactic")


def test_cli_malformed_trace_exits_2_with_one_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(GOOD) + "\n" + _session(_req(), _sub(2.0, _req(t=3.0), _req(t=1.0))) + "\n")
    env = dict(os.environ, CLUSTER_SIM_CACHE=str(tmp_path / "cache"))
    p = subprocess.run([sys.executable, "-m", "cluster_sim.cli", "workload=claude_code", f"workload.path={bad}"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert "bad.jsonl:2" in lines[0] and "requests[1].requests[1].t" in lines[0] and "Traceback" not in p.stderr


# --------------------------------------------------------------------------- #
# placement


def test_placed_table_is_canonical_and_merged_in_arrival_order():
    t = read_workload(wl(SMALL, placement="poisson", session_rate_per_s=0.01), seed=3)
    validate_table(t, "placed")
    assert t.schema.names[:12] == CANONICAL_SCHEMA.names and t.schema.names[12] == "model"
    assert t.column("request_id").to_pylist() == list(range(14))
    arr = np.asarray(t.column("arrival_s"))
    assert np.all(np.diff(arr) >= 0)
    rec = json.loads(meta(t, "placement"))
    assert rec == {"placement": "poisson", "session_rate_per_s": 0.01, "seed": 3, "sessions": 3}
    starts = poisson_starts(3, 0.01, 3)
    unplaced = read_claude_code(SMALL)
    for s in range(3):
        rows = t.filter(pa.compute.equal(t.column("session_id"), s))
        u = unplaced.filter(pa.compute.equal(unplaced.column("session_id"), s))
        assert rows.column("turn").to_pylist() == list(range(1, u.num_rows + 1))   # turn order kept
        assert np.allclose(np.asarray(rows.column("arrival_s")), starts[s] + np.asarray(u.column("arrival_s")))
        assert rows.column("block_hashes").equals(u.column("block_hashes"))


def test_poisson_placement_is_seeded_and_has_the_rate():
    a, b, c = poisson_starts(20000, 0.2, 7), poisson_starts(20000, 0.2, 7), poisson_starts(20000, 0.2, 8)
    assert a[0] == 0.0 and np.array_equal(a, b) and not np.array_equal(a, c)
    rate = (len(a) - 1) / a[-1]
    assert rate == pytest.approx(0.2, rel=0.03)
    t1 = read_workload(wl(SMALL), seed=1)
    t2 = read_workload(wl(SMALL), seed=1)
    assert t1.equals(t2) and json.loads(meta(t1, "placement"))["session_rate_per_s"] == 0.2


def test_lane_placement_never_overlaps_within_a_lane():
    rng = np.random.default_rng(0)
    dur = rng.exponential(100.0, 500)
    starts, lane = lane_starts(dur, 7, gap_s=2.0)
    assert set(lane) == set(range(7)) and np.all(starts[:7] == 0.0)
    for k in range(7):
        idx = np.flatnonzero(lane == k)
        assert np.all(starts[idx][1:] >= starts[idx][:-1] + dur[idx][:-1] + 2.0 - 1e-9)
        assert np.allclose(starts[idx][1:], starts[idx][:-1] + dur[idx][:-1] + 2.0)  # back to back
    # at any moment at most 7 sessions run
    events = sorted([(s, 1) for s in starts] + [(s + d, -1) for s, d in zip(starts, dur)], key=lambda e: (e[0], e[1]))
    assert max(np.cumsum([e[1] for e in events])) <= 7


def test_lane_placement_of_the_fixture():
    t = read_workload(wl(SMALL, placement="lanes", lanes=2, lane_gap_s=1.0), seed=0)
    rec = json.loads(meta(t, "placement"))
    assert rec == {"placement": "lanes", "lanes": 2, "lane_gap_s": 1.0, "sessions": 3}
    # sessions a and b start at 0 on lanes 0 and 1; c follows a (ends at 44.5) after the 1 s gap
    first = {}
    for s, a in zip(t.column("session_id").to_pylist(), t.column("arrival_s").to_pylist()):
        first.setdefault(s, a)
    assert first == {0: 0.0, 1: 0.0, 2: 45.5}
    assert np.array_equal(session_durations(read_claude_code(SMALL)), [44.5, 251.0, 1.5])


def test_arrival_placement_uses_the_kth_arrival(tmp_path):
    t = read_workload(wl(SMALL, placement="arrivals", arrivals=str(AZURE_SMALL)), seed=0)
    first = {}
    for s, a in zip(t.column("session_id").to_pylist(), t.column("arrival_s").to_pylist()):
        first.setdefault(s, a)
    assert first[0] == 0.0
    assert first[1] == pytest.approx(4.314579)
    assert first[2] == pytest.approx(4.314579)
    rec = json.loads(meta(t, "placement"))
    assert rec["placement"] == "arrivals" and rec["arrivals_available"] == 5 and len(rec["arrivals_sha256"]) == 64
    short = tmp_path / "two.csv"
    short.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.0,1,1\n2023-11-16 18:15:47.0,1,1\n")
    with pytest.raises(ConfigError) as ei:
        read_workload(wl(SMALL, placement="arrivals", arrivals=str(short)), seed=0)
    assert ei.value.key == "workload.arrivals" and "2 arrivals" in str(ei.value) and "3 sessions" in str(ei.value)
    with pytest.raises(ConfigError, match="workload.arrivals"):
        read_workload(wl(SMALL, placement="arrivals", arrivals=str(tmp_path / "none.csv")), seed=0)


@pytest.mark.parametrize("options,key", [
    ({"placement": "random"}, "workload.placement"),
    ({"placement": "lanes"}, "workload.lanes"),
    ({"placement": "lanes", "lanes": 0}, "workload.lanes"),
    ({"placement": "lanes", "lanes": 2.5}, "workload.lanes"),
    ({"placement": "poisson", "lanes": 3}, "workload.lanes"),
    ({"placement": "arrivals"}, "workload.arrivals"),
    ({"placement": "poisson", "arrivals": "x.csv"}, "workload.arrivals"),
    ({"session_rate_per_s": 0}, "workload.session_rate_per_s"),
    ({"session_rate_per_s": "fast"}, "workload.session_rate_per_s"),
    ({"lane_gap_s": -1}, "workload.lane_gap_s"),
    ({"hash_id_scope_override": "galactic"}, "workload.hash_id_scope_override"),
    ({"cache": "yes"}, "workload.cache"),
    ({"sesion_rate_per_s": 0.2}, "workload.sesion_rate_per_s"),
])
def test_bad_options_name_the_key(options, key):
    with pytest.raises(ConfigError) as ei:
        read_workload(wl(SMALL, **options), seed=0)
    assert ei.value.key == key


def test_unknown_option_for_other_formats():
    with pytest.raises(ConfigError) as ei:
        read_workload(WorkloadConfig.from_mapping({"format": "parquet", "path": "traces/default.parquet",
                                                   "placement": "lanes"}), seed=0)
    assert ei.value.key == "workload.placement"


def test_placement_options_defaults():
    p = placement_from_options({}, 5)
    assert p == Placement(kind="poisson", session_rate_per_s=0.2, seed=5)


def test_filters_apply_after_placement():
    t = load_workload(wl(SMALL, limit_requests=5, placement="lanes", lanes=3), seed=0)
    assert t.num_rows == 5 and t.column("request_id").to_pylist() == list(range(5))
    # with 3 lanes all sessions start at 0: the first five arrivals are 0, 0, 0, 1.5, 5
    assert t.column("arrival_s").to_pylist() == [0.0, 0.0, 0.0, 1.5, 5.0]


def test_config_composes():
    import cluster_sim
    from cluster_sim.config import SimConfig

    m = cluster_sim.compose(["workload=claude_code", f"workload.path={SMALL}", "workload.placement=lanes",
                             "workload.lanes=4"])
    cfg = SimConfig.from_mapping(m)
    assert cfg.workload.format == "claude_code" and cfg.workload.options["lanes"] == 4
    t = read_workload(cfg.workload, cfg.seed)
    assert json.loads(meta(t, "placement"))["lanes"] == 4


# --------------------------------------------------------------------------- #
# the real WEKA v8 trace (../shared/traces/README.md §2)


@pytest.mark.extended
@pytest.mark.slow
@pytest.mark.skipif(not WEKA.exists(), reason=f"real traces are not present at {SHARED_TRACES} "
                                              "(a fresh clone has none; set CLUSTER_SIM_TRACES)")
def test_real_weka_trace_matches_readme():
    t = read_workload(wl(WEKA, cache=False), seed=0)
    s = trace_stats(t)
    assert s["requests"] == pytest.approx(49_334, rel=0.005)
    assert s["sessions"] == pytest.approx(710, rel=0.005)
    assert s["block_references"] == pytest.approx(94_310_647, rel=0.005)
    assert s["unique_blocks"] == pytest.approx(3_450_959, rel=0.005)
    assert s["reuse_fraction"] == pytest.approx(0.963, abs=0.005)
    assert s["block_tokens"] == 64
    assert meta(t, "duplicates_dropped") == "0"
    assert meta(t, "hash_id_scope") == "local"
    models = pa.compute.value_counts(t.column("model")).to_pylist()
    by_model = {m["values"]: m["counts"] for m in models}
    assert by_model["claude-opus-4-5-20251101"] == 23_306 and by_model["claude-opus-4-6"] == 8_872
    cats = {c["values"]: c["counts"] for c in pa.compute.value_counts(t.column("category")).to_pylist()}
    assert cats["agent"] + cats["subagent"] == t.num_rows and cats["subagent"] > 0
    arr = np.asarray(t.column("arrival_s"))
    assert np.all(np.diff(arr) >= 0) and arr[0] == 0.0
    assert t.column("request_id").to_pylist()[-3:] == [t.num_rows - 3, t.num_rows - 2, t.num_rows - 1]


def test_take_rows_equals_arrows_take_on_chunked_sliced_and_null_lists():
    # the numpy gather of list columns (place_sessions' reorder) must be Arrow's take exactly
    from cluster_sim.trace.placement import take_rows
    rng = np.random.default_rng(3)
    lists = [list(rng.integers(0, 2**63, size=int(k), dtype=np.uint64)) for k in rng.integers(0, 6, size=40)]
    hashes = pa.chunked_array([pa.array(lists[:17], pa.list_(pa.uint64())),
                               pa.array(lists[17:], pa.list_(pa.uint64())).slice(2)])
    n = len(hashes)
    with_nulls = pa.array([None if i % 7 == 3 else [i] for i in range(n)], pa.list_(pa.int64()))
    table = pa.table({"x": pa.array(np.arange(n)), "block_hashes": hashes, "nullable": with_nulls})
    for order in (rng.permutation(n), np.arange(n)[::-1], np.zeros(0, dtype=np.int64)):
        got = take_rows(table, order)
        assert got.equals(table.take(pa.array(order, type=pa.int64())))
        assert got.schema == table.schema
