"""The parallel pair (docs/pka.md, "The parallel pair"): a what-if PKA with Victor's two
multiplications in parallel, detected through CAPS, absent from the default chip."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pkasim.peripherals.pka import CAPS_PAIR, OP_MONTMUL2, SR_ADDRERRF, SR_BUSY, SR_OPERRF, Reg
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

