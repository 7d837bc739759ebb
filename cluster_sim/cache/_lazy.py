"""Small numba kernels of the interpreted core, compiled on first use."""
from __future__ import annotations

__all__ = ["LazyKernel"]


class LazyKernel:
    """``fn`` compiled by numba (cached on disk) the first time it is asked for, or ``fallback``
    when numba does not import. Call the instance to get the function; ``box`` holds it once
    chosen (a test may swap it)."""

    def __init__(self, fn, fallback):
        self.fn = fn
        self.fallback = fallback
        self.box: list = []

    def __call__(self):
        if not self.box:
            try:
                from numba import njit
                self.box.append(njit(cache=True)(self.fn))
            except ImportError:
                self.box.append(self.fallback)
        return self.box[0]
