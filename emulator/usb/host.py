"""A full-speed USB host controller on the machine's clock, in host time.

The host keeps its own time (nanoseconds of the host's crystal) and turns it into
core cycles through the device's oscillator (``pkasim.peripherals.osc48``): every
transaction is an event on the machine's one Clock at the cycle its host time maps
to. Nothing reads the wall clock.

Schedule (docs/usb.md, "Timing"): a frame every 1 ms starts with SOF; then the
interrupt IN endpoint when its bInterval is due (once, a NAK waits for the next
interval); then the one transfer the host driver has submitted (control or bulk,
sequentially as libccid does: write, then read). A transaction starts only if it ends
before the frame's EOF1 guard, and at most 19 bulk transactions of 64 bytes fit in a
frame (USB 2.0 table 5-10). A NAKed transaction is retried back to back (an OHCI with
one endpoint on its list): the retries are not simulated one by one; when the device
arms the endpoint, the transaction goes at the first retry slot after that moment,
and the NAKs in between are counted.

Every packet is logged with its host time and core cycle (``log``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from pkasim.base.clock import Clock, Event
from pkasim.peripherals.osc48 import NS
from pkasim.peripherals.usb import ACK, NAK, PIPE_OF, STALL, Usb
from pkasim.usb import wire

FRAME_NS = 1_000_000
MAX_BULK_PER_FRAME = 19  # USB 2.0 table 5-10: 64-byte bulk at full speed


class UsbError(Exception):
    """The device did not do what the host asked (STALL, no answer in time)."""


@dataclass
class Packet:
    """One transaction on the wire, as the log keeps it."""

    start_ns: float
    end_ns: float
    cycle: int  # the core cycle at which the device saw it
    frame: int
    kind: str  # SOF, SETUP, OUT, IN
    ep: int
    handshake: str  # ACK, NAK, STALL, "" (SOF)
    data: bytes = b""
    tag: str = ""  # what the driver used it for (cmd, resp, text, ...)
    naks: int = 0  # NAKs counted before it (retries not simulated one by one)

    @property
    def duration_ns(self) -> float:
        return self.end_ns - self.start_ns


# A transaction a transfer asks for: ("setup", data) | ("out", ep, data) | ("in", ep)
Txn = tuple
TransferGen = Generator[Txn, tuple[str, bytes], Any]


@dataclass
class _Transfer:
    gen: TransferGen
    done: Callable[[Any, BaseException | None], None]
    tag: str
    txn: Txn | None = None
    nak_since: float | None = None  # host time of the first NAK of the pending transaction
    naks: int = 0


@dataclass
class _Frame:
    number: int
    start_ns: float
    bulk: int = 0  # 64-byte bulk transactions so far


@dataclass
class HostStats:
    frames: int = 0
    naks: int = 0
    packets: int = 0
    log: list[Packet] = field(default_factory=list)


class UsbHost:
    """The host controller and its port, driving one ``Usb`` device model."""

    def __init__(self, clock: Clock, device: Usb, *, interrupt_poll: bool = True) -> None:
        self.clock = clock
        self.dev = device
        self.osc = device.oscillator
        self.addr = 0
        self.stats = HostStats()
        self.log = self.stats.log
        self.port_enabled = False
        self.interrupt_poll = interrupt_poll
        self.interrupt_interval = 0  # frames; 0 = not polling (set after enumeration)
        self.on_interrupt: Callable[[bytes], None] | None = None
        self._frame = _Frame(-1, -FRAME_NS)
        self._bus_free = 0.0
        self._current: _Transfer | None = None
        self._queue: list[_Transfer] = []
        self._pending: Event | None = None  # the next transaction's event
        self._frame_event: Event | None = None
        self._timers: list[tuple[float, Callable[[], None]]] = []
        device.on_arm = self._device_armed
        self.frame_number = 0

    # ------------------------------------------------------------- time
    def now_ns(self) -> float:
        return self.osc.ns_at(self.clock.now)

    def _at(self, ns: float, callback: Callable[[], None], name: str) -> Event:
        return self.clock.schedule(self.osc.cycle_at(ns), callback, name)

    def start(self) -> None:
        """Start the frame timer at the next whole millisecond of host time."""
        first = math.floor(self.now_ns() / FRAME_NS) + 1
        self._frame_event = self._at(first * FRAME_NS, lambda: self._frame_start(first), "usb-frame")

    def after_ms(self, ms: int, callback: Callable[[], None]) -> None:
        """Call back at the start of the frame ``ms`` frames from now (host timers)."""
        self._timers.append((self._frame.start_ns + ms * FRAME_NS, callback))

    def _nak_period(self, txn: Txn) -> float:
        return wire.ns(self._nak_bits(txn[0], txn[1] if txn[0] != "setup" else 0, txn[2] if txn[0] == "out" else b""))

    def _frame_start(self, n: int) -> None:
        start = n * FRAME_NS
        tr = self._current
        if tr is not None and tr.nak_since is not None and tr.txn is not None and self._pending is None:
            # The retries that NAKed back to back until the end of the last frame.
            tr.naks += max(0, math.floor((self._frame_end() - tr.nak_since) / self._nak_period(tr.txn)) - 1)
        self._frame = _Frame(n, start)
        self.stats.frames += 1
        self._frame_event = self._at(start + FRAME_NS, lambda: self._frame_start(n + 1), "usb-frame")
        self._bus_free = max(self._bus_free, start)
        if self.port_enabled:
            self.frame_number = n & 0x7FF
            bits = wire.sof_bits(self.frame_number)
            end = start + wire.ns(bits + wire.GAP_BITS)
            self.dev.sof(self.frame_number, start)
            self._log(Packet(start, end, self.clock.now, n, "SOF", 0, "", tag="sof"))
            self._bus_free = end
        due = [t for t in self._timers if t[0] <= start]
        self._timers = [t for t in self._timers if t[0] > start]
        for _, callback in due:
            callback()
        if self.port_enabled and self.interrupt_interval and n % self.interrupt_interval == 0:
            self._poll_interrupt()
        tr = self._current
        if tr is not None and tr.nak_since is not None and tr.txn is not None:
            tr.nak_since = self._bus_free  # the retries start over after SOF
            if not self._device_ready(tr.txn):
                tr.naks += 1  # that first retry NAKs too
        self._kick()

    def _frame_end(self) -> float:
        return self._frame.start_ns + FRAME_NS - wire.ns(wire.EOF1_BITS)

    # ------------------------------------------------------------- port
    def reset_port(self) -> None:
        """Bus reset (SE0 for 10 ms is the caller's wait): address 0, port enabled."""
        self.dev.bus_reset()
        self.addr = 0
        self.port_enabled = True

    # ------------------------------------------------------------- transfers
    def submit(self, gen: TransferGen, done: Callable[[Any, BaseException | None], None], tag: str = "") -> None:
        """Queue a transfer; ``done(result, error)`` is called when it ends."""
        self._queue.append(_Transfer(gen, done, tag))
        if self._current is None:
            self._next_transfer()

    def _next_transfer(self) -> None:
        while self._current is None and self._queue:
            tr = self._queue.pop(0)
            self._current = tr
            self._advance(tr, None)
        self._kick()

    def _advance(self, tr: _Transfer, result: tuple[str, bytes] | None) -> None:
        """Give the transfer its last transaction's result; take its next request."""
        try:
            tr.txn = tr.gen.send(result) if result is not None else next(tr.gen)
            tr.nak_since = None
            tr.naks = 0
        except StopIteration as stop:
            self._finish(tr, stop.value, None)
        except UsbError as exc:
            self._finish(tr, None, exc)

    def _finish(self, tr: _Transfer, value: Any, error: BaseException | None) -> None:
        if self._current is tr:
            self._current = None
        tr.txn = None
        tr.done(value, error)
        if self._current is None:
            self._next_transfer()

    def _txn_bits(self, txn: Txn) -> float:
        """The whole transaction if the device ACKs (the most it can take)."""
        kind = txn[0]
        if kind == "setup":
            return (wire.token_bits(wire.PID_SETUP, self.addr, 0) + wire.TURNAROUND_BITS
                    + wire.data_bits(wire.PID_DATA0, txn[1]) + wire.TURNAROUND_BITS
                    + wire.handshake_bits(wire.PID_ACK) + wire.GAP_BITS)
        if kind == "out":
            return (wire.token_bits(wire.PID_OUT, self.addr, txn[1]) + wire.TURNAROUND_BITS
                    + wire.data_bits(wire.PID_DATA0, txn[2]) + wire.TURNAROUND_BITS
                    + wire.handshake_bits(wire.PID_ACK) + wire.GAP_BITS)
        return (wire.token_bits(wire.PID_IN, self.addr, txn[1]) + wire.TURNAROUND_BITS
                + wire.data_bits(wire.PID_DATA0, bytes(64)) + wire.TURNAROUND_BITS
                + wire.handshake_bits(wire.PID_ACK) + wire.GAP_BITS)

    def _nak_bits(self, kind: str, ep: int, data: bytes = b"") -> float:
        if kind == "out":
            return (wire.token_bits(wire.PID_OUT, self.addr, ep) + wire.TURNAROUND_BITS
                    + wire.data_bits(wire.PID_DATA0, data) + wire.TURNAROUND_BITS
                    + wire.handshake_bits(wire.PID_NAK) + wire.GAP_BITS)
        return (wire.token_bits(wire.PID_IN, self.addr, ep) + wire.TURNAROUND_BITS
                + wire.handshake_bits(wire.PID_NAK) + wire.GAP_BITS)

    def _kick(self) -> None:
        """Schedule the current transfer's next transaction, if the bus and frame allow."""
        tr = self._current
        if tr is None or tr.txn is None or self._pending is not None or not self.port_enabled:
            return
        txn = tr.txn
        start = max(self.now_ns(), self._bus_free, self._frame.start_ns)
        if tr.nak_since is not None:
            if not self._device_ready(txn):
                return  # still NAKing: the arm (or the next frame) will kick again
            period = self._nak_period(txn)
            k = max(0, math.ceil((start - tr.nak_since) / period - 1e-9))
            start = tr.nak_since + k * period
            tr.naks += max(0, k - 1)  # slot 0 NAKed (counted then), slots 1..k-1 too, slot k goes
        bulk = txn[0] in ("out", "in") and txn[1] != 0
        if start + wire.ns(self._txn_bits(txn)) > self._frame_end() or \
                (bulk and self._frame.bulk >= MAX_BULK_PER_FRAME):
            return  # next frame
        if bulk:
            self._frame.bulk += 1
        self._pending = self._at(start + wire.ns(self._device_sees(txn)), lambda: self._transact(start), "usb-txn")

    def _device_sees(self, txn: Txn) -> float:
        """Bits from the token's start to the moment the device acts: the end of the
        data packet (SETUP, OUT) or of the token plus the turnaround (IN)."""
        kind = txn[0]
        if kind == "setup":
            return (wire.token_bits(wire.PID_SETUP, self.addr, 0) + wire.TURNAROUND_BITS
                    + wire.data_bits(wire.PID_DATA0, txn[1]))
        if kind == "out":
            return (wire.token_bits(wire.PID_OUT, self.addr, txn[1]) + wire.TURNAROUND_BITS
                    + wire.data_bits(wire.PID_DATA0, txn[2]))
        return wire.token_bits(wire.PID_IN, self.addr, txn[1]) + wire.TURNAROUND_BITS

    def _device_ready(self, txn: Txn) -> bool:
        pipe = PIPE_OF.get((txn[1], txn[0] == "in"))
        return pipe is not None and bool(self.dev.pipes[pipe] & 0x300)  # armed or stalled

    def _device_armed(self, pipe: int) -> None:
        """The firmware armed a pipe: a transaction NAK-polling it can go at its next slot."""
        tr = self._current
        if tr is not None and tr.nak_since is not None and self._pending is None:
            self._kick()

    def _transact(self, start: float) -> None:
        """The token goes out at ``start``; the device answers at the cycle it arrives."""
        self._pending = None
        tr = self._current
        if tr is None or tr.txn is None:
            return
        txn = tr.txn
        kind = txn[0]
        frame = self._frame.number
        if kind == "setup":
            data = txn[1]
            answer = self.dev.setup(self.addr, data)
            end = start + wire.ns(self._txn_bits(txn))
            handshake = answer or "none"
            self._log(Packet(start, end, self.clock.now, frame, "SETUP", 0, handshake, data, tr.tag, tr.naks))
            self._bus_free = end
            if answer is None:
                self._advance_error(tr, UsbError("no device answered a SETUP"))
            else:
                self._done_at(end, tr, (ACK, b""))
            return
        if kind == "out":
            ep, data = txn[1], txn[2]
            answer = self.dev.out(self.addr, ep, data)
            if answer == NAK:
                self._nak(tr, start, "OUT", ep, data)
                return
            end = start + wire.ns(self._txn_bits(("out", ep, data)))
            self._log(Packet(start, end, self.clock.now, frame, "OUT", ep, answer or "none", data, tr.tag, tr.naks))
            self._bus_free = end
            if answer is None:
                self._advance_error(tr, UsbError(f"no device answered OUT to endpoint {ep}"))
            else:
                self._done_at(end, tr, (answer, b""))
            return
        ep = txn[1]
        answer = self.dev.in_(self.addr, ep)
        if answer is not None and answer[0] == NAK:
            self._nak(tr, start, "IN", ep)
            return
        if answer is None or answer[0] == STALL:
            end = start + wire.ns(wire.token_bits(wire.PID_IN, self.addr, ep) + wire.TURNAROUND_BITS
                                  + wire.handshake_bits(wire.PID_STALL) + wire.GAP_BITS)
            self._log(Packet(start, end, self.clock.now, frame, "IN", ep, STALL if answer else "none", b"", tr.tag))
            self._bus_free = end
            self._done_at(end, tr, (STALL, b""))
            return
        data = answer[1]
        end = start + wire.ns(wire.token_bits(wire.PID_IN, self.addr, ep) + wire.TURNAROUND_BITS
                              + wire.data_bits(wire.PID_DATA0, data) + wire.TURNAROUND_BITS
                              + wire.handshake_bits(wire.PID_ACK) + wire.GAP_BITS)
        self._bus_free = end
        ack_ns = end - wire.ns(wire.GAP_BITS)
        packet = Packet(start, end, 0, frame, "IN", ep, ACK, data, tr.tag, tr.naks)

        def acked() -> None:
            self._pending = None
            packet.cycle = self.clock.now
            self.dev.in_ack(ep)
            self._log(packet)
            self._advance(tr, (ACK, data))
            if self._current is tr or self._current is None:
                self._kick()

        self._pending = self._at(ack_ns, acked, "usb-in-ack")

    def _nak(self, tr: _Transfer, start: float, kind: str, ep: int, data: bytes = b"") -> None:
        end = start + wire.ns(self._nak_bits(kind.lower(), ep, data))
        self._bus_free = end
        self.stats.naks += 1
        if tr.nak_since is None:
            tr.nak_since = start
        tr.naks += 1
        self._kick()

    def _done_at(self, end: float, tr: _Transfer, result: tuple[str, bytes]) -> None:
        def go() -> None:
            self._pending = None
            self._advance(tr, result)
            self._kick()

        self._pending = self._at(end, go, "usb-done")

    def _advance_error(self, tr: _Transfer, error: UsbError) -> None:
        self._finish(tr, None, error)

    def _poll_interrupt(self) -> None:
        """The periodic IN on the interrupt endpoint (EP2), at the frame's start."""
        start = self._bus_free
        answer = self.dev.in_(self.addr, 2)
        if answer is None:
            return
        if answer[0] != ACK:
            end = start + wire.ns(wire.token_bits(wire.PID_IN, self.addr, 2) + wire.TURNAROUND_BITS
                                  + wire.handshake_bits(wire.PID_NAK) + wire.GAP_BITS)
            self._bus_free = end
            return
        data = answer[1]
        end = start + wire.ns(wire.token_bits(wire.PID_IN, self.addr, 2) + wire.TURNAROUND_BITS
                              + wire.data_bits(wire.PID_DATA0, data) + wire.TURNAROUND_BITS
                              + wire.handshake_bits(wire.PID_ACK) + wire.GAP_BITS)
        self._bus_free = end
        packet = Packet(start, end, 0, self._frame.number, "IN", 2, ACK, data, "interrupt")

        def acked() -> None:
            packet.cycle = self.clock.now
            self.dev.in_ack(2)
            self._log(packet)
            if self.on_interrupt is not None:
                self.on_interrupt(data)

        self._at(end - wire.ns(wire.GAP_BITS), acked, "usb-intr-ack")

    def _log(self, packet: Packet) -> None:
        self.stats.packets += 1
        packet.naks = packet.naks
        self.log.append(packet)

    # ------------------------------------------------------------- transfer shapes
    def control_in(self, setup: bytes, length: int) -> TransferGen:
        """SETUP, IN data packets until ``length`` or a short packet, OUT status."""
        answer, _ = yield ("setup", setup)
        data = b""
        while len(data) < length:
            answer, chunk = yield ("in", 0)
            if answer == STALL:
                raise UsbError(f"the device stalled the request {setup.hex()}")
            data += chunk
            if len(chunk) < 64:
                break
        answer, _ = yield ("out", 0, b"")
        if answer == STALL:
            raise UsbError(f"the device stalled the status stage of {setup.hex()}")
        return data[:length]

    def control_nodata(self, setup: bytes) -> TransferGen:
        """SETUP, then the IN status stage (a zero-length packet)."""
        yield ("setup", setup)
        answer, _ = yield ("in", 0)
        if answer == STALL:
            raise UsbError(f"the device stalled the request {setup.hex()}")
        return None

    def bulk_out(self, ep: int, data: bytes) -> TransferGen:
        """64-byte packets; a zero-length packet ends a transfer of whole packets."""
        chunks = [data[i:i + 64] for i in range(0, len(data), 64)] or [b""]
        if len(data) and len(data) % 64 == 0:
            chunks.append(b"")
        for chunk in chunks:
            answer, _ = yield ("out", ep, chunk)
            if answer == STALL:
                raise UsbError(f"the device stalled bulk OUT endpoint {ep}")
        return len(data)

    def bulk_in(self, ep: int, max_length: int) -> TransferGen:
        """IN packets until a short packet (or ``max_length``)."""
        data = b""
        while len(data) < max_length:
            answer, chunk = yield ("in", ep)
            if answer == STALL:
                raise UsbError(f"the device stalled bulk IN endpoint {ep}")
            data += chunk
            if len(chunk) < 64:
                break
        return data


NS_PER_MS = NS // 1000
