"""Gandalf's reuse estimators beyond the paper (policies/reuse.py): the session-aware survival
model (``reuse=hints``) and the online logistic model (``reuse=learned``), by hand and in runs
with long idle periods."""
from __future__ import annotations

import math

import numpy as np
import pytest

from cluster_sim.model import load_model
from cluster_sim.policies.base import RequestMeta
from cluster_sim.policies.reuse import HintsReuse, LearnedReuse, age_bin

from simhelpers import make_node, trace_from_paths

TOOL, END = 1, 2


def meta(path, t, session=0, stop=TOOL, agent=0, turn=1):
    return RequestMeta(seq=turn, arrival_s=t, session_id=session, category=None, turn=turn, input_tokens=0,
                       output_tokens=0, path=np.asarray(path, dtype=np.int64), hit_chunks=0, resident_chunks=0,
                       stop_reason=stop, agent=agent)


def test_age_bins_are_powers_of_two():
    assert age_bin([0.0, 0.99, 1.0, 1.5, 2.0, 3.9, 4.0, 1e12]).tolist() == [0, 0, 1, 1, 2, 2, 3, 23]


def test_survival_by_hand_one_class():
    """Ten chunks touched once by a tool_use request: four come back after 3 s, six never (still
    open at t = 100). With H = 10 s the probability of a touch within 10 s of a fresh reference is
    4/10; once a reference has survived 8 s with nothing more seen it is 0 (the six that are left
    never came back)."""
    est = HintsReuse(40, np.ones(20, dtype=np.int64), refit_requests=1, pseudo=0.0)
    path = np.arange(10)
    est.access(path, -1, 0.0, meta(path, 0.0, session=-1))
    est.access(path[:4], -1, 3.0, meta(path[:4], 3.0, session=-1))
    est.H = 10.0
    est.refit(100.0)
    k = est.fa_class(TOOL, False, [1], False, 0)[0]
    assert est.Q[k, 0] == pytest.approx(0.4)
    assert est.Q[k, age_bin(8.0)] == pytest.approx(0.0)
    # the four came back as their second touch: a class of their own
    k2 = est.fa_class(TOOL, False, [2], False, 0)[0]
    assert k2 != k and est.D[k].sum() == 4 and est.D[k2].sum() == 0


def test_a_session_that_moves_on_supersedes_what_it_left_behind():
    est = HintsReuse(40, np.ones(20, dtype=np.int64))
    est.access(np.arange(6), -1, 0.0, meta(np.arange(6), 0.0, turn=1))
    # the next request keeps only the first three chunks (a rewritten history)
    est.access(np.arange(3), -1, 5.0, meta(np.arange(3), 5.0, turn=2))
    fa = 2 * np.arange(6)
    assert est.sup[fa].tolist() == [False] * 3 + [True] * 3
    assert est.C.sum() == 3                       # three references ended untouched (censored)
    assert est.D.sum() == 3                       # three touched again after 5 s
    # another session's request does not supersede anything of session 0
    est.access(np.arange(10, 12), -1, 6.0, meta(np.arange(10, 12), 6.0, session=1))
    assert est.C.sum() == 3


def _two_sessions_trace():
    """Session 0 works in a tool loop (a request every 10 s), session 1 has a human on the other
    end (end_turn, answers after 60 s) — then both go quiet: session 0 after a tool call, which
    in this history always came back within 10 s, session 1 after end_turn."""
    paths, t, sess, stops = [], [], [], []
    a, b = [1, 2, 3], [11, 12, 13]
    for k in range(40):
        paths.append(a + [100 + k])
        a = a + [100 + k]
        t.append(10.0 * k)
        sess.append(0)
        stops.append(TOOL)
        if k % 6 == 0:
            paths.append(b + [500 + k])
            b = b + [500 + k]
            t.append(10.0 * k + 5)
            sess.append(1)
            stops.append(END)
    order = np.argsort(t, kind="stable")
    return [paths[i] for i in order], [t[i] for i in order], [sess[i] for i in order], [stops[i] for i in order]


