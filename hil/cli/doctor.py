"""`hil doctor --restore`: system settings left changed by a run that died with its guardian, put back."""
from __future__ import annotations

import argparse

from hil.cli.registry import command


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--restore", action="store_true",
                   help="write back every system setting a dead run left changed (its record under the settings "
                        "folder); `hil run` does this itself before it starts")


@command("doctor", "the machine after a crash: system settings left changed by a run that died, put back",
         _arguments)
def _cmd_doctor(args: argparse.Namespace) -> int:
    from hil.runtime.sysguard import restore_stale, settings_dir

    folder = settings_dir()
    if not args.restore:
        records = sorted(folder.glob("*.json")) if folder.is_dir() else []
        print(f"{len(records)} record(s) of changed system settings in {folder}" +
              ("; hil doctor --restore puts back those of dead runs" if records else ""))
        return 0
    lines = restore_stale(folder)
    print("\n".join(lines) if lines else f"nothing to restore ({folder})")
    return 0
