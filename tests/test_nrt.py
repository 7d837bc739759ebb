"""Borrowed views (cluster_sim._nrt): their type compiles reference counting out, and every array
operation the kernels use still works on them, with the values of the plain arrays."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

numba = pytest.importorskip("numba", reason="borrowed views are numba types; numba is not installed")
from numba import njit  # noqa: E402
from numba.typed import List  # noqa: E402

from cluster_sim._nrt import BorrowedArray, borrow, seg_view  # noqa: E402


@njit
def _sum_while_positive(C, p):
    """A callee with branches and loops, so reference counts of plain arrays survive numba's pruning."""
    s = 0.0
    for i in range(p):
        if C[0][i] > 0:
            s += C[1][i]
        else:
            return -1.0
    return s


@njit
def _via_plain(a, b, n):
    s = 0.0
    for _ in range(n):
        s += _sum_while_positive((a, b), 5)
    return s


@njit
def _via_borrowed(a, b, n):
    s = 0.0
    C = (borrow(a), borrow(b))
    for _ in range(n):
        s += _sum_while_positive(C, 5)
    return s


def _nrt_calls(dispatcher, borrowed: bool) -> int:
    sigs = [s for s in dispatcher.signatures if isinstance(s[0][0], BorrowedArray) == borrowed]
    assert len(sigs) == 1
    ir = dispatcher.inspect_llvm(sigs[0])
    return ir.count("call void @NRT_incref(") + ir.count("call void @NRT_decref(")


def test_borrowed_views_compile_without_reference_counting():
    a, b = np.ones(10), np.arange(10.0)
    assert _via_plain(a, b, 3) == _via_borrowed(a, b, 3) == 30.0
    assert _nrt_calls(_sum_while_positive, borrowed=False) > 0      # the control: plain arrays are counted
    assert _nrt_calls(_sum_while_positive, borrowed=True) == 0


@njit
def _operations(a, n):
    x = borrow(a)
    L = List()
    L.append(a)
    L.append(x)                          # cast to the list's plain array type
    y = x if n > 2 else a                # unified with a plain array
    z = x[1:4]                           # a slice
    x[0] = 7.0                           # writes reach the array
    return (L[1].sum(), y.sum(), z.sum(), len(x), x.shape[0], x.size, np.searchsorted(x[1:], 2.5),
            x.copy().sum(), borrow(x)[2])


def test_borrowed_views_support_the_operations_kernels_use():
    a = np.arange(10.0)
    got = _operations(a, 5)
    assert got == (52.0, 52.0, 6.0, 10, 10, 10, 2, 52.0, 2.0)   # the tuple is built after the write
    assert a[0] == 7.0


@njit
def _segment(buf):
    v = seg_view(buf, 8, 24, np.int32)
    v[1] = -3
    return v.sum(), len(v)


def test_seg_view_is_a_borrowed_view_of_the_bytes():
    buf = np.zeros(4, np.int64)
    assert _segment(buf) == (-3, 4)
    assert buf.view(np.int32)[3] == -3
    typ = _segment.nopython_signatures[0].args[0]
    assert not isinstance(typ, BorrowedArray)        # the argument is the caller's plain array


def test_the_type_survives_numbas_cache():
    """Cached kernels store their signatures pickled: the type must come back equal, and distinct
    from the plain array type of the same key."""
    t = BorrowedArray(numba.types.float64, 1, "C")
    assert pickle.loads(pickle.dumps(t)) == t
    assert t != numba.types.float64[::1]
    assert BorrowedArray(numba.types.int32, 1, "C", readonly=True) != BorrowedArray(numba.types.int32, 1, "C")
