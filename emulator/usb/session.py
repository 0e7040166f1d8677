"""A card session: the firmware on the machine, the USB host, enumeration, CCID.

``CardSession`` loads the card firmware, brings the device up (attach debounce, bus
reset, enumeration as USB 2.0 chapter 9 has it), then exchanges CCID messages
(IccPowerOn, XfrBlock, ...) with the host model's timing. Each exchange returns its
reply and an ``Exchange`` record: the packets with their host times, the time
extensions, and the latency breakdown (docs/usb.md, "Latency breakdown").

Host time (the USB host's ns) and device time (core cycles, at the nominal frequency
in ms) are kept apart: with a clock error they differ, and reports show both.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pkasim.base import userfiles
from pkasim.base.errors import InputMissingError, LoadError, OutputError, PkasimError
from pkasim.core.results import StopReason
from pkasim.peripherals.usb import Usb
from pkasim.usb.descriptors import Descriptors, parse_string
from pkasim.usb.host import FRAME_NS, Packet, UsbError, UsbHost

ATTACH_DEBOUNCE_MS = 100  # USB 2.0 7.1.7.3: TATTDB
RESET_MS = 10  # USB 2.0 7.1.7.5: TDRST (minimum, root port)
RESET_RECOVERY_MS = 10  # USB 2.0 7.1.7.5: TRSTRCY
SET_ADDRESS_MS = 2  # USB 2.0 9.2.6.3: TDSETADDR
MAX_MESSAGE = 1600
STATE_SYMBOL = "card_state"
STATE_CHECK_BYTES = 32  # a card-state file ends with the SHA-256 of what precedes it


def state_check(state: bytes) -> bytes:
    """The checksum a card-state file ends with: SHA-256 of a label and card_state."""
    return hashlib.sha256(b"pkasim card state\0" + state).digest()


def read_state_file(path: Path, size: int, magic: bytes) -> bytes:
    """card_state's bytes from a card-state file (card_state, then its state_check),
    read up to one byte past the expected size. A file of another size or magic, or
    whose checksum does not match (a damaged file), is a LoadError (exit 65): refused
    whole, no byte of it used."""
    try:
        data = userfiles.read_bounded(path, size + STATE_CHECK_BYTES)
    except OSError as exc:
        raise InputMissingError(f"{path}: cannot read the card state: {exc.strerror or exc}") from None
    want = size + STATE_CHECK_BYTES
    if len(data) != want or data[:4] != magic:
        got = f"more than {want}" if len(data) > want else f"{len(data)}"
        raise LoadError(f"{path}: not a card-state file of this firmware ({got} bytes, expected {want} starting "
                        f"with the magic: card_state's {size} and a {STATE_CHECK_BYTES}-byte SHA-256)")
    state, check = data[:size], data[size:]
    if state_check(state) != check:
        raise LoadError(f"{path}: the card state is damaged (its SHA-256 does not match its contents): refused, "
                        "nothing of it used")
    return state


class CardError(PkasimError):
    """The card or its firmware did not do what the host needs (exit 1: the run failed)."""

    exit_code = 1


@dataclass
class Breakdown:
    """Where one exchange's host time went; the parts sum to ``total_ms``."""

    usb_out_ms: float
    compute_ms: float
    time_ext_ms: float
    usb_in_ms: float
    idle_ms: float
    total_ms: float
    device_ms: float  # the same span in device time (cycles at the nominal frequency)
    firmware_ms: float  # the firmware's own SysTick measure of the APDU
    frames: int  # frames the exchange spans
    out_packets: int
    in_packets: int
    time_extensions: int
    naks: int

    def parts(self) -> list[tuple[str, float]]:
        return [("USB out", self.usb_out_ms), ("compute", self.compute_ms), ("time extensions", self.time_ext_ms),
                ("USB in", self.usb_in_ms), ("idle frames", self.idle_ms)]

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Exchange:
    reply: bytes  # the final CCID message
    packets: list[Packet] = field(default_factory=list)
    breakdown: Breakdown | None = None

    @property
    def status(self) -> int:
        return self.reply[7]

    @property
    def error(self) -> int:
        return self.reply[8]

    @property
    def data(self) -> bytes:
        return self.reply[10:]


