"""Run a Python program with numpy, numba and scipy unimportable: `python without_numpy.py PROGRAM.py ARGS...`.
A firmware that needs any of them fails at its import, as it would where they are not installed."""
import importlib.abc
import runpy
import sys

BLOCKED = ("numpy", "numba", "scipy")


class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked: not installed beside the firmware)")
        return None


sys.meta_path.insert(0, Refuse())
if __name__ == "__main__":
    program, sys.argv = sys.argv[1], sys.argv[1:]
    sys.path[0] = str(__import__("pathlib").Path(program).resolve().parent)
    runpy.run_path(program, run_name="__main__")
