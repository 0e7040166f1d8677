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
import json
import os
import shutil
import subprocess
import sys

import pytest
import unaligned_cases as U
from elftools.elf.elffile import ELFFile
from hypothesis import given, settings
from hypothesis import strategies as st

from pkasim.core.machine import Machine, StopReason

QEMU_MACHINE = "microbit"  # QEMU's Cortex-M0 board: flash at 0, 16 KiB SRAM at 0x20000000
QEMU_TIMEOUT = 120  # seconds; only a guard against a hung QEMU
SRAM_CODE = 0x20002000
CELL = 0x20003000  # a word of SRAM the cases below load pointers from
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


# The matrix on the stock wheel, in a process of its own (the engine is chosen once per
# process): there the native hook's register checks and alignment programs (quick ones
# inline, unaligned.h) find every fault; on pkasim's engine the engine does.
STOCK_RUN = r"""
import io, sys
from pkasim.chip.config import load_config
from pkasim.core.machine import Machine
from pkasim.native import engine
m = Machine(load_config(), stdout=io.BytesIO(), stderr=io.BytesIO())
m.load(sys.argv[1])
r = m.run(max_cycles=10**8)
print(engine.selected(), r.reason.value, r.exit_code)
sys.stdout.write(m.stdout.getvalue().decode())
"""


