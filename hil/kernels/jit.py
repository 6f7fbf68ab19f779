"""The decorator of the kernels: numba-compiled, cached, without reference counting.

numba counts references to every array a compiled function receives, slices or passes on, with
an atomic increment and decrement (its runtime, NRT), and can drop a pair only when no call that
takes the array lies between them. The kernels call each other with the flat arrays throughout,
so the counting cost a tenth of a microsecond per call level: ELLA's forward dynamics 3.2 -> 2.8 us,
a rigid 30-joint chain 7.6 -> 5.3 us inside numba. The kernels allocate nothing and keep no array
beyond a call, so they need no counting; numba's `_nrt` option compiles them without it, and then
refuses to compile an allocation or a returned view (which would need it). Where a numba version
does not know the option, the kernels compile with counting (slower, same results).

Loading from the cache: before it reads a cache entry, numba loads every typing and lowering
registry of its compiler and compiles its runtime (~70 modules, 0.09 s of a `hil simulate` start
of 0.52 s), all of which only compiling needs: the machine code of a kernel compiled without
counting calls neither the registries nor the runtime, only the C helpers numba installs with its
target. A kernel's cache (KernelCache) therefore reads its entries without that refresh; an entry
is still checked against the kernel's source stamp and the machine, and a kernel not in the cache
is compiled as before (numba's compiler refreshes the registries itself).

Both this and bound_call use numba internals (FunctionCache._load_overload, a compile result's
entry_point) and fall back to numba's public paths where they are missing; pyproject.toml bounds
numba to the versions the test suite has passed on, so a new numba is taken only after it passes.
"""
from numba import njit, typeof
from numba.core.caching import FunctionCache
from numba.core.cpu import CPUTargetOptions

_NO_REFCOUNT = {"_nrt": False} if hasattr(CPUTargetOptions, "_nrt") else {}
# the cache entries load without the registries where the kernels compile without counting (module docstring)
_LOAD_WITHOUT_REGISTRIES = bool(_NO_REFCOUNT) and hasattr(FunctionCache, "_load_overload")


class KernelCache(FunctionCache):
    """numba's cache of one kernel, whose entries load without numba's compiler registries."""

    def load_overload(self, sig, target_context):
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)


def kernel(fn=None, *, refcount: bool = False):
    """@njit(cache=True), without numba's reference counting, loaded from the cache without numba's
    compiler registries (module docstring). ``@kernel(refcount=True)``: a function that allocates
    (an array, a list) or returns a view, which needs the counting: plain @njit(cache=True), its
    cache entries loaded with the registries (for what is not in the per-cycle path: a reference
    implementation, a check)."""
    if fn is None:
        return lambda f: kernel(f, refcount=refcount)
    if refcount:
        return njit(cache=True)(fn)
    if not _LOAD_WITHOUT_REGISTRIES:
        return njit(cache=True, **_NO_REFCOUNT)(fn)
    compiled = njit(**_NO_REFCOUNT)(fn)
    compiled._cache = KernelCache(fn)         # what cache=True's enable_caching() sets, with this class
    return compiled


def bound_call(dispatcher, args: tuple):
    """`dispatcher`'s compiled function for the types of `args` (compiled or loaded from the cache now),
    to be called directly: without the dispatcher's type resolution of each argument (about 10 ns
    an array argument; 0.4 us of a call with 40). The caller must pass arguments of exactly these
    types on every call (the same arrays, bound once; scalars of the same kind): nothing checks them."""
    sig = tuple(typeof(a) for a in args)
    dispatcher.compile(sig)
    return getattr(dispatcher.overloads[sig], "entry_point", dispatcher)      # a numba without it: the dispatcher
