"""Borrowed array views for numba kernels: views that numba's reference counting skips.

A compiled function increfs every array it receives (each member of a tuple or namedtuple
argument too) at entry and decrefs it at every exit, with atomic instructions. Kernels whose
helpers take a state of many arrays spent most of their time there (decision 90). An entry
point passes :func:`borrow` views of arrays its caller keeps alive for the whole call, and
never of an array a kernel may reallocate during the call."""
from __future__ import annotations

from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["borrow"]


@intrinsic
def borrow(typingctx, arr):
    """A view of ``arr`` without a memory-info pointer (the same type: reference counting is a no-op on it)."""
    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, value=args[0])
        ary.meminfo = cgutils.get_null_value(ary.meminfo.type)
        return ary._getvalue()
    return arr(arr), codegen
