"""Runtime robustness: malformed command input, the command watchdog and its safe states, the run log.

Everything runs in this process. The emulator (hil.runtime.loop.Emulator) sits on one end of a link and
the test plays the firmware on the other end, cycle by cycle through Emulator.step_once():

* an in-memory CAN-style link pair (MemoryLink) for compact_classic, whose command frame carries a
  CRC-8 and a rolling counter;
* a real pty pair with a SerialLink on both ends for serial_frame (COBS + CRC-16 packets, rolling
  counter, no application CRC).

The injected frames that are not the firmware's own commands carry the counter the emulator
expects next, so that each one is rejected for its own fault and for nothing else.
"""
from __future__ import annotations

import os
import signal
import struct
from pathlib import Path

import numpy as np
import pytest

from firmware_bridge.links.base import Frame
from firmware_bridge.wire.framing import CobsDecodeError, cobs_decode, encode_frame, encode_packet
from firmware_bridge.wire.messages import REJECTION_KINDS, BusMap, EncodeError, StatusFlag, crc8_sae_j1850
from firmware_bridge.links.serial import SerialLink, open_pty_pair
from hil.dynamics.plant import Plant
from hil.logs.runlog import read_run
from hil.runtime.loop import Emulator
from bus_maps import float_map
from emulators import FakeFirmware, make_emulator
from links import AnsweringLink, on_cue, readable_bytes, wait_bytes, memory_pair

ROOT = Path(__file__).resolve().parent.parent
ARM = ROOT / "configs" / "ella.toml"
CLASSIC = ROOT / "configs" / "bus" / "compact_classic.toml"
SERIAL = ROOT / "configs" / "bus" / "serial_frame.toml"
LSB = 0.02                       # N m per LSB of the int16 torque signals
NJ = 3                           # ELLA: base_yaw, shoulder_pitch, elbow
TIMEOUT = int(StatusFlag.COMMAND_TIMEOUT)
RUNNING = int(StatusFlag.RUNNING)
REJECTED = int(StatusFlag.COMMAND_REJECTED)

# A float32 command map (CAN FD) for real NaN payloads: the shipped maps carry int16 torques only.
FLOAT_MAP = float_map()


def quantized(tau) -> np.ndarray:
    return np.round(np.asarray(tau, float) / LSB) * LSB


def applied(emu: Emulator) -> np.ndarray:
    """The torque the last cycle applied to the plant (Plant.step keeps it in Plant.tau)."""
    return emu.plant.tau[:NJ].copy()


class Tally:
    """Expected command-input counters, compared with the emulator's after every cycle."""

    def __init__(self, emu: Emulator):
        self.emu = emu
        self.accepted = 0
        self.ignored = 0
        self.lost = 0
        self.rejected = {k: 0 for k in REJECTION_KINDS}

    def add(self, accepted: int = 0, ignored: int = 0, lost: int = 0, **rejected: int) -> None:
        self.accepted += accepted
        self.ignored += ignored
        self.lost += lost
        for k, n in rejected.items():
            assert k in self.rejected
            self.rejected[k] += n

    def check(self) -> None:
        got = self.emu.commands.counters()
        assert got == {"accepted": self.accepted, "ignored": self.ignored, "lost": self.lost,
                       "resyncs": 0, "rejected": self.rejected}


