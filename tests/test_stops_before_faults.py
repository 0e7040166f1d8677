"""A breakpoint or watchpoint before an instruction that faults (one the core cannot
run, an unaligned access) stops the run as it would anywhere else, as a core's
breakpoint unit and DWT would; going on then takes the fault. pkasim finds these faults
before the block runs (cyclehook.c: STOP_UNDEF, and STOP_ALIGN on the stock wheel) and
then runs the block up to the faulting instruction: the stops on the way are kept.
Each engine runs in its own process (the engine is chosen once per process)."""

from __future__ import annotations

import pytest
from stock_util import on_engine, per_engine

CHILD = r"""
import io, json, sys
from pkasim.chip.config import load_config
from pkasim.core.machine import Machine
from pkasim.native import engine

CODE, DATA = 0x20002000, 0x20001000

def machine(code, **regs):
    m = Machine(load_config(), stdout=io.BytesIO(), stderr=io.BytesIO())
    m.load(sys.argv[1])
    m.write_memory(CODE, bytes.fromhex(code))
    m.set_reg("pc", CODE)
    for name, value in regs.items():
        m.set_reg(name, value)
    return m

def run(m):
    r = m.run(max_cycles=10**6)
    return [r.reason.value, m.reg("pc"), m.cycles]

out = {"engine": engine.selected()}
UDF = "086000bffedefee7"    # str r0, [r1]; nop; udf #254; b .
UNALIGNED = "00bf0860fee7"  # nop; str r0, [r1] (r1 odd); b .
for name, code, regs, stop in (("udf", UDF, {"r1": DATA}, None),
                               ("udf-bp-on-it", UDF, {"r1": DATA}, ("bp", CODE + 4)),
                               ("udf-bp-before", UDF, {"r1": DATA}, ("bp", CODE + 2)),
                               ("udf-watch-before", UDF, {"r1": DATA}, ("watch", DATA)),
                               ("unaligned", UNALIGNED, {"r1": DATA + 1}, None),
                               ("unaligned-bp-on-it", UNALIGNED, {"r1": DATA + 1}, ("bp", CODE + 2))):
    m = machine(code, **regs)
    if stop and stop[0] == "bp":
        m.add_breakpoint(stop[1])
    elif stop:
        m.add_watchpoint(stop[1], 4, "write")
    first = run(m)
    out[name] = [first, run(m)] if stop else [first]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def results(elf):
    """The child's results on each engine, run once per engine."""
    return per_engine(CHILD, elf("bench"), timeout=120)


@pytest.fixture(params=["stock", "patched"])
def got(request, results):
    return on_engine(results, request.param)


CODE = 0x20002000
LOCKUP_PC = 0x8C2  # the image's HardFault handler: BKPT, which locks up with no debugger


def test_a_breakpoint_on_an_undefined_instruction_stops_before_it_and_going_on_faults(got):
    plain = got["udf"][0]
    assert plain[:2] == ["lockup", LOCKUP_PC]
    assert got["udf-bp-on-it"] == [["breakpoint", CODE + 4, 3], plain]


def test_a_breakpoint_earlier_in_the_block_of_an_undefined_instruction_stops_there(got):
    assert got["udf-bp-before"] == [["breakpoint", CODE + 2, 2], got["udf"][0]]


def test_a_watchpoint_hit_in_the_block_of_an_undefined_instruction_stops_the_run(got):
    assert got["udf-watch-before"] == [["watchpoint", CODE + 2, 2], got["udf"][0]]


def test_a_breakpoint_on_an_unaligned_store_stops_before_it_and_going_on_faults(got):
    plain = got["unaligned"][0]
    assert plain[:2] == ["lockup", LOCKUP_PC]
    assert got["unaligned-bp-on-it"] == [["breakpoint", CODE + 2, 1], plain]
