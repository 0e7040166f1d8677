"""The cycle model: what each ARMv6-M instruction costs, as tables the C hook reads.

Costs follow ARM DDI0432C (Cortex-M0 TRM) table 3-1; SC000 is ARMv6-M with the same
pipeline, so we assume the same figures. docs/cycle-model.md lists every rule with its
source. The tables are built once per loaded image with capstone, one entry per
halfword of the code sections; the native hook (cyclehook.c) sums them per block once
and caches the block's total, so counting costs no Python call per instruction.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterable
from dataclasses import dataclass

import capstone
from capstone import arm_const as cs_arm

F_COND = 0x01
F_BRANCH = 0x02
F_IRQCHK = 0x04
F_CONDNEXT = 0x08  # B<cond> whose target is its own fall-through (taken-ness from flags)

K_NONE, K_CLOBBER, K_CONST, K_ADDI, K_ADDR, K_ACCESS = range(6)

COND_PENALTY = 2  # B<cond>: 3 cycles taken, 1 not taken (DDI0432C table 3-1)

_REGNUM = {f"r{i}": i for i in range(13)}
_REGNUM.update({"sb": 9, "sl": 10, "fp": 11, "ip": 12, "sp": 13, "lr": 14, "pc": 15})


class Desc(ctypes.Structure):
    """Mirror of pk_desc in cyclehook.c: how one instruction moves address registers."""

    _fields_ = [
        ("kind", ctypes.c_uint8),
        ("rd", ctypes.c_int8),
        ("rn", ctypes.c_int8),
        ("rm", ctypes.c_int8),
        ("imm", ctypes.c_int32),
        ("wmask", ctypes.c_uint16),
        ("amask", ctypes.c_uint8),
        ("pad", ctypes.c_uint8),
    ]


@dataclass(frozen=True)
class CostRules:
    """The core options that change instruction costs."""

    muls_cycles: int = 1
    flash_wait_states: int = 0
    flash_base: int = 0
    flash_end: int = 0


def _new_disassembler() -> capstone.Cs:
    md = capstone.Cs(capstone.CS_ARCH_ARM, capstone.CS_MODE_THUMB | capstone.CS_MODE_MCLASS)
    md.detail = True
    return md


def _regs(insn: capstone.CsInsn) -> list[int]:
    return [_REGNUM[insn.reg_name(op.reg)] for op in insn.operands if op.type == cs_arm.ARM_OP_REG]


def base_cost(insn: capstone.CsInsn, muls_cycles: int) -> tuple[int, int]:
    """Cycles and flow flags of one instruction at zero wait states (table 3-1)."""
    hw = int.from_bytes(insn.bytes[:2], "little")
    m = insn.mnemonic
    if insn.size == 4:
        if m == "bl":
            return 4, F_BRANCH
        if m in ("msr", "mrs"):
            return 4, F_IRQCHK if m == "msr" else 0
        if m in ("dmb", "dsb", "isb"):
            return 4, 0
        return 1, 0  # not an ARMv6-M instruction: Unicorn raises UNDEFINED before it counts
    if 0xD000 <= hw <= 0xDDFF:  # B<cond> T1; bits 7:4 of the flags keep the condition
        cond = (hw >> 8) & 0xF
        flags = F_COND | F_BRANCH | (cond << 4)
        if hw & 0xFF == 0xFF:  # offset -2: the target is the next instruction
            flags |= F_CONDNEXT
        return 3, flags
    if 0xE000 <= hw <= 0xE7FF:  # B T2
        return 3, F_BRANCH
    if (hw & 0xFF80) == 0x4700:  # BX
        return 3, F_BRANCH
    if (hw & 0xFF80) == 0x4780:  # BLX register
        return 3, F_BRANCH
    if (hw & 0xFF00) in (0x4400, 0x4600) and (hw & 0x87) == 0x87:  # ADD/MOV with Rd = PC
        return 3, F_BRANCH
    if m in ("ldm", "ldmia", "stm", "stmia", "push"):
        return 1 + len(_regs(insn)) - (1 if m in ("ldm", "ldmia", "stm", "stmia") else 0), 0
    if m == "pop":
        regs = _regs(insn)
        if 15 in regs:  # POP {..., pc}: 4 + N, N = registers other than PC
            return 4 + len(regs) - 1, F_BRANCH
        return 1 + len(regs), 0
    if m.startswith(("ldr", "str")):
        return 2, 0
    if m == "muls":
        return muls_cycles, 0
    if m in ("wfi", "wfe"):
        return 2, 0
    if m == "cpsie":
        return 1, F_IRQCHK
    return 1, 0


def _fetches(addr: int, size: int) -> int:
    """32-bit fetches a sequentially reached instruction adds (fetch-word rule)."""
    return 1 if (addr & 2) == 0 or size == 4 else 0


def describe(insn: capstone.CsInsn, image: ImageBytes) -> Desc:
    """How the instruction computes or uses an address register (alignment checks)."""
    d = Desc(kind=K_CLOBBER, rd=-1, rn=-1, rm=-1, imm=0, wmask=0, amask=0)
    try:
        _, written = insn.regs_access()
    except capstone.CsError:
        written = []
    for reg in written:
        name = insn.reg_name(reg)
        if name in _REGNUM:
            d.wmask |= 1 << _REGNUM[name]
    m = insn.mnemonic
    ops = insn.operands
    regs = _regs(insn)
    imms = [op.imm for op in ops if op.type == cs_arm.ARM_OP_IMM]
    if m in ("movs", "mov") and len(ops) == 2 and ops[1].type == cs_arm.ARM_OP_IMM:
        d.kind, d.rd, d.imm = K_CONST, regs[0], imms[0] & 0xFFFFFFFF
    elif m in ("movs", "mov") and len(regs) == 2 and regs[0] != 15:
        d.kind, d.rd, d.rn, d.imm = K_ADDI, regs[0], regs[1], 0
    elif m in ("adds", "subs", "add", "sub") and imms and len(regs) in (1, 2) and 15 not in regs:
        rn = regs[1] if len(regs) == 2 else regs[0]
        d.kind, d.rd, d.rn = K_ADDI, regs[0], rn
        d.imm = imms[0] if m.startswith("add") else -imms[0]
    elif m in ("adr",) or (m == "add" and 15 in regs[1:] and imms):
        d.kind, d.rd = K_CONST, regs[0]
        d.imm = (((insn.address + 4) & ~3) + imms[0]) & 0xFFFFFFFF
    elif m in ("adds", "add") and not imms and len(regs) in (2, 3) and 15 not in regs:
        rn, rm = (regs[1], regs[2]) if len(regs) == 3 else (regs[0], regs[1])
        d.kind, d.rd, d.rn, d.rm = K_ADDR, regs[0], rn, rm
    elif m.startswith(("ldr", "str")) and any(op.type == cs_arm.ARM_OP_MEM for op in ops):
        mem = next(op.mem for op in ops if op.type == cs_arm.ARM_OP_MEM)
        base = _REGNUM[insn.reg_name(mem.base)]
        index = _REGNUM[insn.reg_name(mem.index)] if mem.index else -1
        if base == 15 and m == "ldr":
            lit = ((insn.address + 4) & ~3) + mem.disp
            value = image.word(lit)
            if value is not None:
                d.kind, d.rd, d.imm = K_CONST, regs[0], value
            d.wmask = 1 << regs[0]
            return d
        size = 1 if m in ("ldrb", "strb", "ldrsb") else 2 if m in ("ldrh", "strh", "ldrsh") else 4
        if base != 13 and size > 1:
            d.kind, d.rn, d.rm, d.imm, d.amask = K_ACCESS, base, index, mem.disp, size - 1
        else:
            d.kind = K_NONE
    elif m in ("ldm", "ldmia", "stm", "stmia"):
        d.kind, d.rn, d.rm, d.imm, d.amask = K_ACCESS, regs[0], -1, 0, 3
    return d


class ImageBytes:
    """The loaded image's bytes by address, for literal pools."""

    def __init__(self, chunks: Iterable[tuple[int, bytes]]) -> None:
        self.chunks = sorted(chunks)

    def word(self, addr: int) -> int | None:
        for base, data in self.chunks:
            if base <= addr and addr + 4 <= base + len(data):
                return int.from_bytes(data[addr - base : addr - base + 4], "little")
        return None


