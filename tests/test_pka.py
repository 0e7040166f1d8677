"""The PKA follows its register interface (docs/pka.md), checked against the model alone
through read/write at window offsets, plus one run through the real Machine."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pkasim.peripherals.pka as pka_module
from pkasim.base.clock import Clock
from pkasim.base.errors import ConfigError
from pkasim.chip.config import PeripheralConfig, load_config
from pkasim.core.machine import StopReason
from pkasim.peripherals.pka import (
    CR_ADDRERRIE,
    CR_EN,
    CR_OPERRIE,
    CR_PROCENDIE,
    CR_RAMERRIE,
    CR_START,
    RAM_OFFSET,
    SR_ADDRERRF,
    SR_BUSY,
    SR_OPERRF,
    SR_PROCENDF,
    SR_RAMERRF,
    Pka,
    Reg,
)

HZ = 48_000_000
BASE = 0x40010000
RAM_SIZE = 3072
MAX_WORDS = 64
TIMING = {"montmul": [1, 3, 16], "modadd": [0, 2, 8], "modsub": [0, 2, 8], "add": [0, 1, 8], "sub": [0, 1, 8]}
PARAMS = {"ram_size": RAM_SIZE, "max_words": MAX_WORDS, "digit_bits": 32, "timing": TIMING}
MONTMUL, MODADD, MODSUB, ADD, SUB = 0x01, 0x02, 0x03, 0x04, 0x05
NAMES = {MONTMUL: "montmul", MODADD: "modadd", MODSUB: "modsub", ADD: "add", SUB: "sub"}
# Operand layout used throughout: each slot holds up to 64 words (256 bytes).
A_PTR, B_PTR, N_PTR, R_PTR = 0x000, 0x100, 0x200, 0x300
REPO = Path(__file__).resolve().parent.parent


class CycleCounter:
    cycles = 0


class Rig:
    """A PKA on a bare clock. ``advance(n)`` moves time and fires due events; ``pulses``
    records the cycle of each IRQ pulse."""

    def __init__(self, **params) -> None:
        self.src = CycleCounter()
        self.clock = Clock(self.src, HZ)
        self.pulses: list[int] = []
        pc = PeripheralConfig("pka", "pka", BASE, {**PARAMS, **params}, 5)
        self.pka = Pka.from_config(pc, clock=self.clock, irq=lambda: self.pulses.append(self.src.cycles))

    def advance(self, n: int) -> None:
        target = self.src.cycles + n
        while (nxt := self.clock.next_deadline()) is not None and nxt <= target:
            self.src.cycles = nxt
            self.clock.run_due()
        self.src.cycles = target

    def read(self, reg: int) -> int:
        return self.pka.read(reg, 4)

    def write(self, reg: int, value: int) -> None:
        self.pka.write(reg, 4, value)

    def store(self, ptr: int, value: int, words: int) -> None:
        """Write an operand through the RAM window, least-significant word first."""
        for i in range(words):
            self.pka.write(RAM_OFFSET + ptr + 4 * i, 4, (value >> (32 * i)) & 0xFFFFFFFF)

    def load(self, ptr: int, words: int) -> int:
        """Read an operand back through the RAM window."""
        return sum(self.pka.read(RAM_OFFSET + ptr + 4 * i, 4) << (32 * i) for i in range(words))

    def ram(self) -> bytes:
        return bytes(self.pka.ram)

    def start(self, opcode: int, words: int, *, a: int = A_PTR, b: int = B_PTR, n: int = N_PTR, r: int = R_PTR,
              cr: int = CR_EN) -> None:
        self.write(Reg.LEN, words)
        for reg, ptr in ((Reg.APTR, a), (Reg.BPTR, b), (Reg.NPTR, n), (Reg.RPTR, r)):
            self.write(reg, ptr)
        self.write(Reg.CR, cr | (opcode << 8) | CR_START)

    def operate(self, opcode: int, words: int, a: int, b: int, n: int = 0, cr: int = CR_EN) -> tuple[int, int]:
        """Store operands, start, wait out the busy time; returns (R, CARRY)."""
        self.store(A_PTR, a, words)
        self.store(B_PTR, b, words)
        self.store(N_PTR, n, words)
        self.start(opcode, words, cr=cr)
        self.advance(self.clock.next_deadline() - self.src.cycles)
        assert not self.read(Reg.SR) & SR_BUSY
        return self.load(R_PTR, words), self.read(Reg.CARRY)


def formula(coefficients, digit_bits: int, words: int) -> int:
    a, b, c = coefficients
    d = math.ceil(32 * words / digit_bits)
    return math.ceil(a * d * d + b * d + c)


@st.composite
def operands(draw, opcode: int):
    """(words, A, B, N) with edge values: 0, 1, N-1, N, N+1, 2^(32*LEN)-1, and A, B >= N."""
    words = draw(st.integers(1, MAX_WORDS))
    top = (1 << (32 * words)) - 1
    n = draw(st.one_of(st.just(top), st.just(1), st.integers(1, top)))
    if opcode == MONTMUL:
        n = max(n | 1, 3)
    edges = sorted({0, 1, n - 1, n, min(n + 1, top), top})

    def value() -> int:
        return draw(st.one_of(st.sampled_from(edges), st.integers(0, top)))

    return words, value(), value(), n


# --------------------------------------------------------------------------- results

@pytest.mark.parametrize("opcode", sorted(NAMES), ids=lambda op: NAMES[op])
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_every_operation_equals_python_integers(opcode, data):
    words, a, b, n = data.draw(operands(opcode))
    rig = Rig()
    r, carry = rig.operate(opcode, words, a, b, n)
    bits = 32 * words
    if opcode == MONTMUL:
        assert 0 <= r < n and (r << bits) % n == a * b % n and carry == 0
    elif opcode == MODADD:
        assert (r, carry) == ((a + b) % n, 0)
    elif opcode == MODSUB:
        assert (r, carry) == ((a - b) % n, 0)
    elif opcode == ADD:
        assert (r, carry) == ((a + b) % (1 << bits), (a + b) >> bits)
    else:
        assert (r, carry) == ((a - b) % (1 << bits), int(b > a))


def test_result_may_overlap_an_operand():
    rig = Rig()
    rig.store(A_PTR, 5, 2)
    rig.store(B_PTR, 7, 2)
    rig.start(ADD, 2, r=A_PTR)
    rig.advance(100)
    assert rig.load(A_PTR, 2) == 12


def test_modulus_is_not_read_by_add_and_sub():
    rig = Rig()
    rig.store(A_PTR, 1, 1)
    rig.store(B_PTR, 2, 1)
    rig.start(ADD, 1, n=0xFFFFFFF1)  # misaligned and out of range: never looked at
    rig.advance(100)
    assert rig.load(R_PTR, 1) == 3
    assert not rig.read(Reg.SR) & (SR_ADDRERRF | SR_OPERRF)


# --------------------------------------------------------------------------- refused requests

def refused(rig: Rig, flag: int, before: bytes) -> None:
    """A refused START: the flag is up, nothing runs, PKA RAM is byte-identical."""
    sr = rig.read(Reg.SR)
    assert sr & flag
    assert not sr & (SR_BUSY | SR_PROCENDF)
    assert rig.clock.next_deadline() is None
    rig.advance(10**6)
    assert rig.ram() == before
    assert not rig.read(Reg.SR) & SR_PROCENDF


def filled_rig(words: int = 4) -> tuple[Rig, bytes]:
    rig = Rig()
    rig.store(A_PTR, 0x1234, words)
    rig.store(B_PTR, 0x5678, words)
    rig.store(N_PTR, 0xFFFF1, words)
    rig.store(R_PTR, 0xDEADBEEF, words)
    return rig, rig.ram()


def test_start_with_en_clear_sets_operrf_and_leaves_ram_untouched():
    rig, before = filled_rig()
    rig.start(MONTMUL, 4, cr=0)
    refused(rig, SR_OPERRF, before)


@pytest.mark.parametrize("words", [0, MAX_WORDS + 1, 0xFFFFFFFF])
def test_len_outside_1_to_max_words_sets_operrf(words):
    rig, before = filled_rig()
    rig.start(ADD, words)
    refused(rig, SR_OPERRF, before)


@pytest.mark.parametrize("opcode", [0x00, 0x06, 0x10, 0x3F])
def test_unknown_opcode_sets_operrf(opcode):
    rig, before = filled_rig()
    rig.start(opcode, 4)
    refused(rig, SR_OPERRF, before)


@pytest.mark.parametrize("pointer", ["a", "b", "n", "r"])
def test_pointer_not_a_multiple_of_4_sets_addrerrf(pointer):
    rig, before = filled_rig()
    rig.start(MONTMUL, 4, **{pointer: 0x102})
    refused(rig, SR_ADDRERRF, before)


@pytest.mark.parametrize("pointer", ["a", "b", "n", "r"])
def test_operand_running_past_the_end_of_ram_sets_addrerrf(pointer):
    rig, before = filled_rig()
    rig.start(MODADD, 4, **{pointer: RAM_SIZE - 4 * 4 + 4})
    refused(rig, SR_ADDRERRF, before)


def test_operand_ending_exactly_at_the_end_of_ram_is_accepted():
    rig = Rig()
    rig.start(ADD, 4, r=RAM_SIZE - 16)
    assert rig.read(Reg.SR) & SR_BUSY


@pytest.mark.parametrize(("opcode", "n"), [(MONTMUL, 0x10000), (MONTMUL, 0), (MONTMUL, 1), (MODADD, 0), (MODSUB, 0)],
                         ids=["montmul-even-n", "montmul-n-0", "montmul-n-1", "modadd-n-0", "modsub-n-0"])
def test_broken_arithmetic_rule_sets_operrf(opcode, n):
    rig, _ = filled_rig()
    rig.store(N_PTR, n, 4)
    before = rig.ram()
    rig.start(opcode, 4)
    refused(rig, SR_OPERRF, before)


def test_address_check_comes_before_the_arithmetic_rules():
    rig, before = filled_rig()
    rig.store(N_PTR, 2, 4)
    before = rig.ram()
    rig.start(MONTMUL, 4, a=2)  # both a bad pointer and an even N
    refused(rig, SR_ADDRERRF, before)
    assert not rig.read(Reg.SR) & SR_OPERRF


# --------------------------------------------------------------------------- strict_operands

@pytest.mark.parametrize("opcode", [MONTMUL, MODADD, MODSUB], ids=lambda op: NAMES[op])
@pytest.mark.parametrize("operand", ["a", "b"])
def test_strict_chip_refuses_a_modular_operand_at_or_above_n(opcode, operand):
    n = 0xFFFF1
    for value in (n, n + 1, (1 << 128) - 1):
        rig = Rig(strict_operands=True)
        rig.store(A_PTR, value if operand == "a" else 3, 4)
        rig.store(B_PTR, value if operand == "b" else 3, 4)
        rig.store(N_PTR, n, 4)
        before = rig.ram()
        rig.start(opcode, 4)
        refused(rig, SR_OPERRF, before)
        assert rig.pka.stats()["errors"]["OPERRF"] == 1


@pytest.mark.parametrize("opcode", [MONTMUL, MODADD, MODSUB], ids=lambda op: NAMES[op])
def test_strict_chip_computes_operands_below_n_as_the_lenient_one(opcode):
    n = 0xFFFF1
    strict = Rig(strict_operands=True).operate(opcode, 4, n - 1, n - 2, n)
    assert strict == Rig().operate(opcode, 4, n - 1, n - 2, n)


def test_strict_rule_does_not_apply_to_add_and_sub():
    for opcode in (ADD, SUB):
        r, _ = Rig(strict_operands=True).operate(opcode, 2, (1 << 64) - 1, 5, n=3)
        assert r == Rig().operate(opcode, 2, (1 << 64) - 1, 5, n=3)[0]


def test_lenient_chip_reduces_operands_at_or_above_n():
    assert Rig().operate(MODADD, 4, 0xFFFF1 * 3 + 2, 0xFFFF1, 0xFFFF1) == (2, 0)


def test_strict_rule_is_checked_after_the_arithmetic_rules(caplog):
    rig = Rig(strict_operands=True)
    rig.store(A_PTR, 10, 1)
    rig.store(N_PTR, 4, 1)  # an even N and A >= N: the guest log names the even N
    with caplog.at_level("WARNING", logger="pkasim.guest"):
        rig.start(MONTMUL, 1)
    assert rig.read(Reg.SR) & SR_OPERRF
    assert "odd modulus" in caplog.text and "strict_operands" not in caplog.text


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_strict_operands_must_be_a_boolean(value):
    with pytest.raises(ConfigError, match=r": peripherals\.pka\.strict_operands: expected true or false"):
        Rig(strict_operands=value)


def test_the_shipped_strict_chip_sets_the_rule(repo):
    cfg = load_config(repo / "configs" / "ciu98320b-strict.yaml")
    assert cfg.peripherals["pka"].params["strict_operands"] is True
    assert load_config().peripherals["pka"].params["strict_operands"] is False


@pytest.mark.parametrize(("flag", "enable", "provoke"), [
    (SR_OPERRF, CR_OPERRIE, lambda rig, ie: rig.start(0x3F, 4, cr=CR_EN | ie)),
    (SR_ADDRERRF, CR_ADDRERRIE, lambda rig, ie: rig.start(ADD, 4, a=1, cr=CR_EN | ie)),
    (SR_RAMERRF, CR_RAMERRIE, lambda rig, ie: (rig.start(MONTMUL, 4, cr=CR_EN | ie), rig.load(R_PTR, 1))),
], ids=["OPERRF", "ADDRERRF", "RAMERRF"])
def test_error_flag_pulses_the_irq_only_when_its_enable_bit_is_set(flag, enable, provoke):
    for ie, pulses in ((enable, 1), (0, 0)):
        rig, _ = filled_rig()
        provoke(rig, ie)
        assert rig.read(Reg.SR) & flag
        assert len(rig.pulses) == pulses


# --------------------------------------------------------------------------- while busy

def test_ram_read_while_busy_returns_zero_and_sets_ramerrf():
    rig, _ = filled_rig()
    rig.start(ADD, 4)
    assert rig.pka.read(RAM_OFFSET + A_PTR, 4) == 0
    assert rig.read(Reg.SR) & SR_RAMERRF


def test_ram_write_while_busy_is_ignored_and_sets_ramerrf():
    rig, _ = filled_rig()
    rig.start(ADD, 4)
    before = rig.ram()
    rig.pka.write(RAM_OFFSET + B_PTR, 4, 0xFFFFFFFF)
    assert rig.ram() == before
    assert rig.read(Reg.SR) & SR_RAMERRF
    rig.advance(100)
    assert rig.load(R_PTR, 4) == 0x1234 + 0x5678  # computed from the operands as they were


@pytest.mark.parametrize("reg", [Reg.CR, Reg.LEN, Reg.APTR, Reg.BPTR, Reg.NPTR, Reg.RPTR])
def test_register_writes_while_busy_are_ignored(reg):
    rig, _ = filled_rig()
    rig.start(ADD, 4)
    before = rig.read(reg)
    rig.write(reg, 0x44 | CR_START if reg == Reg.CR else 0x44)
    assert rig.read(reg) == before
    rig.advance(100)
    assert rig.load(R_PTR, 4) == 0x1234 + 0x5678
    assert rig.pka.operations == {"ADD": 1}  # the write with START did not start a second one


def test_status_registers_stay_readable_while_busy():
    rig, _ = filled_rig()
    rig.start(MONTMUL, 4)
    assert rig.read(Reg.SR) == SR_BUSY
    assert rig.read(Reg.LEN) == 4
    assert not rig.read(Reg.SR) & SR_RAMERRF


# --------------------------------------------------------------------------- finishing, IRQ

def test_procendf_rises_and_irq_pulses_at_the_end_when_procendie_set():
    rig, _ = filled_rig()
    rig.start(MONTMUL, 4, cr=CR_EN | CR_PROCENDIE)
    busy = formula(TIMING["montmul"], 32, 4)
    rig.advance(busy - 1)
    assert rig.pulses == [] and rig.read(Reg.SR) == SR_BUSY
    rig.advance(1)
    assert rig.pulses == [busy]
    assert rig.read(Reg.SR) == SR_PROCENDF


def test_no_irq_pulse_when_procendie_clear():
    rig, _ = filled_rig()
    rig.start(MONTMUL, 4)
    rig.advance(10**6)
    assert rig.read(Reg.SR) == SR_PROCENDF
    assert rig.pulses == []


def test_setting_an_enable_bit_under_a_raised_flag_pulses_the_irq():
    rig, _ = filled_rig()
    rig.start(ADD, 4)
    rig.advance(100)
    assert rig.pulses == []
    rig.write(Reg.CR, CR_EN | CR_PROCENDIE)
    assert rig.pulses == [100]


def test_a_flag_already_up_does_not_pulse_again_until_cleared():
    rig, _ = filled_rig()
    for _ in range(2):
        rig.start(ADD, 4, cr=CR_EN | CR_PROCENDIE)
        rig.advance(100)
    assert len(rig.pulses) == 1
    rig.write(Reg.CLRFR, SR_PROCENDF)
    rig.start(ADD, 4, cr=CR_EN | CR_PROCENDIE)
    rig.advance(100)
    assert len(rig.pulses) == 2


def test_result_is_not_visible_before_the_busy_time_has_passed():
    rig, _ = filled_rig()
    rig.start(MODADD, 4)
    busy = formula(TIMING["modadd"], 32, 4)
    rig.advance(busy - 1)
    assert rig.pka.peek(R_PTR, 4) == 0xDEADBEEF
    assert rig.read(Reg.SR) & SR_BUSY
    rig.advance(1)
    assert rig.load(R_PTR, 4) == (0x1234 + 0x5678) % 0xFFFF1


@pytest.mark.parametrize("words", [1, 2, 16, 17, 31, 32, 33, 63, 64])
@pytest.mark.parametrize("opcode", sorted(NAMES), ids=lambda op: NAMES[op])
@pytest.mark.parametrize("timing", ["default", "fdfm"])
def test_busy_time_equals_the_timing_formula(timing, opcode, words):
    if timing == "default":
        rig, digit_bits, table = Rig(), 32, TIMING
    else:
        table = {**TIMING, "montmul": [2, 8, 4]}
        rig, digit_bits = Rig(digit_bits=17, timing=table), 17
    rig.store(N_PTR, 0xFFFF1, words)
    rig.start(opcode, words)
    expected = formula(table[NAMES[opcode]], digit_bits, words)
    rig.advance(expected - 1)
    assert rig.read(Reg.SR) & SR_BUSY
    rig.advance(1)
    assert not rig.read(Reg.SR) & SR_BUSY
    assert rig.read(Reg.LASTCYC) == expected
    assert rig.pka.log[-1][2:] == (0, expected)


def test_fractional_coefficients_are_exact_and_rounded_up():
    rig = Rig(timing={**TIMING, "add": [0.1, 0.5, 0.3]})  # 0.1*9 + 0.5*3 + 0.3 = 2.7 exactly -> 3
    assert rig.pka.cycles_for("add", 3) == 3
    rig = Rig(timing={**TIMING, "add": [0, 1.1, 0.3]})  # 1.1*7 + 0.3 = 8 exactly; in floats 8.000000000000002
    assert rig.pka.cycles_for("add", 7) == 8


def build_from(path: Path) -> Pka:
    pc = load_config(path).peripherals["pka"]
    return Pka.from_config(pc, clock=Clock(CycleCounter(), HZ), irq=lambda: None)


def test_default_chip_and_fdfm_preset_busy_times():
    """The figures docs/pka.md quotes, from the shipped chip files."""
    default = build_from(REPO / "configs" / "ciu98320b.yaml")
    fdfm = build_from(REPO / "configs" / "presets" / "fdfm-radix17.yaml")
    assert [default.cycles_for("montmul", w) for w in (64, 32)] == [1652, 473]  # a = 0.3523, fitted
    assert [default.cycles_for(op, 64) for op in ("modadd", "modsub", "add", "sub")] == [136, 136, 72, 72]
    assert [fdfm.cycles_for("montmul", w) for w in (64, 32)] == [30254, 7934]  # d = 121, 61
    assert [fdfm.cycles_for(op, 64) for op in ("modadd", "modsub", "add", "sub")] == [250, 250, 129, 129]
    assert (default.base, default.size, default.ram_size) == (0x40010000, 0x400 + 3072, 3072)


# --------------------------------------------------------------------------- registers

def test_clrfr_clears_only_the_flags_written_with_1():
    rig, _ = filled_rig()
    rig.start(0x3F, 4)  # OPERRF
    rig.start(ADD, 4, a=2)  # ADDRERRF
    rig.start(ADD, 4)
    rig.load(A_PTR, 1)  # RAMERRF
    rig.advance(100)  # PROCENDF
    assert rig.read(Reg.SR) == SR_PROCENDF | SR_RAMERRF | SR_ADDRERRF | SR_OPERRF
    rig.write(Reg.CLRFR, SR_RAMERRF | SR_OPERRF)
    assert rig.read(Reg.SR) == SR_PROCENDF | SR_ADDRERRF
    rig.write(Reg.CLRFR, 0xFFFFFFFF)
    assert rig.read(Reg.SR) == 0
    assert rig.read(Reg.CLRFR) == 0


def test_cr_keeps_its_fields_and_start_reads_zero():
    rig = Rig()
    value = CR_EN | (0x3F << 8) | CR_PROCENDIE | CR_RAMERRIE | CR_ADDRERRIE | CR_OPERRIE
    rig.write(Reg.CR, value | 0xC0000000)
    assert rig.read(Reg.CR) == value


@pytest.mark.parametrize("reg", [Reg.SR, Reg.CARRY, Reg.LASTCYC])
def test_read_only_registers_ignore_writes(reg):
    rig = Rig()
    rig.write(reg, 0xFFFFFFFF)
    assert rig.read(reg) == 0


@pytest.mark.parametrize("max_words,ram_size", [(MAX_WORDS, RAM_SIZE), (128, 6144), (1, 4), (128, 512)])
def test_capability_registers_give_max_words_and_ram_words(max_words, ram_size):
    """MAXLEN = max_words and RAMSIZE = ram_size / 4, from reset on: a driver learns
    the multiplier's width and the PKA RAM it may use (docs/pka.md, "Registers")."""
    rig = Rig(max_words=max_words, ram_size=ram_size)
    assert (rig.read(Reg.MAXLEN), rig.read(Reg.RAMSIZE)) == (max_words, ram_size // 4)
    assert (Reg.MAXLEN, Reg.RAMSIZE) == (0x28, 0x2C) and Reg.LASTCYC == 0x24
    rig.pka.reset()
    assert (rig.read(Reg.MAXLEN), rig.read(Reg.RAMSIZE)) == (max_words, ram_size // 4)


@pytest.mark.parametrize("reg", [Reg.MAXLEN, Reg.RAMSIZE])
def test_capability_registers_are_read_only_and_readable_while_busy(reg):
    rig, _ = filled_rig()
    before = rig.read(reg)
    rig.write(reg, 0xFFFFFFFF)
    rig.write(reg, 0)
    assert rig.read(reg) == before != 0
    rig.start(MONTMUL, 4)
    assert rig.read(Reg.SR) & SR_BUSY and rig.read(reg) == before
    assert rig.pka.read(reg, 2) == 0  # word access only, like every register
    assert rig.pka.snapshot()[reg.name] == before


def test_capability_registers_of_the_shipped_chips():
    """The default chip reports a 2048-bit multiplier and 3 KiB; configs/native4096.yaml
    (the hypothetical chip of issue #4) a 4096-bit one and 6 KiB."""
    default = build_from(REPO / "configs" / "ciu98320b.yaml")
    native = build_from(REPO / "configs" / "native4096.yaml")
    assert (default.read(Reg.MAXLEN, 4), default.read(Reg.RAMSIZE, 4)) == (64, 768)
    assert (native.read(Reg.MAXLEN, 4), native.read(Reg.RAMSIZE, 4)) == (128, 1536)


def test_non_word_accesses_are_ignored_and_read_zero():
    rig = Rig()
    rig.write(Reg.LEN, 7)
    rig.store(A_PTR, 0x11223344, 1)
    for size in (1, 2):
        rig.pka.write(Reg.LEN, size, 3)
        rig.pka.write(RAM_OFFSET + A_PTR, size, 0xFF)
        assert rig.pka.read(Reg.LEN, size) == 0
        assert rig.pka.read(RAM_OFFSET + A_PTR, size) == 0
    assert rig.read(Reg.LEN) == 7
    assert rig.load(A_PTR, 1) == 0x11223344


def test_reserved_offsets_read_zero_and_ignore_writes():
    rig = Rig()
    for offset in (0x30, 0x3C, 0x200, 0x3FC):
        rig.pka.write(offset, 4, 0xFFFFFFFF)
        assert rig.pka.read(offset, 4) == 0


def test_ram_round_trips_through_the_window():
    rig = Rig()
    rig.store(RAM_SIZE - 8, 0x0123456789ABCDEF, 2)
    assert rig.load(RAM_SIZE - 8, 2) == 0x0123456789ABCDEF
    assert rig.pka.ram[-8:] == bytes.fromhex("efcdab8967452301")  # least-significant word first, little-endian


def test_reset_cancels_the_operation_and_clears_state_and_counters():
    rig, _ = filled_rig()
    rig.operate(ADD, 4, 1, 2)
    rig.write(Reg.CLRFR, SR_PROCENDF)
    rig.start(MONTMUL, 4, cr=CR_EN | CR_PROCENDIE)
    rig.pka.reset()
    rig.advance(10**6)
    assert {reg: rig.read(reg) for reg in Reg} == {**dict.fromkeys(Reg, 0), Reg.MAXLEN: MAX_WORDS,
                                                   Reg.RAMSIZE: RAM_SIZE // 4}  # capabilities stay
    assert rig.ram() == bytes(RAM_SIZE)
    assert rig.pulses == []
    assert rig.pka.stats()["operations"] == {} and rig.pka.log == []


# --------------------------------------------------------------------------- counters

def test_stats_count_operations_by_kind_and_length_busy_cycles_and_errors():
    rig = Rig()
    rig.operate(MONTMUL, 64, 3, 5, (1 << 2048) - 1)
    rig.operate(MONTMUL, 32, 3, 5, (1 << 1024) - 1)
    rig.operate(MONTMUL, 64, 3, 5, (1 << 2048) - 1)
    rig.operate(ADD, 64, 3, 5)
    rig.start(0x3F, 4)
    stats = rig.pka.stats()
    assert stats == {
        "operations": {"MONTMUL": 3, "ADD": 1},
        "by_length": {"add/64": 1, "montmul/32": 1, "montmul/64": 2},
        "busy_cycles": 2 * 4304 + 1136 + 72,
        "errors": {"OPERRF": 1, "ADDRERRF": 0, "RAMERRF": 0},
        "log_truncated": False,
    }
    assert json.loads(json.dumps(stats)) == stats
    assert [(op.name, op.words, op.end_cycle - op.start_cycle) for op in rig.pka.log] == [
        ("MONTMUL", 64, 4304), ("MONTMUL", 32, 1136), ("MONTMUL", 64, 4304), ("ADD", 64, 72)]


def test_summary_lines_give_ops_lengths_and_busy_share():
    rig = Rig()
    assert rig.pka.summary_lines() == []
    rig.operate(MONTMUL, 64, 3, 5, (1 << 2048) - 1)
    rig.src.cycles = 2 * 4304  # the PKA was busy half the run
    rig.start(0x3F, 4)
    assert rig.pka.summary_lines() == [
        ("PKA", "1 ops: MONTMUL x1 (64 words); busy 4,304 cycles (50.0%)"),
        ("PKA errors", "OPERRF x1"),
    ]


def test_operation_log_is_bounded_and_says_so(monkeypatch):
    monkeypatch.setattr(pka_module, "LOG_LIMIT", 2)
    rig = Rig()
    for _ in range(3):
        rig.operate(ADD, 1, 1, 1)
    assert len(rig.pka.log) == 2
    assert rig.pka.stats()["log_truncated"] is True
    assert rig.pka.stats()["operations"] == {"ADD": 3}


# --------------------------------------------------------------------------- configuration

@pytest.mark.parametrize(("params", "key"), [
    ({"ram_size": 3070}, "ram_size"),
    ({"ram_size": 0x10000}, "ram_size"),
    ({"max_words": 0}, "max_words"),
    ({"max_words": 129}, "max_words"),
    ({"max_words": True}, "max_words"),
    ({"ram_size": 128, "max_words": 64}, "max_words"),
    ({"digit_bits": 0}, "digit_bits"),
    ({"digit_bits": 17.5}, "digit_bits"),
    ({"timing": [1, 2, 3]}, "timing"),
    ({"timing": {**TIMING, "mul": [1, 1, 1]}}, "timing.mul"),
    ({"timing": {k: v for k, v in TIMING.items() if k != "sub"}}, "timing.sub"),
    ({"timing": {**TIMING, "add": [1, 2]}}, "timing.add"),
    ({"timing": {**TIMING, "add": [1, "x", 3]}}, "timing.add[1]"),
    ({"timing": {**TIMING, "add": [0, 0, 0]}}, "timing.add"),
    ({"colour": "red"}, "colour"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_bad_parameters_are_config_errors_naming_the_parameter(params, key):
    with pytest.raises(ConfigError, match=re.escape(f": peripherals.pka.{key}: ")):
        Rig(**params)


def test_missing_parameter_is_a_config_error():
    pc = PeripheralConfig("pka", "pka", BASE, {k: v for k, v in PARAMS.items() if k != "timing"}, 5)
    with pytest.raises(ConfigError, match=r": peripherals\.pka\.timing: required"):
        Pka.from_config(pc, clock=Clock(CycleCounter(), HZ), irq=lambda: None)


def test_machine_build_refuses_a_bad_pka_parameter(config, make_machine):
    pc = dataclasses.replace(config.peripherals["pka"], params={**config.peripherals["pka"].params, "max_words": 500})
    bad = dataclasses.replace(config, peripherals={**config.peripherals, "pka": pc})
    with pytest.raises(ConfigError, match=r"peripherals\.pka\.max_words"):
        make_machine(bad)


# --------------------------------------------------------------------------- through the machine

SRAM_CODE = 0x20002000
PROGRAM = (
    "72b6402000060121090440184021c160002101610121090241614a0082615218c261022109040122120203321143016030bf"
    "44681820022109042631abbe"
)


def test_firmware_runs_a_montmul_and_sleeps_until_the_irq(make_machine, elf):
    """Thumb code in SRAM drives the PKA through its registers, then sleeps in WFI
    (PRIMASK set: the pended IRQ wakes the core without being taken). Halfwords::

        cpsid i                                     b672
        movs r0,#0x40; lsls r0,r0,#24               2040 0600
        movs r1,#1; lsls r1,r1,#16; adds r0,r0,r1   2101 0409 1840    r0 = 0x40010000
        movs r1,#64; str r1,[r0,#0xc]               2140 60c1         LEN = 64
        movs r1,#0; str r1,[r0,#0x10]               2100 6101         APTR = 0
        movs r1,#1; lsls r1,r1,#8; str r1,[r0,#0x14] 2101 0209 6141   BPTR = 0x100
        lsls r2,r1,#1; str r2,[r0,#0x18]            004a 6182         NPTR = 0x200
        adds r2,r2,r1; str r2,[r0,#0x1c]            1852 61c2         RPTR = 0x300
        movs r1,#2; lsls r1,r1,#16                  2102 0409
        movs r2,#1; lsls r2,r2,#8; adds r2,#3       2201 0212 3203
        orrs r1,r2; str r1,[r0]                     4311 6001         CR = PROCENDIE|MONTMUL|START|EN
        wfi                                         bf30
        ldr r4,[r0,#4]                              6844              r4 = SR
        movs r0,#0x18; movs r1,#2; lsls r1,r1,#16   2018 2102 0409
        adds r1,#0x26; bkpt 0xab                    3126 beab         exit(0)
    """
    m = make_machine()
    m.load(elf("bench"))
    pka = m.peripherals["pka"]
    a, b, n = 3 << 2000, (1 << 2047) + 12345, (1 << 2048) - 159
    pka.poke(A_PTR, a, 64)
    pka.poke(B_PTR, b, 64)
    pka.poke(N_PTR, n, 64)
    m.nvic.enabled |= 1 << 5
    m.write_memory(SRAM_CODE, bytes.fromhex(PROGRAM))
    m.set_reg("pc", SRAM_CODE)
    r = m.run(max_cycles=10**5)
    assert r.reason == StopReason.EXIT and r.exit_code == 0
    assert pka.peek(R_PTR, 64) == a * b * pow(2, -2048, n) % n
    assert m.reg("r4") == SR_PROCENDF
    assert pka.stats()["operations"] == {"MONTMUL": 1}
    (op,) = pka.log
    assert op.end_cycle - op.start_cycle == pka.cycles_for("montmul", 64)
    slept_from = op.end_cycle - r.sleep_cycles  # the core woke exactly at the end
    # The store to CR starts at cycle 28: CPSID (1), then the 27 cycles of the
    # instructions before the STR in its block (docs/cycle-model.md: code in SRAM
    # is timed like code in flash).
    assert op.start_cycle == 28
    assert op.start_cycle < slept_from < op.start_cycle + 40


@pytest.mark.parametrize("fast", [True, False], ids=["fast-path", "python"])
def test_strict_chip_refuses_a_montmul_operand_above_n_in_a_machine(make_machine, elf, repo, fast):
    """The same program on the strict chip with A > N: refused (OPERRF) whether the
    native fast path or the Python model serves the START; the core, waiting for a
    PROCENDF that never comes, sleeps with nothing left to wake it."""
    m = make_machine(load_config(repo / "configs" / "ciu98320b-strict.yaml"))
    m.load(elf("bench"))
    m.fast_paths = fast
    pka = m.peripherals["pka"]
    n = (1 << 2048) - 159
    pka.poke(A_PTR, n + 7, 64)
    pka.poke(B_PTR, 5, 64)
    pka.poke(N_PTR, n, 64)
    m.nvic.enabled |= 1 << 5
    m.write_memory(SRAM_CODE, bytes.fromhex(PROGRAM))
    m.set_reg("pc", SRAM_CODE)
    r = m.run(max_cycles=10**5)
    assert r.reason == StopReason.SLEEP_FOREVER
    assert pka.stats()["errors"]["OPERRF"] == 1 and not pka.stats()["operations"]
    assert pka.peek(R_PTR, 64) == 0


def test_bad_parameter_in_a_chip_file_names_its_file_and_line(tmp_path, make_machine):
    from pkasim.chip.config import DEFAULT_CONFIG, load_config

    path = tmp_path / "chip.yaml"
    path.write_text(f"extends: {DEFAULT_CONFIG}\nperipherals:\n  pka:\n    max_words: 500\n")
    with pytest.raises(ConfigError, match="^" + re.escape(f"{path}:4: peripherals.pka.max_words: ")):
        make_machine(load_config(path))
