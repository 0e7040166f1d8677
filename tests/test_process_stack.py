"""Interrupts taken while thread mode runs on the process stack (CONTROL.SPSEL = 1):
the core stacks the frame on PSP, runs the handler on MSP and returns to PSP
(ARMv6-M ARM B1.5.6-B1.5.8). None of the bundled images switches stacks, so the test
switches systick.elf's main to PSP at its entry, with MSP 2 KiB below for the handlers.
The native exception model leaves out special-register writes that change nothing on
pkasim's engine; the stock wheel keeps them all: both must agree."""

from __future__ import annotations

import io

import pytest
from stock_util import on_stock_wheel

from pkasim.chip.config import load_config
from pkasim.core.machine import Machine, StopReason

HANDLER_STACK = 0x800  # MSP this far below main's stack

RUN = r"""
import io, json, sys
from pkasim import Machine, load_config
from pkasim.native import engine
m = Machine(load_config(), stdout=io.BytesIO(), stderr=io.BytesIO())
m.load(sys.argv[1])
m.run(until="main", max_cycles=10**6)
sp = m.reg("sp")
m.core.set_reg("psp", sp)
m.core.set_reg("msp", sp - int(sys.argv[2]))
m.core.set_reg("control", 2)
r = m.run(max_cycles=10**9)
print(json.dumps({"engine": engine.selected(), "reason": r.reason.value, "exit": r.exit_code, "cycles": m.cycles,
                  "control": m.reg("control"), "msp": m.reg("msp"), "psp": m.reg("psp"), "sp": sp}))
"""


@pytest.fixture(scope="module")
def on_psp(elf) -> dict:
    m = Machine(load_config(), stdout=io.BytesIO(), stderr=io.BytesIO())
    m.load(elf("systick"))
    m.run(until="main", max_cycles=10**6)
    sp = m.reg("sp")
    m.core.set_reg("psp", sp)
    m.core.set_reg("msp", sp - HANDLER_STACK)
    m.core.set_reg("control", 2)
    r = m.run(max_cycles=10**9)
    return {"reason": r.reason, "exit": r.exit_code, "cycles": m.cycles, "out": m.stdout.getvalue().decode(),
            "exceptions": dict(m.exceptions_taken), "control": m.reg("control"), "msp": m.reg("msp"), "sp": sp}


def test_interrupts_taken_on_the_process_stack_return_to_it(on_psp):
    assert on_psp["reason"] == StopReason.EXIT and on_psp["exit"] == 0
    assert on_psp["exceptions"] == {"SysTick": 10} and "SysTick interrupts: 10" in on_psp["out"]
    assert on_psp["control"] == 2  # still on PSP after every return


def test_handlers_on_the_main_stack_leave_it_where_it_was(on_psp):
    assert on_psp["msp"] == on_psp["sp"] - HANDLER_STACK


def test_the_stock_wheel_counts_interrupts_on_the_process_stack_alike(on_psp, elf):
    stock = on_stock_wheel(RUN, elf("systick"), HANDLER_STACK)
    assert (stock["reason"], stock["exit"], stock["cycles"], stock["control"], stock["msp"]) == \
        ("exit", 0, on_psp["cycles"], 2, on_psp["msp"])
