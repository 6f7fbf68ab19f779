"""Bus and link faults: a Link that drops, duplicates, delays and damages the frames it carries.

``FaultyLink(link, bus)`` implements the Link protocol around any link and applies the active bus
faults to the frames of either direction: ``to_plant`` (what the emulator receives from the
firmware, acted on in ``recv``) and ``to_firmware`` (what it sends, acted on in ``send``). With no
fault active a call costs one list test on top of the wrapped link's. Faults are bound and switched
by :class:`hil.faults.engine.FaultEngine` (``bind``, ``activate``, ``deactivate``, ``begin_cycle`` once
per cycle while ``busy``); nothing a fault does raises into the loop (a failing effect passes the
frame on unchanged and counts in ``errors``), and every frame a fault acts on counts in its
``hits`` (``stats()``). Frames a fault swallows count as sent for the sender: on a real bus the
node's transmission succeeded and the frame was lost afterwards.

Targets: ``"to_plant"`` or ``"to_firmware"``, optionally ``":<message name>"`` or ``":<id>"``
(``to_firmware:sensors``, ``to_plant:0x100``) to act on one arbitration id only. Faults that take
``probability_per_frame`` act on each matching frame with that probability (seeded).

    drop           the frame is lost
    duplicate      the frame and ``copies`` copies of it
    reorder        a frame is held and sent right after the next matching frame
    frame_delay    frames are held ``cycles`` cycles (or ``delay_s`` rounded up to whole cycles)
                   and released at that cycle's start, in order; clearing releases the rest at once
    corrupt        ``bytes`` random payload bytes XORed with random non-zero masks after the
                   protection was computed, so the receiver's check rejects the frame: CAN maps
                   keep the stale CRC of the message's ``crc_byte`` (a map without one delivers
                   the damaged values); serial links damage the packet after its CRC-16, so the
                   firmware's decoder counts a CRC error, and a damaged command is counted as the
                   emulator's own ``rx_crc_errors`` and never delivered
    bad_crc        only the check value is damaged: the message's (first) CRC byte on CAN (the last
                   payload byte without a bus map; messages without ``crc_byte`` pass unchanged),
                   the packet's CRC-16 on serial links (as for ``corrupt``)
    wrong_counter  the rolling counter rewritten through the message's codec (decode, counter +
                   ``counter_offset``, re-encode with a valid CRC); the default -1 repeats the
                   previous frame's counter; messages without a counter pass unchanged
    wrong_dlc      the payload cut or zero-extended to ``length_bytes`` (a CAN link refuses an
                   impossible length and counts it in ``tx_dropped``)
    silent         no frames: a silent node, or with only a direction a node in bus-off; the
                   fault's duration is the time to recovery
    period         only every ``divider``-th matching frame passes (a slower message period;
                   a faster one is ``duplicate``)
    babble         ``rate_hz`` filler frames of the target id (``length_bytes`` bytes of
                   ``fill_byte``) per second of emulator time, sent at the cycle starts; the bus
                   bandwidth they would take from other nodes is not modelled
"""
from __future__ import annotations

import math
import time
from collections import deque
from typing import Any, Callable

import numpy as np

from firmware_bridge.links.base import Frame, Link, LinkCounters
from firmware_bridge.wire.framing import cobs_encode, crc16_ccitt_false
from firmware_bridge.wire.messages import DIRECTIONS, BusMap, Codec, DecodeError
from config_schema import UserError

BUS_KINDS = ("drop", "duplicate", "reorder", "frame_delay", "corrupt", "bad_crc", "wrong_counter", "wrong_dlc",
             "silent", "period", "babble")


def parse_bus_target(target: str) -> tuple[str, str | int | None]:
    """(direction, message name or id or None) of a bus fault target such as ``to_plant:0x100``."""
    direction, colon, message = target.partition(":")
    if direction not in DIRECTIONS or (colon and not message):
        raise UserError('expected "to_plant" or "to_firmware", optionally followed by ":<message name or id>"')
    if not colon:
        return direction, None
    try:
        return direction, int(message, 0)
    except ValueError:
        return direction, message


