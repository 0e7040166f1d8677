"""USB full-speed device controller: pkasim's register interface (docs/usb.md).

Register map (offsets from ``base``; word accesses to registers, any size to buffers)
  0x000 CTRL   bit 0 CONNECT: the D+ pull-up; the host sees the device attach.
  0x004 ISTR   interrupt status, write 1 to clear: bit 0 RESET (bus reset), bit 1 SOF,
               bit 8+n PIPEn (a packet went through pipe n).
  0x008 IER    interrupt enables, the bits of ISTR.
  0x00C FNR    frame number of the last SOF (bits 10:0), read-only.
  0x010 DADDR  bits 6:0 the device address the function answers; reset: 0.
  0x020+4n PIPEn  n = 0 EP0 OUT/SETUP, 1 EP0 IN, 2 EP1 OUT (bulk), 3 EP1 IN (bulk),
               4 EP2 IN (interrupt):
               bits 6:0 COUNT (OUT: bytes received; IN: bytes to send, given with ARM),
               bit 8 ARM (write 1: ready; reads 1 until a packet went through),
               bit 9 STALL (read/write; EP0's clear on the next SETUP),
               bit 10 SETUP (pipe 0: the last packet was a SETUP; read-only),
               bit 11 DTOG (the data toggle of the next packet; read-only).
  0x100+0x40n  pipe n's 64-byte packet buffer.
Interface
  IRQ output   one line, pulsed when a bit rises in ISTR & IER (or IER is written
               while ISTR & IER is not zero).
  Host side    the port the host model (emulator/usb/) drives, one call per
               transaction at the cycle the device sees it: ``bus_reset``, ``sof``,
               ``setup``, ``out`` (at the end of the data packet), ``in_`` (at the
               token: ACK with the data, NAK or STALL) then ``in_ack`` (at the host's
               ACK, which frees the pipe and raises its interrupt).
  Clock        the oscillator trimmed against SOF (``pkasim.peripherals.osc48``): the host
               model maps its own time to core cycles through it.
  Not modelled isochronous endpoints, suspend/resume, remote wake-up, double buffering,
               CRC or bit errors on the wire (the host model computes the bits, they
               are never corrupted), low speed.

The device never schedules anything itself: time comes from the host's transactions,
which the host schedules on the machine's clock (docs/usb.md, "Timing").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from enum import IntEnum

from pkasim.base.clock import Clock
from pkasim.base.errors import ConfigError
from pkasim.chip.config import PeripheralConfig
from pkasim.peripherals.base import Peripheral, guest_log
from pkasim.peripherals.osc48 import TrimmedOscillator


class Reg(IntEnum):
    CTRL = 0x00
    ISTR = 0x04
    IER = 0x08
    FNR = 0x0C
    DADDR = 0x10


PIPE_BASE = 0x20
BUF_BASE = 0x100
PACKET = 64
PIPES = 5  # EP0 OUT, EP0 IN, EP1 OUT, EP1 IN, EP2 IN
WINDOW = 0x400

CTRL_CONNECT = 1 << 0
IS_RESET = 1 << 0
IS_SOF = 1 << 1
IS_PIPE0 = 1 << 8
ISTR_MASK = IS_RESET | IS_SOF | (((1 << PIPES) - 1) << 8)

P_COUNT = 0x7F
P_ARM = 1 << 8
P_STALL = 1 << 9
P_SETUP = 1 << 10
P_DTOG = 1 << 11

# (endpoint number, direction) -> pipe; direction True = IN (device to host)
PIPE_OF = {(0, False): 0, (0, True): 1, (1, False): 2, (1, True): 3, (2, True): 4}
PIPE_NAMES = ("EP0 OUT", "EP0 IN", "EP1 OUT", "EP1 IN", "EP2 IN")

ACK, NAK, STALL = "ACK", "NAK", "STALL"


class Usb(Peripheral):
    size = WINDOW

    def __init__(self, name: str, base: int, clock: Clock, irq: Callable[[], None],
                 oscillator: TrimmedOscillator) -> None:
        super().__init__(name, base)
        self.clock = clock
        self.irq = irq
        self.oscillator = oscillator
        self.buffers = [bytearray(PACKET) for _ in range(PIPES)]
        self.handshakes: Counter[tuple[str, str]] = Counter()  # (pipe, handshake) -> count
        self.on_arm: Callable[[int], None] | None = None  # the host's hook: a pipe became ready
        self.reset()

    @classmethod
    def from_config(cls, pc: PeripheralConfig, clock: Clock, irq: Callable[[], None]) -> Usb:
        for key in pc.params:
            if key != "oscillator":
                raise ConfigError(f"{pc.where(key)}: peripherals.{pc.name}.{key}: unknown parameter for a usb "
                                  "(known: type, base, irq, oscillator)")
        osc = TrimmedOscillator.from_params(clock.hz, pc.params.get("oscillator"),
                                            f"{pc.where('oscillator')}: peripherals.{pc.name}")
        return cls(pc.name, pc.base, clock, irq, osc)

    @classmethod
    def window(cls, pc: PeripheralConfig) -> int:
        return WINDOW

    def reset(self) -> None:
        self.ctrl = 0
        self.istr = 0
        self.ier = 0
        self.fnr = 0
        self.daddr = 0
        self.pipes = [0] * PIPES
        for buf in self.buffers:
            buf[:] = bytes(PACKET)
        self.handshakes.clear()
        if self.clock.now == 0:
            # At power-up only: a core reset later does not stop the oscillator, and
            # the host's time mapping must not run backwards.
            self.oscillator.reset()

    # ------------------------------------------------------------- interrupts
    def _raise(self, bits: int) -> None:
        new = bits & ~self.istr
        self.istr |= bits
        if new & self.ier:
            self.irq()

    # ------------------------------------------------------------- registers
    def read(self, offset: int, size: int) -> int:
        if offset >= BUF_BASE:
            return self._buf_read(offset, size)
        if not self.word_only(offset, size):
            return 0
        if offset == Reg.CTRL:
            return self.ctrl
        if offset == Reg.ISTR:
            return self.istr
        if offset == Reg.IER:
            return self.ier
        if offset == Reg.FNR:
            return self.fnr
        if offset == Reg.DADDR:
            return self.daddr
        if PIPE_BASE <= offset < PIPE_BASE + 4 * PIPES:
            return self.pipes[(offset - PIPE_BASE) // 4]
        return super().read(offset, size)

    def write(self, offset: int, size: int, value: int) -> None:
        if offset >= BUF_BASE:
            self._buf_write(offset, size, value)
            return
        if not self.word_only(offset, size):
            return
        if offset == Reg.CTRL:
            self.ctrl = value & CTRL_CONNECT
        elif offset == Reg.ISTR:
            self.istr &= ~value
        elif offset == Reg.IER:
            self.ier = value & ISTR_MASK
            if self.istr & self.ier:
                self.irq()
        elif offset == Reg.DADDR:
            self.daddr = value & 0x7F
        elif offset == Reg.FNR:
            guest_log.warning("%s: FNR is read-only", self.name)
        elif PIPE_BASE <= offset < PIPE_BASE + 4 * PIPES:
            self._pipe_write((offset - PIPE_BASE) // 4, value)
        else:
            super().write(offset, size, value)

    def _pipe_write(self, n: int, value: int) -> None:
        reg = self.pipes[n]
        reg = (reg & ~P_STALL) | (value & P_STALL)
        if value & P_ARM:
            count = value & P_COUNT
            if count > PACKET:
                guest_log.warning("%s: PIPE%d armed with COUNT %d > %d (sent as %d)", self.name, n, count, PACKET,
                                  PACKET)
                count = PACKET
            reg = (reg & ~(P_COUNT | P_SETUP)) | P_ARM | (count if n in (1, 3, 4) else 0)
        self.pipes[n] = reg
        if value & (P_ARM | P_STALL) and self.on_arm is not None:
            self.on_arm(n)

    def _buf_read(self, offset: int, size: int) -> int:
        n, pos = divmod(offset - BUF_BASE, PACKET)
        if n >= PIPES or pos + size > PACKET:
            return super().read(offset, size)
        return int.from_bytes(self.buffers[n][pos:pos + size], "little")

    def _buf_write(self, offset: int, size: int, value: int) -> None:
        n, pos = divmod(offset - BUF_BASE, PACKET)
        if n >= PIPES or pos + size > PACKET:
            super().write(offset, size, value)
            return
        self.buffers[n][pos:pos + size] = value.to_bytes(size, "little")

    def debug_read(self, offset: int, size: int) -> bytes:
        out = bytearray()
        for off in range(offset, offset + size):
            if off >= BUF_BASE:
                n, pos = divmod(off - BUF_BASE, PACKET)
                out.append(self.buffers[n][pos] if n < PIPES else 0)
            else:
                word = {Reg.CTRL: self.ctrl, Reg.ISTR: self.istr, Reg.IER: self.ier, Reg.FNR: self.fnr,
                        Reg.DADDR: self.daddr}.get(off & ~3)
                if word is None and PIPE_BASE <= off < PIPE_BASE + 4 * PIPES:
                    word = self.pipes[(off - PIPE_BASE) // 4]
                out.append(((word or 0) >> (8 * (off & 3))) & 0xFF)
        return bytes(out)

    # ------------------------------------------------------------- the host's port
    @property
    def connected(self) -> bool:
        return bool(self.ctrl & CTRL_CONNECT)

    def bus_reset(self) -> None:
        """The host drove SE0 for at least 10 ms: address 0, every pipe idle."""
        self.daddr = 0
        self.pipes = [0] * PIPES
        self._raise(IS_RESET)

    def sof(self, frame: int, ns: float) -> None:
        self.fnr = frame & 0x7FF
        self.oscillator.sof(ns)
        self._raise(IS_SOF)

    def _count(self, pipe: int, handshake: str) -> str:
        self.handshakes[(PIPE_NAMES[pipe], handshake)] += 1
        return handshake

    def setup(self, addr: int, data: bytes) -> str | None:
        """A SETUP transaction: always taken (USB 2.0 8.5.3), EP0 stalls cleared."""
        if not self.connected or addr != self.daddr:
            return None
        self.buffers[0][:8] = data[:8]
        self.pipes[0] = P_SETUP | 8 | P_DTOG
        self.pipes[1] = P_DTOG  # an IN still armed is cancelled; the data stage starts at DATA1
        self._raise(IS_PIPE0)
        return self._count(0, ACK)

    def out(self, addr: int, ep: int, data: bytes) -> str | None:
        pipe = PIPE_OF.get((ep, False))
        if not self.connected or addr != self.daddr or pipe is None:
            return None
        reg = self.pipes[pipe]
        if reg & P_STALL:
            return self._count(pipe, STALL)
        if not reg & P_ARM:
            return self._count(pipe, NAK)
        self.buffers[pipe][:len(data)] = data
        self.pipes[pipe] = (reg & ~(P_ARM | P_COUNT | P_SETUP)) ^ P_DTOG | len(data)
        self._raise(IS_PIPE0 << pipe)
        return self._count(pipe, ACK)

    def in_(self, addr: int, ep: int) -> tuple[str, bytes] | None:
        pipe = PIPE_OF.get((ep, True))
        if not self.connected or addr != self.daddr or pipe is None:
            return None
        reg = self.pipes[pipe]
        if reg & P_STALL:
            return self._count(pipe, STALL), b""
        if not reg & P_ARM:
            return self._count(pipe, NAK), b""
        return self._count(pipe, ACK), bytes(self.buffers[pipe][:reg & P_COUNT])

    def in_ack(self, ep: int) -> None:
        """The host's ACK of the data ``in_`` gave: the pipe is free again."""
        pipe = PIPE_OF[(ep, True)]
        self.pipes[pipe] = (self.pipes[pipe] & ~P_ARM) ^ P_DTOG
        self._raise(IS_PIPE0 << pipe)

    def snapshot(self) -> dict[str, int]:
        regs = {"CTRL": self.ctrl, "ISTR": self.istr, "IER": self.ier, "FNR": self.fnr, "DADDR": self.daddr}
        regs.update({f"PIPE{n}": v for n, v in enumerate(self.pipes)})
        return regs

    def stats(self) -> dict:
        if not self.handshakes:
            return {}
        return {"handshakes": {f"{p} {h}": n for (p, h), n in sorted(self.handshakes.items())},
                "oscillator": self.oscillator.summary()}