# ----------------------------------------------------------------------------- 1. malformed input (CAN)
def test_malformed_can_frames_are_rejected_counted_and_never_applied(model):
    bus = BusMap.load(CLASSIC)
    emu_link, fw_link = memory_pair()
    emu = make_emulator(model, bus, emu_link, ideal_drives=True, watchdog_s=1.0)
    hold = emu.hold_tau
    fw = FakeFirmware(bus, fw_link, emu)
    tally = Tally(emu)
    rejected_torques: list[np.ndarray] = []

    def cycle(*frames: Frame) -> np.ndarray:
        n = emu.cycle
        for f in frames:
            fw_link.send(f)
        emu.step_once()
        assert emu.cycle == n + 1 and not emu_link.inbox          # one cycle, every frame consumed
        sensor_frames = fw.take_sensor_frames()
        ids = [f.arbitration_id for f in sensor_frames]
        assert ids == [0x110, 0x111, 0x112 if emu.cycle % 2 == 0 else 0x113]   # the loop keeps answering
        status = fw.statuses(sensor_frames)[0]
        assert status & ~REJECTED == RUNNING
        tally.check()
        return applied(emu)

    # before any command: the drives hold the arm
    assert np.array_equal(cycle(), hold)

    tau_a = quantized(hold + [1.0, 2.0, -0.5])
    good = fw.command(tau_a)
    tally.add(accepted=1)
    assert np.array_equal(cycle(good), tau_a)

    def rejected_cycle(frames, **kinds):
        """A cycle with only bad frames: counted by kind, and the last good torque stays applied."""
        tally.add(**kinds)
        tau = cycle(*frames)
        assert np.array_equal(tau, tau_a)

    bad_tau = quantized(hold + [-7.0, 11.0, 3.0])
    rejected_torques.append(bad_tau)
    full = fw.injected(bad_tau)
    # wrong length: truncated, empty and over-long payloads
    rejected_cycle([Frame(full.arbitration_id, full.data[:7]), Frame(full.arbitration_id, b""),
                    Frame(full.arbitration_id, full.data[:5])], length=3)
    rejected_cycle([Frame(full.arbitration_id, full.data + b"\x00", is_fd=True)], length=1)
    # wrong CRC-8: a bit flipped in a torque byte, and a corrupted CRC byte
    flipped = bytearray(full.data)
    flipped[2] ^= 0x10
    bad_crc = bytearray(full.data)
    bad_crc[7] ^= 0xFF
    rejected_cycle([Frame(full.arbitration_id, bytes(flipped)), Frame(full.arbitration_id, bytes(bad_crc))], crc=2)
    # unknown ids (an 11-bit id not in the map, the command id as a 29-bit id); a sensor frame
    # echoed back is the other direction: ignored, not rejected
    echo = bus.codec("enc_a").encode([1, 2])
    rejected_cycle([Frame(0x101, full.data), Frame(0x7FF, b""), Frame(0x100, full.data, is_extended_id=True),
                    echo], unknown_id=3, ignored=1)
    # "NaN" torques: the int16 map has no NaN, so raw bytes crafted to decode out of range
    # (-32768 LSB = -655.36 N m on shoulder_pitch, 32767 LSB = 655.34 N m on elbow)
    for raw in ((0, -32768, 0), (0, 0, 32767)):
        payload = fw.with_crc(struct.pack("<hhhB", *raw, fw.counter))
        rejected_torques.append(np.array(raw) * LSB)
        rejected_cycle([Frame(0x100, payload)], range=1)
    # out-of-range torques through Codec.encode(check_range=False); the checked encode refuses them
    for tau in ([300.0, hold[1], 0.0], [0.0, -360.02, 0.0], [0.0, hold[1], 90.02]):
        with pytest.raises(EncodeError) as refused:
            fw.injected(tau)
        assert refused.value.kind == "range"
        rejected_torques.append(quantized(tau))
        rejected_cycle([fw.injected(tau, check_range=False)], range=1)
    with pytest.raises(EncodeError) as refused:
        fw.injected([np.nan, 0.0, 0.0], check_range=False)
    assert refused.value.kind == "nan"

    # rolling counter: a replay of the last accepted frame (counter one behind) is rejected; the
    # firmware's next frame is accepted
    rejected_cycle([good], counter=1)
    tau_b = quantized(hold + [0.4, -1.0, 0.2])
    tally.add(accepted=1)
    assert np.array_equal(cycle(fw.command(tau_b)), tau_b)
    tau_a = tau_b
    # a stray counter (+5) is rejected and leaves the expected counter alone: the firmware's next
    # in-sequence frame is accepted
    stray = fw.cmd.encode([*bad_tau, 0], counter=fw.counter + 5)
    rejected_cycle([stray], counter=1)
    tau_c = quantized(hold + [0.8, -1.4, 0.6])
    tally.add(accepted=1)
    assert np.array_equal(cycle(fw.command(tau_c)), tau_c)
    tau_a = tau_c

    # a flood in one cycle: bad frames before and after one good command; the good one is applied
    tau_d = quantized(hold + [-0.2, 0.5, -0.1])
    flood = ([Frame(0x100, full.data[:3]), Frame(0x100, bytes(flipped)), Frame(0x555, b"\x01")]
             + [fw.injected([250.0, 0.0, 0.0], check_range=False)] + [fw.command(tau_d)]
             + [Frame(0x100, bytes(flipped)), fw.injected([0.0, 400.0, 0.0], check_range=False),
                Frame(0x100, b"")])
    tally.add(accepted=1, length=2, crc=2, unknown_id=1, range=2)
    assert np.array_equal(cycle(*flood), tau_d)
    tau_a = tau_d
    # and a valid command afterwards is still accepted
    tau_e = quantized(hold + [0.1, 0.1, 0.1])
    tally.add(accepted=1)
    assert np.array_equal(cycle(fw.command(tau_e)), tau_e)

    assert tally.rejected == {"unknown_id": 4, "length": 6, "crc": 4, "counter": 2, "range": 7, "nan": 0}
    assert tally.accepted == 5 and tally.ignored == 1
    assert emu.watchdog.trips == 0 and emu.watchdog.events == []
    assert np.all(np.isfinite(emu.plant.pos))
    for bad in rejected_torques:      # no rejected torque was ever applied
        assert not np.allclose(applied(emu), bad)
    print(f"\nCAN compact_classic after {emu.cycle} cycles: {emu.commands.counters()}")


