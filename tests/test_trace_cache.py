"""The converted-trace cache (Arrow IPC files with a checksum beside each): reuse, invalidation,
corruption, location."""
from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest

import cluster_sim.trace.claude_code as claude_code
import cluster_sim.trace.mooncake as mooncake
from cluster_sim.config import WorkloadConfig
from cluster_sim.trace.cache import cache_dir
from cluster_sim.trace.files import source_sha256
from cluster_sim.trace.load import read_workload

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SMALL = FIXTURES / "claude_code_small.jsonl"
SESSION_DIR = FIXTURES / "claude_code_sessions"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("CLUSTER_SIM_CACHE", str(d))
    return d


@pytest.fixture
def source(tmp_path):
    d = tmp_path / "src"
    d.mkdir()
    p = d / "sessions.jsonl"
    shutil.copy(SMALL, p)
    return p


@pytest.fixture
def calls(monkeypatch):
    """Count parser calls; set ``calls['fail'] = True`` to make the parser fail."""
    state = {"n": 0, "fail": False}
    real = claude_code.read_claude_code

    def counting(*a, **kw):
        if state["fail"]:
            raise AssertionError("the trace was parsed again instead of read from the cache")
        state["n"] += 1
        return real(*a, **kw)

    monkeypatch.setattr(claude_code, "read_claude_code", counting)
    return state


def wl(path, **options):
    return WorkloadConfig.from_mapping({"format": "claude_code", "path": str(path), **options})


def entries(cache: Path) -> list[Path]:
    return sorted((cache / "traces").glob("*.arrow")) if (cache / "traces").exists() else []


def test_second_load_reads_the_cache(cache, source, calls):
    first = read_workload(wl(source), seed=0)
    assert calls["n"] == 1 and len(entries(cache)) == 1
    calls["fail"] = True
    second = read_workload(wl(source), seed=0)
    assert second.equals(first)
    assert second.schema.metadata == first.schema.metadata
    # placement runs after the cache: another placement or seed reuses the same entry
    lanes = read_workload(wl(source, placement="lanes", lanes=2), seed=5)
    other_seed = read_workload(wl(source), seed=9)
    assert json.loads(lanes.schema.metadata[b"placement"])["placement"] == "lanes"
    assert not other_seed.column("arrival_s").equals(first.column("arrival_s"))
    assert len(entries(cache)) == 1
    # reader options are part of the key
    calls["fail"] = False
    read_workload(wl(source, hash_id_scope_override="global"), seed=0)
    assert calls["n"] == 2 and len(entries(cache)) == 2


def test_changed_source_invalidates(cache, source, calls):
    a = read_workload(wl(source), seed=0)
    lines = source.read_text().splitlines()
    source.write_text("\n".join(lines[:2]) + "\n")   # drop the third session
    b = read_workload(wl(source), seed=0)
    assert calls["n"] == 2
    assert b.num_rows == a.num_rows - 2
    assert len(entries(cache)) == 2


@pytest.mark.parametrize("damage", ["garbage", "truncate", "flip", "empty", "foreign", "no checksum",
                                    "bad checksum"])
def test_corrupt_cache_file_is_rebuilt(cache, source, calls, damage, tmp_path):
    good = read_workload(wl(source), seed=0)
    (entry,) = entries(cache)
    data = entry.read_bytes()
    if damage == "garbage":
        entry.write_bytes(b"not arrow at all" * 100)
    elif damage == "truncate":
        entry.write_bytes(data[: len(data) // 2])
    elif damage == "flip":  # bytes inside the file: caught by its checksum
        b = bytearray(data)
        for i in range(60, 90):
            b[i] ^= 0xFF
        entry.write_bytes(bytes(b))
    elif damage == "empty":
        entry.write_bytes(b"")
    elif damage == "foreign":  # a valid Parquet file of another trace under this name
        other = tmp_path / "other.jsonl"
        other.write_text(SMALL.read_text().splitlines()[2] + "\n")
        read_workload(wl(other), seed=0)
        (foreign,) = [e for e in entries(cache) if e != entry]
        shutil.copy(foreign, entry)
    elif damage == "no checksum":
        entry.with_name(entry.name + ".sha256").unlink()
    elif damage == "bad checksum":
        entry.with_name(entry.name + ".sha256").write_text("0" * 64 + "\n")
    n = calls["n"]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        again = read_workload(wl(source), seed=0)
    assert again.equals(good)
    assert calls["n"] == n + 1
    assert any("rebuilding" in str(x.message) for x in w)
    calls["fail"] = True   # and the rebuilt entry is good
    assert read_workload(wl(source), seed=0).equals(good)


def test_nothing_is_written_beside_the_source(cache, source):
    before = sorted(p.name for p in source.parent.iterdir())
    read_workload(wl(source), seed=0)
    read_workload(wl(source), seed=0)
    assert sorted(p.name for p in source.parent.iterdir()) == before
    assert entries(cache) and all(cache in e.parents for e in entries(cache))
    assert cache_dir() == cache / "traces"


def test_default_location(monkeypatch, tmp_path):
    monkeypatch.delenv("CLUSTER_SIM_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache_dir() == tmp_path / ".cache" / "cluster_sim" / "traces"


def test_cache_off_and_unwritable_cache(tmp_path, monkeypatch, source, calls):
    monkeypatch.setenv("CLUSTER_SIM_CACHE", str(tmp_path / "c1"))
    read_workload(wl(source, cache=False), seed=0)
    assert not (tmp_path / "c1").exists()
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv("CLUSTER_SIM_CACHE", str(blocker))   # cannot create a folder under a file
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        t = read_workload(wl(source), seed=0)
    assert t.num_rows == 14 and any("cannot write" in str(x.message) for x in w)


def test_directory_source(cache, tmp_path, calls):
    d = tmp_path / "sessions"
    shutil.copytree(SESSION_DIR, d)
    h1 = source_sha256(d)
    a = read_workload(wl(d), seed=0)
    calls["fail"] = True
    assert read_workload(wl(d), seed=0).equals(a)
    calls["fail"] = False
    (d / "trace_0002.json").write_text((d / "trace_0002.json").read_text().replace('"out": 3', '"out": 33'))
    assert source_sha256(d) != h1
    b = read_workload(wl(d), seed=0)
    assert calls["n"] == 2 and b.column("output_tokens").to_pylist() != a.column("output_tokens").to_pylist()


def test_mooncake_goes_through_the_cache(cache, tmp_path, monkeypatch):
    p = tmp_path / "m.jsonl"
    p.write_text('{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [1, 2]}\n'
                 '{"timestamp": 5, "input_length": 30, "output_length": 1, "hash_ids": [1]}\n')
    w = WorkloadConfig.from_mapping({"format": "mooncake", "path": str(p)})
    a = read_workload(w, seed=0)
    assert len(entries(cache)) == 1

    def fail(*_a, **_k):
        raise AssertionError("parsed again")

    monkeypatch.setattr(mooncake, "read_mooncake", fail)
    b = read_workload(w, seed=0)
    assert b.equals(a) and b.schema.equals(a.schema, check_metadata=True)
