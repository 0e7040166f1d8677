"""An instruction trace in the spirit of Arm's Tarmac text format.

One line per executed instruction, then one per register it wrote::

    1234 clk IT (567) 000001a4 b510 T thread : push {r4, lr}
    1234 clk R sp 20003ff0

(cycle the instruction starts at, ``IT`` = instruction taken, its number counted
from load, address, opcode, T for Thumb, ``thread`` or ``handler`` mode, disassembly).
Register values are read at the next traced instruction; when the flow left the
traced range in between, the branch's own writes are computed from the state before
it (BL/BLX: LR; POP: the popped words and SP), and other instructions show none.

The trace covers one address range (a function symbol, or START:END) and stops after
a number of instructions: it costs a Python call per traced instruction, so it is
the one output exempt from the profiler's speed target.
"""

from __future__ import annotations

from pathlib import Path

from pkasim.base.errors import UsageError
from pkasim.core.machine import Machine

DEFAULT_LIMIT = 100_000
REGS = [f"r{i}" for i in range(13)] + ["sp", "lr", "xpsr"]
_CS_NAMES = {"sb": "r9", "sl": "r10", "fp": "r11", "ip": "r12"}


def parse_range(machine: Machine, text: str) -> tuple[int, int]:
    """A function symbol, or START:END (numbers, any base Python reads)."""
    if ":" in text:
        lo, _, hi = text.partition(":")
        try:
            start, end = int(lo, 0), int(hi, 0)
        except ValueError:
            raise UsageError(f"--tarmac-range {text!r}: expected SYMBOL or START:END") from None
        if end <= start:
            raise UsageError(f"--tarmac-range {text!r}: END must be above START")
        return start & ~1, end
    sym = machine.image.symbol(text)
    return sym.address & ~1, (sym.address & ~1) + max(sym.size, 2)


class TarmacWriter:
    """Traces [begin, end) of ``machine`` while it runs; ``close()`` writes the file."""

    def __init__(self, machine: Machine, path: str | Path, begin: int, end: int, limit: int = DEFAULT_LIMIT) -> None:
        self.machine = machine
        self.path = Path(path)
        self.limit = limit
        self.lines: list[str] = []
        self.count = 0
        self.truncated = False
        import capstone  # here, not at the top: `pkasim run` without --tarmac never needs it

        self._cs_error = capstone.CsError
        self._md = capstone.Cs(capstone.CS_ARCH_ARM, capstone.CS_MODE_THUMB | capstone.CS_MODE_MCLASS)
        self._md.detail = True
        self._decoded: dict[int, tuple[str, str, str, tuple[str, ...]]] = {}
        self._pending: tuple | None = None
        self._handle = machine.on_instructions(begin, end, self._on_insn)

    def _decode(self, addr: int) -> tuple[str, str, str, tuple[str, ...]]:
        """(opcode hex, disassembly, mnemonic, registers it writes) of one instruction."""
        got = self._decoded.get(addr)
        if got is None:
            data = self.machine.read_memory(addr, 4)
            got = ("", f".hword 0x{int.from_bytes(data[:2], 'little'):04x}", "", ())
            for insn in self._md.disasm(data, addr, count=1):
                hws = [int.from_bytes(insn.bytes[i:i + 2], "little") for i in range(0, insn.size, 2)]
                try:
                    written = tuple(_CS_NAMES.get(n, n) for n in (insn.reg_name(r) for r in insn.regs_access()[1]))
                except self._cs_error:
                    written = ()
                got = ("".join(f"{h:04x}" for h in hws), f"{insn.mnemonic} {insn.op_str}".strip(), insn.mnemonic,
                       written)
            self._decoded[addr] = got
        return got

    def _registers(self) -> dict[str, int]:
        m = self.machine
        return {name: m.reg(name) for name in REGS}

    def _on_insn(self, addr: int, size: int, cycle: int, number: int) -> None:
        if self._handle is None:
            return  # removed, but Unicorn finishes the block it was in
        regs = self._registers()
        if self._pending is not None:
            self._finish(regs, number)
        if self.count >= self.limit:
            self.truncated = True
            self.machine.remove_instruction_hook(self._handle)
            self._handle = None
            return
        self.count += 1
        mode = "handler" if regs["xpsr"] & 0x3F else "thread"
        self._pending = (cycle, number, addr, size, mode, regs)

    def _finish(self, now: dict[str, int] | None, number: int | None) -> None:
        cycle, n, addr, size, mode, before = self._pending
        self._pending = None
        opcode, text, mnemonic, written = self._decode(addr)
        self.lines.append(f"{cycle} clk IT ({n}) {addr:08x} {opcode} T {mode} : {text}")
        if now is not None and number == n + 1:
            changed = [(r, now[r]) for r in REGS if now[r] != before[r]]
        else:
            changed = self._left_range(addr, size, mnemonic, written, before)
        for reg, value in changed:
            self.lines.append(f"{cycle} clk R {reg} {value:08x}")

    def _left_range(self, addr: int, size: int, mnemonic: str, written: tuple[str, ...],
                    before: dict[str, int]) -> list[tuple[str, int]]:
        """Writes of an instruction after which the trace saw other code first."""
        if mnemonic in ("bl", "blx"):
            return [("lr", (addr + size) | 1)]
        if mnemonic == "pop":
            regs = [r for r in REGS if r in written and r not in ("sp", "xpsr")]
            sp = before["sp"]
            words = self.machine.read_memory(sp, 4 * (len(regs) + ("pc" in written)))
            out = [(r, int.from_bytes(words[4 * i:4 * i + 4], "little")) for i, r in enumerate(regs)]
            return out + [("sp", sp + len(words))]
        return []

    def close(self) -> None:
        if self._pending is not None:
            self._finish(self._registers(), self.machine.instructions)
        if self._handle is not None:
            self.machine.remove_instruction_hook(self._handle)
            self._handle = None
        self.path.write_text("".join(line + "\n" for line in self.lines))
