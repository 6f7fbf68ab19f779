"""COBS/CRC-16 framing, the stream decoder, and SerialLink over real pty pairs."""
from __future__ import annotations

import json
import os
import random
import select
import subprocess
import sys
import time

import pytest

from firmware_bridge.wire.framing import (CobsDecodeError, StreamDecoder, cobs_decode, cobs_encode, crc16_ccitt_false,
                                          encode_frame, encode_packet, max_encoded_size)
from firmware_bridge.links.base import Frame, LinkCounters
from firmware_bridge.links.serial import MEMORY_CAPACITY, SerialLink, memory_pair, open_pty_pair

# Examples from Cheshire & Baker 1999 as listed on Wikipedia ("Consistent Overhead Byte Stuffing").
COBS_VECTORS = [
    (b"", b"\x01"),
    (b"\x00", b"\x01\x01"),
    (b"\x00\x00", b"\x01\x01\x01"),
    (b"\x00\x11\x00", b"\x01\x02\x11\x01"),
    (b"\x11\x22\x00\x33", b"\x03\x11\x22\x02\x33"),
    (b"\x11\x22\x33\x44", b"\x05\x11\x22\x33\x44"),
    (b"\x11\x00\x00\x00", b"\x02\x11\x01\x01\x01"),
    (bytes(range(1, 255)), b"\xff" + bytes(range(1, 255))),
    (bytes(range(0, 255)), b"\x01\xff" + bytes(range(1, 255))),
    (bytes(range(1, 256)), b"\xff" + bytes(range(1, 255)) + b"\x02\xff"),
    (bytes(range(2, 256)) + b"\x00", b"\xff" + bytes(range(2, 256)) + b"\x01\x01"),
    (bytes(range(3, 256)) + b"\x00\x01", b"\xfe" + bytes(range(3, 256)) + b"\x02\x01"),
]


def frames_of(frames: list[Frame]) -> list[tuple[int, bytes]]:
    return [(f.arbitration_id, bytes(f.data)) for f in frames]


def sample_frames() -> list[Frame]:
    return [
        Frame(0x10, b""),
        Frame(0x00, b"\x00\x00\x00"),
        Frame(0xFF, bytes(range(40))),
        Frame(0x42, bytes(255)),
        Frame(0x07, bytes(range(1, 256))),
    ]


# --- COBS -------------------------------------------------------------------------------------

@pytest.mark.parametrize("raw, encoded", COBS_VECTORS)
def test_cobs_known_vectors(raw, encoded):
    assert cobs_encode(raw) == encoded
    assert cobs_decode(encoded) == raw


def test_cobs_round_trip_random_payloads():
    rng = random.Random(1)
    for _ in range(2000):
        size = rng.randrange(0, 700)
        zero_share = rng.choice([0.0, 0.01, 0.3, 1.0])
        raw = bytes(0 if rng.random() < zero_share else rng.randrange(1, 256) for _ in range(size))
        encoded = cobs_encode(raw)
        assert 0 not in encoded
        assert len(encoded) <= size + 1 + size // 254
        assert cobs_decode(encoded) == raw


@pytest.mark.parametrize("bad", [b"", b"\x05\x11\x22", b"\x02\x11\x00\x01", b"\xff" + bytes(range(1, 100))])
def test_cobs_decode_rejects_invalid(bad):
    with pytest.raises(CobsDecodeError):
        cobs_decode(bad)


# --- CRC and packet layout ----------------------------------------------------------------------

def test_crc16_ccitt_false_check_value_and_reference():
    assert crc16_ccitt_false(b"123456789") == 0x29B1
    assert crc16_ccitt_false(b"") == 0xFFFF
    rng = random.Random(2)
    for size in range(0, 300, 7):
        data = rng.randbytes(size)
        assert crc16_ccitt_false(data) == bitwise_crc16_ccitt_false(data)


def bitwise_crc16_ccitt_false(data: bytes) -> int:
    """The CRC bit by bit, as the standard defines it (the oracle)."""
    crc = 0xFFFF
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc


def test_packet_layout():
    body = b"\x21" + b"\x00\x01\x02"
    expected = cobs_encode(body + crc16_ccitt_false(body).to_bytes(2, "big")) + b"\x00"
    assert encode_packet(0x21, b"\x00\x01\x02") == expected
    assert encode_frame(Frame(0x21, b"\x00\x01\x02")) == expected
    assert len(encode_packet(0x01, bytes(255))) - 1 <= max_encoded_size()


