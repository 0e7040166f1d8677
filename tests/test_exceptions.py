"""The ARMv6-M exception model the emulator adds to Unicorn: priorities, nesting,
tail-chaining, SVC, PRIMASK, SysTick interrupts and WFI sleeping until the next event."""

from __future__ import annotations

import pytest

from pkasim.core.machine import StopReason
from pkasim.native import engine

SRAM_CODE = 0x20002000


def run_image(make_machine, elf, name, **kw):
    m = make_machine()
    m.load(elf(name))
    return m, m.run(max_cycles=10**8, **kw)


def test_interrupts_nest_by_priority_and_tail_chain_by_number(make_machine, elf):
    m, r = run_image(make_machine, elf, "nested")
    trace = m.read_symbol("trace")[: int.from_bytes(m.read_symbol("trace_len"), "little")]
    # S: SVC at once; A: IRQ0; B: IRQ1 preempts IRQ0; a: IRQ0 finishes; V then C:
    # PendSV (14) and IRQ2 (18) tail-chain in number order; M: main; P: PRIMASK holds
    # IRQ1 back; B: taken at cpsie; E: the end.
    assert trace == b"SABaVCMPBE"
    assert r.reason == StopReason.EXIT and r.exit_code == 0


def test_each_taken_exception_is_counted(make_machine, elf):
    m, _ = run_image(make_machine, elf, "nested")
    assert m.exceptions_taken == {"SVCall": 1, "IRQ0": 1, "IRQ1": 2, "IRQ2": 1, "PendSV": 1}


def test_systick_interrupts_arrive_every_reload_plus_one_cycles(make_machine, elf):
    m = make_machine()
    m.load(elf("systick"))
    handler = m.image.symbol("SysTick_Handler").address
    m.add_breakpoint(handler)
    entries = []
    for _ in range(4):
        r = m.run(max_cycles=10**7)
        assert r.reason == StopReason.BREAKPOINT
        entries.append(m.cycles)
    periods = {b - a for a, b in zip(entries, entries[1:])}
    assert periods == {48_000}  # RVR = 47999: the core sleeps, so each wake is exact


def test_wfi_skips_to_the_next_event_instead_of_spinning(make_machine, elf):
    m, r = run_image(make_machine, elf, "systick")
    assert int.from_bytes(m.read_symbol("systick_count"), "little") == 10
    assert r.cycles >= 10 * 48_000
    assert r.instructions < 2_000  # ten wake-ups, not 480,000 cycles of polling
    assert r.sleep_cycles > 0.95 * r.cycles


def test_systick_output_is_printed(make_machine, elf):
    m, _ = run_image(make_machine, elf, "systick")
    assert b"SysTick interrupts: 10" in m.stdout.getvalue()


def test_exception_entry_stacks_the_frame_and_return_restores_it(make_machine, elf):
    m = make_machine()
    m.load(elf("bench"))
    for i, reg in enumerate(("r0", "r1", "r2", "r3", "r12")):
        m.set_reg(reg, 0x1000 + i)
    pc, sp = m.pc, m.reg("sp")
    m.nvic.set_pending(14)  # PendSV
    m.step()
    frame = [int.from_bytes(m.read_memory(m.reg("sp") + 4 * i, 4), "little") for i in range(8)]
    assert frame[:5] == [0x1000, 0x1001, 0x1002, 0x1003, 0x1004]
    assert frame[6] == pc
    assert frame[7] & (1 << 24)  # Thumb bit
    assert m.reg("sp") == sp - 32
    assert m.active_exception() == 14


def test_wfi_with_nothing_to_wake_the_core_ends_the_run(make_machine, elf):
    """SRAM code: ``wfi`` (bf30); ``b .-2`` (e7fd) - nothing enabled, nothing scheduled."""
    m = make_machine()
    m.load(elf("bench"))
    m.write_memory(SRAM_CODE, bytes.fromhex("30bffde7"))
    m.set_reg("pc", SRAM_CODE)
    r = m.run(max_cycles=10**6)
    assert r.reason == StopReason.SLEEP_FOREVER
    assert r.message.startswith(f"WFI at 0x{SRAM_CODE:08x}")  # the WFI itself
    assert "sleep forever" in r.message


