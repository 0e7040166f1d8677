"""The observation API (pkasim.core.observe) and the profiler built on it: what a run did,
in order, without changing what it does."""

from __future__ import annotations

import pytest

from pkasim.analysis.profiler import Profiler, StreamProfiler
from pkasim.core.machine import StopReason
from pkasim.core.observe import Kind, Observer

SRAM_CODE = 0x20002000
RSA2048 = {"rsa_input_key": "rsa2048-key.bin", "rsa_input_msg": "rsa2048-msg.bin", "rsa_expected": "rsa2048-sig.bin"}


class Recorder(Observer):
    def __init__(self) -> None:
        self.batches: list[list] = []
        self.closed = False

    def start(self, info) -> None:
        self.info = info

    def events(self, batch) -> None:
        self.batches.append(list(batch))

    def close(self) -> None:
        self.closed = True

    @property
    def all(self) -> list:
        return [e for b in self.batches for e in b]


def profiled(make_machine, path, loads=None):
    m = make_machine()
    m.load(path)
    for sym, data in (loads or {}).items():
        m.write_symbol(sym, data)
    p = Profiler()
    m.observe(p)
    return m, p, m.run(max_cycles=10**10)


def rsa2048_inputs(repo):
    return {sym: (repo / "traces" / "inputs" / f).read_bytes() for sym, f in RSA2048.items()}


@pytest.mark.parametrize("image", ["hello", "systick", "nested", "fault", "compute", "timing"])
def test_exclusive_cycles_and_instructions_sum_to_the_run_totals(make_machine, elf, image):
    m, p, r = profiled(make_machine, elf(image))
    rows = p.rows()
    assert sum(row.exclusive_cycles for row in rows) == r.cycles
    assert sum(row.instructions for row in rows) == r.instructions
    assert sum(weight for _, weight in p.folded()) == r.cycles


@pytest.mark.parametrize("image", ["systick", "nested", "fault", "timing", "compute"])
def test_observing_a_run_leaves_its_counts_unchanged(make_machine, elf, image):
    plain = make_machine()
    plain.load(elf(image))
    expected = plain.run(max_cycles=10**9)
    _, _, observed = profiled(make_machine, elf(image))
    assert (observed.cycles, observed.instructions, observed.sleep_cycles, observed.exit_code) == \
           (expected.cycles, expected.instructions, expected.sleep_cycles, expected.exit_code)


def test_event_cycles_never_decrease_and_the_run_ends_with_stop(make_machine, elf):
    m = make_machine()
    m.load(elf("systick"))
    rec = Recorder()
    m.observe(rec)
    r = m.run()
    events = rec.all
    assert all(a.cycle <= b.cycle for a, b in zip(events, events[1:]))
    assert events[-1].kind == Kind.STOP and events[-1].cycle == r.cycles and events[-1].insns == r.instructions


def test_calls_and_returns_pair_up_with_the_native_stack_depth(make_machine, elf):
    m = make_machine()
    m.load(elf("nested"))
    rec = Recorder()
    m.observe(rec)
    m.run()
    depth = 0
    for e in rec.all:
        depth += {Kind.CALL: 1, Kind.RETURN: -1, Kind.EXC_ENTRY: 1, Kind.EXC_RETURN: -1}.get(Kind(e.kind), 0)
        assert depth == e.depth
    names = [rec.info.functions[e.a] for e in rec.all if e.kind == Kind.CALL]
    assert names[:2] == ["Reset_Handler", "main"]
    assert names.count("sh_puts") == 3


def test_exceptions_are_frames_named_after_their_handlers(make_machine, elf):
    m, p, r = profiled(make_machine, elf("nested"))
    rows = {row.name: row for row in p.rows()}
    assert rows["IRQ1_Handler"].calls == 2  # once nested in IRQ0_Handler, once from main
    assert "Reset_Handler;main;[exception IRQ0];IRQ0_Handler;[exception IRQ1];IRQ1_Handler" in dict(p.folded())
    # the entry's 16 cycles count in the handler: its time covers entry to return
    assert rows["SVC_Handler"].exclusive_cycles >= m.config.core.exception_entry_cycles


def test_sleep_goes_to_the_function_that_slept_as_wait_cycles(make_machine, elf):
    m, p, r = profiled(make_machine, elf("systick"))
    assert r.sleep_cycles > 0
    waiting = [row for row in p.rows() if row.wait_cycles]
    assert sum(row.wait_cycles for row in waiting) == r.sleep_cycles
    assert all(row.exclusive_cycles >= row.wait_cycles for row in waiting)


def test_pka_busy_goes_to_the_function_that_started_each_operation(make_machine, elf, repo):
    m, p, r = profiled(make_machine, elf("xrsa_opt"), rsa2048_inputs(repo))
    assert r.exit_code == 0
    pka = m.peripherals["pka"]
    rows = {row.name: row for row in p.rows()}
    assert sum(row.pka_busy_cycles for row in rows.values()) == pka.busy_total
    assert sum(row.pka_operations for row in rows.values()) == sum(pka.operations.values())
    assert rows["rsa_private"].pka_busy_inclusive_cycles == pka.busy_total
    assert rows["pka_run"].pka_busy_cycles > 0.9 * pka.busy_total