def test_nan_torques_in_a_float_map_are_rejected_as_nan(model):
    bus = BusMap.from_string(FLOAT_MAP, "float_map")
    emu_link, fw_link = memory_pair()
    emu = make_emulator(model, bus, emu_link, ideal_drives=True, watchdog_s=1.0)
    hold = emu.hold_tau
    fw = FakeFirmware(bus, fw_link, emu)
    tally = Tally(emu)
    tau_a = np.float32(hold + [1.0, -2.0, 0.5]).astype(float)
    fw_link.send(fw.command(tau_a))
    emu.step_once()
    tally.add(accepted=1)
    tally.check()
    assert np.array_equal(applied(emu), tau_a)

    def raw_frame(bits: tuple[int, int, int]) -> Frame:
        payload = struct.pack("<IIIB", *bits, fw.counter) + b"\x00\x00"
        return Frame(0x100, payload + bytes((crc8_sae_j1850(payload),)), is_fd=True)

    one = 0x3F800000
    for bits, kind in [((0x7FC00000, one, one), "nan"),        # quiet NaN
                       ((one, 0xFFC00000, one), "nan"),        # negative quiet NaN
                       ((one, one, 0x7F800001), "nan"),        # signalling NaN
                       ((0x7F800000, one, one), "range"),      # +inf
                       ((one, 0xFF800000, one), "range"),      # -inf
                       ((one, one, 0x7F7FFFFF), "range")]:     # largest finite float32
        fw_link.send(raw_frame(bits))
        emu.step_once()
        tally.add(**{kind: 1})
        tally.check()
        assert np.array_equal(applied(emu), tau_a)
    tau_b = np.float32(hold + [-1.0, 2.0, -0.5]).astype(float)
    fw_link.send(fw.command(tau_b))
    emu.step_once()
    tally.add(accepted=1)
    tally.check()
    assert np.array_equal(applied(emu), tau_b)
    assert np.all(np.isfinite(emu.plant.pos))


# ----------------------------------------------------------------------------- 1. malformed input (serial)
def data_positions(packet: bytes) -> list[int]:
    """Indices of the COBS data bytes (not code bytes) of an encoded packet without delimiter."""
    out, pos = [], 0
    while pos < len(packet):
        code = packet[pos]
        out += range(pos + 1, pos + code)
        pos += code
    return out


