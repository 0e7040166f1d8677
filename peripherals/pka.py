"""PKA: the public-key accelerator, with pkasim's register interface (docs/pka.md).

Interface
  MMIO window  base + 0x000-0x03F: registers (CR, SR, CLRFR, LEN, APTR, BPTR, NPTR,
               RPTR, CARRY, LASTCYC, the capability registers MAXLEN, RAMSIZE and
               CAPS; A2PTR and R2PTR on a chip with ``montmul_pair``);
               base + 0x040-0x3FF reserved (reads 0, logged);
               base + 0x400: PKA RAM, ``ram_size`` bytes. Word accesses only: any other
               size is logged on ``pkasim.guest`` and ignored (reads 0).
  IRQ output   one line, pulsed when a flag (PROCENDF, RAMERRF, ADDRERRF, OPERRF)
               rises while its enable bit in CR is set, or an enable bit is set while
               its flag is up. Each enable bit sits at the position of its flag.
  Clock input  the core clock: an operation is busy for ``cycles(op, LEN)`` core
               cycles from the timing model (``digit_bits``, ``timing``), one event
               scheduled on the Clock; the result appears in PKA RAM when it fires.
               With ``clock_hz`` (a what-if) the timing model counts the PKA's own
               cycles, turned into core cycles as ceil(cycles * core Hz / clock_hz).
  Pair         ``montmul_pair`` (a what-if, Victor's two multiplications in parallel):
               MONTMUL2 computes A*B and A2*B in the busy time of one MONTMUL.
  Operand rule ``strict_operands`` (a chip-file switch, default off): a modular operation
               with A or B at or above N is refused (OPERRF) instead of reduced.
  Not modelled the datapath's intermediate states (the result is computed when START
               is accepted and written at the end of the busy time: the CPU cannot
               see PKA RAM meanwhile, so nothing can tell); wait states on PKA RAM or
               register accesses. Power: ``on_start`` (None unless something traces
               power) is given every accepted operation's operands, and the power
               model (pkasim.analysis.power.pka) derives the datapath's digits from
               them; the fast path hands START to Python while it is set. START is taken at the cycle
               count of the start of the basic block that writes CR (the model's MMIO
               time resolution, docs/cycle-model.md).

Layers: this file is the register front end and the PKA RAM; the arithmetic is the
pure-integer service ``pkasim.peripherals.pka_math`` behind its command table.

Counters (operations by kind and by length, busy cycles, error flags, a bounded log of
operations) describe the run since the last reset: ``reset()`` clears them, as it
clears the registers, any operation in progress and PKA RAM.

Native fast path: in a machine, ``pka_fast.c`` serves the common accesses (registers
and PKA RAM while idle, SR, CLRFR, a valid MONTMUL, MODADD, MODSUB, ADD or SUB, and
MONTMUL2 on a chip with the pair, from START to its done interrupt) without a Python
call, on this model's own state record (``PkaState``), and hands everything else to
``read``/``write`` here. This file stays the specification.
"""

from __future__ import annotations

import ctypes
import math
import reprlib
from collections import Counter
from collections.abc import Callable
from enum import IntEnum
from fractions import Fraction
from typing import Any, NamedTuple

from pkasim.base.clock import Clock, Event
from pkasim.base.errors import ConfigError, UsageError
from pkasim.base.kinds import Kind
from pkasim.base.limits import PKA_OPERATION_CYCLES_MAX
from pkasim.chip.config import PeripheralConfig
from pkasim.peripherals.base import NativeWindow, Peripheral, guest_log
from pkasim.peripherals.pka_math import COMMANDS, Command, OperandError, require_reduced


class Reg(IntEnum):
    CR = 0x00
    SR = 0x04
    CLRFR = 0x08
    LEN = 0x0C
    APTR = 0x10
    BPTR = 0x14
    NPTR = 0x18
    RPTR = 0x1C
    CARRY = 0x20
    LASTCYC = 0x24
    MAXLEN = 0x28  # capability: max_words, the multiplier's widest LEN
    RAMSIZE = 0x2C  # capability: PKA RAM size in words (ram_size / 4)
    CAPS = 0x30  # capability: optional engine features (CAPS_PAIR)
    A2PTR = 0x34  # montmul_pair only: A of MONTMUL2's second product
    R2PTR = 0x38  # montmul_pair only: result of MONTMUL2's second product


REG_WINDOW = 0x40  # registers; 0x40-0x3FF reserved
RAM_OFFSET = 0x400  # PKA RAM starts here in the window
RAM_MAX = 0x10000 - RAM_OFFSET  # largest ram_size: the whole window stays within 64 KiB
MAX_WORDS_LIMIT = 128  # largest max_words a chip description may give (4096-bit operands)

# CR fields
CR_EN = 1 << 0
CR_START = 1 << 1  # write 1 to start; never stored, reads 0
CR_OPCODE_SHIFT = 8
CR_OPCODE = 0x3F << CR_OPCODE_SHIFT
CR_PROCENDIE = 1 << 17
CR_RAMERRIE = 1 << 19
CR_ADDRERRIE = 1 << 20
CR_OPERRIE = 1 << 21
CR_WRITABLE = CR_EN | CR_OPCODE | CR_PROCENDIE | CR_RAMERRIE | CR_ADDRERRIE | CR_OPERRIE

