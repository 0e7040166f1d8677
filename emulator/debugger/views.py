"""The debugger's views of the chip, as text lines: the same for the TUI's panes and
the scripted mode's output. Each takes the machine (and what it needs besides) and
reads without side effects (debug reads: no COUNTFLAG clearing, no busy errors)."""

from __future__ import annotations

from capstone import CS_ARCH_ARM, CS_MODE_MCLASS, CS_MODE_THUMB, Cs

from pkasim.base.errors import UsageError
from pkasim.core.cpu import REG_NAMES
from pkasim.core.machine import Machine
from pkasim.debugger.dwarf import DebugInfo
from pkasim.debugger.unwind import call_stack
from pkasim.peripherals.nvic import exception_name

_CS = Cs(CS_ARCH_ARM, CS_MODE_THUMB | CS_MODE_MCLASS)
REGISTER_ORDER = REG_NAMES + ["xpsr", "msp", "psp", "primask", "control"]


def xpsr_flags(xpsr: int) -> str:
    """N Z C V as letters (upper case set), the Thumb bit and the exception number."""
    flags = "".join(ch if xpsr >> bit & 1 else ch.lower() for ch, bit in (("N", 31), ("Z", 30), ("C", 29), ("V", 28)))
    exc = xpsr & 0x3F
    return f"{flags} {'T' if xpsr >> 24 & 1 else 't'} {exception_name(exc) if exc else 'Thread'}"


def registers(machine: Machine, previous: dict[str, int] | None = None) -> list[tuple[str, int, bool]]:
    """(name, value, changed since ``previous``)."""
    regs = machine.registers()
    return [(n, regs[n], previous is not None and previous.get(n) != regs[n]) for n in REGISTER_ORDER]


def register_lines(machine: Machine, previous: dict[str, int] | None = None) -> list[str]:
    rows = registers(machine, previous)
    out = []
    for i in range(0, 16, 2):
        out.append("  ".join(f"{n:>4} {v:08x}{'*' if c else ' '}" for n, v, c in rows[i:i + 2]))
    regs = dict((n, v) for n, v, _ in rows)
    out.append(f"xpsr {regs['xpsr']:08x}  {xpsr_flags(regs['xpsr'])}")
    out.append(f" msp {regs['msp']:08x}   psp {regs['psp']:08x}  primask {regs['primask'] & 1}  control {regs['control']}")
    return out


def disassembly(machine: Machine, pc: int, before: int = 4, after: int = 8) -> list[str]:
    """Instructions around ``pc`` (from a little before it, within its function)."""
    start = max(pc - 2 * before, 0)
    try:
        code = machine.read_memory(start, 2 * (before + after) + 4)
    except UsageError:
        return [f"0x{pc:08x}: <not readable>"]
    lines = []
    for insn in _CS.disasm(code, start):
        mark = "=>" if insn.address == pc else "  "
        lines.append(f"{mark} 0x{insn.address:08x} <{machine.describe(insn.address)}> {insn.mnemonic} {insn.op_str}")
        if len(lines) >= before + after:
            break
    return lines


def source(info: DebugInfo, pc: int, context: int = 4) -> list[str] | None:
    """Source lines around the line of ``pc`` (None: no line info or no file)."""
    line = info.line_at(pc)
    if line is None:
        return None
    text = info.source(line.file)
    if text is None:
        return [f"{line.file}:{line.line} (source not found)"]
    lo, hi = max(1, line.line - context), min(len(text), line.line + context)
    return [f"{'=>' if n == line.line else '  '} {n:5} {text[n - 1]}" for n in range(lo, hi + 1)]


def location(machine: Machine, info: DebugInfo, pc: int) -> str:
    line = info.line_at(pc)
    where = f" at {line.file.rsplit('/', 1)[-1]}:{line.line}" if line else ""
    return f"0x{pc:08x} in {machine.describe(pc)}{where}"


def backtrace(machine: Machine, info: DebugInfo) -> list[str]:
    out = []
    for i, frame in enumerate(call_stack(machine, info)):
        note = "  <exception entry>" if frame.exception else ""
        out.append(f"#{i:<2} {location(machine, info, frame.pc)}{note}")
    return out


def stack(machine: Machine, words: int = 8) -> list[str]:
    sp = machine.reg("sp")
    out = []
    for i in range(words):
        addr = sp + 4 * i
        try:
            value = machine.read_u32(addr)
        except UsageError:
            break
        out.append(f"{'sp' if i == 0 else '  '} 0x{addr:08x}: 0x{value:08x}  {_symbolic(machine, value)}")
    return out


