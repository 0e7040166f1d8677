"""Generated ARMv6-M programs for the alignment rule: a register gets its value inside a
basic block, in one of the ways the instruction set allows, and the same block then
uses it as the address of a word or halfword access (or as the stack pointer).

Each case is a pair of blocks: a setup block loads the registers the case needs (and
presets memory and the carry flag), then branches to the body, so every value the body
computes is produced inside the body's own block. The body is the producing
instructions, then the access, then ``mov r7, sp`` and a branch back to the harness.

All cases go into ONE image (``build_image``). Its harness runs them in order; a
HardFault handler records the stacked PC and returns to the harness, so one run
covers every case on pkasim and on QEMU alike. For each case the image prints one
line, ``<stacked PC of the HardFault, or 00000000> <SP & 3 after the body>``, in
order, then exits 0. ``expected_lines`` gives what an ARMv6-M core prints: a fault
exactly when the access address is not a multiple of the access size, and SP always
word aligned (the core keeps SP bits [1:0] zero, ARMv6-M ARM B1.4.1; QEMU does too).

Registers in a body: r0 = BUF (a word-aligned RAM buffer, the base of the index forms),
r3 = the produced value, r4 = the data of loads and stores, r6 = an index that adds
the misalignment when the producer can only make aligned values, r1 r2 r5 r8 r9 = the
producer's inputs, r7 = scratch of the harness.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

BUF = 0x20001000  # targets of the accesses
CELL = 0x20002000  # memory the producers load pointers from
SPBUF = 0x20003000  # where the stack-pointer cases point SP
STACK_TOP = 0x20003F00  # below the top of RAM, so SP + 8 is still memory
SYST_RVR = 0xE000E014  # SysTick reload value: a peripheral register a producer reads (24 bits)
M32 = 0xFFFFFFFF


def _bswap32(v: int) -> int:
    return int.from_bytes(v.to_bytes(4, "little"), "big")


def _rol(v: int, n: int) -> int:
    return ((v << n) | (v >> (32 - n))) & M32


def _sext(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


@dataclass(frozen=True)
class Made:
    """How a producer makes a value: registers loaded by the setup block, memory it
    presets (address -> word), the carry flag at the body's entry, and the body."""

    regs: dict[str, int]
    body: tuple[str, ...]
    memory: dict[int, int] = field(default_factory=dict)
    carry: int | None = None
    push: int | None = None  # a word the setup block pushes (the body pops it)
    rvr: int | None = None  # SysTick RVR preset (the body reads it back)
    data: tuple[str, ...] = ()  # words placed after the case, at label {data}


@dataclass(frozen=True)
class Producer:
    """One way a register gets its value inside a block. ``make(T)`` returns the
    setup and body that leave T in r3, or None when this instruction cannot make T.
    ``kind``: "any" (any 32-bit value; used as a base address), "small" (values
    below 0x100 at least; used as an index), "aligned" (only word-aligned addresses:
    the misalignment comes from r6)."""

    name: str
    kind: str
    make: Callable[[int], Made | None]


def _any(name: str, make: Callable[[int], Made | None]) -> Producer:
    return Producer(name, "any", make)


def _small(name: str, make: Callable[[int], Made | None]) -> Producer:
    return Producer(name, "small", make)


