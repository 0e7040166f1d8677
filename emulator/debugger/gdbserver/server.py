"""The gdb server: one machine behind GDB's remote serial protocol over TCP.

gdb (or an IDE speaking the same protocol) connects, reads the target description
and drives the machine: registers, memory, breakpoints (``Z0``/``Z1``, exact, no cost
until hit), watchpoints (``Z2``/``Z3``/``Z4`` on the machine's watchpoints, stopping
before the accessing instruction as gdb expects on ARM: it steps over it itself),
continue and step, and stepping backwards through ``TimeTravel`` (``bs``/``bc``).
A continue runs in slices so Ctrl-C can stop it. Every packet is answered; a packet
the server cannot use gets an error reply (or a NAK when its checksum is wrong),
never an exception: the session goes on.
"""

from __future__ import annotations

import logging
import re
import select
import socket
from collections.abc import Callable
from dataclasses import dataclass

from pkasim.analysis.profiler import Profiler
from pkasim.base.errors import PkasimError, UsageError
from pkasim.core.machine import Machine
from pkasim.core.results import StopReason
from pkasim.debugger.gdbserver.packets import MAX_PACKET, Ack, Bad, Interrupt, Packet, Reader, frame
from pkasim.debugger.gdbserver.target import REGISTERS, target_xml
from pkasim.debugger.timetravel import HISTORY_START, TimeTravel
from pkasim.debugger.timetravel import Stop as TtStop

log = logging.getLogger("pkasim.gdbserver")

SLICE_CYCLES = 2_000_000  # cycles per run slice between looks at the socket for Ctrl-C
SIGINT, SIGTRAP, SIGSEGV = 2, 5, 11
WATCH_FIELD = {"write": "watch", "read": "rwatch", "access": "awatch"}
Z_KIND = {"2": "write", "3": "read", "4": "access"}


class Malformed(Exception):
    """A packet whose arguments cannot be parsed: answered with an error."""


ADDRESS_SPACE = 1 << 32
_HEX = re.compile(r"[0-9a-fA-F]{1,16}")


def _hex_int(text: str) -> int:
    """A number as the protocol writes one: hex digits only (no sign, no '0x', no '_',
    which Python's int() would take), at most 64 bits."""
    if not _HEX.fullmatch(text):
        raise Malformed(f"'{text[:40]}' is not a hex number of at most 16 digits")
    return int(text, 16)


def _address(text: str) -> int:
    """An address of the target: the 32-bit address space, nothing beyond it."""
    value = _hex_int(text)
    if value >= ADDRESS_SPACE:
        raise Malformed(f"address 0x{value:x} is beyond the 32-bit address space")
    return value


def _addr_len(text: str) -> tuple[int, int]:
    a, sep, n = text.partition(",")
    if not sep:
        raise Malformed("expected ADDR,LENGTH")
    addr, length = _address(a), _hex_int(n)
    if length > MAX_PACKET:
        raise Malformed(f"length {length} over {MAX_PACKET}")
    return addr, length


def _offset_len(text: str) -> tuple[int, int]:
    """qXfer's OFFSET,LENGTH (an offset into the object, not an address)."""
    a, sep, n = text.partition(",")
    if not sep:
        raise Malformed("expected OFFSET,LENGTH")
    return _hex_int(a), _hex_int(n)


def _addr_range(text: str) -> tuple[int, int]:
    a, sep, b = text.partition(",")
    if not sep:
        raise Malformed("expected START,END")
    start, end = _address(a), _hex_int(b)
    if end > ADDRESS_SPACE:
        raise Malformed(f"end 0x{end:x} is beyond the 32-bit address space")
    return start, end


def _hex(data: bytes) -> str:
    return data.hex()


def _unhex(text: str) -> bytes:
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise Malformed("bad hex data") from None


