"""Results do not depend on the CPU's float kernels (decision 131).

numpy picks its float64 ``exp``/``log``/``power``/``exp2``/``log1p`` kernels by CPU: on AVX-512
machines they differ from the C library in the last bit. ``cluster_sim.libm`` computes them with
the C library everywhere. These tests (1) check it against Python's ``math`` bit for bit, and
(2) stand in for "another CPU": numpy's ufuncs are replaced by versions one ulp off, and runs,
estimators and generated traces must not move. Before decision 131 Gandalf's reuse table went
through ``np.power`` and the whole-WEKA default Gandalf missed 0.0604 on AVX-512 machines and
0.0621 on this AVX2 one.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import cluster_sim
from cluster_sim import libm


def _ref(fn, *arrays):
    flat = [np.broadcast_to(a, np.broadcast_shapes(*(np.shape(x) for x in arrays))).ravel().tolist() for a in arrays]
    return np.array([fn(*v) for v in zip(*flat)], dtype=np.float64)


def _safe(fn, lo):
    def f(v):
        if v > lo:
            return fn(v)
        return -math.inf if v == lo else math.nan
    return f


def test_each_function_is_the_c_library_bit_for_bit():
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.standard_normal(20_000) * 30, [0.0, -0.0, 1.0, -1.0, 700.0, -745.0, 1e-300]])
    pos = np.concatenate([rng.random(20_000) * 1e6, rng.random(1000) * 1e-6, [0.0, 1.0, -1.0, -2.0, math.inf]])
    np.testing.assert_array_equal(libm.exp(x), _ref(math.exp, x))
    np.testing.assert_array_equal(libm.exp2(x), _ref(math.exp2, x))
    np.testing.assert_array_equal(libm.log(pos), _ref(_safe(math.log, 0.0), pos))
    np.testing.assert_array_equal(libm.log1p(pos - 1.0), _ref(_safe(math.log1p, -1.0), pos - 1.0))
    base = rng.random(20_000) * 3
    ex = rng.standard_normal(20_000) * 4
    np.testing.assert_array_equal(libm.power(base, ex), _ref(math.pow, base, ex))


def test_shapes_dtypes_and_broadcasting_follow_numpy():
    a = np.arange(1, 7, dtype=np.int64).reshape(2, 3)
    out = libm.power(a, np.array([0.5, 1.0, 2.0]))
    assert out.shape == (2, 3) and out.dtype == np.float64
    np.testing.assert_array_equal(out, _ref(math.pow, a.astype(float), np.array([0.5, 1.0, 2.0])).reshape(2, 3))
    assert libm.exp(np.zeros((0, 4))).shape == (0, 4)
    assert libm.log1p(np.float64(0.0)).shape == () and float(libm.log1p(3.0)) == math.log1p(3.0)
    v = np.arange(10.0)[::3]                                   # not contiguous
    np.testing.assert_array_equal(libm.exp2(v), _ref(math.exp2, v))


def _one_ulp_off(monkeypatch):
    """numpy's transcendental ufuncs, each result moved one ulp up: what another CPU may give."""
    for name in ("exp", "exp2", "log", "log1p", "power", "expm1", "log2", "log10"):
        real = getattr(np, name)

        def off(*a, _real=real, **k):
            r = _real(*a, **k)
            return np.nextafter(r, np.inf)
        monkeypatch.setattr(np, name, off)


def _fleet(over):
    s = cluster_sim.run(cluster_sim.compose(over + ["tracking.enabled=false"]), write=False)
    return {k: v for k, v in s.fleet.items() if not k.startswith("sim_")}


@pytest.mark.parametrize("over", [
    # small tiers, so that Gandalf's cost model decides many drops and writes from its reuse table
    ["policy=gandalf", "hardware.dram_bytes=3GB", "hardware.ssd_bytes=12GB"],
    ["policy=hot_prefix", "policy.half_life_s=120", "hardware.dram_bytes=3GB", "hardware.ssd_bytes=12GB"],
], ids=["gandalf", "hot_prefix-decay"])
def test_a_run_does_not_read_numpys_cpu_dependent_kernels(monkeypatch, over):
    before = _fleet(over)
    assert before["ssd_bytes_written"] > 0 and before["chunk_miss_ratio"] > before["miss_ratio_floor"]
    _one_ulp_off(monkeypatch)
    assert _fleet(over) == before


def test_the_hints_table_does_not_read_numpys_power(monkeypatch):
    from cluster_sim.policies.reuse import HintsReuse

    def table():
        rng = np.random.default_rng(3)
        h = HintsReuse(64, np.arange(32, dtype=np.int64))
        h.D[:] = rng.integers(0, 50, h.D.shape)
        h.C[:] = rng.integers(0, 50, h.C.shape)
        h.H = 600.0
        h.refit(1e4)
        return h.Q.copy()

    q = table()
    assert 0.0 < q.max() <= 1.0 and len(np.unique(q)) > 10
    _one_ulp_off(monkeypatch)
    np.testing.assert_array_equal(table(), q)


def test_a_generated_trace_does_not_read_numpys_cpu_dependent_kernels(monkeypatch):
    from cluster_sim.trace.synthetic import default_spec, generate

    spec = dataclasses.replace(default_spec(), num_sessions=40, think_time_sigma=1.0)
    a = generate(spec, 5)
    _one_ulp_off(monkeypatch)
    b = generate(spec, 5)
    assert a.equals(b)
