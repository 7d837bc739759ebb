"""``kvbm_filter`` (Dynamo KVBM's disk-offload filter, policies.md §9.8): what it writes, its counts
against an eager model of the upstream map, and the compiled engine against the interpreted one."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from cluster_sim.model import load_model
from cluster_sim.policies.kvbm_filter import COUNT_CAP

from simhelpers import make_node, trace_from_paths
from test_admission_filters import LLAMA, QN, Recorder


def _written(paths, params, dram=3, ssd=100, arrivals=None, model=LLAMA):
    m = load_model(model)
    F = m.fa_bytes(256)
    tr = trace_from_paths(paths, arrivals=arrivals)
    node = make_node(tr, m, policy="kvbm_filter", policy_params=params, dram_bytes=dram * F, ssd_bytes=ssd * F)
    rec = Recorder(node)
    rec.run(tr)
    ids = {n: int(tr.path(i)[k]) for i, p in enumerate(paths) for k, n in enumerate(p)}
    name = {2 * c: n for n, c in ids.items()}
    return sorted(name[p] for p in rec.writes if p in name), rec, node, ids


# chunk 1 and chunk 4 are referenced by two requests each, every other chunk by one
PATHS = [[1, 2], [1, 3], [4], [5], [6], [4], [7], [8], [9], [10]]


@pytest.mark.parametrize("threshold,expect", [(1, [1, 2, 3, 4, 5, 6, 7]), (2, [1, 4]), (3, [])])
def test_a_dram_victim_is_written_iff_its_count_reached_the_threshold(threshold, expect):
    got, rec, _, _ = _written(PATHS, {"threshold": threshold})
    assert got == expect
    assert len(rec.dram_victims) == 7           # LRU order whatever the threshold
    c = rec.counters()
    assert c["dram_victims_written"] == len(expect)
    assert c["dram_victims_dropped"] == 7 - len(expect)


def test_the_count_doubles_on_each_later_reference():
    # chunk 1 seen by 3 requests: 1, 2, 4 -> written at threshold 3 and 4, not at 5
    paths = [[1], [1], [1], [2], [3], [4], [5]]
    for threshold, expect in ((3, [1]), (4, [1]), (5, [])):
        got, _, node, ids = _written(paths, {"threshold": threshold}, dram=2)
        assert got == expect, threshold
    assert node.policy.count(ids[1]) == 4 and node.policy.count(ids[2]) == 1


def test_counts_decay_by_one_per_round_and_zeros_leave_the_map():
    # chunk 1 at 0 s and 25 s. decay_s=10: rounds at 10 and 20 take its count 1 -> 0 (pruned), so at
    # 25 s it starts again from 1 and is dropped; decay_s=100: its count is 2 and it is written
    paths = [[1], [1], [2], [3], [4]]
    arrivals = [0.0, 25.0, 26.0, 27.0, 28.0]
    got, _, node, ids = _written(paths, {"decay_s": 10}, dram=1, arrivals=arrivals)
    assert got == [] and node.policy.rounds == 2 and node.policy.count(ids[1]) == 1
    got, _, node, _ = _written(paths, {"decay_s": 100}, dram=1, arrivals=arrivals)
    assert got == [1] and node.policy.rounds == 0


def test_a_state_goes_with_its_chunks_count():
    # hybrid model: the STATE at chunk 1 is a DRAM victim too; written iff chunk 1's count is >= 2
    m = load_model(QN)
    for paths, expect_state in (([[1], [1], [2], [3], [4]], True), ([[1], [2], [3], [4]], False)):
        tr = trace_from_paths(paths)
        F = m.fa_bytes(256) + int(m.state_bytes(256))
        node = make_node(tr, m, policy="kvbm_filter", dram_bytes=2 * F, ssd_bytes=100 * F)
        rec = Recorder(node)
        rec.run(tr)
        c1 = int(tr.path(0)[0])
        assert (2 * c1 + 1 in rec.writes) == expect_state
        assert (2 * c1 in rec.writes) == expect_state


class EagerMap:
    """Upstream's FrequencyFilter as it is written: a dict, every round decrementing every count."""

    def __init__(self, decay_s, max_entries):
        self.m: dict[int, int] = {}
        self.decay_s, self.max = decay_s, max_entries
        self.next = decay_s

    def _round(self):
        self.m = {c: v - 1 for c, v in self.m.items() if v > 1}

    def request(self, now, chunks):
        while now >= self.next:
            self._round()
            self.next += self.decay_s
        for c in chunks:
            self.m[c] = min(2 * self.m[c], COUNT_CAP) if c in self.m else 1
        if len(self.m) > self.max:
            while len(self.m) > self.max:
                self._round()
            self.next = now + self.decay_s


@st.composite
def timed_streams(draw):
    n = draw(st.integers(1, 40))
    gaps = draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 3.0, 7.0]), min_size=n, max_size=n))
    paths = [draw(st.lists(st.integers(1, 12), min_size=1, max_size=4, unique=True)) for _ in range(n)]
    return paths, list(np.cumsum(gaps)), draw(st.sampled_from([1.0, 2.5, 600.0])), draw(st.integers(1, 8))


@settings(max_examples=60, deadline=None)
@given(w=timed_streams())
def test_the_lazy_counts_are_the_upstream_maps(w):
    """After every request, each chunk's count is the eager map's (decay rounds, oversize prunes)."""
    paths, arrivals, decay_s, max_entries = w
    m = load_model(LLAMA)
    F = m.fa_bytes(256)
    # distinct path tuples are distinct chunks here: each path's chunks are their own prefix chain
    tr = trace_from_paths(paths, arrivals=arrivals)
    node = make_node(tr, m, policy="kvbm_filter", policy_params={"decay_s": decay_s, "max_entries": max_entries},
                     dram_bytes=4 * F, ssd_bytes=100 * F)
    ref = EagerMap(decay_s, max_entries)
    pol = node.policy
    for i in range(tr.n_requests):
        node.process(tr.path(i), int(tr.input_tokens[i]), float(tr.arrival_s[i]))
        ref.request(float(tr.arrival_s[i]), [int(c) for c in tr.path(i)])
        got = {c: pol.count(c) for c in range(tr.n_chunks) if pol.count(c) > 0}
        assert got == ref.m, i
        assert len(got) <= max_entries


def test_a_count_saturates_instead_of_wrapping():
    paths = [[1]] * 70 + [[2], [3], [4]]
    got, _, node, ids = _written(paths, {"threshold": 2}, dram=1)
    assert node.policy.count(ids[1]) == COUNT_CAP and got == [1]
