"""Files for other tools written from (or read into) a bus map: DBC files both ways, C code for
firmware and the EDS files of the emulated CANopen nodes."""
