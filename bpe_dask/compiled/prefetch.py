"""Reading ahead (compiled): ``prefetch(array, i)`` asks the CPU to bring ``array[i]`` into its
caches, and returns at once.

Takes an array and an index (not checked: a hint never faults); gives nothing. A loop that reads
words at positions it knows in advance (a pair's list of holders, a permutation) and would
otherwise wait on memory for each in turn names the ones a few steps ahead, so that many reads
are under way at once (the merge loop's first merges read millions of words each, scattered).
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic, overload


def prefetch(array, index) -> None:
    """Nothing, in Python (``NUMBA_DISABLE_JIT``); compiled, LLVM's ``llvm.prefetch``."""


@overload(prefetch)
def _prefetch(array, index):
    return lambda array, index: _llvm_prefetch(array, index)


@intrinsic
def _llvm_prefetch(typingctx, array, index):
    """LLVM's ``llvm.prefetch`` of the element's address: a read, kept in every cache level."""

    def codegen(context, builder, signature, args):
        kind = signature.args[0]
        view = context.make_array(kind)(context, builder, args[0])
        address = cgutils.get_item_pointer(context, builder, kind, view, [args[1]], wraparound=False)
        byte_pointer, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        address = builder.bitcast(address, byte_pointer)
        # The name of LLVM's typed pointers, which LLVMs of opaque pointers read as ``llvm.prefetch.p0``.
        kind_of_call = ir.FunctionType(ir.VoidType(), [byte_pointer, i32, i32, i32])
        function = cgutils.get_or_insert_function(builder.module, kind_of_call, "llvm.prefetch.p0i8")
        builder.call(function, [address, i32(0), i32(3), i32(1)])  # read, keep everywhere, data
        return context.get_dummy_value()

    return types.void(array, types.intp), codegen