INV3 = pow(3, -1, 1 << 32)
PRODUCERS: list[Producer] = [
    # moves
    _small("movs_imm", lambda t: Made({}, (f"movs r3, #{t}",)) if t < 256 else None),
    _any("movs_reg", lambda t: Made({"r2": t}, ("movs r3, r2",))),
    _any("mov_lo", lambda t: Made({"r2": t}, ("mov r3, r2",))),
    _any("mov_hi", lambda t: Made({"r2": t}, ("mov r8, r2", "mov r3, r8"))),
    # add and subtract
    _any("adds_reg", lambda t: Made({"r1": (t - 0x1234) & M32, "r2": 0x1234}, ("adds r3, r1, r2",))),
    _any("adds_imm3", lambda t: Made({"r1": (t - 5) & M32}, ("adds r3, r1, #5",))),
    _any("adds_imm8", lambda t: Made({"r3": (t - 200) & M32}, ("adds r3, #200",))),
    _any("subs_reg", lambda t: Made({"r1": (t + 0x1234) & M32, "r2": 0x1234}, ("subs r3, r1, r2",))),
    _any("subs_imm3", lambda t: Made({"r1": (t + 5) & M32}, ("subs r3, r1, #5",))),
    _any("subs_imm8", lambda t: Made({"r3": (t + 200) & M32}, ("subs r3, #200",))),
    _any("add_hi", lambda t: Made({"r3": (t - 0x777) & M32, "r8": 0x777}, ("add r3, r8",))),
    _any("adcs_carry_in", lambda t: Made({"r3": (t - 0x10 - 1) & M32, "r2": 0x10}, ("adcs r3, r2",), carry=1)),
    _any("adcs_no_carry", lambda t: Made({"r3": (t - 0x10) & M32, "r2": 0x10}, ("adcs r3, r2",), carry=0)),
    # carry made in the body by ADDS (0xFFFFFFF0 + 0x20 carries), then ADCS
    _any("adcs_after_adds", lambda t: Made({"r1": 0xFFFFFFF0, "r2": 0x20, "r3": (t - 0x30 - 1) & M32, "r5": 0x30},
                                           ("adds r1, r1, r2", "adcs r3, r5"), carry=0)),
    _any("sbcs_carry_in", lambda t: Made({"r3": (t + 0x10) & M32, "r2": 0x10}, ("sbcs r3, r2",), carry=1)),
    _any("sbcs_no_carry", lambda t: Made({"r3": (t + 0x10 + 1) & M32, "r2": 0x10}, ("sbcs r3, r2",), carry=0)),
    # borrow made in the body by SUBS (1 - 2 borrows: C = 0), then SBCS
    _any("sbcs_after_subs", lambda t: Made({"r1": 1, "r2": 2, "r3": (t + 0x30 + 1) & M32, "r5": 0x30},
                                           ("subs r1, r1, r2", "sbcs r3, r5"), carry=1)),
    _any("rsbs", lambda t: Made({"r2": -t & M32}, ("rsbs r3, r2, #0",))),
    _any("muls", lambda t: Made({"r3": t * INV3 & M32, "r2": 3}, ("muls r3, r2, r3",))),
    # logic
    _any("ands", lambda t: Made({"r3": t | 0x40000000, "r2": ~0x40000000 & M32}, ("ands r3, r2",))
         if not t & 0x40000000 else None),
    _any("orrs", lambda t: Made({"r3": t & 0xFFFF0000, "r2": t & 0xFFFF}, ("orrs r3, r2",))),
    _any("eors", lambda t: Made({"r3": t ^ 0x5A5A5A5A, "r2": 0x5A5A5A5A}, ("eors r3, r2",))),
    _any("bics", lambda t: Made({"r3": t | 0x40000000, "r2": 0x40000000}, ("bics r3, r2",))
         if not t & 0x40000000 else None),
    _any("mvns", lambda t: Made({"r2": ~t & M32}, ("mvns r3, r2",))),
    # shifts and rotates
    _any("lsls_imm", lambda t: Made({"r2": t >> 1}, ("lsls r3, r2, #1",)) if not t & 1 else None),
    _any("lsrs_imm", lambda t: Made({"r2": t << 2 & M32}, ("lsrs r3, r2, #2",)) if t < 1 << 30 else None),
    _any("asrs_imm", lambda t: Made({"r2": t << 1 & M32}, ("asrs r3, r2, #1",)) if t < 1 << 30 else None),
    _any("lsls_reg", lambda t: Made({"r3": t >> 1, "r2": 1}, ("lsls r3, r2",)) if not t & 1 else None),
    _any("lsrs_reg", lambda t: Made({"r3": t << 2 & M32, "r2": 2}, ("lsrs r3, r2",)) if t < 1 << 30 else None),
    _any("asrs_reg", lambda t: Made({"r3": t << 1 & M32, "r2": 1}, ("asrs r3, r2",)) if t < 1 << 30 else None),
    _any("rors_reg", lambda t: Made({"r3": _rol(t, 8), "r2": 8}, ("rors r3, r2",))),
    # extends and byte reversals
    _small("sxth", lambda t: Made({"r2": 0xABCD0000 | t}, ("sxth r3, r2",)) if t < 0x8000 else None),
    _small("sxtb", lambda t: Made({"r2": 0x12345600 | t}, ("sxtb r3, r2",)) if t < 0x80 else None),
    _small("uxth", lambda t: Made({"r2": 0xFFFF0000 | t}, ("uxth r3, r2",)) if t < 0x10000 else None),
    _small("uxtb", lambda t: Made({"r2": 0xFFFFFF00 | t}, ("uxtb r3, r2",)) if t < 0x100 else None),
    _any("rev", lambda t: Made({"r2": _bswap32(t)}, ("rev r3, r2",))),
    _any("rev16", lambda t: Made({"r2": ((t & 0x00FF00FF) << 8 | (t >> 8) & 0x00FF00FF) & M32}, ("rev16 r3, r2",))),
    _small("revsh", lambda t: Made({"r2": 0xFFFF0000 | (t & 0xFF) << 8 | t >> 8}, ("revsh r3, r2",))
           if t < 0x80 else None),
    # address arithmetic on PC and SP: always word aligned, r6 adds the misalignment
    Producer("adr", "aligned", lambda t: Made({}, ("adr r3, {data}",), data=(".word 0",))),
    Producer("add_sp_imm", "aligned", lambda t: Made({}, ("add r3, sp, #8",))),
    Producer("mrs_msp", "aligned", lambda t: Made({}, ("mrs r3, msp",))),
    # loads
    _any("ldr_literal", lambda t: Made({}, (f"ldr r3, =0x{t:08x}",))),
    _any("ldr_imm_flash", lambda t: Made({}, ("ldr r1, ={data}", "ldr r3, [r1]"), data=(f".word 0x{t:08x}",))),
    _any("ldr_imm_ram", lambda t: Made({"r1": CELL - 8}, ("ldr r3, [r1, #8]",), memory={CELL: t})),
    _any("ldr_reg", lambda t: Made({"r1": CELL - 8, "r2": 12}, ("ldr r3, [r1, r2]",), memory={CELL + 4: t})),
    _any("ldr_sp", lambda t: Made({}, ("ldr r3, [sp, #0]",), push=t)),
    _any("ldr_after_str", lambda t: Made({"r1": CELL, "r2": t}, ("str r2, [r1, #4]", "ldr r3, [r1, #4]"),
                                         memory={CELL + 4: 0x20001004})),
    _any("ldr_after_strh", lambda t: Made({"r1": CELL, "r2": t & 0xFFFF}, ("strh r2, [r1, #4]", "ldr r3, [r1, #4]"),
                                          memory={CELL + 4: t & 0xFFFF0000 | 0x3C3C})),
    _any("ldr_after_strb", lambda t: Made({"r1": CELL, "r2": t >> 8 & 0xFF}, ("strb r2, [r1, #5]", "ldr r3, [r1, #4]"),
                                          memory={CELL + 4: t & 0xFFFF00FF | 0x7700})),
    _any("ldr_after_push", lambda t: Made({"r2": t}, ("push {r2}", "ldr r3, [sp, #0]"))),
    # stored through one register, loaded back through another that points to the same word
    _any("ldr_after_str_elsewhere", lambda t: Made({"r5": CELL + 8, "r1": CELL + 4, "r2": t},
                                                   ("str r2, [r5, #0]", "ldr r3, [r1, #4]"),
                                                   memory={CELL + 8: 0x20001004})),
    _small("ldrh", lambda t: Made({"r1": CELL}, ("ldrh r3, [r1, #2]",), memory={CELL: t << 16 | 0xFFFF})
           if t < 0x10000 else None),
    _small("ldrsh", lambda t: Made({"r1": CELL, "r2": 2}, ("ldrsh r3, [r1, r2]",), memory={CELL: t << 16 | 0xFFFF})
           if t < 0x8000 else None),
    _small("ldrb", lambda t: Made({"r1": CELL}, ("ldrb r3, [r1, #1]",), memory={CELL: t << 8 | 0xFF00FF})
           if t < 0x100 else None),
    _small("ldrsb", lambda t: Made({"r1": CELL, "r2": 1}, ("ldrsb r3, [r1, r2]",), memory={CELL: t << 8 | 0xFF00FF})
           if t < 0x80 else None),
    _any("pop", lambda t: Made({}, ("pop {r3}",), push=t)),
    _any("push_pop", lambda t: Made({"r2": t}, ("push {r2}", "pop {r3}"))),
    _any("ldm_one", lambda t: Made({"r1": CELL}, ("ldm r1!, {r3}",), memory={CELL: t})),
    _any("ldm_two", lambda t: Made({"r1": CELL}, ("ldm r1, {r1, r3}",), memory={CELL: 7, CELL + 4: t})),
    _any("ldm_after_stm", lambda t: Made({"r1": CELL, "r2": 5, "r5": t}, ("stm r1!, {r2, r5}", "subs r1, #8",
                                                                          "ldm r1!, {r2, r3}"))),
    # chains: a loaded pointer moved on, a computed one loaded through
    _any("ldr_then_adds", lambda t: Made({"r1": CELL}, ("ldr r3, [r1]", "adds r3, #3"), memory={CELL: (t - 3) & M32})),
    _any("eors_then_ldr", lambda t: Made({"r1": CELL ^ 0x1111, "r2": 0x1111}, ("eors r1, r2", "ldr r3, [r1, #4]"),
                                         memory={CELL + 4: t})),
    _any("muls_then_adds", lambda t: Made({"r3": 0x10, "r2": 4, "r5": (t - 0x40) & M32},
                                          ("muls r3, r2, r3", "adds r3, r3, r5"))),
    _any("lsrs_orrs_adds", lambda t: Made({"r1": 0x80, "r2": 0, "r3": (t - 0x20) & M32},
                                          ("lsrs r1, r1, #2", "orrs r2, r1", "adds r3, r3, r2"))),
    # a peripheral register (SysTick RVR, 24 bits) read in the block
    _small("ldr_mmio", lambda t: Made({"r1": SYST_RVR}, ("ldr r3, [r1]",), rvr=t) if t < 1 << 24 else None),
]


