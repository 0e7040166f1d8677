"""The power model (docs/power.md): the CPU's instruction hook term by term on
hand-assembled Thumb code, its cycle placement on real firmware, the PKA's datapath
leakage (native against NumPy, Montgomery rows against the PKA's result), the chip
file's power section, and that a machine's run does not change when traced.
"""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pkasim.analysis.power.cpu import CpuLeakage
from pkasim.analysis.power.pka import montgomery_rows, operation_leakage
from pkasim.analysis.power.tracer import Setup, Tracer
from pkasim.analysis.windows import parse_window
from pkasim.base.errors import ConfigError
from pkasim.chip.config import parse_config
from pkasim.chip.power import CPU_CLASSES, CPU_TERMS, DEFAULT_CPU, DEFAULT_PKA, PowerConfig, default_power
from pkasim.peripherals.pka import Started

SRAM_CODE = 0x20002000
SRAM_DATA = 0x20002800


@pytest.fixture
def tracer_factory(elf, config):
    def make(name: str) -> Tracer:
        return Tracer(Setup(str(elf(name)), config, budget=10**8))

    return make


def only(cls: str, term: str) -> PowerConfig:
    """Every weight 0 but one: the samples are that term alone."""
    cpu = {c: dict.fromkeys(CPU_TERMS, 0.0) for c in CPU_CLASSES}
    cpu[cls][term] = 1.0
    return PowerConfig(cpu=cpu, pka=dict(DEFAULT_PKA))


