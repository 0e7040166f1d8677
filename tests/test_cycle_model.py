"""Every instruction class costs what ARM DDI0432C table 3-1 says (docs/cycle-model.md).

The expected figures live beside the microbenchmarks in firmware/images/bench_expected.txt,
one line per bench_<class> function: its cycles with the 1-cycle and the 32-cycle
multiplier, from its first instruction through its `bx lr`.
"""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pytest

from pkasim.chip.config import ChipConfig
from pkasim.core.machine import Machine

EXPECTED = Path(__file__).resolve().parent.parent / "firmware" / "images" / "bench_expected.txt"


def _expected() -> list[tuple[str, int, int]]:
    rows = []
    for line in EXPECTED.read_text().splitlines():
        fields = line.split("#", 1)[0].split()
        if fields:
            rows.append((fields[0], int(fields[1]), int(fields[2])))
    return rows


def with_core(config: ChipConfig, **changes) -> ChipConfig:
    return dataclasses.replace(config, core=dataclasses.replace(config.core, **changes))


def with_flash_wait_states(config: ChipConfig, ws: int) -> ChipConfig:
    flash = dataclasses.replace(config.flash, wait_states=ws)
    return dataclasses.replace(config, memory={**config.memory, "flash": flash})


@pytest.fixture(scope="module")
def bench_machines(config, elf):
    machines = {}
    for muls in (1, 32):
        m = Machine(with_core(config, muls_cycles=muls), stdout=io.BytesIO(), stderr=io.BytesIO())
        m.load(elf("bench"))
        machines[muls] = m
    return machines


@pytest.mark.parametrize("name,fast,slow", _expected(), ids=[r[0] for r in _expected()])
def test_instruction_class_costs_its_trm_cycles(bench_machines, name, fast, slow):
    for muls, expected in ((1, fast), (32, slow)):
        m = bench_machines[muls]
        m.reset()
        assert m.call(name) == expected, f"{name} with the {muls}-cycle multiplier"


def test_conditional_branch_costs_three_taken_and_one_not_taken(bench_machines):
    m = bench_machines[1]
    m.reset()
    taken = m.call("bench_bcc_taken")
    m.reset()
    not_taken = m.call("bench_bcc_not_taken")
    # both: CMP (1) + 32 branches + bx lr (3)
    assert (taken - 4) / 32 == 3
    assert (not_taken - 4) / 32 == 1


def test_muls_costs_the_configured_multiplier(bench_machines):
    cycles = {}
    for muls, m in bench_machines.items():
        m.reset()
        cycles[muls] = m.call("bench_muls")
    assert cycles[32] - cycles[1] == 32 * 31


def test_instruction_count_is_exact(bench_machines):
    m = bench_machines[1]
    m.reset()
    before = m.instructions
    m.call("bench_nop")
    assert m.instructions - before == 33  # 32 NOPs and the bx lr


def test_flash_wait_states_cost_once_per_fetched_word(make_machine, config, elf):
    # bench_nop is word aligned: 33 sequential 16-bit instructions fetch 17 words.
    for ws in (1, 2, 3):
        m = make_machine(with_flash_wait_states(config, ws))
        m.load(elf("bench"))
        assert m.image.symbol("bench_nop").address % 4 == 0
        assert m.call("bench_nop") == 35 + 17 * ws


def test_flash_wait_states_cost_on_each_literal_load(make_machine, config, elf):
    ws = 2
    m = make_machine(with_flash_wait_states(config, ws))
    m.load(elf("bench"))
    assert m.image.symbol("bench_ldr_lit").address % 4 == 0
    # 17 instruction words fetched, and 32 literal reads from flash
    assert m.call("bench_ldr_lit") == 67 + 17 * ws + 32 * ws


def test_taken_branch_refetches_its_target_word(make_machine, config, elf):
    ws = 1
    m = make_machine(with_flash_wait_states(config, ws))
    m.load(elf("bench"))
    # each of the 33 instructions starts a new fetch (32 taken branches to the next one)
    assert m.call("bench_b") == 99 + 33 * ws


