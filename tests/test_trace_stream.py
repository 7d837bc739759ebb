"""A synthetic workload chunked as it is written out (cluster_sim.trace.stream, decisions 107-110).

The streamed path must give exactly what the whole-table path gives (the table generated,
filtered, checked for chaining, chunked and hashed whole): every array of the chunk table, the
recorded trace sha256 and every figure of a run, for any batch size; and it must never build
the block-hash column."""
from __future__ import annotations

import dataclasses
import tracemalloc

import numpy as np
import pyarrow as pa
import pytest

import cluster_sim
from cluster_sim import api
from cluster_sim.config import SimConfig
from cluster_sim.trace import chunks, rechain, stream, synthetic
from cluster_sim.trace.load import load_workload, synthetic_spec

from simhelpers import assert_runs_identical


def _cfg(*overrides: str) -> SimConfig:
    return SimConfig.from_mapping(cluster_sim.compose(["workload=synthetic", *overrides]))


def _assert_same_trace(a, b) -> None:
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype, f.name
            assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), f.name
        else:
            assert x == y, f.name


def _whole(cfg):
    return api._prepare(cfg, stream=False)


def _streamed(cfg, **batches):
    got = stream.prepare_synthetic(cfg.workload, cfg.seed, cfg.chunk_tokens, **batches)
    assert got is not None, "the streamed path fell back to the whole table"
    return got


CASES = [
    (),
    ("+workload.synthetic.num_sessions=400", "seed=3"),
    ("+workload.synthetic.num_sessions=300", "+workload.synthetic.subagents_per_agent_turn=0.7",
     "+workload.synthetic.rewrite_prob=0.15", "+workload.synthetic.agent_fraction=0.5", "seed=5"),
    ("+workload.synthetic.num_sessions=200", "+workload.synthetic.subagent_system_prompt_tokens=300",
     "+workload.synthetic.subagents_per_agent_turn=1.0", "+workload.synthetic.think_time_sigma=1.0",
     "cache.chunk_tokens=128", "seed=11"),
    ("workload.limit_requests=777", "workload.time_scale=2", "cache.chunk_tokens=64"),
    ("workload.until_s=300", "workload.warmup_s=60", "cache.chunk_tokens=512", "seed=2"),
    ("+workload.synthetic.block_tokens=16", "+workload.synthetic.num_sessions=150", "cache.chunk_tokens=auto"),
    ("workload.rechain=never", "seed=7"),
]


@pytest.mark.parametrize("overrides", CASES, ids=lambda o: " ".join(o) or "default")
@pytest.mark.parametrize("batches", [{}, {"batch_refs": 97, "batch_values": 211}, {"batch_refs": 1, "batch_values": 1}],
                         ids=["default-batches", "small-batches", "one-at-a-time"])
def test_streamed_chunk_table_and_sha_equal_the_whole_tables(overrides, batches):
    if batches.get("batch_refs") == 1 and overrides not in (CASES[0], CASES[4]):
        pytest.skip("one-at-a-time batches on two cases only (slow)")
    cfg = _cfg(*overrides)
    whole, _path, sha, rechained = _whole(cfg)
    assert not rechained
    trace, sha_s = _streamed(cfg, **batches)
    _assert_same_trace(whole, trace)
    assert sha_s == sha


def test_the_sha_is_that_of_the_generated_table():
    """decision 74's definition: the IPC stream of the (filtered) table load_workload returns."""
    cfg = _cfg("workload.limit_requests=500", "seed=4")
    assert _streamed(cfg)[1] == api._table_sha(load_workload(cfg.workload, cfg.seed))


@pytest.mark.parametrize("overrides", [("policy=lru", "seed=1", "cache.engine=numba"),
                                       ("policy=gandalf", "workload.limit_requests=900", "fleet.nodes=2")],
                         ids=["lru", "gandalf-2-nodes"])
def test_a_streamed_run_equals_a_whole_table_run(overrides, monkeypatch):
    m = cluster_sim.compose(["workload=synthetic", "+workload.synthetic.num_sessions=250", "output.requests=true",
                             "tracking.enabled=false", *overrides])
    calls = []
    real = stream.prepare_synthetic
    monkeypatch.setattr(stream, "prepare_synthetic", lambda *a, **k: calls.append(1) or real(*a, **k))
    a = cluster_sim.run(m, write=False)
    assert calls, "the run did not take the streamed path"
    monkeypatch.setattr(stream, "prepare_synthetic", lambda *a, **k: None)     # the whole-table path
    b = cluster_sim.run(m, write=False)
    assert_runs_identical(a, b)
    keep = ("trace_path", "trace_sha256", "chunks_tracked", "counted_chunk_refs", "block_hashes_rechained")
    assert {k: a.run[k] for k in keep} == {k: b.run[k] for k in keep}