def _copy(frame: Frame, data: bytes | None = None) -> Frame:
    return Frame(frame.arbitration_id, frame.data if data is None else data, frame.is_fd,
                 frame.is_extended_id, frame.timestamp)


def _serial_packet(arbitration_id: int, payload: bytes, crc: int) -> bytes:
    """Wire bytes of a serial packet with the given (possibly wrong) CRC-16."""
    return cobs_encode(bytes((arbitration_id,)) + payload + crc.to_bytes(2, "big")) + b"\x00"


class BusEffect:
    """A bound bus fault acting on the frames of one direction (and one id if ``match`` is set)."""

    filters = True      # acts on passing frames (babble only adds frames)
    ticks = False       # needs begin_cycle while active

    def __init__(self, name: str, direction: str, match: int | None, codec: Codec | None,
                 link: FaultyLink, rng: np.random.Generator, params: dict[str, Any], dt_s: float):
        self.name = name
        self.direction = direction
        self.match = match
        self.codec = codec
        self.link = link
        self.rng = rng
        self.p = params.get("probability_per_frame", 1.0)
        self.hits = 0
        self.setup(params, dt_s)

    def setup(self, params: dict[str, Any], dt_s: float) -> None:
        """Read the kind's own parameters."""

    def matches(self, frame: Frame) -> bool:
        return self.match is None or frame.arbitration_id == self.match

    def hit(self) -> bool:
        """Whether this frame is struck (probability_per_frame), counted."""
        if self.p >= 1.0 or self.rng.random() < self.p:
            self.hits += 1
            return True
        return False

    def codec_of(self, frame: Frame) -> Codec | None:
        if self.codec is not None or self.link.bus is None:
            return self.codec
        return self.link.bus.by_id(frame.arbitration_id, frame.is_extended_id)

    def apply(self, frame: Frame, out: list) -> None:
        out.append(frame)

    def start(self) -> None:
        pass

    def tick(self, cycle: int) -> None:
        pass

    def stop(self) -> None:
        pass


class _Drop(BusEffect):
    def apply(self, frame: Frame, out: list) -> None:
        if not self.hit():
            out.append(frame)


class _Duplicate(BusEffect):
    def setup(self, params: dict[str, Any], dt_s: float) -> None:
        self.copies = params["copies"]

    def apply(self, frame: Frame, out: list) -> None:
        out.append(frame)
        if self.hit():
            out.extend(_copy(frame) for _ in range(self.copies))


class _Reorder(BusEffect):
    held: Frame | None = None

    def apply(self, frame: Frame, out: list) -> None:
        if self.held is None:
            self.held = frame
            self.hits += 1
            return
        out.append(frame)
        out.append(self.held)
        self.held = None

    def stop(self) -> None:
        if self.held is not None:
            self.link.release(self.direction, self.held)
            self.held = None


class _FrameDelay(BusEffect):
    ticks = True

    def setup(self, params: dict[str, Any], dt_s: float) -> None:
        self.cycles = params["cycles"] or max(1, math.ceil(params["delay_s"] / dt_s - 1e-9))
        self.queue: deque[tuple[int, Frame]] = deque()

    def apply(self, frame: Frame, out: list) -> None:
        self.queue.append((self.link.cycle + self.cycles, frame))
        self.hits += 1

    def tick(self, cycle: int) -> None:
        while self.queue and self.queue[0][0] <= cycle:
            self.link.release(self.direction, self.queue.popleft()[1])

    def stop(self) -> None:
        while self.queue:
            self.link.release(self.direction, self.queue.popleft()[1])