class CostTables:
    """Per-halfword tables over the flash region, in memory the C hook reads."""

    def __init__(self, base: int, size: int) -> None:
        self.base = base
        self.halfwords = size // 2
        n = self.halfwords
        self.cost = (ctypes.c_uint8 * n)()
        self.length = (ctypes.c_uint8 * n)()
        self.flags = (ctypes.c_uint8 * n)()
        self.desc = (Desc * n)()

    def fill(self, code: list[tuple[int, bytes]], image: ImageBytes, rules: CostRules) -> int:
        """Decode each code range linearly (as the mapping symbols delimit them)."""
        md = _new_disassembler()
        count = 0
        for start, data in code:
            addr = start
            while addr < start + len(data):
                off = addr - start
                decoded = False
                for insn in md.disasm(data[off:], addr):
                    self._set(insn, image, rules)
                    count += 1
                    addr = insn.address + insn.size
                    decoded = True
                if addr < start + len(data):
                    addr += 2  # undecodable halfword (data in code): skip it
                if not decoded and addr >= start + len(data):
                    break
        return count

    def _set(self, insn: capstone.CsInsn, image: ImageBytes, rules: CostRules) -> None:
        h = (insn.address - self.base) >> 1
        if not 0 <= h < self.halfwords:
            return
        cost, flags = base_cost(insn, rules.muls_cycles)
        if rules.flash_wait_states and rules.flash_base <= insn.address < rules.flash_end:
            cost += rules.flash_wait_states * _fetches(insn.address, insn.size)
        self.cost[h] = min(cost, 255)
        self.length[h] = insn.size // 2
        self.flags[h] = flags
        self.desc[h] = describe(insn, image)