@dataclass(frozen=True)
class Consumer:
    """How the body uses r3: ``form`` "base" (r3 is the address, plus ``imm``),
    "index" (the address is BUF + r3), "reg_r6" (r3 + r6) or "sp" (r3 goes to SP)."""

    name: str
    form: str
    lines: tuple[str, ...]
    size: int
    imm: int = 0


CONSUMERS: list[Consumer] = [
    Consumer("ldr", "base", ("ldr r4, [r3]",), 4),
    Consumer("ldr_imm", "base", ("ldr r4, [r3, #4]",), 4, 4),
    Consumer("str", "base", ("str r4, [r3]",), 4),
    Consumer("str_imm", "base", ("str r4, [r3, #8]",), 4, 8),
    Consumer("ldrh", "base", ("ldrh r4, [r3]",), 2),
    Consumer("ldrh_imm", "base", ("ldrh r4, [r3, #2]",), 2, 2),
    Consumer("strh", "base", ("strh r4, [r3]",), 2),
    Consumer("ldrsh", "base", ("ldrsh r4, [r3, r6]",), 2),  # r6 = 0 in the base forms
    Consumer("ldrb", "base", ("ldrb r4, [r3]",), 1),
    Consumer("strb", "base", ("strb r4, [r3]",), 1),
    Consumer("ldm", "base", ("ldm r3!, {r4}",), 4),
    Consumer("ldm_two", "base", ("ldm r3, {r3, r4}",), 4),
    Consumer("stm", "base", ("stm r3!, {r4}",), 4),
    Consumer("stm_two", "base", ("stm r3!, {r4, r5}",), 4),
    Consumer("ldr_index", "index", ("ldr r4, [r0, r3]",), 4),
    Consumer("str_index", "index", ("str r4, [r0, r3]",), 4),
    Consumer("ldrh_index", "index", ("ldrh r4, [r0, r3]",), 2),
    Consumer("strh_index", "index", ("strh r4, [r0, r3]",), 2),
    Consumer("ldrsh_index", "index", ("ldrsh r4, [r0, r3]",), 2),
    Consumer("ldr_r6", "reg_r6", ("ldr r4, [r3, r6]",), 4),
    Consumer("ldrh_r6", "reg_r6", ("ldrh r4, [r3, r6]",), 2),
    Consumer("mov_sp_push", "sp", ("mov sp, r3", "push {r4}"), 4),
    Consumer("mov_sp_pop", "sp", ("mov sp, r3", "pop {r4}"), 4),
    Consumer("mov_sp_ldr", "sp", ("mov sp, r3", "ldr r4, [sp, #4]"), 4),
    Consumer("mov_sp_str", "sp", ("mov sp, r3", "str r4, [sp, #4]"), 4),
    Consumer("msr_msp_push", "sp", ("msr msp, r3", "push {r4}"), 4),
]