# SR fields (CLRFR uses the flag positions: write 1 to clear)
SR_BUSY = 1 << 16
SR_PROCENDF = 1 << 17
SR_RAMERRF = 1 << 19
SR_ADDRERRF = 1 << 20
SR_OPERRF = 1 << 21
SR_FLAGS = SR_PROCENDF | SR_RAMERRF | SR_ADDRERRF | SR_OPERRF
IRQ_SOURCES = SR_FLAGS  # CR's enable bits sit at the positions of their flags
ERROR_FLAGS = {SR_OPERRF: "OPERRF", SR_ADDRERRF: "ADDRERRF", SR_RAMERRF: "RAMERRF"}

# CAPS fields
CAPS_PAIR = 1 << 0  # MONTMUL2 and the registers A2PTR, R2PTR (chip file: montmul_pair: true)
OP_MONTMUL2 = 0x06  # R = A (x) B and R2 = A2 (x) B, in one MONTMUL's busy time (montmul_pair)
PAIR_REGS = (0x34, 0x38)  # A2PTR, R2PTR: reserved offsets on a chip without the pair

LOG_LIMIT = 100_000  # operations kept in the log; counts are always complete
PARAMS = ("ram_size", "max_words", "digit_bits", "timing")
# parameter -> value when the chip file leaves it out
OPTIONAL_PARAMS = {"strict_operands": False, "clock_hz": None, "montmul_pair": False}


class RegSpec(NamedTuple):
    """One register as data: access kind, reset value and its fields (docs/pka.md)."""

    access: str  # "RW", "RO" or "W1C"
    reset: int  # for the capability registers, replaced by the chip's value (CAPABILITIES)
    fields: str


REGISTERS: dict[Reg, RegSpec] = {
    Reg.CR: RegSpec("RW", 0, "EN[0] START[1] OPCODE[13:8] PROCENDIE[17] RAMERRIE[19] ADDRERRIE[20] OPERRIE[21]"),
    Reg.SR: RegSpec("RO", 0, "BUSY[16] PROCENDF[17] RAMERRF[19] ADDRERRF[20] OPERRF[21]"),
    Reg.CLRFR: RegSpec("W1C", 0, "PROCENDFC[17] RAMERRFC[19] ADDRERRFC[20] OPERRFC[21]"),
    Reg.LEN: RegSpec("RW", 0, "operand length in words, 1..max_words"),
    Reg.APTR: RegSpec("RW", 0, "byte offset of A in PKA RAM"),
    Reg.BPTR: RegSpec("RW", 0, "byte offset of B"),
    Reg.NPTR: RegSpec("RW", 0, "byte offset of N"),
    Reg.RPTR: RegSpec("RW", 0, "byte offset of R"),
    Reg.CARRY: RegSpec("RO", 0, "carry (ADD) or borrow (SUB) of the last operation [0]"),
    Reg.LASTCYC: RegSpec("RO", 0, "busy cycles of the last operation"),
    Reg.MAXLEN: RegSpec("RO", 0, "largest LEN the engine accepts: max_words"),
    Reg.RAMSIZE: RegSpec("RO", 0, "PKA RAM size in words: ram_size / 4"),
    Reg.CAPS: RegSpec("RO", 0, "PAIR[0]: MONTMUL2, A2PTR and R2PTR (montmul_pair)"),
    Reg.A2PTR: RegSpec("RW", 0, "byte offset of A2, MONTMUL2's second multiplicand (montmul_pair only)"),
    Reg.R2PTR: RegSpec("RW", 0, "byte offset of R2, MONTMUL2's second result (montmul_pair only)"),
}
# Read-only registers that describe the chip, not the last operation: their value comes
# from the chip description (a driver reads them to learn the multiplier's width and
# the RAM it may use), and a reset leaves them at it.
CAPABILITIES: dict[Reg, Callable[[Pka], int]] = {
    Reg.MAXLEN: lambda pka: pka.max_words,
    Reg.RAMSIZE: lambda pka: pka.ram_size // 4,
    Reg.CAPS: lambda pka: CAPS_PAIR if pka.montmul_pair else 0,
}
PAIR_COMMAND = Command("MONTMUL2", COMMANDS[0x01].function, True)  # montmul_pair chips only
OPCODES = {command.name: opcode for opcode, command in COMMANDS.items()} | {"MONTMUL2": OP_MONTMUL2}  # for events
OPERAND_POINTERS = ((Reg.APTR, False), (Reg.BPTR, False), (Reg.RPTR, False), (Reg.NPTR, True))  # (register, N only)
FAST_OPS = 7  # the native path serves opcodes 1..6 (COMMANDS, MONTMUL2); its tables are indexed by opcode
FAST_COMMANDS = {**COMMANDS, OP_MONTMUL2: PAIR_COMMAND}  # what each of its opcodes counts as