class CardSession:
    """The emulated card on the emulated USB bus."""

    def __init__(self, machine: Any, *, state: str | Path | None = None, chunk_ms: float = 1.0,
                 command_limit_ms: float = 10_000.0) -> None:
        self.m = machine
        usb = [d for d in machine.peripherals.values() if isinstance(d, Usb)]
        if not usb:
            raise CardError(f"{machine.config.source}: the chip has no usb peripheral")
        self.dev: Usb = usb[0]
        self.osc = self.dev.oscillator
        self.host = UsbHost(machine.clock, self.dev)
        self.arms: list[tuple[float, int]] = []
        self.dev.on_arm = self._armed
        self.chunk = max(1, int(machine.clock.hz * chunk_ms / 1000))
        self.limit_ms = command_limit_ms
        self.seq = 0
        self.descriptors: Descriptors | None = None
        self.state_path = Path(state) if state is not None else None
        self.interrupts: list[tuple[float, bytes]] = []
        self.host.on_interrupt = lambda data: self.interrupts.append((self.host.now_ns(), data))

    # ------------------------------------------------------------- state file
    def load_state(self) -> bool:
        """Put the card-state file's card_state into the firmware's (before reset, so
        it survives the startup copy of .data); False if there is no file. Only a
        regular file is read, and at most one byte more than a state file holds; a
        foreign or damaged file is refused whole (read_state_file)."""
        if self.state_path is None or not (self.state_path.exists() or self.state_path.is_symlink()):
            return False
        size = len(self.m.read_symbol(STATE_SYMBOL))
        data = read_state_file(self.state_path, size, self.m.read_symbol(STATE_SYMBOL, 4, initial=True))
        self.m.write_symbol(STATE_SYMBOL, data)
        self.m.reset()
        return True

    def state_bytes(self) -> bytes:
        """What a card-state file holds now: card_state, then its checksum."""
        state = self.m.read_symbol(STATE_SYMBOL)
        return state + state_check(state)

    def save_state(self) -> None:
        """Write card_state and its checksum to the state file atomically (a temporary
        file renamed over it): a failure leaves the previous state whole, never a torn one."""
        if self.state_path is not None:
            try:
                userfiles.write_atomically(self.state_path, self.state_bytes())
            except OSError as exc:
                raise OutputError(f"{self.state_path}: cannot write the card state: {exc.strerror or exc}") from None

    # ------------------------------------------------------------- running
    def _armed(self, pipe: int) -> None:
        self.arms.append((self.host.now_ns(), pipe))
        self.host._device_armed(pipe)

    def run_until(self, done: Callable[[], bool], what: str, limit_ms: float | None = None) -> None:
        """Run the machine until ``done()``; a firmware stop or the limit is a CardError."""
        limit = self.host.now_ns() + (limit_ms if limit_ms is not None else self.limit_ms) * 1e6
        while not done():
            result = self.m.run(max_cycles=self.chunk)
            if result.reason != StopReason.BUDGET:
                where = f" ({result.message})" if result.message else ""
                raise CardError(f"the card firmware stopped while {what}: {result.reason.value}{where}")
            if self.host.now_ns() > limit:
                raise CardError(f"no answer from the card after {(limit_ms or self.limit_ms):.0f} ms of host time "
                                f"while {what}")

    def wait_ms(self, ms: float) -> None:
        target = self.host.now_ns() + ms * 1e6
        self.run_until(lambda: self.host.now_ns() >= target, f"waiting {ms} ms", ms + 1)

    def transfer(self, gen: Any, tag: str, what: str) -> Any:
        box: dict[str, Any] = {}
        self.host.submit(gen, lambda value, error: box.update(value=value, error=error), tag)
        self.run_until(lambda: bool(box), what)
        if box["error"] is not None:
            raise CardError(f"USB: {box['error']}")
        return box["value"]

    # ------------------------------------------------------------- bring-up
    def attach(self) -> Descriptors:
        """Power the chip, wait for its pull-up, reset the port and enumerate."""
        self.host.start()
        self.run_until(lambda: self.dev.connected, "waiting for the device to attach (CTRL.CONNECT)", 1000)
        self.wait_ms(ATTACH_DEBOUNCE_MS)
        self.host.reset_port()
        self.wait_ms(RESET_MS + RESET_RECOVERY_MS)
        return self.enumerate()

    def _get(self, dtype: int, index: int, length: int, lang: int = 0) -> bytes:
        setup = struct.pack("<BBHHH", 0x80, 6, dtype << 8 | index, lang, length)
        return self.transfer(self.host.control_in(setup, length), "enum", f"GET_DESCRIPTOR {dtype}:{index}")

    def enumerate(self) -> Descriptors:
        h = self.host
        dev = self._get(1, 0, 64)
        if len(dev) < 8:
            raise CardError(f"device descriptor too short ({len(dev)} bytes)")
        self.transfer(h.control_nodata(struct.pack("<BBHHH", 0, 5, 1, 0, 0)), "enum", "SET_ADDRESS")
        h.addr = 1
        self.wait_ms(SET_ADDRESS_MS)
        dev = self._get(1, 0, 18)
        head = self._get(2, 0, 9)
        total = head[2] | head[3] << 8
        config = self._get(2, 0, total)
        strings: dict[int, str] = {}
        langs = self._get(3, 0, 255)
        lang = langs[2] | langs[3] << 8 if len(langs) >= 4 else 0x0409
        for index in sorted({dev[14], dev[15], dev[16]} - {0}):
            strings[index] = parse_string(self._get(3, index, 255, lang))
        self.transfer(h.control_nodata(struct.pack("<BBHHH", 0, 9, 1, 0, 0)), "enum", "SET_CONFIGURATION")
        self.descriptors = Descriptors(dev, config, strings)
        h.interrupt_interval = self.descriptors.interrupt_interval()
        return self.descriptors

    # ------------------------------------------------------------- CCID
    def _next_frame(self) -> None:
        """Commands start at a frame's start: the exchange's timing does not depend
        on where the previous one left the host's loop."""
        start = self.host._frame.number
        self.run_until(lambda: self.host._frame.number > start, "waiting for the next frame", 5)

    def ccid(self, msg_type: int, data: bytes = b"", specific: bytes = b"\0\0\0", *, raw: bytes | None = None,
             slot: int = 0) -> Exchange:
        """One CCID exchange: the message out, replies in until one is not a time extension."""
        self._next_frame()
        self.seq = (self.seq + 1) & 0xFF
        msg = raw if raw is not None else \
            struct.pack("<BIBB", msg_type, len(data), slot, self.seq) + specific[:3].ljust(3, b"\0") + data
        t0 = self.host._frame.start_ns
        c0 = self.osc.cycle_at(t0)
        first_log = len(self.host.log)
        first_arm = len(self.arms)
        marks: dict[str, Any] = {"texts": []}
        reply = self.transfer(self._exchange(msg, marks), "ccid", "exchanging a CCID message")
        log = self.host.log
        for i in range(first_log, len(log)):
            p = log[i]
            if p.ep == 1 and p.kind in ("OUT", "IN"):
                p.tag = "cmd" if i < marks["out_end"] else \
                    "text" if any(a <= i < b for a, b in marks["texts"]) else "resp"
        texts = len(marks["texts"])
        if len(reply) < 10:
            raise CardError(f"CCID reply of {len(reply)} bytes (a header is 10)")
        packets = self.host.log[first_log:]
        ex = Exchange(reply, packets)
        ex.breakdown = self._breakdown(packets, self.arms[first_arm:], t0, c0, texts)
        return ex

    def _exchange(self, msg: bytes, marks: dict[str, Any]) -> Any:
        """The message out, then replies in until one is not a time extension: one
        transfer after the other, as libccid's WriteUSB then ReadUSB."""
        yield from self.host.bulk_out(1, msg)
        marks["out_end"] = len(self.host.log)
        while True:
            start = len(self.host.log)
            reply = yield from self.host.bulk_in(1, MAX_MESSAGE + 64)
            if len(reply) >= 10 and reply[7] >> 6 == 2:
                marks["texts"].append((start, len(self.host.log)))
                continue
            return reply

    def _breakdown(self, packets: list[Packet], arms: list[tuple[float, int]], t0: float, c0: int,
                   texts: int) -> Breakdown:
        outs = [p for p in packets if p.tag == "cmd" and p.kind == "OUT"]
        ins = [p for p in packets if p.tag == "resp" and p.kind == "IN"]
        text = [p for p in packets if p.tag == "text"]
        t_end = ins[-1].end_ns
        t_rx = outs[-1].end_ns
        t_first = ins[0].start_ns
        armed = [t for t, pipe in arms if pipe == 3 and t <= t_first]
        t_arm = max(armed[-1] if armed else t_first, t_rx)
        text_inside = sum(p.duration_ns for p in text if t_rx <= p.start_ns < t_arm)
        usb_out = sum(p.duration_ns for p in outs)
        usb_in = sum(p.duration_ns for p in ins)
        text_ns = sum(p.duration_ns for p in text)
        compute = (t_arm - t_rx) - text_inside
        total = t_end - t0
        idle = total - usb_out - usb_in - text_ns - compute
        ms = 1e-6
        fw = self.m.read_u32(self.m.image.symbol("card_cmd_cycles").address)
        return Breakdown(
            usb_out_ms=usb_out * ms, compute_ms=compute * ms, time_ext_ms=text_ns * ms, usb_in_ms=usb_in * ms,
            idle_ms=idle * ms, total_ms=total * ms,
            device_ms=self.osc.device_ms(self.osc.cycle_at(t_end) - c0),
            firmware_ms=self.osc.device_ms(fw), frames=int((t_end - t0) // FRAME_NS) + 1,
            out_packets=len(outs), in_packets=len(ins), time_extensions=texts,
            naks=sum(p.naks for p in packets))

    def power_on(self) -> bytes:
        ex = self.ccid(0x62, specific=b"\x01\0\0")
        if ex.reply[0] != 0x80 or ex.status >> 6:
            raise CardError(f"IccPowerOn failed: status 0x{ex.status:02x}, error 0x{ex.error:02x}")
        return ex.data

    def apdu(self, apdu: bytes) -> tuple[bytes, int, Exchange]:
        """An APDU through XfrBlock: (response data, status word, the exchange)."""
        ex = self.ccid(0x6F, apdu)
        if ex.reply[0] != 0x80 or ex.status >> 6:
            raise CardError(f"XfrBlock failed: status 0x{ex.status:02x}, error 0x{ex.error:02x}")
        data = ex.data
        if len(data) < 2:
            raise CardError(f"the card answered {len(data)} bytes (no status word)")
        return data[:-2], data[-2] << 8 | data[-1], ex


def short_or_extended(cla: int, ins: int, p1: int, p2: int, data: bytes = b"", le: int | None = None) -> bytes:
    """An APDU, extended when the data or Le need it (ISO 7816-4 5.1)."""
    head = bytes([cla, ins, p1, p2])
    extended = len(data) > 255 or (le is not None and le > 256)
    if not extended:
        body = (bytes([len(data)]) + data) if data else b""
        tail = bytes([le & 0xFF]) if le is not None else b""
        return head + body + tail
    body = (b"\0" + len(data).to_bytes(2, "big") + data) if data else b""
    tail = ((b"" if data else b"\0") + (le & 0xFFFF).to_bytes(2, "big")) if le is not None else b""
    return head + body + tail


def frames_of(packets: list[Packet]) -> set[int]:
    return {p.frame for p in packets}


__all__ = ["Breakdown", "CardError", "CardSession", "Exchange", "UsbError", "frames_of", "read_state_file",
           "short_or_extended", "state_check"]
