"""Elementwise ``exp``, ``exp2``, ``log``, ``log1p`` and ``power`` over arrays, computed by the C
library's scalar functions, so that a result is the same bits on every x86-64 CPU.

numpy computes these ufuncs with kernels chosen by the CPU it runs on: on a CPU with AVX-512,
float64 ``power``, ``exp2``, ``log1p`` (Intel SVML) and ``exp``, ``log`` (numpy's own AVX-512F
code) differ from the C library in the last bit for some inputs; elsewhere numpy calls the C
library. A policy whose decisions read such values (Gandalf's reuse table, a decaying heat) and a
generator whose trace does (lognormal lengths and think times) then give different results on
different machines, and on a Ray cluster of mixed machines a node's results would depend on the
worker that ran it (decision 131). The loops here are compiled with numba, whose ``math``
functions call the C library (the package turns numba's optional SVML off before numba loads, in
``cluster_sim/__init__``), and are checked bit for bit against Python's ``math`` in the tests.

Inputs are converted to contiguous float64; ``power`` broadcasts like ``np.power``. Each
function returns a new float64 array of the broadcast shape (a 0-d input gives a 0-d array).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["exp", "exp2", "log", "log1p", "power"]


@njit(cache=True)
def _exp(x, out):
    for i in range(x.size):
        out[i] = math.exp(x[i])


@njit(cache=True)
def _exp2(x, out):
    for i in range(x.size):
        out[i] = math.exp2(x[i])


@njit(cache=True)
def _log(x, out):
    for i in range(x.size):
        v = x[i]
        # numpy's conventions where the C library would raise through numba: nan below 0, -inf at 0
        out[i] = math.log(v) if v > 0.0 else (-math.inf if v == 0.0 else math.nan)


@njit(cache=True)
def _log1p(x, out):
    for i in range(x.size):
        v = x[i]
        out[i] = math.log1p(v) if v > -1.0 else (-math.inf if v == -1.0 else math.nan)


@njit(cache=True)
def _power(a, b, out):
    for i in range(a.size):
        out[i] = math.pow(a[i], b[i])


def _unary(kernel, x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty(flat.size, dtype=np.float64)
    if flat.size:
        kernel(flat, out)
    return out.reshape(x.shape)


def exp(x) -> np.ndarray:
    """``e**x`` elementwise (the C library's ``exp``)."""
    return _unary(_exp, x)


def exp2(x) -> np.ndarray:
    """``2**x`` elementwise (the C library's ``exp2``)."""
    return _unary(_exp2, x)


def log(x) -> np.ndarray:
    """Natural logarithm elementwise (the C library's ``log``; nan below 0, -inf at 0)."""
    return _unary(_log, x)


def log1p(x) -> np.ndarray:
    """``log(1 + x)`` elementwise (the C library's ``log1p``; nan below -1, -inf at -1)."""
    return _unary(_log1p, x)


def power(a, b) -> np.ndarray:
    """``a**b`` elementwise with numpy's broadcasting (the C library's ``pow``)."""
    a, b = np.broadcast_arrays(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    shape = a.shape
    fa = np.ascontiguousarray(a).reshape(-1)
    fb = np.ascontiguousarray(b).reshape(-1)
    out = np.empty(fa.size, dtype=np.float64)
    if fa.size:
        _power(fa, fb, out)
    return out.reshape(shape)
