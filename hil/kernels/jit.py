"""The decorator of the kernels: numba-compiled, cached, without reference counting.

numba counts references to every array a compiled function receives, slices or passes on, with
an atomic increment and decrement (its runtime, NRT), and can drop a pair only when no call that
takes the array lies between them. The kernels call each other with the flat arrays throughout,
so the counting cost a tenth of a microsecond per call level: ELLA's forward dynamics 3.2 -> 2.8 us,
a rigid 30-joint chain 7.6 -> 5.3 us inside numba. The kernels allocate nothing and keep no array
beyond a call, so they need no counting; numba's `_nrt` option compiles them without it, and then
refuses to compile an allocation or a returned view (which would need it). Where a numba version
does not know the option, the kernels compile with counting (slower, same results).
"""
from numba import njit, typeof
from numba.core.cpu import CPUTargetOptions

_NO_REFCOUNT = {"_nrt": False} if hasattr(CPUTargetOptions, "_nrt") else {}


def kernel(fn):
    """@njit(cache=True), without numba's reference counting (module docstring)."""
    return njit(cache=True, **_NO_REFCOUNT)(fn)


def bound_call(dispatcher, args: tuple):
    """`dispatcher`'s compiled function for the types of `args` (compiled or loaded from the cache now),
    to be called directly: without the dispatcher's type resolution of each argument (about 10 ns
    an array argument; 0.4 us of a call with 40). The caller must pass arguments of exactly these
    types on every call (the same arrays, bound once; scalars of the same kind): nothing checks them."""
    sig = tuple(typeof(a) for a in args)
    dispatcher.compile(sig)
    return dispatcher.overloads[sig].entry_point