@pytest.mark.parametrize("ident, payload", [(256, b""), (-1, b""), (1, bytes(256))])
def test_packet_rejects_out_of_range(ident, payload):
    with pytest.raises(ValueError):
        encode_packet(ident, payload)


# --- StreamDecoder ------------------------------------------------------------------------------

def test_decoder_split_at_every_position():
    frames = sample_frames()
    stream = b"".join(encode_frame(f) for f in frames)
    for cut in range(len(stream) + 1):
        decoder = StreamDecoder()
        got = decoder.feed(stream[:cut]) + decoder.feed(stream[cut:])
        assert frames_of(got) == frames_of(frames), cut
        assert decoder.counters == LinkCounters(rx_frames=len(frames))
        assert decoder.buffered_bytes == 0


def test_decoder_byte_by_byte_and_timestamps():
    frames = sample_frames()
    decoder = StreamDecoder()
    got = []
    for index, byte in enumerate(b"".join(encode_frame(f) for f in frames)):
        got += decoder.feed(bytes((byte,)), timestamp=float(index))
    assert frames_of(got) == frames_of(frames)
    assert all(f.timestamp > 0 for f in got)


def test_idle_delimiters_are_ignored():
    decoder = StreamDecoder()
    got = decoder.feed(b"\x00\x00" + encode_packet(3, b"x") + b"\x00\x00\x00")
    assert frames_of(got) == [(3, b"x")]
    assert decoder.counters == LinkCounters(rx_frames=1)


def test_garbage_ending_in_delimiter_costs_no_frame():
    p1, p2 = encode_packet(1, b"one"), encode_packet(2, b"\x00two")
    decoder = StreamDecoder()
    got = decoder.feed(b"\x13\x37\xaa\x00" + p1 + b"\xde\xad\x00" + p2)
    assert frames_of(got) == [(1, b"one"), (2, b"\x00two")]
    assert decoder.counters.rx_garbage_bytes == 5
    assert decoder.counters.rx_framing_errors == 2
    assert decoder.counters.rx_crc_errors == 0


def test_garbage_without_delimiter_costs_the_next_frame_only():
    p1, p2, p3 = (encode_packet(i, b"payload") for i in (1, 2, 3))
    garbage = b"\x05junk"
    decoder = StreamDecoder()
    got = decoder.feed(garbage + p1 + p2 + p3)
    assert frames_of(got) == [(2, b"payload"), (3, b"payload")]
    counters = decoder.counters
    assert counters.rx_framing_errors + counters.rx_crc_errors == 1
    assert counters.rx_garbage_bytes == len(garbage) + len(p1) - 1


def test_flipped_payload_bit_is_a_crc_error():
    p1, p2 = encode_packet(1, b"\x10\x20\x30\x40"), encode_packet(2, b"next")
    corrupted = bytearray(p1)
    corrupted[3] ^= 0x04            # a data byte, not a COBS code byte
    decoder = StreamDecoder()
    got = decoder.feed(bytes(corrupted) + p2)
    assert frames_of(got) == [(2, b"next")]
    assert decoder.counters.rx_crc_errors == 1
    assert decoder.counters.rx_framing_errors == 0
    assert decoder.counters.rx_garbage_bytes == len(p1) - 1


