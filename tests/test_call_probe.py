"""A call probe (Machine.probe_call) marks a function's first instruction and the address
it returns to without stopping the run: the counts it keeps there are those a run that
stops there (``until`` the entry, then a breakpoint at the return address) reads, on
both engines, and measure_call (what every bench job reports) takes one run. A call
whose return cannot be awaited (an exception handler: LR holds EXC_RETURN) stops the
run at its entry instead, exactly where ``until`` would. Each engine runs in its own
process (the engine is chosen once per process)."""

from __future__ import annotations

import pytest
from stock_util import on_engine, per_engine

from pkasim.base.errors import PkasimError
from pkasim.core.measure import measure_call
from pkasim.core.results import ProbeState, StopReason

CHILD = r"""
import io, json, sys
from pkasim.chip.config import load_config
from pkasim.core.machine import Machine
from pkasim.native import engine

def machine(path):
    m = Machine(load_config(), stdout=io.BytesIO(), stderr=io.BytesIO())
    m.load(path)
    return m

def by_stops(path, fn):
    m = machine(path)
    m.run(until=fn, max_cycles=10**8)
    c0, i0 = m.cycles, m.instructions
    ret = m.reg("lr") & ~1
    m.add_breakpoint(ret)
    m.run(max_cycles=10**8)
    c1, i1 = m.cycles, m.instructions
    m.remove_breakpoint(ret)
    end = m.run(max_cycles=10**8)
    return [c0, i0, c1, i1, end.reason.value, end.exit_code, m.cycles, m.stdout.getvalue().decode()]

def by_probe(path, fn):
    m = machine(path)
    marks = []
    m.probe_call(fn, lambda k: marks.append([k, m.cycles, m.instructions]))
    end = m.run(max_cycles=10**8)
    p = m.call_probe()
    m.end_probe()
    return {"counts": [p.entry_cycles, p.entry_instructions, p.return_cycles, p.return_instructions,
                       end.reason.value, end.exit_code, m.cycles, m.stdout.getvalue().decode()],
            "state": p.state.value, "marks": marks}

def handler(path):
    a = machine(path)
    a.probe_call("SysTick_Handler")
    first = a.run(max_cycles=10**8)
    state = a.call_probe().state.value
    a.end_probe()
    b = machine(path)
    until = b.run(until="SysTick_Handler", max_cycles=10**8)
    return {"probe": [first.reason.value, state, a.pc, a.cycles, a.instructions],
            "until": [until.reason.value, b.pc, b.cycles, b.instructions],
            "after": [a.run(max_cycles=10**8).exit_code, a.cycles, b.run(max_cycles=10**8).exit_code, b.cycles]}

hello, systick = sys.argv[1], sys.argv[2]
out = {"engine": engine.selected()}
for fn in ("sh_write", "sh_putc", "sh_puts"):
    out[fn] = {"stops": by_stops(hello, fn), "probe": by_probe(hello, fn)}
out["handler"] = handler(systick)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def results(elf):
    """The child's results on each engine, run once per engine."""
    return per_engine(CHILD, elf("hello"), elf("systick"), timeout=300)


@pytest.fixture(params=["stock", "patched"])
def got(request, results):
    return on_engine(results, request.param)


@pytest.mark.parametrize("fn", ["sh_write", "sh_putc", "sh_puts"])
def test_a_probe_keeps_the_counts_a_run_stopping_at_the_entry_and_the_return_reads(got, fn):
    assert got[fn]["probe"]["state"] == "done"
    assert got[fn]["probe"]["counts"] == got[fn]["stops"]


def test_the_first_of_two_calls_is_the_one_measured(got):
    entry_cycles, _, return_cycles, _, *_ = got["sh_putc"]["probe"]["counts"]
    assert 0 < entry_cycles < return_cycles
    assert got["sh_putc"]["probe"]["counts"][4:6] == ["exit", 0]


def test_the_mark_callback_sees_the_machine_as_it_is_at_each_mark(got):
    probe = got["sh_write"]["probe"]
    c0, i0, c1, i1 = probe["counts"][:4]
    assert probe["marks"] == [[0, c0, i0], [1, c1, i1]]


def test_a_handler_entry_stops_the_run_where_until_would(got):
    reason, state, *where = got["handler"]["probe"]
    assert (reason, state) == ("until", "stopped")
    assert where == got["handler"]["until"][1:]
    after = got["handler"]["after"]
    assert after[0] == after[2] == 0 and after[1] == after[3]


def test_measure_call_measures_in_one_run(make_machine, elf, monkeypatch):
    m = make_machine()
    m.load(elf("hello"))
    runs = []
    inner = m.run
    monkeypatch.setattr(m, "run", lambda *a, **k: runs.append(k) or inner(*a, **k))
    call = measure_call(m, "sh_write", "hello.elf", 10**8)
    assert len(runs) == 1
    assert call.end.reason == StopReason.EXIT and call.cycles > 0 and call.instructions > 0


def test_measure_call_of_a_function_never_called_says_so(make_machine, elf):
    m = make_machine()
    m.load(elf("hello"))
    with pytest.raises(PkasimError, match="never reached Default_Handler"):
        measure_call(m, "Default_Handler", "hello.elf", 10**8)


def test_measure_call_of_a_function_that_never_returns_says_so(make_machine, elf):
    m = make_machine()
    m.load(elf("hello"))
    with pytest.raises(PkasimError, match="sh_exit did not return"):
        measure_call(m, "sh_exit", "hello.elf", 10**8)


def test_a_probe_left_waiting_says_so_and_ending_it_leaves_no_probe(make_machine, elf):
    m = make_machine()
    m.load(elf("hello"))
    m.probe_call("Default_Handler")
    m.run(max_cycles=10**8)
    assert m.call_probe().state == ProbeState.WAITING
    m.end_probe()
    assert m.core.state.probe_at == 0xFFFFFFFF
    with pytest.raises(Exception, match="no call probe"):
        m.call_probe()


def test_an_error_in_the_mark_callback_is_raised_by_call_probe(make_machine, elf):
    m = make_machine()
    m.load(elf("hello"))

    def boom(_: int) -> None:
        raise ValueError("counter unreadable")

    m.probe_call("sh_write", boom)
    assert m.run(max_cycles=10**8).reason == StopReason.EXIT
    with pytest.raises(ValueError, match="counter unreadable"):
        m.call_probe()
    m.end_probe()


def test_a_step_onto_a_probed_handler_entry_still_executes_one_instruction(make_machine, elf):
    m = make_machine()
    m.load(elf("systick"))
    handler = m.image.symbol("SysTick_Handler").address & ~1
    for _ in range(20000):
        if m.pc == handler:
            break
        m.step()
    assert m.pc == handler
    m.probe_call("SysTick_Handler")
    before = m.instructions
    assert m.step().reason == StopReason.STEP
    assert m.instructions == before + 1 and m.pc != handler
    assert m.call_probe().state == ProbeState.STOPPED
    m.end_probe()