def _symbolic(machine: Machine, value: int) -> str:
    name = machine.describe(value & ~1)
    return f"<{name}>" if not name.startswith("0x") else ""


def memory(machine: Machine, addr: int, count: int = 8, unit: int = 4, fmt: str = "x") -> list[str]:
    """gdb's x/: ``count`` units of ``unit`` bytes from ``addr``, in hex or decimal."""
    per_line = {1: 8, 2: 8, 4: 4, 8: 2}[unit]
    data = machine.read_memory(addr, count * unit)
    out = []
    for i in range(0, count, per_line):
        cells = []
        for j in range(i, min(count, i + per_line)):
            v = int.from_bytes(data[j * unit:(j + 1) * unit], "little")
            cells.append(f"0x{v:0{2 * unit}x}" if fmt == "x" else str(v if fmt == "u" or v < 1 << (8 * unit - 1)
                                                                          else v - (1 << 8 * unit)))
        a = addr + i * unit
        label = machine.describe(a)
        out.append(f"0x{a:08x}{'' if label.startswith('0x') else f' <{label}>'}:  " + "  ".join(cells))
    return out


def pka(machine: Machine, words_shown: int | None = None) -> list[str]:
    """The PKA's registers, its state and its operands (A, B, N, R at their pointers,
    LEN words each) as big hex integers."""
    from pkasim.peripherals.pka import ERROR_FLAGS, Pka, Reg

    dev = next((d for d in machine.peripherals.values() if isinstance(d, Pka)), None)
    if dev is None:
        return ["no PKA on this chip"]
    st = dev.state
    regs = {r: st.regs[r >> 2] for r in Reg}
    cr, length = regs[Reg.CR], regs[Reg.LEN]
    flags = [name for bit, name in ((1 << 17, "PROCENDF"),) + tuple(ERROR_FLAGS.items()) if st.flags & bit]
    state = "busy" if st.busy else "idle"
    if st.busy:
        state += f" (done at cycle {int(st.done_at if st.fast_busy else 0) or _pending_end(dev):,})"
    out = [f"PKA {state}  SR flags {' '.join(flags) or '-'}  ops {sum(dev.operations.values()):,}",
           f"CR {cr:08x} opcode {cr >> 8 & 0x3F:#04x} EN {cr & 1}  LEN {length}  CARRY {regs[Reg.CARRY]}  "
           f"LASTCYC {regs[Reg.LASTCYC]:,}"]
    words = min(length or 1, dev.max_words) if words_shown is None else words_shown
    for name, reg in (("A", Reg.APTR), ("B", Reg.BPTR), ("N", Reg.NPTR), ("R", Reg.RPTR)):
        ptr = regs[reg]
        try:
            value = dev.peek(ptr, words)
            text = f"0x{value:x}"
        except UsageError:
            text = "<outside PKA RAM>"
        out.append(f"{name} @{ptr:#06x}: {text}")
    return out


def _pending_end(dev) -> int:
    pending = getattr(dev, "_pending", None)
    return pending.start + pending.cycles if pending is not None else 0


def systick(machine: Machine) -> list[str]:
    from pkasim.peripherals.systick import SysTick

    dev = next((d for d in machine.peripherals.values() if isinstance(d, SysTick)), None)
    if dev is None:
        return ["no SysTick"]
    return [f"SysTick CSR {dev.csr:#x} ({'on' if dev.enabled else 'off'}, TICKINT {dev.csr >> 1 & 1})  "
            f"RVR {dev.rvr:,}  CVR {dev.current():,}  wraps {dev.wraps:,}"]


def nvic(machine: Machine) -> list[str]:
    n = machine.nvic
    pending = ", ".join(exception_name(e) for e in sorted(n.pending)) or "-"
    active = ", ".join(exception_name(e) for e in sorted(n.active)) or "-"
    return [f"NVIC pending {pending}  active {active}  enabled {n.enabled:#x}"]


def time_line(machine: Machine, since: int) -> str:
    hz = machine.config.core.clock_hz
    cycles = machine.cycles
    return (f"cycles {cycles:,} ({cycles - since:+,})  instructions {machine.instructions:,}  "
            f"time {cycles / hz * 1e3:.6f} ms at {hz / 1e6:g} MHz")