class PkaState(ctypes.Structure):
    """The PKA's state as one record the native fast path shares (pk_pka in pka_fast.c)."""

    _fields_ = [
        ("regs", ctypes.c_uint32 * 16),  # by offset / 4
        ("flags", ctypes.c_uint32),  # SR flag bits (BUSY comes from ``busy``)
        ("irq_sources", ctypes.c_uint32),  # flag & enable bits at the last IRQ decision
        ("busy", ctypes.c_uint32),  # an operation is in flight
        ("fast_busy", ctypes.c_uint32),  # ... started by the fast path, ending at done_at
        ("done_at", ctypes.c_uint64),
        ("irq_exc", ctypes.c_uint32),
        ("base", ctypes.c_uint32),
        ("ram_size", ctypes.c_uint32),
        ("max_words", ctypes.c_uint32),
        ("fast_on", ctypes.c_uint32),
        ("ram", ctypes.c_void_p),
        ("op_cycles", ctypes.c_void_p),  # busy cycles by [opcode][LEN]
        ("core", ctypes.c_void_p),
        ("py_access", ctypes.c_void_p),
        ("p_words", ctypes.c_uint32),
        ("p_rptr", ctypes.c_uint32),
        ("p_start", ctypes.c_uint64),
        ("p_cycles", ctypes.c_uint32),
        ("p_op", ctypes.c_uint32),
        ("p_carry", ctypes.c_uint32),
        ("pad", ctypes.c_uint32),
        ("result", ctypes.c_uint32 * MAX_WORDS_LIMIT),
        ("ops", ctypes.c_uint64 * FAST_OPS),  # finished operations by opcode
        ("busy_total", ctypes.c_uint64),
        ("by_len", (ctypes.c_uint64 * (MAX_WORDS_LIMIT + 1)) * FAST_OPS),
        ("log", ctypes.c_void_p),
        ("log_n", ctypes.c_uint32),
        ("log_cap", ctypes.c_uint32),
        ("log_truncated", ctypes.c_uint32),
        ("pad2", ctypes.c_uint32),
        ("strict", ctypes.c_uint32),  # strict_operands: the fast path leaves A or B >= N to _start
        ("py_starts", ctypes.c_uint32),  # a fault is armed (arm_fault): every START comes to _start
        ("pair", ctypes.c_uint32),  # montmul_pair: the fast path serves MONTMUL2 too
        ("p_r2ptr", ctypes.c_uint32),  # MONTMUL2 in flight: where its second result goes
        ("pad3", ctypes.c_uint32),
        ("result2", ctypes.c_uint32 * MAX_WORDS_LIMIT),
    ]


class _FastOp(ctypes.Structure):
    _fields_ = [("op", ctypes.c_uint32), ("words", ctypes.c_uint32), ("start", ctypes.c_uint64),
                ("end", ctypes.c_uint64)]


class _Regs:
    """``regs[Reg.X]`` over the shared record."""

    def __init__(self, state: PkaState) -> None:
        self._s = state

    def __getitem__(self, reg: int) -> int:
        return self._s.regs[reg >> 2]

    def __setitem__(self, reg: int, value: int) -> None:
        self._s.regs[reg >> 2] = value & 0xFFFFFFFF


class StartFault(NamedTuple):
    """A fault on one START, for fault-injection campaigns (docs/faults.md): the START
    accepted at core cycle ``at`` does nothing at all (``skip``: no operation, no
    flag, no interrupt, as if the write to CR were lost), or its result goes through
    ``corrupt(result, words)`` before it is written to PKA RAM at the end of the busy
    time (MONTMUL2: the first result)."""

    at: int
    skip: bool = False
    corrupt: Callable[[int, int], int] | None = None


class Operation(NamedTuple):
    """One finished operation in the log: cycles are core cycles, end = start + busy."""

    name: str
    words: int
    start_cycle: int
    end_cycle: int


class Started(NamedTuple):
    """An accepted operation, as ``Pka.on_start`` is given it: its operands as they were
    read from PKA RAM, when it started and for how many core cycles it is busy."""

    name: str  # the command's name: MONTMUL, MODADD, MODSUB, ADD, SUB, MONTMUL2
    words: int
    a: int
    b: int
    n: int  # 0 for ADD and SUB
    start: int  # core cycle
    cycles: int  # busy core cycles
    a2: int | None = None  # MONTMUL2's second multiplicand


class _Pending(NamedTuple):
    command: Command
    words: int
    rptr: int
    result: int
    carry: int
    cycles: int
    start: int
    r2ptr: int = 0  # MONTMUL2: where its second product goes
    result2: int | None = None


# --------------------------------------------------------------------------- parameters

def _param_error(name: str, key: str, problem: str) -> ConfigError:
    error = ConfigError(f"peripherals.{name}.{key}: {problem}")
    error.key = key  # the parameter, for the line number (never parsed back out of the text)
    return error


def _located(pc: PeripheralConfig, error: ConfigError) -> ConfigError:
    """The same error with ``file:line`` of the parameter it is about in front."""
    key = getattr(error, "key", "")
    param = key.split(".", 1)[0].split("[", 1)[0]
    return ConfigError(f"{pc.where(param)}: {error}")


