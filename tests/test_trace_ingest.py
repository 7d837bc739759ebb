"""Bounded-memory ingestion (issue 15): batched chunking, synthetic generation and rechain detection
give exactly what the whole-table versions give; the tracked-chunk arrays are exact-length int32."""
from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster_sim.errors import TraceError
from cluster_sim.trace import synthetic
from cluster_sim.trace.chunks import ChunkedTrace, _chunk_trace_whole, chunk_trace, id_dtype, wide
from cluster_sim.trace.rechain import _chained, _find_conflict_whole, find_conflict
from cluster_sim.trace.schema import build_table

ID_FIELDS = ("flat", "parent", "depth", "anchor")


@st.composite
def chained_tables(draw):
    """Sessions whose turns extend one prompt (chained hashes, shared system prompts), interleaved in
    arrival order, so that sessions straddle every batch boundary; each prompt may end in a partial block."""
    bt = draw(st.sampled_from([1, 2, 4]))
    n_sys = draw(st.integers(1, 3))
    sessions = draw(st.lists(st.tuples(st.integers(0, n_sys - 1), st.lists(st.integers(0, 9), min_size=1,
                                                                             max_size=5)), min_size=1, max_size=8))
    rows = []
    for s, (sys_i, growth) in enumerate(sessions):
        blocks = [("sys", sys_i, j) for j in range(draw(st.integers(0, 3)))]
        for turn, add in enumerate(growth):
            blocks = blocks + [("s", s, turn, j) for j in range(add)]
            tail = draw(st.integers(0, bt - 1))
            rows.append((draw(st.floats(0, 100)), s, list(blocks), tail))
    rows.sort(key=lambda r: r[0])
    names: dict = {}

    def chain(blocks):   # hash = id of the whole prefix (chained)
        return [names.setdefault(tuple(blocks[:k + 1]), len(names) + 1) for k in range(len(blocks))]

    hashes = [chain(b) + ([10**9 + i] if tail else []) for i, (_, _, b, tail) in enumerate(rows)]
    table = build_table(arrival_s=[r[0] for r in rows], input_tokens=[len(r[2]) * bt + r[3] for r in rows],
                        output_tokens=[1] * len(rows), block_hashes=hashes, block_tokens=bt, source="hyp",
                        session_id=[r[1] for r in rows],
                        category=[("text", "agent")[r[1] % 2] for r in rows])
    return table, bt * draw(st.integers(1, 3))


def assert_same_trace(a: ChunkedTrace, b: ChunkedTrace) -> None:
    for f in dataclasses.fields(ChunkedTrace):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.shape == y.shape and np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), f.name
        else:
            assert x == y, f.name


@settings(max_examples=80, deadline=None, derandomize=True)
@given(chained_tables(), st.integers(1, 40), st.integers(1, 5))
def test_chunking_in_batches_equals_the_whole_table_cut(tc, batch_refs, n_pieces):
    table, ct = tc
    whole = _chunk_trace_whole(table, ct, warmup_s=10.0)
    assert_same_trace(whole, chunk_trace(table, ct, warmup_s=10.0, batch_refs=batch_refs))
    assert_same_trace(whole, chunk_trace(table, ct, warmup_s=10.0))
    # a table of several record batches (as Parquet row groups give) cuts the same
    n = table.num_rows
    cuts = sorted({0, n, *np.linspace(0, n, n_pieces + 1).astype(int).tolist()})
    pieces = pa.Table.from_batches([b for a, z in zip(cuts[:-1], cuts[1:]) for b in table.slice(a, z - a).to_batches()],
                                   schema=table.schema)
    assert_same_trace(whole, chunk_trace(pieces, ct, warmup_s=10.0, batch_refs=batch_refs))


