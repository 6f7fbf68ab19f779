"""ELLA HIL: the plant side of a hardware-in-the-loop emulator for flexible robot arms."""
import gc
from collections.abc import Iterator
from contextlib import contextmanager

from . import jit_cache


@contextmanager
def collector_paused() -> Iterator[None]:
    """The garbage collector paused over imports that make mostly long-lived objects (numba's typing,
    the kernels' dispatchers: ~100 000 objects, whose passes of the collector while they are made
    cost ~40 ms of the start-up); its previous state restored after, and the objects made meanwhile
    handed to its oldest generation, which only a full collection walks: the young collection after
    the pause would walk them all (~20 ms) to free the import's few cycles (~30 000 small objects),
    which a full collection frees as well. Where objects are frozen (gc.freeze), the caller's, the
    collector's generations are left as they are (the hand-over goes through the frozen set)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()         # every tracked object to the permanent generation, then all of them to
            gc.unfreeze()       # the oldest: two list splices, no walk
        if collecting:
            gc.enable()


with collector_paused():
    jit_cache.configure()