def _check_ram_size(name: str, ram_size: Any) -> None:
    if not _is_int(ram_size) or ram_size <= 0:
        raise _param_error(name, "ram_size", f"expected a size in bytes, got {reprlib.repr(ram_size)}")
    if ram_size % 4:
        raise _param_error(name, "ram_size", f"must be a multiple of 4 bytes (word access only), got {ram_size}")
    if ram_size > RAM_MAX:
        raise _param_error(name, "ram_size", f"at most 0x{RAM_MAX:x} bytes (the PKA window is 64 KiB), got 0x{ram_size:x}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _coefficient(name: str, key: str, value: Any) -> Fraction:
    """A timing coefficient, exact: 0.5 is 1/2, not the nearest binary fraction."""
    if _is_int(value):
        return Fraction(value)
    if isinstance(value, float) and math.isfinite(value):
        return Fraction(repr(value))
    raise _param_error(name, key, f"expected a number, got {reprlib.repr(value)}")


def busy_cycles(coefficients: tuple[Fraction, Fraction, Fraction], digit_bits: int, words: int) -> int:
    """docs/pka.md: d = ceil(32 * LEN / digit_bits); cycles = ceil(a d^2 + b d + c)."""
    a, b, c = coefficients
    d = -(-32 * words // digit_bits)
    return math.ceil(a * d * d + b * d + c)


def _timing_table(name: str, timing: Any, digit_bits: int, max_words: int,
                  clock_ratio: Fraction = Fraction(1)) -> dict[str, list[int]]:
    """Busy cycles for every operation and every LEN (index = LEN; index 0 unused).
    ``clock_ratio`` is core Hz / PKA Hz: the formula counts PKA cycles, the table core
    cycles (ceil(cycles * ratio); 1 when the PKA runs from the core clock)."""
    if not isinstance(timing, dict):
        raise _param_error(name, "timing", f"expected a mapping of operation to [a, b, c], got {reprlib.repr(timing)}")
    keys = [cmd.key for cmd in COMMANDS.values()]
    for key in timing:
        if key not in keys:
            raise _param_error(name, f"timing.{key}", f"unknown operation (known: {', '.join(keys)})")
    table: dict[str, list[int]] = {}
    for key in keys:
        where = f"timing.{key}"
        if key not in timing:
            raise _param_error(name, where, "required: [a, b, c] for cycles = ceil(a*d^2 + b*d + c)")
        raw = timing[key]
        if not isinstance(raw, (list, tuple)) or len(raw) != 3:
            raise _param_error(name, where, f"expected a list of 3 numbers [a, b, c], got {reprlib.repr(raw)}")
        coefficients = tuple(_coefficient(name, f"{where}[{i}]", v) for i, v in enumerate(raw))
        row = [0] + [math.ceil(busy_cycles(coefficients, digit_bits, w) * clock_ratio) for w in range(1, max_words + 1)]
        worst = min(range(1, max_words + 1), key=lambda w: row[w])
        if row[worst] < 1:
            raise _param_error(name, where, f"gives {row[worst]} cycles at LEN={worst} (an operation takes at least 1 cycle)")
        longest = max(range(1, max_words + 1), key=lambda w: row[w])
        if row[longest] > PKA_OPERATION_CYCLES_MAX:
            raise _param_error(name, where, f"gives {row[longest]:.3g} cycles at LEN={longest}; at most "
                                            f"{PKA_OPERATION_CYCLES_MAX:,} (LASTCYC reports them in 32 bits)")
        table[key] = row
    return table


# --------------------------------------------------------------------------- the device

class Pka(Peripheral):
    """Register front end + PKA RAM; the maths is ``pka_math``, the time is the Clock's."""

    def __init__(self, name: str, base: int, clock: Clock, irq: Callable[[], None], *,
                 ram_size: int, max_words: int, digit_bits: int, timing: dict[str, Any],
                 strict_operands: bool = False, clock_hz: int | None = None, montmul_pair: bool = False) -> None:
        super().__init__(name, base)
        _check_ram_size(name, ram_size)
        if not _is_int(max_words) or not 1 <= max_words <= MAX_WORDS_LIMIT:
            raise _param_error(name, "max_words", f"expected an integer 1..{MAX_WORDS_LIMIT}, got {reprlib.repr(max_words)}")
        if 4 * max_words > ram_size:
            raise _param_error(name, "max_words",
                               f"{max_words} words ({4 * max_words} bytes) do not fit in ram_size ({ram_size} bytes)")
        if not _is_int(digit_bits) or digit_bits <= 0:
            raise _param_error(name, "digit_bits", f"expected a positive integer, got {reprlib.repr(digit_bits)}")
        if not isinstance(strict_operands, bool):
            raise _param_error(name, "strict_operands", f"expected true or false, got {reprlib.repr(strict_operands)}")
        if not isinstance(montmul_pair, bool):
            raise _param_error(name, "montmul_pair", f"expected true or false, got {reprlib.repr(montmul_pair)}")
        if clock_hz is not None and (not _is_int(clock_hz) or clock_hz <= 0):
            raise _param_error(name, "clock_hz", f"expected a frequency such as '303.21 MHz', got {reprlib.repr(clock_hz)}")
        self.clock = clock
        self.irq = irq
        self.ram_size = ram_size
        self.max_words = max_words
        self.digit_bits = digit_bits
        self.strict_operands = strict_operands
        self.clock_hz = clock_hz  # None: the PKA runs from the core clock
        self.montmul_pair = montmul_pair
        ratio = Fraction(clock.hz, clock_hz) if clock_hz is not None else Fraction(1)
        self._cycles = _timing_table(name, timing, digit_bits, max_words, ratio)
        self.timing = {k: tuple(v) for k, v in timing.items()}
        self.size = RAM_OFFSET + ram_size
        self.state = PkaState()
        self.state.base = base
        self.state.ram_size = ram_size
        self.state.max_words = max_words
        self.state.strict = int(strict_operands)
        self.state.pair = int(montmul_pair)
        self._ram_buf = (ctypes.c_uint8 * ram_size)()
        self.state.ram = ctypes.addressof(self._ram_buf)
        self.ram = memoryview(self._ram_buf).cast("B")
        self._op_cycles = ((ctypes.c_uint32 * (MAX_WORDS_LIMIT + 1)) * FAST_OPS)()
        for opcode, command in COMMANDS.items():
            self._op_cycles[opcode][:max_words + 1] = self._cycles[command.key]
        self._op_cycles[OP_MONTMUL2][:max_words + 1] = self._cycles["montmul"]  # one MONTMUL's busy time
        self.state.op_cycles = ctypes.addressof(self._op_cycles)
        self.regs = _Regs(self.state)
        self._native = None  # the fast path's library, once a machine attaches it
        self.faults: tuple[StartFault, ...] = ()  # armed by arm_fault(); each leaves when it fires
        self._event: Event | None = None
        self._pending: _Pending | None = None
        self._on_start: Callable[[Started], None] | None = None
        self._fast_wanted = False  # what the machine wants of the fast path (attach_native, fast_paths)
        self.reset()

    @classmethod
    def from_config(cls, pc: PeripheralConfig, clock: Clock, irq: Callable[[], None]) -> Pka:
        """Build from the chip description; bad parameters raise ConfigError naming
        the file, the line and the parameter."""
        try:
            for key in pc.params:
                if key not in PARAMS and key not in OPTIONAL_PARAMS:
                    known = ", ".join((*PARAMS, *OPTIONAL_PARAMS))
                    raise _param_error(pc.name, key, f"unknown parameter for a pka (known: {known})")
            for key in PARAMS:
                if key not in pc.params:
                    raise _param_error(pc.name, key, "required parameter is missing")
            return cls(pc.name, pc.base, clock, irq, **pc.params)
        except ConfigError as exc:
            raise _located(pc, exc) from None

    @classmethod
    def window(cls, pc: PeripheralConfig) -> int:
        """Registers, then PKA RAM at +0x400: the window grows with ``ram_size``."""
        try:
            if "ram_size" not in pc.params:
                raise _param_error(pc.name, "ram_size", "required parameter is missing")
            _check_ram_size(pc.name, pc.params["ram_size"])
        except ConfigError as exc:
            raise _located(pc, exc) from None
        return RAM_OFFSET + pc.params["ram_size"]

    def cycles_for(self, op: str, words: int) -> int:
        """Busy cycles of operation ``op`` ("montmul", ...) on LEN = ``words``."""
        return self._cycles[op][words]

    # ------------------------------------------------------------- state
    def reset(self) -> None:
        if self._event is not None:
            self._event.cancel()
        self._event = None
        self._pending = None
        for reg, spec in REGISTERS.items():
            self.regs[reg] = spec.reset
        for reg, value in CAPABILITIES.items():
            self.regs[reg] = value(self)
        st = self.state
        st.flags = 0  # SR flag bits
        st.irq_sources = 0  # flag & enable bits at the last _update_irq()
        st.busy = st.fast_busy = 0
        st.done_at = 0
        self.ram[:] = bytes(self.ram_size)
        self.clear_counters()

    def clear_counters(self) -> None:
        self._operations: Counter[str] = Counter()
        self._by_length: Counter[tuple[str, int]] = Counter()
        self.errors: Counter[str] = Counter({flag: 0 for flag in ERROR_FLAGS.values()})
        self._busy_total = 0
        self._log: list[Operation] = []
        self._log_truncated = False
        st = self.state
        st.busy_total = 0
        ctypes.memset(st.ops, 0, ctypes.sizeof(st.ops))
        ctypes.memset(st.by_len, 0, ctypes.sizeof(st.by_len))
        if self._native is not None:
            self._native.pk_pka_free_log(ctypes.byref(st))
        self._counting_since = self.clock.now

    # ------------------------------------------------------------- fault injection
    def arm_fault(self, *faults: StartFault) -> None:
        """Arm faults on the STARTs accepted at each ``fault.at`` (none: disarm all).
        While one is armed every START is served here, not by the native fast path
        (RAM and register accesses stay native); each fault disarms itself when it
        fires, so an empty ``self.faults`` afterwards says they all did."""
        self.faults = tuple(faults)
        self.state.py_starts = int(bool(faults))

    def _fault_now(self) -> StartFault | None:
        """The armed fault for this START, if any (it is disarmed then)."""
        if not self.faults:
            return None
        now = self.clock.now
        for i, fault in enumerate(self.faults):
            if fault.at == now:
                self.arm_fault(*self.faults[:i], *self.faults[i + 1:])
                return fault
        return None

    # ------------------------------------------------------------- the shared record
    @property
    def flags(self) -> int:
        return self.state.flags

    @flags.setter
    def flags(self, value: int) -> None:
        self.state.flags = value

    @property
    def _irq_sources(self) -> int:
        return self.state.irq_sources

    @_irq_sources.setter
    def _irq_sources(self, value: int) -> None:
        self.state.irq_sources = value

    @property
    def busy(self) -> bool:
        return bool(self.state.busy)

    # ------------------------------------------------------------- counters (both paths)
    @property
    def operations(self) -> Counter[str]:
        ops = Counter(self._operations)
        for opcode, command in FAST_COMMANDS.items():
            if self.state.ops[opcode]:
                ops[command.name] += self.state.ops[opcode]
        return ops

    @property
    def by_length(self) -> Counter[tuple[str, int]]:
        lengths = Counter(self._by_length)
        for opcode, command in FAST_COMMANDS.items():
            if not self.state.ops[opcode]:
                continue
            row = self.state.by_len[opcode]
            for words in range(1, self.max_words + 1):
                if row[words]:
                    lengths[(command.key, words)] += row[words]
        return lengths

    @property
    def busy_total(self) -> int:
        return self._busy_total + self.state.busy_total

    @property
    def log(self) -> list[Operation]:
        st = self.state
        if not st.log_n:
            return list(self._log)
        fast = ctypes.cast(st.log, ctypes.POINTER(_FastOp * st.log_n)).contents
        merged = self._log + [Operation(FAST_COMMANDS[op.op].name, op.words, op.start, op.end) for op in fast]
        merged.sort(key=lambda op: op.start_cycle)
        return merged[:LOG_LIMIT]

    @property
    def log_truncated(self) -> bool:
        return self._log_truncated or bool(self.state.log_truncated) or len(self._log) + self.state.log_n > LOG_LIMIT

    # ------------------------------------------------------------- power
    @property
    def on_start(self) -> Callable[[Started], None] | None:
        """Called with every operation the PKA accepts (the power model's input). While
        it is set, the fast path hands every access to this model (``fast_on`` = 0), so
        no START bypasses it; None gives the fast path back."""
        return self._on_start

    @on_start.setter
    def on_start(self, callback: Callable[[Started], None] | None) -> None:
        self._on_start = callback
        if self._native is not None:
            self.state.fast_on = int(callback is None and self._fast_wanted)

    def fast_paths_changed(self) -> None:
        """The machine switched the fast paths (``Machine.fast_paths``): remember what it
        wants, and keep the fast path off while ``on_start`` is set."""
        self._fast_wanted = bool(self.state.fast_on)
        if self._on_start is not None:
            self.state.fast_on = 0

    # ------------------------------------------------------------- native fast path
    def attach_native(self, lib: ctypes.CDLL, core: int, irq_exc: int, slow_path: int) -> NativeWindow:
        """Let the fast path (pka_fast.c, in ``lib``) serve this PKA in the machine whose
        native state is at address ``core``. ``irq_exc`` is the exception number its
        IRQ line pends; ``slow_path`` is the C-callable function through which the
        fast path hands an access back to ``read``/``write``."""
        if lib.pk_sizeof_pka() != ctypes.sizeof(PkaState):
            raise UsageError("the native PKA fast path does not match pka.py: rebuild with 'pip install -e .'")
        self._native = lib
        st = self.state
        st.core = core
        st.irq_exc = irq_exc
        st.py_access = slow_path
        self._fast_wanted = True
        st.fast_on = int(self._on_start is None)
        return NativeWindow(lib.pk_pka_read, lib.pk_pka_write, ctypes.addressof(st), "pk_pka_next", "pk_pka_finish")

    def _update_irq(self) -> None:
        """The one place the IRQ output is decided: pulse when a flag & enable pair rises."""
        sources = self.flags & self.regs[Reg.CR] & IRQ_SOURCES
        rose = sources & ~self._irq_sources
        self._irq_sources = sources
        if rose:
            self.irq()

    def _raise_flag(self, flag: int) -> None:
        self.flags |= flag
        if flag in ERROR_FLAGS:
            self.errors[ERROR_FLAGS[flag]] += 1
        self._update_irq()

    # ------------------------------------------------------------- PKA RAM
    def peek(self, ptr: int, words: int) -> int:
        """An operand as stored in PKA RAM, without side effects (tests, debugger)."""
        self._check_range(ptr, words)
        return int.from_bytes(self.ram[ptr:ptr + 4 * words], "little")

    def poke(self, ptr: int, value: int, words: int) -> None:
        """Store an operand into PKA RAM, without side effects (tests, debugger)."""
        self._check_range(ptr, words)
        if not 0 <= value < 1 << (32 * words):
            raise UsageError(f"{self.name}: value does not fit in {words} words")
        self.ram[ptr:ptr + 4 * words] = value.to_bytes(4 * words, "little")

    def debug_read(self, offset: int, size: int) -> bytes:
        """PKA RAM as it is (no RAMERRF while busy); registers read as zero."""
        out = bytearray(size)
        lo, hi = max(offset, RAM_OFFSET), min(offset + size, RAM_OFFSET + self.ram_size)
        if lo < hi:
            out[lo - offset:hi - offset] = self.ram[lo - RAM_OFFSET:hi - RAM_OFFSET]
        return bytes(out)

    def debug_write(self, offset: int, data: bytes) -> bool:
        if offset < RAM_OFFSET or offset + len(data) > RAM_OFFSET + self.ram_size:
            return False
        self.ram[offset - RAM_OFFSET:offset - RAM_OFFSET + len(data)] = data
        return True

    def _check_range(self, ptr: int, words: int) -> None:
        if ptr < 0 or ptr % 4 or words < 1 or ptr + 4 * words > self.ram_size:
            raise UsageError(f"{self.name}: {words} words at PKA RAM offset 0x{ptr:x} are outside its {self.ram_size} bytes")

    def _ram_access(self, offset: int, size: int, what: str) -> bool:
        """Whether a CPU access to PKA RAM goes through (docs/pka.md, step 4)."""
        if self.busy:
            if not self.flags & SR_RAMERRF:
                guest_log.warning("%s: PKA RAM %s at offset 0x%03x while BUSY (ignored, RAMERRF)", self.name, what, offset)
            self._raise_flag(SR_RAMERRF)
            return False
        if not self.word_only(offset, size, "PKA RAM"):
            return False
        if offset % 4:
            guest_log.warning("%s: unaligned PKA RAM %s at offset 0x%03x (ignored)", self.name, what, offset)
            return False
        return True

    # ------------------------------------------------------------- bus interface
    def read(self, offset: int, size: int) -> int:
        if offset >= RAM_OFFSET:
            if not self._ram_access(offset, size, "read"):
                return 0
            i = offset - RAM_OFFSET
            return int.from_bytes(self.ram[i:i + 4], "little")
        if not self.word_only(offset, size):
            return 0
        if offset not in REGISTERS or (offset in PAIR_REGS and not self.montmul_pair):
            guest_log.warning("%s: read of reserved offset 0x%03x (reads 0)", self.name, offset)
            return 0
        reg = Reg(offset)
        if reg == Reg.SR:
            if self.busy:
                self._observe(Kind.PKA_POLL)
            return self.flags | (SR_BUSY if self.busy else 0)
        if reg == Reg.CLRFR:
            return 0  # write-only
        return self.regs[reg]

    def write(self, offset: int, size: int, value: int) -> None:
        if offset >= RAM_OFFSET:
            if self._ram_access(offset, size, "write"):
                i = offset - RAM_OFFSET
                self.ram[i:i + 4] = (value & 0xFFFFFFFF).to_bytes(4, "little")
            return
        if not self.word_only(offset, size):
            return
        if offset not in REGISTERS or (offset in PAIR_REGS and not self.montmul_pair):
            guest_log.warning("%s: write of reserved offset 0x%03x = 0x%x (ignored)", self.name, offset, value)
            return
        reg = Reg(offset)
        access = REGISTERS[reg].access
        if access == "RO":
            guest_log.warning("%s: %s is read-only (write of 0x%x ignored)", self.name, reg.name, value)
        elif access == "W1C":
            self.flags &= ~(value & SR_FLAGS)
            self._update_irq()
        elif self.busy:
            guest_log.warning("%s: write of 0x%x to %s while BUSY (ignored)", self.name, value, reg.name)
        elif reg == Reg.CR:
            if value & ~(CR_WRITABLE | CR_START):
                guest_log.warning("%s: CR write sets reserved bits 0x%x (ignored)", self.name, value & ~(CR_WRITABLE | CR_START))
            self.regs[Reg.CR] = value & CR_WRITABLE
            self._update_irq()  # an enable bit set under a raised flag pends the interrupt
            if value & CR_START:
                self._start()
        else:
            self.regs[reg] = value & 0xFFFFFFFF

    # ------------------------------------------------------------- operations
    def _refuse(self, flag: int, why: str) -> None:
        guest_log.warning("%s: START refused, %s: %s", self.name, ERROR_FLAGS[flag], why)
        self._raise_flag(flag)

    def _start(self) -> None:
        """Check the request (docs/pka.md, step 2), then compute and schedule the end."""
        fault = self._fault_now()
        if fault is not None and fault.skip:
            return None  # the START does nothing
        cr, regs = self.regs[Reg.CR], self.regs
        words = regs[Reg.LEN]
        opcode = (cr & CR_OPCODE) >> CR_OPCODE_SHIFT
        if not cr & CR_EN:
            return self._refuse(SR_OPERRF, "EN = 0")
        if not 1 <= words <= self.max_words:
            return self._refuse(SR_OPERRF, f"LEN {words} is outside 1..{self.max_words}")
        if opcode == OP_MONTMUL2 and self.montmul_pair:
            return self._start_pair(words, fault)
        command = COMMANDS.get(opcode)
        if command is None:
            return self._refuse(SR_OPERRF, f"unknown opcode 0x{opcode:02x}")
        for reg, n_only in OPERAND_POINTERS:
            ptr = regs[reg]
            if n_only and not command.uses_n:
                continue
            if ptr % 4:
                return self._refuse(SR_ADDRERRF, f"{reg.name} 0x{ptr:x} is not a multiple of 4")
            if ptr + 4 * words > self.ram_size:
                return self._refuse(SR_ADDRERRF, f"{reg.name} 0x{ptr:x} + {words} words runs past the end of PKA RAM "
                                                 f"(0x{self.ram_size:x} bytes)")
        a = self.peek(regs[Reg.APTR], words)
        b = self.peek(regs[Reg.BPTR], words)
        n = self.peek(regs[Reg.NPTR], words) if command.uses_n else 0
        try:
            result, carry = command.function(a, b, n, words)
            if self.strict_operands and command.uses_n:
                require_reduced(a, b, n)
        except OperandError as exc:
            return self._refuse(SR_OPERRF, f"{command.name}: {exc.reason}")
        if fault is not None and fault.corrupt is not None:
            result = fault.corrupt(result, words) & ((1 << (32 * words)) - 1)
        cycles = self._cycles[command.key][words]
        start = self.clock.now
        if self._on_start is not None:
            self._on_start(Started(command.name, words, a, b, n, start, cycles))
        self._pending = _Pending(command, words, regs[Reg.RPTR], result, carry, cycles, start)
        self.state.busy = 1
        self._event = self.clock.schedule(start + cycles, self._finish, self.name)
        self._observe(Kind.PKA_START, opcode | words << 8, cycles)
        return None

    def _start_pair(self, words: int, fault: StartFault | None = None) -> None:
        """MONTMUL2 (docs/pka.md, "The parallel pair"): R = A (x) B and R2 = A2 (x) B
        with one N, checked as MONTMUL is (A2PTR and R2PTR after APTR, BPTR, RPTR),
        busy for one MONTMUL's time: Victor's pipelined unit interleaves the two."""
        regs = self.regs
        for reg in (Reg.APTR, Reg.BPTR, Reg.RPTR, Reg.A2PTR, Reg.R2PTR, Reg.NPTR):
            ptr = regs[reg]
            if ptr % 4:
                return self._refuse(SR_ADDRERRF, f"{reg.name} 0x{ptr:x} is not a multiple of 4")
            if ptr + 4 * words > self.ram_size:
                return self._refuse(SR_ADDRERRF, f"{reg.name} 0x{ptr:x} + {words} words runs past the end of PKA RAM "
                                                 f"(0x{self.ram_size:x} bytes)")
        a, a2 = self.peek(regs[Reg.APTR], words), self.peek(regs[Reg.A2PTR], words)
        b, n = self.peek(regs[Reg.BPTR], words), self.peek(regs[Reg.NPTR], words)
        command = PAIR_COMMAND
        try:
            result, _ = command.function(a, b, n, words)
            result2, _ = command.function(a2, b, n, words)
            if self.strict_operands:
                require_reduced(a, b, n)
                if a2 >= n:
                    raise OperandError("A2 >= N (strict_operands: modular operands must be below N)")
        except OperandError as exc:
            return self._refuse(SR_OPERRF, f"{command.name}: {exc.reason}".replace("MONTMUL needs", "MONTMUL2 needs"))
        if fault is not None and fault.corrupt is not None:
            result = fault.corrupt(result, words) & ((1 << (32 * words)) - 1)
        cycles = self._cycles["montmul"][words]
        start = self.clock.now
        if self._on_start is not None:
            self._on_start(Started(command.name, words, a, b, n, start, cycles, a2))
        self._pending = _Pending(command, words, regs[Reg.RPTR], result, 0, cycles, start, regs[Reg.R2PTR], result2)
        self.state.busy = 1
        self._event = self.clock.schedule(start + cycles, self._finish, self.name)
        self._observe(Kind.PKA_START, OP_MONTMUL2 | words << 8, cycles)
        return None

    def _finish(self) -> None:
        """The busy time has passed: the result lands in PKA RAM, PROCENDF rises."""
        p = self._pending
        self._pending = None
        self._event = None
        if p is None:
            return
        self._observe(Kind.PKA_FINISH, OPCODES[p.command.name] | p.words << 8, p.start + p.cycles)
        self.state.busy = 0
        self.poke(p.rptr, p.result, p.words)
        if p.result2 is not None:
            self.poke(p.r2ptr, p.result2, p.words)  # after R: where they overlap, R2 wins
        self.regs[Reg.CARRY] = p.carry
        self.regs[Reg.LASTCYC] = p.cycles
        self._operations[p.command.name] += 1
        self._by_length[(p.command.key, p.words)] += 1
        self._busy_total += p.cycles
        if len(self._log) < LOG_LIMIT:
            self._log.append(Operation(p.command.name, p.words, p.start, p.start + p.cycles))
        else:
            self._log_truncated = True
        self._raise_flag(SR_PROCENDF)

    # ------------------------------------------------------------- reports
    def snapshot(self) -> dict[str, int]:
        regs = {reg.name: self.read(reg, 4) for reg in REGISTERS
                if REGISTERS[reg].access != "W1C" and (self.montmul_pair or reg not in PAIR_REGS)}
        return regs

    def stats(self) -> dict:
        return {
            "operations": {name: count for name, count in self.operations.items()},
            "by_length": {f"{key}/{words}": count for (key, words), count in sorted(self.by_length.items())},
            "busy_cycles": self.busy_total,
            "errors": dict(self.errors),
            "log_truncated": self.log_truncated,
        }

    def summary_lines(self) -> list[tuple[str, str]]:
        total = sum(self.operations.values())
        errors = {k: v for k, v in self.errors.items() if v}
        if not total and not errors:
            return []
        kinds = []
        for command in (*COMMANDS.values(), PAIR_COMMAND):
            count = self.operations.get(command.name, 0)
            if not count:
                continue
            lengths = sorted((w, n) for (key, w), n in self.by_length.items() if key == command.key)
            if len(lengths) == 1:
                shape = f"{lengths[0][0]} words"
            else:
                shape = ", ".join(f"{w} words x{n:,}" for w, n in lengths)
            kinds.append(f"{command.name} x{count:,} ({shape})")
        elapsed = self.clock.now - self._counting_since
        share = 100 * self.busy_total / elapsed if elapsed > 0 else 0.0
        rows = [("PKA", f"{total:,} ops: {', '.join(kinds) or 'none'}; busy {self.busy_total:,} cycles ({share:.1f}%)")]
        if errors:
            rows.append(("PKA errors", ", ".join(f"{flag} x{n:,}" for flag, n in errors.items())))
        return rows