def test_spinning_on_a_busy_pka_counts_as_waiting(make_machine, elf):
    """A MONTMUL started from SRAM code, then a poll of SR.BUSY until it ends:

        (r0 = PKA base, LEN 64, operands as test_pka's WFI program)
        movs r1,#1; lsls r1,r1,#8; adds r1,#3; str r1,[r0]   CR = MONTMUL|START|EN
    loop: ldr r4,[r0,#4]; lsls r5,r4,#15; bmi loop           poll BUSY (bit 16)
        exit(0)
    """
    program = ("b672 2040 0600 2101 0409 1840 2140 60c1 2100 6101 2101 0209 6141 004a 6182 1852 61c2"
               " 2101 0209 3103 6001 6844 03e5 d4fc 2018 2102 0409 3126 beab")
    m = make_machine()
    m.load(elf("bench"))
    pka = m.peripherals["pka"]
    pka.poke(0x000, 3, 64)
    pka.poke(0x100, 5, 64)
    pka.poke(0x200, (1 << 2048) - 159, 64)
    m.write_memory(SRAM_CODE, b"".join(int(hw, 16).to_bytes(2, "little") for hw in program.split()))
    m.set_reg("pc", SRAM_CODE)
    p = Profiler()
    m.observe(p)
    r = m.run(max_cycles=10**6)
    assert r.reason == StopReason.EXIT and r.exit_code == 0 and r.sleep_cycles == 0
    (row,) = [row for row in p.rows() if row.wait_cycles]
    busy = pka.cycles_for("montmul", 64)
    assert 0.95 * busy < row.wait_cycles <= busy


def test_an_observer_attached_mid_run_sees_the_rest_exactly(make_machine, elf):
    m = make_machine()
    m.load(elf("systick"))
    m.run(until="main")
    start = m.cycles
    p = Profiler()
    m.observe(p)
    r = m.run()
    assert p.total_cycles == r.cycles - start
    assert sum(row.exclusive_cycles for row in p.rows()) == r.cycles - start


def test_unobserve_closes_the_observer_and_removes_the_native_hook(make_machine, elf):
    m = make_machine()
    m.load(elf("systick"))
    rec = Recorder()
    m.observe(rec)
    m.run(until="main")
    m.unobserve(rec)
    assert rec.closed and m.core.obs is None
    seen = len(rec.all)
    r = m.run()
    assert len(rec.all) == seen and r.exit_code == 0


def test_observing_needs_a_loaded_image(make_machine):
    from pkasim.base.errors import UsageError

    with pytest.raises(UsageError, match="load an image"):
        make_machine().observe(Profiler())


def test_every_call_shape_is_recognised(make_machine, elf):
    """firmware/images/calls.c: BL, a tail call (B into another function), BLX through
    a register, returns by BX LR and POP {pc}, and a recursion."""
    m = make_machine()
    m.load(elf("calls"))
    rec = Recorder()
    m.observe(rec)
    p = Profiler()
    m.observe(p)
    r = m.run()
    assert r.exit_code == 0
    name = rec.info.functions.__getitem__
    tails = [(name(e.b), name(e.a)) for e in rec.all if e.kind == Kind.TAILCALL]
    assert tails == [("calls_tail", "calls_leaf")]
    rows = {row.name: row for row in p.rows()}
    assert rows["calls_leaf"].calls == 4  # by the tail call, BL, BLX and BL from main
    # each call of calls_leaf: ADDS 1 + BX LR 3 (DDI0432C table 3-1)
    assert rows["calls_leaf"].exclusive_cycles == 4 * 4
    # calls_nested: PUSH {r4, lr} 3, BL 4, ADDS 1, POP {r4, pc} 5; its callee's 4 inclusive
    assert (rows["calls_nested"].exclusive_cycles, rows["calls_nested"].inclusive_cycles) == (13, 17)
    # the tail call's callee is a sibling, not a child: calls_tail is ADDS 1 + B 3
    assert rows["calls_tail"].inclusive_cycles == rows["calls_tail"].exclusive_cycles == 4
    # a recursion counts its time once in its inclusive cycles
    assert rows["calls_fib"].calls == 5 and rows["calls_fib"].inclusive_cycles == rows["calls_fib"].exclusive_cycles
    assert "Reset_Handler;main;calls_fib;calls_fib;calls_fib" in dict(p.folded())


@pytest.mark.parametrize("image", ["systick", "nested", "calls"])
def test_a_full_event_buffer_is_drained_mid_run_without_changing_the_run(make_machine, elf, monkeypatch, image):
    import pkasim.core.observe

    plain = make_machine()
    plain.load(elf(image))
    expected = plain.run()
    monkeypatch.setattr(pkasim.core.observe, "SOFT_LIMIT", 4)  # a stop to hand events over every 4 events
    m = make_machine()
    m.load(elf(image))
    rec = Recorder()
    m.observe(rec)
    r = m.run()
    assert (r.cycles, r.instructions, r.exit_code) == (expected.cycles, expected.instructions, expected.exit_code)
    assert len(rec.batches) > len(rec.all) // 8
    p = StreamProfiler()
    p.events(rec.all)
    assert p.total_cycles == r.cycles


@pytest.mark.parametrize("image", ["systick", "nested", "calls", "timing", "compute"])
def test_the_native_call_tree_equals_the_one_built_from_the_events(make_machine, elf, image):
    m = make_machine()
    m.load(elf(image))
    native, stream = Profiler(), StreamProfiler()
    m.observe(native)
    m.observe(stream)
    m.run()
    assert native.rows() == stream.rows()
    assert native.folded() == stream.folded()


def test_the_native_call_tree_equals_the_streamed_one_with_the_pka_busy(make_machine, elf, repo):
    m = make_machine()
    m.load(elf("xrsa_opt"))
    for sym, data in rsa2048_inputs(repo).items():
        m.write_symbol(sym, data)
    native, stream = Profiler(), StreamProfiler()
    m.observe(native)
    m.observe(stream)
    assert m.run().exit_code == 0
    assert native.rows() == stream.rows() and native.folded() == stream.folded()