@dataclass(frozen=True)
class Case:
    index: int
    producer: Producer
    consumer: Consumer
    delta: int  # the access's offset from an aligned place
    value: int  # what the producer leaves in r3
    r6: int  # the extra index of the reg_r6 form
    made: Made
    faults: bool  # what an ARMv6-M core does

    @property
    def name(self) -> str:
        return f"{self.producer.name}/{self.consumer.name}/+{self.delta}"


def _pairs(p: Producer) -> list[Consumer]:
    if p.kind == "aligned":
        return [c for c in CONSUMERS if c.form == "reg_r6"]
    if p.kind == "small":
        return [c for c in CONSUMERS if c.form == "index"]
    return [c for c in CONSUMERS if c.form in ("base", "sp")]


def _target(c: Consumer, delta: int) -> tuple[int, int]:
    """(value for r3, r6) putting the access at offset ``delta`` from an aligned place."""
    if c.form == "base":
        return BUF + 0x40 + delta, 0
    if c.form == "index":
        return 0x40 + delta, 0
    if c.form == "reg_r6":
        return 0, delta  # the producer's own (aligned) value; r6 misaligns it
    return SPBUF + delta, 0  # sp


def build_cases() -> list[Case]:
    """Every producer with every consumer it fits, once misaligned (the first of
    offsets 1, 2, 3 the producer can make and the access does not allow) and once
    aligned (offset 0)."""
    cases: list[Case] = []
    for p in PRODUCERS:
        for c in _pairs(p):
            for aligned in (False, True):
                offsets = (0,) if aligned else (1, 2, 3)
                for delta in offsets:
                    value, r6 = _target(c, delta)
                    made = p.make(value)
                    if made is None:
                        continue
                    addr_off = delta + c.imm
                    faults = c.form != "sp" and addr_off % c.size != 0
                    if not aligned and not faults and c.form != "sp":
                        continue  # this offset is allowed for this size: try the next
                    cases.append(Case(len(cases), p, c, delta, value, r6, made, faults))
                    break
    return cases