@dataclass
class StopInfo:
    """A stop as gdb is told it."""

    signal: int = SIGTRAP
    fields: str = ""  # e.g. 'watch:20000010;'
    exit_code: int | None = None
    message: str = ""

    def reply(self) -> str:
        if self.exit_code is not None:
            return f"W{self.exit_code & 0xFF:02x}"
        return f"T{self.signal:02x}{self.fields}thread:1;"


class Target:
    """The machine as gdb sees it: a time-travelling machine with one thread."""

    def __init__(self, machine: Machine, *, interval_cycles: int, max_cycles: int | None = None) -> None:
        self.machine = machine
        machine.debugger_attached = True  # BKPT halts instead of faulting
        machine.watchpoint_stop = "before"  # gdb on ARM steps over the access itself
        self.tt = TimeTravel(machine, interval_cycles=interval_cycles)
        self.max_cycles = max_cycles
        self.exited: int | None = None
        self.profiler: Profiler | None = None

    # ------------------------------------------------------------------ state
    def read_registers(self) -> bytes:
        m = self.machine
        return b"".join(m.reg(name).to_bytes(4, "little") for _, name, _ in REGISTERS)

    def read_register(self, n: int) -> bytes:
        if not 0 <= n < len(REGISTERS):
            raise Malformed(f"no register {n}")
        return self.machine.reg(REGISTERS[n][1]).to_bytes(4, "little")

    def write_register(self, n: int, value: bytes) -> None:
        if not 0 <= n < len(REGISTERS) or len(value) != 4:
            raise Malformed(f"no register {n} of {len(value)} bytes")
        self.machine.set_reg(REGISTERS[n][1], int.from_bytes(value, "little"))
        self.tt.forget_future()

    def write_registers(self, data: bytes) -> None:
        if len(data) < 17 * 4:
            raise Malformed("register block too short")
        for n in range(min(len(REGISTERS), len(data) // 4)):
            value = int.from_bytes(data[4 * n:4 * n + 4], "little")
            if self.machine.reg(REGISTERS[n][1]) != value:
                self.machine.set_reg(REGISTERS[n][1], value)
        self.tt.forget_future()

    def read_memory(self, addr: int, length: int) -> bytes:
        return self.machine.read_memory(addr, length)

    def write_memory(self, addr: int, data: bytes) -> None:
        if data:
            self.machine.write_memory(addr, data)
            self.tt.forget_future()

    # ------------------------------------------------------------------ running
    def _stop_info(self, stop: TtStop) -> StopInfo:
        reason = stop.reason
        if reason == StopReason.EXIT.value:
            self.exited = stop.exit_code or 0
            return StopInfo(exit_code=self.exited, message=stop.message)
        if reason == StopReason.WATCHPOINT.value and stop.result is not None and stop.result.watch is not None:
            hit = stop.result.watch
            return StopInfo(fields=f"{WATCH_FIELD[hit.watchpoint.kind]}:{hit.address:x};")  # gdb says the rest
        if reason == HISTORY_START:
            return StopInfo(fields="replaylog:begin;", message=stop.message)
        if reason == StopReason.LOCKUP.value:
            return StopInfo(signal=SIGSEGV, message=stop.message)
        if reason in (StopReason.BREAKPOINT.value, StopReason.STEP.value, StopReason.UNTIL.value):
            return StopInfo()
        return StopInfo(message=stop.message or reason)  # budget, stuck, sleep-forever: stopped, said why

    def step(self) -> StopInfo:
        return self._stop_info(self.tt.step())

    def cont(self, interrupted: Callable[[], bool]) -> StopInfo:
        """Run until a stop, in slices; ``interrupted()`` is asked between slices."""
        m = self.machine
        start = m.cycles
        while True:
            budget = SLICE_CYCLES
            if self.max_cycles is not None:
                budget = min(budget, start + self.max_cycles - m.cycles)
                if budget <= 0:
                    return StopInfo(message=f"cycle budget of {self.max_cycles:,} cycles reached")
            stop = self.tt.run(max_cycles=budget)
            if stop.reason != StopReason.BUDGET.value:
                return self._stop_info(stop)
            if interrupted():
                return StopInfo(signal=SIGINT)

    def range_step(self, start: int, end: int, interrupted: Callable[[], bool]) -> StopInfo:
        """``vCont;r``: step once, then keep going while PC stays in [start, end). Run
        at full speed with a code hook on every address outside the range (the first
        one it reaches stops the run before executing it, as a breakpoint does), so a
        loop inside one source line costs no round trip per instruction."""
        first = self.tt.step()
        m = self.machine
        if first.reason != StopReason.STEP.value or not start <= m.pc < end:
            return self._stop_info(first)
        with _OutsideStop(m, start, end):
            return self.cont(interrupted)

    def _lifted(self) -> list:
        """Machine watchpoints off while re-executing history (they would stop a replay)."""
        ws = self.machine.watchpoints
        for w in ws:
            self.machine.remove_watchpoint(w.address, w.size, w.kind)
        return ws

    def _restore(self, ws: list) -> None:
        for w in ws:
            self.machine.add_watchpoint(w.address, w.size, w.kind)

    def reverse_step(self) -> StopInfo:
        ws = self._lifted()
        try:
            return self._stop_info(self.tt.reverse_step())
        finally:
            self._restore(ws)

    def reverse_continue(self) -> StopInfo:
        ws = self._lifted()
        modes = {"write": "w", "read": "r", "access": "rw"}
        try:
            stop = self.tt.reverse_continue(watchpoints=[(w.address, w.size, modes[w.kind]) for w in ws])
        finally:
            self._restore(ws)
        if stop.reason == "watchpoint":
            return StopInfo(fields=self._watch_field(ws, stop.message))
        return self._stop_info(stop)

    @staticmethod
    def _watch_field(ws: list, message: str) -> str:
        """'watch:ADDR;' for the watchpoint a backward search stopped at (its message
        names the access: 'write of 0x... by the instruction at ...')."""
        found = re.search(r"(?:write|read) of 0x([0-9a-fA-F]+)", message)
        if found is None:
            return ""
        addr = int(found.group(1), 16)
        for w in ws:
            if w.address <= addr < w.end:
                return f"{WATCH_FIELD[w.kind]}:{addr:x};"
        return ""

    # ------------------------------------------------------------------ monitor
    def monitor(self, line: str) -> str:
        words = line.split()
        m = self.machine
        if not words or words[0] == "help":
            return ("monitor commands: cycles (the cycle counter and modeled time), pka (the PKA's "
                    "registers and operations), reset (core reset; the history restarts), profile "
                    "[start|stop] (a per-function cycle profile of what runs while it is on)\n")
        cmd = words[0]
        if cmd == "cycles":
            hz = m.config.core.clock_hz
            return (f"cycles {m.cycles:,} ({m.cycles / hz * 1e3:.6f} ms modeled at {hz / 1e6:g} MHz), "
                    f"instructions {m.instructions:,}, asleep {m.sleep_cycles:,} cycles\n")
        if cmd == "pka":
            pka = m.peripherals.get("pka")
            if pka is None:
                return "this chip has no PKA\n"
            regs = ", ".join(f"{k}=0x{v:08x}" for k, v in pka.snapshot().items())
            lines = [f"PKA at 0x{pka.base:08x}: {'busy' if pka.busy else 'idle'}; {regs}"]
            lines += [f"{k}: {v}" for k, v in pka.summary_lines()]
            return "\n".join(lines) + "\n"
        if cmd == "reset":
            m.reset()
            self.tt.forget_future()
            self.exited = None
            return f"core reset: PC {m.describe(m.pc)}, cycle count kept at {m.cycles:,}\n"
        if cmd == "profile":
            return self._profile(words[1] if len(words) > 1 else "")
        return f"unknown monitor command '{cmd}' (try 'monitor help')\n"

    def _profile(self, what: str) -> str:
        m = self.machine
        if what == "stop":
            if self.profiler is None:
                return "the profiler is not on\n"
            m.unobserve(self.profiler)
            self.profiler = None
            return "profiler off\n"
        if self.profiler is None or what == "start":
            if self.profiler is not None:
                m.unobserve(self.profiler)
            self.profiler = Profiler()
            m.observe(self.profiler)
            return f"profiling from cycle {m.cycles:,}: continue, then 'monitor profile' prints it\n"
        rows = self.profiler.rows()[:15]
        total = max(self.profiler.total_cycles, 1)
        out = [f"{'function':<32} {'calls':>9} {'exclusive':>12} {'%':>6} {'inclusive':>12}"]
        for r in rows:
            out.append(f"{r.name[:32]:<32} {r.calls:>9,} {r.exclusive_cycles:>12,} "
                       f"{100 * r.exclusive_cycles / total:>5.1f}% {r.inclusive_cycles:>12,}")
        return "\n".join(out) + "\n"


class _OutsideStop:
    """Code hooks on everything outside [start, end) that stop a run before the first
    instruction there (a WFI there is seen before it sleeps: Machine.on_instructions)."""

    def __init__(self, machine: Machine, start: int, end: int) -> None:
        self.machine, self.start, self.end = machine, start, end
        self.handles: list = []

    def __enter__(self) -> _OutsideStop:
        m = self.machine
        loop = m._loop

        def hook(address: int, size: int, cycle: int, number: int) -> None:
            loop._on_breakpoint(address)

        if self.start > 0:
            self.handles.append(m.on_instructions(0, self.start, hook))
        self.handles.append(m.on_instructions(self.end, 0xFFFFFFFF, hook))
        return self

    def __exit__(self, *exc: object) -> None:
        m = self.machine
        for h in self.handles:
            m.remove_instruction_hook(h)
        m.core.flush_translations()


class Session:
    """One gdb connection: framing, acks, and the packet handlers."""

    def __init__(self, conn: socket.socket, target: Target, say: Callable[[str], None] = lambda _: None) -> None:
        self.conn = conn
        self.target = target
        self.say = say
        self.reader = Reader()
        self.ack = True
        self.last_sent = b""
        self.last_stop = StopInfo()
        self.queue: list = []
        self.interrupt = False
        self.done = False
        self.errors = 0

    # ------------------------------------------------------------------ I/O
    def _send_raw(self, data: bytes) -> None:
        try:
            self.conn.sendall(data)
        except OSError:
            self.done = True

    def send(self, payload: str | bytes) -> None:
        self.last_sent = frame(payload)
        self._send_raw(self.last_sent)

    def _receive(self, timeout: float | None) -> bool:
        """Read what arrived into the queue; False when the peer is gone."""
        ready, _, _ = select.select([self.conn], [], [], timeout)
        if not ready:
            return True
        try:
            data = self.conn.recv(65536)
        except OSError:
            data = b""
        if not data:
            return False
        for ev in self.reader.feed(data):
            if isinstance(ev, Interrupt):
                self.interrupt = True
            else:
                self.queue.append(ev)
        return True

    def _interrupted(self) -> bool:
        if not self._receive(0):
            self.done = True
            return True
        hit, self.interrupt = self.interrupt, False
        return hit

    def serve(self) -> None:
        while not self.done:
            if not self.queue:
                if self.interrupt:  # Ctrl-C while stopped: say where it is
                    self.interrupt = False
                    self.send(self.last_stop.reply())
                    continue
                if not self._receive(None):
                    return
                continue
            ev = self.queue.pop(0)
            if isinstance(ev, Ack):
                if not ev.ok and self.last_sent:
                    self._send_raw(self.last_sent)
                continue
            if isinstance(ev, Bad):
                self.errors += 1
                log.warning("gdb sent a packet the server cannot use: %s", ev.reason)
                if ev.nak:
                    self._send_raw(b"-")
                else:
                    if self.ack:
                        self._send_raw(b"+")
                    self.send("E01")
                continue
            assert isinstance(ev, Packet)
            if self.ack:
                self._send_raw(b"+")
            self._dispatch(ev.data)

    def _dispatch(self, data: bytes) -> None:
        text = data.decode("latin-1")
        log.debug("<- %s", text[:120])
        try:
            reply = self.handle(text, data)
        except Malformed as exc:
            self.errors += 1
            log.warning("malformed packet %r: %s", text[:40], exc)
            reply = "E01"
        except (UsageError, PkasimError) as exc:
            log.info("%s: %s", text[:40], exc)
            reply = "E02"
        except Exception as exc:  # noqa: BLE001 - the server must keep serving; the message says what broke
            self.errors += 1
            log.error("internal error on packet %r: %s: %s", text[:40], type(exc).__name__, exc)
            reply = "E03"
        if reply is not None:
            log.debug("-> %s", reply[:120])
            self.send(reply)

    def _stopped(self, info: StopInfo) -> str:
        self.last_stop = info
        if info.message:
            self.console(info.message + "\n")
        return info.reply()

    def console(self, text: str) -> None:
        """Text for gdb's console (an 'O' packet, as gdb prints during a run)."""
        for i in range(0, len(text), 512):
            self.send("O" + text[i:i + 512].encode().hex())

    # ------------------------------------------------------------------ packets
    def handle(self, text: str, data: bytes) -> str | None:
        t = self.target
        head = text[:1]
        if text.startswith("qSupported"):
            return (f"PacketSize={MAX_PACKET:x};qXfer:features:read+;QStartNoAckMode+;"
                    "ReverseStep+;ReverseContinue+;vContSupported+")
        if text == "QStartNoAckMode":
            self.send("OK")
            self.ack = False
            return None
        if text.startswith("qXfer:features:read:"):
            return self._xfer(text[len("qXfer:features:read:"):])
        if text.startswith("qRcmd,"):
            line = _unhex(text[6:]).decode("utf-8", "replace")
            self.console(t.monitor(line))
            return "OK"
        if text == "qAttached":
            return "1"
        if text == "qC":
            return "QC1"
        if text == "qfThreadInfo":
            return "m1"
        if text == "qsThreadInfo":
            return "l"
        if text.startswith("qSymbol"):
            return "OK"
        if text.startswith("H") or text.startswith("T"):
            return "OK"
        if text == "?":
            return self.last_stop.reply()
        if text == "g":
            return _hex(t.read_registers())
        if head == "G":
            t.write_registers(_unhex(text[1:]))
            return "OK"
        if head == "p":
            return _hex(t.read_register(_hex_int(text[1:])))
        if head == "P":
            n, sep, v = text[1:].partition("=")
            if not sep:
                raise Malformed("expected P n=value")
            t.write_register(_hex_int(n), _unhex(v))
            return "OK"
        if head == "m":
            addr, length = _addr_len(text[1:])
            # Two hex digits a byte: at most what fits the PacketSize advertised; gdb
            # asks again for the rest of a short reply.
            length = min(length, MAX_PACKET // 2, ADDRESS_SPACE - addr)
            return _hex(t.read_memory(addr, length))
        if head == "M":
            spec, sep, hexdata = text[1:].partition(":")
            addr, length = _addr_len(spec)
            payload = _unhex(hexdata)
            if not sep or len(payload) != length:
                raise Malformed("M length does not match its data")
            t.write_memory(addr, payload)
            return "OK"
        if head == "X":
            colon = data.find(b":")
            if colon < 0:
                raise Malformed("X without data")
            addr, length = _addr_len(text[1:colon])
            payload = data[colon + 1:]
            if len(payload) != length:
                raise Malformed("X length does not match its data")
            t.write_memory(addr, payload)
            return "OK"
        if head in ("Z", "z"):
            return self._breakpoint(head == "Z", text[1:])
        if text == "vCont?":
            return "vCont;c;C;s;S;r"
        if text.startswith("vCont;"):
            action = text[6:].split(";")[0].split(":")[0]
            if action[:1] in ("c", "C"):
                return self._continue()
            if action[:1] in ("s", "S"):
                return self._step()
            if action[:1] == "r":
                start, end = _addr_range(action[1:])
                return self._range_step(start, end)
            raise Malformed(f"vCont action '{action}'")
        if head in ("c", "C"):
            self._resume_at(text[1:] if head == "c" else "")
            return self._continue()
        if head in ("s", "S"):
            self._resume_at(text[1:] if head == "s" else "")
            return self._step()
        if text == "bs":
            return self._stopped(t.reverse_step())
        if text == "bc":
            return self._stopped(t.reverse_continue())
        if text == "k" or text.startswith("vKill"):
            self.done = True
            return "OK" if text.startswith("vKill") else None
        if head == "D":
            self.send("OK")
            self.done = True
            return None
        if text == "vMustReplyEmpty":
            return ""
        return ""  # not supported: gdb falls back

    def _resume_at(self, addr: str) -> None:
        if addr:
            self.target.machine.set_reg("pc", _address(addr))
            self.target.tt.forget_future()

    def _continue(self) -> str:
        if self.target.exited is not None:
            return self._stopped(StopInfo(exit_code=self.target.exited))
        return self._stopped(self.target.cont(self._interrupted))

    def _range_step(self, start: int, end: int) -> str:
        if self.target.exited is not None:
            return self._stopped(StopInfo(exit_code=self.target.exited))
        return self._stopped(self.target.range_step(start, end, self._interrupted))

    def _step(self) -> str:
        if self.target.exited is not None:
            return self._stopped(StopInfo(exit_code=self.target.exited))
        return self._stopped(self.target.step())

    def _breakpoint(self, insert: bool, spec: str) -> str:
        parts = spec.split(";")[0].split(",")
        if len(parts) != 3:
            raise Malformed("expected TYPE,ADDR,KIND")
        kind, addr, length = parts[0], _address(parts[1]), _hex_int(parts[2])
        m = self.target.machine
        if kind in ("0", "1"):
            (m.add_breakpoint if insert else m.remove_breakpoint)(addr)
            return "OK"
        if kind in Z_KIND:
            if insert:
                m.add_watchpoint(addr, max(length, 1), Z_KIND[kind])
            else:
                m.remove_watchpoint(addr, max(length, 1), Z_KIND[kind])
            return "OK"
        return ""

    def _xfer(self, rest: str) -> str:
        annex, _, span = rest.partition(":")
        if annex != "target.xml":
            return "E00"
        off, length = _offset_len(span)
        length = min(length, MAX_PACKET - 1)  # the 'm'/'l' marker and the data fit the PacketSize advertised
        xml = target_xml()
        chunk = xml[off:off + length]
        return ("l" if off + length >= len(xml) else "m") + chunk


def listen(host: str, port: int, *, address: tuple[int, tuple] | None = None) -> socket.socket:
    """A listening socket on ``host`` (IPv4 or IPv6; port 0: any free port,
    ``getsockname()`` says which). ``address`` is a resolved (family, sockaddr) to use
    instead of resolving ``host``."""
    if address is None:
        info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        address = (info[0], info[4])
    family, sockaddr = address
    srv = socket.socket(family, socket.SOCK_STREAM)
    try:
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(sockaddr)
        srv.listen(1)
    except BaseException:
        srv.close()
        raise
    return srv


def serve(srv: socket.socket, target: Target, say: Callable[[str], None], *, once: bool = True) -> None:
    """Accept gdb connections one after the other (only the first with ``once``)."""
    while True:
        conn, peer = srv.accept()
        say(f"gdb connected from {peer[0]}:{peer[1]}")
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            Session(conn, target, say).serve()
        finally:
            conn.close()
        say("gdb disconnected")
        if once:
            return