def test_serial_line_noise_and_malformed_packets_are_counted(model):
    bus = BusMap.load(SERIAL)
    master, slave_path = open_pty_pair()
    emu_link = SerialLink.from_fd(master, name="pty master")
    fw_link = SerialLink(slave_path)
    try:
        emu = make_emulator(model, bus, emu_link, ideal_drives=True, watchdog_s=1.0)
        hold = emu.hold_tau
        fw = FakeFirmware(bus, fw_link, emu)
        tally = Tally(emu)
        link = {"rx_frames": 0, "rx_crc_errors": 0, "rx_framing_errors": 0, "rx_garbage_bytes": 0}
        pending = 0

        def send(frame: Frame) -> None:
            nonlocal pending
            assert fw_link.send(frame)
            pending += len(encode_frame(frame))

        def inject(raw: bytes) -> None:
            nonlocal pending
            assert os.write(fw_link.fileno(), raw) == len(raw)
            pending += len(raw)

        def cycle(**expect_link) -> np.ndarray:
            nonlocal pending
            wait_bytes(master, pending)
            emu.step_once()
            pending = 0
            assert readable_bytes(master) == 0
            for k, n in expect_link.items():
                link[k] += n
            got = emu_link.counters.as_dict()
            assert {k: got[k] for k in link} == link
            assert got["tx_frames"] == emu.cycle and got["tx_dropped"] == 0
            tally.check()
            wait_bytes(fw_link.fileno(), 31)                  # one 26-byte sensor packet per cycle
            frames = fw.take_sensor_frames()
            assert [f.arbitration_id for f in frames] == [0x81]
            assert [s & ~REJECTED for s in fw.statuses(frames)] == [RUNNING]
            return applied(emu)

        tau_a = quantized(hold + [1.0, -3.0, 0.5])
        send(fw.command(tau_a))
        tally.add(accepted=1)
        assert np.array_equal(cycle(rx_frames=1), tau_a)

        # garbage ended by a delimiter: invalid COBS (code 0x13 runs past the end) -> framing error
        inject(b"\x13\x37\xca\xfe\x00")
        assert np.array_equal(cycle(rx_framing_errors=1, rx_garbage_bytes=4), tau_a)
        # idle fill (repeated delimiters) is no error
        inject(b"\x00\x00\x00")
        assert np.array_equal(cycle(), tau_a)
        # an overlong run without delimiter (400 bytes > the longest packet) -> one framing error
        inject(b"\xa5" * 400 + b"\x00")
        assert np.array_equal(cycle(rx_framing_errors=1, rx_garbage_bytes=400), tau_a)
        # garbage without delimiter before a good packet: they merge, the packet is lost (framing);
        # a good packet after the next delimiter is received again
        probe = fw.injected(quantized(hold + [5.0, 5.0, 5.0]))
        packet = encode_frame(probe)
        inject(b"\xf0\x11\x22" + packet)
        assert np.array_equal(cycle(rx_framing_errors=1, rx_garbage_bytes=3 + len(packet) - 1), tau_a)

        # a bit flip inside the firmware's own command packet -> CRC-16 error, the command is lost
        lost = quantized(hold + [2.0, -2.0, 1.0])
        packet = bytearray(encode_frame(fw.command(lost)))
        i = next(i for i in data_positions(bytes(packet[:-1])) if packet[i] not in (0x04,))
        packet[i] ^= 0x04
        assert len(cobs_decode(bytes(packet[:-1]))) == 1 + 7 + 2           # still valid COBS
        inject(bytes(packet))
        assert np.array_equal(cycle(rx_crc_errors=1, rx_garbage_bytes=len(packet) - 1), tau_a)
        # ... so the firmware's next packet skips a counter value: accepted, one frame counted lost
        skipped = quantized(hold + [2.5, -2.5, 1.5])
        send(fw.command(skipped))
        tally.add(accepted=1, lost=1)
        assert np.array_equal(cycle(rx_frames=1), skipped)
        tau_b = quantized(hold + [3.0, -3.0, 2.0])
        send(fw.command(tau_b))
        tally.add(accepted=1)
        assert np.array_equal(cycle(rx_frames=1), tau_b)
        tau_a = tau_b

        # a packet cut short on the wire: its last COBS block runs past the end -> framing error
        packet = encode_frame(fw.injected(quantized(hold + [-4.0, 4.0, -1.0])))
        cut = packet[:-3] + b"\x00"
        with pytest.raises(CobsDecodeError):
            cobs_decode(cut[:-1])
        inject(cut)
        assert np.array_equal(cycle(rx_framing_errors=1, rx_garbage_bytes=len(cut) - 1), tau_a)

        # well-framed packets the application rejects: wrong length, unknown id, out of range,
        # crafted raw bytes out of range, a replayed (old) counter
        good = fw.injected(tau_a)
        inject(encode_packet(0x01, good.data[:6]) + encode_packet(0x01, good.data + b"\x00"))
        tally.add(length=2)
        assert np.array_equal(cycle(rx_frames=2), tau_a)
        inject(encode_packet(0x02, good.data) + encode_packet(0x81, bytes(26)[:5]))
        tally.add(unknown_id=1, ignored=1)      # 0x81 is the sensor packet: other direction, ignored
        assert np.array_equal(cycle(rx_frames=2), tau_a)
        send(fw.injected([241.0, 0.0, 0.0], check_range=False))
        send(fw.injected([0.0, 0.0, -95.0], check_range=False))
        inject(encode_packet(0x01, struct.pack("<hhhB", 0, 32767, 0, fw.counter)))
        tally.add(range=3)
        assert np.array_equal(cycle(rx_frames=3), tau_a)
        replay = fw.cmd.encode([*quantized(hold + [9.0, 9.0, 9.0]), 0], counter=fw.counter - 1)
        send(replay)
        tally.add(counter=1)
        assert np.array_equal(cycle(rx_frames=1), tau_a)

        # everything at once, then one good command last in the same cycle
        tau_c = quantized(hold + [-1.0, 1.0, -0.25])
        inject(b"\xff\xfe\xfd\x00" + b"\x00" + bytes(cut))
        send(fw.injected([500.0, 0.0, 0.0], check_range=False))
        inject(encode_packet(0x01, b"\x01\x02"))
        send(fw.command(tau_c))
        tally.add(accepted=1, range=1, length=1)
        assert np.array_equal(cycle(rx_frames=3, rx_framing_errors=2, rx_garbage_bytes=3 + len(cut) - 1), tau_c)
        # a valid command afterwards is still accepted
        tau_d = quantized(hold + [0.3, 0.3, 0.3])
        send(fw.command(tau_d))
        tally.add(accepted=1)
        assert np.array_equal(cycle(rx_frames=1), tau_d)

        assert tally.rejected == {"unknown_id": 1, "length": 3, "crc": 0, "counter": 1, "range": 4, "nan": 0}
        assert link["rx_crc_errors"] == 1 and link["rx_framing_errors"] == 6
        assert emu.watchdog.trips == 0
        print(f"\nserial after {emu.cycle} cycles: link {emu_link.counters.as_dict()}, "
              f"commands {emu.commands.counters()}")
    finally:
        fw_link.close()
        emu_link.close()