def test_every_single_bit_flip_is_detected():
    payload = bytes([0, 1, 2, 0, 0, 0xFF, 0x80, 0x7F] * 4)
    p1, p2 = encode_packet(0x33, payload), encode_packet(0x34, b"ok")
    for bit in range((len(p1) - 1) * 8):
        corrupted = bytearray(p1)
        corrupted[bit // 8] ^= 1 << (bit % 8)
        decoder = StreamDecoder()
        got = decoder.feed(bytes(corrupted) + p2)
        assert frames_of(got) == [(0x34, b"ok")], bit
        assert decoder.counters.rx_crc_errors + decoder.counters.rx_framing_errors >= 1


def test_truncated_packet_is_counted():
    p1, p2 = encode_packet(9, bytes(range(20))), encode_packet(10, b"after")
    for keep in range(1, len(p1) - 1):
        decoder = StreamDecoder()
        got = decoder.feed(p1[:keep] + b"\x00" + p2)
        assert frames_of(got) == [(10, b"after")], keep
        assert decoder.counters.rx_framing_errors + decoder.counters.rx_crc_errors == 1
        assert decoder.counters.rx_garbage_bytes == keep


def test_overlong_run_is_bounded_and_counted():
    decoder = StreamDecoder()
    chunk = b"\x55" * 1000
    for _ in range(100):
        assert decoder.feed(chunk) == []
        assert decoder.buffered_bytes <= max_encoded_size()
    got = decoder.feed(b"\x55\x55\x00" + encode_packet(4, b"back"))
    assert frames_of(got) == [(4, b"back")]
    assert decoder.counters.rx_framing_errors == 1
    assert decoder.counters.rx_garbage_bytes == 100 * 1000 + 2


def test_overlong_run_in_one_chunk():
    decoder = StreamDecoder()
    assert decoder.feed(b"\x55" * 100_000) == []
    assert decoder.buffered_bytes == 0
    assert frames_of(decoder.feed(b"\x00" + encode_packet(5, b""))) == [(5, b"")]
    assert decoder.counters.rx_framing_errors == 1


def test_payload_longer_than_limit_is_a_framing_error():
    decoder = StreamDecoder(max_payload=8)
    got = decoder.feed(encode_packet(1, bytes(9), max_payload=9) + encode_packet(2, bytes(8)))
    assert frames_of(got) == [(2, bytes(8))]
    assert decoder.counters.rx_framing_errors == 1


def test_random_noise_never_raises():
    rng = random.Random(3)
    decoder = StreamDecoder()
    noise = rng.randbytes(50_000)
    pos = 0
    while pos < len(noise):
        step = rng.randrange(1, 700)
        decoder.feed(noise[pos:pos + step])
        assert decoder.buffered_bytes <= max_encoded_size()
        pos += step
    assert frames_of(decoder.feed(b"\x00" + encode_packet(6, b"alive"))) == [(6, b"alive")]
    assert decoder.counters.rx_garbage_bytes > 40_000


# --- SerialLink over pty pairs ------------------------------------------------------------------

@pytest.fixture
def pty_links():
    master_fd, slave_path = open_pty_pair()
    master = SerialLink.from_fd(master_fd, name="master")
    slave = SerialLink(slave_path, name="slave")
    yield master, slave
    master.close()
    slave.close()


def wait_frame(link: SerialLink, timeout: float = 5.0) -> Frame:
    deadline = time.monotonic() + timeout
    while (frame := link.recv()) is None:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"{link.name}: no frame within {timeout} s"
        select.select([link.fileno()], [], [], remaining)
    return frame


def no_errors(counters: LinkCounters) -> bool:
    return (counters.tx_dropped, counters.rx_crc_errors, counters.rx_framing_errors,
            counters.rx_garbage_bytes) == (0, 0, 0, 0)


def test_pty_1000_frames_each_direction(pty_links):
    master, slave = pty_links
    assert master.recv() is None and slave.recv() is None
    down = [Frame(i % 256, i.to_bytes(4, "little") + bytes(i % 30)) for i in range(1000)]
    up = [Frame((i * 7) % 256, bytes(range(i % 256))[:40]) for i in range(1000)]
    got_down, got_up = [], []
    for index in range(1000):
        assert master.send(down[index]) and slave.send(up[index])
        if index % 50 == 49:
            while len(got_down) <= index:
                got_down.append(wait_frame(slave))
            while len(got_up) <= index:
                got_up.append(wait_frame(master))
    assert frames_of(got_down) == frames_of(down)
    assert frames_of(got_up) == frames_of(up)
    for link in (master, slave):
        assert link.counters.tx_frames == link.counters.rx_frames == 1000
        assert no_errors(link.counters)
    assert 0 < got_up[0].timestamp <= got_up[-1].timestamp <= time.monotonic()


def test_pty_full_buffer_drops_whole_packets_only(pty_links):
    master, slave = pty_links
    results = [master.send(Frame(i % 256, bytes(range(1, 61)))) for i in range(3000)]
    assert not all(results)
    assert master.counters.tx_dropped == results.count(False)
    assert master.counters.tx_frames == results.count(True)
    received = 0
    deadline = time.monotonic() + 5.0
    while received < master.counters.tx_frames and time.monotonic() < deadline:
        master.recv()                       # flushes the tail of a partly written packet
        if slave.recv() is not None:
            received += 1
    assert received == master.counters.tx_frames
    assert no_errors(slave.counters)


def test_send_rejects_invalid_frame(pty_links):
    master, _ = pty_links
    assert not master.send(Frame(0x1FF, b""))
    assert not master.send(Frame(1, bytes(256)))
    assert master.counters.tx_dropped == 2 and master.counters.tx_frames == 0


def test_close_is_idempotent():
    master_fd, slave_path = open_pty_pair()
    master, slave = SerialLink.from_fd(master_fd), SerialLink(slave_path)
    for link in (master, slave):
        link.close()
        link.close()


ECHO_CHILD = """
import json, select, sys
from firmware_bridge.links.base import Frame
from firmware_bridge.links.serial import SerialLink
link = SerialLink(sys.argv[1], name="child")
print("ready", flush=True)
while True:
    frame = link.recv()
    if frame is None:
        select.select([link.fileno()], [], [], 1.0)
        continue
    if frame.arbitration_id == 0xFF:
        break
    link.send(Frame(frame.arbitration_id + 1, frame.data[::-1]))
print(json.dumps(link.counters.as_dict()), flush=True)
link.close()
"""


def test_echo_across_processes():
    master_fd, slave_path = open_pty_pair()
    master = SerialLink.from_fd(master_fd, name="parent")
    child = subprocess.Popen([sys.executable, "-c", ECHO_CHILD, slave_path],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        for index in range(300):
            payload = index.to_bytes(2, "big") + bytes(index % 20) + b"\x01\x02"
            assert master.send(Frame(index % 200, payload))
            reply = wait_frame(master)
            assert (reply.arbitration_id, reply.data) == (index % 200 + 1, payload[::-1])
        assert master.send(Frame(0xFF, b""))
        out, _ = child.communicate(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        master.close()
    assert child.returncode == 0
    child_counters = LinkCounters(**json.loads(out))
    assert child_counters.rx_frames == 301 and child_counters.tx_frames == 300
    assert no_errors(child_counters) and no_errors(master.counters)


def test_short_write_keeps_packet_whole(monkeypatch):
    read_fd, write_fd = os.pipe()
    link = SerialLink.from_fd(write_fd)
    real_write = os.write
    script = iter(["short", "full", "full"])

    def flaky_write(fd: int, data: bytes) -> int:
        if fd != write_fd:
            return real_write(fd, data)
        step = next(script, "pass")
        if step == "short":
            return real_write(fd, data[:5])
        if step == "full":
            raise BlockingIOError
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", flaky_write)
    assert link.send(Frame(1, b"first packet"))      # 5 bytes out, the rest pending
    assert not link.send(Frame(2, b"dropped"))       # pending cannot be flushed: drop whole frame
    assert link.recv() is None                       # the flush attempt fails again
    assert link.send(Frame(3, b"third"))             # flushes the pending tail, then writes
    decoder = StreamDecoder()
    got = decoder.feed(os.read(read_fd, 4096))
    assert frames_of(got) == [(1, b"first packet"), (3, b"third")]
    assert no_errors(decoder.counters)
    assert link.tx_partial_writes == 1
    assert (link.counters.tx_frames, link.counters.tx_dropped) == (2, 1)
    os.close(read_fd)
    link.close()


def test_an_in_process_byte_pipe_carries_packets_in_order_and_refuses_them_beyond_its_capacity():
    ours, theirs = memory_pair()
    sender, receiver = SerialLink.over(ours, "ours"), SerialLink.over(theirs, "theirs")
    frames = [Frame(0x21, bytes([k % 256]) * 200) for k in range(400)]        # 400 x 205 bytes > the capacity
    accepted = [f for f in frames if sender.send(f)]
    assert 0 < len(accepted) < len(frames) and sender.counters.tx_dropped == len(frames) - len(accepted)
    assert len(theirs.inbox) <= MEMORY_CAPACITY
    got = []
    while (frame := receiver.recv()) is not None:
        got.append((frame.arbitration_id, frame.data))
    assert got == [(f.arbitration_id, f.data) for f in accepted] and receiver.counters.rx_crc_errors == 0
    assert sender.send(frames[0]) and receiver.discard() == 0 and receiver.counters.rx_garbage_bytes > 0
    assert receiver.recv() is None
    with pytest.raises(OSError):
        receiver.fileno()
