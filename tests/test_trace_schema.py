"""The canonical trace table: construction, Parquet round trip, validation errors."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster_sim.errors import TraceError
from cluster_sim.trace.parquet import read_parquet, write_parquet
from cluster_sim.trace.schema import (
    CANONICAL_SCHEMA,
    TRACE_SCHEMA,
    block_tokens,
    build_table,
    source,
    trace_stats,
    validate_table,
)


def small_table(**overrides) -> pa.Table:
    kwargs = dict(
        arrival_s=[0.0, 0.5, 0.5, 2.0],
        input_tokens=[130, 64, 0, 200],
        output_tokens=[10, 20, 30, 40],
        block_hashes=[[1, 2, 3], [1], [], [1, 2, 7, 8]],
        block_tokens=64,
        source="unit-test",
        session_id=[0, 0, None, 1],
        category=["text", "agent", None, "text"],
        turn=[1, 2, None, 1],
    )
    kwargs.update(overrides)
    return build_table(**kwargs)


def replace_column(table: pa.Table, name: str, array) -> pa.Table:
    i = table.schema.get_field_index(name)
    field = table.schema.field(name)
    arr = pa.array(array, type=field.type) if not isinstance(array, pa.Array) else array
    return table.set_column(i, pa.field(name, arr.type, nullable=field.nullable), arr)


# --------------------------------------------------------------------------- construction


def test_build_table_has_canonical_schema_and_metadata():
    t = small_table()
    assert t.schema.equals(CANONICAL_SCHEMA)  # metadata not compared
    assert t.column("stop_reason").null_count == 4          # request-level signals: unknown by default
    assert t.schema.field("category").type == pa.dictionary(pa.int32(), pa.string())
    assert t.schema.metadata[b"block_tokens"] == b"64"
    assert t.schema.metadata[b"source"] == b"unit-test"
    assert block_tokens(t) == 64
    assert source(t) == "unit-test"
    assert t.column("request_id").to_pylist() == [0, 1, 2, 3]
    assert t.column("category").to_pylist() == ["text", "agent", None, "text"]
    assert t.column("block_hashes").to_pylist() == [[1, 2, 3], [1], [], [1, 2, 7, 8]]
    validate_table(t, "mem")


def test_build_table_fast_path_equals_list_path():
    lists = [[1, 2, 3], [1], [], [1, 2, 7, 8]]
    offsets = np.array([0, 3, 4, 4, 8])
    values = np.array([1, 2, 3, 1, 1, 2, 7, 8], dtype=np.uint64)
    assert small_table(block_hashes=(offsets, values)).equals(small_table(block_hashes=lists))
    arrow = pa.array(lists, type=pa.list_(pa.uint64()))
    assert small_table(block_hashes=arrow).equals(small_table(block_hashes=lists))


def test_build_table_defaults_are_null_and_scalar_category_broadcasts():
    t = build_table(
        arrival_s=[0.0, 1.0], input_tokens=[1, 2], output_tokens=[3, 4],
        block_hashes=[[5], [6]], block_tokens=512, source="x", category="text",
    )
    assert t.column("session_id").null_count == 2
    assert t.column("turn").null_count == 2
    assert t.column("category").to_pylist() == ["text", "text"]
    t2 = build_table(
        arrival_s=[0.0], input_tokens=[1], output_tokens=[3], block_hashes=[[5]], block_tokens=512, source="x",
    )
    assert t2.column("category").null_count == 1
    validate_table(t, "a")
    validate_table(t2, "b")


def test_uint64_hashes_keep_full_range():
    big = 2**64 - 1
    t = small_table(block_hashes=[[big, 2, 3], [0], [], [1, 2, 7, 2**63]])
    assert t.column("block_hashes").to_pylist()[0][0] == big


def test_build_table_rejects_mismatched_lengths():
    with pytest.raises(ValueError):
        small_table(input_tokens=[1, 2, 3])
    with pytest.raises(ValueError):
        small_table(block_hashes=[[1], [2]])
    with pytest.raises(ValueError):
        small_table(block_hashes=(np.array([0, 1, 2]), np.array([1, 2], dtype=np.uint64)))


@settings(max_examples=50, deadline=None, derandomize=True)
@given(st.lists(st.lists(st.integers(0, 2**64 - 1), max_size=6), min_size=0, max_size=12))
def test_build_table_round_trips_any_hash_lists(lists):
    n = len(lists)
    t = build_table(
        arrival_s=np.arange(n, dtype=float), input_tokens=[len(h) * 16 for h in lists],
        output_tokens=[1] * n, block_hashes=lists, block_tokens=16, source="h",
    )
    validate_table(t, "h")
    assert t.column("block_hashes").to_pylist() == lists


# --------------------------------------------------------------------------- parquet


def test_parquet_round_trip_keeps_schema_and_metadata(tmp_path):
    t = small_table()
    path = tmp_path / "sub" / "t.parquet"
    write_parquet(t, path)
    back = read_parquet(path)
    assert back.equals(t)
    assert back.schema.equals(t.schema, check_metadata=True)
    assert back.schema.field("block_hashes").type == pa.list_(pa.uint64())
    assert pq.ParquetFile(path).metadata.row_group(0).column(0).compression == "ZSTD"


def test_parquet_keeps_extra_columns(tmp_path):
    t = small_table().append_column("note", pa.array(["a", "b", "c", "d"]))
    write_parquet(t, tmp_path / "t.parquet")
    back = read_parquet(tmp_path / "t.parquet")
    assert back.column_names[-1] == "note"
    assert back.column("note").to_pylist() == ["a", "b", "c", "d"]


def test_read_parquet_missing_file_names_the_path(tmp_path):
    missing = tmp_path / "nope.parquet"
    with pytest.raises(TraceError) as err:
        read_parquet(missing)
    assert str(missing) in str(err.value)
    assert "no such file" in str(err.value)


def test_read_parquet_not_parquet(tmp_path):
    bad = tmp_path / "bad.parquet"
    bad.write_text("not parquet")
    with pytest.raises(TraceError, match="cannot read as Parquet") as err:
        read_parquet(bad)
    assert err.value.path == str(bad)


def test_read_parquet_validates(tmp_path):
    t = small_table()
    t = replace_column(t, "output_tokens", [1, -5, 2, 3])
    path = tmp_path / "bad.parquet"
    pq.write_table(t, path)  # bypass write_parquet's own check
    with pytest.raises(TraceError) as err:
        read_parquet(path)
    assert (err.value.path, err.value.line, err.value.field) == (str(path), 2, "output_tokens")


def test_write_parquet_refuses_an_invalid_table(tmp_path):
    t = small_table().replace_schema_metadata({b"source": b"x"})
    with pytest.raises(TraceError) as err:
        write_parquet(t, tmp_path / "t.parquet")
    assert err.value.field == "block_tokens"
    assert not (tmp_path / "t.parquet").exists()


# --------------------------------------------------------------------------- validation errors


def _mutations():
    def drop(name):
        return lambda t: t.drop_columns([name])

    def cast(name, typ):
        def f(t):
            i = t.schema.get_field_index(name)
            return t.set_column(i, pa.field(name, typ), t.column(name).cast(typ))
        return f

    def col(name, values):
        return lambda t: replace_column(t, name, values)

    return [
        # (id, mutate, expected line (1-based row) or None, field, message fragment)
        ("missing-arrival", drop("arrival_s"), None, "arrival_s", "missing column"),
        ("missing-hashes", drop("block_hashes"), None, "block_hashes", "missing column"),
        ("missing-category", drop("category"), None, "category", "missing column"),
        ("wrong-type-input", cast("input_tokens", pa.int64()), None, "input_tokens", "wrong type"),
        ("wrong-type-arrival", cast("arrival_s", pa.float32()), None, "arrival_s", "wrong type"),
        ("wrong-type-hashes", cast("block_hashes", pa.list_(pa.int64())), None, "block_hashes", "wrong type"),
        ("wrong-type-category", cast("category", pa.string()), None, "category", "wrong type"),
        ("negative-input", col("input_tokens", [130, 64, -1, 200]), 3, "input_tokens", "negative"),
        ("negative-output", col("output_tokens", [10, 20, 30, -40]), 4, "output_tokens", "negative"),
        ("arrival-decreasing", col("arrival_s", [0.0, 0.5, 0.4, 2.0]), 3, "arrival_s", "decreases"),
        ("arrival-nan", col("arrival_s", [0.0, float("nan"), 1.0, 2.0]), 2, "arrival_s", "finite"),
        ("arrival-negative", col("arrival_s", [-1.0, 0.5, 0.5, 2.0]), 1, "arrival_s", "negative"),
        ("duplicate-id", col("request_id", [7, 3, 9, 3]), 4, "request_id", "duplicate request_id 3"),
        ("null-input", col("input_tokens", [130, None, 0, 200]), 2, "input_tokens", "null"),
        ("turn-zero", col("turn", [1, 0, None, 1]), 2, "turn", ">= 1"),
        ("too-few-hashes", col("block_hashes", [[1, 2], [1], [], [1, 2]]), 4, "block_hashes", "fewer hashes"),
        ("null-hash", col("block_hashes", [[1, 2, 3], [1], [], [1, None, 7, 8]]), 4, "block_hashes", "null hash"),
        ("no-block-tokens", lambda t: t.replace_schema_metadata({b"source": b"x"}), None, "block_tokens", "no 'block_tokens'"),
        ("bad-block-tokens", lambda t: t.replace_schema_metadata({b"block_tokens": b"0"}), None, "block_tokens", "positive integer"),
    ]


@pytest.mark.parametrize("mutate,line,field,fragment", [m[1:] for m in _mutations()], ids=[m[0] for m in _mutations()])
def test_validation_errors_name_file_row_and_field(mutate, line, field, fragment):
    t = mutate(small_table())
    with pytest.raises(TraceError) as err:
        validate_table(t, "traces/x.parquet")
    e = err.value
    assert e.path == "traces/x.parquet"
    assert e.field == field
    assert e.line == line
    text = str(e)
    assert text.startswith("traces/x.parquet" + (f":{line}" if line else ""))
    assert f"field '{field}'" in text
    assert fragment in text


def test_fewer_full_blocks_rule_uses_floor():
    # 127 tokens with 64-token blocks: one full block, so one hash is enough
    t = small_table(input_tokens=[127, 64, 0, 200], block_hashes=[[1], [1], [], [1, 2, 3]])
    validate_table(t, "ok")


def test_validation_is_vectorised_on_a_large_table():
    # 50k requests, ~5M hashes: built and validated without per-row Python
    n = 50_000
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 200, n)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    values = rng.integers(0, 2**63, int(offsets[-1]), dtype=np.int64).astype(np.uint64)
    t = build_table(
        arrival_s=np.sort(rng.random(n)) * 3600, input_tokens=(counts * 64).astype(np.int32),
        output_tokens=np.ones(n, np.int32), block_hashes=(offsets, values), block_tokens=64, source="big",
    )
    validate_table(t, "big")
    stats = trace_stats(t)
    assert stats["requests"] == n
    assert stats["block_references"] == int(offsets[-1])


def test_trace_stats_reuse_fraction():
    t = small_table()  # hashes [1,2,3] [1] [] [1,2,7,8]: 1 reused in row 2; 1 and 2 in row 4
    s = trace_stats(t)
    assert s["block_references"] == 8
    assert s["unique_blocks"] == 5
    assert s["reuse_fraction"] == pytest.approx(3 / 8)
    assert s["sessions"] == 2
    assert s["span_s"] == 2.0
