"""Everything that crosses the wire between the emulator and a firmware; imports nothing from hil.

* ``links``: the Link protocol and the links (serial, CAN, slcan, UDP loopback), bus faults, recording;
* ``wire``: bus maps, codecs, CRCs and counters, serial framing, codec tables, the frame reader and
  writer, the emulator's end of a map (``signals``);
* ``firmware``: the firmware's library, plain Python (the ``ella-wire`` wheel): its end of a map, its loop;
* ``canopen``: NMT, SYNC, heartbeat, SDO, PDOs, CiA 402, the emulated nodes and the firmware's master;
* ``formats``: DBC files, C code for firmware, EDS files;
* ``xcp``: an XCP slave on UDP (commands, memory, DAQ) and its A2L file, for measurement and calibration tools;
* ``reference``: the reference firmware.

The modules used to sit flat in this package. Their old names (``firmware_bridge.messages``, ...)
still import, for one release: :class:`MovedModuleFinder` hands out the module at its new path
(the same module object) and warns with a DeprecationWarning naming that path. The old module
``firmware_bridge.canopen`` is now the ``canopen`` package; its names are forwarded from there.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

MOVED = {
    "link": "links.base", "serial_link": "links.serial", "can_link": "links.can",
    "udp_loopback": "links.udp_loopback", "connect": "links.connect", "link_faults": "links.faults",
    "recording": "links.recording",
    "bus_schema": "wire.bus_schema", "codec": "wire.codec", "codec_table": "wire.codec_table",
    "framing": "wire.framing", "messages": "wire.messages", "protection": "wire.protection",
    "signals": "wire.signals",
    "canopen_master": "canopen.master", "canopen_od": "canopen.od", "cia402": "canopen.cia402",
    "drive_node": "canopen.drive_node", "pdo": "canopen.pdo", "sdo_server": "canopen.sdo_server",
    "c_export": "formats.c_export", "dbc": "formats.dbc", "eds": "formats.eds",
}


class MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``firmware_bridge.<old>`` for each old name of MOVED and loads it as the module at its
    new path, with a DeprecationWarning; ``python -m`` on an old name runs the new module."""

    def find_spec(self, fullname, path=None, target=None):
        package, _, old = fullname.rpartition(".")
        if package != __name__ or old not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    @staticmethod
    def _new_name(fullname: str) -> str:
        new = f"{__name__}.{MOVED[fullname.rpartition('.')[2]]}"
        warnings.warn(f"{fullname} moved to {new}", DeprecationWarning, stacklevel=3)
        return new

    def create_module(self, spec):
        module = importlib.import_module(self._new_name(spec.name))
        spec.loader_state = module.__spec__
        return module

    def exec_module(self, module):
        module.__spec__ = module.__spec__.loader_state     # the import system set it to the old name's spec

    def get_code(self, fullname):
        new = self._new_name(fullname)
        return importlib.util.find_spec(new).loader.get_code(new)


# first, so that an old name finds no stale file of the same name (an editable install's finder would)
if not any(isinstance(f, MovedModuleFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, MovedModuleFinder())
