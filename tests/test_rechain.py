"""workload.rechain: content-hashed / globally scoped block hashes are chained exactly (issue #17)."""
from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cluster_sim
from cluster_sim.errors import ConfigError, TraceError
from cluster_sim.trace.rechain import chain_hashes, chain_table, find_conflict
from cluster_sim.trace.schema import build_table

from conftest import MOONCAKE, needs_mooncake

FA_ONLY = ["model=llama3_1_70b"]                 # no STATE: a hit is the FA prefix alone
UNBOUNDED = ["hardware.hbm_cache_bytes=1PB", "hardware.dram_bytes=1PB", "hardware.ssd_bytes=1PB"]
QUIET = ["tracking.enabled=false", "report.figures=false"]


def _offsets(rows):
    off = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows], out=off[1:])
    return off, np.array([h for r in rows for h in r], dtype=np.uint64)


def _parquet(tmp_path, rows, block_tokens, name="t.parquet"):
    """One request per row of hashes, each prompt exactly len(row) blocks long, 1 s apart."""
    t = build_table(arrival_s=np.arange(len(rows), dtype=float), input_tokens=[len(r) * block_tokens for r in rows],
                    output_tokens=[1] * len(rows), block_hashes=rows, block_tokens=block_tokens, source="test")
    path = tmp_path / name
    pq.write_table(t, path)
    return path


def _fleet(path, *extra):
    cfg = cluster_sim.compose(["workload.format=parquet", f"workload.path={path}", *FA_ONLY, *UNBOUNDED,
                               *QUIET, *extra])
    return cluster_sim.run(cfg, write=False)


# --------------------------------------------------------------------------- detection and chaining

def test_find_conflict_names_the_first_hash_that_follows_another_prefix():
    assert find_conflict(*_offsets([[1, 2, 3], [1, 2, 4], [5, 6]])) is None       # chained
    assert find_conflict(*_offsets([[1, 2], [3, 2]])) == (3, 1)                    # 2 after 1, then after 3
    assert find_conflict(*_offsets([[7], [1, 7]])) == (2, 0)                       # first block, then not
    assert find_conflict(*_offsets([[1, 1]])) == (1, 0)                            # a repeat in one prompt
    assert find_conflict(*_offsets([[], [4], []])) is None


@given(st.lists(st.lists(st.integers(0, 3), max_size=6), max_size=12))
def test_chained_ids_are_equal_exactly_where_the_prefixes_are(rows):
    off, values = _offsets(rows)
    new = chain_hashes(off, values)
    seen: dict[tuple, int] = {}
    for i, r in enumerate(rows):
        for k in range(len(r)):
            got = int(new[off[i] + k])
            want = seen.setdefault(tuple(r[:k + 1]), got)
            assert got == want                                         # equal prefix -> equal id
    assert len(set(seen.values())) == len(seen)                        # different prefix -> different id
    assert find_conflict(off, new) is None


def test_never_and_unknown_modes():
    t = build_table(arrival_s=[0.0, 1.0], input_tokens=[2, 2], output_tokens=[1, 1], block_hashes=[[1, 2], [3, 2]],
                    block_tokens=1, source="x")
    assert chain_table(t, "never", "x") is t
    with pytest.raises(ConfigError, match="workload.rechain"):
        chain_table(t, "sometimes", "x")


# --------------------------------------------------------------------------- whole runs, hand-computed

# content hashes of 256-token blocks (S: a shared system block). With prefix semantics:
#   [S, A, B]     3 misses
#   [S, A, C]     S, A hit: 1 miss
#   [S, X, A, B]  S hits; A and B after X are new blocks: 3 misses
#   [S, X, A, B]  all 4 hit
#   [A, B]        A at the root is a new block: 2 misses
# 9 misses of 16 chunks; reuse 7/16.
CONTENT = [[10, 11, 12], [10, 11, 13], [10, 14, 11, 12], [10, 14, 11, 12], [11, 12]]