@pytest.fixture(scope="module")
def stock_lines(image) -> list[str]:
    done = subprocess.run([sys.executable, "-c", STOCK_RUN, str(image)], env={**os.environ, "PKASIM_ENGINE": "stock"},
                          capture_output=True, text=True, timeout=QEMU_TIMEOUT, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "stock exit 0", lines[0]
    return lines[1:]


def test_the_stock_wheel_faults_where_the_core_does(stock_lines, expected):
    assert _wrong(stock_lines, expected, lambda c: True) == []


# On the stock wheel: a block that ran aligned and was cached, then misaligned (the
# hook's short path checks it: register checks, a quick program inline, the general
# program), and addresses with an operand the checks leave out as aligned (an index
# scaled by 4, SP: the fault still names the access's whole address). Each case runs
# at SRAM_CODE; (code, registers, words at CELL, faulting instruction's offset,
# faulting address).
P = 0x20001000
STOCK_CASES = {
    # ldr r4, [r3]; adds r3, #4; subs r2, #1; bne 0; adds r3, #1; str r2, [r1]; movs r2, #1; b 0 (the
    # store: the outer loop is no idle loop, so the idle check follows neither loop)
    "register-check": ("1c68" "0433" "013a" "fbd1" "0133" "0a60" "0122" "f7e7", {"r3": P, "r2": 5, "r1": CELL}, [],
                       0, P + 21),
    # ldr r3, [r1]; ldr r4, [r3]; adds r1, #4; subs r2, #1; bne 0; b .
    "quick-program": ("0b68" "1c68" "0431" "013a" "fad1" "fee7", {"r1": CELL, "r2": 4}, [P, P + 4, P + 8, P + 13], 2,
                      P + 13),
    # ldr r5, [r1]; adds r3, r5, r0; ldr r4, [r3]; adds r1, #4; subs r2, #1; bne 0; b .
    "general-program": ("0d68" "2b18" "1c68" "0431" "013a" "f9d1" "fee7", {"r0": P, "r1": CELL, "r2": 4},
                        [0, 4, 8, 14], 4, P + 14),
    # str r6, [r7]; ldr r3, [r1]; ldr r4, [r3]; adds r6, #2; subs r2, #1; bne 0; b .  (r7 = r1: the load
    # reads what the store before it wrote)
    "store-then-load": ("3e60" "0b68" "1c68" "0236" "013a" "f9d1" "fee7", {"r1": CELL, "r7": CELL, "r6": P, "r2": 5},
                        [P], 4, P + 2),
    # lsls r1, r1, #2; ldr r0, [r2, r1]; b .
    "scaled-index": ("8900" "5058" "fee7", {"r1": 1, "r2": P + 1}, [], 2, P + 5),
    # add r0, sp, #0; str r0, [r7, r0]; b .
    "sp-based": ("00a8" "3850" "fee7", {"sp": 0x20003800, "r7": 1}, [], 2, 0x20003801),
}
STOCK_CASES_RUN = r"""
import io, json, sys
from pkasim.chip.config import load_config
from pkasim.core.machine import Machine
from pkasim.native import engine
out = []
for code, regs, words, cell, sram in json.loads(sys.argv[2]):
    m = Machine(load_config(), stdout=io.BytesIO(), stderr=io.BytesIO())
    m.load(sys.argv[1])
    m.run(until="main", max_cycles=10**5)
    for i, w in enumerate(words):
        m.write_u32(cell + 4 * i, w)
    m.write_memory(sram, bytes.fromhex(code))
    for name, value in regs.items():
        m.set_reg(name, value)
    m.set_reg("pc", sram)
    r = m.run(until="HardFault_Handler", max_cycles=10**6)
    out.append([r.reason.value, r.fault.pc if r.fault else None, r.fault.address if r.fault else None, m.cycles])
print(json.dumps({"engine": engine.selected(), "runs": out}))
"""


def _stock_cases(elf, engine_name: str) -> dict:
    cases = [[code, regs, words, CELL, SRAM_CODE] for code, regs, words, _, _ in STOCK_CASES.values()]
    done = subprocess.run([sys.executable, "-c", STOCK_CASES_RUN, str(elf("anywhere")), json.dumps(cases)],
                          env={**os.environ, "PKASIM_ENGINE": engine_name}, capture_output=True, text=True,
                          timeout=QEMU_TIMEOUT, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def cases_on_stock(elf) -> list:
    got = _stock_cases(elf, "stock")
    assert got["engine"] == "stock"
    return got["runs"]


@pytest.mark.parametrize("index", range(len(STOCK_CASES)), ids=list(STOCK_CASES))
def test_an_unaligned_access_faults_there_with_its_address_on_the_stock_wheel(cases_on_stock, index):
    _, _, _, offset, address = list(STOCK_CASES.values())[index]
    assert cases_on_stock[index][:3] == ["until", SRAM_CODE + offset, address]


def test_the_stock_wheels_faults_come_at_the_cycles_of_the_default_engine(cases_on_stock, elf):
    """The same cases on the default engine (pkasim's own where it is built): the same
    fault, at the same cycle count."""
    assert _stock_cases(elf, "auto")["runs"] == cases_on_stock


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



# loop: ldr r3, [r1] (SysTick RVR); ldr r4, [r0, r3]; adds r5, #1; b loop
PERIPHERAL_LOOP = "0b68" "c458" "0135" "fbe7"


def test_a_split_block_takes_interrupts_where_the_whole_block_would(make_machine, elf):
    """SysTick interrupts a loop whose block is run in two parts on every iteration:
    the interrupts land where they land without the checks (at block ends), so the
    loop count, the handler count and the cycles agree."""
    seen = []
    for on in (True, False):
        m = make_machine()
        m.load(elf("systick"))
        m.run(until="main", max_cycles=10**5)
        _checks(m, on)
        systick = m.peripherals["systick"]
        systick.write(4, 4, 0x40)  # RVR: a period of 65 cycles, and the loop's index
        systick.write(0, 4, 7)  # CSR: enable, interrupt, core clock
        run_sram(m, PERIPHERAL_LOOP, r0=0x20001000, r1=U.SYST_RVR, r5=0)
        handler = m.image.symbol("SysTick_Handler").address
        entries = []
        for _ in range(20):
            m.run(until=handler, max_cycles=5000)
            entries.append((m.cycles, m.read_u32(m.reg("sp") + 24)))  # the stacked return address
            m.step()
        seen.append((entries, m.instructions, m.reg("r5")))
    assert seen[0] == seen[1]
    assert {pc for _, pc in seen[0][0]} == {SRAM_CODE}  # taken between iterations, never mid-block


def test_a_step_over_mov_sp_clears_the_low_bits_of_sp(make_machine, elf):
    """``mov sp, r3`` (469d) with r3 = 0x20003001, then ``push {r4}`` (b410)."""
    m = at_main(make_machine, elf)
    run_sram(m, "9d46" "10b4" "fee7", r3=0x20003001)
    assert m.step().reason == StopReason.STEP and m.reg("sp") == 0x20003000
    m.step()
    assert m.reg("sp") == 0x20002FFC and m.last_fault is None


@pytest.mark.parametrize("stop", ["until", "breakpoint"])
def test_a_run_asked_to_stop_at_a_split_access_stops_there(make_machine, elf, stop):
    """The block is split at ``ldr r4, [r0, r3]``; a run told to stop there (an
    'until' address or a breakpoint) stops before it, after the first load."""
    m = at_main(make_machine, elf)
    _peripheral_pointer(m, 0x44)
    before = m.cycles
    if stop == "until":
        r = m.run(until=SRAM_CODE + 2, max_cycles=10**5)
        assert r.reason == StopReason.UNTIL
    else:
        m.add_breakpoint(SRAM_CODE + 2)
        r = m.run(max_cycles=10**5)
        assert r.reason == StopReason.BREAKPOINT
    assert m.pc == SRAM_CODE + 2 and m.cycles - before == 2 and m.reg("r3") == 0x44
    r = m.run(until=SRAM_CODE + 6, max_cycles=10**5)
    assert r.reason == StopReason.UNTIL and m.cycles - before == 5 and m.reg("r5") == 1


# --------------------------------------------------------------------------- random blocks

BUF = 0x20001000  # 256 bytes of pointers into itself, some misaligned
STACK = 0x20001800
FLASH_CODE = 0x00040000  # the random block: in flash, so no store of it rewrites it


def _enc(kind: str, d) -> int:
    """One random ARMv6-M instruction (16-bit), registers r0-r7 (r8 for the high forms)."""
    r = lambda: d.draw(st.integers(0, 7))  # noqa: E731
    if kind == "shift":
        return d.draw(st.integers(0, 2)) << 11 | d.draw(st.integers(0, 31)) << 6 | r() << 3 | r()
    if kind == "addsub":
        return 0x1800 | d.draw(st.integers(0, 3)) << 9 | r() << 6 | r() << 3 | r()
    if kind == "imm8":
        return 0x2000 | d.draw(st.integers(0, 3)) << 11 | r() << 8 | d.draw(st.integers(0, 255))
    if kind == "alu":
        return 0x4000 | d.draw(st.integers(0, 15)) << 6 | r() << 3 | r()
    if kind == "hi":  # mov r8, rX / add rX, r8 / mov rX, r8 / add r8, rX
        return d.draw(st.sampled_from([0x4680 | r() << 3, 0x4440 | r(), 0x4640 | r(), 0x4480 | r() << 3]))
    if kind == "ldst_reg":
        return 0x5000 | d.draw(st.integers(0, 7)) << 9 | r() << 6 | r() << 3 | r()
    if kind == "ldst_imm":
        base = d.draw(st.sampled_from([0x6000, 0x7000, 0x8000]))
        return base | d.draw(st.integers(0, 1)) << 11 | d.draw(st.integers(0, 7)) << 6 | r() << 3 | r()
    if kind == "sp":  # STR/LDR [sp, #imm], ADD rd, sp, #imm, ADR
        return d.draw(st.sampled_from([0x9000, 0x9800, 0xA800, 0xA000])) | r() << 8 | d.draw(st.integers(0, 15))
    if kind == "ext":
        return d.draw(st.sampled_from([0xB200, 0xBA00])) | d.draw(st.sampled_from([0, 1, 3])) << 6 | r() << 3 | r()
    if kind == "pushpop":
        return d.draw(st.sampled_from([0xB400, 0xBC00])) | d.draw(st.integers(1, 255))
    if kind == "ldm":
        return 0xC000 | d.draw(st.integers(0, 1)) << 11 | r() << 8 | d.draw(st.integers(1, 255))
    return 0x4685 | r() << 3  # mov sp, rX


KINDS = ["shift", "addsub", "imm8", "alu", "hi", "ldst_reg", "ldst_imm", "sp", "ext", "pushpop", "ldm", "movsp"]


@pytest.fixture(scope="module")
def anywhere(config, elf):
    from pkasim.chip.loader import load_image
    return Machine(config, stdout=io.BytesIO(), stderr=io.BytesIO()), load_image(elf("anywhere"), config)


def _outcome(m, how: str, end: int):
    if how == "run":
        m.run(until=end, max_cycles=10**5)
    else:
        while m.pc != end and m.last_fault is None and m.cycles < 10**5:
            m.step()
    f = m.last_fault
    if f is not None:
        return "fault", f.pc, f.cause, [f.registers[f"r{i}"] for i in range(8)] + [f.registers["sp"]]
    return "end", m.pc, m.cycles, [m.reg(f"r{i}") for i in range(8)] + [m.reg("sp")]


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_a_random_block_faults_where_single_steps_fault(anywhere, data):
    """A random straight-line block, run at full speed, stops where the same block
    stepped one instruction at a time stops (a step always starts a block, so its
    access's address is a register the block received), with the same registers."""
    m, image = anywhere
    n = data.draw(st.integers(1, 10))
    code = [_enc(data.draw(st.sampled_from(KINDS)), data) for _ in range(n)]
    words = data.draw(st.lists(st.integers(0, 255), min_size=64, max_size=64))
    regs = [data.draw(st.sampled_from([BUF + data.draw(st.integers(0, 255)), data.draw(st.integers(0, 2**32 - 1)),
                                       U.SYST_RVR])) for _ in range(8)]
    rvr = data.draw(st.integers(0, 255))
    sp = data.draw(st.sampled_from([STACK, BUF + 128]))  # the stack inside the pointers: stores alias loads
    blob = b"".join(h.to_bytes(2, "little") for h in code) + bytes.fromhex("fee7")
    end = FLASH_CODE + 2 * n
    outcomes = []
    for how in ("run", "step"):
        m.load(image)
        m.write_memory(BUF, b"".join((BUF + w).to_bytes(4, "little") for w in words))
        m.write_memory(FLASH_CODE, blob)
        m.peripherals["systick"].write(4, 4, BUF + rvr & 0xFFFFFF)
        for i, v in enumerate(regs):
            m.set_reg(f"r{i}", v)
        m.set_reg("r8", BUF + 6)
        m.set_reg("sp", sp)
        m.set_reg("pc", FLASH_CODE)
        outcomes.append(_outcome(m, how, end))
    assert outcomes[0] == outcomes[1], [f"{FLASH_CODE + 2 * i:08x}: {h:04x}" for i, h in enumerate(code)]