def block_cost(data: bytes, addr: int, rules: CostRules) -> tuple[int, int, int]:
    """Cycles, instructions and last-instruction flags of code outside the tables."""
    md = _new_disassembler()
    cost = insns = flags = 0
    for insn in md.disasm(data, addr):
        c, flags = base_cost(insn, rules.muls_cycles)
        if rules.flash_wait_states and rules.flash_base <= insn.address < rules.flash_end:
            c += rules.flash_wait_states * _fetches(insn.address, insn.size)
        cost += c
        insns += 1
    return cost, insns, flags


def one_instruction_cost(data: bytes, addr: int, rules: CostRules) -> tuple[int, int]:
    """Cycles and size in bytes of the single instruction at ``addr``."""
    md = _new_disassembler()
    for insn in md.disasm(data, addr, count=1):
        cost, _ = base_cost(insn, rules.muls_cycles)
        if rules.flash_wait_states and rules.flash_base <= insn.address < rules.flash_end:
            cost += rules.flash_wait_states * _fetches(insn.address, insn.size)
        return cost, insn.size
    return 1, 2


# What an idle loop may contain (emulator/idle.c): instructions that read memory or
# registers and compute, and branches. Nothing that stores, calls, changes the
# exception state or talks to a debugger.
_IDLE_OK = {
    "ldr", "ldrb", "ldrh", "ldrsb", "ldrsh", "ldm", "ldmia", "mov", "movs", "mvns", "add", "adds", "adcs", "sub",
    "subs", "sbcs", "rsbs", "muls", "cmp", "cmn", "tst", "ands", "orrs", "eors", "bics", "lsls", "lsrs", "asrs",
    "rors", "uxtb", "uxth", "sxtb", "sxth", "rev", "rev16", "revsh", "adr", "nop", "b",
}


def loop_can_idle(code: bytes, addr: int) -> bool:
    """Whether a self-loop block can change nothing but its own registers."""
    md = _new_disassembler()
    seen = 0
    for insn in md.disasm(code, addr):
        base = insn.mnemonic.split(".")[0]
        if base not in _IDLE_OK and not (base.startswith("b") and len(base) == 3 and base != "blx"):
            return False
        seen += insn.size
    return seen == len(code)


def disassemble_one(data: bytes, addr: int) -> str:
    """One instruction as text, for reports and the debugger."""
    md = capstone.Cs(capstone.CS_ARCH_ARM, capstone.CS_MODE_THUMB | capstone.CS_MODE_MCLASS)
    for insn in md.disasm(data, addr, count=1):
        return f"{insn.mnemonic} {insn.op_str}".strip()
    return f".hword 0x{int.from_bytes(data[:2], 'little'):04x}"
