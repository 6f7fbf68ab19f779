"""The firmware's library, in plain Python (no numpy, no numba; installable on its own as the
``ella-wire`` distribution, see the firmware author's guide):

* ``endpoint``: a firmware's end of a bus map (``FirmwareWire``): the sensor frames decoded
  (``SensorInput``), joint torques encoded into the command frames (``CommandOutput``), CRCs and
  rolling counters done, the CANopen master for a CANopen map;
* ``serve``: the firmware's loop on a link around a control law ``control(sensors, cycle) -> torques``
  (``FirmwareSession``: the same frame by frame, for a firmware pumped by the emulator's process);
* ``latency``: the bounded latency histogram of a firmware that runs for days.
"""
from .endpoint import CommandOutput, FirmwareWire, SensorInput
from .serve import FirmwareSession, ServeResult, serve

__all__ = ["CommandOutput", "FirmwareSession", "FirmwareWire", "SensorInput", "ServeResult", "serve"]
