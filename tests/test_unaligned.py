"""ARMv6-M takes HardFault on every unaligned word or halfword access, whatever made
the address: a register the block received, or one it computed or loaded itself
(docs/cycle-model.md, "Alignment"). SP is always word aligned (its bits [1:0] read as
zero), so SP-relative accesses never fault.

The matrix (tests/unaligned_cases.py) is one image: each case makes a value inside a
block in one way (every data-processing instruction, loads, POP, LDM, ...) and uses it
at once as an address, misaligned and aligned. pkasim must print what an ARMv6-M core
does, and what QEMU's Cortex-M0 board prints for the same ELF.
"""

from __future__ import annotations

import io
import shutil
import subprocess

import pytest
import unaligned_cases as U
from elftools.elf.elffile import ELFFile

from emulator.machine import Machine, StopReason

QEMU_MACHINE = "microbit"  # QEMU's Cortex-M0 board: flash at 0, 16 KiB SRAM at 0x20000000
QEMU_TIMEOUT = 120  # seconds; only a guard against a hung QEMU
SRAM_CODE = 0x20002000
CASES = U.build_cases()
PRODUCERS = [p.name for p in U.PRODUCERS]
SP_CONSUMERS = [c.name for c in U.CONSUMERS if c.form == "sp"]


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    if U.assembler() is None:
        pytest.skip("no ARM assembler (pip package ziglang, or arm-none-eabi-gcc)")
    return U.build_image(CASES, tmp_path_factory.mktemp("unaligned"))


@pytest.fixture(scope="module")
def expected(image) -> list[str]:
    with open(image, "rb") as f:
        symtab = ELFFile(f).get_section_by_name(".symtab")
        addr = {s.name: s["st_value"] for s in symtab.iter_symbols()}
    return U.expected_lines(CASES, lambda c: addr[f"case_{c.index}_access"] & ~1)


@pytest.fixture(scope="module")
def pkasim_lines(image, config) -> list[str]:
    m = Machine(config, stdout=io.BytesIO(), stderr=io.BytesIO())
    m.load(image)
    r = m.run(max_cycles=10**8)
    assert r.reason == StopReason.EXIT and r.exit_code == 0, r
    return m.stdout.getvalue().decode().splitlines()


@pytest.fixture(scope="module")
def qemu_lines(image) -> list[str]:
    qemu = shutil.which("qemu-system-arm")
    if qemu is None:
        pytest.skip("qemu-system-arm is not installed (apt-get install qemu-system-arm)")
    if QEMU_MACHINE not in subprocess.run([qemu, "-M", "help"], capture_output=True, text=True).stdout.split():
        pytest.skip(f"this qemu-system-arm has no '{QEMU_MACHINE}' (Cortex-M0) board")
    done = subprocess.run([qemu, "-M", QEMU_MACHINE, "-nographic", "-monitor", "none", "-serial", "none",
                           "-semihosting-config", "enable=on,target=native", "-kernel", str(image)],
                          capture_output=True, timeout=QEMU_TIMEOUT)
    assert done.returncode == 0, done
    return (done.stdout + done.stderr).decode().splitlines()  # QEMU's semihosting console is stderr


def _wrong(lines: list[str], expected: list[str], keep) -> list[tuple[str, str, str]]:
    return [(c.name, lines[c.index] if c.index < len(lines) else "(missing)", expected[c.index])
            for c in CASES if keep(c) and (c.index >= len(lines) or lines[c.index] != expected[c.index])]


@pytest.mark.parametrize("producer", PRODUCERS)
def test_an_unaligned_access_through_a_register_the_block_made_faults_at_that_access(
        producer, pkasim_lines, expected):
    assert _wrong(pkasim_lines, expected, lambda c: c.producer.name == producer and c.faults) == []


@pytest.mark.parametrize("producer", PRODUCERS)
def test_an_aligned_access_through_a_register_the_block_made_runs(producer, pkasim_lines, expected):
    assert _wrong(pkasim_lines, expected,
                  lambda c: c.producer.name == producer and not c.faults and c.consumer.form != "sp") == []


@pytest.mark.parametrize("consumer", SP_CONSUMERS)
def test_sp_written_from_a_register_keeps_its_low_two_bits_clear(consumer, pkasim_lines, expected):
    """``mov sp, r3`` / ``msr msp, r3`` with r3 = 0x20003001..3: SP becomes 0x20003000,
    so the PUSH, POP, LDR or STR after it is aligned and does not fault."""
    assert _wrong(pkasim_lines, expected, lambda c: c.consumer.name == consumer) == []


def test_every_case_has_an_unaligned_variant_that_faults():
    """The matrix itself: each producer is tried with a misaligned address."""
    assert {c.producer.name for c in CASES if c.faults} == set(PRODUCERS)


@pytest.mark.parametrize("producer", PRODUCERS)
def test_same_faults_as_qemu(producer, pkasim_lines, qemu_lines):
    mine = [c for c in CASES if c.producer.name == producer]
    assert [(c.name, pkasim_lines[c.index]) for c in mine] == [(c.name, qemu_lines[c.index]) for c in mine]


