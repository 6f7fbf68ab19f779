"""ELLA HIL: the plant side of a hardware-in-the-loop emulator for flexible robot arms."""
import gc
from collections.abc import Iterator
from contextlib import contextmanager

from . import jit_cache


@contextmanager
def collector_paused() -> Iterator[None]:
    """The garbage collector paused over imports that make only long-lived objects (numba's typing,
    the kernels' dispatchers: ~100 000 objects, whose passes of the collector while they are made
    cost ~40 ms of the start-up and free nothing); its previous state restored after."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


with collector_paused():
    jit_cache.configure()