def _asm_case(case: Case) -> list[str]:
    m = case.made
    n = case.index
    out = ["    .thumb_func", f"case_{n}:"]
    if m.rvr is not None:
        out += [f"    ldr r1, =0x{SYST_RVR:08x}", f"    ldr r2, =0x{m.rvr:08x}", "    str r2, [r1]"]
    for addr, word in sorted(m.memory.items()):
        out += [f"    ldr r1, =0x{addr:08x}", f"    ldr r2, =0x{word:08x}", "    str r2, [r1]"]
    if m.push is not None:
        out += [f"    ldr r2, =0x{m.push:08x}", "    push {r2}"]
    regs = {"r0": BUF, "r4": 0xC0DE0000 | n, "r5": 0, "r6": case.r6, **m.regs}
    for hi in ("r8", "r9"):
        if hi in regs:
            out += [f"    ldr r2, =0x{regs.pop(hi):08x}", f"    mov {hi}, r2"]
    for reg, value in sorted(regs.items()):
        out.append(f"    ldr {reg}, =0x{value & M32:08x}")
    if m.carry is not None:
        out += ["    movs r7, #0", f"    cmp r7, #{0 if m.carry else 1}"]  # 0 - 0: C = 1; 0 - 1: C = 0
    out += [f"    b case_{n}_body", f"case_{n}_body:"]
    data = f"case_{n}_data"
    out += [f"    {line.replace('{data}', data)}" for line in m.body]
    out.append(f"case_{n}_access:")
    out += [f"    {line}" for line in case.consumer.lines]
    out += ["    mov r7, sp", "    bl case_pass", "    .ltorg"]
    if m.data:
        out += ["    .balign 4", f"{data}:"] + [f"    {line}" for line in m.data]
    out.append("")
    return out


