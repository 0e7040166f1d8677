"""The parallel pair (docs/pka.md, "The parallel pair"): a what-if PKA with Victor's two
multiplications in parallel, detected through CAPS, absent from the default chip."""

from __future__ import annotations

import io
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pkasim.chip.config import load_config
from pkasim.core.machine import Machine, StopReason
from pkasim.peripherals.pka import (
    CAPS_PAIR,
    CR_EN,
    CR_OPCODE_SHIFT,
    CR_START,
    OP_MONTMUL2,
    SR_ADDRERRF,
    SR_BUSY,
    SR_OPERRF,
    Reg,
)
from tests.test_pka import A_PTR, B_PTR, N_PTR, R_PTR, TIMING, Rig, formula

A2_PTR, R2_PTR = 0x400, 0x500


def start_pair(rig: Rig, words: int, *, a2: int = A2_PTR, r2: int = R2_PTR) -> None:
    rig.write(Reg.A2PTR, a2)
    rig.write(Reg.R2PTR, r2)
    rig.start(OP_MONTMUL2, words)


def montgomery(x: int, y: int, n: int, words: int) -> int:
    return x * y * pow(2, -32 * words, n) % n


def test_caps_reads_pair_only_on_a_chip_with_montmul_pair():
    assert Rig().read(Reg.CAPS) == 0
    assert Rig(montmul_pair=True).read(Reg.CAPS) == CAPS_PAIR


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_montmul2_gives_both_montgomery_products_with_the_common_b(data):
    words = data.draw(st.integers(1, 16))
    top = (1 << (32 * words)) - 1
    n = max(data.draw(st.integers(1, top)) | 1, 3)
    a, a2, b = (data.draw(st.integers(0, top)) for _ in range(3))
    rig = Rig(montmul_pair=True)
    for ptr, value in ((A_PTR, a), (A2_PTR, a2), (B_PTR, b), (N_PTR, n)):
        rig.store(ptr, value, words)
    start_pair(rig, words)
    rig.advance(rig.clock.next_deadline() - rig.src.cycles)
    assert rig.load(R_PTR, words) == montgomery(a, b, n, words)
    assert rig.load(R2_PTR, words) == montgomery(a2, b, n, words)


def test_montmul2_reads_every_operand_before_it_writes_the_square_over_b():
    """Victor's exponentiation step: Z = X (x) M and M = M (x) M in one operation."""
    rig, n, x, m = Rig(montmul_pair=True), 0xFFFFFFFB, 0x1234567, 0x7654321
    for ptr, value in ((A_PTR, x), (B_PTR, m), (N_PTR, n)):
        rig.store(ptr, value, 1)
    start_pair(rig, 1, a2=B_PTR, r2=B_PTR)
    rig.advance(rig.clock.next_deadline() - rig.src.cycles)
    assert rig.load(R_PTR, 1) == montgomery(x, m, n, 1)
    assert rig.load(B_PTR, 1) == montgomery(m, m, n, 1)


@pytest.mark.parametrize("words", [1, 32, 64])
def test_montmul2_is_busy_for_one_montmul(words):
    rig = Rig(montmul_pair=True)
    rig.store(N_PTR, 0xFFFF1, words)
    start_pair(rig, words)
    busy = formula(TIMING["montmul"], 32, words)
    rig.advance(busy - 1)
    assert rig.read(Reg.SR) & SR_BUSY
    rig.advance(1)
    assert not rig.read(Reg.SR) & SR_BUSY
    assert rig.read(Reg.LASTCYC) == busy
    assert rig.pka.operations["MONTMUL2"] == 1 and rig.pka.by_length[("montmul2", words)] == 1


def test_montmul2_on_a_chip_without_the_pair_is_refused_as_an_unknown_opcode():
    rig = Rig()
    rig.store(N_PTR, 0xFFFF1, 1)
    start_pair(rig, 1)
    assert rig.read(Reg.SR) & SR_OPERRF
    assert not rig.read(Reg.SR) & SR_BUSY


