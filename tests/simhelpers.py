"""Small builders for scripted scenarios: traces from chunk paths, nodes, replays."""
from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

import numpy as np
from hypothesis import strategies as st

from cluster_sim.config import HardwareConfig
from cluster_sim.model import load_model
from cluster_sim.node import NodeSim
from cluster_sim.policies.base import make_policy
from cluster_sim.trace.chunks import chunk_trace
from cluster_sim.trace.schema import build_table


def trace_from_paths(paths, *, chunk_tokens=256, tail=10, arrivals=None, sessions=None, category=None, turn=None):
    """One request per path of chunk names (ints); each prompt is ``len(path)*chunk_tokens + tail`` tokens.

    Names are prefix-chained here (hash = the tuple of names so far), so a test can
    write ``[1, 2]`` and ``[1, 3]`` for a branch."""
    ids: dict[tuple, int] = {}
    hashes = []
    for p in paths:
        hs = []
        for k in range(len(p)):
            key = tuple(p[:k + 1])
            hs.append(ids.setdefault(key, len(ids) + 1))
        hs.append(10**9 + len(hashes))        # the partial tail block's hash
        hashes.append(hs)
    n = len(paths)
    table = build_table(
        arrival_s=np.arange(n, dtype=float) if arrivals is None else np.asarray(arrivals, dtype=float),
        input_tokens=[len(p) * chunk_tokens + tail for p in paths],
        output_tokens=[0] * n,
        block_hashes=hashes,
        block_tokens=chunk_tokens,
        source="test",
        session_id=sessions,
        category=category,
        turn=turn,
    )
    return chunk_trace(table, chunk_tokens)


def make_node(trace, model="qwen3_next_80b_a3b", *, policy="lru", policy_params=None, **hw):
    spec = load_model(model) if isinstance(model, str) else model
    hwc = HardwareConfig.from_mapping(hw)
    return NodeSim(trace.parent, trace.depth, trace.anchor, trace.flat, trace.chunk_tokens, spec, hwc,
                   make_policy(policy, policy_params or {}))


def replay(node, trace, check=True):
    recs = []
    for i in range(trace.n_requests):
        recs.append(node.process(trace.path(i), int(trace.input_tokens[i]), float(trace.arrival_s[i])))
        if check:
            node.st.check_invariants()
    node.finish()
    return recs


def branching_paths(draw, max_requests=40, max_extension=5):
    """Inside a ``@st.composite``: 3..``max_requests`` chunk paths (names 1..6), each either fresh
    or a prefix of an earlier path extended by up to ``max_extension`` chunks (branches, resumes)."""
    n = draw(st.integers(3, max_requests))
    paths = []
    for _ in range(n):
        if paths and draw(st.booleans()):
            base = draw(st.sampled_from(paths))
            keep = draw(st.integers(0, len(base)))
            p = base[:keep] + draw(st.lists(st.integers(1, 6), max_size=max_extension))
        else:
            p = draw(st.lists(st.integers(1, 6), max_size=6))
        paths.append(p)
    return paths


def run_cli(argv, cwd: Path):
    """``cluster-sim`` in this process: (exit status, stdout, stderr lines)."""
    from cluster_sim.cli import main

    out, err = io.StringIO(), io.StringIO()
    old = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(list(argv))
    finally:
        os.chdir(old)
    return rc, out.getvalue(), [ln for ln in err.getvalue().splitlines() if ln.strip()]


def assert_runs_identical(a, b) -> None:
    """Two ``cluster_sim.run`` results (``output.requests=true``) agree on every figure but the
    ``sim_*`` timings: fleet and node summaries, the epoch table and the request table."""
    def strip(d):
        return {k: v for k, v in d.items() if not k.startswith("sim_")}
    assert strip(a.fleet) == strip(b.fleet)
    assert [strip(d) for d in a.nodes] == [strip(d) for d in b.nodes]
    assert a.epoch_table.equals(b.epoch_table)      # per-tier occupancy, evictions, write-hits, hits too
    assert a.request_table.equals(b.request_table)  # per-request latency and TTFT