class _Corrupt(BusEffect):
    def setup(self, params: dict[str, Any], dt_s: float) -> None:
        self.n = params["bytes"]

    def _flip(self, data: bytes, keep: tuple[int, ...]) -> bytes:
        where = [i for i in range(len(data)) if i not in keep]
        if not where:
            return data
        picks = self.rng.choice(len(where), size=min(self.n, len(where)), replace=False)
        out = bytearray(data)
        for k in picks:
            out[where[k]] ^= int(self.rng.integers(1, 256))
        return bytes(out)

    def apply(self, frame: Frame, out: list) -> None:
        if not self.hit():
            out.append(frame)
        elif not self.link.serial:
            codec = self.codec_of(frame)
            out.append(_copy(frame, self._flip(frame.data, codec.crc_bytes if codec else ())))
        elif self.direction == "to_firmware":
            crc = crc16_ccitt_false(bytes((frame.arbitration_id,)) + frame.data)
            if frame.data:
                out.append(_serial_packet(frame.arbitration_id, self._flip(frame.data, ()), crc))
            else:
                out.append(_serial_packet(frame.arbitration_id, b"", crc ^ int(self.rng.integers(1, 256))))
        else:
            self.link.counters.rx_crc_errors += 1      # what the link's CRC-16 check would have done


class _BadCrc(BusEffect):
    def apply(self, frame: Frame, out: list) -> None:
        if self.link.serial:
            if not self.hit():
                out.append(frame)
            elif self.direction == "to_firmware":
                crc = crc16_ccitt_false(bytes((frame.arbitration_id,)) + frame.data)
                out.append(_serial_packet(frame.arbitration_id, frame.data, crc ^ 0x00FF))
            else:
                self.link.counters.rx_crc_errors += 1
            return
        codec = self.codec_of(frame)
        k = codec.crc_byte if codec is not None else None
        if k is None and self.link.bus is None and frame.data:
            k = len(frame.data) - 1
        if k is None or k >= len(frame.data) or not self.hit():
            out.append(frame)
            return
        data = bytearray(frame.data)
        data[k] ^= 0xFF
        out.append(_copy(frame, bytes(data)))


class _WrongCounter(BusEffect):
    def setup(self, params: dict[str, Any], dt_s: float) -> None:
        self.offset = params["counter_offset"]

    def apply(self, frame: Frame, out: list) -> None:
        codec = self.codec_of(frame)
        if codec is None or codec.counter_index is None:
            out.append(frame)
            return
        try:
            values = codec.decode(frame)
        except DecodeError:
            out.append(frame)               # already invalid: nothing to rewrite
            return
        if not self.hit():
            out.append(frame)
            return
        i = codec.counter_index
        values[i] = (int(values[i]) + self.offset) % (1 << codec.counter_bits)
        new = codec.encode(values, check_range=False)
        new.timestamp = frame.timestamp
        out.append(new)


class _WrongDlc(BusEffect):
    def setup(self, params: dict[str, Any], dt_s: float) -> None:
        self.length = params["length_bytes"]

    def apply(self, frame: Frame, out: list) -> None:
        self.hits += 1
        data = frame.data[:self.length] + bytes(max(0, self.length - len(frame.data)))
        out.append(_copy(frame, data))


class _Silent(BusEffect):
    def apply(self, frame: Frame, out: list) -> None:
        self.hits += 1


class _Period(BusEffect):
    def setup(self, params: dict[str, Any], dt_s: float) -> None:
        self.divider = params["divider"]
        self.n = 0

    def start(self) -> None:
        self.n = 0

    def apply(self, frame: Frame, out: list) -> None:
        if self.n % self.divider == 0:
            out.append(frame)
        else:
            self.hits += 1
        self.n += 1