def test_content_hashed_trace_simulates_with_exact_prefix_semantics(tmp_path, capfd):
    path = _parquet(tmp_path, CONTENT, 256)
    s = _fleet(path, "cache.chunk_tokens=256")
    err = capfd.readouterr().err
    assert s.fleet["chunk_miss_ratio"] == pytest.approx(9 / 16)
    assert s.fleet["miss_ratio_floor"] == pytest.approx(9 / 16)
    assert s.run["block_hashes_rechained"] is True
    lines = [ln for ln in err.splitlines() if "prefix-chained" in ln]
    assert len(lines) == 1 and "block hash 11 of row 3" in lines[0] and "workload.rechain=auto" in lines[0]
    # always: the same; never: refused in one line that says how to chain
    assert _fleet(path, "cache.chunk_tokens=256", "workload.rechain=always").fleet["chunk_miss_ratio"] == \
        pytest.approx(9 / 16)
    with pytest.raises(TraceError, match=r"not prefix-chained \(workload.rechain=auto chains them\)"):
        _fleet(path, "cache.chunk_tokens=256", "workload.rechain=never")


def test_trace_stats_count_prefix_reuse_of_a_content_hashed_trace(tmp_path, capsys):
    from cluster_sim.trace_cli import main

    path = _parquet(tmp_path, CONTENT, 256)
    assert main(["stats", str(path), "--format", "parquet", "--json", "--no-tree"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["reuse_fraction"] == pytest.approx(7 / 16) and stats["unique_blocks"] == 9


def test_a_conflict_inside_a_chunk_is_found_too(tmp_path):
    # 128-token blocks, 256-token chunks: both chunks end in block 2, so their chunk ids agree and
    # have no parent; only the block level shows that [1, 2] and [3, 2] are different prefixes
    path = _parquet(tmp_path, [[1, 2], [3, 2]], 128)
    assert _fleet(path, "cache.chunk_tokens=256").fleet["chunk_miss_ratio"] == pytest.approx(1.0)
    # taken at face value (never), the second request would reuse the first one's chunk
    assert _fleet(path, "cache.chunk_tokens=256", "workload.rechain=never").fleet["chunk_miss_ratio"] == \
        pytest.approx(0.5)


def test_globally_scoped_claude_code_ids_are_chained(tmp_path):
    # two sessions with global ids of 64-token blocks, run back to back (one lane):
    #   s0: [1, 2] 2 misses; [1, 2, 3] 1 miss;  s1: [1, 2] 0 misses; [4, 2, 3] 3 misses (2 after 4 is new)
    # 6 misses of 10 chunks
    def req(t, ids):
        return {"t": t, "type": "n", "in": 64 * len(ids), "out": 1, "hash_ids": ids}

    sessions = [{"id": "a", "hash_id_scope": "global", "requests": [req(0, [1, 2]), req(1, [1, 2, 3])]},
                {"id": "b", "hash_id_scope": "global", "requests": [req(0, [1, 2]), req(1, [4, 2, 3])]}]
    path = tmp_path / "global.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in sessions))
    base = ["workload=claude_code", f"workload.path={path}", "workload.placement=lanes", "workload.lanes=1",
            "workload.cache=false", "cache.chunk_tokens=64", *FA_ONLY, *UNBOUNDED, *QUIET]
    s = cluster_sim.run(cluster_sim.compose(base), write=False)
    assert s.fleet["requests"] == 4 and s.fleet["chunk_miss_ratio"] == pytest.approx(0.6)
    with pytest.raises(TraceError, match="follows two different prefixes"):
        cluster_sim.run(cluster_sim.compose([*base, "workload.rechain=never"]), write=False)


def test_chaining_a_chained_trace_changes_no_figure():
    base = ["workload.limit_requests=600", *QUIET]
    a = cluster_sim.run(cluster_sim.compose([*base, "workload.rechain=never"]), write=False)
    b = cluster_sim.run(cluster_sim.compose([*base, "workload.rechain=always"]), write=False)
    c = cluster_sim.run(cluster_sim.compose(base), write=False)
    assert b.run["block_hashes_rechained"] and not c.run["block_hashes_rechained"]
    for k, v in a.fleet.items():
        if k not in ("sim_wall_s", "sim_chunk_refs_per_s"):
            assert b.fleet[k] == v and c.fleet[k] == v, k


def test_rechain_does_not_move_the_config_hash():
    from cluster_sim.tracking import config_hash
    m = cluster_sim.compose([])
    other = {**m, "workload": {**m["workload"], "rechain": "always"}}
    assert config_hash(m) == config_hash(other)


@needs_mooncake
def test_the_real_mooncake_trace_is_prefix_chained(mooncake_table):
    from cluster_sim.trace.rechain import _lists
    assert find_conflict(*_lists(mooncake_table)) is None, MOONCAKE


def _cc_sessions(path, scope):
    def req(t, ids):
        return {"t": t, "type": "n", "in": 64 * len(ids), "out": 1, "hash_ids": ids}
    sessions = [{"id": "a", "hash_id_scope": scope, "requests": [req(0, [1, 2]), req(1, [1, 2, 3])]},
                {"id": "b", "hash_id_scope": scope, "requests": [req(0, [7, 2]), req(1, [7, 2, 3])]},
                {"id": "c", "hash_id_scope": scope, "requests": [req(0, [5]), req(3, [5, 6])]}]
    # each session alone is chained; across sessions 2 follows 1 and 7: chained only with local ids
    path.write_text("".join(json.dumps(s) + "\n" for s in sessions))
    return path


@pytest.mark.parametrize("scope", ["local", "global"])
def test_the_trace_cache_keeps_the_chained_verdict_and_a_run_trusts_only_a_true_one(tmp_path, monkeypatch, scope):
    """Decision 127: the converted trace carries whether its hashes are chained. A ``true`` verdict
    spares ``workload.rechain=auto`` its detection on every later run, whatever the placement or
    the cut; a ``false`` one is not trusted for a cut (which may be chained); the prepared trace
    and every figure are those of a run without the cache."""
    from cluster_sim.api import _prepare_uncached
    from cluster_sim.config import SimConfig
    from cluster_sim.trace import rechain

    monkeypatch.setenv("CLUSTER_SIM_CACHE", str(tmp_path / "cache"))
    path = _cc_sessions(tmp_path / f"{scope}.jsonl", scope)
    looked = []
    real = rechain._chained
    monkeypatch.setattr(rechain, "_chained", lambda col, *a, **k: looked.append(1) or real(col, *a, **k))
    base = ["workload=claude_code", f"workload.path={path}", "cache.chunk_tokens=64", *FA_ONLY, *QUIET]

    def prep(*extra):
        looked.clear()
        trace, _, _, rechained = _prepare_uncached(SimConfig.from_mapping(cluster_sim.compose([*base, *extra])))
        return trace, rechained, len(looked)

    first, r1, n1 = prep()                       # converts: the verdict is computed with the conversion ...
    assert n1 == (1 if scope == "local" else 2)  # ... and only a chained one spares the run's own look
    again, r2, n2 = prep()                       # from the cache
    assert r2 == r1 == (scope == "global")
    # chained (local ids): no second look; not chained (global ids): the whole trace is looked at again
    assert n2 == (0 if scope == "local" else 1)
    cut, _, n3 = prep("workload.limit_requests=1", "workload.placement=lanes", "workload.lanes=1")
    assert n3 == (0 if scope == "local" else 1)
    uncached, r4, _ = prep("workload.cache=false")
    assert r4 == r1
    for name in ("flat", "parent", "depth", "anchor"):
        assert np.array_equal(getattr(again, name), getattr(uncached, name)), name
        assert np.array_equal(getattr(first, name), getattr(uncached, name)), name
    s = cluster_sim.run(cluster_sim.compose(base), write=False)
    t = cluster_sim.run(cluster_sim.compose([*base, "workload.cache=false"]), write=False)
    assert {k: v for k, v in s.fleet.items() if not k.startswith("sim_")} == \
        {k: v for k, v in t.fleet.items() if not k.startswith("sim_")}


def test_a_chained_verdict_holds_for_any_order_and_subset_of_the_requests():
    """What the cached verdict relies on: chained-ness does not depend on the requests' order,
    and a subset of a chained trace is chained."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        rows = [list(rng.integers(0, 6, rng.integers(1, 5))) for _ in range(rng.integers(1, 8))]
        chained = find_conflict(*_offsets(rows)) is None
        perm = [rows[i] for i in rng.permutation(len(rows))]
        assert (find_conflict(*_offsets(perm)) is None) == chained
        if chained:
            sub = [r for r in perm if rng.random() < 0.5] or perm[:1]
            assert find_conflict(*_offsets(sub)) is None