# ----------------------------------------------------------------------------- 1. the same, in real time
class PtyFlooder:
    """Emulator-side pty master link whose send() makes the firmware end answer every sensor
    packet at once: it discards its input and writes line noise, malformed packets and one valid
    command, precomputed (all in the emulator's thread: no second Python thread competes for the
    GIL, and the firmware's share of the cycle is two system calls)."""

    def __init__(self, emu_link: SerialLink, fw_fd: int, answer):
        self.inner = emu_link
        self.fw_fd = fw_fd
        self.name = emu_link.name
        self.counters = emu_link.counters
        self.answer = answer
        self.cues = 0

    def send(self, frame: Frame) -> bool:
        ok = self.inner.send(frame)
        try:
            os.read(self.fw_fd, 65536)
        except BlockingIOError:
            pass
        os.write(self.fw_fd, self.answer(self.cues))
        self.cues += 1
        return ok

    def recv(self) -> Frame | None:
        return self.inner.recv()

    def close(self) -> None:
        self.inner.close()


@pytest.mark.realtime
@pytest.mark.parametrize("transport", ["can", "serial"])
def test_realtime_loop_keeps_its_period_under_a_flood_of_malformed_frames(model, transport, tmp_path):
    period, duration = 1e-3, 1.0
    bus = BusMap.load(CLASSIC if transport == "can" else SERIAL)
    cmd = bus.codec("cmd_torque")
    hold_cmd = quantized(Plant(model).equilibrium_eta())
    good = [cmd.encode([*hold_cmd, 0], counter=k) for k in range(256)]
    log = tmp_path / "flood.msgpack"
    opts = dict(mode="realtime", period_s=period, duration_s=duration, watchdog_s=0.05, log_path=str(log))

    if transport == "can":
        def bad(k: int) -> list[Frame]:
            c = k & 0xFF
            f = cmd.encode([250.0, -400.0, 95.0, 0], counter=c, check_range=False)
            flipped = bytearray(good[c].data)
            flipped[1] ^= 0x01
            frames = [Frame(0x100, good[c].data[:6]),                                   # length
                      Frame(0x100, bytes(flipped)),                                     # crc
                      Frame(0x1FF, good[c].data),                                       # unknown id
                      f]                                                                # range
            if k:
                frames.append(good[(k - 1) & 0xFF])                                     # counter
            return frames + [good[c]]

        link = AnsweringLink(on_cue(0x111, bad))
        emu = make_emulator(model, bus, link, ideal_drives=True, **opts)
        hold = emu.hold_tau
        closers = []
    else:
        master, slave_path = open_pty_pair()
        emu_side = SerialLink.from_fd(master, name="pty master")
        fw_side = SerialLink(slave_path)
        noise = b"\x13\x37\xca\xfe\x00" + b"\xa5" * 300 + b"\x00"

        def answer(k: int) -> bytes:
            c = k & 0xFF
            flipped = bytearray(encode_frame(good[c]))
            i = data_positions(bytes(flipped[:-1]))[0]
            flipped[i] ^= 0x40 if flipped[i] != 0x40 else 0x01
            out = (noise + bytes(flipped)
                   + encode_frame(Frame(0x01, good[c].data[:5]))                               # length
                   + encode_frame(Frame(0x05, good[c].data))                                   # unknown id
                   + encode_frame(cmd.encode([300.0, 0.0, 0.0, c], check_range=False)))        # range
            if k:
                out += encode_frame(good[(k - 1) & 0xFF])                                      # counter
            return out + encode_frame(good[c])

        first, table = answer(0), [answer(256 + c) for c in range(256)]    # precomputed: cheap in the loop
        link = PtyFlooder(emu_side, fw_side.fileno(), lambda k: table[k & 0xFF] if k else first)
        emu = make_emulator(model, bus, link, ideal_drives=True, **opts)
        hold = emu.hold_tau
        closers = [fw_side, emu_side]
    try:
        summary = emu.run()
    finally:
        for c in closers:
            c.close()

    n = round(duration / period)
    pacer, timing = summary["pacer"], summary["timing"]
    lat = timing["lateness"]
    print(f"\nrealtime {transport}: cycles {summary['cycles']}, pacer elapsed {pacer['elapsed_s']:.4f} s, "
          f"overruns {pacer['overruns']} (ignored {pacer['ignored_overruns']}, skipped periods "
          f"{pacer['skipped_periods']}), lateness us p50 {lat['p50']:.1f} p99 {lat['p99']:.1f} "
          f"max {lat['max']:.1f}, total us p99 {timing['total']['p99']:.1f} max {timing['total']['max']:.1f}; "
          f"commands {summary['commands']}; link {summary['link']}")
    assert summary["halted"] is None
    assert summary["cycles"] == n and pacer["cycles"] == n
    assert summary["t_s"] == pytest.approx(duration, abs=1e-9)
    # the loop kept its period: n cycles took (n - 1) periods, plus the periods skipped after
    # overruns (the summary's elapsed time also covers the last cycle and closing the log)
    nominal = (n - 1 + pacer["skipped_periods"]) * period
    assert nominal - 1e-4 <= pacer["elapsed_s"] <= nominal + 0.05
    assert lat["p99"] < 1000.0
    assert summary["watchdog"]["trips"] == 0
    rej = summary["commands"]["rejected"]
    if transport == "can":
        # every answer but the last (queued after the final cycle) was taken in: exact counts
        assert rej == {"unknown_id": n, "length": n, "crc": n, "counter": n - 1, "range": n, "nan": 0}
        assert summary["commands"]["accepted"] == n
    else:
        # pty delivery is asynchronous; the answers to the last cue or two may be unread
        got = summary["commands"]["accepted"]
        assert n - 2 <= got <= n
        for kind in ("unknown_id", "length", "range"):
            assert rej[kind] == got
        assert got - 1 <= rej["counter"] <= got and rej["crc"] == rej["nan"] == 0
        lk = summary["link"]
        assert lk["rx_crc_errors"] == got and lk["rx_framing_errors"] == 2 * got
        assert lk["rx_garbage_bytes"] == got * (4 + 300 + len(encode_frame(good[0])) - 1)
    # the applied torque was the hold torque throughout (no rejected value ever reached the plant)
    header, rows = read_run(log)
    cols = header["columns"]
    assert len(rows) == n
    tau = rows[:, [cols.index(f"tau_{j}") for j in emu.plant.layout.joint_names]]
    first = 0 if transport == "can" else int(np.argmax(np.all(tau == hold_cmd, axis=1)))
    assert np.array_equal(tau[:first], np.broadcast_to(hold, (first, NJ)))
    assert np.array_equal(tau[first:], np.broadcast_to(hold_cmd, (n - first, NJ)))
    assert first <= 2