def test_batch_boundaries_inside_sessions_change_no_chunk_id():
    # one long session and its growing prompts, cut a reference at a time: ids in first-appearance order
    table = synthetic.generate(dataclasses.replace(synthetic.default_spec(), num_sessions=40), 3)
    whole = _chunk_trace_whole(table, 256)
    for b in (1, 3, 17, 1000, None):
        t = chunk_trace(table, 256, batch_refs=b)
        assert_same_trace(whole, t)
    assert np.array_equal(whole.flat[np.r_[0, np.flatnonzero(np.diff(np.maximum.accumulate(whole.flat))) + 1]],
                          np.arange(whole.n_chunks))   # interned in order of first appearance


def test_tracked_chunk_arrays_are_exact_length_int32():
    table = synthetic.generate(dataclasses.replace(synthetic.default_spec(), num_sessions=60), 1)
    t = chunk_trace(table, 256, batch_refs=50)
    U, refs = t.n_chunks, t.chunk_refs
    assert U > 100 and refs > U
    for name in ID_FIELDS:
        a = getattr(t, name)
        assert a.dtype == np.int32, name
        assert len(a) == (refs if name == "flat" else U), name
        assert a.nbytes == 4 * len(a) and (a.base is None or a.base.nbytes == a.nbytes), name   # no slack buffer
    assert t.chunk_hash.dtype == np.uint64 and len(t.chunk_hash) == U
    assert t.offsets.dtype == np.int64 and len(t.offsets) == t.n_requests + 1
    # every consumer's use of the ids still holds: ancestors via anchor/depth, parent of each reference
    for c in range(0, U, 7):
        anc = t.flat[t.anchor[c]:t.anchor[c] + t.depth[c] - 1]
        assert len(anc) == t.depth[c] - 1 and (t.depth[c] == 1 or anc[-1] == t.parent[c])
    sub = t.subset(np.arange(t.n_requests)[::-2])
    assert sub.anchor.dtype == t.anchor.dtype and sub.flat.dtype == np.int32


def test_id_dtype_widens_when_a_node_handle_would_not_fit_int32():
    # a trace of r references has at most r chunks, whose largest handle 2(r-1)+1 must fit int32
    assert id_dtype(0) == np.int32 and id_dtype(2**30 - 1) == np.int32
    assert id_dtype(2**30) == np.int64 and id_dtype(2**40) == np.int64


def test_wide_converts_once_and_is_shared():
    a = np.arange(10, dtype=np.int32)
    w = wide(a)
    assert w.dtype == np.int64 and np.array_equal(w, a) and wide(a) is w
    b = np.arange(3, dtype=np.int64)
    assert wide(b) is b


def test_a_hash_after_two_prefixes_is_the_error_it_always_was():
    bad = build_table(arrival_s=[0, 1, 2], input_tokens=[8, 8, 8], output_tokens=[1] * 3,
                      block_hashes=[[1, 2], [5, 6], [3, 2]], block_tokens=4, source="t")
    with pytest.raises(TraceError) as whole:
        _chunk_trace_whole(bad, 4)
    for b in (1, 2, None):
        with pytest.raises(TraceError) as batched:
            chunk_trace(bad, 4, batch_refs=b)
        assert str(batched.value) == str(whole.value) and "two different prefixes" in str(whole.value)


def _with_batch(monkeypatch, n):
    monkeypatch.setattr(synthetic._block_hashes, "__defaults__", (n,))
    monkeypatch.setattr(synthetic._request_hashes, "__defaults__", (n,))


@pytest.mark.parametrize("knobs", [
    {"num_sessions": 200},
    {"num_sessions": 120, "subagents_per_agent_turn": 1.5, "rewrite_prob": 0.1, "agent_fraction": 0.5},
    {"num_sessions": 80, "subagents_per_agent_turn": 0.7, "subagent_system_prompt_tokens": 500, "block_tokens": 16},
    {"num_sessions": 3, "block_tokens": 4096, "max_input_tokens": 3000},   # no full block at all
])
def test_synthetic_generation_in_batches_gives_the_same_table(monkeypatch, knobs):
    spec = dataclasses.replace(synthetic.default_spec(), **knobs)
    ref = synthetic.generate(spec, 7)
    for n in (1, 33, 1 << 30):
        _with_batch(monkeypatch, n)
        got = synthetic.generate(spec, 7)
        assert got.equals(ref, check_metadata=True), n
        assert got.column("block_hashes").num_chunks == 1


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.lists(st.lists(st.integers(0, 9), max_size=6), min_size=1, max_size=25), st.integers(1, 8),
       st.integers(1, 4))