# ---------------------------------------------------------------------------- never the whole column
def _long_sessions(n: int) -> tuple[str, ...]:
    """Many turns per session: the requests' hash column is many times the streams' hashes."""
    return (f"+workload.synthetic.num_sessions={n}", "+workload.synthetic.turns_mean=25",
            "+workload.synthetic.agent_turns_mean=25", "+workload.synthetic.max_input_tokens=32768",
            "+workload.synthetic.message_tokens=150", "+workload.synthetic.agent_message_tokens=150")


def test_the_block_hash_column_is_never_built(monkeypatch):
    cfg = _cfg(*_long_sessions(60))
    total = int(synthetic.plan(synthetic_spec(cfg.workload), cfg.seed).offsets[-1])
    monkeypatch.setattr(synthetic, "_request_hashes", lambda *a, **k: pytest.fail("the whole column was built"))
    gathered = []
    real = synthetic.Plan.values
    monkeypatch.setattr(synthetic.Plan, "values", lambda self, j0, j1: gathered.append(
        int(self.offsets[j1] - self.offsets[j0])) or real(self, j0, j1))
    trace, _sha = _streamed(_cfg(*_long_sessions(60)), batch_values=500)
    assert sum(gathered) == total                  # every hash went into the digest ...
    assert max(gathered) <= 500 + 400              # ... a batch (at most one more request) at a time
    assert trace.chunk_refs > 0