# ----------------------------------------------------------------------------- 2. watchdog
@pytest.mark.parametrize("safe_state", ["zero_torque", "hold", "brake"])
def test_watchdog_trips_once_applies_the_safe_state_and_clears(model, safe_state):
    bus = BusMap.load(CLASSIC)
    emu_link, fw_link = memory_pair()
    watchdog_s = 0.05
    emu = make_emulator(model, bus, emu_link, ideal_drives=True, watchdog_s=watchdog_s, safe_state=safe_state)
    hold = emu.hold_tau
    fw = FakeFirmware(bus, fw_link, emu)
    plant, opt = emu.plant, emu.opt
    kp, kd = opt.hold_gains

    def cycle(*frames):
        """One cycle; returns (t, q, qd) at its start, the applied torque and the status sent."""
        t, q, qd = plant.t, plant.q().copy(), plant.vel[:NJ].copy()
        for f in frames:
            fw_link.send(f)
        emu.step_once()
        status = fw.statuses(fw.take_sensor_frames())
        assert len(status) == 1
        return t, q, qd, applied(emu), status[0]

    def commanded(tau, cycles):
        last_t = None
        for _ in range(cycles):
            last_t, _, _, tau_applied, status = cycle(fw.command(tau))
            assert np.array_equal(tau_applied, tau)
            assert status & ~REJECTED == RUNNING and not emu.watchdog.tripped
        return last_t

    def silent(cycles, last_valid_t, command):
        """Stop sending valid commands (a bad-CRC frame every cycle does not count); returns the
        time and pose at the trip."""
        trip = None
        for k in range(1, cycles + 1):
            flipped = bytearray(fw.injected(command).data)
            flipped[0] ^= 0x01
            t, q, qd, tau, status = cycle(Frame(0x100, bytes(flipped)))
            due = t - last_valid_t > watchdog_s
            if trip is None and due:
                trip = (t, q, k)
            assert emu.watchdog.tripped == due == (trip is not None)
            assert status & ~REJECTED == RUNNING | (TIMEOUT if due else 0)
            if not due:
                assert np.array_equal(tau, command)               # the last command is held until then
                continue
            q_trip = trip[1]
            if safe_state == "zero_torque":
                expected = np.zeros(NJ)
            elif safe_state == "hold":
                expected = hold + kp * (q_trip - q) - kd * qd
            else:
                expected = -opt.brake_damping_N_m_s_rad * qd
            np.testing.assert_allclose(tau, expected, rtol=1e-12, atol=1e-9)
            assert np.all(np.isfinite(plant.pos)) and np.max(np.abs(plant.vel[:NJ])) < 3.0   # no divergence
        assert trip is not None and trip[2] in (50, 51)
        return trip

    tau_1 = quantized(hold + [3.0, 8.0, 1.0])                # moves the arm: the trip pose matters
    last_t = commanded(tau_1, 100)
    assert emu.watchdog.events == [] and emu.watchdog.trips == 0
    t_trip, q_trip, _ = silent(300, last_t, tau_1)      # 250 ms in the safe state
    assert emu.watchdog.trips == 1 and emu.watchdog.events == [("tripped", t_trip)]

    # valid commands again: cleared in the first cycle with one, which applies it at once
    tau_2 = quantized(hold + [-2.0, 4.0, -1.0])
    t_clear, _, _, tau, status = cycle(fw.command(tau_2))
    assert not emu.watchdog.tripped and status & ~REJECTED == RUNNING
    assert np.array_equal(tau, tau_2)
    assert emu.watchdog.events == [("tripped", t_trip), ("cleared", t_clear)]
    last_t = commanded(tau_2, 30)

    # a second outage trips again, around the pose at the second trip
    t_trip2, q_trip2, _ = silent(60, last_t, tau_2)
    assert not np.allclose(q_trip2, q_trip, rtol=0, atol=1e-9)
    assert emu.watchdog.trips == 2
    assert emu.watchdog.events == [("tripped", t_trip), ("cleared", t_clear), ("tripped", t_trip2)]
    assert emu.commands.counters()["rejected"]["crc"] == 360
    assert np.all(np.isfinite(plant.pos))