def test_hints_a_tool_loop_that_stops_is_dead_a_human_pause_is_not():
    paths, t, sess, stops = _two_sessions_trace()
    model = load_model("llama3_1_70b")
    tr = trace_from_paths(paths, arrivals=t)
    node = make_node(tr, model, policy="gandalf", policy_params={"reuse": "hints", "refit_requests": 5},
                     hbm_cache_bytes=0, dram_bytes="1TB", ssd_bytes="1TB")
    for i in range(tr.n_requests):
        node.process(tr.path(i), int(tr.input_tokens[i]), float(tr.arrival_s[i]), session_id=sess[i],
                     stop_reason=stops[i], turn=i + 1)
    pol = node.policy
    est = pol.est
    last0 = int(tr.path(max(i for i in range(tr.n_requests) if sess[i] == 0))[-1])
    last1 = int(tr.path(max(i for i in range(tr.n_requests) if sess[i] == 1))[-1])
    est.H = 600.0
    est.refit(t[-1] + 2 * 3600.0)
    later = t[-1] + 2 * 3600.0
    e0 = est.value(np.asarray([2 * last0]), later)[0]
    e1 = est.value(np.asarray([2 * last1]), later)[0]
    # two hours after its last tool call session 0 is dead; session 1's human may still answer
    # (only the censored tail of end_turn gaps is left: every one seen came back after 60 s)
    assert e0 < 0.05
    fresh0 = est.value(np.asarray([2 * last0]), t[-1] + 1.0)[0]
    assert fresh0 > 0.5                              # one second after a tool call: it comes back
    assert e1 >= e0


@pytest.mark.parametrize("reuse", ["hints", "learned"])
def test_estimates_are_probabilities_and_runs_keep_the_invariants_over_days(reuse):
    """Sessions with multi-day idle periods (as in the whole WEKA trace): estimates stay in [0, 1],
    the node's invariants hold after every request, and the SSD's characteristic time is measured."""
    rng = np.random.default_rng(3)
    paths, t, sess, stops = [], [], [], []
    clock = 0.0
    heads = {s: [s * 1000 + 1] for s in range(6)}
    for k in range(300):
        s = int(rng.integers(6))
        p = heads[s] + [s * 1000 + 10 + k]
        heads[s] = p if rng.random() < 0.8 else heads[s][:1] + [s * 1000 + 500 + k]
        clock += float(rng.choice([2.0, 20.0, 300.0, 3 * 86400.0], p=[0.5, 0.3, 0.17, 0.03]))
        paths.append(p)
        t.append(clock)
        sess.append(s)
        stops.append(int(rng.choice([TOOL, END])))
    model = load_model("qwen3_next_80b_a3b")
    F = model.fa_bytes(256)
    tr = trace_from_paths(paths, arrivals=t)
    node = make_node(tr, model, policy="gandalf", policy_params={"reuse": reuse, "refit_requests": 20,
                                                                  "objective": "chunks"},
                     hbm_cache_bytes=0, dram_bytes=12 * F + 3 * model.state_bytes(2048), ssd_bytes=40 * F)
    for i in range(tr.n_requests):
        node.process(tr.path(i), int(tr.input_tokens[i]), float(tr.arrival_s[i]), session_id=sess[i],
                     stop_reason=stops[i], turn=i + 1)
        node.st.check_invariants()
        E = node.policy.est.E
        assert np.all((E >= 0) & (E <= 1))
    c = node.policy.counters()
    assert c["ssd_evictions"] > 0 and node.policy.log_age is not None     # the characteristic time is measured
    assert c["estimator_refits"] >= 10
    if reuse == "learned":
        assert c["model_fits"] >= 1