HARNESS_HEAD = f"""
    .syntax unified
    .cpu cortex-m0
    .thumb
    .section .vectors, "a"
    .word 0x{STACK_TOP:08x}
    .word reset
    .word nmi
    .word hardfault

    .text
    .global reset
    .thumb_func
reset:
    ldr r0, =case_index
    movs r1, #0
    str r1, [r0]
next_case:
    ldr r0, =0x{STACK_TOP:08x}
    mov sp, r0
    ldr r0, =case_index
    ldr r1, [r0]
    ldr r2, =ncases
    ldr r2, [r2]
    cmp r1, r2
    bhs all_done
    ldr r2, =fault_pc
    movs r3, #0
    str r3, [r2]
    ldr r2, =sp_after
    str r3, [r2]
    ldr r2, =case_table
    lsls r3, r1, #2
    ldr r2, [r2, r3]
    bx r2
case_pass:
    ldr r2, =sp_after
    str r7, [r2]
case_done:
    ldr r0, =0x{STACK_TOP:08x}
    mov sp, r0
    ldr r0, =fault_pc
    ldr r4, [r0]
    bl put_hex
    movs r0, #32
    bl put_char
    ldr r0, =sp_after
    ldr r0, [r0]
    movs r1, #3
    ands r0, r1
    adds r0, #48
    bl put_char
    movs r0, #10
    bl put_char
    bl flush
    ldr r0, =case_index
    ldr r1, [r0]
    adds r1, #1
    str r1, [r0]
    b next_case
all_done:
    ldr r1, =exit_block
    ldr r2, =0x20026
    str r2, [r1]
    movs r2, #0
    str r2, [r1, #4]
    movs r0, #0x20
    bkpt 0xab
    movs r0, #0x18
    ldr r1, =0x20026
    bkpt 0xab
1:  b 1b

@ put_hex: r4 -> 8 hex digits into the line buffer
    .thumb_func
put_hex:
    push {{r4, r5, lr}}
    movs r5, #8
2:  lsrs r0, r4, #28
    cmp r0, #10
    blo 3f
    adds r0, #39
3:  adds r0, #48
    bl put_char
    lsls r4, r4, #4
    subs r5, #1
    bne 2b
    pop {{r4, r5, pc}}

@ put_char: r0 -> the line buffer
    .thumb_func
put_char:
    ldr r1, =line_len
    ldr r2, [r1]
    ldr r3, =line_buf
    strb r0, [r3, r2]
    adds r2, #1
    str r2, [r1]
    bx lr

@ flush: SYS_WRITE0 of the line buffer
    .thumb_func
flush:
    ldr r1, =line_len
    ldr r2, [r1]
    movs r0, #0
    str r0, [r1]
    ldr r1, =line_buf
    strb r0, [r1, r2]
    movs r0, #4
    bkpt 0xab
    bx lr

@ HardFault: record the stacked PC, return to the harness in Thread mode
    .thumb_func
hardfault:
    mov r0, sp
    ldr r1, [r0, #24]
    ldr r2, =fault_pc
    str r1, [r2]
    ldr r1, =case_done
    str r1, [r0, #24]
    ldr r1, =0x01000000
    str r1, [r0, #28]
    bx lr

    .thumb_func
nmi:
    b nmi
    .ltorg
"""


