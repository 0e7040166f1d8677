"""GDB remote serial protocol framing: ``$payload#cs`` packets, acks, escapes,
run-length encoding and the out-of-band interrupt byte.

This module knows nothing of targets: it turns a byte stream into events and
payloads into frames (GDB manual, "Overview" of the remote protocol). A packet is
``$`` + data + ``#`` + two hex digits, the sum of the data bytes modulo 256. In the
data, ``}`` escapes the next byte (XOR 0x20; ``$ # } *`` must be escaped in binary
data) and ``*`` followed by a byte ``n`` repeats the previous byte ``n - 29`` more
times. Outside packets, ``+``/``-`` acknowledge and 0x03 is Ctrl-C.

The reader never raises on input: a frame it cannot take becomes a ``Bad`` event
(bad checksum, too long, broken escape), and the server answers it and keeps going.
"""

from __future__ import annotations

from dataclasses import dataclass

INTERRUPT = 0x03
MAX_PACKET = 0x4000  # payload bytes: advertised as PacketSize; anything longer is refused
HEX = b"0123456789abcdefABCDEF"


@dataclass(frozen=True)
class Packet:
    """A well-formed packet: its decoded payload (escapes and repeats undone)."""

    data: bytes


@dataclass(frozen=True)
class Bad:
    """A frame that cannot be used. ``nak``: ask for it again (a transmission error,
    the sender should retransmit); otherwise it was received whole but is unusable
    (too long, a broken escape) and gets an error reply."""

    reason: str
    nak: bool


@dataclass(frozen=True)
class Interrupt:
    """Ctrl-C: stop the target."""


@dataclass(frozen=True)
class Ack:
    ok: bool  # '+' or '-'


Event = Packet | Bad | Interrupt | Ack


def checksum(data: bytes) -> int:
    return sum(data) & 0xFF


def escape(data: bytes) -> bytes:
    """Binary data as a packet may carry it: ``$ # } *`` become ``}`` + byte ^ 0x20."""
    out = bytearray()
    for b in data:
        if b in b"$#}*":
            out += bytes((0x7D, b ^ 0x20))
        else:
            out.append(b)
    return bytes(out)


def frame(payload: bytes | str) -> bytes:
    """A whole packet for ``payload`` (escaped here: any byte may be in it)."""
    data = escape(payload.encode("latin-1") if isinstance(payload, str) else payload)
    return b"$" + data + b"#" + b"%02x" % checksum(data)


def decode(raw: bytes) -> bytes:
    """Undo escapes and run-length encoding; ValueError on a broken sequence."""
    out = bytearray()
    i, n = 0, len(raw)
    while i < n:
        b = raw[i]
        if b == 0x7D:  # '}'
            if i + 1 >= n:
                raise ValueError("escape character at the end of the packet")
            out.append(raw[i + 1] ^ 0x20)
            i += 2
        elif b == 0x2A:  # '*'
            if not out or i + 1 >= n:
                raise ValueError("run-length marker with nothing to repeat")
            count = raw[i + 1] - 29
            if count < 0 or len(out) + count > MAX_PACKET:
                raise ValueError("run-length count out of range")
            out += bytes((out[-1],)) * count
            i += 2
        else:
            out.append(b)
            i += 1
    return bytes(out)


class Reader:
    """Incremental parser: ``feed(bytes)`` returns the events completed so far."""

    def __init__(self, max_packet: int = MAX_PACKET) -> None:
        self.max_packet = max_packet
        self._state = "idle"  # idle, data, cs1, cs2
        self._buf = bytearray()
        self._cs = bytearray()
        self._overflow = False

    def feed(self, chunk: bytes) -> list[Event]:
        events: list[Event] = []
        for b in chunk:
            ev = self._byte(b)
            if ev is not None:
                events.append(ev)
        return events

    def _byte(self, b: int) -> Event | None:
        st = self._state
        if st == "idle":
            if b == 0x24:  # '$'
                self._start()
            elif b == INTERRUPT:
                return Interrupt()
            elif b in (0x2B, 0x2D):
                return Ack(b == 0x2B)
            return None  # noise between packets (a notification's '%', stray bytes)
        if st == "data":
            if b == 0x23:  # '#'
                self._state = "cs1"
            elif b == 0x24:  # a '$' inside a packet: the sender started again
                self._start()
                return Bad("packet restarted before its end", nak=True)
            elif len(self._buf) >= 2 * self.max_packet + 8:  # escapes may double the raw size
                self._overflow = True
            else:
                self._buf.append(b)
            return None
        self._cs.append(b)
        if st == "cs1":
            self._state = "cs2"
            return None
        self._state = "idle"
        return self._finish()

    def _start(self) -> None:
        self._state = "data"
        self._buf.clear()
        self._cs.clear()
        self._overflow = False

    def _finish(self) -> Event:
        raw, cs = bytes(self._buf), bytes(self._cs)
        self._buf.clear()
        if self._overflow:
            return Bad(f"packet longer than {self.max_packet} bytes", nak=False)
        if any(c not in HEX for c in cs):
            return Bad(f"checksum '{cs.decode('latin-1')}' is not two hex digits", nak=True)
        if int(cs, 16) != checksum(raw):
            return Bad(f"bad checksum: got {cs.decode()}, computed {checksum(raw):02x}", nak=True)
        try:
            data = decode(raw)
        except ValueError as exc:
            return Bad(str(exc), nak=False)
        if len(data) > self.max_packet:
            return Bad(f"packet longer than {self.max_packet} bytes", nak=False)
        return Packet(data)