# --------------------------------------------------------------------------- one case, in detail

def at_main(make_machine, elf):
    m = make_machine()
    m.load(elf("anywhere"))
    m.run(until="main", max_cycles=10**5)
    return m


def run_sram(m, code: str, **regs: int):
    m.write_memory(SRAM_CODE, bytes.fromhex(code))
    for name, value in regs.items():
        m.set_reg(name, value)
    m.set_reg("pc", SRAM_CODE)


LOADED_POINTER = "0b68" "1c68" "fee7"  # ldr r3, [r1]; ldr r4, [r3]; b .
CELL = 0x20003000


def test_the_fault_is_taken_at_the_access_with_the_registers_the_block_left(make_machine, elf):
    """``ldr r3, [r1]`` loads 0x20001001, ``ldr r4, [r3]`` faults: HardFault entry with
    the access as stacked PC, after the first load's 2 cycles and the 16 of the entry."""
    m = at_main(make_machine, elf)
    m.write_u32(CELL, 0x20001001)
    run_sram(m, LOADED_POINTER, r1=CELL)
    before = m.cycles
    r = m.run(until="HardFault_Handler", max_cycles=10**5)
    assert r.reason == StopReason.UNTIL
    assert r.fault.pc == SRAM_CODE + 2 and r.fault.instruction == "ldr r4, [r3]"
    assert r.fault.cause.startswith("unaligned access to 0x20001001")
    assert r.fault.address == 0x20001001 and r.fault.registers["r3"] == 0x20001001
    assert m.cycles - before == 2 + 16
    assert m.read_u32(m.reg("sp") + 24) == SRAM_CODE + 2  # the stacked return address


def test_an_unaligned_loaded_pointer_reaches_the_firmware_hardfault_handler(make_machine, elf):
    m = at_main(make_machine, elf)
    m.write_u32(CELL, 0x20001002)
    run_sram(m, LOADED_POINTER, r1=CELL)
    r = m.run(max_cycles=10**5)
    assert r.reason == StopReason.EXIT and r.exit_code == 3 and m.stdout.getvalue() == b"HardFault\n"
    assert m.exceptions_taken == {"HardFault": 1}


def test_single_steps_run_the_load_then_fault_at_the_access(make_machine, elf):
    m = at_main(make_machine, elf)
    m.write_u32(CELL, 0x20001001)
    run_sram(m, LOADED_POINTER, r1=CELL)
    assert m.step().reason == StopReason.STEP and m.pc == SRAM_CODE + 2 and m.reg("r3") == 0x20001001
    m.step()
    assert m.active_exception() == 3 and m.last_fault.pc == SRAM_CODE + 2


# ldr r3, [r1] (SysTick RVR: a peripheral, not read before the block runs);
# ldr r4, [r0, r3]; movs r5, #1; b .
PERIPHERAL_POINTER = "0b68" "c458" "0125" "fee7"


def _peripheral_pointer(m, rvr: int) -> None:
    m.peripherals["systick"].write(U.SYST_RVR - 0xE000E010, 4, rvr)
    run_sram(m, PERIPHERAL_POINTER, r0=0x20001000, r1=U.SYST_RVR)


def test_a_pointer_read_from_a_peripheral_is_checked_at_the_access(make_machine, elf):
    m = at_main(make_machine, elf)
    _peripheral_pointer(m, 0x41)
    r = m.run(until="HardFault_Handler", max_cycles=10**5)
    assert r.fault.pc == SRAM_CODE + 2 and r.fault.address == 0x20001041


def _checks(m, on: bool) -> None:
    m.core.state.align_enabled = int(on)
    m.core.code.clear()
    m.core.uc.ctl_flush_tb()


@pytest.mark.parametrize("rvr", [0x40, 0x44])
def test_checking_a_peripheral_pointer_costs_no_cycles(make_machine, elf, rvr):
    """The block is run in two parts to check the access where it happens; the count
    is that of the whole block, as without checks."""
    counts = []
    for on in (True, False):
        m = at_main(make_machine, elf)
        _checks(m, on)
        _peripheral_pointer(m, rvr)
        before = (m.cycles, m.instructions)
        r = m.run(until=SRAM_CODE + 6, max_cycles=10**5)
        assert r.reason == StopReason.UNTIL and r.fault is None
        counts.append((m.cycles - before[0], m.instructions - before[1], m.reg("r5")))
    assert counts[0] == counts[1] == (2 + 2 + 1, 3, 1)


@pytest.mark.parametrize("name", ["compute", "calls", "bench"])
def test_alignment_checks_change_no_cycle_count(make_machine, elf, name):
    """Whole images, with and without the checks: the same cycles and instructions."""
    counts = []
    for on in (True, False):
        m = make_machine()
        m.load(elf(name))
        _checks(m, on)
        r = m.run(max_cycles=2 * 10**7)
        counts.append((r.reason, r.exit_code, r.cycles, r.instructions))
    assert counts[0] == counts[1]