def test_learned_model_learns_a_planted_signal_deterministically():
    """References of tool_use requests come back within a second, those of end_turn requests
    never: after a refit the model separates them, and two identical runs give identical weights."""
    def run():
        est = LearnedReuse(4000, np.ones(2000, dtype=np.int64), refit_requests=10, samples_per_group=50,
                           label_cap_s=30.0)
        t = 0.0
        for k in range(60):
            tool = np.arange(10 * k, 10 * k + 10)
            end = np.arange(1000 + 10 * k, 1000 + 10 * k + 10)
            est.access(tool, -1, t, meta(tool, t, session=-1, stop=TOOL))
            est.access(end, -1, t, meta(end, t, session=-1, stop=END))
            est.access(tool, -1, t + 0.5, meta(tool, t + 0.5, session=-1, stop=TOOL))
            t += 100.0
        est.H = 30.0
        est.refit(t)
        return est
    a, b = run(), run()
    assert a.fits == 1 and np.array_equal(a.w, b.w)
    # fresh references: a chunk just touched by a tool_use request, and one by an end_turn request
    # (a chunk touched the second time never came back in this history: touches count too)
    t = 6000.0
    a.access(np.asarray([700]), -1, t, meta([700], t, session=-1, stop=TOOL))
    a.access(np.asarray([1900]), -1, t, meta([1900], t, session=-1, stop=END))
    p_tool = a.value(np.asarray([1400]), t + 0.1)[0]
    p_end = a.value(np.asarray([3800]), t + 0.1)[0]
    p_second = a.value(np.asarray([2 * 5]), t)[0]
    assert p_tool > 0.7 > 0.3 > max(p_end, p_second)
    assert math.isfinite(p_tool)


def _human_every_two_hours():
    """Session 0: a human who comes back every two hours for three days, extending one
    conversation. Between returns, 20 one-off agent sessions of four tool-loop requests each
    (never used again) keep DRAM and the SSD busy."""
    paths, t, sess, stops, turns = [], [], [], [], []
    a = [1, 2]
    for h in range(36):
        t0 = h * 7200.0
        a = a + [1000 + h]
        paths.append(list(a)), t.append(t0), sess.append(0), stops.append(END), turns.append(h + 1)
        for j in range(20):
            s = 1 + h * 20 + j
            base = [100000 + s * 10]
            for r in range(4):
                base = base + [100000 + s * 10 + r + 1]
                paths.append(list(base)), t.append(t0 + 60 + j * 300 + r * 10), sess.append(s)
                stops.append(TOOL if r < 3 else END), turns.append(r + 1)
    o = np.argsort(t, kind="stable")
    return tuple([x[i] for i in o] for x in (paths, t, sess, stops, turns))


def test_a_session_idle_for_hours_is_kept_by_hints_and_forgotten_by_the_paper_estimator():
    """The long-span case of the whole WEKA trace in miniature: the reconstruction's τ = 10 min
    forgetting values a two-hour-old chunk at e^-12 of a fresh one, so every return of session 0
    misses and every one-off is written; hints learns that a session on its 10th turn that ended
    with end_turn comes back, and that the one-off tool loops never do."""
    paths, t, sess, stops, turns = _human_every_two_hours()
    m = load_model("llama3_1_70b")
    F = m.fa_bytes(256)
    out = {}
    for name, params in (("paper", {"reuse": "rate", "objective": "dollars"}), ("hints", {})):
        tr = trace_from_paths(paths, arrivals=t)
        node = make_node(tr, m, policy="gandalf", policy_params=params, hbm_cache_bytes=0, dram_bytes=8 * F,
                         ssd_bytes=60 * F)
        hits = 0
        for i in range(tr.n_requests):
            r = node.process(tr.path(i), int(tr.input_tokens[i]), float(tr.arrival_s[i]), session_id=sess[i],
                             stop_reason=stops[i], turn=turns[i])
            node.st.check_invariants()
            hits += r["h"] if sess[i] == 0 else 0
        node.finish()
        out[name] = (hits, node.stats.ssd_bytes_written_fa // F)
    assert out["paper"][0] == 0 and out["paper"][1] > 3000
    assert out["hints"][0] >= 150 and out["hints"][1] <= 100
