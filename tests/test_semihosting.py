"""ARM semihosting: console output and exit codes."""

from __future__ import annotations

from emulator.machine import StopReason

SRAM_CODE = 0x20002000


def test_hello_writes_stdout_and_stderr(make_machine, elf):
    m = make_machine()
    m.load(elf("hello"))
    r = m.run(max_cycles=10**6)
    assert m.stdout.getvalue().startswith(b"Hello from pkasim")
    assert b"stderr" in m.stderr.getvalue()
    assert r.reason == StopReason.EXIT and r.exit_code == 0


def test_firmware_exit_code_is_kept(make_machine, elf):
    m = make_machine()
    m.load(elf("fault"))
    m.write_symbol("fault_kind", (99).to_bytes(4, "little"))  # unknown kind: main returns 2
    r = m.run(max_cycles=10**6)
    assert r.exit_code == 2


def run_exit(make_machine, elf, reason_code_bytes: str):
    m = make_machine()
    m.load(elf("bench"))
    m.write_memory(SRAM_CODE, bytes.fromhex(reason_code_bytes))
    m.set_reg("pc", SRAM_CODE)
    return m.run(max_cycles=10**5)


def test_sys_exit_with_application_exit_is_success(make_machine, elf):
    """``movs r0,#0x18`` (2018); r1 = 0x20026: ``movs r1,#2`` (2102), ``lsls r1,r1,#16``
    (0409), ``adds r1,#0x26`` (3126); ``bkpt 0xab`` (beab)."""
    r = run_exit(make_machine, elf, "182002210904263189be"[:16] + "abbe")
    assert r.reason == StopReason.EXIT and r.exit_code == 0


def test_sys_exit_with_another_reason_is_failure(make_machine, elf):
    """As above with ``adds r1,#0x24`` (3124): ADP_Stopped_RunTimeErrorUnknown."""
    r = run_exit(make_machine, elf, "1820022109042431abbe")
    assert r.reason == StopReason.EXIT and r.exit_code == 1


def test_semihosting_call_costs_one_bkpt_cycle(make_machine, elf):
    r = run_exit(make_machine, elf, "1820022109042631abbe")
    assert r.cycles == 5 and r.instructions == 5  # four 1-cycle ALU ops and the BKPT
