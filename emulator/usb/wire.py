"""Full-speed USB on the wire: packets as bits, with CRCs and bit stuffing.

Every duration the host model uses comes from here, in bit times of 12 Mb/s
(USB 2.0 section 7.1.11: full speed is 12.000 Mb/s +/-0.25%). A packet is SYNC (8 bits),
PID (8), its fields, CRC and EOP (SE0 for 2 bits, then 1 bit of J, section 7.1.13.2);
from SYNC to the end of the CRC a 0 is stuffed after every six consecutive 1s
(section 7.1.9), counted on the packet's own bits (least significant bit first).
"""

from __future__ import annotations

BIT_NS = 1000 / 12  # one bit time at 12 Mb/s, in ns
FRAME_BITS = 12000  # a 1 ms frame
EOP_BITS = 3
TURNAROUND_BITS = 7.5  # the most a full-speed round trip may take (USB 2.0 7.1.18.1)
GAP_BITS = 2  # the host's inter-packet delay between transactions (USB 2.0 7.1.18.1)
EOF1_BITS = 32  # the host starts no transaction that would end this near the frame's end

PID_OUT, PID_IN, PID_SOF, PID_SETUP = 0xE1, 0x69, 0xA5, 0x2D
PID_DATA0, PID_DATA1 = 0xC3, 0x4B
PID_ACK, PID_NAK, PID_STALL = 0xD2, 0x5A, 0x1E
SYNC = 0x80  # 00000001 sent LSB first: KJKJKJKK


def crc5(value: int, nbits: int = 11) -> int:
    """The token CRC (polynomial x^5 + x^2 + 1, section 8.3.5.1), as sent."""
    crc = 0x1F
    for i in range(nbits):
        bit = (value >> i) & 1
        if (crc & 1) ^ bit:
            crc = (crc >> 1) ^ 0x14
        else:
            crc >>= 1
    return crc ^ 0x1F


def crc16(data: bytes) -> int:
    """The data CRC (polynomial x^16 + x^15 + x^2 + 1, section 8.3.5.2), as sent."""
    crc = 0xFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc ^ 0xFFFF


def _bits(fields: list[tuple[int, int]]) -> list[int]:
    out: list[int] = []
    for value, n in fields:
        out.extend((value >> i) & 1 for i in range(n))
    return out


def stuffed(bits: list[int]) -> int:
    """How many 0s bit stuffing adds to this bit stream."""
    run = added = 0
    for bit in bits:
        if bit:
            run += 1
            if run == 6:
                added += 1
                run = 0
        else:
            run = 0
    return added


def _packet(fields: list[tuple[int, int]]) -> int:
    bits = _bits([(SYNC, 8), *fields])
    return len(bits) + stuffed(bits) + EOP_BITS


def token_bits(pid: int, addr: int, ep: int) -> int:
    field = addr | (ep << 7)
    return _packet([(pid, 8), (field, 11), (crc5(field), 5)])


def sof_bits(frame: int) -> int:
    frame &= 0x7FF
    return _packet([(PID_SOF, 8), (frame, 11), (crc5(frame), 5)])


def data_bits(pid: int, data: bytes) -> int:
    return _packet([(pid, 8), *((b, 8) for b in data), (crc16(data), 16)])


def handshake_bits(pid: int) -> int:
    return _packet([(pid, 8)])


def ns(bits: float) -> float:
    return bits * BIT_NS