def image_source(cases: list[Case]) -> str:
    lines = [HARNESS_HEAD]
    for case in cases:
        lines += _asm_case(case)
    lines += ["    .section .rodata", "    .balign 4", "ncases:", f"    .word {len(cases)}", "case_table:"]
    lines += [f"    .word case_{c.index}" for c in cases]
    lines += ["    .bss", "    .balign 4", "case_index: .space 4", "fault_pc: .space 4", "sp_after: .space 4",
              "line_len: .space 4", "exit_block: .space 8", "line_buf: .space 32", ""]
    return "\n".join(lines)


LINKER_SCRIPT = """
MEMORY { FLASH (rx) : ORIGIN = 0, LENGTH = 256K  RAM (rwx) : ORIGIN = 0x20000000, LENGTH = 4K }
ENTRY(reset)
SECTIONS
{
    .text 0 : { KEEP(*(.vectors)) *(.text*) *(.rodata*) } > FLASH
    .bss (NOLOAD) : { *(.bss*) } > RAM
}
"""


def assembler() -> list[str] | None:
    """The firmware's default compiler (zig's clang from the ziglang package), else
    GNU arm-none-eabi-gcc; None when neither is there."""
    try:
        import ziglang  # noqa: F401
        return [sys.executable, "-m", "ziglang", "cc", "-target", "thumb-freestanding-eabi", "-mcpu=cortex_m0"]
    except ImportError:
        gcc = shutil.which("arm-none-eabi-gcc")
        return [gcc, "-mcpu=cortex-m0", "-mthumb"] if gcc else None


# The start of a bare image whose reset handler follows (label ``reset``): the vector
# table's SP and reset entries, then the code.
BARE_START = """
    .syntax unified
    .cpu cortex-m0
    .thumb
    .section .vectors, "a"
    .word 0x20001000
    .word reset
    .text
    .thumb_func
reset:
"""


def assemble_or_skip(source: str, directory: Path, name: str) -> Path:
    """assemble(), or the test skipped (saying why) where no ARM assembler is installed."""
    if assembler() is None:
        import pytest
        pytest.skip("no ARM assembler (pip package ziglang, or arm-none-eabi-gcc)")
    return assemble(source, directory, name)


def assemble(source: str, directory: Path, name: str) -> Path:
    """Assemble and link a bare image (LINKER_SCRIPT's map) into directory/name.elf."""
    cc = assembler()
    if cc is None:
        raise RuntimeError("no ARM assembler: neither the ziglang package nor arm-none-eabi-gcc is installed")
    src = directory / f"{name}.S"
    src.write_text(source)
    ld = directory / f"{name}.ld"
    ld.write_text(LINKER_SCRIPT)
    elf = directory / f"{name}.elf"
    subprocess.run([*cc, "-nostdlib", "-T", str(ld), str(src), "-o", str(elf)], check=True, capture_output=True)
    return elf


def build_image(cases: list[Case], directory: Path) -> Path:
    """Assemble and link the cases into directory/unaligned.elf."""
    return assemble(image_source(cases), directory, "unaligned")


def expected_lines(cases: list[Case], access_address: Callable[[Case], int]) -> list[str]:
    """What an ARMv6-M core prints: the access's address where it faults, SP word aligned."""
    return [f"{access_address(c) if c.faults else 0:08x} 0" for c in cases]
