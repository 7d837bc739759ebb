"""The Azure arrival-only reader and workload.format=azure (the generator driven by Azure arrivals)."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from cluster_sim.config import WorkloadConfig
from cluster_sim.errors import ConfigError, TraceError
from cluster_sim.locations import shared_trace, traces_root
from cluster_sim.trace.azure import _shift_session_starts, read_azure_arrivals
from cluster_sim.trace.load import read_workload
from cluster_sim.trace.schema import validate_table
from cluster_sim.trace.synthetic import default_spec, generate

FIXTURES = Path(__file__).resolve().parent / "fixtures"
AZURE_SMALL = FIXTURES / "azure_small.csv"
SHARED_TRACES = traces_root()
AZURE = shared_trace("azure").parent
needs_azure = pytest.mark.skipif(not AZURE.exists(), reason=f"real traces are not present at {SHARED_TRACES} "
                                                            "(a fresh clone has none; set CLUSTER_SIM_TRACES)")

HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
ROW1 = "2023-11-16 18:15:46.6805900,374,44\n"


def test_reads_the_fixture_exactly():
    arr, ctx, gen = read_azure_arrivals(AZURE_SMALL)
    assert arr.dtype == np.float64 and ctx.dtype == np.int32 and gen.dtype == np.int32
    # 100-ns digits are kept: 18:15:50.9951690 - 18:15:46.6805900 = 4.3145790 s
    assert arr.tolist() == pytest.approx([0.0, 4.314579, 4.314579, 15.3194101, 73.31941], abs=1e-9)
    assert ctx.tolist() == [374, 396, 879, 91, 1500]
    assert gen.tolist() == [44, 109, 55, 0, 12]


def test_gzip_other_column_order_and_day_boundary(tmp_path):
    p = tmp_path / "a.csv.gz"
    p.write_bytes(gzip.compress(b"GeneratedTokens,TIMESTAMP,ContextTokens\n"
                                b"3,2023-12-31 23:59:59.5,10\n4,2024-01-01T00:00:00.25,20\n"))
    arr, ctx, gen = read_azure_arrivals(p)
    assert arr.tolist() == [0.0, 0.75] and ctx.tolist() == [10, 20] and gen.tolist() == [3, 4]


@pytest.mark.parametrize("body,line,field,fragment", [
    (HEADER + ROW1 + "2023-11-16 18:15:4x,1,1\n", 3, "TIMESTAMP", "timestamp"),
    (HEADER + ROW1 + "2023-11-16 25:15:40,1,1\n", 3, "TIMESTAMP", "timestamp"),
    (HEADER + ROW1 + "2023-11-16 18:15:40.1,1,1\n", 3, "TIMESTAMP", "earlier"),
    (HEADER + ROW1 + "2023-11-16 18:15:50.1,-1,1\n", 3, "ContextTokens", "non-negative integer"),
    (HEADER + ROW1 + "2023-11-16 18:15:50.1,1.5,1\n", 3, "ContextTokens", "non-negative integer"),
    (HEADER + ROW1 + ROW1 + "2023-11-16 18:15:50.1,1,abc\n", 4, "GeneratedTokens", "non-negative integer"),
    (HEADER + ROW1 + "2023-11-16 18:15:50.1,1\n", 3, "GeneratedTokens", "fields"),
    ("TIMESTAMP,Context,GeneratedTokens\n" + ROW1, 1, "ContextTokens", "no column"),
    ("", 1, None, "empty"),
    (HEADER, 2, None, "no rows"),
])
def test_bad_rows_name_line_and_field(tmp_path, body, line, field, fragment):
    p = tmp_path / "bad.csv"
    p.write_text(body)
    with pytest.raises(TraceError) as ei:
        read_azure_arrivals(p)
    e = ei.value
    assert e.path == str(p) and e.line == line and e.field == field
    assert fragment in str(e), str(e)


def test_missing_and_corrupt_file(tmp_path):
    with pytest.raises(TraceError, match="no such file"):
        read_azure_arrivals(tmp_path / "none.csv")
    p = tmp_path / "cut.csv.gz"
    p.write_bytes(gzip.compress((HEADER + ROW1 * 50).encode())[:30])
    with pytest.raises(TraceError, match="gzip"):
        read_azure_arrivals(p)


def _azure_wl(path, **options):
    return WorkloadConfig.from_mapping({"format": "azure", "path": str(path), **options})


def _session_starts(t):
    sess = np.asarray(t.column("session_id"))
    arr = np.asarray(t.column("arrival_s"))
    starts = np.full(int(sess.max()) + 1, np.inf)
    np.minimum.at(starts, sess, arr)
    return starts


def test_azure_workload_one_session_per_arrival():
    t = read_workload(_azure_wl(AZURE_SMALL), seed=0)
    validate_table(t, "azure")
    arr, _ctx, _gen = read_azure_arrivals(AZURE_SMALL)
    assert np.allclose(_session_starts(t), arr)
    assert t.column("request_id").to_pylist() == list(range(t.num_rows))
    m = t.schema.metadata
    assert m[b"source"] == b"azure:azure_small.csv"
    assert m[b"first_message_tokens"] in (b"exact", b"lognormal_fit")
    assert json.loads(m[b"placement"])["sessions"] == 5
    assert read_workload(_azure_wl(AZURE_SMALL), seed=0).equals(t)


def test_azure_workload_num_sessions_and_knobs():
    t = read_workload(_azure_wl(AZURE_SMALL, synthetic={"num_sessions": 2, "turns_mean": 2.0}), seed=1)
    assert np.allclose(_session_starts(t), [0.0, 4.314579])
    with pytest.raises(ConfigError) as ei:
        read_workload(_azure_wl(AZURE_SMALL, synthetic={"num_sessions": 6}), seed=0)
    assert ei.value.key == "workload.synthetic.num_sessions"
    with pytest.raises(ConfigError) as ei:
        read_workload(_azure_wl(AZURE_SMALL, synthetic={"bogus": 1}), seed=0)
    assert ei.value.key == "workload.synthetic.bogus"
    with pytest.raises(ConfigError) as ei:
        read_workload(_azure_wl(AZURE_SMALL, placement="lanes"), seed=0)
    assert ei.value.key == "workload.placement"


def test_shift_session_starts_keeps_each_session_intact():
    spec = default_spec()
    from dataclasses import replace
    spec = replace(spec, num_sessions=40)
    t = generate(spec, 4)
    starts = np.sort(np.random.default_rng(1).uniform(0, 100, 40))
    s = _shift_session_starts(t, starts)
    validate_table(s, "shifted")
    assert np.allclose(_session_starts(s), starts)
    for k in (0, 17, 39):
        a = t.filter(np.asarray(t.column("session_id")) == k)
        b = s.filter(np.asarray(s.column("session_id")) == k)
        assert b.column("block_hashes").equals(a.column("block_hashes"))
        assert np.allclose(np.diff(np.asarray(b.column("arrival_s"))), np.diff(np.asarray(a.column("arrival_s"))))


@needs_azure
@pytest.mark.parametrize("name,rows,span", [("code", 8_819, 3_436), ("conv", 19_366, 3_502)])
def test_real_azure_traces_match_readme(name, rows, span):
    arr, ctx, gen = read_azure_arrivals(AZURE / f"AzureLLMInferenceTrace_{name}.csv.gz")
    assert len(arr) == rows and arr[-1] == pytest.approx(span, abs=1.0)
    assert ctx.mean() == pytest.approx({"code": 2048, "conv": 1155}[name], abs=1)
    assert gen.mean() == pytest.approx({"code": 27.9, "conv": 211}[name], abs=0.5)