def test_exception_entry_costs_sixteen_cycles(make_machine, elf):
    m = make_machine()
    m.load(elf("bench"))
    m.nvic.set_pending(15)  # SysTick
    before = m.cycles
    m.step()
    assert m.cycles - before == 16
    assert m.active_exception() == 15
    assert m.reg("lr") == 0xFFFFFFF9


def test_same_image_gives_the_same_cycles_every_run(make_machine, elf):
    results = []
    for _ in range(3):
        m = make_machine()
        m.load(elf("compute"))
        r = m.run(max_cycles=10**9)
        results.append((r.cycles, r.instructions, r.exit_code))
    assert results[0] == results[1] == results[2]
    assert results[0][2] == 0


def test_peripheral_access_is_seen_at_the_cycle_its_instruction_starts(make_machine, elf):
    # systick_probe: STR to SysTick CSR, 10 NOPs, LDR of CVR, all in one basic block:
    # the counter has run 12 cycles when CVR is read (reload, then 11 decrements).
    m = make_machine()
    m.load(elf("timing"))
    m.run(until="main", max_cycles=10**5)
    m.call("systick_probe")
    assert m.reg("r0") == 0xFFFFFF - 11


def test_calls_can_follow_one_another_without_growing_the_stack(bench_machines):
    m = bench_machines[1]
    m.reset()
    sp = m.reg("sp")
    for _ in range(50):
        m.call("bench_push_pop")
    assert m.reg("sp") == sp


def _capstone_says_idle_ok(md, hw: int) -> bool:
    from pkasim.core import cycles
    found = list(md.disasm_lite(hw.to_bytes(2, "little"), 0x1000))
    if len(found) != 1:
        return False
    base = found[0][2].split(".")[0]
    return base in cycles._IDLE_OK or (base.startswith("b") and len(base) == 3 and base != "blx")


def test_idle_loop_table_agrees_with_capstone_on_every_16_bit_instruction():
    """The polling-loop verdict decides 16-bit code from the encoding, without capstone."""
    from pkasim.core import cycles
    md = cycles._md()
    wrong = [hex(hw) for hw in range(0x10000) if hw >> 11 < 0x1D and cycles.idle_ok16(hw) != _capstone_says_idle_ok(md, hw)]
    assert wrong == []


def test_idle_loop_verdict_of_code_with_a_32_bit_instruction_still_asks_capstone():
    from pkasim.core import cycles
    ldr = bytes.fromhex("0868")  # ldr r0, [r1]
    assert not cycles.loop_can_idle(ldr + bytes.fromhex("00f000f8"), 0x1000)  # bl
    assert cycles.loop_can_idle(ldr + bytes.fromhex("fff7febf"), 0x1000)  # capstone's "b.w", as before


def test_idle_loop_registers_cover_every_register_each_16_bit_loop_instruction_reads_or_writes():
    """idle.c compares only the registers a polling loop's code names (and APSR): for every
    instruction a loop may hold, they include all capstone says it reads or writes."""
    from capstone import arm_const as A

    from pkasim.core import cycles
    md = cycles._md()
    number = {getattr(A, f"ARM_REG_R{n}"): n for n in range(13)} | {A.ARM_REG_SP: 13, A.ARM_REG_LR: 14}
    missed = []
    for hw in range(0x10000):
        if hw >> 11 >= 0x1D or not cycles.idle_ok16(hw):
            continue
        insn = next(md.disasm(hw.to_bytes(2, "little"), 0x1000))
        read, written = insn.regs_access()
        touched = {number[r] for r in (*read, *written) if r in number}
        mask = cycles.loop_registers(hw.to_bytes(2, "little"))
        if mask & cycles.APSR_BIT == 0 or any(not mask >> r & 1 for r in touched):
            missed.append(hex(hw))
    assert missed == []


def test_idle_loop_of_a_32_bit_instruction_compares_every_register():
    from pkasim.core import cycles
    assert cycles.loop_registers(bytes.fromhex("0868fff7febf")) == 0  # ldr; b.w: 0 stands for all
    assert cycles.loop_registers(bytes.fromhex("1368") + bytes.fromhex("0b42") + bytes.fromhex("fcd1")) == (
        cycles.APSR_BIT | 1 << 1 | 1 << 2 | 1 << 3)  # ldr r3, [r2]; tst r3, r1; bne: the ECC poll