def test_pair_registers_are_reserved_on_a_chip_without_the_pair():
    rig = Rig()
    for reg in (Reg.A2PTR, Reg.R2PTR):
        rig.write(reg, 0x100)
        assert rig.read(reg) == 0


def test_second_result_past_the_end_of_pka_ram_sets_addrerrf():
    rig = Rig(montmul_pair=True)
    rig.store(N_PTR, 0xFFFF1, 4)
    start_pair(rig, 4, r2=3072 - 8)
    assert rig.read(Reg.SR) & SR_ADDRERRF


def test_strict_chip_refuses_a_second_multiplicand_at_or_above_n():
    rig = Rig(montmul_pair=True, strict_operands=True)
    for ptr, value in ((A_PTR, 1), (B_PTR, 2), (A2_PTR, 0xFFFF1), (N_PTR, 0xFFFF1)):
        rig.store(ptr, value, 1)
    start_pair(rig, 1)
    assert rig.read(Reg.SR) & SR_OPERRF


def test_pka_clock_turns_its_cycles_into_core_cycles_rounded_up():
    """clock_hz: a PKA with its own clock; 48 MHz core, 303.21 MHz PKA."""
    rig = Rig(clock_hz=303_210_000, timing={**TIMING, "montmul": [0, 96, 3]})
    assert rig.pka.cycles_for("montmul", 64) == -(-(96 * 64 + 3) * 48_000_000 // 303_210_000)  # 974
    assert rig.pka.cycles_for("add", 64) == 12  # ceil(72 * 48 / 303.21)



# --------------------------------------------------------------------------- native fast path

VICTOR = Path(__file__).resolve().parent.parent / "configs" / "presets" / "victor-radix16.yaml"
STUB_AT, TABLE_AT = 0x20002000, 0x20002100
# Writes (address, value) pairs from a table at r2 until address 0, then polls SR (at r4)
# until BUSY clears and stops at `b .` (STUB_AT + 16). Halfwords:
#   loop: ldmia r2!, {r0, r1}  ca03     poll: ldr r3, [r4]      6823
#         cmp r0, #0           2800           lsls r3, r3, #15  03db
#         beq poll             d001           bmi poll          d4fc
#         str r1, [r0]         6001     done: b .               e7fe
#         b loop               e7fa
STUB = bytes.fromhex("03ca002801d00160fae72368db03fcd4fee7")


def pair_machine(fast: bool, config_path: Path, hello: Path, ram: bytes, writes: list[tuple[int, int]]):
    """A Victor-preset machine that runs ``writes`` to the PKA's registers from SRAM code
    with the native fast paths on or off; (machine, its PKA) once the PKA is idle again."""
    m = Machine(load_config(config_path), stdout=io.BytesIO(), stderr=io.BytesIO())
    m.load(hello)
    m.fast_paths = fast
    pka = m.peripherals["pka"]
    pka.ram[:len(ram)] = ram
    table = b"".join(addr.to_bytes(4, "little") + value.to_bytes(4, "little") for addr, value in [*writes, (0, 0)])
    m.write_memory(STUB_AT, STUB)
    m.write_memory(TABLE_AT, table)
    m.set_reg("r2", TABLE_AT)
    m.set_reg("r4", pka.base + Reg.SR)
    m.set_reg("pc", STUB_AT)
    r = m.run(max_cycles=10**6, until=STUB_AT + 16)
    assert r.reason == StopReason.UNTIL, r.message
    return m, pka


def pair_writes(base: int, words: int, ptrs: dict[Reg, int]) -> list[tuple[int, int]]:
    regs = [(Reg.LEN, words), *ptrs.items(), (Reg.CR, CR_EN | CR_START | OP_MONTMUL2 << CR_OPCODE_SHIFT)]
    return [(base + reg, value) for reg, value in regs]


def outcome(m, pka) -> tuple:
    stats = pka.stats()
    return (m.cycles, m.instructions, bytes(pka.ram), pka.state.flags, pka.regs[Reg.LASTCYC], pka.regs[Reg.CARRY],
            sorted(stats["operations"].items()), sorted(stats["by_length"].items()), stats["busy_cycles"],
            stats["errors"], pka.log)


@settings(max_examples=40, deadline=None)
@given(words=st.integers(1, 64), slots=st.lists(st.integers(0, 11), min_size=6, max_size=6),
       seed=st.integers(0, 2**32 - 1), n_words=st.integers(1, 64))
def test_montmul2_in_native_code_equals_pka_py(build_dir, words, slots, seed, n_words):
    """Random operands and pointers (any of them may overlap: R2 over B is Victor's
    square), a modulus that may be short for LEN: the native path and pka.py leave the
    same PKA RAM, flags, counters, log and cycles."""
    ram = bytearray(random.Random(seed).randbytes(3072))
    ptrs = dict(zip((Reg.APTR, Reg.BPTR, Reg.NPTR, Reg.RPTR, Reg.A2PTR, Reg.R2PTR), (256 * s for s in slots),
                    strict=True))
    n_at = ptrs[Reg.NPTR]
    ram[n_at] |= 1  # odd
    ram[n_at + 4 * min(n_words, words):n_at + 4 * words] = bytes(4 * (words - min(n_words, words)))
    ram[n_at + 4] |= 0 if words == 1 else 1  # N > 1 for any LEN above 1
    hello = build_dir / "hello.elf"
    results = [outcome(*pair_machine(fast, VICTOR, hello, bytes(ram), pair_writes(0x40010000, words, ptrs)))
               for fast in (True, False)]
    assert results[0] == results[1]


def test_montmul2_is_served_by_the_native_path_with_both_products(build_dir):
    n = (1 << 2048) - 159
    a, a2, b = 3 ** 1000 % n, 5 ** 900 % n, 7 ** 800 % n
    ram = bytearray(3072)
    for ptr, value in ((A_PTR, a), (A2_PTR, a2), (B_PTR, b), (N_PTR, n)):
        ram[ptr:ptr + 256] = value.to_bytes(256, "little")
    ptrs = {Reg.APTR: A_PTR, Reg.BPTR: B_PTR, Reg.NPTR: N_PTR, Reg.RPTR: R_PTR, Reg.A2PTR: A2_PTR, Reg.R2PTR: R2_PTR}
    m, pka = pair_machine(True, VICTOR, build_dir / "hello.elf", bytes(ram), pair_writes(0x40010000, 64, ptrs))
    assert pka.state.ops[OP_MONTMUL2] == 1  # the native counter: no Python call served it
    assert pka.peek(R_PTR, 64) == montgomery(a, b, n, 64)
    assert pka.peek(R2_PTR, 64) == montgomery(a2, b, n, 64)
    (op,) = pka.log
    assert (op.name, op.words, op.end_cycle - op.start_cycle) == ("MONTMUL2", 64, pka.cycles_for("montmul", 64))


@pytest.mark.parametrize("fast", [True, False], ids=["fast-path", "python"])
def test_strict_pair_chip_refuses_a2_at_or_above_n_on_either_path(build_dir, tmp_path, fast):
    chip = tmp_path / "strict-pair.yaml"
    chip.write_text(f"extends: {VICTOR}\nperipherals:\n  pka:\n    strict_operands: true\n")
    ram = bytearray(3072)
    for ptr, value in ((A_PTR, 1), (B_PTR, 2), (A2_PTR, 0xFFFF1), (N_PTR, 0xFFFF1)):
        ram[ptr:ptr + 4] = value.to_bytes(4, "little")
    ptrs = {Reg.APTR: A_PTR, Reg.BPTR: B_PTR, Reg.NPTR: N_PTR, Reg.RPTR: R_PTR, Reg.A2PTR: A2_PTR, Reg.R2PTR: R2_PTR}
    _, pka = pair_machine(fast, chip, build_dir / "hello.elf", bytes(ram), pair_writes(0x40010000, 1, ptrs))
    assert pka.state.flags & SR_OPERRF
    assert not pka.operations and pka.state.ops[OP_MONTMUL2] == 0