def test_streamed_loading_holds_a_fraction_of_the_column():
    """tracemalloc's peak (numpy's buffers included) while loading, in small batches: the
    whole-table path holds the column (and more); the streamed path a fraction of it, mostly the
    streams' own hashes (here 1/19 of the column) and one batch's working arrays."""
    cfg = _cfg(*_long_sessions(400))
    p = synthetic.plan(synthetic_spec(cfg.workload), cfg.seed)
    column_bytes = 8 * int(p.offsets[-1])
    batch = len(p.full_hash) // 10
    del p
    _whole(_cfg()), _streamed(_cfg())         # imports and first-call allocations out of the way

    def peak(f):
        tracemalloc.start()
        try:
            f()
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    whole = peak(lambda: _whole(cfg))
    streamed = peak(lambda: _streamed(cfg, batch_refs=batch // 4, batch_values=batch))
    assert whole > column_bytes
    print(f"column {column_bytes:,} B, peak whole {whole:,} B, streamed {streamed:,} B")
    assert streamed < 0.4 * column_bytes, (streamed, column_bytes, whole)


def test_the_placeholder_is_never_read():
    """The digest hashes the real values where the IPC writer passes the placeholder: a zero
    placeholder gives the real table's sha; a table that does not pass it is refused."""
    cfg = _cfg("+workload.synthetic.num_sessions=80")
    p = synthetic.plan(synthetic_spec(cfg.workload), cfg.seed)
    ph, _mm = stream._placeholder(int(p.offsets[-1]))
    assert stream._streamed_sha(p.table(ph), ph, p.values, 333) == api._table_sha(p.table())
    with pytest.raises(stream._Layout):
        stream._streamed_sha(p.table(), ph, p.values, 333)       # the real values: no placeholder written


# ---------------------------------------------------------------------------- rechain=auto, streamed
def test_the_pair_check_is_the_column_check():
    """``pairs_chained`` over a column's (hash, parent) pairs answers as ``find_conflict`` does,
    on random columns with and without hashes that follow two prefixes, for any pass count."""
    rng = np.random.default_rng(0)
    for trial in range(60):
        n = int(rng.integers(1, 40))
        counts = rng.integers(0, 6, n)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        values = rng.integers(0, 5 if trial % 2 else 50, int(offsets[-1])).astype(np.uint64) * np.uint64(1 << 60 | 7)
        par = np.empty(len(values), dtype=np.uint64)
        par[1:] = values[:-1]
        par[offsets[:-1][counts > 0]] = rechain.NO_PARENT
        expect = rechain.find_conflict(offsets, values) is None
        for per_pass in (1, 3, 1 << 30):
            chunks_of = [(values[i:i + 4], par[i:i + 4]) for i in range(0, len(values), 4)]
            assert rechain.pairs_chained(lambda: iter(chunks_of), len(values), per_pass) == expect, trial


def _with_conflict(monkeypatch):
    """Plans whose block 1 of one stream reuses another stream's block-1 hash after another
    block 0: a hash with two parents, as a 64-bit collision of the generator would give."""
    real = synthetic.plan

    def planted(spec, seed, **kw):
        p = real(spec, seed, **kw)
        a, b = np.flatnonzero(p.n_full >= 2)[:2]
        p.full_hash = p.full_hash.copy()
        p.full_hash[p.full_first[b] + 1] = p.full_hash[p.full_first[a] + 1]
        return p

    monkeypatch.setattr(synthetic, "plan", planted)


def test_a_hash_with_two_parents_is_chained_by_the_whole_table_path(monkeypatch, capsys):
    cfg = _cfg("+workload.synthetic.num_sessions=120")
    before = _whole(cfg)[0]
    _with_conflict(monkeypatch)
    assert stream.prepare_synthetic(cfg.workload, cfg.seed, cfg.chunk_tokens, batch_values=50) is None
    trace, _path, _sha, rechained = api._prepare(cfg)
    assert rechained and "not prefix-chained" in capsys.readouterr().err
    assert trace.n_chunks != before.n_chunks or not np.array_equal(trace.flat, before.flat)
    _assert_same_trace(trace, _whole(cfg)[0])


def test_a_conflict_only_in_an_unkept_request_is_not_seen(monkeypatch):
    """The check covers the blocks of the requests the filters keep, as the whole-table check of
    the filtered table does: a conflict in a later request only changes nothing."""
    cfg = _cfg("+workload.synthetic.num_sessions=120", "workload.limit_requests=1")
    _with_conflict(monkeypatch)
    whole = _whole(cfg)
    assert not whole[3]
    trace, sha = _streamed(cfg)
    _assert_same_trace(whole[0], trace)
    assert sha == whole[2]


def test_rechain_always_takes_the_whole_table_path():
    cfg = _cfg("workload.rechain=always")
    assert stream.prepare_synthetic(cfg.workload, cfg.seed, cfg.chunk_tokens) is None
    assert api._prepare(cfg)[3]


def test_a_chunk_size_that_is_no_multiple_of_the_block_is_the_same_error():
    for path in (True, False):
        with pytest.raises(cluster_sim.errors.ConfigError, match="whole multiple"):
            api._prepare(_cfg("cache.chunk_tokens=100"), stream=path)


# ---------------------------------------------------------------------------- the epoch table, linear
@pytest.mark.parametrize("overrides", [("fleet=four", "fleet.epoch_s=7"), ("fleet.epoch_s=0.5", "policy=gandalf"),
                                       ("workload.warmup_s=200", "fleet.epoch_s=30")])
def test_the_epoch_table_in_one_pass_equals_the_loop_over_epochs(overrides):
    """``_epoch_table`` groups a node's requests by epoch in one pass (a 10 M-request run has
    ~90 k epochs); the loop over epochs it replaced (kept for series that are not integers) gives
    the same table. Float copies of the (small, integer) series take the loop."""
    from cluster_sim.fleet import run_fleet

    cfg = _cfg("+workload.synthetic.num_sessions=300", *overrides)
    trace = api.prepare(cfg)[0]
    raw = run_fleet(trace, cfg)
    keys = ("idx", "m", "h", "ssd_bytes_written", "snap")
    rng = np.random.default_rng(1)
    shuffled = {**raw, "results": [(st, {**s, **{k: s[k][perm] for k in keys}}) for st, s in raw["results"]
                                   for perm in [rng.permutation(len(s["idx"]))]]}
    for r in (raw, shuffled):       # requests in order (epochs are runs of the series), and not
        fast = api._epoch_table(trace, r, cfg)
        as_float = {**r, "results": [(st, {**s, **{k: s[k].astype(np.float64) for k in keys[1:]}})
                                     for st, s in r["results"]]}
        loop = api._epoch_table(trace, as_float, cfg)
        assert fast.num_rows > 20
        assert fast.schema == loop.schema and fast.equals(loop)
