"""Borrowed array views for numba kernels: views that numba's reference counting skips.

A compiled function increfs every array it receives (each member of a tuple or namedtuple
argument too) at entry and decrefs it at every exit, with atomic instructions. Kernels whose
helpers take a state of many arrays spent most of their time there (decision 90). An entry
point passes :func:`borrow` views of arrays its caller keeps alive for the whole call, and
never of an array a kernel may reallocate during the call."""
from __future__ import annotations

from numba.core import cgutils, types
from numba.core.datamodel import models, register_default
from numba.core.imputils import lower_cast
from numba.extending import intrinsic

__all__ = ["BorrowedArray", "borrow", "seg_view"]


class BorrowedArray(types.Array):
    """The type of a borrowed view: a numpy array whose reference counting is compiled out.

    Every array operation accepts it (it is a :class:`numba.types.Array`), but its data model
    hides the memory-info pointer from numba's reference counting, so assigning, passing or
    dropping one emits no ``NRT_incref`` / ``NRT_decref`` call at all. (A plain array type with a
    null pointer still pays one opaque call per array, per assignment, per inlined level: the
    calls were 11% of Gandalf's kernel samples, and they keep LLVM from holding values in
    registers across them.) A slice or a unification with a plain array gives a plain array,
    whose counting is then a run-time no-op on the null pointer."""

    def __init__(self, dtype, ndim, layout, readonly=False, aligned=True):
        super().__init__(dtype, ndim, layout, readonly=readonly, aligned=aligned,
                         name=f"borrowed({dtype}, {ndim}d, {layout}{', readonly' if readonly else ''})")

    def __repr__(self):
        return f"BorrowedArray({self.dtype!r}, {self.ndim}, {self.layout!r}, readonly={not self.mutable})"


@register_default(BorrowedArray)
class _BorrowedArrayModel(models.ArrayModel):
    """numba's array model without the memory-info member among the ones reference counting visits."""

    def traverse(self, builder):
        return [m for m, name in zip(super().traverse(builder), self._fields) if name != "meminfo"]

    def inner_models(self):
        return [m for m, name in zip(super().inner_models(), self._fields) if name != "meminfo"]


@lower_cast(BorrowedArray, types.Array)
def _borrowed_to_array(context, builder, fromty, toty, val):
    return val            # the same structure; the target type counts the null pointer (a no-op)


def _borrowed_type(arr):
    return BorrowedArray(arr.dtype, arr.ndim, arr.layout, readonly=not arr.mutable, aligned=arr.aligned)


@intrinsic
def borrow(typingctx, arr):
    """A view of ``arr`` without a memory-info pointer (the same type: reference counting is a no-op on it)."""
    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, value=args[0])
        ary.meminfo = cgutils.get_null_value(ary.meminfo.type)
        return ary._getvalue()
    return _borrowed_type(arr)(arr), codegen


@intrinsic
def seg_view(typingctx, arr, lo, hi, dtype):
    """Bytes ``lo:hi`` of the 1-D C-contiguous array ``arr`` as a 1-D array of ``dtype`` (a numpy scalar
    type: ``np.int32``, ``np.bool_``...), borrowed like :func:`borrow`'s views: one array built in place,
    where a slice and two ``view`` calls would build three (and count each in and out). ``lo`` must be
    aligned for ``dtype`` and ``hi - lo`` a multiple of its size; the caller keeps ``arr`` alive."""
    from llvmlite import ir
    from numba.np.arrayobj import populate_array

    if not isinstance(dtype, types.NumberClass) or not isinstance(arr, types.Array) or arr.ndim != 1 \
            or arr.layout != "C":
        return None
    dt = dtype.instance_type
    rt = BorrowedArray(dt, 1, "C")

    def codegen(context, builder, sig, args):
        src = context.make_array(sig.args[0])(context, builder, value=args[0])
        lo_v = context.cast(builder, args[1], sig.args[1], types.intp)
        hi_v = context.cast(builder, args[2], sig.args[2], types.intp)
        out = context.make_array(rt)(context, builder)
        llty = context.get_data_type(dt)
        size = context.get_abi_sizeof(llty)
        itemsize = context.get_constant(types.intp, size)
        raw = builder.gep(builder.bitcast(src.data, ir.IntType(8).as_pointer()), [lo_v])
        n = builder.sdiv(builder.sub(hi_v, lo_v), itemsize)
        populate_array(out, data=builder.bitcast(raw, llty.as_pointer()), shape=cgutils.pack_array(builder, [n]),
                       strides=cgutils.pack_array(builder, [itemsize]), itemsize=itemsize,
                       meminfo=cgutils.get_null_value(out.meminfo.type))
        return out._getvalue()
    return rt(arr, lo, hi, dtype), codegen
