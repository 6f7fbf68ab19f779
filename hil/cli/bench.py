"""`hil bench`: the benchmarks of tools/ (arguments passed on)."""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

from hil.cli.registry import CliError, command

BENCHES = {"kernel": "tools.bench_kernel", "loop": "tools.bench_loop", "components": "tools.bench_components",
           "campaign": "tools.bench_campaign", "xcp": "tools.bench_xcp"}


def _bench_module(name: str):
    """A benchmark module of tools/, importable from the repository checkout (not part of the package)."""
    module = BENCHES[name]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name not in ("tools", module):
            raise
    root = Path(__file__).resolve().parents[2]
    if not (root / (module.replace(".", "/") + ".py")).is_file():
        raise CliError(f"{module} is not available (it lives in the repository checkout)")
    sys.path.insert(0, str(root))
    return importlib.import_module(module)


@command("bench", "benchmarks: `hil bench kernel ...` (default), `hil bench loop ...`, `hil bench components ...`, "
                  "`hil bench campaign ...` or `hil bench xcp ...`; "
                  "arguments are passed on",
         passthrough=True)
def _cmd_bench(argv: list[str]) -> int:
    name = argv[0] if argv and argv[0] in BENCHES else "kernel"
    rest = argv[1:] if argv and argv[0] in BENCHES else argv
    return int(_bench_module(name).main(rest) or 0)
