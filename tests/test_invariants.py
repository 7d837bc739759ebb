"""Property-based checks of the residency rules on random workloads (hypothesis)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

from cluster_sim.cache import SSD
from cluster_sim.model import load_model

from simhelpers import branching_paths, make_node, trace_from_paths

MODELS = ["qwen3_next_80b_a3b", "llama3_1_70b", "gemma3_27b", "kimi_linear_48b_a3b"]
POLICIES = [("lru", {}), ("gandalf", {}), ("gandalf", {"alpha": 0}), ("gandalf", {"placement": "strict"}),
            ("gandalf", {"alpha": "inf", "victim_loss": "shadow_price"}), ("gandalf", {"tau_s": 5.0, "objective": "chunks"})]


@st.composite
def workloads(draw):
    paths = branching_paths(draw)
    model = draw(st.sampled_from(MODELS))
    mode = draw(st.sampled_from(["last", "last_and_branch", "every_chunk"]))
    # capacities in chunks' worth of FA; a state is several chunks' worth
    caps = [draw(st.integers(0, 12)) for _ in range(3)]
    policy = draw(st.sampled_from(POLICIES))
    return paths, model, mode, caps, policy


@given(workloads())
def test_invariants_hold_after_every_request(w):
    paths, model_name, mode, caps, (policy, params) = w
    model = load_model(model_name, state_checkpoints=mode)
    tr = trace_from_paths(paths)
    F = model.fa_bytes(256)
    S = model.state_bytes(256) if model.has_state else 0
    unit = F + S // 3
    node = make_node(tr, model, policy=policy, policy_params=params, hbm_cache_bytes=caps[0] * unit,
                     dram_bytes=caps[1] * unit, ssd_bytes=caps[2] * unit)
    st_ = node.st
    admitted = []
    orig_add = st_.add_copy

    def spy(p, t):
        if t == SSD:
            admitted.append(int(st_.size[p]))
        orig_add(p, t)

    orig_add_many = st_.add_copies

    def spy_many(ps, t):
        if t == SSD:
            admitted.extend(int(st_.size[p]) for p in ps)
        orig_add_many(ps, t)

    placed = []           # SSD as entry tier: new payloads placed directly (kept unless trimmed)
    orig_path, orig_state = st_.add_path_fa, st_.add_state

    def spy_path(t, path, mask):
        if t == SSD:
            placed.extend((2 * path[mask]).tolist())
        orig_path(t, path, mask)

    def spy_state(q, t):
        if t == SSD:
            placed.append(q)
        orig_state(q, t)

    st_.add_copy = spy
    st_.add_copies = spy_many
    st_.add_path_fa = spy_path
    st_.add_state = spy_state
    for i in range(tr.n_requests):
        path = tr.path(i)
        res_before = st_.res.copy()
        fa_res = res_before[2 * path] != 0
        r_ind = int(np.argmin(fa_res)) if not fa_res.all() else len(path)
        rec = node.process(path, int(tr.input_tokens[i]), float(tr.arrival_s[i]))
        admitted.extend(int(st_.size[p]) for p in placed if st_.res[p] & 4)   # new payloads are pinned
        placed.clear()
        h = rec["h"]
        # hit length never beyond the matched FA path
        assert h <= r_ind and rec["r"] == r_ind
        # STATE required for hybrid hits, and the state must have been at c_h
        if model.has_state and h:
            assert res_before[2 * path[h - 1] + 1] != 0
        if not model.has_state:
            assert h == r_ind
        st_.check_invariants()      # prefix closure, STATE residency, bytes <= capacity, counters
    node.finish()
    s = node.stats
    # bytes written equal the sizes of the admissions
    assert s.ssd_bytes_written_fa + s.ssd_bytes_written_state == sum(admitted)
    assert s.ssd_admissions_fa + s.ssd_admissions_state == len(admitted)
    assert 0 <= s.ssd_admissions_hit_fa + s.ssd_admissions_hit_state <= len(admitted)
    # every requested chunk is either a hit or a miss
    hits = s.hits["hits_hbm_fa"] + s.hits["hits_dram_fa"] + s.hits["hits_ssd_fa"]
    assert hits + s.chunk_misses == s.chunks_requested


@given(workloads())
def test_unbounded_cache_reaches_the_floor(w):
    from cluster_sim.node import floor_pass

    paths, model_name, mode, _, _ = w
    model = load_model(model_name, state_checkpoints=mode)
    tr = trace_from_paths(paths)
    node = make_node(tr, model, dram_bytes="1PB")
    for i in range(tr.n_requests):
        node.process(tr.path(i), int(tr.input_tokens[i]), float(tr.arrival_s[i]))
    s = node.finish()
    ratio = s.chunk_misses / s.chunks_requested if s.chunks_requested else 0.0
    floor, gpu_s = floor_pass(tr.offsets, tr.flat, tr.n_chunks, tr.input_tokens, tr.counted, model, 256,
                              node.cost)
    assert ratio == floor
    assert s.recompute_gpu_seconds == gpu_s or abs(s.recompute_gpu_seconds - gpu_s) <= 1e-9 * max(1.0, gpu_s)


@given(workloads())
def test_compiled_resume_prefix_equals_the_numpy_reference(w):
    # the floors' and the oracles' unbounded pass: the compiled loops and the numpy version
    # agree request by request, for every checkpoint mode and for models with and without STATE
    from cluster_sim.cache import hybrid

    paths, model_name, mode, _, _ = w
    model = load_model(model_name, state_checkpoints=mode)
    tr = trace_from_paths(paths)
    kern = hybrid._resume_prefix_kernel()
    assert kern is not None and hasattr(kern, "py_func")       # numba is a dependency
    ref = hybrid.unbounded_resume_prefix_numpy(tr.offsets, tr.flat, tr.n_chunks, model)
    assert np.array_equal(hybrid.unbounded_resume_prefix(tr.offsets, tr.flat, tr.n_chunks, model), ref)
    assert np.array_equal(kern.py_func(tr.offsets, tr.flat, tr.n_chunks, model.has_state,
                                       hybrid._MODES[mode]), ref)


@st.composite
def chunk_batches(draw):
    paths = branching_paths(draw)
    tr = trace_from_paths(paths)
    if tr.n_chunks < 2:
        paths = paths + [[7, 8, 9]]
        tr = trace_from_paths(paths)
    cs = draw(st.lists(st.integers(0, tr.n_chunks - 1), min_size=2, max_size=12, unique=True))
    return tr, np.array(cs, dtype=np.int64), draw(st.sampled_from([1, -1]))


@given(chunk_batches())
def test_compiled_ancestor_counts_equal_the_numpy_sum(b):
    """CacheState._dec_ancestors' compiled climb (one per root-ward chain) subtracts exactly what
    the definition does: sign x the number of chunks of the batch below each ancestor."""
    from cluster_sim.cache import state as cstate
    tr, cs, sign = b
    if cstate._dec_anc_kernel() is None:
        pytest.skip("numba not importable: only the numpy path exists")
    node = make_node(tr)
    st_ = node.st
    want = np.zeros(tr.n_chunks, dtype=np.int64)
    for c in cs:
        want[st_.ancestors(int(c))] -= sign
    got = np.zeros(tr.n_chunks, dtype=np.int32)
    st_._dec_ancestors(got, cs, sign)
    assert np.array_equal(got, want)
    assert not st_._mark.any()               # the scratch marks are clear again
    box = cstate._dec_anc_kernel.box
    kernel = box[:]
    box[:] = [None]                          # the numpy path gives the same
    try:
        again = np.zeros(tr.n_chunks, dtype=np.int32)
        st_._dec_ancestors(again, cs, sign)
    finally:
        box[:] = kernel
    assert np.array_equal(again, want)
