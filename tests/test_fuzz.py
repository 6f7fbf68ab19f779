"""Fuzz tests (hypothesis) of every decoder of input from outside: frame codecs and readers of every
shipped bus map, the serial framing (COBS, CRC-16), the slcan adapter, udp_loopback datagrams,
the CANopen nodes, bus-map files and the run-log reader. Each must accept or reject, never raise
anything else, and never hand on damaged data. Bounded: fixed example counts, no deadline (the
machine may be loaded), derandomized (the same examples every run)."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from config_schema import ConfigError
from firmware_bridge.links.base import Frame
from firmware_bridge.links.can import SlcanAdapterLink
from firmware_bridge.links.udp_loopback import unpack_datagram
from firmware_bridge.wire.framing import CobsDecodeError, StreamDecoder, cobs_decode, cobs_encode, crc16_ccitt_false
from firmware_bridge.wire.messages import BusMap, DecodeError
from firmware_bridge.wire.frame_io import FrameReader
from hil.logs.runlog import MsgpackRunWriter, RunLogError, read_run

ROOT = Path(__file__).resolve().parent.parent
MAPS = {p.stem: BusMap.load(p) for p in sorted((ROOT / "configs" / "bus").glob("*.toml"))}
FUZZ = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

frames = st.builds(Frame, st.integers(0, 0x7FF), st.binary(max_size=72), st.booleans(), st.booleans())


@pytest.mark.parametrize("name", sorted(MAPS))
@FUZZ
@given(frame=frames)
def test_every_codec_accepts_or_rejects_any_frame(name, frame):
    bus = MAPS[name]
    for codec in bus.codecs:
        try:
            values = codec.decode(Frame(codec.arbitration_id, frame.data, frame.is_fd))
        except DecodeError as exc:
            assert exc.kind in ("length", "crc", "range", "nan")
            continue
        assert len(values) == len(codec.signal_names) and np.all(np.isfinite(values))
        # what decodes re-encodes to the same payload: nothing was read that the frame does not say
        assert codec.encode(values, check_range=False).data == frame.data


@pytest.mark.parametrize("name", sorted(MAPS))
@FUZZ
@given(stream=st.lists(frames, max_size=30))
def test_frame_readers_take_any_stream_and_count_every_frame(name, stream):
    bus = MAPS[name]
    for direction in ("to_plant", "to_firmware"):
        reader = FrameReader(bus, direction)
        for frame in stream:
            reader.read(frame)
        assert reader.accepted + reader.ignored + reader.rejected_total == len(stream)


@FUZZ
@given(chunks=st.lists(st.binary(max_size=300), max_size=20))
def test_the_serial_stream_decoder_takes_any_bytes_and_passes_only_checked_packets(chunks):
    decoder = StreamDecoder()
    for chunk in chunks:
        for frame in decoder.feed(chunk):
            body = bytes((frame.arbitration_id,)) + frame.data
            assert cobs_encode(body + crc16_ccitt_false(body).to_bytes(2, "big"))   # a checked packet
    assert decoder.buffered_bytes <= 300 + 262


@FUZZ
@given(data=st.binary(max_size=300))
def test_cobs_decode_inverts_or_refuses(data):
    try:
        out = cobs_decode(data)
    except CobsDecodeError:
        return
    assert cobs_decode(cobs_encode(out)) == out


@FUZZ
@given(data=st.binary(max_size=120))
def test_udp_loopback_datagrams_decode_exactly_or_not_at_all(data):
    msg = unpack_datagram(data)
    if msg is not None:
        assert len(data) == 18 + (0 if msg.is_remote_frame else len(msg.data))


@FUZZ
@given(lines=st.lists(st.one_of(st.binary(max_size=150), st.sampled_from(
    [b"O\r", b"C\r", b"S8\r", b"t1008" + b"00" * 8 + b"\r", b"d1009" + b"00" * 12 + b"\r", b"V\r"])), max_size=12))
def test_the_slcan_adapter_takes_any_host_bytes(lines):
    link = SlcanAdapterLink.on_new_pty()
    try:
        for chunk in lines:
            os.write(link._slave_fd, chunk)
            while link.recv() is not None:
                pass
        while link.recv() is not None:      # what the pty still delivers
            pass
    finally:
        link.close()


CANOPEN_IDS = [0x000, 0x080, 0x201, 0x202, 0x203, 0x601, 0x602, 0x603, 0x604, 0x700, 0x701, 0x181, 0x581, 0x081]
canopen_frames = st.builds(Frame, st.sampled_from(CANOPEN_IDS), st.binary(max_size=9))


@FUZZ
@given(stream=st.lists(canopen_frames, max_size=25))
def test_the_canopen_drive_nodes_take_any_frames(stream):
    """NMT, SYNC, RPDOs and SDO requests (segmented transfers included) at the emulated drives."""
    from firmware_bridge.canopen.network import DriveNodes
    from firmware_bridge.wire.signals import CommandInput
    bus = MAPS["canopen_cst"]
    names = ["base_yaw", "shoulder_pitch", "elbow"]
    nodes, commands = DriveNodes(bus, names, 0.1), CommandInput(bus, names)
    for frame in stream:
        if not nodes.receive(frame):
            commands.feed(frame)
    nodes.transmit(lambda k: [])


@FUZZ
@given(stream=st.lists(canopen_frames, max_size=25))
def test_the_canopen_master_takes_any_frames(stream):
    """Heartbeats, SDO responses, EMCYs and TPDOs at the firmware's CANopen master."""
    from firmware_bridge.canopen.master import CanopenMaster
    master = CanopenMaster(MAPS["canopen_cst"], ["base_yaw", "shoulder_pitch", "elbow"])
    for frame in stream:
        if master.is_protocol(frame):
            assert all(isinstance(f, Frame) for f in master.on_frame(frame))


