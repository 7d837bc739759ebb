"""Lazy-heap invariants under property tests."""
from __future__ import annotations

from hypothesis import given, strategies as st

from cluster_sim.cache.lazyheap import LazyHeap

ops = st.lists(st.tuples(st.sampled_from(["push", "push", "push", "discard", "pop"]),
                         st.integers(0, 30), st.integers(-50, 50)), max_size=300)


@given(ops)
def test_matches_a_reference_and_stays_bounded(seq):
    h = LazyHeap(slack=8)
    ref: dict[int, tuple[int, int]] = {}       # item -> (key, tie)
    for op, item, key in seq:
        if op == "push":
            h.push(item, key, tie=item)
            ref[item] = (key, item)
        elif op == "discard":
            h.discard(item)
            ref.pop(item, None)
        else:
            got = h.pop()
            if not ref:
                assert got is None
            else:
                best = min(ref.items(), key=lambda kv: (kv[1][0], kv[1][1], kv[0]))
                # a popped entry is current: its key is the item's latest key, and it is the minimum
                assert got == (best[1][0], best[1][1], best[0])
                del ref[best[0]]
        assert len(h) == len(ref)
        assert h.size_with_stale <= 2 * len(ref) + 8 + 1     # compaction bound
        top = h.peek()
        if ref:
            best = min(ref.items(), key=lambda kv: (kv[1][0], kv[1][1], kv[0]))
            assert top == (best[1][0], best[1][1], best[0])
        else:
            assert top is None


def test_ties_break_deterministically():
    a, b = LazyHeap(), LazyHeap()
    for item in (5, 3, 9, 1):
        a.push(item, 1.0, tie=0)
    for item in (1, 9, 3, 5):
        b.push(item, 1.0, tie=0)
    assert [a.pop()[2] for _ in range(4)] == [b.pop()[2] for _ in range(4)] == [1, 3, 5, 9]


def test_counters():
    h = LazyHeap(slack=0)
    for i in range(10):
        h.push(i, float(i))
    for rnd in range(3):
        for i in range(10):
            h.push(i, float(-i - rnd))        # re-key everything: old entries go stale
    assert h.rebuilds >= 1
    assert h.pop()[2] == 9 and h.stale_pops == 0
    assert len(h) == 9


@given(ops, ops)
def test_journal_undo_restores_the_heap_exactly(before, during):
    # a caller (Gandalf's selections) records a tentative series of changes and undoes it when the
    # selection fails: afterwards the heap must hold the same items with the same keys and pop in
    # the same order as a heap that never saw them
    def apply(h, seq):
        for op, item, key in seq:
            if op == "push":
                h.push(item, key, tie=item)
            elif op == "discard":
                h.discard(item)
            else:
                h.pop()

    a, b = LazyHeap(slack=8), LazyHeap(slack=8)
    apply(a, before)
    apply(b, before)
    b.journal = []
    apply(b, during)
    b.undo()
    assert b.journal is None
    assert sorted(a.items()) == sorted(b.items())
    assert all(a.key_of(i) == b.key_of(i) for i in a.items())
    assert [a.pop() for _ in range(len(a))] == [b.pop() for _ in range(len(b))]
