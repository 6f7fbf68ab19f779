"""How well a bus map's messages are protected: the Hamming distance of each message's CRC over
its frame, and the residual error probability (damage that passes every check).

A CRC is linear: flipping a set of frame bits changes the computed CRC by the XOR of what each
flip alone changes it by (its syndrome; a flipped CRC bit changes the stored value instead), so a
damage pattern goes undetected exactly when the syndromes of its bits XOR to zero. Counting the
undetected patterns of weight w, A_w, over the N bits of the frame (every payload bit and the
CRC; a serial packet's id byte, payload and CRC-16) gives

* the Hamming distance HD: the smallest w with A_w > 0 (every damage of fewer bits is detected);
* the probability that a frame hit by independent bit errors at rate p passes the CRC,
  P(p) = sum_w A_w p^w (1 - p)^(N - w), taken over w <= 4 (the lowest weights dominate);
* the probability that a frame of random bytes passes: 2^-r for an r-bit CRC, times the
  fraction of counter values the receiver takes (counter_max_delta / 2^bits).

A message without any CRC (a CAN frame without ``crc_byte``; the CAN controller's own CRC-15 on
a real bus is not counted, udp_loopback has none) passes any damage that keeps its values in range.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import comb

from firmware_bridge.wire.codec import CRC_WIDTH, Codec, crc8_sae_j1850, crc16_e2e_p05
from firmware_bridge.wire.framing import crc16_ccitt_false

BIT_ERROR_RATE = 1e-5       # the bit error rate the residual error is stated at
MAX_WEIGHT = 4


@dataclass(frozen=True)
class Protection:
    """One message's protection."""

    check: str                      # what checks the frame ("CRC-16 (E2E Profile 5)", "none", ...)
    bits: int                       # frame bits the damage can hit
    crc_bits: int
    undetected: dict[int, int]      # weight -> number of undetected damage patterns (A_w), w <= MAX_WEIGHT
    counter_window: float           # fraction of counter values a receiver takes (1 without a counter)

    @property
    def hamming_distance(self) -> int | None:
        """The smallest number of flipped bits that can pass; None if none up to MAX_WEIGHT can."""
        return min((w for w, a in self.undetected.items() if a), default=None)

    def residual(self, p: float = BIT_ERROR_RATE) -> float:
        """Probability that a frame with independent bit errors at rate p passes the CRC."""
        return sum(a * p ** w * (1 - p) ** (self.bits - w) for w, a in self.undetected.items())

    def random_frame(self) -> float:
        """Probability that a frame of random bytes passes the CRC and the counter check."""
        return 2.0 ** -self.crc_bits * self.counter_window


def protection(codec: Codec, serial: bool) -> Protection:
    """The protection of one message (`serial`: sent as a packet with the link's CRC-16)."""
    window = codec.counter_max_delta / (1 << codec.counter_bits) if codec.counter_index is not None else 1.0
    if serial:      # the packet's id byte and payload under the link's CRC-16
        return _counted("CRC-16/CCITT-FALSE of the serial packet", crc16_ccitt_false, codec.length + 1, 16, window)
    if codec.crc_byte is None:
        n = 8 * codec.length
        return Protection("none", n, 0, {1: n} if n else {}, window)
    width = CRC_WIDTH[codec.crc]
    if codec.crc == "crc8":
        return _counted("CRC-8 SAE J1850", crc8_sae_j1850, codec.length - width, 8, window)
    return _counted(f"CRC-16 (E2E Profile 5, Data ID 0x{codec.data_id:X})",
                    lambda data: crc16_e2e_p05(data, codec.data_id), codec.length - width, 16, window)


def _counted(name: str, crc, data_bytes: int, crc_bits: int, window: float) -> Protection:
    """Protection of `data_bytes` covered bytes plus the CRC, from the syndromes of single-bit flips."""
    zero = bytes(data_bytes)
    ref = crc(zero)
    syndromes = []
    for bit in range(8 * data_bytes):
        flipped = bytearray(zero)
        flipped[bit // 8] ^= 1 << bit % 8
        syndromes.append(crc(bytes(flipped)) ^ ref)
    syndromes += [1 << j for j in range(crc_bits)]            # a flipped CRC bit changes the stored value
    return Protection(name, len(syndromes), crc_bits, undetected_weights(syndromes), window)


def undetected_weights(syndromes: list[int]) -> dict[int, int]:
    """A_w for w = 2..MAX_WEIGHT: the sets of w bits whose syndromes XOR to zero (the syndromes of
    single bits are non-zero, as for every CRC)."""
    n = len(syndromes)
    count: dict[int, int] = {}
    for s in syndromes:
        count[s] = count.get(s, 0) + 1
    a2 = sum(comb(c, 2) for c in count.values())
    pairs: dict[int, int] = {}
    a3 = 0
    for i in range(n):
        si = syndromes[i]
        for j in range(i + 1, n):
            v = si ^ syndromes[j]
            pairs[v] = pairs.get(v, 0) + 1
            a3 += count.get(v, 0)
    # a pair of pairs with one bit in common is a pair of equal syndromes, n - 2 times each
    a4 = (sum(comb(c, 2) for c in pairs.values()) - (n - 2) * a2) // 3
    return {2: a2, 3: a3 // 3, 4: a4}