class _Babble(BusEffect):
    filters = False
    ticks = True

    def setup(self, params: dict[str, Any], dt_s: float) -> None:
        self.per_cycle = params["rate_hz"] * dt_s
        n = params["length_bytes"]
        bus = self.link.bus
        self.data = bytes((params["fill_byte"],)) * n
        self.is_fd = n > 8 or (bus is not None and bus.kind == "canfd")
        self.extended = self.codec.is_extended_id if self.codec is not None else self.match > 0x7FF
        self.owed = 0.0

    def start(self) -> None:
        self.owed = 0.0

    def tick(self, cycle: int) -> None:
        self.owed += self.per_cycle
        while self.owed >= 1.0 - 1e-9:
            self.owed -= 1.0
            self.hits += 1
            self.link.release(self.direction, Frame(self.match, self.data, self.is_fd, self.extended,
                                                    time.monotonic()))


_EFFECTS: dict[str, type[BusEffect]] = {
    "drop": _Drop, "duplicate": _Duplicate, "reorder": _Reorder, "frame_delay": _FrameDelay,
    "corrupt": _Corrupt, "bad_crc": _BadCrc, "wrong_counter": _WrongCounter, "wrong_dlc": _WrongDlc,
    "silent": _Silent, "period": _Period, "babble": _Babble,
}


