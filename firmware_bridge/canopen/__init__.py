"""CANopen on a bus map: COB-IDs and the emulated nodes (``network``), each node's object
dictionary (``od``), SDO server, PDOs and CiA 402 drive (``drive_node``, ``cia402``), and the
firmware's NMT master and SDO client (``master``)."""
