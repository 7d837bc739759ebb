"""``reuse=hints`` compiled (policies/_reuse_jit.py) against the interpreted estimator: the same
estimates, counts, classes and lowered payloads (in order), call by call, on random request
streams with sessions, sub-agents, created states, idle gaps and refits, with buffers small
enough that the member buffer is compacted and every array grows."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from cluster_sim.policies.base import RequestMeta

pytest.importorskip("numba", reason="numba is a dependency; the compiled estimator needs it")

from cluster_sim.policies.reuse import CompiledHintsReuse, HintsReuse  # noqa: E402

U = 24                        # chunks; payload handles 0 .. 2U - 1
DEPTH = np.full(U, 6, dtype=np.int64)


def _meta(path, t, session, stop, agent, sub, turn):
    return RequestMeta(seq=turn, arrival_s=t, session_id=session, category="subagent" if sub else None, turn=turn,
                       input_tokens=0, output_tokens=0, path=np.asarray(path, dtype=np.int64), hit_chunks=0,
                       resident_chunks=0, stop_reason=stop, agent=agent)


@st.composite
def streams(draw):
    n = draw(st.integers(1, 60))
    steps = []
    t = 0.0
    for i in range(n):
        t += draw(st.one_of(st.floats(0.0, 30.0), st.floats(100.0, 5000.0), st.floats(1e5, 1e7)))
        start = draw(st.integers(0, U - 6))
        m = draw(st.integers(0, 6))
        path = list(range(start, start + m))
        state = draw(st.integers(-1, U - 1))
        created = sorted(set(draw(st.lists(st.integers(0, U - 1), max_size=4))))
        steps.append((t, path, state, created, draw(st.integers(-1, 3)), draw(st.integers(0, 4)),
                      draw(st.integers(-1, 2)), draw(st.booleans()), draw(st.integers(0, 14)),
                      draw(st.lists(st.booleans(), min_size=2 * U, max_size=2 * U))))
    return steps, draw(st.integers(1, 7))


def _small(est):
    """Shrink the compiled estimator's buffers to their least, so that they compact and grow."""
    est._room_need = 2 * 6 + 4
    est._gmin = 5
    est.gbuf = np.zeros(est._room_need + 1, dtype=np.int64)
    for name in ("gs", "gn", "gt0", "evt", "evg", "evb"):
        a = getattr(est, name)
        setattr(est, name, a[:5].copy())
    est.gn[:] = -1


@settings(max_examples=200, deadline=None)
@given(streams())
def test_compiled_hints_estimate_exactly_as_the_interpreted(w):
    steps, refit = w
    ref = HintsReuse(2 * U, DEPTH, refit_requests=refit)
    jit = CompiledHintsReuse(2 * U, DEPTH, refit_requests=refit)
    _small(jit)
    for t, path, state, created, sid, stop, agent, sub, turn, resbits in steps:
        res = np.asarray(resbits, dtype=np.uint8)
        for est in (ref, jit):
            est.H = float("inf") if turn % 3 == 0 else 60.0 * (turn + 1)
        a = ref.tick(t, res)
        b = jit.tick(t, res)
        assert (a is None) == (b is None)
        if a is not None:
            assert a.tolist() == b.tolist()
        meta = _meta(path, t, sid, stop, agent, sub, turn)
        p = np.asarray(path, dtype=np.int64)
        q = 2 * state + 1 if state >= 0 else -1
        assert ref.access(p, q, t, meta).tolist() == jit.access(p, q, t, meta).tolist()
        qs = 2 * np.asarray(created, dtype=np.int64) + 1
        assert ref.created_states(qs, t, meta).tolist() == jit.created_states(qs, t, meta).tolist()
        for name in ("E", "start", "cls", "touches", "sup", "stop", "sub", "turn", "D", "C", "Q"):
            assert np.array_equal(getattr(ref, name), getattr(jit, name), equal_nan=name == "start"), name
    _same_groups(ref, jit)


def _same_groups(ref, jit):
    """The compiled groups are the interpreted ones, in id order: members in order, starts, and
    the scheduled re-evaluations of the live groups. Ids agree up to the renumbering
    (CompiledHintsReuse._renumber keeps their order), so groups are compared by rank."""
    assert jit.gid_base + jit.GM[jit.J.G_NEXT] == ref.next_gid
    n = int(jit.GM[jit.J.G_NEXT])
    ids = np.flatnonzero(jit.gn[:n] >= 0).tolist()
    mine = [(jit.gbuf[jit.gs[g]:jit.gs[g] + jit.gn[g]].tolist(), float(jit.gt0[g])) for g in ids]
    theirs = sorted(ref.groups)
    assert mine == [(ref.groups[g][0].tolist(), ref.groups[g][1]) for g in theirs]
    rank_mine = {g: i for i, g in enumerate(ids)}
    rank_ref = {g: i for i, g in enumerate(theirs)}
    ne = int(jit.GM[jit.J.G_EVN])
    due = sorted((t, rank_mine[g], b) for t, g, b in zip(jit.evt[:ne].tolist(), jit.evg[:ne].tolist(),
                                                          jit.evb[:ne].tolist()) if g in rank_mine)
    assert due == sorted((t, rank_ref[g], b) for t, g, b in ref.events if g in rank_ref)


def test_the_member_buffer_compacts_and_keeps_every_group(monkeypatch):
    """Three sessions over 300 requests with long and short gaps: the compiled member buffer is
    compacted many times and the groups, scheduled re-evaluations and estimates stay those of the
    interpreted estimator."""
    calls, renumbered = [], []
    orig, orig_r = CompiledHintsReuse._compact, CompiledHintsReuse._renumber
    monkeypatch.setattr(CompiledHintsReuse, "_compact", lambda self: (calls.append(1), orig(self)))
    monkeypatch.setattr(CompiledHintsReuse, "_renumber", lambda self: (renumbered.append(1), orig_r(self)))
    ref = HintsReuse(2 * U, DEPTH, refit_requests=50)
    jit = CompiledHintsReuse(2 * U, DEPTH, refit_requests=50)
    _small(jit)
    rng = np.random.default_rng(7)
    t = 0.0
    res = np.ones(2 * U, dtype=np.uint8)
    for i in range(300):
        t += float(rng.choice([1.0, 20.0, 3000.0]))
        lo = int(rng.integers(0, U - 6))
        path = np.arange(lo, lo + int(rng.integers(1, 7)), dtype=np.int64)
        meta = _meta(path, t, i % 3, int(rng.integers(0, 5)), 0, bool(i % 2), i // 3 + 1)
        res[rng.integers(0, 2 * U, 4)] ^= 1
        for est in (ref, jit):
            est.H = 500.0
        a, b = ref.tick(t, res), jit.tick(t, res)
        assert (a is None and b is None) or a.tolist() == b.tolist()
        assert ref.access(path, 2 * lo + 1, t, meta).tolist() == jit.access(path, 2 * lo + 1, t, meta).tolist()
    assert len(calls) >= 2 and len(renumbered) >= 2
    assert len(jit.gs) < ref.next_gid // 2            # the group arrays hold the live groups, not all ever made
    assert np.array_equal(ref.E, jit.E) and np.array_equal(ref.D, jit.D) and np.array_equal(ref.C, jit.C)
    _same_groups(ref, jit)
