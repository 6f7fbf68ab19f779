"""Links that move frames between the emulator and a firmware without blocking: the Link protocol
and Frame (``base``), serial and pty ports, python-can buses and an emulated slcan adapter, the
UDP loopback CAN interface, opening a link from a text spec (``connect``), bus faults on any link
(``faults``) and recording a link's traffic (``recording``)."""