# ----------------------------------------------------------------------------- 3. run log
def expected_columns(joints) -> list[str]:
    """ELLA's modal coordinates and sensor channels (configs/ella.toml), each channel measured and true."""
    channels = ([f"{p}_{j}" for j in joints for p in ("enc", "index", "vel")]
                + [f"imu_{c}" for c in ("ax", "ay", "az", "gx", "gy", "gz")] + [f"cur_{j}" for j in joints])
    modes = [f"eta_{body}_{m}" for body in ("link1", "link2")
             for m in ("bending_y_1", "bending_y_2", "bending_z_1", "bending_z_2", "torsion_1")]
    return (["cycle", "t", "status"] + [f"tau_cmd_{j}" for j in joints] + [f"tau_{j}" for j in joints]
            + [f"q_{j}" for j in joints] + [f"qd_{j}" for j in joints] + modes + [f"brake_{j}" for j in joints]
            + [c for ch in channels for c in (ch, f"{ch}_true")]
            + ["tip_x", "tip_y", "tip_z", "lateness_us", "compute_us", "io_us", "cmd_age_us"])


def test_run_log_header_and_one_row_per_cycle(model, tmp_path):
    bus = BusMap.load(CLASSIC)
    cmd = bus.codec("cmd_torque")
    hold = quantized(Plant(model).equilibrium_eta())
    sent: list[np.ndarray] = []

    def firmware(k: int) -> list[Frame]:
        tau = quantized(hold + [0.0, 0.02 * (k % 50), -0.02 * (k % 7)])
        sent.append(tau)
        return [cmd.encode([*tau, 0], counter=k)]

    link = AnsweringLink(on_cue(0x111, firmware))
    path = tmp_path / "logs" / "run.msgpack"
    duration = 0.2
    emu = make_emulator(model, bus, link, ideal_drives=True, duration_s=duration, log_path=str(path))
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    summary = emu.run()
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before

    n = round(duration / emu.plant.dt)
    assert summary["cycles"] == n and summary["log_dropped"] == 0 and summary["halted"] is None
    header, rows = read_run(path)
    joints = emu.plant.layout.joint_names
    assert header["format"] == "hil-run" and header["version"] == 2 and header["trailing_bytes"] == 0
    assert header["columns"] == expected_columns(joints) == emu.columns
    assert header["config"] == str(ARM) and header["bus"] == str(CLASSIC) and header["mode"] == "afap"
    assert set(header["versions"]) == {"python", "numpy", "numba"}
    assert all(isinstance(v, str) and v for v in header["versions"].values())
    assert rows.shape == (n, len(header["columns"]))

    col = {c: rows[:, i] for i, c in enumerate(header["columns"])}
    block = lambda prefix: rows[:, [header["columns"].index(f"{prefix}{j}") for j in joints]]  # noqa: E731
    np.testing.assert_array_equal(col["cycle"], np.arange(1, n + 1))
    np.testing.assert_allclose(col["t"], np.arange(1, n + 1) * emu.plant.dt, rtol=0, atol=1e-12)
    assert np.all(col["status"] == RUNNING)
    # cycle k applied the answer to the sensor frame of cycle k - 1 (the first cue is run()'s)
    np.testing.assert_array_equal(block("tau_cmd_"), np.array(sent[:n]))
    np.testing.assert_array_equal(block("tau_"), block("tau_cmd_"))
    np.testing.assert_array_equal(rows[-1, [header["columns"].index(f"q_{j}") for j in joints]],
                                  emu.plant.q())
    lay = emu.plant.layout
    eta_cols = [i for i, c in enumerate(header["columns"]) if c.startswith("eta_")]
    np.testing.assert_array_equal(rows[-1, eta_cols], emu.plant.pos[lay.n_joints:lay.n_joints + lay.n_eta])
    assert np.all(rows[:, eta_cols].std(axis=0) > 0)          # the links vibrate under the varying torques
    np.testing.assert_array_equal(block("enc_"), np.round(block("enc_")))
    enc_b = [f for f in link.sent if f.arbitration_id == 0x111]
    assert len(enc_b) == n + 1
    assert block("enc_")[-1, 2] == bus.codec("enc_b").decode(enc_b[-1])[0]
    np.testing.assert_array_equal(np.c_[col["tip_x"], col["tip_y"], col["tip_z"]][-1], summary["tip"])
    assert np.all(np.isfinite(rows))
    assert np.all(col["lateness_us"] == 0)                    # afap: the pacer never waits
    assert np.all(col["compute_us"] > 0) and np.all(col["io_us"] > 0)
    imu = rows[:, [header["columns"].index(f"imu_{c}") for c in ("ax", "ay", "az")]]
    assert np.linalg.norm(imu, axis=1) == pytest.approx(9.81, rel=0.05)   # at rest: 1 g specific force