def test_sleep_on_exit_with_nothing_to_wake_the_core_says_so_not_wfi(make_machine, elf):
    """SRAM code: SCR.SLEEPONEXIT = 1, then PendSV pended, whose handler (vector
    redirected to SRAM) is ``bx lr``: the return to thread mode sleeps, with the thread
    at ``b .`` and no WFI anywhere."""
    m = make_machine()
    m.load(elf("bench"))
    handler = SRAM_CODE + 0x40
    code = bytes.fromhex("00bf" "00bf" "00bf" "0648" "0221" "0160" "0548" "0649" "0160" "fee7" "00bf00bf")
    literals = [0, 0, 0xE000ED10, 0xE000ED04, 1 << 28]
    m.write_memory(SRAM_CODE, code + b"".join(v.to_bytes(4, "little") for v in literals))
    m.write_memory(handler, bytes.fromhex("7047"))
    m.write_memory(m.config.flash.base + 4 * 14, (handler | 1).to_bytes(4, "little"))  # PendSV
    m.set_reg("pc", SRAM_CODE)
    r = m.run(max_cycles=10**6)
    assert r.reason == StopReason.SLEEP_FOREVER
    assert r.message.startswith(f"sleep-on-exit (SCR.SLEEPONEXIT) before returning to 0x{SRAM_CODE + 0x12:08x}")
    assert "WFI" not in r.message


def test_primask_holds_an_interrupt_until_cleared(make_machine, elf):
    """SRAM code: ``cpsid i`` (b672); ``nop`` x2 (bf00); ``cpsie i`` (b662); ``b .`` (e7fe)."""
    m = make_machine()
    m.load(elf("bench"))
    m.write_memory(SRAM_CODE, bytes.fromhex("72b600bf00bf62b6fee7"))
    m.set_reg("pc", SRAM_CODE)
    m.step()  # cpsid i
    m.nvic.set_pending(14)
    m.step()
    assert m.active_exception() == 0
    m.step()
    m.step()  # cpsie i
    m.step()  # the pending PendSV is taken now
    assert m.active_exception() == 14


def test_interrupt_is_taken_right_after_cpsie_even_mid_block(make_machine, elf):
    # cpsie_probe: PendSV pended under PRIMASK, then ``cpsie i; cpsid i`` in one block.
    m = make_machine()
    m.load(elf("timing"))
    m.run(until="main", max_cycles=10**5)
    m.call("cpsie_probe")
    assert m.reg("r0") == 1


def test_a_cpsie_with_nothing_pending_costs_the_native_hook_no_call(make_machine, elf):
    """pkasim's engine (patch 31): a block that may unmask interrupts asks for the
    native hook at the next block start only while an exception is pending. SRAM
    code: ``cpsid i``; ``cpsie i``; ``subs r0, #1``; ``bne`` back, 1,000 times; ``b .``.
    In counted mode ``state.blocks`` counts the hook's calls."""
    if not engine.patched():
        pytest.skip("the stock wheel calls the block hook at every block")
    m = make_machine()
    m.load(elf("bench"))
    m.write_memory(SRAM_CODE, bytes.fromhex("72b662b60138fbd1fee7"))
    m.set_reg("pc", SRAM_CODE)
    m.set_reg("r0", 1000)
    m.add_breakpoint(SRAM_CODE + 8)
    before = m.core.state.blocks
    r = m.run(max_cycles=10**6)
    assert r.reason == StopReason.BREAKPOINT and m.reg("r0") == 0
    assert m.core.state.blocks - before < 20


def test_an_exception_pended_under_primask_is_taken_at_the_cpsie_of_a_loop(make_machine, elf):
    """The same loop with PendSV pended while PRIMASK is set: a run takes it right
    after the first ``cpsie i``, before ``subs``, on either engine."""
    m = make_machine()
    m.load(elf("bench"))
    m.write_memory(SRAM_CODE, bytes.fromhex("72b662b60138fbd1fee7"))
    m.set_reg("pc", SRAM_CODE)
    m.set_reg("r0", 3)
    m.step()  # cpsid i
    m.nvic.set_pending(14)
    m.add_breakpoint(int.from_bytes(m.read_memory(14 * 4, 4), "little") & ~1)  # PendSV's handler
    r = m.run(max_cycles=10**6)
    assert r.reason == StopReason.BREAKPOINT
    assert m.active_exception() == 14
    assert m.reg("r0") == 3