@FUZZ
@given(text=st.text(max_size=400))
def test_bus_map_files_are_read_or_refused_with_a_config_error(text):
    try:
        BusMap.from_string(text, "fuzz.toml")
    except ConfigError:
        pass


@FUZZ
@given(mutations=st.lists(st.tuples(st.floats(0, 1), st.integers(1, 255)), max_size=6),
       cut=st.floats(0.5, 1.0), garbage=st.binary(max_size=40))
def test_the_run_log_reader_never_returns_damaged_rows(tmp_path_factory, mutations, cut, garbage):
    path = tmp_path_factory.mktemp("fuzz") / "run.msgpack"
    rows = np.column_stack([np.arange(60.0), np.arange(60) * 1e-3, np.cos(np.arange(60.0))])
    with MsgpackRunWriter(path, {"columns": ["cycle", "t", "x"]}) as w:
        for k, r in enumerate(rows):
            if k % 17 == 5:
                w.write_event({"event": "inject", "cycle": k, "t": k * 1e-3, "fault": "f", "detail": "d"})
            w.write(r)
    data = bytearray(path.read_bytes())
    head = data.index(bytes([0x94, 0xCB]))             # damage the records only, not the header
    for where, mask in mutations:
        data[head + int(where * (len(data) - head - 1))] ^= mask
    data = data[:head + int(cut * (len(data) - head))] + garbage
    path.write_bytes(bytes(data))
    try:
        header, back = read_run(path)
    except RunLogError:
        return
    good = {tuple(r) for r in rows}
    assert all(tuple(r) in good for r in back)                     # every row returned is a row written
    assert np.all(np.diff(back[:, 0]) > 0)
    for e in header["events"]:
        assert e["event"] in ("inject", "log_gap") and e["cycle"] % 17 == 5


@FUZZ
@given(data=st.binary(max_size=600))
def test_any_file_is_a_run_log_or_a_run_log_error(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("fuzz") / "any.msgpack"
    path.write_bytes(data)
    try:
        read_run(path)
    except RunLogError:
        pass
