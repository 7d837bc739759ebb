"""The Mooncake JSONL reader: small fixtures (plain and gzip), malformed lines, the real trace."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pytest

from cluster_sim.errors import TraceError
from cluster_sim.locations import shared_trace, traces_root
from cluster_sim.trace.mooncake import read_mooncake
from cluster_sim.trace.schema import CANONICAL_SCHEMA, TRACE_SCHEMA, block_tokens, source, trace_stats

SHARED_TRACES = traces_root()
REAL_TRACE = shared_trace("mooncake")

RECORDS = [
    {"timestamp": 0, "input_length": 1030, "output_length": 5, "hash_ids": [0, 1, 2]},
    {"timestamp": 0, "input_length": 512, "output_length": 7, "hash_ids": [0]},
    {"timestamp": 2999, "input_length": 1500, "output_length": 0, "hash_ids": [0, 1, 3]},
    {"timestamp": 6000, "input_length": 10, "output_length": 300, "hash_ids": [2**64 - 1]},
]


def write_lines(path: Path, lines: list[str], compress: bool = False) -> Path:
    data = "".join(line + "\n" for line in lines).encode()
    if compress:
        data = gzip.compress(data)
    path.write_bytes(data)
    return path


def good_lines() -> list[str]:
    return [json.dumps(r) for r in RECORDS]


@pytest.mark.parametrize("name,compress", [("t.jsonl", False), ("t.jsonl.gz", True), ("gz-without-suffix.jsonl", True)])
def test_reads_small_trace(tmp_path, name, compress):
    t = read_mooncake(write_lines(tmp_path / name, good_lines(), compress))
    assert t.schema.equals(CANONICAL_SCHEMA)
    assert block_tokens(t) == 512
    assert source(t).startswith("mooncake")
    assert t.column("arrival_s").to_pylist() == [0.0, 0.0, 2.999, 6.0]
    assert t.column("request_id").to_pylist() == [0, 1, 2, 3]
    assert t.column("input_tokens").to_pylist() == [1030, 512, 1500, 10]
    assert t.column("output_tokens").to_pylist() == [5, 7, 0, 300]
    assert t.column("block_hashes").to_pylist() == [r["hash_ids"] for r in RECORDS]
    for name_ in ("session_id", "category", "turn"):
        assert t.column(name_).null_count == 4
    s = trace_stats(t)
    assert s["block_references"] == 8
    assert s["unique_blocks"] == 5
    assert s["reuse_fraction"] == pytest.approx(3 / 8)


def test_blank_lines_and_extra_keys_are_fine(tmp_path):
    lines = good_lines()
    lines.insert(2, "   ")
    lines[0] = lines[0][:-1] + ', "extra": {"x": 1}}'
    t = read_mooncake(write_lines(tmp_path / "t.jsonl", lines + [""]))
    assert t.num_rows == 4
    assert t.column("request_id").to_pylist() == [0, 1, 2, 3]


def test_empty_file_gives_empty_table(tmp_path):
    t = read_mooncake(write_lines(tmp_path / "e.jsonl", []))
    assert t.num_rows == 0
    assert block_tokens(t) == 512


def _bad(line2: str):
    lines = good_lines()
    lines[1] = line2
    return lines


MALFORMED = [
    # id, lines, line, field, message fragment
    ("truncated-json", _bad('{"timestamp": 0, "input_length": 512, "output_length": 7, "hash_ids": [0, 1'), 2, "hash_ids", "truncated JSON"),
    ("invalid-json", _bad('{"timestamp": 0, "input_length": 512 "output_length": 7}'), 2, "input_length", "invalid JSON"),
    ("not-an-object", _bad("[1, 2, 3]"), 2, None, "JSON object"),
    ("missing-hash-ids", _bad('{"timestamp": 0, "input_length": 512, "output_length": 7}'), 2, "hash_ids", "missing field"),
    ("missing-timestamp", _bad('{"input_length": 512, "output_length": 7, "hash_ids": [0]}'), 2, "timestamp", "missing field"),
    ("missing-output", _bad('{"timestamp": 0, "input_length": 512, "hash_ids": [0]}'), 2, "output_length", "missing field"),
    ("negative-input", _bad('{"timestamp": 0, "input_length": -3, "output_length": 7, "hash_ids": [0]}'), 2, "input_length", ">= 0"),
    ("negative-output", _bad('{"timestamp": 0, "input_length": 3, "output_length": -7, "hash_ids": [0]}'), 2, "output_length", ">= 0"),
    ("string-length", _bad('{"timestamp": 0, "input_length": "512", "output_length": 7, "hash_ids": [0]}'), 2, "input_length", "integer"),
    ("float-length", _bad('{"timestamp": 0, "input_length": 512.5, "output_length": 7, "hash_ids": [0]}'), 2, "input_length", "integer"),
    ("bool-length", _bad('{"timestamp": 0, "input_length": 512, "output_length": true, "hash_ids": [0]}'), 2, "output_length", "integer"),
    ("huge-length", _bad('{"timestamp": 0, "input_length": 9999999999, "output_length": 1, "hash_ids": [0]}'), 2, "input_length", "too large"),
    ("hash-ids-not-list", _bad('{"timestamp": 0, "input_length": 512, "output_length": 7, "hash_ids": 5}'), 2, "hash_ids", "list"),
    ("hash-id-string", _bad('{"timestamp": 0, "input_length": 512, "output_length": 7, "hash_ids": [0, "a"]}'), 2, "hash_ids", "integer hash ids"),
    ("hash-id-negative", _bad('{"timestamp": 0, "input_length": 512, "output_length": 7, "hash_ids": [-1]}'), 2, "hash_ids", "[0, 2^64)"),
    ("too-few-hash-ids", _bad('{"timestamp": 0, "input_length": 1024, "output_length": 7, "hash_ids": [0]}'), 2, "hash_ids", "needs at least 2"),
    ("timestamp-string", _bad('{"timestamp": "0", "input_length": 5, "output_length": 7, "hash_ids": [0]}'), 2, "timestamp", "number"),
    ("timestamp-negative", _bad('{"timestamp": -1, "input_length": 5, "output_length": 7, "hash_ids": [0]}'), 2, "timestamp", ">= 0"),
    ("decreasing-timestamp", good_lines()[:3] + ['{"timestamp": 2998, "input_length": 5, "output_length": 7, "hash_ids": [0]}'], 4, "timestamp", "decreases"),
]


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gz"])
@pytest.mark.parametrize("lines,line,field,fragment", [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_malformed_line_is_a_trace_error_naming_line_and_field(tmp_path, lines, line, field, fragment, compress):
    path = write_lines(tmp_path / ("bad.jsonl.gz" if compress else "bad.jsonl"), lines, compress)
    with pytest.raises(TraceError) as err:
        read_mooncake(path)
    e = err.value
    assert (e.path, e.line, e.field) == (str(path), line, field)
    text = str(e)
    assert text.startswith(f"{path}:{line}")
    if field:
        assert f"field '{field}'" in text
    assert fragment in text


def test_truncated_gzip_stream(tmp_path):
    data = gzip.compress("".join(line + "\n" for line in good_lines() * 50).encode())
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceError, match="gzip") as err:
        read_mooncake(path)
    assert err.value.path == str(path)
    assert err.value.line is not None


def test_missing_file(tmp_path):
    with pytest.raises(TraceError, match="no such file") as err:
        read_mooncake(tmp_path / "absent.jsonl")
    assert err.value.path == str(tmp_path / "absent.jsonl")


@pytest.mark.skipif(not REAL_TRACE.exists(), reason=f"real Mooncake trace not available at {REAL_TRACE}")
def test_real_conversation_trace_matches_readme():
    t = read_mooncake(REAL_TRACE)
    s = trace_stats(t)
    assert s["requests"] == 12_031
    assert s["block_references"] == 288_500
    assert s["unique_blocks"] == 182_790
    assert s["reuse_fraction"] == pytest.approx(0.366, abs=0.001)
    assert s["span_s"] == pytest.approx(3537, abs=1)
    assert s["input_tokens_p50"] == 6909
    assert s["block_tokens"] == 512
    lengths = pc.list_value_length(t.column("block_hashes")).to_numpy()
    np.testing.assert_array_equal(lengths, -(-t.column("input_tokens").to_numpy() // 512))
    assert t.column("block_hashes")[0].as_py()[0] == 0  # every request starts with the shared block 0