class FaultyLink:
    """A Link that applies the active bus faults to the frames of ``link`` (see the module doc).

    ``bus`` (the bus map both ends use) locates messages by name, CRC bytes and rolling counters,
    and says whether the link is serial (``bus.kind == "serial"``: damaged packets are then written
    as raw wire bytes through the wrapped link's ``send_packet``). ``counters`` are the wrapped
    link's; attributes this class does not define are the wrapped link's too.
    """

    def __init__(self, link: Link, bus: BusMap | None = None):
        self.inner = link
        self.name = link.name
        self.bus = bus
        self.serial = bus is not None and bus.kind == "serial"
        self.cycle = 0
        self.busy = False
        self.errors = 0
        self._tx: list[BusEffect] = []
        self._rx: list[BusEffect] = []
        self._rx_ready: deque[Frame] = deque()
        self._ticking: list[BusEffect] = []
        self._bound: list[tuple[str, BusEffect]] = []
        self.tap: Callable[[Frame | bytes], None] | None = None    # sees every item that went out on the wire

    def __getattr__(self, name: str) -> Any:
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def counters(self) -> LinkCounters:
        return self.inner.counters

    # ------------------------------------------------------------------ Link protocol
    def send(self, frame: Frame) -> bool:
        if not self._tx:
            return self._transmit(frame)
        try:
            out = self._run(self._tx, frame)
        except Exception:   # a fault must never stop the loop: the frame goes out as it is
            self.errors += 1
            return self._transmit(frame)
        ok = True
        for item in out:
            ok = self._transmit(item) and ok
        return ok

    def recv(self) -> Frame | None:
        if self._rx_ready:
            return self._rx_ready.popleft()
        if not self._rx:
            return self.inner.recv()
        while (frame := self.inner.recv()) is not None:
            try:
                out = self._run(self._rx, frame)
            except Exception:   # a fault must never stop the loop: the frame is delivered as it is
                self.errors += 1
                return frame
            if out:
                self._rx_ready.extend(out[1:])
                return out[0]
        return None

    def discard(self) -> int:
        """Drop what waits to be received, here and in the wrapped link (if it can); how many frames."""
        dropped = len(self._rx_ready)
        self._rx_ready.clear()
        self.inner.counters.rx_over_budget += dropped
        inner = getattr(self.inner, "discard", None)
        return dropped + (inner() if inner is not None else 0)

    def close(self) -> None:
        self.inner.close()

    # ------------------------------------------------------------------ engine side
    def bind(self, name: str, kind: str, target: str, params: dict[str, Any], rng: np.random.Generator,
             dt_s: float) -> BusEffect:
        """A bus fault ready to activate; ValueError/KeyError if it cannot act on this link."""
        direction, message = parse_bus_target(target)
        codec, match = self._resolve(direction, message)
        if kind == "wrong_counter" and self.bus is None:
            raise UserError("a wrong_counter fault needs the bus map to re-encode the frames")
        if kind == "wrong_counter" and codec is not None and codec.counter_index is None:
            raise UserError(f"message {codec.name} has no rolling counter")
        if kind == "bad_crc" and not self.serial and codec is not None and codec.crc_byte is None:
            raise UserError(f"message {codec.name} has no CRC byte (crc_byte) to damage")
        if kind == "corrupt" and self.bus is not None and params.get("bytes", 1) > (longest := max(
                (c.length for c in ([codec] if codec else self.bus.messages(direction))), default=0)):
            raise UserError(f"bytes = {params['bytes']}: more than the {longest} payload bytes of the frames it damages")
        if (kind in ("corrupt", "bad_crc") and self.serial and direction == "to_firmware"
                and not hasattr(self.inner, "send_packet")):
            raise UserError(f"a {kind} fault on a serial link needs a link that writes raw packets (SerialLink)")
        effect = _EFFECTS[kind](name, direction, match, codec, self, rng, params, dt_s)
        self._bound.append((kind, effect))
        return effect

    def _resolve(self, direction: str, message: str | int | None) -> tuple[Codec | None, int | None]:
        if message is None:
            return None, None
        if isinstance(message, int):
            codec = self.bus.by_id(message) if self.bus is not None else None
        elif self.bus is None:
            raise UserError(f"message {message!r} by name needs the bus map; give its id instead")
        else:
            codec = self.bus.codec(message)
        if codec is not None and codec.direction != direction:
            raise UserError(f"message {codec.name} (id 0x{codec.arbitration_id:X}) goes {codec.direction}, "
                             f"not {direction}")
        return codec, codec.arbitration_id if codec is not None else message

    def activate(self, effect: BusEffect) -> None:
        effect.start()
        if effect.filters:
            (self._tx if effect.direction == "to_firmware" else self._rx).append(effect)
        if effect.ticks:
            self._ticking.append(effect)
        self.busy = bool(self._ticking)

    def deactivate(self, effect: BusEffect) -> None:
        chain = self._tx if effect.direction == "to_firmware" else self._rx
        if effect in chain:
            chain.remove(effect)
        if effect in self._ticking:
            self._ticking.remove(effect)
        self.busy = bool(self._ticking)
        effect.stop()

    def begin_cycle(self, cycle: int) -> None:
        """Cycle start (called by the engine while ``busy``): delayed frames and babble go out."""
        self.cycle = cycle
        for effect in self._ticking:
            try:
                effect.tick(cycle)
            except Exception:   # a fault must never stop the loop
                self.errors += 1

    def release(self, direction: str, item: Frame | bytes) -> None:
        """Put a frame a fault held (or made) on its way: sent now, or received at the next recv."""
        if direction == "to_firmware":
            self._transmit(item)
        else:
            self._rx_ready.append(item)

    def stats(self) -> dict[str, dict]:
        """Frames each bound bus fault acted on, and the errors caught."""
        out: dict[str, dict] = {}
        for kind, effect in self._bound:
            entry = out.setdefault(effect.name, {"kind": kind, "direction": effect.direction, "hits": 0})
            entry["hits"] += effect.hits
        return {"faults": out, "errors": self.errors}

    # ------------------------------------------------------------------ internals
    @staticmethod
    def _run(chain: list[BusEffect], frame: Frame) -> list:
        """Pass a frame through the active effects in order; raw packets (bytes) pass untouched."""
        frames: list = [frame]
        for effect in chain:
            nxt: list = []
            for f in frames:
                if isinstance(f, bytes) or not effect.matches(f):
                    nxt.append(f)
                else:
                    effect.apply(f, nxt)
            frames = nxt
            if not frames:
                break
        return frames

    def _transmit(self, item: Frame | bytes) -> bool:
        sent = self.inner.send_packet(item) if isinstance(item, bytes) else self.inner.send(item)
        if sent and self.tap is not None:
            self.tap(item)
        return sent
