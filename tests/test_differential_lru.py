"""Differential correctness of the ``lru`` policy against independent references.

Pure attention (llama3_1_70b), HBM 0, SSD 0, one node, 512-token chunks, DRAM
sized to N chunks: ``chunk_miss_ratio`` must equal a small reference LRU that
applies the hit rule directly (written here, from the trace's hash ids, not
from the simulator's chunk ids), and libCacheSim's LRU when installed.
"""
from __future__ import annotations

import heapq

import numpy as np
import pytest

import cluster_sim
from cluster_sim.model import load_model

from conftest import MOONCAKE, needs_mooncake

CHUNK = 512


def request_chunks(table) -> list[list[int]]:
    """Full 512-token chunks of every request, named by the hash of their (only) block."""
    inp = table.column("input_tokens").to_pylist()
    hashes = table.column("block_hashes").to_pylist()
    return [h[: n // CHUNK] for n, h in zip(inp, hashes)]


def reference_lru(requests: list[list[int]], capacity: int) -> float:
    """LRU over chunks with the contract's hit rule, pins, leaf-first eviction, logical clock."""
    resident: set[int] = set()
    children: dict[int, int] = {}
    parent: dict[int, int | None] = {}
    stamp: dict[int, int] = {}
    heap: list[tuple[int, int]] = []
    clock = 0
    refs = misses = 0
    for path in requests:
        m = len(path)
        h = 0
        while h < m and path[h] in resident:
            h += 1
        refs += m
        misses += m - h
        for j in range(m - 1, -1, -1):          # deepest first: c_1 is the most recent
            stamp[path[j]] = clock
            heapq.heappush(heap, (clock, path[j]))
            clock += 1
        pinned = set(path)
        for j in range(h, m):                   # insert one payload at a time, then resolve overflow
            c = path[j]
            parent[c] = path[j - 1] if j else None
            resident.add(c)
            if parent[c] is not None:
                children[parent[c]] = children.get(parent[c], 0) + 1
            ok = True
            while len(resident) > capacity:
                back = []
                victim = None
                while heap:
                    s, v = heapq.heappop(heap)
                    if v not in resident or stamp[v] != s:
                        continue
                    if v in pinned or children.get(v, 0):
                        back.append((s, v))
                        continue
                    victim = v
                    break
                for e in back:
                    heapq.heappush(heap, e)
                if victim is None:
                    ok = False
                    break
                resident.discard(victim)
                if parent[victim] is not None:
                    children[parent[victim]] -= 1
            if not ok:                          # c_j and everything deeper is not cached
                resident.discard(c)
                if parent[c] is not None:
                    children[parent[c]] -= 1
                break
    return misses / refs


def sim_ratio(n_chunks: int, extra=()) -> dict:
    fa = load_model("llama3_1_70b").fa_bytes(CHUNK)
    cfg = cluster_sim.compose([
        "model=llama3_1_70b", "workload=mooncake", f"workload.path={MOONCAKE}", "policy=lru",
        "hardware.hbm_cache_bytes=0", "hardware.ssd_bytes=0", f"hardware.dram_bytes={n_chunks * fa}",
        f"cache.chunk_tokens={CHUNK}", *extra])
    return cluster_sim.run(cfg, write=False).fleet


@needs_mooncake
@pytest.mark.extended
@pytest.mark.slow
@pytest.mark.parametrize("n_chunks", [40, 400, 4000])
def test_lru_equals_reference(mooncake_table, n_chunks):
    ref = reference_lru(request_chunks(mooncake_table), n_chunks)
    got = sim_ratio(n_chunks)
    assert got["chunk_miss_ratio"] == pytest.approx(ref, abs=1e-6)
    assert got["miss_ratio_floor"] == pytest.approx(0.6181, abs=0.0005)
    # bigger caches never miss more on this trace
    assert got["chunk_miss_ratio"] >= got["miss_ratio_floor"]


@needs_mooncake
@pytest.mark.extended
@pytest.mark.slow
@pytest.mark.parametrize("n_chunks", [400, 4000])
def test_lru_close_to_libcachesim(mooncake_table, n_chunks, tmp_path):
    lcs = pytest.importorskip("libcachesim", reason="the [ref] extra (libcachesim) is not installed")
    reqs = request_chunks(mooncake_table)
    ids = [c for path in reqs for c in reversed(path)]          # deepest first
    rec = np.zeros(len(ids), dtype=np.dtype([("t", "<u4"), ("id", "<u8"), ("sz", "<u4"), ("nx", "<i8")]))
    rec["id"] = np.asarray(ids, dtype=np.uint64) + 1
    rec["sz"] = 1
    rec["nx"] = -1
    f = tmp_path / "chunks.oracleGeneral"
    rec.tofile(f)
    reader = lcs.TraceReader(str(f), trace_type=lcs.TraceType.ORACLE_GENERAL_TRACE)
    lcs_ratio, _ = lcs.LRU(n_chunks).process_trace(reader)
    got = sim_ratio(n_chunks)["chunk_miss_ratio"]
    assert got == pytest.approx(lcs_ratio, abs=0.002)