def test_rechain_detection_in_batches_and_chunks_equals_the_whole_array(seqs, batch, n_chunks):
    counts = np.array([len(s) for s in seqs])
    off = np.zeros(len(seqs) + 1, np.int64)
    np.cumsum(counts, out=off[1:])
    vals = np.array([v for s in seqs for v in s], dtype=np.uint64)
    want = _find_conflict_whole(off, vals)
    assert find_conflict(off, vals, batch=batch) == want
    arr = pa.array(seqs, type=pa.list_(pa.uint64()))
    cuts = sorted({0, len(seqs), *np.linspace(0, len(seqs), n_chunks + 1).astype(int).tolist()})
    col = pa.chunked_array([arr.slice(a, z - a) for a, z in zip(cuts[:-1], cuts[1:])], type=arr.type)
    for passes in (1, 3):
        assert _chained(col, batch, passes) == (want is None)


def test_rechain_detection_with_the_sentinel_hash_falls_back_exactly():
    top = 2**64 - 1
    for seqs in ([[top, 1], [2, 1]], [[top, 1], [top, 1]], [[1, top], [2, top]]):
        off = np.cumsum([0] + [len(s) for s in seqs])
        vals = np.array([v for s in seqs for v in s], dtype=np.uint64)
        assert find_conflict(off, vals, batch=1) == _find_conflict_whole(off, vals)


def test_every_reader_and_a_run_work_without_pandas(tmp_path):
    """A plain install (mlflow-skinny) has no pandas. pyarrow imports it for some conversions
    (``DataType.to_pandas_dtype``), which once broke converting the WEKA trace on a fresh machine.
    Here every reader and a simulation run in a process where ``import pandas`` fails."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    cc = tmp_path / "cc.jsonl"
    cc.write_text("\n".join(json.dumps({"id": s, "block_size": 64, "requests": [
        {"t": 0.0, "type": "n", "in": 128, "out": 5, "hash_ids": [1, 2], "stop": "tool_use"},
        {"t": 9.0, "type": "subagent", "requests": [{"t": 0.0, "type": "n", "in": 64, "out": 1, "hash_ids": [9]}]},
        {"t": 20.0, "type": "n", "in": 192, "out": 5, "hash_ids": [1, 2, 3], "stop": "end_turn"}]})
        for s in ("a", "b")) + "\n")
    mc = tmp_path / "mc.jsonl"
    mc.write_text("".join(json.dumps({"timestamp": 1000 * i, "input_length": 1030, "output_length": 5,
                                      "hash_ids": [0, 1, i]}) + "\n" for i in range(4)))
    azure = Path(__file__).parent / "fixtures" / "azure_small.csv"
    script = f"""
import sys
class NoPandas:                       # import pandas -> ModuleNotFoundError, as on a plain install
    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError("No module named 'pandas'")
sys.meta_path.insert(0, NoPandas())
import cluster_sim
from cluster_sim.trace.claude_code import read_claude_code
from cluster_sim.trace.mooncake import read_mooncake
from cluster_sim.trace.azure import read_azure_workload
assert read_claude_code({str(cc)!r}).num_rows == 6
assert read_mooncake({str(mc)!r}).num_rows == 4
assert read_azure_workload({str(azure)!r}, None, 0).num_rows > 0
s = cluster_sim.run(cluster_sim.compose(["workload=claude_code", "workload.path={cc}", "workload.cache=false",
                                         "tracking.enabled=false", "cache.chunk_tokens=64"]), write=False)
assert s.fleet["requests"] == 6, s.fleet["requests"]
print("ok")
"""
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0 and p.stdout.strip().endswith("ok"), p.stderr[-3000:]
