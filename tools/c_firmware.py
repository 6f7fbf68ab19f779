"""The C example firmwares (examples/c_firmware) built on the code the emulator generates from a bus map.

    python -m tools.c_firmware ella_pid_udp.c udp_10khz build/     # prints the binary's path

``build`` runs ``hil bus export <map> --c <dir>`` (cantools' generator and the protocol helpers) and
compiles the example with them, warnings as errors, so a changed map or generator that breaks the
example fails here instead of at run time.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "c_firmware"
COMPILER_FLAGS = ("-O2", "-Wall", "-Wextra", "-Werror")


def compiler() -> str | None:
    """The C compiler on PATH (cc, else gcc), or None."""
    return shutil.which("cc") or shutil.which("gcc")


def build(source: str, bus: str, out_dir: Path) -> Path:
    """examples/c_firmware/`source` compiled against `bus`'s generated C code in `out_dir`; the
    binary's path. RuntimeError naming the step that failed (no compiler, the export, the compile)."""
    cc = compiler()
    if cc is None:
        raise RuntimeError("no C compiler (cc or gcc) on PATH")
    out_dir = Path(out_dir)
    export = subprocess.run([sys.executable, "-m", "hil", "bus", "export", bus, "--c", str(out_dir)],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    if export.returncode != 0:
        raise RuntimeError(f"hil bus export {bus} --c: {_first_error(export.stderr)}")
    name = Path(bus).stem
    binary = out_dir / Path(source).stem
    compiled = subprocess.run([cc, *COMPILER_FLAGS, "-I", str(out_dir), "-o", str(binary), str(EXAMPLES / source),
                               str(out_dir / f"{name}.c"), str(out_dir / f"{name}_protocol.c"), "-lm"],
                              capture_output=True, text=True, timeout=300)
    if compiled.returncode != 0:
        raise RuntimeError(f"{cc} {source}: {_first_error(compiled.stderr)}")
    return binary


def _first_error(text: str) -> str:
    """The first line that names an error (a compiler's first complaint is the cause), else the last."""
    lines = text.strip().splitlines()
    return next((line for line in lines if "error" in line.lower()), lines[-1] if lines else "failed without a message")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print("usage: python -m tools.c_firmware SOURCE BUS OUT_DIR", file=sys.stderr)
        return 2
    try:
        print(build(*args[:2], Path(args[2])))
    except RuntimeError as exc:
        print(f"c_firmware: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
