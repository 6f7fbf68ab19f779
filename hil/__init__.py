"""ELLA HIL: the plant side of a hardware-in-the-loop emulator for flexible robot arms."""
from . import jit_cache

jit_cache.configure()