def samples_of(make_machine, elf, code: str, power: PowerConfig, setup=None) -> np.ndarray:
    """Run hand-assembled ``code`` from SRAM with one weight on; the samples of its cycles."""
    m = make_machine()
    m.load(elf("anywhere"))
    m.run(until="main", max_cycles=10**5)
    leak = CpuLeakage(m, power)
    m.write_memory(SRAM_CODE, bytes.fromhex(code))
    if setup:
        setup(m)
    m.set_reg("pc", SRAM_CODE)
    start = m.cycles
    out = np.zeros(64)
    pcs = np.zeros(64, dtype=np.uint32)
    leak.arm(start, start + 64, out, pcs)
    cycles = sum(len(c) // 4 for c in [code])  # every probe below is 1-cycle instructions and loads
    m.run(max_cycles=cycles + 4)
    leak.disarm()
    return out


# movs r0, #0x0f (200f); movs r1, #0xf0 (21f0); eors r0, r1 (4048); then movs r2, #0 (2200) x2
ALU = "0f20f021484000220022"


def test_operand_b_flips_count_from_the_bus_value_the_instruction_before_left(make_machine, elf):
    out = samples_of(make_machine, elf, ALU, only("alu", "hd_op2"))
    # bus B: 0 -> 0x0f (4 flips) -> 0xf0 (8) -> 0xf0 (eors reads r1: 0) -> 0 (4) -> 0
    assert list(out[:5]) == [4, 8, 0, 4, 0]


def test_operand_a_weight_sees_the_first_source_register(make_machine, elf):
    out = samples_of(make_machine, elf, ALU, only("alu", "hw_op1"))
    assert list(out[:5]) == [0, 0, 4, 0, 0]  # only eors has an operand A: r0 = 0x0f


def test_result_weight_sees_the_value_written(make_machine, elf):
    out = samples_of(make_machine, elf, ALU, only("alu", "hw_result"))
    assert list(out[:5]) == [4, 4, 8, 0, 0]  # 0x0f, 0xf0, 0xff, 0, 0


def test_constant_marks_every_instruction_of_its_class(make_machine, elf):
    out = samples_of(make_machine, elf, ALU, only("alu", "constant"))
    assert list(out[:5]) == [1, 1, 1, 1, 1]


# ldr r1, [r0] (6801): 2 cycles; ldr r2, [r0, #4] (6842); str r1, [r0, #8] (6081)
LOADS = "01684268816000220022"


def set_words(m):
    m.write_memory(SRAM_DATA, (0x000000FF).to_bytes(4, "little") + (0x0000FFFF).to_bytes(4, "little"))
    m.set_reg("r0", SRAM_DATA)


def test_the_data_bus_flips_between_consecutive_transfers(make_machine, elf):
    out = samples_of(make_machine, elf, LOADS, only("load", "hd_data"), set_words)
    # loads at cycles 0 and 2: data bus 0 -> 0xff (8) -> 0xffff (8); the store (cycle 4) is not a load
    assert out[0] == 8 and out[2] == 8 and out[1] == 0 and out[3] == 0
    stores = samples_of(make_machine, elf, LOADS, only("store", "hd_data"), set_words)
    assert stores[4] == 8  # str r1 (0xff) after the bus carried 0xffff
    assert not stores[:4].any()


def test_a_load_s_operand_b_is_the_word_it_loads_and_a_is_its_address(make_machine, elf):
    b = samples_of(make_machine, elf, LOADS, only("load", "hw_op2"), set_words)
    assert b[0] == 8 and b[2] == 16
    a = samples_of(make_machine, elf, LOADS, only("load", "hw_op1"), set_words)
    assert a[0] == bin(SRAM_DATA).count("1") and a[2] == bin(SRAM_DATA + 4).count("1")


def test_each_instruction_is_one_sample_at_its_start_cycle(tracer_factory):
    tr = tracer_factory("aes")
    ref = tr.reference(parse_window("all"), {})
    starts = np.flatnonzero(np.diff(np.concatenate([[0], ref.pcs.astype(np.int64)])) != 0)
    assert ref.instructions == tr.machine.instructions  # every instruction of the run recorded once
    assert (ref.pcs != 0).all()  # and together they cover every cycle (no sleep in aes.elf)
    assert len(starts) <= ref.instructions


def test_a_traced_run_takes_the_same_cycles_as_a_plain_one(make_machine, elf, config):
    plain = make_machine()
    plain.load(elf("aes"))
    r0 = plain.run(max_cycles=10**6)
    traced = make_machine()
    traced.load(elf("aes"))
    leak = CpuLeakage(traced, config.power)
    out = np.zeros(r0.cycles + 10)
    leak.arm(0, r0.cycles + 10, out)
    r1 = traced.run(max_cycles=10**6)
    assert leak.disarm() == r1.instructions
    assert (r1.cycles, r1.instructions, r1.exit_code) == (r0.cycles, r0.instructions, r0.exit_code)


# ---------------------------------------------------------------------- the PKA

@settings(max_examples=40, deadline=None)
@given(words=st.integers(1, 16), seed=st.integers(0, 2**32))
def test_montgomery_rows_end_in_the_pka_result(words, seed):
    rnd = random.Random(seed)
    n = rnd.getrandbits(32 * words) | 1 | 1 << (32 * words - 1)
    a, b = rnd.randrange(n), rnd.randrange(n)
    t = montgomery_rows(a, b, n, 32, words)[-1]
    assert (t - n if t >= n else t) == a * b * pow(2, -32 * words, n) % n


TIMING = {"montmul": (0.3523, 3, 16), "add": (0, 1, 8), "sub": (0, 1, 8), "modadd": (0, 2, 8), "modsub": (0, 2, 8)}


@settings(max_examples=60, deadline=None)
@given(words=st.integers(1, 24), seed=st.integers(0, 2**32),
       name=st.sampled_from(["MONTMUL", "ADD", "SUB", "MODADD", "MODSUB"]))
def test_native_pka_leakage_equals_the_numpy_model(words, seed, name):
    rnd = random.Random(seed)
    n = rnd.getrandbits(32 * words) | 1
    a, b = rnd.getrandbits(32 * words), rnd.getrandbits(32 * words)  # the lenient PKA takes any A, B
    cycles = {"MONTMUL": 16 + 3 * words + int(0.3523 * words * words) + 1}.get(name, 2 * words + 8)
    op = Started(name, words, a, b, n, 0, cycles)
    weights = {"constant": 3.0, "hd_read": 2.0, "hd_write": 1.5}
    fast = operation_leakage(op, 32, TIMING, weights)
    slow = operation_leakage(op, 32, TIMING, weights, use_native=False)
    assert np.allclose(fast, slow)


def test_pka_leakage_depends_on_the_operands_and_not_only_on_the_timing():
    rnd = random.Random(7)
    n = rnd.getrandbits(512) | 1 | 1 << 511
    weights = dict(DEFAULT_PKA)
    one = operation_leakage(Started("MONTMUL", 16, 1, 1, n, 0, 155), 32, TIMING, weights)
    other = operation_leakage(Started("MONTMUL", 16, rnd.randrange(n), rnd.randrange(n), n, 0, 155), 32, TIMING,
                              weights)
    assert one.shape == other.shape == (155,)
    assert (one[:16] == weights["constant"]).all()  # set-up: no data moves
    assert not np.allclose(one, other)


def test_pka_leakage_for_another_digit_size_is_the_numpy_model():
    op = Started("MONTMUL", 4, 12345, 67890, (1 << 127) | 1, 0, 50)
    out = operation_leakage(op, 17, {"montmul": (0.5, 3, 4)}, dict(DEFAULT_PKA))
    assert out.shape == (50,) and out.max() > DEFAULT_PKA["constant"]


# ---------------------------------------------------------------------- the chip file

def test_the_default_chip_states_the_default_weights(config):
    assert config.power == default_power()
    assert config.power.cpu["load"]["hw_op2"] == DEFAULT_CPU["load"][2]


def chip_without_power(repo) -> str:
    """The default chip file's text without its power: section (the last one)."""
    text = (repo / "configs" / "ciu98320b.yaml").read_text()
    return text[:text.index("\npower:")]


def test_a_chip_file_without_a_power_section_gets_the_defaults(repo):
    assert parse_config(chip_without_power(repo), "x.yaml").power == default_power()


def test_a_power_section_changes_only_the_weights_it_names(repo):
    text = chip_without_power(repo) + "\npower:\n  cpu:\n    mul: {hw_result: 9}\n  pka:\n    hd_write: 4\n"
    power = parse_config(text, "x.yaml").power
    assert power.cpu["mul"]["hw_result"] == 9 and power.pka["hd_write"] == 4
    expected = default_power()
    expected.cpu["mul"]["hw_result"] = 9
    expected.pka["hd_write"] = 4
    assert dataclasses.asdict(power) == dataclasses.asdict(expected)


@pytest.mark.parametrize("section, message", [
    ("power:\n  cpu:\n    muls: {constant: 1}\n", "power.cpu.muls: unknown instruction class"),
    ("power:\n  cpu:\n    mul: {hw: 1}\n", "power.cpu.mul.hw: unknown term"),
    ("power:\n  pka:\n    hd_read: -1\n", "power.pka.hd_read: expected 0.."),
    ("power:\n  pka:\n    hd_read: yes\n", "power.pka.hd_read: expected a number"),
])
def test_a_bad_power_section_names_file_line_and_key(repo, section, message):
    text = chip_without_power(repo) + "\n" + section
    with pytest.raises(ConfigError, match=r"x\.yaml:\d+: " + message.replace(".", r"\.")):
        parse_config(text, "x.yaml")


def test_the_pka_hands_every_operation_s_operands_to_on_start(make_machine, elf):
    m = make_machine()
    m.load(elf("rsa_power"))
    pka = m.peripherals["pka"]
    seen: list[Started] = []
    pka.on_start = seen.append
    assert pka.state.fast_on == 0  # START must reach the Python model, which calls on_start
    r = m.run(max_cycles=10**7)
    assert r.exit_code == 0
    assert len(seen) == sum(pka.operations.values()) > 1000
    q = int.from_bytes(m.read_symbol("rsa_q"), "little")
    mont = [op for op in seen if op.name == "MONTMUL" and op.n == q]
    assert mont and all(op.words == 16 and op.cycles == pka.cycles_for("montmul", 16) for op in mont)
    pka.on_start = None
    assert pka.state.fast_on == 1  # the fast path is back
